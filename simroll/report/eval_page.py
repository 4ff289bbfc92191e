"""The eval-run page: scores, breakdowns, figures, every episode (failures first) and its video.

:func:`eval_context` turns an :class:`~simroll.report.runs.EvalRun` into the data of
``templates/eval.html.j2``: TSR/DSR with intervals (only for a run of one policy: rates of
different policies are never blended), per-object and per-variation breakdowns, the tolerance
sweep and the peak deformation strip as inline SVG, one row per valid record and per expected
episode with no record, and the run's videos linked by paths relative to the page.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup

from simroll.report.figures import peak_strip
from simroll.report.render import (
    inline_figure,
    last_line,
    number,
    outcome,
    problem_views,
    provenance_view,
    ratio,
    relative,
)
from simroll.report.runs import EvalRun, Problem, breakdown
from simroll.rollout.records import EpisodeRecord, EpisodeSpec
from simroll.scoring.dsr import aggregate, plot_tolerance_sweep, tolerance_sweep
from simroll.scoring.stats import INTERVAL_METHODS
from simroll.scoring.summary import SWEEP_MULTIPLIERS


def eval_context(run: EvalRun, page_dir: Path) -> dict[str, Any]:
    """Template data for one eval run; video paths are made relative to ``page_dir``."""
    problems = list(run.problems)
    scores = by_object = by_variation = None
    figures: dict[str, Markup | None] = {"tolerance": None, "peaks": None}
    scorable = bool(run.records) and len(run.policy_ids) == 1
    if scorable:
        try:
            scores = aggregate(run.records)
        except ValueError as exc:  # e.g. one spec twice: never score it silently
            problems.append(Problem(f"rates not computed: {exc}"))
            scorable = False
    if scorable:
        by_object = breakdown(run.records, lambda r: (r.spec.task, r.spec.object))
        by_variation = breakdown(run.records, lambda r: (r.spec.task, r.spec.variation))
        sweep = tolerance_sweep(run.records, SWEEP_MULTIPLIERS)
        figures["tolerance"] = inline_figure(
            lambda path: plot_tolerance_sweep(sweep, path), problems
        )
        figures["peaks"] = inline_figure(lambda path: peak_strip(run.records, path), problems)
    costs = episode_costs(run.records)
    rows = [_episode_row(record, run, page_dir) for record in run.records]
    rows += [_missing_row(spec) for spec in run.missing]
    rows.sort(key=lambda row: (row["rank"], row["key"]))
    videos = [row["video"] for row in rows if row["video"]]
    videos += [
        {
            "id": f"video-orphan-{index}",
            "src": relative(path, page_dir),
            "title": path.name,
            "outcome": "no record",
            "outcome_class": "missing",
            "caption": "matches no valid record",
        }
        for index, path in enumerate(run.orphan_videos)
    ]
    tasks = sorted({r.spec.task for r in run.records}) or _config_list(run.config, "tasks")
    return {
        "title": f"{' / '.join(run.policy_ids) or 'unknown policy'} on {', '.join(tasks) or '?'}",
        "run_dir": str(run.run_dir.resolve()),
        "problems": problem_views(problems),
        "provenance": provenance_view(run.provenance, run.config, run.records),
        "counts": {
            "valid": len(run.records),
            "expected": None if run.expected is None else len(run.expected),
            "missing": len(run.missing),
            "lines": None if run.store is None else run.store.line_count,
            "errored": sum(r.error is not None for r in run.records),
        },
        "scores": scores,
        "by_object": by_object,
        "by_variation": by_variation,
        "costs": costs,
        "cost_columns": [label for _, label in COSTS] if costs else [],
        "interval_note": _interval_note(scores),
        "figures": figures,
        "episodes": rows,
        "videos": videos,
    }


# what a macro-step env (the clutter primitives) records of an episode's cost, as record.extra keys
COSTS = (
    ("execution_time", "execution time (s)"),
    ("primitives", "primitives"),
    ("withdrawals", "withdrawals"),
    ("travel_m", "push travel (m)"),
)


def episode_costs(records: Sequence[EpisodeRecord]) -> list[dict[str, Any]]:
    """Per task, the mean of each recorded episode cost over all episodes and over the successful
    ones; empty when no record carries one (the soft tasks' costs are steps and compute)."""
    if not any(key in r.extra for r in records for key, _ in COSTS):
        return []

    def mean(key: str, rows: list[EpisodeRecord]) -> float | None:
        values = [float(r.extra[key]) for r in rows if key in r.extra]
        return statistics.fmean(values) if values else None

    table = []
    for task in sorted({r.spec.task for r in records}):
        rows = [r for r in records if r.spec.task == task]
        wins = [r for r in rows if r.success]
        table.append(
            {
                "task": task,
                "episodes": len(rows),
                "successes": len(wins),
                "all": [mean(key, rows) for key, _ in COSTS],
                "successful": [mean(key, wins) for key, _ in COSTS],
            }
        )
    return table


def _episode_row(record: EpisodeRecord, run: EvalRun, page_dir: Path) -> dict[str, Any]:
    rank, label, css = outcome(record)
    spec = record.spec
    tags = ["recorded"]
    if not record.success:
        tags.append("tsr-fail")
    if not record.dsr_success:
        tags.append("dsr-fail")
    if record.error is not None:
        tags.append("errored")
    video = None
    if spec.key in run.videos:
        tags.append("video")
        video = {
            "id": _anchor("video", spec.key),
            "src": relative(run.videos[spec.key], page_dir),
            "title": spec.key,
            "outcome": label,
            "outcome_class": css,
            "caption": (
                f"peak {number(record.peak_deformation)} / tolerance "
                f"{number(record.tolerance)} ({record.termination_reason}, "
                f"{record.steps} steps)"
            ),
        }
    return {
        "key": spec.key,
        "rank": rank,
        "spec": spec,
        "outcome": label,
        "outcome_class": css,
        "success": record.success,
        "dsr_success": record.dsr_success,
        "peak": record.peak_deformation,
        "tolerance": record.tolerance,
        "ratio": ratio(record),
        "termination": record.termination_reason,
        "steps": record.steps,
        "compute_ms_per_call": record.compute_per_call_s * 1e3 if record.policy_calls else None,
        "compute_s": record.policy_compute_s,
        "wall_s": record.episode_wall_s,
        "costs": [record.extra.get(key) for key, _ in COSTS],
        "error": last_line(record.error),
        "line": run.line_numbers.get(spec.key),
        "tags": " ".join(tags),
        "video": video,
    }


def _missing_row(spec: EpisodeSpec) -> dict[str, Any]:
    return {
        "key": spec.key,
        "rank": 0,
        "spec": spec,
        "outcome": "no record",
        "outcome_class": "missing",
        "success": None,
        "dsr_success": None,
        "peak": None,
        "tolerance": None,
        "ratio": None,
        "termination": "",
        "steps": None,
        "compute_ms_per_call": None,
        "compute_s": None,
        "wall_s": None,
        "costs": [None] * len(COSTS),
        "error": "expected by the config; no valid record in records.jsonl",
        "line": None,
        "tags": "missing tsr-fail dsr-fail",
        "video": None,
    }


def _interval_note(scores) -> str:
    if not scores:
        return ""
    rate = scores[0].tsr
    return f"{100 * (1 - rate.alpha):g}% {INTERVAL_METHODS[rate.method]} intervals"


def _anchor(prefix: str, key: str) -> str:
    return prefix + "-" + "".join(c if c.isalnum() else "-" for c in key)


def _config_list(config: dict[str, Any] | None, key: str) -> list[str]:
    env = (config or {}).get("env")
    values = env.get(key) if isinstance(env, dict) else None
    return [str(v) for v in values] if isinstance(values, list) else []
