"""LeRobotDataset recording: episodes run by ``run_episode`` written through LeRobot's own API.

A :class:`DatasetRecorder` creates a LeRobotDataset v3.0 (``LeRobotDataset.create``) whose
features are derived from the env's observation space, plugs into :func:`run_episode` as its
``on_step`` callback, and turns every step into one frame (``add_frame``): the observation at step
``t`` paired with the action applied at step ``t`` (LeRobot's convention; the final observation,
which no action follows, is dropped). :meth:`DatasetRecorder.finish` saves the episode
(``save_episode``) or discards it (``only_success`` and the episode failed), and
:meth:`DatasetRecorder.finalize` closes the dataset (``finalize``); without it the parquet files
are not valid.

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

Datasets are created through :mod:`simroll.rollout.lerobot_io`, which picks the video decoder and
keeps the video encoders and the ``datasets`` library's progress bars off the console.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from tqdm import tqdm

from simroll.envs.core import CONTROL_HZ

# the schema lives in simroll.features; these names stay importable from here
from simroll.features import ACTION_NAMES as ACTION_NAMES
from simroll.features import ENVIRONMENT_STATE_NAMES as ENVIRONMENT_STATE_NAMES
from simroll.features import IMAGE_NAMES as IMAGE_NAMES
from simroll.features import STATE_NAMES as STATE_NAMES
from simroll.features import TACTILE_IMAGE_SIZE as TACTILE_IMAGE_SIZE
from simroll.features import dataset_features, observation_frame, tactile_image_size
from simroll.features import tactile_image as tactile_image
from simroll.rollout.episode import EnvConfig, EnvPool, PolicyFactory, run_episode
from simroll.rollout.lerobot_io import create_dataset, quiet_progress
from simroll.rollout.records import EpisodeRecord, EpisodeSpec

ROBOT_TYPE = "simroll_floating_gripper"
EPISODES_META = Path("meta") / "simroll_episodes.jsonl"


class DatasetRecorder:
    """Writes the episodes it sees as one LeRobotDataset under ``root`` (which must not exist).

    Use ``recorder.on_step`` as ``run_episode``'s ``on_step`` and call ``recorder.finish(record)``
    with the record ``run_episode`` returns, or let :meth:`record` do both. Episodes that failed or
    raised are kept (their ``success`` is in the episode metadata) unless ``only_success``;
    an episode that ended before its first step has no frames and is never saved.
    ``with_tactile_image=None`` adds ``observation.images.tactile`` only when the observations
    have camera images (``obs_mode="full"``).
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
            observation_space, use_videos=use_videos, with_tactile_image=self.with_tactile_image
        )
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

    # ------------------------------------------------------------------ run_episode protocol
    def on_step(
        self, env: gym.Env, obs: dict, info: dict, action: np.ndarray | None = None
    ) -> None:
        """``run_episode`` callback; ``action`` is None after the reset, else the one applied."""
        if action is not None:
            if self._pending is None:
                raise RuntimeError("DatasetRecorder.on_step got an action before any reset")
            frame = self._pending
            label = getattr(self._policy, "action_label", None)
            if label is not None:
                action = label
            frame["action"] = np.asarray(action, dtype=np.float32).reshape(5).copy()
            self.dataset.add_frame(frame)
            self._frames += 1
        elif self._frames:
            raise RuntimeError(
                "DatasetRecorder: a new episode started before the previous one was finished; "
                "call finish(record) after every run_episode"
            )
        self._pending = {
            **observation_frame(obs, self._tactile_size),
            "eval.deformation": np.array(
                [info.get("eval", {}).get("deformation", np.nan)], dtype=np.float32
            ),
            "task": str(obs["task_description"]),
        }

    def finish(self, record: EpisodeRecord) -> bool:
        """Save (True) or discard (False) the episode just run; ``record`` is its EpisodeRecord."""
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
        """Run ``spec`` through ``run_episode``, recording it; returns (record, whether kept).

        A policy with an ``action_label`` (e.g. :class:`simroll.experts.noise.ActionNoise`)
        has that stored as each frame's ``action`` instead of the action the env executed.
        """

        def labelled_factory(env_):
            self._policy = policy_factory(env_)
            return self._policy

        record = run_episode(
            spec,
            labelled_factory,
            env=env,
            env_config=env_config,
            on_step=self.on_step,
            **episode_kwargs,
        )
        return record, self.finish(record)

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


def record_specs(
    root: str | os.PathLike[str],
    specs: Sequence[EpisodeSpec],
    policy_factory: PolicyFactory,
    env_config: EnvConfig,
    *,
    progress: bool = False,
    episode_kwargs: Mapping[str, Any] | None = None,
    **recorder_kwargs: Any,
) -> DatasetRecorder:
    """Run ``specs`` in this process (one env per task and object) into a new dataset at ``root``.

    ``episode_kwargs`` go to ``run_episode`` (policy id, control delay), ``recorder_kwargs`` to
    :class:`DatasetRecorder`. Returns the finalized recorder (its counts say what was written).
    """
    if not specs:
        raise ValueError("record_specs needs at least one episode spec")
    pool = EnvPool(env_config)
    try:
        recorder = DatasetRecorder(root, pool.get(specs[0]).observation_space, **recorder_kwargs)
        bar = tqdm(total=len(specs), desc="recording", unit="ep", disable=not progress)
        with recorder, bar:
            for spec in specs:
                record, _ = recorder.record(
                    spec, policy_factory, env=pool.get(spec), **(episode_kwargs or {})
                )
                if record.error is not None:
                    tqdm.write(f"episode {spec.key} raised: {record.error.splitlines()[0]}")
                bar.update(1)
                bar.set_postfix(kept=recorder.episodes_written, frames=recorder.frames_written)
    finally:
        pool.close()
    return recorder


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


def _append_line(path: Path, row: dict[str, Any]) -> None:
    """Append one JSON line with a single ``O_APPEND`` write under ``flock``, then fsync."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(row, sort_keys=True, separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)


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
