"""The report pages' shared renderer: Jinja2 templates, escaping, number formats, inline figures.

Each page module (:mod:`~simroll.report.eval_page`, :mod:`~simroll.report.certify_page`,
:mod:`~simroll.report.compare_page`) turns a run into plain template data (rows of strings and
numbers) and :func:`render` turns that into HTML with the shared furniture: the inlined styles and
table script, the generation time and the simroll version. All markup lives in ``templates/``.
Autoescaping is on for every ``.html.j2`` template, so nothing read from a run (paths, config
values, error text) can inject markup; the only text passed through unescaped is what this
module marks safe: the CSS and script files and the SVG figures of :func:`inline_figure`. The
view helpers that more than one page uses (problem lists, provenance rows, an episode's outcome,
links to videos) live here too.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib.metadata
import math
import os
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import jinja2
import yaml
from markupsafe import Markup

from simroll.report.figures import peak_ratio, svg_from
from simroll.report.runs import Problem
from simroll.rollout.records import EpisodeRecord


@functools.cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("simroll.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "html.j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(num=number, sortkey=_sort_key, pct=_percent)
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


def inline_figure(draw: Callable[[Path], object], problems: list[Problem]) -> Markup | None:
    """The figure ``draw(path)`` saves, as SVG markup for the page; a figure that cannot be drawn
    is a warning in ``problems`` and ``None``, never a lost page."""
    try:
        return Markup(svg_from(draw))
    except Exception as exc:  # noqa: BLE001 -- a broken plot must not cost the whole page
        problems.append(Problem(f"a figure could not be drawn: {exc!r}", severity="warning"))
        return None


# -- views more than one page uses --------------------------------------------------------------


def provenance_view(
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
    codes = provenance.get("code_versions")
    if isinstance(codes, list) and len(codes) > 1:  # a run resumed with other code
        shown = [
            f"{code.get('git_sha')}" + (" (uncommitted changes)" if code.get("git_dirty") else "")
            for code in codes
            if isinstance(code, dict)
        ]
        rows.append((f"records made by {len(shown)} code versions", " -> ".join(shown)))
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
        cpu = ", ".join(
            str(machine[key]) for key in ("cpu", "torch_cpu_capability") if machine.get(key)
        )
        rows.append(("machine", str(machine["platform"]) + (f" ({cpu})" if cpu else "")))
    config_yaml = None
    if config:
        policy = config.get("policy")
        if isinstance(policy, dict) and policy.get("path") and "train" in policy:
            # a run of a checkpoint: the policy group's training recipe is not how that
            # checkpoint was trained (its card says), so the page does not show it as if it were
            config = {**config, "policy": {k: v for k, v in policy.items() if k != "train"}}
            rows.append(
                (
                    "policy checkpoint",
                    f"{policy['path']} (its training: the checkpoint's card; the config "
                    "group's policy.train recipe is left out below)",
                )
            )
        config_yaml = yaml.safe_dump(config, sort_keys=False, default_flow_style=None)
    return {"rows": rows, "config_yaml": config_yaml}


def problem_views(problems: Iterable[Problem]) -> dict[str, list[Problem]]:
    problems = list(problems)
    return {
        "errors": [p for p in problems if p.severity == "error"],
        "warnings": [p for p in problems if p.severity != "error"],
    }


def outcome(record: EpisodeRecord) -> tuple[int, str, str]:
    """(rank for failures-first order, label, css class)."""
    if record.error is not None:
        return 1, "raised", "error"
    if not record.success:
        return 2, "task failure", "fail"
    if not record.dsr_success:
        return 3, "over tolerance", "warn"
    return 4, "DSR success", "ok"


def ratio(record: EpisodeRecord) -> float | None:
    """Peak deformation over tolerance for a table cell; ``None`` when unknown."""
    value = peak_ratio(record)
    return None if math.isnan(value) else value


def relative(path: Path, page_dir: Path) -> str:
    """``path`` as a URL relative to the page, so the page and its run can move together."""
    relative_path = os.path.relpath(Path(path).resolve(), Path(page_dir).resolve())
    return urllib.parse.quote(Path(relative_path).as_posix())


def last_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[-1] if lines else ""


# -- template filters --------------------------------------------------------------------------


def number(value: Any, spec: str = ".3g") -> str:
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
