"""LeRobotDataset recording: episodes run by ``run_episode`` written through LeRobot's own API.

A :class:`DatasetRecorder` creates a LeRobotDataset v3.0 (``LeRobotDataset.create``) whose
features are derived from the env's observation space, watches :func:`run_episode` as one of its
observers, and turns every step into one frame (``add_frame``): the observation at step ``t``
paired with the action applied at step ``t`` (LeRobot's convention; the final observation, which
no action follows, is dropped). At the episode's end it saves the episode (``save_episode``) or
discards it (``only_success`` and the episode failed); :meth:`DatasetRecorder.finalize` closes
the dataset (``finalize``); without it the parquet files are not valid.

Keys use LeRobot's names: ``observation.images.{scene,wrist}`` (camera images, full obs mode only),
``observation.images.tactile`` (both fingers' pressure maps rendered by ``tactile_to_rgb`` and
scaled to the cameras' square size, since LeRobot's diffusion policy wants equal image shapes),
``observation.tactile`` (the force maps, flattened), ``observation.tactile_markers`` (marker
displacements, flattened), ``observation.state`` (``agent_pos``), ``observation.environment_state``
(state obs mode only), ``action`` and ``task`` (the env's task description). Evaluator data that
policies must not train on is kept out of ``observation.*``: ``eval.deformation`` per frame
(normalized deformation at that observation; LeRobot's policy factories ignore keys outside
``observation.*``/``action``), and per episode one JSON line in
``<root>/meta/simroll_episodes.jsonl`` keyed by ``episode_index`` (spec, success, DSR, peak
deformation, tolerance, termination reason and the full :class:`EpisodeRecord` JSON), appended
atomically as each episode is saved.

Runs spread over workers record through :class:`DatasetShards`, an observer factory for
:class:`~simroll.rollout.backends.EpisodeJob`: each episode it observes becomes its own small,
finalized dataset, a *shard* ``<shards>/<spec key>``, written in a temporary folder and renamed
into place in the worker before the episode's record is returned (an episode in error leaves no
shard). :func:`merge_shards` then joins the shards of a list of records, in that list's order,
into one dataset with LeRobot's ``aggregate_datasets``, and writes the merged
``simroll_episodes.jsonl`` with the new episode indices: the same dataset whatever backend ran
the episodes, and a resumed run keeps the shards of the episodes it finished.

Datasets are created through :mod:`simroll.rollout.lerobot_io`, which picks the video decoder and
keeps the video encoders and the ``datasets`` library's progress bars off the console.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import shutil
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from simroll.envs.core import CONTROL_HZ
from simroll.features import ACTION_NAMES as ACTION_NAMES
from simroll.features import ENVIRONMENT_STATE_NAMES as ENVIRONMENT_STATE_NAMES
from simroll.features import IMAGE_NAMES as IMAGE_NAMES
from simroll.features import STATE_NAMES as STATE_NAMES
from simroll.features import TACTILE_IMAGE_SIZE as TACTILE_IMAGE_SIZE

# the schema lives in simroll.features; these names stay importable from here
from simroll.features import dataset_features, observation_frame, tactile_image_size
from simroll.features import tactile_image as tactile_image
from simroll.io import append_durably, locked_append
from simroll.policies.base import LabelsActions
from simroll.rollout.episode import EnvConfig, EpisodeObserver, PolicyFactory, run_episode
from simroll.rollout.lerobot_io import (
    WRITER_MODULES,
    create_dataset,
    quiet_media_logs,
    quiet_progress,
)
from simroll.rollout.records import EpisodeRecord, EpisodeSpec
from simroll.rollout.store import write_text_atomic

ROBOT_TYPE = "simroll_floating_gripper"
EPISODES_META = Path("meta") / "simroll_episodes.jsonl"


class DatasetRecorder(EpisodeObserver):
    """Writes the episodes it observes as one LeRobotDataset under ``root`` (which must not exist).

    Pass the recorder in ``run_episode``'s ``observers``, or let :meth:`record` do it. Episodes
    that failed or raised are kept (their ``success`` is in the episode metadata) unless
    ``only_success``; an episode that ended before its first step has no frames and is never
    saved. A policy with an ``action_label`` (e.g. :class:`simroll.experts.noise.ActionNoise`) has
    that stored as each frame's ``action`` instead of the action the env executed.
    ``with_tactile_image=None`` adds ``observation.images.tactile`` only when the observations
    have camera images (``obs_mode="full"``). ``action_space``: the env's; a ``Discrete`` one
    (the clutter primitives) stores one float per frame instead of the 5-D hand action.
    ``keep_features``: store only these of the features the observations offer (``action`` and
    ``eval.deformation`` always), so that the episodes join a dataset recorded before an
    observation was added (LeRobot joins datasets of equal features only); None keeps all.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        observation_space: spaces.Dict,
        *,
        repo_id: str = "simroll/episodes",
        use_videos: bool = True,
        with_tactile_image: bool | None = None,
        only_success: bool = False,
        fps: int = CONTROL_HZ,
        robot_type: str = ROBOT_TYPE,
        action_space: spaces.Space | None = None,
        keep_features: Collection[str] | None = None,
    ) -> None:
        if not (
            isinstance(observation_space, spaces.Dict) and "agent_pos" in observation_space.spaces
        ):
            raise ValueError(
                "observation_space must be a simroll env's Dict space with 'agent_pos', "
                f"got {observation_space!r}"
            )
        self.root = Path(root)
        if self.root.exists():
            raise FileExistsError(
                f"dataset root {self.root} already exists; choose a new directory or remove it"
            )
        if with_tactile_image is None:
            with_tactile_image = "pixels" in observation_space.spaces
        self.with_tactile_image = bool(with_tactile_image)
        self._tactile_size = (
            tactile_image_size(observation_space) if self.with_tactile_image else None
        )
        self.only_success = bool(only_success)
        self.features = dataset_features(
            observation_space,
            use_videos=use_videos,
            with_tactile_image=self.with_tactile_image,
            action_space=action_space,
        )
        if keep_features is not None:
            self.features = _kept_features(self.features, keep_features)
        self._action_shape = tuple(self.features["action"]["shape"])
        self.dataset = create_dataset(
            repo_id=repo_id,
            fps=fps,
            features=self.features,
            root=self.root,
            robot_type=robot_type,
            use_videos=use_videos,
        )
        self.episodes_written = 0
        self.frames_written = 0
        self.episodes_dropped = 0
        self._pending: dict[str, Any] | None = None  # observation waiting for its action
        self._frames = 0  # frames buffered for the current episode
        self._policy: Any = None  # the policy of the episode being recorded (for action_label)

    # ------------------------------------------------------------------ observer protocol
    def on_reset(self, env: gym.Env, obs: dict, info: dict, policy: Any) -> None:
        if self._frames:
            raise RuntimeError(
                "DatasetRecorder: a new episode started before the previous one ended; "
                "each run_episode must end (on_end) before the next one resets"
            )
        self._policy = policy
        self._pending = self._observation(obs, info)

    def on_step(self, env: gym.Env, obs: dict, info: dict, action: np.ndarray) -> None:
        if self._pending is None:
            raise RuntimeError("DatasetRecorder.on_step was called before any on_reset")
        frame = self._pending
        label = self._policy.action_label if isinstance(self._policy, LabelsActions) else None
        if label is not None:
            action = label
        frame["action"] = np.asarray(action, dtype=np.float32).reshape(self._action_shape).copy()
        self.dataset.add_frame(frame)
        self._frames += 1
        self._pending = self._observation(obs, info)

    def on_end(self, record: EpisodeRecord) -> None:
        self.finish(record)

    def _observation(self, obs: dict, info: dict) -> dict[str, Any]:
        frame = observation_frame(obs, self._tactile_size)
        return {
            **{key: value for key, value in frame.items() if key in self.features},
            "eval.deformation": np.array(
                [info.get("eval", {}).get("deformation", np.nan)], dtype=np.float32
            ),
            "task": str(obs["task_description"]),
        }

    def finish(self, record: EpisodeRecord) -> bool:
        """Save (True) or discard (False) the episode just observed; ``record`` is its
        EpisodeRecord. Called by ``on_end``."""
        frames, self._frames, self._pending, self._policy = self._frames, 0, None, None
        if frames == 0 or (self.only_success and not record.success):
            if frames:
                self.dataset.clear_episode_buffer()
            self.episodes_dropped += 1
            return False
        episode_index = self.dataset.meta.total_episodes
        # Serial encoding: a process pool per episode costs more than it saves on small images,
        # and it would fork a process that holds a GL context.
        with quiet_progress():
            self.dataset.save_episode(parallel_encoding=False)
        _append_line(self.root / EPISODES_META, _episode_row(episode_index, frames, record))
        self.episodes_written += 1
        self.frames_written += frames
        return True

    def record(
        self,
        spec: EpisodeSpec,
        policy_factory: PolicyFactory,
        *,
        env: gym.Env | None = None,
        env_config: EnvConfig | None = None,
        **episode_kwargs: Any,
    ) -> tuple[EpisodeRecord, bool]:
        """Run ``spec`` through ``run_episode``, recording it; returns (record, whether kept)."""
        written = self.episodes_written
        record = run_episode(
            spec,
            policy_factory,
            env=env,
            env_config=env_config,
            observers=[self],
            **episode_kwargs,
        )
        return record, self.episodes_written > written

    def finalize(self) -> None:
        """Close the dataset (idempotent); an unfinished episode in the buffer is discarded."""
        if self._frames:
            self.dataset.clear_episode_buffer()
            self._frames, self._pending = 0, None
        with quiet_progress():
            self.dataset.finalize()
        _remove_empty_dirs(self.root / "images")  # LeRobot's frame staging, emptied by encoding

    def __enter__(self) -> DatasetRecorder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.finalize()


