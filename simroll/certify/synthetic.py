"""Synthetic paired outcomes with known true risks, and every selector vectorised over repetitions.

Validation needs thousands of certification runs with known ground truth, far more than
simulation allows. :func:`sample_outcomes` draws ``reps`` independent calibration sets of ``n``
paired Bernoulli outcomes: the reference succeeds with probability ``p_reference``; on a
reference-solved spec candidate ``j`` fails with probability ``risk_j / p_reference`` (joint
risk) or ``risk_j`` (conditional risk); on a reference-failed spec it succeeds with probability
``rescue``. With ``coupling="nested"`` one uniform per spec decides every candidate, so a spec
that breaks a mild candidate breaks every more aggressive one too (as for real accelerations); with
``"independent"`` candidates fail independently.

The selectors mirror the real procedures exactly and are checked against them in the tests:
:func:`fixed_selection` (:mod:`simroll.certify.care`), :func:`sequential_selection`
(:mod:`simroll.certify.sequential`, with ``batch=1``), plus two without a family-wise guarantee for
comparison: :func:`naive_selection` (certify when the empirical risk is at most ``epsilon``) and
:func:`uncorrected_selection` (a per-candidate Clopper-Pearson test at level ``delta`` with no
multiplicity correction). Each returns which candidates are certified and tested, and how many
rollouts the design used, per repetition.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from simroll.certify.care import binomial_p_value, choose_cheapest, family_decisions, family_levels
from simroll.certify.sequential import EProcessTest, log_e_value
from simroll.certify.settings import RISKS, CareSettings, CertifyError

COUPLINGS = ("nested", "independent")


@dataclass(frozen=True)
class SyntheticSetting:
    """One validation setting: the guarantee asked for and the candidates' true risks."""

    name: str
    epsilon: float
    delta: float
    n: int
    risks: tuple[float, ...]  # true risk per candidate, in test order
    speedups: tuple[float, ...]  # per candidate; the reference has speedup 1
    risk: str = "joint"
    method: str = "fixed_sequence"
    p_reference: float = 0.8
    rescue: float = 0.2
    coupling: str = "nested"

    def __post_init__(self) -> None:
        _ = self.settings  # validates epsilon, delta, risk and method
        if len(self.risks) != len(self.speedups) or not self.risks:
            raise CertifyError(
                f"{self.name}: need one speedup per candidate risk, got {len(self.risks)} "
                f"risks and {len(self.speedups)} speedups"
            )
        if self.coupling not in COUPLINGS:
            raise CertifyError(f"coupling must be one of {list(COUPLINGS)}, got {self.coupling!r}")
        limit = self.p_reference if self.risk == "joint" else 1.0
        if not all(0.0 <= r <= limit for r in self.risks):
            raise CertifyError(f"{self.name}: {self.risk} risks must be in [0, {limit}]")

    @property
    def settings(self) -> CareSettings:
        return CareSettings(self.epsilon, self.delta, self.risk, "tsr", self.method)

    @property
    def m(self) -> int:
        return len(self.risks)

    @property
    def costs(self) -> np.ndarray:
        return 1.0 / np.asarray(self.speedups, dtype=float)

    @property
    def bad(self) -> np.ndarray:
        """Which candidates truly break the budget (risk > epsilon)."""
        return np.asarray(self.risks) > self.epsilon

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sample_outcomes(
    setting: SyntheticSetting, reps: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``(reference (reps, n), candidates (reps, m, n))`` success arrays."""
    n, m = setting.n, setting.m
    reference = rng.random((reps, n)) < setting.p_reference
    risks = np.asarray(setting.risks, dtype=float)
    fail_if_solved = risks / setting.p_reference if setting.risk == "joint" else risks
    shape = (reps, 1, n) if setting.coupling == "nested" else (reps, m, n)
    u, v = rng.random(shape), rng.random(shape)
    candidates = np.where(
        reference[:, None, :], u >= fail_if_solved[None, :, None], v < setting.rescue
    )
    return reference, candidates


def _losses_and_trials(reference, candidates, risk):
    losses = reference[:, None, :] & ~candidates
    if risk == "joint":
        trials = np.full(losses.shape[:2], reference.shape[-1])
    else:
        trials = np.broadcast_to(reference.sum(-1)[:, None], losses.shape[:2])
    return losses, trials


def _design_rollouts(reference, candidates, tested, trials, risk):
    """Rollouts of the fixed design with skipping (failure-triggered / reference-first)."""
    n = reference.shape[-1]
    if risk == "joint":
        used_reference = (~candidates & tested[..., None]).any(1).sum(-1)
        return used_reference + tested.sum(-1) * n
    return n + (tested * trials).sum(-1)


def fixed_selection(reference, candidates, settings: CareSettings) -> dict[str, np.ndarray]:
    """Fixed-n CARE per repetition: certified, tested (reps, m) and rollouts (reps,)."""
    losses, trials = _losses_and_trials(reference, candidates, settings.risk)
    level = family_levels(candidates.shape[1], settings.delta, settings.method)
    p_values = binomial_p_value(losses.sum(-1), trials, settings.epsilon)
    certified, tested = family_decisions(p_values <= level, settings.method)
    rollouts = _design_rollouts(reference, candidates, tested, trials, settings.risk)
    return {"certified": certified, "tested": tested, "rollouts": rollouts}


def naive_selection(reference, candidates, settings: CareSettings) -> dict[str, np.ndarray]:
    """Certify every candidate whose empirical risk is at most ``epsilon`` (no guarantee)."""
    losses, trials = _losses_and_trials(reference, candidates, settings.risk)
    k = losses.sum(-1)
    certified = k <= settings.epsilon * trials
    return {"certified": certified, "tested": np.ones_like(certified)}


def uncorrected_selection(reference, candidates, settings: CareSettings) -> dict[str, np.ndarray]:
    """Per-candidate exact test at level ``delta``, no family-wise correction."""
    losses, trials = _losses_and_trials(reference, candidates, settings.risk)
    certified = binomial_p_value(losses.sum(-1), trials, settings.epsilon) <= settings.delta
    return {"certified": certified, "tested": np.ones_like(certified)}


def sequential_selection(reference, candidates, settings: CareSettings) -> dict[str, np.ndarray]:
    """Sequential CARE (``batch=1``, ``max_specs = n``) per repetition.

    Returns certified, tested, trials (reps, m: trials each candidate's test used) and rollouts
    (reps,), counted exactly as :func:`simroll.certify.sequential.run_sequential` counts them.
    """
    if settings.risk not in RISKS:
        raise CertifyError(f"risk must be one of {list(RISKS)}, got {settings.risk!r}")
    reps, m, n = candidates.shape
    level = family_levels(m, settings.delta, settings.method)
    test = EProcessTest(settings.epsilon, level, n)
    losses = reference[:, None, :] & ~candidates
    if settings.risk == "joint":
        stream = losses
        available = np.full((reps, 1), n)
    else:  # trials are the reference-solved specs, in spec order
        order = np.argsort(~reference, axis=-1, kind="stable")
        stream = np.take_along_axis(losses, order[:, None, :], axis=-1)
        available = reference.sum(-1)[:, None]
    k = np.cumsum(stream, axis=-1, dtype=np.int32)
    t = np.arange(1, n + 1)
    counts = np.arange(n + 1)[:, None]
    table = log_e_value(counts, t[None, :], settings.epsilon)
    mirror = log_e_value(counts, t[None, :], 1 - settings.epsilon)  # indexed by non-losses
    certified_at = table[k, t - 1] >= test.threshold
    futile_at = (mirror[np.maximum(t - k, 0), t - 1] >= test.threshold) | (
        k > test.max_certifiable_losses
    )
    valid = t[None, None, :] <= available[..., None]
    decided = (certified_at | futile_at) & valid
    last = t[None, None, :] == np.minimum(available, n)[..., None]
    stop = decided | last
    first = stop.argmax(-1)
    hit = np.take_along_axis(stop, first[..., None], -1)[..., 0]
    decided_first = np.take_along_axis(decided, first[..., None], -1)[..., 0]
    trials = np.where(hit, first + 1, 0)
    passed = np.take_along_axis(certified_at & valid, first[..., None], -1)[..., 0] & hit
    if test.max_certifiable_losses < 0:  # futile before the first rollout
        trials[:] = 0
        passed[:] = False
        decided_first[:] = True
    certified, tested = family_decisions(passed, settings.method)
    used = tested * trials
    if settings.risk == "joint":
        seen = np.arange(n)[None, None, :] < used[..., None]
        used_reference = (~candidates & seen).any(1).sum(-1)
    else:
        # An undecided candidate that used every solved spec asked for one more, scanning all n.
        exhausted = (tested & ~decided_first & (trials < n)).any(-1)
        deepest = used.max(-1)
        position = (np.cumsum(reference, -1) < deepest[:, None]).sum(-1) + 1
        used_reference = np.where(exhausted, n, np.where(deepest > 0, position, 0))
    return {
        "certified": certified,
        "tested": tested,
        "trials": trials,
        "rollouts": used_reference + used.sum(-1),
    }


def deployed(selection: dict[str, np.ndarray], setting: SyntheticSetting) -> np.ndarray:
    """Index of the deployed candidate per repetition (``-1``: the reference)."""
    return choose_cheapest(selection["certified"], setting.costs, 1.0)


def summarize(selection: dict[str, np.ndarray], setting: SyntheticSetting) -> dict[str, Any]:
    """Violation counts and power of one selector over the repetitions."""
    chosen = deployed(selection, setting)
    bad = np.append(setting.bad, False)  # index -1 is the reference: never bad
    speedups = np.append(np.asarray(setting.speedups, dtype=float), 1.0)
    certified_bad = (selection["certified"] & setting.bad[None, :]).any(-1)
    good = np.flatnonzero(~setting.bad)
    best = int(good[np.argmax(np.asarray(setting.speedups)[good])]) if good.size else -1
    out = {
        "reps": int(chosen.shape[0]),
        "violations": int(bad[chosen].sum()),
        "family_errors": int(certified_bad.sum()),
        "mean_speedup": float(speedups[chosen].mean()),
        "best_safe_deployed": float((chosen == best).mean()),
        "reference_deployed": float((chosen == -1).mean()),
    }
    if "rollouts" in selection:
        out["mean_rollouts"] = float(selection["rollouts"].mean())
    return out
