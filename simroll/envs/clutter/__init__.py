"""The dense-clutter retrieval family: scene layouts, their MuJoCo model, one task per module."""

from simroll import ENV_TABLE
from simroll.envs.clutter.planned import (
    ClutterRetrieveEasy,
    ClutterRetrieveHard,
    ClutterRetrieveMedium,
)
from simroll.envs.clutter.retrieve import ClutterRetrieveEnv

TASKS = {
    "ClutterRetrieve": ClutterRetrieveEnv,
    "ClutterRetrieveEasy": ClutterRetrieveEasy,
    "ClutterRetrieveMedium": ClutterRetrieveMedium,
    "ClutterRetrieveHard": ClutterRetrieveHard,
}
# tasks whose step is one discrete primitive (a macro action of many control steps)
PRIMITIVE_TASKS = ("ClutterRetrieveEasy", "ClutterRetrieveMedium", "ClutterRetrieveHard")
# time limits in control steps, from the table that registers the Gymnasium ids
MAX_EPISODE_STEPS = {name: ENV_TABLE[name][1] for name in TASKS}

__all__ = [
    "MAX_EPISODE_STEPS",
    "PRIMITIVE_TASKS",
    "TASKS",
    "ClutterRetrieveEasy",
    "ClutterRetrieveEnv",
    "ClutterRetrieveHard",
    "ClutterRetrieveMedium",
]
