"""``simroll report``: write a run's browsable page, ``report.html``, or compare two runs.

``simroll report RUN_DIR`` (re)writes ``RUN_DIR/report.html`` for an eval or a certification run
from what the directory holds; ``simroll report RUN_A RUN_B`` writes a page of paired differences
on the episodes both eval runs share (default ``RUN_A/compare_<name of RUN_B>.html``). A plain
argparse command, not Hydra: reading a run must not add Hydra's outputs to it. Missing or corrupt
records are reported on the page (and counted on stderr), never a crash; a run directory that does
not exist exits with status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simroll.report.html import write_comparison_report, write_html_report
from simroll.report.runs import ReportError


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="simroll report",
        description="Write a static HTML page for a run directory (or compare two eval runs).",
    )
    parser.add_argument("run_dir", type=Path, help="an eval or certification run directory")
    parser.add_argument(
        "run_dir_b",
        type=Path,
        nargs="?",
        help="a second eval run: write paired differences on shared episodes instead",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        help="where to write the page (default: RUN_DIR/report.html, or "
        "RUN_DIR/compare_<RUN_DIR_B name>.html)",
    )
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> Path:
    if args.run_dir_b is None:
        return write_html_report(args.run_dir, args.output)
    return write_comparison_report(args.run_dir, args.run_dir_b, args.output)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        path = run(args)
    except ReportError as exc:
        print(f"simroll report: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"report: {path}")


if __name__ == "__main__":
    main()
