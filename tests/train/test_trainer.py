"""Training: loss goes down, checkpoints reload to identical actions, bad data fails clearly."""

from __future__ import annotations

import dataclasses
import json

import gymnasium as gym
import numpy as np
import pytest
import torch

import simroll.envs  # noqa: F401
from simroll.policies.lerobot import PolicyLoadError, load_policy
from simroll.train.trainer import (
    MemoizedDataset,
    TrainConfig,
    TrainingDataError,
    check_task_weights,
    train,
)

TINY_DIFFUSION = {
    "down_dims": [16, 32],
    "horizon": 8,
    "n_obs_steps": 2,
    "n_action_steps": 4,
    "drop_n_last_frames": 3,
    "noise_scheduler_type": "DDIM",
    "num_inference_steps": 4,
    "optimizer_lr": 3e-3,
    "scheduler_warmup_steps": 0,
}
INPUTS = ["observation.state", "observation.environment_state"]


@pytest.fixture(scope="module")
def trained(lift_dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("train")
    summary = train(
        TrainConfig(
            str(lift_dataset),
            str(out),
            "diffusion",
            INPUTS,
            TINY_DIFFUSION,
            steps=100,
            batch_size=32,
            log_every=10,
            checkpoint_every=100,
        ),
        progress=False,
    )
    return out, summary


def test_training_reduces_the_loss_and_writes_metrics(trained):
    out, summary = trained
    assert summary["steps"] == 100
    assert summary["final_loss"] < 0.8 * summary["first_loss"]
    rows = (out / "metrics.csv").read_text().splitlines()
    assert rows[0] == "step,loss,lr,seconds" and len(rows) == 11
    assert json.loads((out / "metrics.json").read_text())["parameters"] > 0
    for name in ("config.json", "model.safetensors", "policy_preprocessor.json"):
        assert (out / "checkpoints" / "last" / name).is_file()


def _actions(policy, env, seed: int, steps: int = 6) -> np.ndarray:
    obs, _ = env.reset(seed=seed)
    policy.reset()
    actions = []
    for _ in range(steps):
        action = policy.select_action(obs)
        actions.append(action)
        obs, *_ = env.step(action)
    return np.array(actions)


def test_checkpoint_reloads_to_identical_actions(trained):
    import torch

    out, _ = trained
    env = gym.make("simroll/SoftLift-v0", object="sponge", obs_mode="state")
    # seeded after the load, as run_episode seeds: a second load in a process is a copy of the
    # cached first one and draws no random numbers building the model
    first_policy = load_policy(env, out / "checkpoints" / "last")
    torch.manual_seed(0)
    first = _actions(first_policy, env, seed=3)
    second_policy = load_policy(env, out / "checkpoints" / "last")
    torch.manual_seed(0)
    second = _actions(second_policy, env, seed=3)
    assert first.shape == (6, 5) and np.all(np.abs(first) <= 1)
    np.testing.assert_array_equal(first, second)


def test_policy_that_needs_state_features_refuses_a_pixel_only_env(trained):
    out, _ = trained
    env = gym.make("simroll/SoftLift-v0", object="sponge", obs_mode="full", image_size=32)
    with pytest.raises(PolicyLoadError, match="observation.environment_state"):
        load_policy(env, out / "checkpoints" / "last")


def test_missing_or_corrupt_checkpoints_fail_clearly(trained, tmp_path):
    import shutil

    out, _ = trained
    env = gym.make("simroll/SoftLift-v0", object="sponge", obs_mode="state")
    with pytest.raises(PolicyLoadError, match="is not a directory"):
        load_policy(env, tmp_path / "nowhere")
    broken = tmp_path / "broken"
    shutil.copytree(out / "checkpoints" / "last", broken)
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(PolicyLoadError, match="cannot load policy checkpoint"):
        load_policy(env, broken)
    (broken / "model.safetensors").unlink()
    with pytest.raises(PolicyLoadError, match="no model.safetensors"):
        load_policy(env, broken)
    bad_json = tmp_path / "bad_json"
    shutil.copytree(out / "checkpoints" / "last", bad_json)
    (bad_json / "config.json").write_text("{not json")
    with pytest.raises(PolicyLoadError, match="not valid JSON"):
        load_policy(env, bad_json)


def test_dataset_without_a_requested_feature_fails_before_training(lift_dataset, tmp_path):
    config = TrainConfig(
        str(lift_dataset),
        str(tmp_path),
        "diffusion",
        ["observation.state", "observation.images.scene"],
        TINY_DIFFUSION,
        steps=1,
    )
    with pytest.raises(TrainingDataError, match=r"observation.images.scene"):
        train(config, progress=False)


def test_a_folder_that_is_not_a_dataset_fails_clearly(tmp_path):
    with pytest.raises(TrainingDataError, match="not a LeRobotDataset"):
        train(TrainConfig(str(tmp_path), str(tmp_path / "out")), progress=False)


@pytest.mark.parametrize(
    ("overrides", "per_chunk", "executed"),
    [({}, 4, 4), ({"n_action_steps": 2, "num_inference_steps": 2}, 2, 2)],
)
def test_episode_records_count_network_evaluations_per_chunk(
    trained, overrides, per_chunk, executed
):
    from simroll.rollout.episode import EnvConfig, run_episode
    from simroll.rollout.records import EpisodeSpec

    out, _ = trained
    spec = EpisodeSpec("SoftLift", "sponge", seed=11)
    record = run_episode(
        spec,
        lambda env: load_policy(env, out / "checkpoints" / "last", overrides=overrides),
        env_config=EnvConfig(obs_mode="state"),
    )
    assert record.error is None and record.steps > 0
    chunks = -(-record.steps // executed)  # one chunk per `executed` control steps, rounded up
    assert record.extra["network_evaluations"] == chunks * per_chunk


def test_act_trains_reduces_the_loss_and_reloads(lift_dataset, tmp_path):
    summary = train(
        TrainConfig(
            str(lift_dataset),
            str(tmp_path),
            "act",
            INPUTS,
            {
                "chunk_size": 8,
                "n_action_steps": 4,
                "dim_model": 32,
                "n_heads": 2,
                "dim_feedforward": 64,
                "n_encoder_layers": 1,
                "n_vae_encoder_layers": 1,
                "optimizer_lr": 1e-3,
            },
            steps=40,
            batch_size=32,
            log_every=10,
            checkpoint_every=40,
        ),
        progress=False,
    )
    assert summary["final_loss"] < 0.8 * summary["first_loss"]
    env = gym.make("simroll/SoftLift-v0", object="sponge", obs_mode="state")
    first = _actions(load_policy(env, tmp_path / "checkpoints" / "last"), env, seed=4)
    second = _actions(load_policy(env, tmp_path / "checkpoints" / "last"), env, seed=4)
    np.testing.assert_array_equal(first, second)  # ACT in eval mode is deterministic


def test_checkpoint_refuses_an_env_with_another_gripper_mode(trained, tmp_path):
    import shutil

    from simroll.policies.lerobot import ENV_RECORD
    from simroll.train.trainer import dataset_env

    out, _ = trained
    checkpoint = tmp_path / "ckpt"
    shutil.copytree(out / "checkpoints" / "last", checkpoint)
    dataset = tmp_path / "ds"
    (dataset / "meta").mkdir(parents=True)
    (dataset / "meta" / "simroll_collect.yaml").write_text(
        "env:\n  gripper_mode: delta\n  obs_mode: state\n  image_size: 64\n  tasks: [SoftLift]\n"
    )
    recorded = dataset_env(dataset)
    assert recorded == {"gripper_mode": "delta", "obs_mode": "state", "image_size": 64}
    (checkpoint / ENV_RECORD).write_text(json.dumps(recorded))
    continuous = gym.make("simroll/SoftLift-v0", object="sponge", obs_mode="state")
    with pytest.raises(PolicyLoadError, match="env.gripper_mode=delta"):
        load_policy(continuous, checkpoint)
    delta = gym.make("simroll/SoftLift-v0", object="sponge", obs_mode="state", gripper_mode="delta")
    assert load_policy(delta, checkpoint) is not None


def test_ema_checkpoints_hold_averaged_weights_without_changing_training(lift_dataset, tmp_path):
    from safetensors.torch import load_file

    runs = {}
    for name, decay in (("plain", None), ("ema", 0.99)):
        config = TrainConfig(
            str(lift_dataset),
            str(tmp_path / name),
            "diffusion",
            INPUTS,
            TINY_DIFFUSION,
            steps=20,
            batch_size=16,
            log_every=5,
            checkpoint_every=10,
            ema_decay=decay,
        )
        summary = train(config, progress=False)
        weights = load_file(tmp_path / name / "checkpoints" / "last" / "model.safetensors")
        losses = (tmp_path / name / "metrics.csv").read_text().splitlines()[1:]
        runs[name] = (summary, weights, [row.split(",")[1] for row in losses])
    # the averaged weights were swapped in only to be saved: training itself is unchanged
    assert runs["ema"][2] == runs["plain"][2]
    assert runs["ema"][0]["ema_decay"] == 0.99
    differs = [
        key for key, tensor in runs["plain"][1].items() if not (tensor == runs["ema"][1][key]).all()
    ]
    assert len(differs) > len(runs["plain"][1]) // 2
    with pytest.raises(ValueError, match="ema_decay"):
        train(TrainConfig(str(lift_dataset), str(tmp_path / "bad"), ema_decay=1.5), progress=False)


def test_memoized_items_drop_unread_cameras_and_are_decoded_once():
    calls = []

    class Source:
        def __len__(self):
            return 2

        def __getitem__(self, index):
            calls.append(index)
            return {
                "observation.state": np.full(3, index),
                "observation.images.tactile": np.zeros((3, 8, 8)),
                "observation.images.tactile_is_pad": np.zeros(1, dtype=bool),
            }

    memo = MemoizedDataset(Source(), drop=["observation.images.tactile"])
    first = memo[1]
    assert sorted(first) == ["observation.state"]
    assert memo[1] is first and calls == [1]


def test_init_from_continues_a_checkpoint_and_refuses_another_architecture(
    trained, lift_dataset, tmp_path
):
    out, summary = trained
    config = TrainConfig(
        str(lift_dataset),
        str(tmp_path / "continued"),
        "diffusion",
        INPUTS,
        TINY_DIFFUSION,
        steps=30,
        batch_size=32,
        log_every=10,
        checkpoint_every=30,
        init_from=str(out / "checkpoints" / "last"),
    )
    continued = train(config, progress=False)
    # it starts about where the 100-step run ended (0.77 when written), not at a fresh
    # network's loss (1.05 over the same first steps)
    assert continued["first_loss"] < 0.85 * summary["first_loss"], (continued, summary)
    assert continued["init_from"] == config.init_from
    wider = {**TINY_DIFFUSION, "down_dims": [32, 64]}
    config.policy_overrides, config.output_dir = wider, str(tmp_path / "wider")
    with pytest.raises(TrainingDataError, match="does not fit the diffusion recipe"):
        train(config, progress=False)
    config.init_from = str(tmp_path)
    with pytest.raises(TrainingDataError, match="is not a checkpoint"):
        train(config, progress=False)


def _dataset_and_meta(root):
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

    from simroll.rollout.lerobot_io import open_dataset

    return open_dataset("simroll/lift_state", root=root), LeRobotDatasetMetadata(
        "simroll/lift_state", root=root
    )


def test_task_weights_weigh_frames_by_the_keys_their_instruction_contains(lift_dataset):
    from simroll.train.trainer import frame_sampler, frame_weights

    dataset, meta = _dataset_and_meta(lift_dataset)
    task_of = dict(zip(meta.tasks["task_index"], meta.tasks.index, strict=True))
    sponge = torch.tensor(["sponge" in task_of[int(i)] for i in dataset.hf_dataset["task_index"]])
    assert 0 < int(sponge.sum()) < len(sponge)
    weights = frame_weights(dataset, meta, {"SPONGE": 2.0, "lift": 3})  # case-insensitive, product
    assert torch.all(weights[sponge] == 6.0) and torch.all(weights[~sponge] == 3.0)
    sampler = frame_sampler(dataset, meta, {"sponge": 1e9}, torch.Generator().manual_seed(0))
    drawn = list(sampler)
    assert len(drawn) == len(dataset) and all(sponge[i] for i in drawn)
    assert frame_sampler(dataset, meta, {}, torch.Generator()) is None
    with pytest.raises(ValueError, match=r"'pour' is in no task.*lift it gently"):
        frame_weights(dataset, meta, {"pour": 2.0})
    with pytest.raises(ValueError, match=r"task_weights\['sponge'\] must be a number > 0"):
        frame_weights(dataset, meta, {"sponge": 0})
    with pytest.raises(ValueError, match=r"task_weights must be a mapping .*\[1\]"):
        frame_weights(dataset, meta, [1])


def test_training_refuses_a_task_weight_key_before_training(lift_dataset, tmp_path):
    config = TrainConfig(
        dataset_root=str(lift_dataset),
        output_dir=str(tmp_path / "run"),
        input_features=INPUTS,
        policy_overrides=TINY_DIFFUSION,
        steps=2,
        task_weights={"pour": 2.0},
    )
    with pytest.raises(ValueError, match="'pour' is in no task"):
        train(config, progress=False)
    assert not (tmp_path / "run" / "checkpoints").exists()
    with pytest.raises(ValueError, match="'pour' is in no task"):
        check_task_weights(config)  # what simroll train asks before DAgger's rollouts
    check_task_weights(dataclasses.replace(config, task_weights={"sponge": 2.0}))
