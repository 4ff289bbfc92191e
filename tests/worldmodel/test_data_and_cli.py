"""Collecting trajectories through the episode engine, and the CLI's config checks."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from omegaconf import OmegaConf

import simroll.envs  # noqa: F401
from simroll.cli.common import ConfigError
from simroll.cli.roundtrip import run
from simroll.worldmodel.data import (
    ACTION_DIM,
    BehaviourConfig,
    ExploringExpert,
    SplitConfig,
    SplitData,
    collect_split,
    read_state,
    state_layout,
    vertex_positions,
)
from simroll.worldmodel.pipeline import RoundTripConfig


def test_state_vector_reconstructs_the_object_and_hand():
    env = gym.make("simroll/SoftSqueeze-v0", object="sponge", obs_mode="state")
    try:
        policy = ExploringExpert(env, seed=3)
        obs, _ = env.reset(seed=3)
        for _ in range(3):
            obs, *_ = env.step(policy.select_action(obs))
        state = read_state(env)
        points = env.unwrapped.object_points()
        assert np.allclose(vertex_positions(state, len(points)), points, atol=1e-9)
        layout = state_layout(len(points))
        assert np.allclose(state[layout["hand_pose"]], env.unwrapped.hand_pose())
        assert state.shape == (layout["gripper_target"].stop,)
    finally:
        env.close()


def test_a_split_is_collected_through_run_episode_and_survives_npz(tmp_path):
    split = SplitConfig("tiny", episodes=1, seed_group="unit")
    data = collect_split(split, ["SoftSqueeze"], behaviour=BehaviourConfig(explore_probability=0))
    (trajectory,) = data.trajectories
    assert trajectory.actions.shape[1] == ACTION_DIM
    assert len(trajectory.states) == len(trajectory.actions) + 1
    assert np.all(np.isfinite(trajectory.states)) and np.all(np.abs(trajectory.actions) <= 1)
    again = SplitData.load(data.save(tmp_path / "tiny.npz"))
    assert np.array_equal(again.trajectories[0].states, trajectory.states)
    assert again.trajectories[0].spec_key == trajectory.spec_key
    # the episode seed determines the behaviour: the same split collects the same data
    twin = collect_split(split, ["SoftSqueeze"], behaviour=BehaviourConfig(explore_probability=0))
    assert np.array_equal(twin.trajectories[0].actions, trajectory.actions)


def test_config_rejects_unknown_keys_and_missing_splits():
    with pytest.raises(ValueError, match="unknown keys"):
        RoundTripConfig.from_dict({"modle": {}})
    with pytest.raises(ValueError, match="missing"):
        RoundTripConfig.from_dict({"splits": {"train": {"episodes": 1}}})
    config = RoundTripConfig.from_dict(
        {
            "splits": {name: {"episodes": 1} for name in ("train", "calib", "test", "ood_x")},
            "model": {"hidden": 32},
        }
    )
    assert config.ood_splits == ["ood_x"] and config.model.hidden == 32
    with pytest.raises(ValueError, match="roundtrip_samples"):
        RoundTripConfig.from_dict(
            {
                "splits": {name: {"episodes": 1} for name in ("train", "calib", "test")},
                "bench": {"roundtrip_samples": 0},
            }
        )


def test_cli_reports_a_bad_stage_before_doing_any_work(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "simroll.cli.main",
            "roundtrip",
            "stage=everything",
            f"output_dir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "stage" in result.stderr and "collect" in result.stderr


def test_cli_points_stage_bench_to_the_benchmark_script():
    with pytest.raises(ConfigError, match="scripts/bench_roundtrip.py stage=bench"):
        run(OmegaConf.create({"stage": "bench", "threads": 1}))
