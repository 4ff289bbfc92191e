"""Benchmarks round-trip consistency and writes benchmarks/results/roundtrip.json + README figures.

Runs ``simroll roundtrip`` (the small preset unless overridden) end to end: collects trajectories
from the simulator (SoftLift and SoftSqueeze on the sponge, scripted expert with noise and
squeeze-release exploration), fits the PCA latent, trains the bidirectional diffusion world model
and a forward-only specialist, and measures on held-out episodes and on shifted regimes never seen
in training (a 4x softer, a 2.5x stiffer and a 20x softer sponge, a 2.5x heavier sponge, and an
unseen object, tofu):

* Spearman correlation of C_i (the geometric mean of ``bench.roundtrip_samples`` backward walks
  of the one forward prediction) with the true error E_i at fixed depth and within trajectories,
  and of a single walk beside it;
* the calibrator's ratio error and 68% / 95% interval coverage (vs a depth-only calibrator);
* AUROC of C_i for flagging the shifted regimes (beside the true error's own AUROC, the ceiling
  of any faithful error proxy) and a sampling-dispersion baseline;
* error reduction at 80% coverage when abstaining on C_i, vs on depth alone;
* forward accuracy of the bidirectional model vs the forward-only specialist.

Run: ``python scripts/bench_roundtrip.py [hydra overrides]``, e.g. ``stage=bench`` to re-bench
trained models, ``roundtrip=large`` for the larger run. The small preset takes ~12-15 minutes on
one core (``threads=1``); collected data and models stay under ``runs/roundtrip/<preset>/``, and
the calibrated small model is copied to ``benchmarks/models/roundtrip_small/`` (load it with
``RoundTripWorldModel.load``).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

from simroll.cli.roundtrip import CONFIG_DIR, run  # noqa: E402
from simroll.io import write_json_atomic  # noqa: E402
from simroll.worldmodel.bench import format_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "roundtrip.json"
IMAGES = ROOT / "docs" / "images"


def main(overrides: list[str]) -> None:
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(config_name="roundtrip", overrides=overrides)
    start = time.perf_counter()
    summary = run(cfg)
    total_s = time.perf_counter() - start
    out = Path(cfg.output_dir)
    results = json.loads((out / "results.json").read_text())
    train = json.loads((out / "train.json").read_text()) if (out / "train.json").exists() else {}
    collect_s = sum(split["collect_s"] for split in results["data"].values())
    results["runtimes"].update(
        collect_s=collect_s,
        train_bidirectional_s=train.get("bidirectional", {}).get("train_s"),
        train_forward_only_s=train.get("forward", {}).get("train_s"),
        this_command_s=total_s,
        stages_run=cfg.stage,
    )
    results["machine"] = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "mujoco": mujoco.__version__,
    }
    results["command"] = " ".join(["python scripts/bench_roundtrip.py", *overrides]).strip()
    results["date"] = time.strftime("%Y-%m-%d %H:%M:%S")
    results["table"] = summary.get("bench") and format_table_from_file(out)
    figures = []
    for figure in sorted((out / "figures").glob("roundtrip_*.png")):
        figures.append(str(shutil.copy(figure, IMAGES / figure.name)))
    results["figures"] = [str(Path(f).relative_to(ROOT)) for f in figures]
    if cfg.preset == "small":  # the calibrated small model ships (safetensors, < 1 MB)
        shipped = ROOT / "benchmarks" / "models" / "roundtrip_small"
        shipped.mkdir(parents=True, exist_ok=True)
        for name in ("model.safetensors", "latent.safetensors", "config.json"):
            shutil.copy(out / "models" / "bidirectional" / name, shipped / name)
            (shipped / name).chmod(0o644)
        results["shipped_model"] = str(shipped.relative_to(ROOT))
    write_json_atomic(OUT, results)
    print(results["table"])
    print(f"wrote {OUT.relative_to(ROOT)} and {len(figures)} figures in docs/images/")


def format_table_from_file(out: Path) -> str:
    """The Markdown table, from the in-memory form bench wrote (integer depth keys restored)."""
    results = json.loads((out / "results.json").read_text(), object_hook=_int_keys)
    return format_table(results)


def _int_keys(mapping: dict) -> dict:
    return {int(k) if k.isdigit() else k: v for k, v in mapping.items()}


if __name__ == "__main__":
    main(sys.argv[1:])