SHARD_SUFFIX = ".tmp"  # a shard being written: <shards>/.<name>.<pid>.tmp
# join_datasets joins more sources than this in groups (see there)
JOIN_GROUP_LIMIT = 32


def shard_name(spec: EpisodeSpec) -> str:
    """The folder name of ``spec``'s shard: its key with ``/`` turned into ``_``."""
    return spec.key.replace("/", "_")


@dataclass(frozen=True)
class DatasetShards:
    """Observer factory: every episode becomes its own finalized dataset ``root / shard_name``
    (see the module docstring); ``repo_id`` and the recording settings as
    :class:`DatasetRecorder`'s. With ``only_success`` a failed episode leaves no shard (nothing
    is encoded for it). Must pickle: it travels to the workers in the job."""

    root: Path
    repo_id: str = "simroll/episodes"
    use_videos: bool = True
    with_tactile_image: bool | None = None
    only_success: bool = False
    keep_features: tuple[str, ...] | None = None
    # imported once for all vector workers (forkserver preload) instead of once in each
    worker_modules: ClassVar[tuple[str, ...]] = WRITER_MODULES

    def path(self, spec: EpisodeSpec) -> Path:
        return Path(self.root) / shard_name(spec)

    def __call__(self, spec: EpisodeSpec) -> ShardWriter:
        return ShardWriter(self, spec)

    def stored_record(self, spec: EpisodeSpec) -> EpisodeRecord | None:
        """The record ``spec``'s finished shard holds; None without a readable shard."""
        try:
            rows = load_episode_meta(self.path(spec))
            return episode_record(rows[0])
        except (OSError, ValueError, KeyError):
            return None

    def has_shard_of(self, record: EpisodeRecord) -> bool:
        """Whether a finished shard holds ``record``'s episode (the same receipt)."""
        stored = self.stored_record(record.spec)
        return stored is not None and stored.receipt == record.receipt


