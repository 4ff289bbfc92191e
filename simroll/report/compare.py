"""Paired differences between two eval runs on the episodes they share.

Two runs of ``simroll eval`` on the same spec list start every episode from identical initial
conditions (seeds are derived per task and index, not per policy), so episodes are paired by
their spec key. For each group (task, object, variation; then each task, then everything) and for
task success and DSR, :func:`compare_runs` counts the pairs where only one run succeeded (the
discordant pairs, which carry all the information about the difference), gives the exact McNemar
p-value (statsmodels) and the share of discordant pairs won by run B with a Clopper-Pearson
interval; for peak deformation, the mean paired difference with a t interval (scipy). Episodes
in only one run are counted, never silently dropped.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from simroll.report.runs import EvalRun, Problem
from simroll.rollout.records import EpisodeRecord
from simroll.scoring.dsr import ALL
from simroll.scoring.stats import Rate, binomial_rate

Pair = tuple[EpisodeRecord, EpisodeRecord]


@dataclass(frozen=True)
class PairedOutcome:
    """One success measure over paired episodes: rates of A and B and the discordant pairs."""

    pairs: int
    rate_a: float
    rate_b: float
    a_only: int  # A succeeded, B failed
    b_only: int  # B succeeded, A failed
    p_value: float  # exact McNemar: two-sided binomial test on the discordant pairs
    b_share: Rate  # share of discordant pairs that B won

    @property
    def difference(self) -> float:
        """Rate of B minus rate of A (= (b_only - a_only) / pairs)."""
        return self.rate_b - self.rate_a


@dataclass(frozen=True)
class PairedGroup:
    """Paired comparison of one (task, object, variation) group, or a pooled row."""

    task: str
    object: str
    variation: str
    pairs: int
    tsr: PairedOutcome
    dsr: PairedOutcome
    peak_a_mean: float
    peak_b_mean: float
    peak_difference_mean: float  # mean of B - A over pairs with finite peaks
    peak_difference_low: float
    peak_difference_high: float


@dataclass
class Comparison:
    """Two eval runs paired on shared spec keys."""

    a: EvalRun
    b: EvalRun
    pairs: list[Pair] = field(default_factory=list)
    only_a: list[EpisodeRecord] = field(default_factory=list)
    only_b: list[EpisodeRecord] = field(default_factory=list)
    groups: list[PairedGroup] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def compare_runs(a: EvalRun, b: EvalRun, alpha: float = 0.05) -> Comparison:
    """Pair ``a`` and ``b`` by spec key and compute the paired differences (see the module)."""
    comparison = Comparison(a=a, b=b)
    by_key_b = {record.spec.key: record for record in b.records}
    keys_a = {record.spec.key for record in a.records}
    for record in a.records:
        match = by_key_b.get(record.spec.key)
        if match is None:
            comparison.only_a.append(record)
        else:
            comparison.pairs.append((record, match))
    comparison.only_b = [record for record in b.records if record.spec.key not in keys_a]
    if not comparison.pairs:
        comparison.problems.append(
            Problem(
                "the runs share no episode (spec key: suite/task/object/variation/index/seed); "
                "there is nothing to pair: were they run with different seeds or tasks?"
            )
        )
    for label, only in (("A", comparison.only_a), ("B", comparison.only_b)):
        if only:
            comparison.problems.append(
                Problem(
                    f"{len(only)} episode(s) of run {label} have no partner in the other run; "
                    "they are left out of every paired difference",
                    tuple(record.spec.key for record in only[:50]),
                    severity="warning",
                )
            )
    tolerance_changed = [
        ra.spec.key for ra, rb in comparison.pairs if not _same(ra.tolerance, rb.tolerance)
    ]
    if tolerance_changed:
        comparison.problems.append(
            Problem(
                f"{len(tolerance_changed)} pair(s) were judged against different tolerances "
                "(objects recalibrated between the runs?); their DSR is not comparable",
                tuple(tolerance_changed[:50]),
                severity="warning",
            )
        )
    comparison.groups = paired_groups(comparison.pairs, alpha)
    return comparison


def paired_groups(pairs: Sequence[Pair], alpha: float = 0.05) -> list[PairedGroup]:
    """One :class:`PairedGroup` per (task, object, variation), per task, and one overall."""
    groups: dict[tuple[str, str, str], list[Pair]] = defaultdict(list)
    by_task: dict[str, list[Pair]] = defaultdict(list)
    for pair in pairs:
        spec = pair[0].spec
        groups[(spec.task, spec.object, spec.variation)].append(pair)
        by_task[spec.task].append(pair)
    rows = []
    for task in sorted(by_task):
        for key in sorted(k for k in groups if k[0] == task):
            rows.append(_paired_group(*key, groups[key], alpha))
        rows.append(_paired_group(task, ALL, ALL, by_task[task], alpha))
    if len(by_task) > 1:
        rows.append(_paired_group(ALL, ALL, ALL, list(pairs), alpha))
    return rows


def _paired_group(
    task: str, object_name: str, variation: str, pairs: Sequence[Pair], alpha: float
) -> PairedGroup:
    peaks = np.array([(a.peak_deformation, b.peak_deformation) for a, b in pairs], dtype=float)
    finite = peaks[np.isfinite(peaks).all(axis=1)] if len(peaks) else peaks
    low = high = math.nan
    if len(finite) >= 2:
        differences = finite[:, 1] - finite[:, 0]
        if np.ptp(differences) > 0:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                interval = stats.ttest_rel(finite[:, 1], finite[:, 0]).confidence_interval(
                    1 - alpha
                )
            low, high = float(interval.low), float(interval.high)
        else:  # every pair differs by the same amount: the interval is that point
            low = high = float(differences[0])
    return PairedGroup(
        task=task,
        object=object_name,
        variation=variation,
        pairs=len(pairs),
        tsr=paired_outcome([(a.success, b.success) for a, b in pairs], alpha),
        dsr=paired_outcome([(a.dsr_success, b.dsr_success) for a, b in pairs], alpha),
        peak_a_mean=float(finite[:, 0].mean()) if len(finite) else math.nan,
        peak_b_mean=float(finite[:, 1].mean()) if len(finite) else math.nan,
        peak_difference_mean=float((finite[:, 1] - finite[:, 0]).mean())
        if len(finite)
        else math.nan,
        peak_difference_low=low,
        peak_difference_high=high,
    )


def paired_outcome(outcomes: Sequence[tuple[bool, bool]], alpha: float = 0.05) -> PairedOutcome:
    """Rates, discordant counts, exact McNemar p-value and B's share of the discordant pairs."""
    both = sum(bool(a) and bool(b) for a, b in outcomes)
    a_only = sum(bool(a) and not bool(b) for a, b in outcomes)
    b_only = sum(bool(b) and not bool(a) for a, b in outcomes)
    neither = len(outcomes) - both - a_only - b_only
    n = len(outcomes)
    if a_only + b_only:
        p_value = float(mcnemar([[both, a_only], [b_only, neither]], exact=True).pvalue)
    else:
        p_value = 1.0  # no discordant pair: no evidence of any difference
    return PairedOutcome(
        pairs=n,
        rate_a=(both + a_only) / n if n else math.nan,
        rate_b=(both + b_only) / n if n else math.nan,
        a_only=a_only,
        b_only=b_only,
        p_value=p_value,
        b_share=binomial_rate(b_only, a_only + b_only, "beta", alpha),
    )


def _same(x: float, y: float) -> bool:
    return x == y or (math.isnan(x) and math.isnan(y))
