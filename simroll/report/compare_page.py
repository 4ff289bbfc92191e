"""The comparison page: two eval runs side by side on the episodes they share.

:func:`compare_context` turns a :class:`~simroll.report.compare.Comparison` (the paired
statistics) into the data of ``templates/compare.html.j2``: each run's header and provenance,
the paired differences per group, the paired peak scatter as inline SVG, one row per shared
episode (pairs whose outcome differs first) and the two runs' videos of an episode side by side.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from simroll.report.compare import Comparison
from simroll.report.figures import paired_peak_scatter
from simroll.report.render import (
    inline_figure,
    outcome,
    problem_views,
    provenance_view,
    ratio,
    relative,
)
from simroll.report.runs import EvalRun, Problem
from simroll.rollout.records import EpisodeRecord
from simroll.scoring.dsr import ALL


def compare_context(comparison: Comparison, page_dir: Path) -> dict[str, Any]:
    problems = list(comparison.problems)
    runs = []
    for label, run in (("A", comparison.a), ("B", comparison.b)):
        problems += [Problem(f"run {label}: {p.what}", p.details, p.severity) for p in run.problems]
        runs.append(
            {
                "label": label,
                "name": run.run_dir.resolve().name,
                "run_dir": str(run.run_dir.resolve()),
                "policy": " / ".join(run.policy_ids) or "unknown policy",
                "provenance": provenance_view(run.provenance, run.config, run.records),
                "valid": len(run.records),
                "expected": None if run.expected is None else len(run.expected),
                "missing": len(run.missing),
            }
        )
    labels = (runs[0]["policy"], runs[1]["policy"])
    figure = None
    if comparison.pairs:
        figure = inline_figure(
            lambda path: paired_peak_scatter(comparison.pairs, labels, path), problems
        )
    rows = []
    for a, b in comparison.pairs:
        tags = []
        if a.success != b.success:
            tags.append("tsr-differs")
        if a.dsr_success != b.dsr_success:
            tags.append("dsr-differs")
        if (a.success, a.dsr_success) > (b.success, b.dsr_success):
            tags.append("a-better")
        elif (a.success, a.dsr_success) < (b.success, b.dsr_success):
            tags.append("b-better")
        rows.append(
            {
                "key": a.spec.key,
                "spec": a.spec,
                "a": _side(a, comparison.a, page_dir),
                "b": _side(b, comparison.b, page_dir),
                "peak_difference": _difference(b.peak_deformation, a.peak_deformation),
                "tags": " ".join(tags),
                "differs": bool(tags),
            }
        )
    rows.sort(key=lambda row: (not row["differs"], row["key"]))
    video_pairs = [row for row in rows if row["a"]["video"] or row["b"]["video"]]
    return {
        "title": f"{labels[0]} (A) vs {labels[1]} (B)",
        "runs": runs,
        "problems": problem_views(problems),
        "counts": {
            "pairs": len(comparison.pairs),
            "only_a": len(comparison.only_a),
            "only_b": len(comparison.only_b),
        },
        "groups": comparison.groups,
        "figure": figure,
        "pairs": rows,
        "video_pairs": video_pairs,
        "all_label": ALL,
    }


def _side(record: EpisodeRecord, run: EvalRun, page_dir: Path) -> dict[str, Any]:
    _, label, css = outcome(record)
    video = run.videos.get(record.spec.key)
    return {
        "outcome": label,
        "outcome_class": css,
        "success": record.success,
        "dsr_success": record.dsr_success,
        "peak": record.peak_deformation,
        "ratio": ratio(record),
        "termination": record.termination_reason,
        "video": None if video is None else relative(video, page_dir),
    }


def _difference(x: float, y: float) -> float | None:
    return x - y if math.isfinite(x) and math.isfinite(y) else None
