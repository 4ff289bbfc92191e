"""``simroll roundtrip``: the bidirectional world model and its round-trip trust signal.

``stage=collect|train|all`` (default ``all``) runs :mod:`simroll.worldmodel.pipeline` into
``output_dir``: trajectories from the simulator, the latent map and the two diffusion models
(bidirectional, forward-only). The benchmark on held-out and shifted episodes, which also fits
the calibrator (``results.json``, ``trust_log.jsonl``, ``figures/``, ``models/calibrated/``), is
``python scripts/bench_roundtrip.py`` with the same config (``stage=bench`` for trained models).
Presets are the ``roundtrip`` group (``roundtrip=small`` by default, ``roundtrip=large`` for the
documented larger run).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

os.environ.setdefault("MUJOCO_GL", "egl")

import hydra  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from simroll.cli import schema  # noqa: E402, F401  (registers the config schemas)
from simroll.cli.common import ConfigError  # noqa: E402
from simroll.cli.rundir import job_output_dir  # noqa: E402

if TYPE_CHECKING:
    from simroll.worldmodel.pipeline import RoundTripConfig

CONFIG_DIR = str(Path(__file__).resolve().parents[1] / "_data" / "configs")
RUN_KEYS = ("stage", "output_dir", "threads", "preset", "hydra")
STAGES = ("collect", "train", "all")


def run(cfg: DictConfig) -> dict:
    if cfg.stage == "bench":
        raise ConfigError(
            "stage=bench: the benchmark is a script, `python scripts/bench_roundtrip.py "
            f"stage=bench output_dir=...`; this command's stages are {STAGES}"
        )
    if cfg.stage not in STAGES:
        raise ConfigError(f"stage: unknown value {cfg.stage!r}; expected one of {STAGES}")
    if not isinstance(cfg.threads, int) or cfg.threads < 1:
        raise ConfigError(f"threads must be an integer >= 1, got {cfg.threads!r}")
    # heavy imports only once the command line is known to be good
    import torch

    from simroll.worldmodel import pipeline

    config = study_config(cfg)
    torch.set_num_threads(cfg.threads)
    out = job_output_dir(cfg)  # in a multirun, each job's own directory
    out.mkdir(parents=True, exist_ok=True)
    print(f"simroll roundtrip: stage {cfg.stage} -> {out}")
    summary: dict = {}
    if cfg.stage in ("collect", "all"):
        summary["collect"] = pipeline.collect(config, out)
    if cfg.stage in ("train", "all"):
        summary["train"] = pipeline.train(config, out)
    return summary


def study_config(cfg: DictConfig) -> RoundTripConfig:
    """The study's settings (:class:`~simroll.worldmodel.pipeline.RoundTripConfig`) from ``cfg``,
    without the keys that only say how to run it."""
    from simroll.worldmodel.pipeline import RoundTripConfig

    container = OmegaConf.to_container(cfg, resolve=True)
    study = {k: v for k, v in container.items() if k not in RUN_KEYS}
    try:
        return RoundTripConfig.from_dict(study)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from exc


@hydra.main(config_path=CONFIG_DIR, config_name="roundtrip", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    try:
        run(cfg)
    except ConfigError as exc:
        print(f"simroll roundtrip: config error: {exc}", file=sys.stderr)
        sys.exit(2)
    except FileNotFoundError as exc:
        print(f"simroll roundtrip: {exc}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    _hydra_main()
