"""CARE, fixed-n form: certify accelerated candidates against a reference with paired rollouts.

**Setting.** A reference policy and candidates ``1..m`` (in a *test order* fixed before any
calibration outcome is seen; list the mildest acceleration first) are run on the same calibration
:class:`~simroll.rollout.records.EpisodeSpec` list (same task, object, variation and seed, hence
the same initial state). On spec ``i`` let ``R_i`` be the reference's success and ``C_ij``
candidate ``j``'s (task success, or DSR success, chosen once for the whole certification). An
*acceleration-induced failure* is ``L_ij = R_i and not C_ij``. Two risks are supported:

* ``joint``: ``r_j = P(R = 1, C_j = 0)``; trials are all ``n`` specs, losses ``k_j = sum_i L_ij``.
* ``conditional``: ``q_j = P(C_j = 0 | R = 1)``, one minus the fraction of reference-solved
  episodes the candidate preserves; trials are the ``n_R`` specs the reference solved, losses as
  above. Given the reference outcomes, those ``n_R`` losses are i.i.d. Bernoulli(``q_j``), so the
  test below is valid conditionally on ``n_R`` and hence also unconditionally.

**Per-candidate test.** ``H_j: risk_j > epsilon`` ("candidate j breaks too much") is tested with
the exact binomial p-value ``p_j = P(Binomial(trials_j, epsilon) <= k_j)`` (1 when
``trials_j = 0``). Under ``H_j`` the loss count is stochastically larger than
``Binomial(trials_j, epsilon)``, so ``P(p_j <= a) <= a``. Rejecting at level ``a`` is the same
as the one-sided Clopper-Pearson upper bound ``U_a(k_j, trials_j) <= epsilon``, and ``U`` is what
the certificate reports.

**Family-wise selection (Learn-then-Test).** A candidate is *certified* when its ``H_j`` is
rejected by a family-wise-error-controlling procedure at level ``delta``:

* ``fixed_sequence`` (default): test ``H_1, H_2, ...`` in the test order, each at level
  ``delta``, and stop at the first one not rejected; every candidate before it is certified.
  Valid for any dependence between candidates, because rejecting a true ``H_j`` first requires
  rejecting the first true null in the order, which happens with probability ``<= delta``. The
  order must not depend on the calibration outcomes (it is the configured order).
* ``bonferroni``: test every ``H_j`` at level ``delta / m``; no order needed, less power.

Then ``P(some certified candidate has risk > epsilon) <= delta``. The deployed policy is the
cheapest (lowest measured compute per control step) among the reference and the certified
candidates; the reference has zero acceleration-induced risk by definition, so *with probability
at least 1 - delta the deployed policy's risk is at most epsilon*. When nothing is certified the
reference is deployed.

**Assumptions.** The calibration specs are i.i.d. draws from the deployment distribution (here:
task, object and variation drawn uniformly from the configured lists and the env's randomised
initial state from the spec seed), and each rollout's outcome depends only on its spec and policy
(simroll episodes are deterministic given the seed). Nothing is assumed about how candidates relate
to each other or to the reference; compute costs only pick among certified candidates and do not
enter the guarantee.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from simroll.certify.paired import LossStream, OutcomeLedger, PairedSource
from simroll.certify.settings import METHODS, CareSettings, CertifyError


def binomial_p_value(losses: ArrayLike, trials: ArrayLike, epsilon: float) -> np.ndarray:
    """Exact p-value for ``H: risk > epsilon``: ``P(Binomial(trials, epsilon) <= losses)``."""
    losses, trials = np.asarray(losses), np.asarray(trials)
    return np.where(trials > 0, stats.binom.cdf(losses, trials, epsilon), 1.0)


def clopper_pearson_upper(losses: ArrayLike, trials: ArrayLike, alpha: ArrayLike) -> np.ndarray:
    """One-sided ``1 - alpha`` Clopper-Pearson upper bound on a binomial rate (1 if no trials)."""
    losses, trials, alpha = np.asarray(losses), np.asarray(trials), np.asarray(alpha)
    with np.errstate(invalid="ignore"):
        bound = stats.beta.ppf(1.0 - alpha, losses + 1, np.maximum(trials - losses, 1))
    return np.where(losses < trials, bound, 1.0)


def min_trials_to_certify(epsilon: float, alpha: float) -> int:
    """Fewest trials with which zero losses certify ``risk <= epsilon`` at level ``alpha``."""
    return math.ceil(math.log(alpha) / math.log1p(-epsilon) - 1e-12)


def family_levels(m: int, delta: float, method: str) -> float:
    """The level each candidate's test runs at: ``delta`` (fixed sequence) or ``delta / m``."""
    if method == "fixed_sequence":
        return delta
    if method == "bonferroni":
        return delta / m
    raise CertifyError(f"method must be one of {list(METHODS)}, got {method!r}")


