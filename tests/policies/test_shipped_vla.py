"""The shipped SimVLA (``policies/vla_soft``) follows its instruction in closed loop.

The same SoftLift episodes (same spec, so the same initial state and sampling noise) run
through the episode engine twice: once with the task's own instruction and once with
SoftSqueeze's written into the observation. Told to lift, the policy raises the object off the
table; told to squeeze, it leaves the object on the table. With the DAgger checkpoint shipped
on 2026-12-04 the own instruction lifted the sponge 10-11 cm in 4 of 4 episodes and the squeeze
instruction at most 14 mm (1, 14, 8, 11 mm; the behaviour-cloned checkpoint before it: 10-11 cm
in 3 of 4, at most 4 mm), so CPU-specific floating point differences do not decide the outcome.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

from simroll.policies.lerobot import load_policy
from simroll.rollout.episode import EnvConfig, EpisodeObserver, run_episode
from simroll.rollout.records import EpisodeSpec, derive_seed

CHECKPOINT = Path(__file__).resolve().parents[2] / "policies" / "vla_soft"
SQUEEZE = "squeeze the sponge firmly but carefully"
ENV = EnvConfig(obs_mode="full", image_size=64, gripper_mode="delta")


def object_rise(index: int, instruction: str | None) -> float:
    """Highest rise (m) of the object's centre above its start in one episode, with the
    observation's instruction replaced by ``instruction`` (``None``: the task's own)."""
    spec = EpisodeSpec(
        "SoftLift", "sponge", "default", derive_seed("soft", "SoftLift", index), index
    )
    env = ENV.make(spec)
    if instruction is not None:
        env = gym.wrappers.TransformObservation(
            env, lambda obs: {**obs, "task_description": instruction}, env.observation_space
        )
    heights: list[float] = []

    class Heights(EpisodeObserver):
        def on_reset(self, env, obs, info, policy):
            heights.append(env.unwrapped.object_center()[2])

        def on_step(self, env, obs, info, action):
            heights.append(env.unwrapped.object_center()[2])

    try:
        record = run_episode(
            spec,
            lambda env: load_policy(env, path=str(CHECKPOINT)),
            env=env,
            observers=[Heights()],
        )
    finally:
        env.close()
    assert record.error is None, record.error
    return max(heights) - heights[0]


@pytest.mark.slow  # ~1 min: eight closed-loop SimVLA episodes
def test_the_instruction_decides_whether_the_object_is_lifted():
    episodes = range(4)
    lift = [object_rise(index, None) for index in episodes]
    squeeze = [object_rise(index, SQUEEZE) for index in episodes]
    print(
        f"object rise (mm), own instruction: {[round(1000 * r) for r in lift]}, squeeze "
        f"instruction: {[round(1000 * r) for r in squeeze]}"
    )
    assert sum(rise > 0.05 for rise in lift) >= 2, lift  # it lifts about 96% of SoftLift episodes
    assert all(rise < 0.02 for rise in squeeze), squeeze  # told to squeeze, it never lifts
