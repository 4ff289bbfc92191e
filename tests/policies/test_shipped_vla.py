"""The shipped SimVLA (``policies/vla_soft``) follows its instruction in closed loop.

On the same SoftLift episodes (same seed, same sampling noise) the policy is told either the
task's own instruction or SoftSqueeze's. Told to lift, it raises the object off the table;
told to squeeze, it leaves the object on the table. When this test was written the lift
instruction lifted the sponge by 9-11 cm in 3 of 4 episodes and the squeeze instruction in none
(at most 2 mm), so CPU-specific floating point differences do not decide the outcome.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

import simroll.envs  # noqa: F401
from simroll.policies.lerobot import load_policy

CHECKPOINT = Path(__file__).resolve().parents[2] / "policies" / "vla_soft"
LIFT = "pick up the sponge and lift it gently"
SQUEEZE = "squeeze the sponge firmly but carefully"


def closed_loop(seed: int, instruction: str, steps: int = 60) -> tuple[float, float]:
    """(highest rise of the object's centre above its start, mean grip force) of one episode."""
    env = gym.make(
        "simroll/SoftLift-v0", object="sponge", obs_mode="full", image_size=64, gripper_mode="delta"
    )
    try:
        policy = load_policy(env, path=str(CHECKPOINT))
        torch.manual_seed(0)
        obs, _ = env.reset(seed=seed)
        policy.reset()
        center = env.unwrapped.object_center
        heights, forces = [center()[2]], []
        for _ in range(steps):
            obs = {**obs, "task_description": instruction}
            obs, _, terminated, truncated, _ = env.step(policy.select_action(obs))
            heights.append(center()[2])
            forces.append(float(np.mean(obs["agent_pos"][10:12])))  # grip force per finger
            if terminated or truncated:
                break
        return max(heights) - heights[0], float(np.mean(forces))
    finally:
        env.close()


def test_the_instruction_decides_whether_the_object_is_lifted():
    seeds = range(4)
    lift = [closed_loop(seed, LIFT) for seed in seeds]
    squeeze = [closed_loop(seed, SQUEEZE) for seed in seeds]
    print(
        f"object rise (m), lift instruction: {[round(r, 3) for r, _ in lift]}, squeeze "
        f"instruction: {[round(r, 3) for r, _ in squeeze]}; mean grip force (N): "
        f"{[round(f, 2) for _, f in lift]} / {[round(f, 2) for _, f in squeeze]}"
    )
    lifted = sum(rise > 0.05 for rise, _ in lift)
    assert lifted >= 2, lift  # the policy lifts about 60% of SoftLift episodes
    assert all(rise < 0.02 for rise, _ in squeeze), squeeze  # told to squeeze, it never lifts