def family_decisions(passed: ArrayLike, method: str) -> tuple[np.ndarray, np.ndarray]:
    """``(certified, tested)`` from each candidate's level-``family_levels`` test outcome.

    ``passed[..., j]`` says whether candidate ``j`` (in test order, last axis) rejected its null
    at its family level; leading axes are independent repetitions.
    """
    passed = np.asarray(passed, dtype=bool)
    if method == "bonferroni":
        return passed.copy(), np.ones_like(passed)
    if method == "fixed_sequence":
        certified = np.logical_and.accumulate(passed, axis=-1)
        tested = np.concatenate([np.ones_like(certified[..., :1]), certified[..., :-1]], axis=-1)
        return certified, tested
    raise CertifyError(f"method must be one of {list(METHODS)}, got {method!r}")


def choose_cheapest(
    certified: ArrayLike, costs: ArrayLike, reference_cost: float | ArrayLike = np.inf
) -> np.ndarray:
    """Index of the cheapest certified candidate (last axis), ``-1`` for the reference.

    The reference is kept when nothing is certified or when it is at least as cheap as every
    certified candidate; ties between candidates go to the earlier one in test order.
    """
    certified = np.asarray(certified, dtype=bool)
    costs = np.broadcast_to(np.asarray(costs, dtype=float), certified.shape)
    masked = np.where(certified, costs, np.inf)
    best = masked.argmin(axis=-1)
    best_cost = np.take_along_axis(masked, best[..., None], axis=-1)[..., 0]
    return np.where(best_cost < np.asarray(reference_cost, dtype=float), best, -1)


@dataclass(frozen=True)
class CandidateDecision:
    """What the certification concluded about one candidate."""

    name: str
    position: int  # place in the test order, from 0
    tested: bool
    certified: bool
    status: str  # certified | not certified | futile | budget exhausted | not tested (...)
    losses: int
    trials: int
    level: float  # the level this candidate's test ran at
    upper_bound: float  # 1 - level upper confidence bound on the risk (nan if not tested)
    statistic: str  # "p_value" (fixed n) or "e_value" (sequential)
    statistic_value: float
    episodes: int  # candidate rollouts used

    @property
    def empirical_risk(self) -> float:
        return self.losses / self.trials if self.trials else math.nan

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["empirical_risk"] = self.empirical_risk
        return data


