"""The deformable-object (soft) task suite: one task per module, each with its task card."""

from simroll import ENV_TABLE
from simroll.envs.soft.lift import SoftLiftEnv
from simroll.envs.soft.place import SoftPlaceEnv
from simroll.envs.soft.squeeze import SoftSqueezeEnv

TASKS = {"SoftLift": SoftLiftEnv, "SoftPlace": SoftPlaceEnv, "SoftSqueeze": SoftSqueezeEnv}
# time limits in control steps, from the table that registers the Gymnasium ids
MAX_EPISODE_STEPS = {name: ENV_TABLE[name][1] for name in TASKS}

__all__ = ["MAX_EPISODE_STEPS", "TASKS", "SoftLiftEnv", "SoftPlaceEnv", "SoftSqueezeEnv"]
