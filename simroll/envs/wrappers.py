"""Gymnasium wrappers for behaviour that cuts across tasks: the control delay.

:class:`ControlDelay` makes an env act ``steps`` control steps late: the action given to
``step`` at step ``t`` (computed from the observation at ``t``) is applied at step ``t + steps``,
which is the timing a policy that needs ``steps`` control periods to think really has (see
``simroll.rollout.episode.latency_to_delay_steps``). Until the first action arrives the hand
holds still and the gripper stays open as it starts (:func:`simroll.features.hold_action`);
afterwards every step applies the action given ``steps`` steps earlier, so no action is dropped
or repeated. ``applied_action`` is the action the wrapped env executed on the last step (None after
a reset), which is what a dataset should pair with the observation it acted on. With
``steps=0`` it applies each action at once.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np

from simroll.checks import is_int
from simroll.features import hold_action


class ControlDelay(gym.Wrapper):
    """Apply each action ``steps`` control steps after it is given (``steps`` >= 0)."""

    def __init__(self, env: gym.Env, steps: int) -> None:
        if not is_int(steps, 0):
            raise ValueError(f"control delay steps must be an int >= 0, got {steps!r}")
        if steps and not isinstance(env.action_space, gym.spaces.Box):
            raise ValueError(
                f"a control delay holds the hand for {steps} control steps; this env's actions "
                f"are {env.action_space} (macro steps such as clutter primitives): use 0 steps"
            )
        super().__init__(env)
        self.steps = int(steps)
        self._pending: deque[np.ndarray] = deque()
        self.applied_action: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._pending.clear()
        self.applied_action = None
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        self._pending.append(np.array(action, dtype=np.float32).reshape(-1))
        if len(self._pending) > self.steps:
            self.applied_action = self._pending.popleft()
        else:
            self.applied_action = hold_action()
        return self.env.step(self.applied_action)