def decide_fixed(
    names: list[str],
    losses: ArrayLike,
    trials: ArrayLike,
    settings: CareSettings,
    episodes: ArrayLike | None = None,
) -> list[CandidateDecision]:
    """Fixed-n CARE decisions for candidates in test order from their loss and trial counts."""
    if not names:
        raise CertifyError("no candidates to certify: give at least one accelerated policy")
    losses = np.asarray(losses, dtype=int)
    trials = np.asarray(trials, dtype=int)
    if losses.shape != (len(names),) or trials.shape != (len(names),):
        raise CertifyError(
            f"need one loss and trial count per candidate ({len(names)}), "
            f"got shapes {losses.shape} and {trials.shape}"
        )
    if np.any(losses < 0) or np.any(losses > trials):
        raise CertifyError(f"loss counts must be in [0, trials], got {losses} of {trials}")
    level = family_levels(len(names), settings.delta, settings.method)
    p_values = binomial_p_value(losses, trials, settings.epsilon)
    certified, tested = family_decisions(p_values <= level, settings.method)
    bounds = clopper_pearson_upper(losses, trials, level)
    episodes = trials if episodes is None else np.asarray(episodes, dtype=int)
    decisions = []
    for j, name in enumerate(names):
        if certified[j]:
            status = "certified"
        elif tested[j]:
            status = "not certified"
        else:
            stopper = next(i for i in range(j) if not certified[i])
            status = f"not tested (fixed sequence stopped at {names[stopper]!r})"
        decisions.append(
            CandidateDecision(
                name=name,
                position=j,
                tested=bool(tested[j]),
                certified=bool(certified[j]),
                status=status,
                losses=int(losses[j]),
                trials=int(trials[j]),
                level=level,
                upper_bound=float(bounds[j]) if tested[j] else math.nan,
                statistic="p_value",
                statistic_value=float(p_values[j]) if tested[j] else math.nan,
                episodes=int(episodes[j]),
            )
        )
    return decisions


@dataclass(frozen=True)
class Certification:
    """The statistical outcome of a certification run (either design), before costs."""

    settings: CareSettings
    design: str  # "fixed" or "sequential"
    decisions: list[CandidateDecision]
    n_specs: int  # calibration specs available (fixed: n; sequential: the maximum)
    rollouts: dict[str, int]  # rollouts used per policy, "reference" included

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.decisions]

    @property
    def total_rollouts(self) -> int:
        return sum(self.rollouts.values())

    @property
    def exhaustive_rollouts(self) -> int:
        """Every candidate and the reference on every calibration spec."""
        return (len(self.decisions) + 1) * self.n_specs

    def choose(self, costs: Sequence[float], reference_cost: float) -> int:
        """Index of the deployed candidate (cheapest certified), ``-1`` for the reference."""
        certified = [d.certified for d in self.decisions]
        return int(choose_cheapest(certified, costs, reference_cost))


def run_fixed(
    names: Sequence[str],
    source: PairedSource,
    settings: CareSettings,
    n_specs: int,
) -> Certification:
    """Fixed-n CARE on ``n_specs`` calibration specs, asking ``source`` only for needed rollouts.

    Joint risk: candidates on every spec, the reference where some candidate failed. Conditional
    risk: the reference on every spec, candidates on the specs it solved. With the fixed sequence
    a candidate after the first uncertified one is never run (it could not be certified).
    """
    names = list(names)
    if not names:
        raise CertifyError("no candidates to certify: give at least one accelerated policy")
    if len(set(names)) != len(names):
        raise CertifyError(f"candidate names must be unique, got {names}")
    if not isinstance(n_specs, int) or n_specs < 1:
        raise CertifyError(f"the calibration set needs >= 1 spec, got {n_specs!r}")
    ledger = OutcomeLedger(source)
    level = family_levels(len(names), settings.delta, settings.method)
    losses = np.zeros(len(names), dtype=int)
    trials = np.zeros(len(names), dtype=int)
    for j, name in enumerate(names):
        stream = LossStream(ledger, name, settings.risk, n_specs, batch=n_specs)
        outcome = stream.take()
        losses[j], trials[j] = sum(outcome), len(outcome)
        passed = binomial_p_value(losses[j], trials[j], settings.epsilon) <= level
        if settings.method == "fixed_sequence" and not passed:
            break
    episodes = [ledger.rollouts.get(name, 0) for name in names]
    decisions = decide_fixed(names, losses, trials, settings, episodes)
    return Certification(settings, "fixed", decisions, n_specs, ledger.rollouts)
