"""Produces the README's evaluation sample: tables, tolerance curves and a video frame.

Runs ``simroll eval env=soft_lift episodes=10`` for the gentle and the firm expert (the same 40
seeded specs, so the runs are paired), then copies each run's Markdown table and tolerance curve
into ``docs/`` and grabs the last frame of the firm run's first video.

Run: ``python scripts/make_readme_eval.py`` (about 2 minutes).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import av
from PIL import Image

from simroll.io import atomic_path, write_bytes_atomic, write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def main() -> None:
    (DOCS / "images").mkdir(parents=True, exist_ok=True)
    tables = []
    for policy in ("expert", "expert_firm"):
        run_dir = ROOT / "runs" / f"readme_{policy}"
        shutil.rmtree(run_dir, ignore_errors=True)
        command = [
            sys.executable,
            "-m",
            "simroll.cli.main",
            "eval",
            "env=soft_lift",
            f"policy={policy}",
            "episodes=10",
            f"output_dir={run_dir}",
            "video.episodes=1",
            "progress=false",
        ]
        subprocess.run(command, check=True, cwd=ROOT)
        tables.append(
            f"`simroll eval env=soft_lift policy={policy} episodes=10`\n\n"
            + (run_dir / "summary.md").read_text()
        )
        write_bytes_atomic(
            DOCS / "images" / f"tolerance_{policy}.png",
            (run_dir / "tolerance_curve.png").read_bytes(),
        )
        if policy == "expert_firm":
            video = sorted((run_dir / "videos").glob("*.mp4"))[0]
            with av.open(str(video)) as container:
                frames = [frame.to_image() for frame in container.decode(video=0)]
            frame: Image.Image = frames[-1]
            with atomic_path(DOCS / "images" / "eval_frame.png") as temporary:
                frame.save(temporary)
    write_text_atomic(
        DOCS / "eval_sample.md",
        "# Sample evaluation (produced by `python scripts/make_readme_eval.py`)\n\n"
        + "\n\n".join(tables),
    )
    print(f"wrote {DOCS / 'eval_sample.md'} and docs/images/tolerance_*.png, eval_frame.png")


if __name__ == "__main__":
    main()
