"""A checkpoint is read once per process: each load gets its own deep copy (same weights, its own
modules and queues), a changed checkpoint is read again, and ``SIMROLL_FAST_PATHS=0`` reads it
every time."""

from __future__ import annotations

import shutil
from pathlib import Path

import gymnasium as gym
import pytest
import torch

from simroll import _speedups
from simroll.policies import cache
from simroll.policies.lerobot import load_policy

CHECKPOINT = Path(__file__).resolve().parents[2] / "policies" / "act_soft_lift"


@pytest.fixture
def env():
    env = gym.make("simroll/SoftLift-v0", obs_mode="state", gripper_mode="delta")
    yield env
    env.close()


def builds(monkeypatch) -> list[int]:
    counted: list[int] = []
    build = cache.cached_build

    def counting(key, function):
        def counted_function():
            counted.append(1)
            return function()

        return build(key, counted_function)

    monkeypatch.setattr("simroll.policies.lerobot.cached_build", counting)
    return counted


def same_weights(a, b) -> bool:
    first, second = a.policy.state_dict(), b.policy.state_dict()
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_loads_share_one_read_but_not_their_objects(env, monkeypatch, tmp_path):
    monkeypatch.setenv(_speedups.ENV_VAR, "1")
    cache.clear()
    counted = builds(monkeypatch)
    first, second = load_policy(env, CHECKPOINT), load_policy(env, CHECKPOINT)
    assert len(counted) == 1
    assert first.policy is not second.policy and first.preprocessor is not second.preprocessor
    assert same_weights(first, second)
    with torch.no_grad():
        next(first.policy.parameters()).add_(1.0)  # one copy's change stays in that copy
    assert same_weights(second, load_policy(env, CHECKPOINT))
    # another checkpoint directory, or changed files, is read anew
    copy = tmp_path / "copy"
    shutil.copytree(CHECKPOINT, copy)
    load_policy(env, copy)
    assert len(counted) == 2
    (copy / "card.md").write_text("changed\n")
    load_policy(env, copy)
    assert len(counted) == 3
    cache.clear()


def test_fast_paths_off_reads_every_time(env, monkeypatch):
    monkeypatch.setenv(_speedups.ENV_VAR, "0")
    cache.clear()
    counted = builds(monkeypatch)
    load_policy(env, CHECKPOINT)
    load_policy(env, CHECKPOINT)
    assert len(counted) == 2
