"""``LeRobotPolicy`` skips work between re-plans without changing an action.

For each shipped checkpoint (diffusion with a two-step observation history, ACT and SimVLA with
one), the wrapper and a second copy of the same weights driven the plain LeRobot way (convert and
normalize every observation, ``select_action``, un-normalize every action) see the same
observations and the same sampling noise. Their actions must be identical, and the wrapper must
have skipped the observation on most steps.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from simroll.policies.lerobot import load_policy
from simroll.rollout.episode import EnvConfig
from simroll.rollout.records import EpisodeSpec, derive_seed

POLICIES = Path(__file__).resolve().parents[2] / "policies"
STATE = EnvConfig(obs_mode="state", gripper_mode="delta")
PIXELS = EnvConfig(obs_mode="full", image_size=64, gripper_mode="delta")
CASES = {  # checkpoint, env, inference overrides (the acceleration knobs change the chunking)
    "diffusion": ("diffusion_soft_lift", STATE, {}),
    "diffusion-denoise_2-chunk_15": (
        "diffusion_soft_lift",
        STATE,
        {"num_inference_steps": 2, "n_action_steps": 15},
    ),
    "act": ("act_soft_lift", STATE, {}),
    "vla": ("vla_soft", PIXELS, {}),
    "vla-chunk_10": ("vla_soft", PIXELS, {"n_action_steps": 10, "num_flow_steps": 2}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_skipping_queued_steps_gives_the_same_actions(case):
    name, env_config, overrides = CASES[case]
    spec = EpisodeSpec("SoftLift", "tofu", "default", derive_seed("soft", "SoftLift", 0), 0)
    env = env_config.make(spec)
    try:
        obs, _ = env.reset(seed=spec.seed)
        fast = load_policy(env, path=POLICIES / name, overrides=overrides)
        plain = load_policy(env, path=POLICIES / name, overrides=overrides)
        converted = 0
        batch = fast.batch

        def counted(obs):
            nonlocal converted
            converted += 1
            return batch(obs)

        fast.batch = counted
        fast.reset()
        plain.policy.reset()

        def plain_action(obs):
            with torch.no_grad():
                batch = plain.preprocessor(plain.batch(obs))
                action = plain.postprocessor(plain.policy.select_action(batch))
            return np.clip(action.squeeze(0).numpy().astype(np.float32), -1.0, 1.0)

        steps = 40
        for step in range(steps):
            torch.manual_seed(step)
            action = fast.select_action(obs)
            torch.manual_seed(step)
            np.testing.assert_array_equal(action, plain_action(obs), err_msg=f"step {step}")
            obs, *_ = env.step(action)
        chunk = fast.policy.config.n_action_steps
        history = getattr(fast.policy.config, "n_obs_steps", 1)
        assert converted <= steps * min(history, chunk) / chunk + history, converted
    finally:
        env.close()