class ShardWriter(EpisodeObserver):
    """Records one episode into a temporary dataset, finalizes it and renames it into place as
    ``shards.path(spec)`` when the episode ended without error (and succeeded, with
    ``only_success``); otherwise removes it."""

    def __init__(self, shards: DatasetShards, spec: EpisodeSpec) -> None:
        self.shards = shards
        self.final = shards.path(spec)
        self.staging = self.final.parent / f".{self.final.name}.{os.getpid()}{SHARD_SUFFIX}"
        self.recorder: DatasetRecorder | None = None

    def on_reset(self, env: gym.Env, obs: dict, info: dict, policy: Any) -> None:
        if self.staging.exists():  # left by a killed run of this spec in a process of this pid
            shutil.rmtree(self.staging)
        self.staging.parent.mkdir(parents=True, exist_ok=True)
        self.recorder = DatasetRecorder(
            self.staging,
            env.observation_space,
            repo_id=self.shards.repo_id,
            use_videos=self.shards.use_videos,
            with_tactile_image=self.shards.with_tactile_image,
            only_success=self.shards.only_success,
            action_space=env.action_space,
            keep_features=self.shards.keep_features,
        )
        self.recorder.on_reset(env, obs, info, policy)

    def on_step(self, env: gym.Env, obs: dict, info: dict, action: np.ndarray) -> None:
        self.recorder.on_step(env, obs, info, action)

    def on_end(self, record: EpisodeRecord) -> None:
        recorder, self.recorder = self.recorder, None
        if recorder is None:  # the episode raised before its reset
            return
        try:
            kept = record.error is None and recorder.finish(record)
            recorder.finalize()
            if kept:
                if self.final.exists():  # an earlier try of this episode
                    shutil.rmtree(self.final)
                self.staging.rename(self.final)
        finally:
            if self.staging.exists():
                shutil.rmtree(self.staging)


