"""Task success (TSR) and deformation-aware success (DSR) over episode records, as tables and plots.

:func:`aggregate` groups :class:`~simroll.rollout.records.EpisodeRecord` rows by (task, object,
variation) and adds one ``"all"`` row per task, each a :class:`GroupSummary` with TSR, DSR and the
violation rate (the fraction of task successes whose peak deformation broke tolerance) as
:class:`~simroll.scoring.stats.Rate` intervals, peak-deformation statistics, compute per policy call
and the number of episodes that raised. Every episode counts, errored ones included with whatever
``success`` they recorded (normally false), so a crash never flatters a rate; ``errors`` says how
many there were. :func:`tolerance_sweep` gives DSR as a function of a tolerance multiplier ``k``
(success and peak <= ``k`` * tolerance) per task and object, :func:`plot_tolerance_sweep` draws
it, and :func:`to_markdown` renders summaries as a table with intervals like ``0.82 [0.69, 0.91]``.
By construction DSR <= TSR, and DSR == TSR when tolerance is infinite (for finite peaks).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simroll.io import atomic_path
from simroll.rollout.records import EpisodeRecord
from simroll.scoring.stats import INTERVAL_METHODS, Rate, binomial_rate

ALL = "all"


@dataclass(frozen=True)
class GroupSummary:
    """Scores of one (task, object, variation) group; object and variation are ``"all"`` in the
    per-task row."""

    task: str
    object: str
    variation: str
    episodes: int
    tsr: Rate
    dsr: Rate
    violation: Rate
    peak_deformation_mean: float
    peak_deformation_median: float
    peak_deformation_p95: float
    compute_per_call_s: float
    errors: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "object": self.object,
            "variation": self.variation,
            "episodes": self.episodes,
            "tsr": self.tsr.to_dict(),
            "dsr": self.dsr.to_dict(),
            "violation": self.violation.to_dict(),
            "peak_deformation_mean": self.peak_deformation_mean,
            "peak_deformation_median": self.peak_deformation_median,
            "peak_deformation_p95": self.peak_deformation_p95,
            "compute_per_call_s": self.compute_per_call_s,
            "errors": self.errors,
        }


def aggregate(
    records: Iterable[EpisodeRecord], method: str = "beta", alpha: float = 0.05
) -> list[GroupSummary]:
    """One :class:`GroupSummary` per (task, object, variation), then an ``"all"`` row per task.

    Rows are sorted by task, then object and variation, each task's ``"all"`` row last. Records
    must come from one policy and hold each spec once: mixing policies or counting an episode
    twice would silently blend or inflate the rates, so both raise ``ValueError``.
    """
    records = _checked(records)
    if method not in INTERVAL_METHODS:
        raise ValueError(
            f"unknown interval method {method!r}; expected one of {list(INTERVAL_METHODS)}"
        )
    groups: dict[tuple[str, str, str], list[EpisodeRecord]] = defaultdict(list)
    by_task: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for record in records:
        spec = record.spec
        groups[(spec.task, spec.object, spec.variation)].append(record)
        by_task[spec.task].append(record)
    summaries = []
    for task in sorted(by_task):
        for key in sorted(k for k in groups if k[0] == task):
            summaries.append(summarise(*key, groups[key], method, alpha))
        summaries.append(summarise(task, ALL, ALL, by_task[task], method, alpha))
    return summaries


def summarise(
    task: str,
    object_name: str,
    variation: str,
    records: Sequence[EpisodeRecord],
    method: str = "beta",
    alpha: float = 0.05,
) -> GroupSummary:
    """Scores of ``records`` as one group, labelled ``(task, object_name, variation)``."""
    successes = sum(record.success for record in records)
    dsr_successes = sum(record.dsr_success for record in records)
    # A success with unknown (nan) deformation is a violation too: it was not shown to be safe.
    violations = successes - dsr_successes
    peaks = np.array([record.peak_deformation for record in records], dtype=float)
    peaks = peaks[~np.isnan(peaks)]
    calls = sum(record.policy_calls for record in records)
    compute_s = sum(record.policy_compute_s for record in records)
    return GroupSummary(
        task=task,
        object=object_name,
        variation=variation,
        episodes=len(records),
        tsr=binomial_rate(successes, len(records), method, alpha),
        dsr=binomial_rate(dsr_successes, len(records), method, alpha),
        violation=binomial_rate(violations, successes, method, alpha),
        peak_deformation_mean=float(np.mean(peaks)) if peaks.size else math.nan,
        peak_deformation_median=float(np.median(peaks)) if peaks.size else math.nan,
        peak_deformation_p95=float(np.percentile(peaks, 95)) if peaks.size else math.nan,
        compute_per_call_s=compute_s / calls if calls else math.nan,
        errors=sum(record.error is not None for record in records),
    )


def tolerance_sweep(records: Iterable[EpisodeRecord], multipliers: Sequence[float]) -> dict:
    """DSR as a function of the tolerance multiplier ``k``, per (task, object), variations pooled.

    An episode counts at ``k`` when it succeeded and its peak deformation is <= ``k`` times its
    own tolerance (``k = 0`` allows no deformation, even for an infinite tolerance). Returns a
    JSON-ready dict::

        {"multipliers": [k, ...],
         "groups": {"<task>/<object>": {"task", "object", "episodes", "tsr", "dsr": [per k]}}}
    """
    records = _checked(records)
    multipliers = [float(k) for k in multipliers]
    for k in multipliers:
        if not k >= 0.0:  # also rejects nan
            raise ValueError(f"tolerance multipliers must be >= 0, got {k}")
    groups: dict[tuple[str, str], list[EpisodeRecord]] = defaultdict(list)
    for record in records:
        groups[(record.spec.task, record.spec.object)].append(record)
    sweep: dict[str, Any] = {"multipliers": multipliers, "groups": {}}
    for task, object_name in sorted(groups):
        members = groups[(task, object_name)]
        dsr = [
            sum(
                record.success and record.peak_deformation <= _scaled(record.tolerance, k)
                for record in members
            )
            / len(members)
            for k in multipliers
        ]
        sweep["groups"][f"{task}/{object_name}"] = {
            "task": task,
            "object": object_name,
            "episodes": len(members),
            "tsr": sum(record.success for record in members) / len(members),
            "dsr": dsr,
        }
    return sweep


def _scaled(tolerance: float, multiplier: float) -> float:
    # 0 * inf is nan, which would fail every comparison; zero tolerance is what k = 0 means.
    return 0.0 if multiplier == 0.0 else tolerance * multiplier


def to_markdown(summaries: Sequence[GroupSummary], digits: int = 2) -> str:
    """A Markdown table of ``summaries``, rates as ``0.82 [0.69, 0.91]``, with a caption line."""
    header = [
        "task",
        "object",
        "variation",
        "episodes",
        "TSR",
        "DSR",
        "violation",
        "peak mean",
        "peak median",
        "peak p95",
        "compute/call (ms)",
        "errors",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for summary in summaries:
        cells = [
            summary.task,
            summary.object,
            summary.variation,
            str(summary.episodes),
            summary.tsr.format(digits),
            summary.dsr.format(digits),
            summary.violation.format(digits),
            _number(summary.peak_deformation_mean),
            _number(summary.peak_deformation_median),
            _number(summary.peak_deformation_p95),
            _number(summary.compute_per_call_s * 1e3, ".2f"),
            str(summary.errors),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if summaries:
        rate = summaries[0].tsr
        confidence = f"{100 * (1 - rate.alpha):g}%"
        lines.append("")
        lines.append(
            f"Intervals: {confidence} {INTERVAL_METHODS[rate.method]}. Violation: share of task "
            "successes whose peak deformation exceeded tolerance."
        )
    return "\n".join(lines) + "\n"


def _number(value: float, spec: str = ".3g") -> str:
    return "n/a" if math.isnan(value) else format(value, spec)


def plot_tolerance_sweep(sweep: dict, path: str | Path) -> Path:
    """Draw ``sweep`` (from :func:`tolerance_sweep`) to ``path``: DSR against the multiplier, one
    line per task/object, its TSR as a dashed horizontal asymptote of the same colour."""
    # Imported here because only plotting needs matplotlib. Figure + Agg canvas, not pyplot:
    # no global figure state and no display needed.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    multipliers = np.asarray(sweep["multipliers"], dtype=float)
    finite = np.isfinite(multipliers)  # an infinite k has no place on the x axis
    figure = Figure(figsize=(6.4, 4.2), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for index, (label, group) in enumerate(sweep["groups"].items()):
        color = f"C{index % 10}"
        dsr = np.asarray(group["dsr"], dtype=float)
        axes.plot(multipliers[finite], dsr[finite], color=color, marker="o", ms=3, label=label)
        axes.axhline(group["tsr"], color=color, linestyle="--", linewidth=1)
    axes.axvline(1.0, color="0.6", linestyle=":", linewidth=1)
    axes.set_xlabel("tolerance multiplier k (success and peak deformation <= k * tolerance)")
    axes.set_ylabel("DSR (dashed: TSR)")
    axes.set_ylim(-0.02, 1.02)
    if sweep["groups"]:
        axes.legend(fontsize="small")
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=120)
    return Path(path)


def _checked(records: Iterable[EpisodeRecord]) -> list[EpisodeRecord]:
    records = list(records)
    policies = sorted({(record.policy_id, record.policy_config_hash) for record in records})
    if len(policies) > 1:
        raise ValueError(
            f"records come from {len(policies)} policies {policies}; score one policy at a time"
        )
    seen: set[str] = set()
    for record in records:
        if record.spec.key in seen:
            raise ValueError(f"episode {record.spec.key} appears more than once in the records")
        seen.add(record.spec.key)
    return records
