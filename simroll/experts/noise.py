"""Noise-injected demonstrations (DART-style) for imitation learning.

``ActionNoise`` wraps a policy (the scripted expert): the env executes the policy's action plus
Gaussian noise, while ``action_label`` keeps the clean action, which is what ``DatasetRecorder``
stores as the demonstration's ``action``. The expert is closed-loop, so it corrects the drift the
noise causes; the dataset then shows a learner how to recover from states slightly off the
expert's own path, which plain demonstrations never visit (Laskey et al., 2017, "DART").

The noise generator is a copy of the env's generator right after its reset: the same episode seed
gives the same noise, and the env's own random stream is not consumed.
"""

from __future__ import annotations

import copy

import numpy as np

from simroll.features import ACTION_DIM, GRIPPER, HAND
from simroll.policies.base import policy_name


class ActionNoise:
    """Execute ``policy``'s action plus N(0, std^2) noise; label the step with the clean action."""

    def __init__(self, policy, env, arm_std: float = 0.3, gripper_std: float = 0.0):
        for name, value in (("arm_std", arm_std), ("gripper_std", gripper_std)):
            if not (isinstance(value, int | float) and 0.0 <= value <= 2.0):
                raise ValueError(f"{name} must be a number in [0, 2], got {value!r}")
        self.policy, self.env = policy, env.unwrapped
        self.std = np.zeros(ACTION_DIM, dtype=np.float64)
        self.std[HAND], self.std[GRIPPER] = arm_std, gripper_std
        self.action_label: np.ndarray | None = None
        self.rng = np.random.default_rng(0)

    @property
    def policy_id(self) -> str:
        return f"{policy_name(self.policy)}+noise{self.std[0]:g}/{self.std[GRIPPER]:g}"

    def reset(self) -> None:
        self.policy.reset()
        self.rng = copy.deepcopy(self.env.np_random)
        self.action_label = None

    def select_action(self, obs) -> np.ndarray:
        clean = np.asarray(self.policy.select_action(obs), dtype=np.float32)
        self.action_label = clean.copy()
        noisy = clean + self.std * self.rng.standard_normal(clean.shape)
        return np.clip(noisy, -1.0, 1.0).astype(np.float32)


def noisy_expert(
    env,
    closure: str | float = "gentle",
    arm_std: float = 0.3,
    gripper_std: float = 0.0,
    approach_gain: float = 1.0,
    squeeze_hold_hand: bool = False,
):
    """The scripted soft expert with executed-action noise (a Hydra ``_partial_`` target)."""
    from simroll.experts.soft import SoftExpert

    expert = SoftExpert(
        env, closure, approach_gain=approach_gain, squeeze_hold_hand=squeeze_hold_hand
    )
    return ActionNoise(expert, env, arm_std, gripper_std)
