"""CARE, sequential form: certify candidates episode by episode with an anytime-valid test.

**Test.** For candidate ``j`` the acceleration-induced failures ``L_1, L_2, ...`` (see
:mod:`simroll.certify.care`; for the conditional risk the stream runs over reference-solved specs
only) are i.i.d. Bernoulli(``r``) when the calibration specs are i.i.d. ``H_j: r >= epsilon`` is
tested with the mixture likelihood-ratio e-process

    E_t = integral_0^1 prod_{s<=t} u^L_s ((1 - u epsilon) / (1 - epsilon))^(1 - L_s) du
        = integral_0^1 u^k ((1 - u epsilon) / (1 - epsilon))^(t - k) du,   k = sum_{s<=t} L_s,

a uniform mixture over alternatives ``p = u epsilon`` in ``[0, epsilon]``. Each factor has
conditional mean ``r p/epsilon + (1-r)(1-p)/(1-epsilon) <= 1`` whenever ``r >= epsilon``, so every
mixture component, and the mixture, is a nonnegative supermartingale under ``H_j``; by Ville's
inequality ``P(exists t: E_t >= 1/alpha) <= alpha``. In closed form
``E_t = B(k+1, t-k+1) I_epsilon(k+1, t-k+1) / (epsilon^(k+1) (1-epsilon)^(t-k))``
(``I`` the regularised incomplete beta function), so it depends on ``(k, t)`` only.

**Stopping.** A candidate is *certified* at the first ``t <= n_max`` with ``E_t >= 1/alpha``.
It *clearly fails* at the first ``t`` where the mirror e-process (the same test for
``risk <= epsilon``, on non-losses against ``1 - epsilon``) reaches ``1/alpha``: anytime-valid
evidence that the candidate breaks the budget. ``E_t`` grows with ``t`` at fixed ``k`` and falls
with ``k``, so once ``k`` exceeds the largest loss count that could still certify at ``n_max`` the
candidate is stopped as *futile*; it is also stopped when the ``n_max`` calibration specs (or,
for the conditional risk, the reference-solved ones among them) run out. Stopping without a
certification never makes a certification more likely, so it cannot hurt validity (it costs a
little power: a candidate within budget clearly fails with probability at most ``alpha``). The
reported bound is the anytime-valid upper confidence bound ``sup{e : E_t(e) < 1/alpha}`` at the
stopping time (``E_t(e)`` increases with ``e``).

**Family-wise.** As in the fixed-n form: ``fixed_sequence`` tests candidates one after another
in the configured order, each at level ``delta``, and stops at the first that is not certified;
``bonferroni`` runs all candidates side by side, each at level ``delta / m``. Either way
``P(some certified candidate has risk > epsilon) <= delta``.

**Rollouts.** Outcomes come through one :class:`~simroll.certify.paired.OutcomeLedger`, so each
(policy, spec) rollout happens at most once and reference outcomes are shared: for the joint risk
the reference runs only on specs where some candidate failed (failure-triggered), for the
conditional risk candidates run only on reference-solved specs. The certification reports the
rollouts used against the exhaustive design's ``(m + 1) n_max``. With ``batch > 1`` rollouts are
requested ``batch`` at a time (so parallel backends have work), the test still looks at them one by
one in spec order, and rollouts past the stopping point count as used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special

from simroll.certify.care import (
    CandidateDecision,
    Certification,
    family_decisions,
    family_levels,
)
from simroll.certify.paired import LossStream, OutcomeLedger, PairedSource
from simroll.certify.settings import CareSettings, CertifyError, check_unit_interval


def log_e_value(losses: ArrayLike, trials: ArrayLike, epsilon: float) -> np.ndarray:
    """``log E_t`` of the mixture e-process for ``H: risk >= epsilon`` (vectorised over counts)."""
    k = np.asarray(losses, dtype=float)
    t = np.asarray(trials, dtype=float)
    possible = (k >= 0) & (k <= t)
    k, t = np.where(possible, k, 0.0), np.where(possible, t, 0.0)
    with np.errstate(divide="ignore"):
        value = (
            special.betaln(k + 1, t - k + 1)
            + np.log(special.betainc(k + 1, t - k + 1, epsilon))
            - (k + 1) * math.log(epsilon)
            - (t - k) * math.log1p(-epsilon)
        )
    return np.where(possible, value, -np.inf)  # more losses than trials: never certifies


def e_value_upper_bound(losses: int, trials: int, alpha: float) -> float:
    """Anytime-valid ``1 - alpha`` upper confidence bound: ``sup{e: E_t(e) < 1/alpha}``."""
    threshold = math.log(1.0 / alpha)
    if trials <= losses:  # E_t = 1 / (k + 1) for every e: nothing can be excluded
        return 1.0

    def gap(e: float) -> float:
        return float(log_e_value(losses, trials, e)) - threshold

    low, high = 1e-12, 1.0 - 1e-12
    if gap(high) < 0:
        return 1.0
    if gap(low) >= 0:  # pragma: no cover - E_t(0+) = 1/(k+1) < 1/alpha
        return 0.0
    return float(optimize.brentq(gap, low, high, xtol=1e-10))


@dataclass(frozen=True)
class EProcessTest:
    """The sequential test of one candidate: level ``alpha``, at most ``max_trials`` trials."""

    epsilon: float
    alpha: float
    max_trials: int

    def __post_init__(self) -> None:
        check_unit_interval("epsilon", self.epsilon)
        check_unit_interval("alpha", self.alpha)
        if not isinstance(self.max_trials, int) or self.max_trials < 1:
            raise CertifyError(f"max_trials must be an integer >= 1, got {self.max_trials!r}")

    @property
    def threshold(self) -> float:
        """``log(1 / alpha)``: certify once ``log E_t`` reaches it."""
        return math.log(1.0 / self.alpha)

    @cached_property
    def max_certifiable_losses(self) -> int:
        """The most losses that can still certify within ``max_trials`` (-1: none can)."""
        losses = np.arange(self.max_trials + 1)
        ok = log_e_value(losses, self.max_trials, self.epsilon) >= self.threshold
        return int(losses[ok].max()) if ok.any() else -1

    @cached_property
    def min_trials(self) -> int:
        """Fewest loss-free trials that certify (``max_trials + 1`` when even those cannot)."""
        trials = np.arange(1, self.max_trials + 1)
        ok = log_e_value(0, trials, self.epsilon) >= self.threshold
        return int(trials[ok].min()) if ok.any() else self.max_trials + 1

    def status(self, losses: int, trials: int) -> str:
        """``certified``, ``clearly fails``, ``futile``, ``budget exhausted`` or ``continue``."""
        if trials > 0 and log_e_value(losses, trials, self.epsilon) >= self.threshold:
            return "certified"
        if trials > 0 and log_e_value(trials - losses, trials, 1 - self.epsilon) >= self.threshold:
            return "clearly fails"
        if losses > self.max_certifiable_losses:
            return "futile"
        if trials >= self.max_trials:
            return "budget exhausted"
        return "continue"


class _Candidate:
    """Running state of one candidate's sequential test."""

    def __init__(self, stream: LossStream, test: EProcessTest) -> None:
        self.stream, self.test = stream, test
        self.losses = self.trials = 0
        self.status = test.status(0, 0)

    @property
    def active(self) -> bool:
        return self.status == "continue"

    def advance(self) -> None:
        """Take the next batch and update the test one trial at a time, stopping at a decision."""
        outcome = self.stream.take()
        if not outcome:
            self.status = "calibration specs exhausted"
            return
        for loss in outcome:
            self.losses += int(loss)
            self.trials += 1
            self.status = self.test.status(self.losses, self.trials)
            if not self.active:
                return


