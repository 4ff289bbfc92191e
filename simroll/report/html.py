"""Renders a run directory as one static page, ``report.html``, from Jinja2 templates.

:func:`write_html_report` reads an eval or certification run (:mod:`simroll.report.runs`),
turns it into plain template data (rows of strings and numbers, inline SVG figures from
:mod:`simroll.report.figures`) and renders ``templates/eval.html.j2`` or ``certify.html.j2``;
:func:`write_comparison_report` does the same for two eval runs paired on shared episodes
(:mod:`simroll.report.compare`). The page is self-contained: styles, the table script and the
figures are inline, and the only files it refers to are the run's own videos, by relative path,
so it opens from disk with no server and no network. All markup lives in the templates; this
module only prepares data. Pages are written atomically.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib.metadata
import math
import os
import sys
import traceback
import urllib.parse
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import jinja2
import yaml
from markupsafe import Markup

from simroll.io import write_text_atomic
from simroll.report.compare import Comparison, compare_runs
from simroll.report.figures import paired_peak_scatter, peak_strip, svg_from
from simroll.report.runs import (
    CertifyRun,
    EvalRun,
    Problem,
    ReportError,
    breakdown,
    load_certify_run,
    load_eval_run,
    run_kind,
)
from simroll.rollout.records import EpisodeRecord, EpisodeSpec
from simroll.scoring.dsr import ALL, aggregate, plot_tolerance_sweep, tolerance_sweep
from simroll.scoring.stats import INTERVAL_METHODS
from simroll.scoring.summary import SWEEP_MULTIPLIERS

REPORT_FILENAME = "report.html"


@functools.cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("simroll.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "html.j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(num=_number, sortkey=_sort_key, pct=_percent)
    return environment


def _asset(name: str) -> Markup:
    """A static file from the templates folder (CSS, script), inlined verbatim."""
    environment = _environment()
    source, _, _ = environment.loader.get_source(environment, name)
    return Markup(source)


def render(template: str, **context: Any) -> str:
    """Render ``template`` with the shared page furniture (styles, script, footer data)."""
    return (
        _environment()
        .get_template(template)
        .render(
            css=_asset("report.css"),
            js=_asset("report.js"),
            generated=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            simroll_version=_version(),
            **context,
        )
    )


def write_html_report(run_dir: str | Path, output: str | Path | None = None) -> Path:
    """Write ``<run_dir>/report.html`` (or ``output``) for an eval or certification run.

    Raises :class:`ReportError` only when ``run_dir`` is not a directory; everything else that is
    missing or broken is reported on the page.
    """
    run_dir = Path(run_dir)
    output = Path(output) if output is not None else run_dir / REPORT_FILENAME
    kind = run_kind(run_dir)
    try:
        if kind == "certify":
            page = render("certify.html.j2", **certify_context(load_certify_run(run_dir)))
        else:
            page = render("eval.html.j2", **eval_context(load_eval_run(run_dir), output.parent))
    except ReportError:
        raise
    except Exception as exc:  # noqa: BLE001 -- input we did not foresee: say so on the page
        print(f"warning: {REPORT_FILENAME} is only an error page: {exc!r}", file=sys.stderr)
        page = render(
            "error.html.j2",
            kind=kind,
            title=f"{run_dir.resolve().name} (report failed)",
            run_dir=str(run_dir.resolve()),
            error=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(),
        )
    return write_text_atomic(output, page)


def write_comparison_report(
    run_a: str | Path, run_b: str | Path, output: str | Path | None = None
) -> Path:
    """Write a page comparing two eval runs on their shared episodes.

    The default ``output`` is ``<run_a>/compare_<name of run_b>.html``.
    """
    run_a, run_b = Path(run_a), Path(run_b)
    for run_dir in (run_a, run_b):
        if run_dir.is_dir() and run_kind(run_dir) == "certify":
            raise ReportError(
                f"{str(run_dir)!r} is a certification run; comparison pairs two eval runs"
            )
    comparison = compare_runs(load_eval_run(run_a), load_eval_run(run_b))
    if output is None:
        output = run_a / f"compare_{run_b.resolve().name}.html"
    output = Path(output)
    page = render("compare.html.j2", **compare_context(comparison, output.parent))
    return write_text_atomic(output, page)


def write_html_report_or_warn(run_dir: str | Path) -> Path | None:
    """:func:`write_html_report` for the end of ``simroll eval``/``certify``: a failure here is a
    warning on stderr, never a failed run (the records and the summary are already written)."""
    try:
        path = write_html_report(run_dir)
    except Exception as exc:  # noqa: BLE001 -- the run's results must survive a report bug
        print(f"warning: could not write {REPORT_FILENAME}: {exc!r}", file=sys.stderr)
        return None
    print(f"html report: {path}")
    return path


# -- eval runs ---------------------------------------------------------------------------------


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
        figures["tolerance"] = _svg(lambda path: plot_tolerance_sweep(sweep, path), problems)
        figures["peaks"] = _svg(lambda path: peak_strip(run.records, path), problems)
    rows = [_episode_row(record, run, page_dir) for record in run.records]
    rows += [_missing_row(spec) for spec in run.missing]
    rows.sort(key=lambda row: (row["rank"], row["key"]))
    videos = [row["video"] for row in rows if row["video"]]
    videos += [
        {
            "id": f"video-orphan-{index}",
            "src": _relative(path, page_dir),
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
        "problems": _problem_views(problems),
        "provenance": _provenance_view(run.provenance, run.config, run.records),
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
        "interval_note": _interval_note(scores),
        "figures": figures,
        "episodes": rows,
        "videos": videos,
    }


def _outcome(record: EpisodeRecord) -> tuple[int, str, str]:
    """(rank for failures-first order, label, css class)."""
    if record.error is not None:
        return 1, "raised", "error"
    if not record.success:
        return 2, "task failure", "fail"
    if not record.dsr_success:
        return 3, "over tolerance", "warn"
    return 4, "DSR success", "ok"


def _episode_row(record: EpisodeRecord, run: EvalRun, page_dir: Path) -> dict[str, Any]:
    rank, label, css = _outcome(record)
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
            "src": _relative(run.videos[spec.key], page_dir),
            "title": spec.key,
            "outcome": label,
            "outcome_class": css,
            "caption": (
                f"peak {_number(record.peak_deformation)} / tolerance "
                f"{_number(record.tolerance)} ({record.termination_reason}, "
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
        "ratio": _ratio(record.peak_deformation, record.tolerance),
        "termination": record.termination_reason,
        "steps": record.steps,
        "compute_ms_per_call": record.compute_per_call_s * 1e3 if record.policy_calls else None,
        "compute_s": record.policy_compute_s,
        "wall_s": record.episode_wall_s,
        "error": _last_line(record.error),
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
        "error": "expected by the config; no valid record in records.jsonl",
        "line": None,
        "tags": "missing tsr-fail dsr-fail",
        "video": None,
    }


# -- certification runs ------------------------------------------------------------------------


def certify_context(run: CertifyRun) -> dict[str, Any]:
    problems = list(run.problems)
    certificate = run.certificate
    figure = None
    if certificate is not None:
        figure = _speedup_figure(certificate, problems)
    measure = (certificate or {}).get("settings", {}).get("success", "tsr")
    policies = []
    for policy in run.policies:
        pooled = breakdown(policy.records, lambda r: ()) if policy.records else []
        policies.append(
            {
                "name": policy.name,
                "role": policy.role,
                "records": len(policy.records),
                "claimed": policy.claimed_rollouts,
                "errored": sum(r.error is not None for r in policy.records),
                "pooled": pooled[0] if pooled else None,
                "store": _store_state(policy),
                "store_ok": policy.store is not None and policy.store.ok,
            }
        )
    return {
        "title": "certification"
        + (f": deploy {certificate['chosen']}" if certificate else " (no certificate)"),
        "run_dir": str(run.run_dir.resolve()),
        "problems": _problem_views(problems),
        "certificate": certificate,
        "candidates": [_candidate_row(c) for c in (certificate or {}).get("candidates", [])],
        "figure": figure,
        "policies": policies,
        "measure": measure,
        "outcomes": _outcome_grid(run, measure),
        "provenance": _provenance_view(run.provenance, run.config, []),
    }


def _store_state(policy) -> str:
    if policy.store is not None:
        return "ok" if policy.store.ok else "problems (see top)"
    return "not run" if not policy.claimed_rollouts else "missing"


def _candidate_row(candidate: dict[str, Any]) -> dict[str, Any]:
    cost = candidate.get("cost") or {}
    return {
        **candidate,
        "bound": candidate.get("upper_bound") if candidate.get("tested") else None,
        "model_calls_per_step": cost.get("model_calls_per_step"),
        "ms_per_step": None
        if cost.get("wall_s_per_step") is None
        else 1e3 * cost["wall_s_per_step"],
        "css": "ok"
        if candidate.get("certified")
        else ("fail" if candidate.get("tested") else "missing"),
    }


def _speedup_figure(certificate: dict[str, Any], problems: list[Problem]) -> Markup | None:
    # Imported here: only certification pages need the certify layer.
    from simroll.certify.certificate import Certificate, plot_speedup_vs_bound

    try:
        parsed = Certificate(**certificate)
    except TypeError as exc:
        problems.append(
            Problem(
                f"certificate.json has unexpected fields ({exc}); plot not drawn",
                severity="warning",
            )
        )
        return None
    return _svg(lambda path: plot_speedup_vs_bound(parsed, path), problems)


def _outcome_grid(run: CertifyRun, measure: str) -> dict[str, Any]:
    """Each calibration spec against each policy: success, failure, loss or not run."""
    names = [p.name for p in run.policies]
    by_policy = {p.name: {r.spec.key: r for r in p.records} for p in run.policies}
    reference = next((p.name for p in run.policies if p.role == "reference"), None)
    specs: list[dict[str, Any]] = []
    calibration = (run.certificate or {}).get("calibration") or {}
    if calibration.get("specs"):
        specs = [dict(s) for s in calibration["specs"] if isinstance(s, dict) and "key" in s]
    else:
        seen: dict[str, EpisodeSpec] = {}
        for policy in run.policies:
            for record in policy.records:
                seen.setdefault(record.spec.key, record.spec)
        specs = [{**s.to_dict(), "key": k} for k, s in sorted(seen.items())]
    rows = []
    for spec in specs:
        key = spec["key"]
        ref_record = by_policy.get(reference, {}).get(key) if reference else None
        ref_ok = _succeeded(ref_record, measure)
        cells, tags = [], set()
        for name in names:
            record = by_policy[name].get(key)
            ok = _succeeded(record, measure)
            if record is None:
                cells.append({"text": "–", "css": "missing", "title": "not run", "peak": None})
                continue
            loss = name != reference and ok is False and ref_ok is True
            if record.error is not None:
                cell = {"text": "!", "css": "error", "title": _last_line(record.error)}
            elif ok:
                cell = {"text": "✓", "css": "ok", "title": "success"}
            else:
                cell = {"text": "✗", "css": "fail", "title": "failure"}
            if loss:
                cell = {
                    **cell,
                    "text": "✗ loss",
                    "css": "loss",
                    "title": "fails where the reference succeeds",
                }
                tags.add("loss")
            if not ok:
                tags.add("any-fail")
            cell["peak"] = _number(record.peak_deformation)
            cells.append(cell)
        rows.append({"spec": spec, "cells": cells, "tags": " ".join(sorted(tags))})
    rows.sort(
        key=lambda row: (
            "loss" not in row["tags"],
            "any-fail" not in row["tags"],
            row["spec"].get("index", 0),
        )
    )
    return {"names": names, "reference": reference, "rows": rows}


def _succeeded(record: EpisodeRecord | None, measure: str) -> bool | None:
    if record is None or record.error is not None:
        return None
    return bool(record.dsr_success if measure == "dsr" else record.success)


# -- comparisons -------------------------------------------------------------------------------


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
                "provenance": _provenance_view(run.provenance, run.config, run.records),
                "valid": len(run.records),
                "expected": None if run.expected is None else len(run.expected),
                "missing": len(run.missing),
            }
        )
    labels = (runs[0]["policy"], runs[1]["policy"])
    figure = None
    if comparison.pairs:
        figure = _svg(lambda path: paired_peak_scatter(comparison.pairs, labels, path), problems)
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
        "problems": _problem_views(problems),
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
    _, label, css = _outcome(record)
    video = run.videos.get(record.spec.key)
    return {
        "outcome": label,
        "outcome_class": css,
        "success": record.success,
        "dsr_success": record.dsr_success,
        "peak": record.peak_deformation,
        "ratio": _ratio(record.peak_deformation, record.tolerance),
        "termination": record.termination_reason,
        "video": None if video is None else _relative(video, page_dir),
    }


# -- shared helpers ----------------------------------------------------------------------------


def _provenance_view(
    provenance: dict[str, Any] | None,
    config: dict[str, Any] | None,
    records: Sequence[EpisodeRecord],
) -> dict[str, Any]:
    """Label/value rows for the page header, and the full config as YAML."""
    provenance = provenance or {}
    rows: list[tuple[str, str]] = []
    policies = sorted({(r.policy_id, r.policy_config_hash) for r in records})
    if policies:
        rows.append(("policy", ", ".join(f"{p} (config {h})" for p, h in policies)))
    if config:
        env = config.get("env") if isinstance(config.get("env"), dict) else {}
        for label, value in (
            ("tasks", env.get("tasks")),
            ("objects", env.get("objects")),
            ("variations", env.get("variations")),
            ("episodes per cell", config.get("episodes")),
            ("base seed", config.get("seed")),
            (
                "backend",
                (config.get("backend") or {}).get("name")
                if isinstance(config.get("backend"), dict)
                else None,
            ),
            ("control delay (steps)", config.get("control_delay_steps")),
        ):
            if value is not None:
                rows.append(
                    (label, ", ".join(map(str, value)) if isinstance(value, list) else str(value))
                )
    if provenance.get("git_sha") is not None:
        dirty = provenance.get("git_dirty")
        rows.append(
            ("git", f"{provenance['git_sha']}" + (" (uncommitted changes)" if dirty else ""))
        )
    if provenance.get("created"):
        rows.append(("created", str(provenance["created"])))
    packages = provenance.get("packages")
    if isinstance(packages, dict):
        rows.append(
            ("packages", ", ".join(f"{k} {v}" for k, v in packages.items() if v is not None))
        )
    if provenance.get("python"):
        rows.append(("python", str(provenance["python"])))
    machine = provenance.get("machine")
    if isinstance(machine, dict) and machine.get("platform"):
        rows.append(("machine", str(machine["platform"])))
    config_yaml = None
    if config:
        config_yaml = yaml.safe_dump(config, sort_keys=False, default_flow_style=None)
    return {"rows": rows, "config_yaml": config_yaml}


def _problem_views(problems: Iterable[Problem]) -> dict[str, list[Problem]]:
    problems = list(problems)
    return {
        "errors": [p for p in problems if p.severity == "error"],
        "warnings": [p for p in problems if p.severity != "error"],
    }


def _interval_note(scores) -> str:
    if not scores:
        return ""
    rate = scores[0].tsr
    return f"{100 * (1 - rate.alpha):g}% {INTERVAL_METHODS[rate.method]} intervals"


def _svg(draw, problems: list[Problem]) -> Markup | None:
    try:
        return Markup(svg_from(draw))
    except Exception as exc:  # noqa: BLE001 -- a broken plot must not cost the whole page
        problems.append(Problem(f"a figure could not be drawn: {exc!r}", severity="warning"))
        return None


def _anchor(prefix: str, key: str) -> str:
    return prefix + "-" + "".join(c if c.isalnum() else "-" for c in key)


def _relative(path: Path, page_dir: Path) -> str:
    relative = os.path.relpath(Path(path).resolve(), Path(page_dir).resolve())
    return urllib.parse.quote(Path(relative).as_posix())


def _ratio(peak: float, tolerance: float) -> float | None:
    if math.isnan(peak) or math.isnan(tolerance):
        return None
    if math.isinf(tolerance):
        return 0.0
    return peak / tolerance if tolerance > 0 else math.inf


def _difference(x: float, y: float) -> float | None:
    return x - y if math.isfinite(x) and math.isfinite(y) else None


def _last_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[-1] if lines else ""


def _config_list(config: dict[str, Any] | None, key: str) -> list[str]:
    env = (config or {}).get("env")
    values = env.get(key) if isinstance(env, dict) else None
    return [str(v) for v in values] if isinstance(values, list) else []


def _number(value: Any, spec: str = ".3g") -> str:
    """A number for display; ``n/a`` for None and nan, ``∞`` for infinity."""
    if value is None or isinstance(value, bool):
        return "n/a" if value is None else str(value)
    if isinstance(value, int):
        return format(value, spec)
    value = float(value)
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    if spec.endswith("d"):
        return format(round(value), spec)
    return format(value, spec)


def _percent(value: Any, digits: int = 1) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{100 * value:.{digits}f}%"


def _sort_key(value: Any) -> str:
    """The ``data-sort`` value of a cell: numbers as numbers, unknowns empty (sorted last)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        value = float(value)
        if math.isnan(value):
            return ""
        return "1e308" if value == math.inf else ("-1e308" if value == -math.inf else repr(value))
    if hasattr(value, "rate"):  # a Rate
        return _sort_key(value.rate)
    return str(value)


def _version() -> str:
    try:
        return importlib.metadata.version("simroll")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
