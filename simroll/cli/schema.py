"""Typed schemas of the ``simroll`` commands' configs, so that a typo fails before anything runs.

One dataclass per top-level config (``eval``, ``collect``, ``certify`` and ``certify_diffusion``,
``train``, ``roundtrip``) with nested dataclasses for the closed sections (``env``, ``backend``,
``video``, the round-trip study's sections). Importing this module stores each in Hydra's
ConfigStore as ``<command>_schema``; each top-level yaml names it first in its defaults list
(Hydra's "extending configs" pattern), so Hydra checks every value's type (``episodes=abc``
fails) and refuses to override a key the schema lacks (``typo=3``, ``env.foo=1``). Appending with
``+`` inserts a key whatever a structured config says (Hydra's design), so each schema also
installs :class:`RejectUnknownKeys`, a Hydra callback that compares the composed config's keys
with the schema before the run starts and exits with status 2 naming the unknown key and the keys
expected there. Sections whose entries are instantiated through ``_target_`` (``policy``,
certify's ``reference`` and ``candidates``, the ``accel`` overrides merged into them) stay open:
their keys are the target's arguments, and the target refuses those it does not take; so do the
round-trip study's ``splits``, which a run may add to. Values live in the yaml files, not here: a
field without a default is one its yaml must set.
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
import typing
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.experimental.callback import Callback
from omegaconf import MISSING, DictConfig, OmegaConf


def _hydra_settings(command: str) -> Any:
    """The ``hydra`` section a schema adds: the callback that rejects keys appended with ``+``.

    A field of the schema rather than a line in each yaml, so that no config using the schema can
    leave it out.
    """
    callback = {"_target_": f"{__name__}.RejectUnknownKeys", "command": command}
    return field(default_factory=lambda: {"callbacks": {"simroll_schema": dict(callback)}})


@dataclass
class EnvSchema:
    """The ``env`` group (configs/env/): which episodes to run and how the env observes/acts."""

    suite: str = MISSING
    tasks: list[str] = MISSING
    objects: list[str] = MISSING
    variations: list[str] = MISSING
    obs_mode: str = MISSING
    gripper_mode: str = MISSING
    image_size: int = MISSING
    rigid_twin: bool = MISSING


@dataclass
class BackendSchema:
    """The ``backend`` group (configs/backend/): where episodes run."""

    name: str = MISSING
    workers: int = MISSING


@dataclass
class VideoSchema:
    episodes: int = MISSING
    size: list[int] = MISSING


@dataclass
class EvalSchema:
    """configs/eval.yaml."""

    env: EnvSchema = field(default_factory=EnvSchema)
    policy: Any = MISSING  # open: the arguments of the policy's _target_
    backend: BackendSchema = field(default_factory=BackendSchema)
    episodes: int = MISSING
    seed: int = MISSING
    control_delay_steps: int = MISSING
    policy_latency_s: Any = MISSING  # null, "measured" or seconds (checked by simroll eval)
    output_dir: str = MISSING
    progress: bool = MISSING
    record: bool = MISSING
    video: VideoSchema = field(default_factory=VideoSchema)
    hydra: Any = _hydra_settings("eval")


@dataclass
class CollectSchema:
    """configs/collect.yaml."""

    env: EnvSchema = field(default_factory=EnvSchema)
    policy: Any = MISSING
    backend: BackendSchema = field(default_factory=BackendSchema)
    episodes: int = MISSING
    seed: int = MISSING
    only_success: bool = MISSING
    use_videos: bool = MISSING
    tactile_image: bool = MISSING
    repo_id: str = MISSING
    output_dir: str = MISSING
    overwrite: bool = MISSING
    progress: bool = MISSING
    hydra: Any = _hydra_settings("collect")


@dataclass
class CertifySchema:
    """configs/certify.yaml and configs/certify_diffusion.yaml."""

    env: EnvSchema = field(default_factory=EnvSchema)
    backend: BackendSchema = field(default_factory=BackendSchema)
    reference: Any = MISSING  # open: a policy config
    # open: policy configs by name; empty when every default candidate is removed with `~`, which
    # simroll certify then reports as "no candidates"
    candidates: dict[str, Any] = field(default_factory=dict)
    epsilon: float = MISSING
    delta: float = MISSING
    risk: str = MISSING
    success: str = MISSING
    method: str = MISSING
    design: str = MISSING
    episodes: int = MISSING
    batch: int = MISSING
    cost: str = MISSING
    reference_cost_episodes: int = MISSING
    seed: int = MISSING
    output_dir: str = MISSING
    progress: bool = MISSING
    hydra: Any = _hydra_settings("certify")


@dataclass
class DaggerSchema:
    """``dagger`` of configs/train.yaml (simroll.train.dagger.DaggerConfig)."""

    rounds: int = MISSING
    episodes_per_round: int = MISSING
    steps_per_round: int = MISSING
    beta: float = MISSING
    beta_decay: float = MISSING
    perturb: Any = None  # open: a mapping checked by simroll.policies.mixing.Perturbation
    final_episodes: int = MISSING
    labeller: str = MISSING
    seed: int = MISSING


@dataclass
class TrainSchema:
    """configs/train.yaml."""

    env: EnvSchema = field(default_factory=EnvSchema)
    backend: BackendSchema = field(default_factory=BackendSchema)
    dagger: DaggerSchema = field(default_factory=DaggerSchema)
    policy: Any = MISSING  # open: a policy config with its `train` recipe
    dataset: str = MISSING
    steps: int = MISSING
    batch_size: int = MISSING
    seed: int = MISSING
    init_from: str | None = MISSING
    task_weights: Any = None  # None or {instruction substring: weight} (checked by the trainer)
    fit_lr_schedule: bool = MISSING
    log_every: int = MISSING
    checkpoint_every: int = MISSING
    threads: int = MISSING
    progress: bool = MISSING
    output_dir: str = MISSING
    hydra: Any = _hydra_settings("train")


@dataclass
class BehaviourSchema:
    """``behaviour`` of configs/roundtrip.yaml (simroll.worldmodel.data.BehaviourConfig)."""

    closures: list[str] = MISSING
    max_noise_std: float = MISSING
    explore_probability: float = MISSING
    explore_delay: list[int] = MISSING
    gripper_segment: list[int] = MISSING
    gripper_rate: float = MISSING
    hand_speed: float = MISSING


@dataclass
class WorldModelSchema:
    """``model`` of configs/roundtrip.yaml (simroll.worldmodel.pipeline.ModelConfig)."""

    hidden: int = MISSING
    blocks: int = MISSING
    time_embed: int = MISSING
    train_timesteps: int = MISSING
    inference_steps: int = MISSING
    prediction_type: str = MISSING
    beta_schedule: str = MISSING


@dataclass
class WorldModelTrainSchema:
    """``train`` of configs/roundtrip.yaml (simroll.worldmodel.model.TrainConfig)."""

    steps: int = MISSING
    batch_size: int = MISSING
    learning_rate: float = MISSING
    weight_decay: float = MISSING
    condition_noise: float = MISSING
    seed: int = MISSING


@dataclass
class RoundTripBenchSchema:
    """``bench`` of configs/roundtrip.yaml (simroll.worldmodel.pipeline.BenchConfig)."""

    depth: int = MISSING
    stride: int = MISSING
    coverage: float = MISSING
    dispersion_samples: int = MISSING
    roundtrip_samples: int = MISSING
    calibrate_on: str = MISSING
    seed: int = MISSING


@dataclass
class RoundTripSchema:
    """configs/roundtrip.yaml with a preset of configs/roundtrip/ (which sets the global keys
    ``preset`` and ``splits`` and overrides some others)."""

    stage: str = MISSING
    output_dir: str = MISSING
    threads: int = MISSING
    preset: str = MISSING
    tasks: list[str] = MISSING
    object: str = MISSING
    seed: int = MISSING
    behaviour: BehaviourSchema = field(default_factory=BehaviourSchema)
    shape_components: int = MISSING
    drop_blocks: list[str] = field(default_factory=list)  # RoundTripConfig's default: none
    model: WorldModelSchema = field(default_factory=WorldModelSchema)
    train: WorldModelTrainSchema = field(default_factory=WorldModelTrainSchema)
    bench: RoundTripBenchSchema = field(default_factory=RoundTripBenchSchema)
    # open, so that a run can add a split (`+splits.ood_x.episodes=5`); RoundTripConfig.from_dict
    # refuses a split's unknown keys before any work
    splits: dict[str, Any] = MISSING
    hydra: Any = _hydra_settings("roundtrip")


SCHEMAS: dict[str, type] = {
    "eval": EvalSchema,
    "collect": CollectSchema,
    "certify": CertifySchema,
    "train": TrainSchema,
    "roundtrip": RoundTripSchema,
}


def unknown_keys(config: DictConfig | dict, schema: type, prefix: str = "") -> list[str]:
    """One message per key of ``config`` that ``schema`` lacks (open sections are not entered).

    ``config`` is a composed config, with or without its ``hydra`` section; each message names the
    key by its full dotted path and lists the keys expected beside it.
    """
    if isinstance(config, DictConfig):
        config = OmegaConf.to_container(config, resolve=False)
    hints = typing.get_type_hints(schema)
    known = [f.name for f in dataclasses.fields(schema) if f.name != "hydra"]
    problems = []
    for key, value in config.items():
        path = f"{prefix}{key}"
        if key not in hints:
            expected = [f"{prefix}{name}" for name in sorted(known)]
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {prefix + close[0]!r}?)" if close else ""
            problems.append(f"unknown key {path!r}{hint}; expected one of {expected}")
            continue
        kind = hints[key]
        if dataclasses.is_dataclass(kind) and isinstance(value, dict):
            problems += unknown_keys(value, kind, f"{path}.")
    return problems


class RejectUnknownKeys(Callback):
    """Hydra callback: exit with status 2 when the composed config has a key its schema lacks.

    Runs before a run (or a multirun) starts and again for each job, whose sweep overrides are
    applied only then; the message is one line, as for the commands' other config errors.
    """

    def __init__(self, command: str) -> None:
        if command not in SCHEMAS:
            raise ValueError(f"unknown command {command!r}; expected one of {sorted(SCHEMAS)}")
        self.command = command

    def check(self, config: DictConfig) -> None:
        problems = unknown_keys(config, SCHEMAS[self.command])
        if problems:
            print(f"simroll {self.command}: config error: {'; '.join(problems)}", file=sys.stderr)
            sys.exit(2)

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.check(config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.check(config)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.check(config)


def register_schemas() -> None:
    """Store each command's schema in Hydra's ConfigStore as ``<command>_schema``."""
    store = ConfigStore.instance()
    for command, schema in SCHEMAS.items():
        store.store(name=f"{command}_schema", node=schema)


register_schemas()  # on import: every CLI module imports this module before Hydra composes
