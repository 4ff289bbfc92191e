"""LeRobotDataset recording: what LeRobot reads back is what the env produced and the policy did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from simroll.experts import SoftExpert
from simroll.rollout import dataset as dataset_module
from simroll.rollout import lerobot_io
from simroll.rollout.backends import EpisodeJob
from simroll.rollout.dataset import (
    DatasetFeaturesError,
    DatasetRecorder,
    DatasetShards,
    episode_record,
    join_datasets,
    load_episode_meta,
    merge_shards,
)
from simroll.rollout.episode import EnvConfig, EnvPool, run_episode
from simroll.rollout.records import EpisodeSpec, derive_seed
from simroll.rollout.runner import evaluate, make_specs
from tests.rollout.test_episode import ExplodingPolicy

REPO_ID = "simroll/test"
# what a dataset command must not print: LeRobot's torchcodec traceback, SVT-AV1's banner and
# config lines, FFmpeg's muxer info, LeRobot's codec info, the datasets library's Map: bars
NOISE = ("Traceback", "torchcodec", "Svt[", "moov atom", "Using video codec", "Map:")


def assert_quiet(output: str) -> None:
    found = [marker for marker in NOISE if marker in output]
    assert not found, f"noisy output ({found}):\n{output[-3000:]}"


def spec(task: str, index: int = 0) -> EpisodeSpec:
    return EpisodeSpec(task, "sponge", "default", derive_seed("soft", task, index, 1000), index)


class LoggedExpert(SoftExpert):
    """The gentle expert, logging each observation it sees and the action it returns."""

    def __init__(self, env, log: list):
        super().__init__(env, "gentle")
        self.log = log
        self.log.append([])

    def select_action(self, obs):
        action = super().select_action(obs)
        self.log[-1].append(
            (obs["agent_pos"].copy(), action.copy(), obs["task_description"], obs.get("pixels"))
        )
        return action


def record_episodes(root, specs, policy_factory, env_config: EnvConfig) -> tuple[int, int]:
    """Run ``specs`` in this process as ``simroll collect`` does (the local backend, one shard per
    episode, merged in spec order) into a dataset at ``root``; (episodes, frames) written."""
    shards = DatasetShards(root.parent / f"{root.name}_run" / "shards", repo_id=REPO_ID)
    job = EpisodeJob(policy_factory, env_config, "expert", "test", observers=(shards,))
    records = evaluate(root.parent / f"{root.name}_run", specs, job, "local", progress=False)
    return merge_shards(shards, records, root)


def columns(root) -> tuple[LeRobotDataset, dict[str, np.ndarray]]:
    dataset = lerobot_io.open_dataset(REPO_ID, root=root)
    data = dataset.hf_dataset.with_format("numpy")[:]
    return dataset, {key: np.asarray(value) for key, value in data.items()}


def test_state_episodes_reload_with_the_states_and_actions_the_episode_had(tmp_path):
    log: list = []
    specs = [spec("SoftSqueeze"), spec("SoftLift")]
    episodes, _ = record_episodes(
        tmp_path / "ds", specs, lambda env: LoggedExpert(env, log), EnvConfig(obs_mode="state")
    )
    assert episodes == 2
    dataset, data = columns(tmp_path / "ds")
    assert dataset.num_episodes == 2 and dataset.fps == 20
    assert dataset.meta.robot_type == "simroll_floating_gripper"
    assert "observation.environment_state" in dataset.features
    assert not dataset.meta.video_keys and not dataset.meta.image_keys
    assert dataset.meta.features["action"]["names"] == ["dx", "dy", "dz", "dyaw", "gripper"]
    rows = load_episode_meta(tmp_path / "ds")
    for index, (episode_spec, steps) in enumerate(zip(specs, log, strict=True)):
        mine = data["episode_index"] == index
        record = episode_record(rows[index])
        assert record.success and record.steps == len(steps) == mine.sum()
        assert rows[index]["spec_key"] == episode_spec.key and rows[index]["success"]
        np.testing.assert_array_equal(data["observation.state"][mine], [s[0] for s in steps])
        np.testing.assert_array_equal(data["action"][mine], [s[1] for s in steps])
        np.testing.assert_array_equal(data["frame_index"][mine], np.arange(len(steps)))
        tasks_of_episode = {dataset.meta.tasks.index[i] for i in data["task_index"][mine]}
        assert tasks_of_episode == {steps[0][2]}
        deformation = data["eval.deformation"][mine]
        assert np.all(np.isfinite(deformation)) and deformation.min() >= 0
        assert deformation.max() <= record.peak_deformation + 1e-6  # the final obs is dropped
    assert dataset[0]["task"] == log[0][0][2]


def test_full_episode_stores_camera_and_tactile_videos_at_the_env_image_size(tmp_path):
    log: list = []
    config = EnvConfig(obs_mode="full", image_size=32)
    written = record_episodes(
        tmp_path / "ds", [spec("SoftSqueeze")], lambda env: LoggedExpert(env, log), config
    )
    assert written == (1, len(log[0]))
    dataset, data = columns(tmp_path / "ds")
    assert set(dataset.meta.video_keys) == {
        "observation.images.scene",
        "observation.images.wrist",
        "observation.images.tactile",
    }
    assert "observation.environment_state" not in dataset.features
    np.testing.assert_array_equal(data["action"], [s[1] for s in log[0]])
    np.testing.assert_array_equal(data["observation.state"], [s[0] for s in log[0]])
    frame = dataset[5]
    assert frame["observation.images.scene"].shape == (3, 32, 32)
    assert frame["observation.images.tactile"].shape == (3, 32, 32)  # the cameras' size
    assert frame["observation.tactile"].shape == (2 * 16 * 12,)
    assert frame["observation.tactile_markers"].shape == (2 * 99 * 2,)
    # AV1 is lossy: the decoded frame is close to, not equal to, what the camera rendered
    rendered = log[0][5][3]["scene"].transpose(2, 0, 1) / 255.0
    assert np.abs(frame["observation.images.scene"].numpy() - rendered).mean() < 0.05


def test_failed_episodes_are_kept_with_their_outcome_unless_only_success(tmp_path):
    specs = [spec("SoftSqueeze", 0), spec("SoftSqueeze", 1)]
    pool = EnvPool(EnvConfig(obs_mode="state"))
    space = pool.get(specs[0]).observation_space
    try:
        for only_success in (False, True):
            root = tmp_path / f"only_success_{only_success}"
            with DatasetRecorder(root, space, repo_id=REPO_ID, only_success=only_success) as rec:
                failed, kept_failed = rec.record(specs[0], ExplodingPolicy, env=pool.get(specs[0]))
                good, kept_good = rec.record(
                    specs[1], lambda env: SoftExpert(env, "gentle"), env=pool.get(specs[1])
                )
            assert failed.termination_reason == "error" and good.success and kept_good
            assert kept_failed is not only_success
            rows = load_episode_meta(root)
            dataset = LeRobotDataset(REPO_ID, root=root)
            if only_success:
                assert rec.episodes_dropped == 1 and dataset.num_episodes == 1
                assert rows[0]["spec_key"] == specs[1].key
            else:
                assert dataset.num_episodes == 2
                assert rows[0]["frames"] == 2 and not rows[0]["success"]
                assert rows[0]["termination_reason"] == "error"
                assert rows[1]["frames"] == good.steps and rows[1]["success"]
    finally:
        pool.close()


def test_recorder_refuses_an_existing_root(tmp_path):
    pool = EnvPool(EnvConfig(obs_mode="state"))
    try:
        space = pool.get(spec("SoftLift")).observation_space
    finally:
        pool.close()
    with pytest.raises(FileExistsError, match="already exists"):
        DatasetRecorder(tmp_path, space)


def test_keep_features_stores_only_those_and_refuses_unknown_keys(tmp_path):
    pool = EnvPool(EnvConfig(obs_mode="state"))
    try:
        env = pool.get(spec("SoftLift"))
        space = env.observation_space
        with pytest.raises(ValueError, match=r"\['observation.wrist_torque'\] are not features"):
            DatasetRecorder(tmp_path / "bad", space, keep_features=["observation.wrist_torque"])
        keep = ["observation.state", "observation.environment_state"]
        with DatasetRecorder(tmp_path / "ds", space, keep_features=keep) as recorder:
            recorder.record(spec("SoftLift"), lambda e: SoftExpert(e, "gentle"), env=env)
    finally:
        pool.close()
    dataset, data = columns(tmp_path / "ds")
    stored = {key for key in dataset.meta.features if key.startswith(("observation", "action"))}
    assert stored == {*keep, "action"}
    assert "eval.deformation" in dataset.meta.features
    assert len(data["observation.state"]) == dataset.num_frames > 0


@pytest.mark.slow
def test_collect_writes_a_dataset_of_expert_demonstrations(tmp_path):
    output = tmp_path / "demos"
    quiet_env = {key: value for key, value in os.environ.items() if key != "SVT_LOG"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "simroll.cli.main",
            "collect",
            "env=soft_squeeze",
            "env.objects=[sponge]",
            "env.image_size=32",
            "episodes=2",
            f"output_dir={output}",
            "progress=false",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=quiet_env,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert_quiet(result.stdout + result.stderr)
    load = subprocess.run(
        [
            sys.executable,
            "-c",
            "from simroll.rollout.lerobot_io import open_dataset;"
            f"d = open_dataset('simroll/soft_squeeze_expert', root={str(output)!r});"
            "print(sorted(d[0])[0])",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=quiet_env,
    )
    assert load.returncode == 0, load.stderr[-3000:]
    assert_quiet(load.stdout + load.stderr)  # the decoder was chosen without LeRobot's traceback
    dataset = LeRobotDataset("simroll/soft_squeeze_expert", root=output)
    assert dataset.num_episodes == 2
    assert f"wrote 2 episodes, {dataset.num_frames} frames" in result.stdout
    rows = [json.loads(line) for line in (output / "meta/simroll_episodes.jsonl").open()]
    assert [row["spec"]["seed"] for row in rows] == [
        derive_seed("soft", "SoftSqueeze", index, 1000) for index in range(2)
    ]
    assert (output / "meta/simroll_collect.yaml").exists()
    again = subprocess.run(
        [sys.executable, "-m", "simroll.cli.main", "collect", f"output_dir={output}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 2 and "overwrite=true" in again.stderr


@pytest.mark.slow
def test_many_sources_are_joined_in_groups_into_the_same_dataset(tmp_path, monkeypatch):
    config = EnvConfig(obs_mode="full", image_size=32)
    specs = [spec("SoftSqueeze", 0), spec("SoftSqueeze", 1)]
    shards = DatasetShards(tmp_path / "shards", repo_id=REPO_ID)
    job = EpisodeJob(
        lambda env: SoftExpert(env, "gentle"), config, "expert", "test", observers=(shards,)
    )
    records = evaluate(tmp_path / "run", specs, job, "local", progress=False)
    sources = [shards.path(specs[0]), shards.path(specs[1]), shards.path(specs[0])]
    tags = [{"source": 0}, {"source": 1}, None]
    flat = join_datasets(sources, tmp_path / "flat", repo_id=REPO_ID, tags=tags)
    monkeypatch.setattr(dataset_module, "JOIN_GROUP_LIMIT", 2)  # groups of 2: [0, 1], [0]
    grouped = join_datasets(sources, tmp_path / "grouped", repo_id=REPO_ID, tags=tags)
    assert grouped == flat == (3, 2 * records[0].steps + records[1].steps)
    assert not list(tmp_path.glob(".*"))  # the groups' folder is gone
    assert load_episode_meta(tmp_path / "grouped") == load_episode_meta(tmp_path / "flat")
    (flat_set, flat_data), (grouped_set, grouped_data) = (
        columns(tmp_path / "flat"),
        columns(tmp_path / "grouped"),
    )
    for key in ("action", "observation.state", "episode_index", "frame_index", "timestamp"):
        np.testing.assert_array_equal(grouped_data[key], flat_data[key], err_msg=key)
    ends = np.flatnonzero(np.diff(flat_data["episode_index"]))
    for index in {0, *ends, *(ends + 1), len(flat_set) - 1}:  # each episode's first and last
        for key in flat_set.meta.video_keys:
            np.testing.assert_array_equal(grouped_set[index][key], flat_set[index][key])


@pytest.mark.slow
def test_eval_with_record_writes_the_evaluated_episodes_as_a_dataset(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "simroll.cli.main",
            "eval",
            "env=soft_squeeze",
            "env.objects=[sponge]",
            "episodes=1",
            "video.episodes=0",
            "record=true",
            f"output_dir={tmp_path}",
            "progress=false",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    scored = [json.loads(line) for line in (tmp_path / "records.jsonl").open()]
    rows = load_episode_meta(tmp_path / "dataset")
    assert [row["spec_key"] for row in rows.values()] == [
        episode_record({"record": row}).spec.key for row in scored
    ]
    assert rows[0]["record"]["steps"] == scored[0]["steps"]  # a deterministic policy's replay
    assert LeRobotDataset("simroll/eval_expert", root=tmp_path / "dataset").num_episodes == 1


def test_noisy_expert_episodes_store_the_clean_expert_action(tmp_path):
    from simroll.experts.noise import noisy_expert

    spec = make_specs("soft", ["SoftLift"], ["sponge"], ["default"], 1, base_seed=1000)[0]
    pool = EnvPool(EnvConfig(obs_mode="state"))
    env = pool.get(spec)
    executed, labels = [], []

    def factory(env_):
        policy = noisy_expert(env_, arm_std=0.5)
        select = policy.select_action

        def spy(obs):
            action = select(obs)
            executed.append(action)
            labels.append(policy.action_label)
            return action

        policy.select_action = spy
        return policy

    with DatasetRecorder(tmp_path / "noisy", env.observation_space) as recorder:
        record, kept = recorder.record(spec, factory, env=env)
    pool.close()
    assert kept and record.error is None
    stored = np.stack(LeRobotDataset("x", root=tmp_path / "noisy").hf_dataset["action"])
    np.testing.assert_array_equal(stored, np.stack(labels))
    assert np.abs(np.stack(executed)[:, :4] - stored[:, :4]).mean() > 0.1  # noise was executed
    # same seed, same noise: the wrapper copies the env's generator after its reset
    again = run_episode(spec, lambda e: noisy_expert(e, arm_std=0.5), env_config=EnvConfig("state"))
    assert (again.steps, again.peak_deformation) == (record.steps, record.peak_deformation)


def test_video_backend_falls_back_to_pyav_quietly(monkeypatch, caplog):
    def broken(name, *args):
        raise OSError(f"Could not load libtorchcodec ({name})")

    monkeypatch.setattr(lerobot_io.importlib, "import_module", broken)
    assert lerobot_io.video_backend.__wrapped__() == "pyav"
    assert not caplog.records
    assert lerobot_io.video_backend() in ("pyav", "torchcodec")  # the cached, real choice


def test_quiet_media_logs_keeps_a_users_svt_log(monkeypatch):
    import av.logging

    monkeypatch.setenv("SVT_LOG", "3")
    lerobot_io.quiet_media_logs()
    assert os.environ["SVT_LOG"] == "3"
    monkeypatch.delenv("SVT_LOG")
    lerobot_io.quiet_media_logs()
    assert os.environ["SVT_LOG"] == lerobot_io.SVT_LOG_ERRORS
    assert av.logging.get_level() == av.logging.ERROR


def test_joining_datasets_of_other_features_is_refused_naming_the_differences(tmp_path):
    def source(name: str, **features: dict) -> Path:
        meta = tmp_path / name / "meta"
        meta.mkdir(parents=True)
        (meta / "info.json").write_text(json.dumps({"total_episodes": 1, "features": features}))
        return tmp_path / name

    state = {"dtype": "float32", "shape": [7], "names": None}
    old = source("old", **{"observation.state": state, "action": state})
    new = source(
        "new",
        **{
            "observation.state": {**state, "shape": [9]},
            "action": state,
            "eval.deformation": state,
        },
    )
    with pytest.raises(DatasetFeaturesError) as refused:
        join_datasets([old, old, new], tmp_path / "joined", repo_id=REPO_ID)
    message = str(refused.value)
    assert f"{new} cannot be joined with {old}" in message
    assert f"only in {new}: ['eval.deformation']" in message
    assert "observation.state: shape [7] vs [9]" in message
    assert "action:" not in message  # the equal feature is not named
    assert not (tmp_path / "joined").exists()
