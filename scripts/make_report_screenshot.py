"""Produces the README's report screenshot: ``docs/images/report.png``.

Writes ``report.html`` for the firm expert's sample run (made by ``python
scripts/make_readme_eval.py``, which runs ``simroll eval env=soft_lift policy=expert_firm
episodes=10 video.episodes=1 output_dir=runs/readme_expert_firm``), opens it in headless Chromium
(``make browser`` installs it) and saves the top of the page: header, provenance, the TSR/DSR
table and the plots.

Run: ``python scripts/make_report_screenshot.py [RUN_DIR] [--height PIXELS]`` (seconds).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simroll.report import write_html_report
from simroll.report.browser import headless_chromium, missing_browser

ROOT = Path(__file__).resolve().parents[1]
RUN_DIR = ROOT / "runs" / "readme_expert_firm"
OUTPUT = ROOT / "docs" / "images" / "report.png"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, nargs="?", default=RUN_DIR)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1640)
    args = parser.parse_args()
    if not (args.run_dir / "records.jsonl").exists():
        print(f"{args.run_dir} has no records: run `python scripts/make_readme_eval.py` first")
        return 2
    reason = missing_browser()
    if reason is not None:
        print(f"cannot take the screenshot: {reason}")
        return 2
    page = write_html_report(args.run_dir)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with headless_chromium(args.width, args.height) as driver:
        driver.get(page.as_uri())
        errors = [m for m in driver.get_log("browser") if m["level"] == "SEVERE"]
        if errors:
            print(f"the page logged errors: {errors}")
            return 1
        driver.save_screenshot(str(args.output))
    print(f"wrote {args.output} from {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
