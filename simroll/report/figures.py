"""The report's plots as inline SVG text, so that the page needs no image files beside it.

The tolerance sweep and the certificate's speedup-against-bound plot are drawn by the functions
that draw them for the PNG reports (:func:`simroll.scoring.dsr.plot_tolerance_sweep`,
:func:`simroll.certify.certificate.plot_speedup_vs_bound`), only saved as SVG with text kept as
text; the per-episode peak deformation strip and the paired peak scatter exist only here.
"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from simroll.io import atomic_path
from simroll.rollout.records import EpisodeRecord

# Text as <text> (the browser's sans-serif) instead of glyph paths: a fraction of the size.
_SVG_RC = {"svg.fonttype": "none", "font.family": "sans-serif"}
_PROLOG = re.compile(r"^.*?(?=<svg)", re.DOTALL)


def svg_from(draw: Callable[[Path], object]) -> str:
    """Run ``draw(path)`` (a function that saves a matplotlib figure to ``path``) into SVG text."""
    import matplotlib

    with tempfile.TemporaryDirectory() as directory, matplotlib.rc_context(_SVG_RC):
        path = Path(directory) / "figure.svg"
        draw(path)
        text = path.read_text()
    # The XML declaration and DOCTYPE have no place inside an HTML document.
    return _PROLOG.sub("", text, count=1)


def _figure(width: float, height: float):
    # Figure + Agg canvas, not pyplot: no global figure state and no display needed.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def peak_ratio(record: EpisodeRecord) -> float:
    """Peak deformation over tolerance (1 = at tolerance); nan when unknown."""
    peak, tolerance = record.peak_deformation, record.tolerance
    if math.isnan(peak) or math.isnan(tolerance):
        return math.nan
    if math.isinf(tolerance):
        return 0.0
    return peak / tolerance if tolerance > 0 else math.inf


def peak_strip(records: Sequence[EpisodeRecord], path: Path) -> Path:
    """Peak deformation / tolerance per episode, one column per task/object/variation, coloured by
    outcome; the dotted line is the tolerance."""
    figure = _figure(6.4, 3.6)
    axes = figure.add_subplot()
    columns = sorted({(r.spec.task, r.spec.object, r.spec.variation) for r in records})
    rng = np.random.default_rng(0)  # jitter only; fixed so the page is reproducible
    styles = {
        "DSR success": ("tab:green", "o"),
        "task success over tolerance": ("tab:orange", "^"),
        "task failure": ("tab:red", "x"),
        "raised": ("black", "s"),
    }
    points: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in styles}
    for column, key in enumerate(columns):
        for record in records:
            if (record.spec.task, record.spec.object, record.spec.variation) != key:
                continue
            ratio = peak_ratio(record)
            if not math.isfinite(ratio):
                continue
            if record.error is not None:
                outcome = "raised"
            elif record.dsr_success:
                outcome = "DSR success"
            elif record.success:
                outcome = "task success over tolerance"
            else:
                outcome = "task failure"
            points[outcome][0].append(column + rng.uniform(-0.18, 0.18))
            points[outcome][1].append(ratio)
    for name, (xs, ys) in points.items():
        if xs:
            color, marker = styles[name]
            axes.scatter(xs, ys, s=16, color=color, marker=marker, label=name, alpha=0.8)
    axes.axhline(1.0, color="0.4", linestyle=":", linewidth=1)
    axes.set_xticks(range(len(columns)))
    axes.set_xticklabels(
        ["/".join(part for part in key if part != "default") for key in columns],
        rotation=20 if len(columns) > 4 else 0,
        ha="right" if len(columns) > 4 else "center",
        fontsize="small",
    )
    axes.set_ylabel("peak deformation / tolerance")
    axes.set_ylim(bottom=0)
    if any(xs for xs, _ in points.values()):
        axes.legend(fontsize="small")
    with atomic_path(path) as temporary:
        figure.savefig(temporary)
    return path


def paired_peak_scatter(
    pairs: Sequence[tuple[EpisodeRecord, EpisodeRecord]], labels: tuple[str, str], path: Path
) -> Path:
    """Peak deformation / tolerance of run B against run A per shared episode; the diagonal is
    "no change" and the dotted lines are the tolerance."""
    figure = _figure(4.8, 4.2)
    axes = figure.add_subplot()
    ratios = np.array([(peak_ratio(a), peak_ratio(b)) for a, b in pairs], dtype=float)
    finite = ratios[np.isfinite(ratios).all(axis=1)] if len(ratios) else np.zeros((0, 2))
    outcome_changed = np.array(
        [
            a.dsr_success != b.dsr_success
            for a, b in pairs
            if np.isfinite([peak_ratio(a), peak_ratio(b)]).all()
        ],
        dtype=bool,
    )
    top = max(1.2, float(finite.max()) * 1.05) if len(finite) else 1.2
    axes.plot([0, top], [0, top], color="0.6", linewidth=1)
    axes.axvline(1.0, color="0.4", linestyle=":", linewidth=1)
    axes.axhline(1.0, color="0.4", linestyle=":", linewidth=1)
    if len(finite):
        for mask, style in (
            (~outcome_changed, {"s": 14, "color": "tab:blue", "label": "same DSR"}),
            (outcome_changed, {"s": 22, "color": "tab:red", "marker": "D", "label": "DSR differs"}),
        ):
            if mask.any():
                axes.scatter(finite[mask, 0], finite[mask, 1], **style)
        axes.legend(fontsize="small")
    axes.set_xlim(0, top)
    axes.set_ylim(0, top)
    axes.set_xlabel(f"A: {labels[0]}  (peak / tolerance)")
    axes.set_ylabel(f"B: {labels[1]}  (peak / tolerance)")
    with atomic_path(path) as temporary:
        figure.savefig(temporary)
    return path
