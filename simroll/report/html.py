"""Writes a run directory's page, ``report.html``, or the page comparing two eval runs.

The entry points of the report: :func:`write_html_report` picks the page a directory gets (an
eval run's, :mod:`simroll.report.eval_page`, or a certification's,
:mod:`simroll.report.certify_page`), :func:`write_comparison_report` writes the comparison of two
eval runs (:mod:`simroll.report.compare_page`), and :func:`write_html_report_or_warn` is what
``simroll eval`` and ``simroll certify`` call at the end of a run. The pages are rendered by
:mod:`simroll.report.render` and written atomically (:mod:`simroll.io`). A page is
self-contained: styles, the table script and the figures are inline, and the only files it refers
to are the run's own videos, by relative path, so it opens from disk with no server and no
network. Input nobody foresaw gives an error page that says what went wrong, not a missing page.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

from simroll.io import write_text_atomic
from simroll.report.certify_page import certify_context
from simroll.report.compare import compare_runs
from simroll.report.compare_page import compare_context
from simroll.report.eval_page import eval_context
from simroll.report.render import render
from simroll.report.runs import (
    ReportError,
    load_certify_run,
    load_eval_run,
    run_kind,
)

REPORT_FILENAME = "report.html"


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