def _kept_features(
    features: dict[str, dict[str, Any]], keep: Collection[str]
) -> dict[str, dict[str, Any]]:
    """``features`` restricted to ``keep`` plus the per-frame columns every simroll dataset has;
    ValueError naming any kept key the observations do not offer."""
    if isinstance(keep, str):
        raise ValueError(f"keep_features must be a collection of feature keys, got {keep!r}")
    unknown = sorted(set(keep) - set(features))
    if unknown:
        raise ValueError(
            f"keep_features: {unknown} are not features of these observations; "
            f"expected some of {sorted(features)}"
        )
    always = {"action", "eval.deformation"}
    return {key: spec for key, spec in features.items() if key in keep or key in always}


def merge_shards(
    shards: DatasetShards, records: Sequence[EpisodeRecord], root: str | os.PathLike[str]
) -> tuple[int, int]:
    """Join the shards of ``records``, in that order, into one dataset at ``root`` (replacing
    what is there, via a temporary folder and a rename) with LeRobot's ``aggregate_datasets``;
    episode ``i`` of the result is ``records[i]``. Returns (episodes, frames).

    Every record must have its shard (:meth:`DatasetShards.has_shard_of`), else ValueError."""
    if not records:
        raise ValueError("merge_shards needs at least one record")
    missing = [r.spec.key for r in records if not shards.has_shard_of(r)]
    if missing:
        raise ValueError(
            f"{len(missing)} episode(s) have no shard under {shards.root} holding their record "
            f"(first: {missing[0]}); expected one finished shard per record"
        )
    sources = [shards.path(record.spec) for record in records]
    return join_datasets(sources, root, repo_id=shards.repo_id)


def join_datasets(
    sources: Sequence[str | os.PathLike[str]],
    root: str | os.PathLike[str],
    *,
    repo_id: str,
    tags: Sequence[Mapping[str, Any] | None] | None = None,
) -> tuple[int, int]:
    """Join the LeRobotDatasets at ``sources`` (same features), in that order, into one dataset
    at ``root`` with LeRobot's ``aggregate_datasets`` (replacing what is there, via a temporary
    folder and a rename), and write its ``simroll_episodes.jsonl``: every source's rows in
    episode order, re-indexed, with ``tags[i]``'s entries added to source ``i``'s rows where a row
    does not already have them (a DAgger round marks the episodes it adds). Every source must
    have the rows of all its episodes. Returns (episodes, frames).

    More than :data:`JOIN_GROUP_LIMIT` sources are joined in groups of about the square root of
    their number (in a temporary folder beside ``root``), and the groups then joined: LeRobot
    appends each source by rewriting the growing data and video files, so one flat join costs
    time quadratic in the number of sources. The result holds the same episodes and frames."""
    from lerobot.datasets.aggregate import aggregate_datasets

    if not sources:
        raise ValueError("join_datasets needs at least one source dataset")
    tags = list(tags) if tags is not None else [None] * len(sources)
    if len(tags) != len(sources):
        raise ValueError(f"got {len(tags)} tags for {len(sources)} source datasets")
    sources = [Path(source) for source in sources]
    _check_same_features(sources)
    if len(sources) > JOIN_GROUP_LIMIT:
        return _join_in_groups(sources, Path(root), repo_id, tags)
    source_rows = []
    for source in sources:
        rows = load_episode_meta(source)
        expected = json.loads((source / "meta" / "info.json").read_text())["total_episodes"]
        if sorted(rows) != list(range(expected)):
            raise ValueError(
                f"{source / EPISODES_META} has rows for episodes {sorted(rows)[:5]}..., "
                f"expected one row for each of the dataset's {expected} episodes"
            )
        source_rows.append([rows[index] for index in range(expected)])
    root = Path(root)
    staging = root.parent / f".{root.name}{SHARD_SUFFIX}"
    if staging.exists():
        shutil.rmtree(staging)
    quiet_media_logs()
    # aggregate_datasets draws tqdm bars on stderr (its errors are raised, not printed) and logs
    # each stage at INFO, which a Hydra command shows
    logger = logging.getLogger("lerobot.datasets.aggregate")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        with quiet_progress(), contextlib.redirect_stderr(io.StringIO()):
            aggregate_datasets(
                repo_ids=[repo_id] * len(sources),
                aggr_repo_id=repo_id,
                roots=sources,
                aggr_root=staging,
            )
    finally:
        logger.setLevel(level)
    joined = []
    for rows, tag in zip(source_rows, tags, strict=True):
        for row in rows:
            joined.append({**(tag or {}), **row, "episode_index": len(joined)})
    write_text_atomic(staging / EPISODES_META, "".join(_json_line(row) for row in joined))
    _remove_empty_dirs(staging / "images")
    if root.exists():
        shutil.rmtree(root)
    staging.rename(root)
    return len(joined), sum(int(row["frames"]) for row in joined)


