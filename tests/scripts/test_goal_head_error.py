"""scripts/goal_head_error.py: scores a SimVLA's goal head on unseen SoftPlace frames, and
refuses a checkpoint without one."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from simroll.rollout.episode import EnvConfig
from simroll.rollout.runner import make_specs
from simroll.train.trainer import TrainConfig, train
from tests.helpers import TINY_VLA, VLA_INPUTS, load_script, record_expert_dataset

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def place_64(tmp_path_factory):
    """One 64 px SoftPlace expert episode."""
    root = tmp_path_factory.mktemp("datasets") / "place_64"
    (spec,) = make_specs("soft", ["SoftPlace"], ["sponge"], ["default"], 1, base_seed=50)
    env = EnvConfig(obs_mode="full", image_size=64, gripper_mode="delta")
    return record_expert_dataset(root, [spec], env, use_videos=False)


def _trained(root, out, **overrides) -> Path:
    """A SimVLA with a goal head (and ``overrides``), trained a few steps on ``root``."""
    config = TrainConfig(
        str(root),
        str(out),
        "simvla",
        VLA_INPUTS,
        {**TINY_VLA, "goal_loss_weight": 1.0, **overrides},
        steps=4,
        batch_size=8,
    )
    config.checkpoint_every = 4
    train(config, progress=False)
    return out / "checkpoints" / "last"


@pytest.fixture(scope="module")
def goal_checkpoint(place_64, tmp_path_factory):
    return _trained(place_64, tmp_path_factory.mktemp("train_goal"))


@pytest.mark.slow  # records a 64 px episode and trains: ~11 s for a measurement script
def test_the_head_is_scored_per_phase_against_the_mean_target(goal_checkpoint, tmp_path):
    output = tmp_path / "goal.json"
    argv = ["--policy", str(goal_checkpoint), "--objects", "sponge", "--episodes", "2"]
    result = load_script("goal_head_error").main([*argv, "--every", "25", "--output", str(output)])
    assert json.loads(output.read_text()) == result
    assert result["specs"] == 2
    phases = result["phases"]
    assert phases["all"]["frames"] == sum(v["frames"] for k, v in phases.items() if k != "all")
    assert phases["all"]["frames"] >= 4  # each expert episode runs well over 25 steps
    assert math.isfinite(phases["all"]["median_m"]) and phases["all"]["median_m"] > 0
    # two specs, two targets: the mean target misses each by half their distance
    assert result["baseline_mean_target"]["median_m"] > 0.01


def test_a_checkpoint_without_a_goal_head_is_refused():
    with pytest.raises(SystemExit, match="has no goal head"):
        load_script("goal_head_error").main(
            ["--policy", str(ROOT / "policies/vla_soft"), "--objects", "sponge", "--episodes", "1"]
        )


@pytest.mark.slow  # trains a 64 px checkpoint and drives an episode: ~15 s
@pytest.mark.parametrize("source", ["estimate", "label_offset"])
def test_a_decoder_without_its_goal_map_does_not_respond_to_a_moved_goal(
    place_64, tmp_path, source
):
    from safetensors.torch import load_file, save_file

    checkpoint = _trained(place_64, tmp_path / "train", goal_conditioning=True, goal_source=source)
    argv = ["--policy", str(checkpoint), "--objects", "sponge", "--episodes", "1", "--every", "30"]
    weights = checkpoint / "model.safetensors"
    state = load_file(weights)
    state["model.goal_in.weight"].normal_()  # a map that reads the goal
    save_file(state, weights)
    result = load_script("goal_head_error").main([*argv, "--output", str(tmp_path / "on.json")])
    assert result["decoder_reads"] == source
    reads = result["decoder_response"]["phases"]["all"]
    assert reads["frames"] >= 2
    assert reads["median_change_shift_x"] > 0 and reads["median_change_shift_y"] > 0

    state["model.goal_in.weight"].zero_()  # a map that ignores it: no shift moves the actions
    save_file(state, weights)
    result = load_script("goal_head_error").main([*argv, "--output", str(tmp_path / "off.json")])
    ignored = result["decoder_response"]["phases"]["all"]
    assert ignored["median_change_shift_x"] == 0 and ignored["median_change_shift_y"] == 0
