"""The control delay as a wrapper: actions applied ``k`` steps late, the hold action until then.
(``run_episode`` acts through this wrapper; tests/rollout/test_episode.py checks the actions its
observers see under a delay.)"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from simroll.envs.wrappers import ControlDelay
from simroll.features import hold_action


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
