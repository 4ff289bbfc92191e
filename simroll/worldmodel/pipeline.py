"""The round-trip study's configuration and its first two stages: collect and train.

``collect`` runs the behaviour policy through the episode engine for every split (train, calib,
held-out test, and out-of-distribution regimes the model never sees) and writes
``data/<split>.npz``. ``train`` fits the latent map on the training split and trains the
bidirectional model and a forward-only specialist of the same size and budget, writing
``models/{bidirectional,forward}/`` (safetensors + config.json). Collect skips splits already on
disk, so a run resumes. The benchmark that measures the trained models and fits their calibrator
is ``scripts/bench_roundtrip.py``; its settings (:class:`BenchConfig`) are part of the study's
configuration, so one config file describes the whole study.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.numpy import save as safetensors_bytes

from simroll.features import ACTION_DIM
from simroll.io import write_bytes_atomic, write_json_atomic
from simroll.rollout.episode import EnvConfig, EnvPool
from simroll.worldmodel.data import (
    STATE_LAYOUT,
    BehaviourConfig,
    SplitConfig,
    SplitData,
    collect_split,
    state_layout,
)
from simroll.worldmodel.latent import StateLatent
from simroll.worldmodel.model import (
    DiffusionWorldModel,
    TrainConfig,
    WorldModelConfig,
    train_world_model,
)

IN_DISTRIBUTION = ("train", "calib", "test")


@dataclass(frozen=True)
class ModelConfig:
    hidden: int = 128
    blocks: int = 3
    time_embed: int = 32
    train_timesteps: int = 100
    inference_steps: int = 10
    prediction_type: str = "sample"
    beta_schedule: str = "squaredcos_cap_v2"


@dataclass(frozen=True)
class BenchConfig:
    depth: int = 12  # largest round-trip depth D (control steps, 50 ms each)
    stride: int = 2  # steps between window starts
    coverage: float = 0.8  # selective prediction keeps this fraction
    dispersion_samples: int = 4  # forward rollouts per window for the dispersion baseline
    roundtrip_samples: int = 1  # backward walks averaged per C_i (geometric mean)
    calibrate_on: str = "calib"  # or "train"
    seed: int = 0


@dataclass(frozen=True)
class RoundTripConfig:
    tasks: tuple[str, ...] = ("SoftLift", "SoftSqueeze")
    object: str = "sponge"
    splits: tuple[SplitConfig, ...] = ()
    behaviour: BehaviourConfig = field(default_factory=BehaviourConfig)
    shape_components: int = 12
    drop_blocks: tuple[str, ...] = ()  # state blocks left out of the latent
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    seed: int = 0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoundTripConfig:
        """Build from a plain mapping (Hydra's config as a container); unknown keys raise."""
        data = dict(data)
        _check_keys("roundtrip", data, cls)
        nested = {
            "behaviour": BehaviourConfig,
            "model": ModelConfig,
            "train": TrainConfig,
            "bench": BenchConfig,
        }
        for key, kind in nested.items():
            if key in data:
                _check_keys(key, data[key], kind)
                values = {k: tuple(v) if isinstance(v, list) else v for k, v in data[key].items()}
                data[key] = kind(**values)
        if "splits" in data:
            splits = []
            for name, split in data["splits"].items():
                _check_keys(f"splits.{name}", split, SplitConfig, ignore={"name"})
                splits.append(SplitConfig(name=name, **split))
            data["splits"] = tuple(splits)
        for key in ("tasks", "drop_blocks"):
            if key in data:
                data[key] = tuple(data[key])
        config = cls(**data)
        config.validate()
        return config

    def validate(self) -> None:
        names = [s.name for s in self.splits]
        missing = [n for n in IN_DISTRIBUTION if n not in names]
        if missing:
            raise ValueError(f"splits must include {list(IN_DISTRIBUTION)}; missing {missing}")
        if self.bench.calibrate_on not in ("calib", "train"):
            raise ValueError(
                f"bench.calibrate_on must be 'calib' or 'train', got {self.bench.calibrate_on!r}"
            )
        if not 0 < self.bench.coverage <= 1:
            raise ValueError(f"bench.coverage must be in (0, 1], got {self.bench.coverage}")
        if self.bench.roundtrip_samples < 1:
            raise ValueError(
                f"bench.roundtrip_samples must be >= 1, got {self.bench.roundtrip_samples}"
            )
        if self.bench.depth < 1 or self.bench.stride < 1:
            raise ValueError("bench.depth and bench.stride must be >= 1")

    @property
    def ood_splits(self) -> list[str]:
        return [s.name for s in self.splits if s.name not in IN_DISTRIBUTION]


def _check_keys(where: str, data: Any, kind: type, ignore: set[str] = frozenset()) -> None:
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a mapping, got {data!r}")
    valid = {f.name for f in fields(kind)} - ignore
    unknown = set(data) - valid
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; expected {sorted(valid)}")


# ------------------------------------------------------------------------- stages
def collect(config: RoundTripConfig, out: Path, log: Callable[[str], None] = print) -> dict:
    """Write ``data/<split>.npz`` for every split not on disk yet."""
    pool = EnvPool(EnvConfig(obs_mode="state"))
    summary = {}
    try:
        for split in config.splits:
            path = out / "data" / f"{split.name}.npz"
            if path.exists():
                data = SplitData.load(path)
                log(f"collect: {split.name} already on disk ({data.transitions} transitions)")
            else:
                data = collect_split(
                    split, list(config.tasks), config.object, config.behaviour, config.seed, pool
                )
                data.save(path)
                log(
                    f"collect: {split.name}: {len(data.trajectories)} episodes, "
                    f"{data.transitions} transitions in {data.collect_s:.0f} s"
                )
            summary[split.name] = split_summary(data)
    finally:
        pool.close()
    return summary


def split_summary(data: SplitData) -> dict[str, Any]:
    return {
        "variation": data.variation,
        "episodes": len(data.trajectories),
        "transitions": data.transitions,
        "collect_s": round(data.collect_s, 1),
    }


def load_split(out: Path, name: str) -> SplitData:
    path = out / "data" / f"{name}.npz"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run the collect stage first")
    return SplitData.load(path)


def transitions(split: SplitData, latent: StateLatent) -> tuple[np.ndarray, ...]:
    source, actions, target = [], [], []
    for trajectory in split.trajectories:
        encoded = latent.encode(trajectory.states)
        source.append(encoded[:-1])
        actions.append(trajectory.actions)
        target.append(encoded[1:])
    return np.concatenate(source), np.concatenate(actions), np.concatenate(target)


def train(config: RoundTripConfig, out: Path, log: Callable[[str], None] = print) -> dict:
    """Fit the latent map, then the bidirectional model and the forward-only specialist."""
    train_split = load_split(out, "train")
    states = np.concatenate([t.states for t in train_split.trajectories])
    layout = state_layout(_vertices(states.shape[1]))
    start = time.perf_counter()
    latent = StateLatent.fit(states, layout, config.shape_components, config.drop_blocks)
    latent_s = time.perf_counter() - start
    source, actions, target = transitions(train_split, latent)
    delta_std = np.maximum((target - source).std(axis=0), 1e-3)
    summary: dict[str, Any] = {
        "latent": {
            "kind": "pca",
            "dim": latent.dim,
            "shape_components": config.shape_components,
            "explained_variance_ratio": latent.explained_variance_ratio,
            "fit_s": latent_s,
        },
        "transitions": len(source),
    }
    for name, directions in (("bidirectional", ("forward", "backward")), ("forward", ("forward",))):
        model_config = WorldModelConfig(
            latent_dim=latent.dim,
            action_dim=ACTION_DIM,
            directions=directions,
            **asdict(config.model),
        )
        torch.manual_seed(config.train.seed)  # seeded init: the same config trains the same model
        model = DiffusionWorldModel(model_config, delta_std)
        log(f"train: {name} model, {sum(p.numel() for p in model.parameters())} parameters")
        prefix = f"  {name}: "
        result = train_world_model(
            model, source, actions, target, config.train, log=lambda m, p=prefix: log(p + m)
        )
        directory = model.save(out / "models" / name, {"train": result})
        write_bytes_atomic(directory / "latent.safetensors", safetensors_bytes(latent.tensors()))
        summary[name] = result
        log(f"train: {name} done in {result['train_s']:.0f} s")
    write_json_atomic(out / "train.json", summary)
    return summary


def _vertices(state_dim: int) -> int:
    return (state_dim - sum(w for k, w in STATE_LAYOUT.items() if k != "shape")) // 3
