"""The control delay as a wrapper: actions applied ``k`` steps late, the hold action until then,
and exactly the actions the episode loop's own delay applies today."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from simroll.envs.wrappers import ControlDelay
from simroll.experts import SoftExpert
from simroll.features import hold_action
from simroll.rollout.episode import EnvConfig, run_episode
from simroll.rollout.records import EpisodeSpec, derive_seed


class ActionLog(gym.Env):
    """Records the actions it is stepped with; ends after ``length`` steps."""

    metadata = {"render_modes": [], "render_fps": 20}

    def __init__(self, length: int = 8):
        self.action_space = spaces.Box(-1.0, 1.0, (5,), np.float32)
        self.observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.length, self.applied = length, []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.applied = []
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.applied.append(np.array(action))
        done = len(self.applied) >= self.length
        return np.full(1, len(self.applied), np.float32), 0.0, done, False, {}


class Ramp:
    """A policy whose action at call ``t`` is distinct: hand deltas and gripper from ``t``."""

    def __init__(self, env=None):
        self.calls = 0

    def reset(self):
        self.calls = 0

    def select_action(self, obs):
        self.calls += 1
        t = self.calls
        return np.array([0.1 * t, -0.05 * t, 0.01, 0.0, 0.5 if t % 2 else -0.5], np.float32)


def drive(env: gym.Env, policy, steps: int) -> list[np.ndarray]:
    """Step ``env`` with ``policy`` for ``steps`` steps; the wrapper's applied actions."""
    obs, _ = env.reset(seed=0)
    policy.reset()
    applied = []
    for _ in range(steps):
        obs, *_ = env.step(policy.select_action(obs))
        applied.append(env.applied_action.copy())
    return applied


@pytest.mark.parametrize("steps", [0, 1, 3])
def test_actions_arrive_k_steps_late_with_the_hold_action_until_then(steps):
    env = ControlDelay(ActionLog(), steps)
    applied = drive(env, Ramp(), 6)
    replay = Ramp()
    given = [replay.select_action(None) for _ in range(6)]
    expected = [hold_action()] * steps + given[: 6 - steps]
    np.testing.assert_array_equal(np.array(applied), np.array(expected))
    np.testing.assert_array_equal(np.array(env.unwrapped.applied), np.array(expected))
    assert hold_action().tolist() == [0.0, 0.0, 0.0, 0.0, -1.0]


def test_reset_drops_actions_still_in_flight():
    env = ControlDelay(ActionLog(), 2)
    drive(env, Ramp(), 3)
    assert env.applied_action is not None
    env.reset(seed=1)
    assert env.applied_action is None
    env.step(np.ones(5, np.float32))
    np.testing.assert_array_equal(env.applied_action, hold_action())


@pytest.mark.parametrize("steps", [-1, 1.5, True, "2"])
def test_a_bad_delay_is_refused(steps):
    with pytest.raises(ValueError, match="control delay steps must be an int >= 0"):
        ControlDelay(ActionLog(), steps)


def applied_by_run_episode(spec, factory, env, steps) -> tuple[list[np.ndarray], object]:
    seen: list[np.ndarray] = []

    def on_step(env, obs, info, action=None):
        if action is not None:
            seen.append(np.array(action))

    record = run_episode(spec, factory, env=env, control_delay_steps=steps, on_step=on_step)
    return seen, record


@pytest.mark.parametrize("steps", [0, 2, 5])
def test_the_wrapper_applies_what_the_episode_loops_delay_applies(steps):
    spec = EpisodeSpec("Fake", "none", "default", 0, 0)
    loop, _ = applied_by_run_episode(spec, Ramp, ActionLog(length=9), steps)
    wrapped = drive(ControlDelay(ActionLog(length=9), steps), Ramp(), 9)
    np.testing.assert_array_equal(np.array(wrapped), np.array(loop))


@pytest.mark.slow  # two full expert episodes; the fake env above pins the same equality
def test_a_delayed_expert_episode_is_the_same_through_the_wrapper():
    spec = EpisodeSpec("SoftLift", "sponge", "default", derive_seed("soft", "SoftLift", 0), 0)
    config = EnvConfig(obs_mode="state")
    env = config.make(spec)
    try:
        loop, record = applied_by_run_episode(spec, lambda e: SoftExpert(e, "gentle"), env, 2)
        delayed = ControlDelay(env, 2)
        expert = SoftExpert(delayed, "gentle")
        obs, info = delayed.reset(seed=spec.seed, options={"variation": spec.variation})
        expert.reset()
        applied, done = [], False
        while not done:
            obs, _, terminated, truncated, info = delayed.step(expert.select_action(obs))
            applied.append(delayed.applied_action.copy())
            done = terminated or truncated
    finally:
        env.close()
    np.testing.assert_array_equal(np.array(applied), np.array(loop))
    assert info["is_success"] == record.success
    assert info["eval"]["peak_deformation"] == record.peak_deformation
