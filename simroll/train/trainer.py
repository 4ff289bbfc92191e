"""Trains a LeRobot policy on a simroll LeRobotDataset and saves it in LeRobot's pretrained format.

One function, :func:`train`, does what ``simroll train`` runs: build the policy config
(``make_policy_config``, no hub weights), restrict its inputs to the chosen dataset features,
load the dataset with the policy's own observation/action horizons (``resolve_delta_timestamps``
semantics), build the policy (``make_policy``) and its normalising pre/post processors from the
dataset's statistics (``make_pre_post_processors``), and optimise with the policy's optimizer and
scheduler presets. Every ``log_every`` steps it appends a row to ``metrics.csv``; at each
checkpoint it writes ``checkpoints/<step>/`` and ``checkpoints/last/`` with ``config.json``,
``model.safetensors`` and the processors (safetensors + JSON, never pickles), and
``metrics.json`` with the run summary. Data order and initialisation are seeded.

With ``ema_decay`` set, an exponential moving average of the weights (diffusers' ``EMAModel``,
with the warm-up of Diffusion Policy: decay ``1 - (1 + step)^-0.75`` capped at ``ema_decay``) is
kept alongside the trained weights, and checkpoints hold the averaged weights: a diffusion policy
samples much smoother actions from them than from the last optimiser step's.

With ``init_from`` the policy starts from the weights of an earlier checkpoint of the same recipe
(fine-tuning, or continuing a run with a fresh learning-rate schedule) instead of its random
initialisation.

With ``task_weights`` (``{"squeeze": 3.0}``) frames are drawn with replacement, each with a
probability proportional to its weight (torch's ``WeightedRandomSampler``, seeded), so a task
whose decisive phase is short gets more of the batches; without it every frame is drawn once
per epoch.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml
from tqdm import tqdm

from simroll.checks import is_number
from simroll.features import ACTION_KEY, GOAL_LABEL_KEY, GOAL_MASK_KEY, STATE_KEY
from simroll.io import write_json_atomic, write_text_atomic
from simroll.rollout.lerobot_io import open_dataset
from simroll.train.goal_labels import GOAL_TASKS, GoalTable, episode_goals
from simroll.train.table_cache import cache_columns
from simroll.train.video_cache import cache_videos


class TrainingDataError(ValueError):
    """The dataset lacks a feature the policy is configured to read."""


def task_weight_table(ds_meta, task_weights: Mapping[str, float]) -> dict[int, float]:
    """Each task index's sampling weight: the product of ``task_weights[key]`` over the keys its
    task string contains (case-insensitive), 1 when none does. A key no task contains, or a
    weight that is not a positive number, raises ``ValueError`` naming it (``simroll train``
    checks this before DAgger's first rollouts)."""
    if not isinstance(task_weights, Mapping):
        raise ValueError(
            "task_weights must be a mapping {instruction substring: weight}, got "
            f"{task_weights!r}"
        )
    tasks = {
        int(index): str(task)
        for task, index in zip(ds_meta.tasks.index, ds_meta.tasks["task_index"], strict=True)
    }
    table = dict.fromkeys(tasks, 1.0)
    for key, weight in task_weights.items():
        if not (is_number(weight) and weight > 0):
            raise ValueError(f"task_weights[{key!r}] must be a number > 0, got {weight!r}")
        matched = [index for index, task in tasks.items() if str(key).lower() in task.lower()]
        if not matched:
            raise ValueError(
                f"task_weights key {key!r} is in no task of the dataset; its tasks are "
                f"{sorted(tasks.values())}"
            )
        for index in matched:
            table[index] *= float(weight)
    return table


def check_task_weights(cfg: TrainConfig) -> None:
    """Raise ``ValueError`` if ``cfg.task_weights`` names no task of ``cfg.dataset_root`` or has
    a bad weight (a missing dataset is left for :func:`train` to report)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

    root = Path(cfg.dataset_root)
    if (root / "meta" / "info.json").is_file():
        meta = LeRobotDatasetMetadata(f"simroll/{root.name}", root=root)
        task_weight_table(meta, cfg.task_weights)


def frame_weights(dataset, ds_meta, task_weights: Mapping[str, float]) -> torch.Tensor:
    """Each frame's sampling weight, its task's in :func:`task_weight_table`."""
    table = task_weight_table(ds_meta, task_weights)
    task_index = torch.as_tensor(dataset.hf_dataset["task_index"]).long()
    lookup = torch.tensor([table.get(i, 1.0) for i in range(max(table) + 1)], dtype=torch.double)
    return lookup[task_index]


def frame_sampler(dataset, ds_meta, task_weights: dict[str, float], generator: torch.Generator):
    """An epoch's worth of frames drawn with replacement by :func:`frame_weights` (torch's
    ``WeightedRandomSampler``); None without ``task_weights`` (the loader shuffles instead)."""
    if not task_weights:
        return None
    weights = frame_weights(dataset, ds_meta, task_weights)
    return torch.utils.data.WeightedRandomSampler(
        weights, num_samples=len(weights), replacement=True, generator=generator
    )


@dataclass
class TrainConfig:
    dataset_root: str
    output_dir: str
    policy_type: str = "diffusion"
    input_features: list[str] = field(default_factory=lambda: [STATE_KEY])
    policy_overrides: dict[str, Any] = field(default_factory=dict)
    steps: int = 1000
    batch_size: int = 64
    seed: int = 0
    log_every: int = 50
    checkpoint_every: int = 1000
    num_workers: int = 0
    threads: int = 1
    memoize: bool = True  # keep items in memory across epochs; cached video and table reads
    ema_decay: float | None = None  # checkpoints hold an EMA of the weights (see module doc)
    init_from: str | None = None  # a checkpoint of the same architecture to fine-tune
    # sampling weight of the frames whose task (instruction) contains a key; others weigh 1, a
    # frame matching several keys weighs their product (see frame_weights)
    task_weights: dict[str, float] = field(default_factory=dict)
    # LeRobot's cosine schedule with warm-up shrinks a decay longer than `steps` (and its
    # warm-up) to fit the run; False keeps the configured schedule, so a run can stop part-way
    # along a longer one (see lr_schedule)
    fit_lr_schedule: bool = True


def lr_schedule(scheduler_config, steps: int, fit: bool = True) -> tuple[int, dict[str, Any]]:
    """The ``num_training_steps`` to build ``scheduler_config`` with, and the schedule the run
    then follows, as ``metrics.json`` records it.

    LeRobot's ``CosineDecayWithWarmupSchedulerConfig`` scales its warm-up by
    ``steps / num_decay_steps`` and decays over ``steps`` when ``steps < num_decay_steps``, and
    only says so in a log line; a config's decay steps then are not the ones trained with. With
    ``fit=False`` it is built for its full decay, which ``steps`` may stop short of. Diffusion
    Policy's diffusers schedule always spans ``steps``, and ACT trains at a constant rate;
    ``fit=False`` is refused for them (ValueError)."""
    from lerobot.optim.schedulers import CosineDecayWithWarmupSchedulerConfig

    if scheduler_config is None:
        if not fit:
            raise ValueError(
                "fit_lr_schedule=false keeps a decaying schedule; this policy trains at a "
                "constant learning rate"
            )
        return steps, {"type": None}
    kind = type(scheduler_config).__name__
    if not isinstance(scheduler_config, CosineDecayWithWarmupSchedulerConfig):
        if not fit:
            raise ValueError(
                f"fit_lr_schedule=false applies to LeRobot's cosine_decay_with_warmup schedule "
                f"(SimVLA, the world-action model); this policy's schedule is {kind}, which "
                "always spans the run's steps"
            )
        return steps, {"type": kind, "steps": steps}
    warmup, decay = scheduler_config.num_warmup_steps, scheduler_config.num_decay_steps
    fitted = fit and steps < decay
    schedule = {
        "type": kind,
        "peak_lr": scheduler_config.peak_lr,
        "decay_lr": scheduler_config.decay_lr,
        "warmup_steps": int(warmup * (steps / decay)) if fitted else warmup,  # LeRobot's rounding
        "decay_steps": steps if fitted else decay,
        "configured_warmup_steps": warmup,
        "configured_decay_steps": decay,
        "fitted_to_steps": fitted,
    }
    return (steps if fit else max(steps, decay)), schedule


def check_lr_schedule(cfg: TrainConfig) -> None:
    """Refuse (ValueError) ``fit_lr_schedule=False`` for a policy whose schedule cannot keep its
    own length, before any data is read or rollout runs."""
    if cfg.fit_lr_schedule:
        return
    lr_schedule(_recipe_config(cfg).get_scheduler_preset(), cfg.steps, fit=False)


def _recipe_config(cfg: TrainConfig):
    """LeRobot's config of ``cfg``'s policy type with the recipe's overrides (CPU, no hub
    weights), before any dataset fills in its features."""
    from lerobot.policies.factory import make_policy_config

    from simroll.policies.lerobot import register_policy_types

    register_policy_types()  # policy types outside LeRobot itself (simvla, plugins)
    overrides = {"device": "cpu", "push_to_hub": False, **cfg.policy_overrides}
    if cfg.policy_type in ("diffusion", "act"):
        overrides.setdefault("pretrained_backbone_weights", None)
    return make_policy_config(cfg.policy_type, **overrides)


def _policy_config(cfg: TrainConfig, ds_meta):
    from lerobot.utils.feature_utils import dataset_to_policy_features

    policy_config = _recipe_config(cfg)
    mapping = getattr(policy_config, "normalization_mapping", None)
    if isinstance(mapping, dict) and "ENV" not in mapping and "STATE" in mapping:
        # LeRobot leaves features of type ENV unnormalized when the mapping has no ENV entry:
        # object positions in metres (~1e-2) then barely move the network. Normalize them like
        # the robot state.
        policy_config.normalization_mapping = {**mapping, "ENV": mapping["STATE"]}
    features = dataset_to_policy_features(ds_meta.features)
    missing = [key for key in cfg.input_features if key not in features]
    if missing:
        raise TrainingDataError(
            f"dataset {cfg.dataset_root} has no feature(s) {missing}; it has "
            f"{sorted(k for k in features if k.startswith('observation'))}"
        )
    if ACTION_KEY not in features:
        raise TrainingDataError(f"dataset {cfg.dataset_root} has no {ACTION_KEY!r} feature")
    policy_config.input_features = {key: features[key] for key in cfg.input_features}
    policy_config.output_features = {ACTION_KEY: features[ACTION_KEY]}
    return policy_config


def _delta_timestamps(policy_config, cfg: TrainConfig, fps: int) -> dict[str, list[float]]:
    deltas: dict[str, list[float]] = {}
    if policy_config.action_delta_indices is not None:
        deltas[ACTION_KEY] = [i / fps for i in policy_config.action_delta_indices]
    if policy_config.observation_delta_indices is not None:
        for key in cfg.input_features:
            deltas[key] = [i / fps for i in policy_config.observation_delta_indices]
    return deltas


class MemoizedDataset(torch.utils.data.Dataset):
    """Keeps each item the LeRobotDataset returns, so epochs after the first skip decoding and
    timestamp queries (the small state datasets fit in memory many times over). Keys in ``drop``
    (camera streams the policy does not read) are removed before an item is kept."""

    def __init__(self, dataset, drop: Sequence[str] = ()):
        self.dataset = dataset
        self.drop = tuple(drop)
        self.items: list[Any] = [None] * len(dataset)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int):
        if self.items[index] is None:
            item = self.dataset[index]
            for key in self.drop:
                item.pop(key, None)
                item.pop(f"{key}_is_pad", None)
            self.items[index] = item
        return self.items[index]


def dataset_env(root: Path) -> dict[str, Any]:
    """The env settings a ``simroll collect`` dataset was recorded with (gripper mode, obs mode,
    image size, and whether it holds the rendered tactile image), from its
    ``meta/simroll_collect.yaml``; empty for other datasets."""
    path = root / "meta" / "simroll_collect.yaml"
    if not path.is_file():
        return {}
    collect = yaml.safe_load(path.read_text()) or {}
    env = collect.get("env") or {}
    recorded = {key: env[key] for key in ("gripper_mode", "obs_mode", "image_size") if key in env}
    if "tactile_image" in collect:
        recorded["tactile_image"] = bool(collect["tactile_image"])
    return recorded


def save_checkpoint(
    directory: Path, policy, preprocessor, postprocessor, env: dict[str, Any] | None = None
) -> None:
    """Write a LeRobot checkpoint atomically, plus ``ENV_RECORD`` (the dataset's env settings:
    ``load_policy`` checks them, since a gripper command means different things in different
    modes, and ``simroll eval`` applies them). The result must pass the checks every loader runs
    first (``validate_checkpoint``), so nothing is saved that simroll would refuse to load."""
    from simroll.policies.checkpoint import ENV_RECORD, validate_checkpoint

    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    policy.save_pretrained(tmp)
    preprocessor.save_pretrained(tmp)
    postprocessor.save_pretrained(tmp)
    if env:
        write_text_atomic(tmp / ENV_RECORD, json.dumps(env, indent=2, sort_keys=True) + "\n")
    validate_checkpoint(tmp)
    shutil.rmtree(directory, ignore_errors=True)
    tmp.replace(directory)


def _pretrained_policy(policy_config, path: Path):
    """The policy of ``policy_config`` with the weights of the checkpoint at ``path`` (every
    tensor must match: a fine-tuning run keeps the architecture of what it starts from)."""
    from lerobot.policies.factory import get_policy_class

    from simroll.policies.checkpoint import PolicyLoadError, validate_checkpoint

    if not (path / "model.safetensors").is_file():
        raise TrainingDataError(f"init_from={path} is not a checkpoint (no model.safetensors)")
    try:
        validate_checkpoint(path)  # only the weights are read, but refuse what load_policy would
    except PolicyLoadError as exc:
        raise TrainingDataError(f"init_from={path}: {exc}") from exc
    policy_class = get_policy_class(policy_config.type)
    try:
        return policy_class.from_pretrained(path, config=policy_config, strict=True)
    except RuntimeError as exc:  # load_state_dict's missing/unexpected/size-mismatch report
        if getattr(policy_config, "goal_loss_weight", 0) > 0:
            return _with_new_goal_head(policy_class, policy_config, path)
        raise TrainingDataError(
            f"init_from={path} does not fit the {policy_config.type} recipe: {exc}"
        ) from exc


def _with_new_goal_head(policy_class, policy_config, path: Path):
    """A fine-tune that adds the auxiliary goal head (``goal_loss_weight`` > 0) and, with
    ``goal_conditioning``, the decoder's map of its estimate, to a checkpoint trained without
    them: every other tensor must match; the new ones start freshly initialised."""
    from safetensors.torch import load_file

    policy = policy_class(policy_config)
    try:  # strict=False still raises on a tensor of another shape
        result = policy.load_state_dict(load_file(path / "model.safetensors"), strict=False)
    except RuntimeError as exc:
        raise TrainingDataError(
            f"init_from={path} does not fit the {policy_config.type} recipe: {exc}"
        ) from exc
    new = ("model.goal_head.", "model.goal_in.")
    extra = [key for key in result.missing_keys if not key.startswith(new)]
    if extra or result.unexpected_keys:
        raise TrainingDataError(
            f"init_from={path} does not fit the {policy_config.type} recipe: missing "
            f"{extra}, unexpected {result.unexpected_keys}"
        )
    return policy


def train(cfg: TrainConfig, progress: bool = True) -> dict[str, Any]:
    """Train and checkpoint; returns the summary written to ``metrics.json``."""
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata
    from lerobot.policies.factory import make_policy, make_pre_post_processors

    if cfg.steps < 1 or cfg.batch_size < 1:
        raise ValueError(f"steps and batch_size must be >= 1, got {cfg.steps}, {cfg.batch_size}")
    if cfg.ema_decay is not None and not 0.0 < cfg.ema_decay < 1.0:
        raise ValueError(f"ema_decay must be in (0, 1) or None, got {cfg.ema_decay!r}")
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    root = Path(cfg.dataset_root)
    if not (root / "meta" / "info.json").is_file():
        raise TrainingDataError(
            f"{root} is not a LeRobotDataset (no meta/info.json); create one with `simroll collect`"
        )
    repo_id = f"simroll/{root.name}"
    ds_meta = LeRobotDatasetMetadata(repo_id, root=root)
    policy_config = _policy_config(cfg, ds_meta)
    dataset = open_dataset(  # simroll's decoder choice (lerobot_io), without LeRobot's noise
        repo_id,
        root=root,
        delta_timestamps=_delta_timestamps(policy_config, cfg, ds_meta.fps),
    )
    if cfg.init_from is None:
        policy = make_policy(policy_config, ds_meta=ds_meta)
    else:
        policy = _pretrained_policy(policy_config, Path(cfg.init_from))
    preprocessor, postprocessor = make_pre_post_processors(
        policy_config, dataset_stats=ds_meta.stats
    )
    optimizer = policy_config.get_optimizer_preset().build(policy.get_optim_params())
    scheduler_config = policy_config.get_scheduler_preset()
    built_for, schedule = lr_schedule(scheduler_config, cfg.steps, cfg.fit_lr_schedule)
    scheduler = (
        scheduler_config.build(optimizer, built_for) if scheduler_config is not None else None
    )
    ema = None
    if cfg.ema_decay is not None:
        from diffusers.training_utils import EMAModel

        ema = EMAModel(policy.parameters(), decay=cfg.ema_decay, use_ema_warmup=True, power=0.75)
    generator = torch.Generator().manual_seed(cfg.seed)
    unread = [key for key in ds_meta.camera_keys if key not in policy_config.input_features]
    if cfg.memoize:  # each video file decoded once, in order; unread cameras not at all
        cache_videos(dataset, skip=unread)
        cache_columns(dataset)  # table queries answered from columns loaded once
    source = MemoizedDataset(dataset, drop=unread) if cfg.memoize else dataset
    goal_table = None
    if getattr(policy_config, "goal_loss_weight", 0) > 0:
        goals = episode_goals(root)
        if not goals:
            raise TrainingDataError(
                f"goal_loss_weight > 0 needs episodes of {list(GOAL_TASKS)} in {root}; it has none"
            )
        goal_table = GoalTable(goals, ds_meta.total_episodes)
    offset_labels = getattr(policy_config, "goal_source", "estimate") == "label_offset"
    sampler = frame_sampler(dataset, ds_meta, cfg.task_weights, generator)
    loader = torch.utils.data.DataLoader(
        source,
        batch_size=cfg.batch_size,
        shuffle=sampler is None,
        sampler=sampler,
        generator=generator,
        num_workers=cfg.num_workers,
        drop_last=len(dataset) >= cfg.batch_size,
    )
    output = Path(cfg.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    metrics_path = output / "metrics.csv"
    n_params = sum(p.numel() for p in policy.parameters())
    grad_clip = getattr(policy_config, "optimizer_grad_clip_norm", 10.0) or 10.0
    policy.train()
    losses: list[float] = []
    goal_losses: list[float] = []
    start = time.perf_counter()
    step = 0
    bar = tqdm(
        total=cfg.steps, desc=f"train {cfg.policy_type}", disable=not progress, dynamic_ncols=True
    )
    with metrics_path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["step", "loss", "lr", "seconds"])
        while step < cfg.steps:
            for batch in loader:
                labels = None
                if goal_table is not None:  # offsets from the hand's raw (latest) observed x, y
                    hand = batch[STATE_KEY] if offset_labels else None
                    if hand is not None and hand.ndim == 3:  # an observation history
                        hand = hand[:, -1]
                    labels = goal_table(batch["episode_index"], hand)
                batch = preprocessor(batch)
                if labels is not None:
                    batch[GOAL_LABEL_KEY], batch[GOAL_MASK_KEY] = labels
                loss, info = policy.forward(batch)
                if info and "goal_loss" in info:
                    goal_losses.append(info["goal_loss"])
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), grad_clip)
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                if ema is not None:
                    ema.step(policy.parameters())
                step += 1
                value = float(loss.detach())
                if not math.isfinite(value):
                    raise FloatingPointError(f"training loss became {value} at step {step}")
                losses.append(value)
                bar.update(1)
                if step % cfg.log_every == 0 or step == cfg.steps:
                    recent = sum(losses[-cfg.log_every :]) / len(losses[-cfg.log_every :])
                    writer.writerow(
                        [step, recent, optimizer.param_groups[0]["lr"], time.perf_counter() - start]
                    )
                    handle.flush()
                    bar.set_postfix(loss=f"{recent:.4f}")
                if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                    policy.eval()
                    if ema is not None:  # save the averaged weights, then train on
                        ema.store(policy.parameters())
                        ema.copy_to(policy.parameters())
                    save_checkpoint(
                        output / "checkpoints" / f"{step:06d}",
                        policy,
                        preprocessor,
                        postprocessor,
                        dataset_env(root),
                    )
                    if ema is not None:
                        ema.restore(policy.parameters())
                    policy.train()
                if step >= cfg.steps:
                    break
    bar.close()
    last = output / "checkpoints" / "last"
    shutil.rmtree(last, ignore_errors=True)
    shutil.copytree(output / "checkpoints" / f"{step:06d}", last)
    window = max(1, min(len(losses) // 10, 100))
    summary = {
        "policy_type": cfg.policy_type,
        "parameters": n_params,
        "steps": step,
        "batch_size": cfg.batch_size,
        "dataset": str(root),
        "dataset_episodes": ds_meta.total_episodes,
        "dataset_frames": ds_meta.total_frames,
        "input_features": cfg.input_features,
        "first_loss": sum(losses[:window]) / window,
        "final_loss": sum(losses[-window:]) / window,
        "seconds": time.perf_counter() - start,
        "seconds_per_step": (time.perf_counter() - start) / step,
        "seed": cfg.seed,
        "ema_decay": cfg.ema_decay,
        "lr_schedule": schedule,
        "init_from": cfg.init_from,
        "checkpoint": str(last),
    }
    if goal_losses:  # the auxiliary head's error (goal_loss_scale units), first and last window
        summary["first_goal_loss"] = sum(goal_losses[:window]) / window
        summary["final_goal_loss"] = sum(goal_losses[-window:]) / window
    write_json_atomic(output / "metrics.json", summary)
    write_text_atomic(output / "train_config.json", json.dumps(cfg.__dict__, indent=2, default=str))
    return summary