def run_sequential(
    names: Sequence[str],
    source: PairedSource,
    settings: CareSettings,
    max_specs: int,
    batch: int = 1,
) -> Certification:
    """Sequential CARE on at most ``max_specs`` calibration specs (see the module docstring)."""
    names = list(names)
    if not names:
        raise CertifyError("no candidates to certify: give at least one accelerated policy")
    if len(set(names)) != len(names):
        raise CertifyError(f"candidate names must be unique, got {names}")
    if not isinstance(max_specs, int) or max_specs < 1:
        raise CertifyError(f"the calibration set needs >= 1 spec, got {max_specs!r}")
    if not isinstance(batch, int) or batch < 1:
        raise CertifyError(f"batch must be an integer >= 1, got {batch!r}")
    ledger = OutcomeLedger(source)
    level = family_levels(len(names), settings.delta, settings.method)
    test = EProcessTest(settings.epsilon, level, max_specs)
    states: dict[str, _Candidate] = {}

    def start(name: str) -> _Candidate:
        stream = LossStream(ledger, name, settings.risk, max_specs, batch)
        states[name] = _Candidate(stream, test)
        return states[name]

    if settings.method == "fixed_sequence":
        for name in names:
            state = start(name)
            while state.active:
                state.advance()
            if state.status != "certified":
                break
    else:
        running = [start(name) for name in names]
        while any(state.active for state in running):
            for state in running:
                if state.active:
                    state.advance()
    passed = [name in states and states[name].status == "certified" for name in names]
    certified, tested = family_decisions(passed, settings.method)
    decisions = []
    for j, name in enumerate(names):
        state = states.get(name)
        if state is None:
            stopper = next(n for n in names[:j] if states[n].status != "certified")
            status = f"not tested (fixed sequence stopped at {stopper!r})"
            losses = trials = 0
            bound = e_value = math.nan
        else:
            status, losses, trials = state.status, state.losses, state.trials
            bound = e_value_upper_bound(losses, trials, level)
            e_value = float(np.exp(log_e_value(losses, trials, settings.epsilon)))
        decisions.append(
            CandidateDecision(
                name=name,
                position=j,
                tested=bool(tested[j]),
                certified=bool(certified[j]),
                status=status,
                losses=losses,
                trials=trials,
                level=level,
                upper_bound=bound,
                statistic="e_value",
                statistic_value=e_value,
                episodes=ledger.rollouts.get(name, 0),
            )
        )
    return Certification(settings, "sequential", decisions, max_specs, ledger.rollouts)