class DatasetFeaturesError(ValueError):
    """Two datasets that are to be joined have different features."""


def _check_same_features(sources: Sequence[Path]) -> None:
    """DatasetFeaturesError naming what differs where a source's features cannot join the first
    source's by LeRobot's own test (``features_equal_for_merge``): ``aggregate_datasets`` would
    refuse too, but late and with both feature dictionaries in full."""
    from lerobot.datasets.feature_utils import features_equal_for_merge

    def features(source: Path) -> dict[str, Any]:
        return json.loads((source / "meta" / "info.json").read_text())["features"]

    first, first_features = sources[0], features(sources[0])
    for source in sources[1:]:
        other = features(source)
        if features_equal_for_merge(first_features, other):
            continue
        differences = [
            f"{label}: {keys}"
            for label, keys in (
                (f"only in {first}", sorted(set(first_features) - set(other))),
                (f"only in {source}", sorted(set(other) - set(first_features))),
            )
            if keys
        ]
        for key in sorted(set(first_features) & set(other)):
            a, b = first_features[key], other[key]
            changed = [
                f"{field} {a.get(field)!r} vs {b.get(field)!r}"
                for field in ("dtype", "shape", "names")
                if a.get(field) != b.get(field)
            ]
            if changed:
                differences.append(f"{key}: {', '.join(changed)}")
        raise DatasetFeaturesError(
            f"{source} cannot be joined with {first}: their features differ "
            f"({'; '.join(differences) or 'in their other settings'}); LeRobot joins datasets "
            "of equal features only"
        )


def _join_in_groups(
    sources: list[Path], root: Path, repo_id: str, tags: list[Mapping[str, Any] | None]
) -> tuple[int, int]:
    """:func:`join_datasets` of many sources: each group of about sqrt(n) joined on its own,
    then the groups joined, in order."""
    size = math.ceil(math.sqrt(len(sources)))
    parts_dir = root.parent / f".{root.name}.parts{SHARD_SUFFIX}"
    if parts_dir.exists():  # left by a stopped join
        shutil.rmtree(parts_dir)
    parts_dir.mkdir(parents=True)
    try:
        parts = []
        for number, start in enumerate(range(0, len(sources), size)):
            part = parts_dir / f"{number:05d}"
            group = slice(start, start + size)
            join_datasets(sources[group], part, repo_id=repo_id, tags=tags[group])
            parts.append(part)
        return join_datasets(parts, root, repo_id=repo_id)
    finally:
        shutil.rmtree(parts_dir, ignore_errors=True)


def _remove_empty_dirs(top: Path) -> None:
    if not top.is_dir():
        return
    for directory, _, _ in sorted(os.walk(top), key=lambda entry: -len(entry[0])):
        if not any(Path(directory).iterdir()):
            Path(directory).rmdir()


def _episode_row(episode_index: int, frames: int, record: EpisodeRecord) -> dict[str, Any]:
    payload = json.loads(record.to_json())  # non-finite floats already spelled as strings
    return {
        "episode_index": episode_index,
        "frames": frames,
        "spec_key": record.spec.key,
        "spec": payload["spec"],
        "success": record.success,
        "dsr_success": record.dsr_success,
        "peak_deformation": payload["peak_deformation"],
        "tolerance": payload["tolerance"],
        "termination_reason": record.termination_reason,
        "record": payload,
    }


def _json_line(row: Mapping[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, separators=(",", ":")) + "\n"


def _append_line(path: Path, row: dict[str, Any]) -> None:
    """Append one JSON line durably, under the file's lock (:mod:`simroll.io`)."""
    with locked_append(path) as fd:
        append_durably(fd, _json_line(row).encode(), path)


def load_episode_meta(root: str | os.PathLike[str]) -> dict[int, dict[str, Any]]:
    """The per-episode rows of ``<root>/meta/simroll_episodes.jsonl``, by ``episode_index``."""
    path = Path(root) / EPISODES_META
    rows: dict[int, dict[str, Any]] = {}
    for line_number, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            row = json.loads(line)
            rows[int(row["episode_index"])] = row
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{line_number}: not an episode row: {exc}") from exc
    return rows


def episode_record(row: Mapping[str, Any]) -> EpisodeRecord:
    """The :class:`EpisodeRecord` stored in an episode row (its receipt is checked)."""
    return EpisodeRecord.from_json(json.dumps(row["record"]))
