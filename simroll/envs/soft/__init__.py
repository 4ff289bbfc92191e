"""The deformable-object (soft) task suite: one task per module, each with its task card."""

from simroll.envs.soft.lift import SoftLiftEnv
from simroll.envs.soft.place import SoftPlaceEnv
from simroll.envs.soft.squeeze import SoftSqueezeEnv

TASKS = {"SoftLift": SoftLiftEnv, "SoftPlace": SoftPlaceEnv, "SoftSqueeze": SoftSqueezeEnv}
MAX_EPISODE_STEPS = {"SoftLift": 120, "SoftPlace": 200, "SoftSqueeze": 100}

__all__ = ["MAX_EPISODE_STEPS", "TASKS", "SoftLiftEnv", "SoftPlaceEnv", "SoftSqueezeEnv"]
