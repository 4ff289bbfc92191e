"""Gymnasium environments of simroll (soft suite, clutter retrieval), ids ``simroll/<Task>-v0``,
and their vectorizer.

``import simroll`` already registers the ids (see ``simroll.ENV_TABLE``); importing this module
also loads the env classes. :func:`make_vector_env` is each id's ``vector_entry_point``, which
``gym.make_vec(id, num_envs)`` uses when no ``vectorization_mode`` is given: an
``AsyncVectorEnv`` whose workers start by ``forkserver``, never by ``fork``. A worker forked after
its parent initialised EGL rendering (a ``render()``, or ``obs_mode="full"``) cannot render:
EGL drivers hang in such a child. Gymnasium's ``vectorization_mode="async"`` forks by default on
Linux before Python 3.14; there, pass ``vector_kwargs={"context": "forkserver"}`` (or
``"spawn"``). A simroll env that would render in such a child raises
:class:`simroll.envs.core.ForkedRenderingError` naming that fix instead of hanging.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym

from simroll import ENV_TABLE, env_id
from simroll import register_envs as _register_ids
from simroll.envs import clutter, soft

# every task of every family: name -> env class, name -> time limit in control steps
TASKS = {**soft.TASKS, **clutter.TASKS}
MAX_EPISODE_STEPS = {**soft.MAX_EPISODE_STEPS, **clutter.MAX_EPISODE_STEPS}

__all__ = [
    "MAX_EPISODE_STEPS",
    "TASKS",
    "env_ids",
    "make_vector_env",
    "register_envs",
    "task_objects",
]

VECTOR_CONTEXT = "forkserver"


def register_envs() -> None:
    """Register every task's Gymnasium id (idempotent; ``import simroll`` already did)."""
    _register_ids()


def task_objects(task: str) -> list[str]:
    """The ``object`` names a task takes: soft-suite assets, or a clutter task's target shapes
    and soft targets."""
    if task in clutter.TASKS:
        from simroll.envs.clutter.layout import SOFT_TARGETS, TARGET_SHAPES

        return list(TARGET_SHAPES + SOFT_TARGETS)
    if task in soft.TASKS:
        from simroll.assets import list_objects

        return list_objects()
    raise ValueError(f"unknown simroll task {task!r}; expected one of {sorted(TASKS)}")


def env_ids() -> list[str]:
    return [env_id(name) for name in TASKS]


def _make_one(env_id_: str, kwargs: dict[str, Any]) -> gym.Env:
    """One worker's env. Module-level, so a ``forkserver``/``spawn`` worker unpickling it imports
    this module, which registers the ids before ``gym.make`` looks one up."""
    return gym.make(env_id_, **kwargs)


def make_vector_env(
    task: str,
    num_envs: int = 1,
    *,
    context: str = VECTOR_CONTEXT,
    shared_memory: bool = True,
    autoreset_mode: str | gym.vector.AutoresetMode = gym.vector.AutoresetMode.NEXT_STEP,
    **env_kwargs: Any,
) -> gym.vector.AsyncVectorEnv:
    """``num_envs`` copies of ``task`` (a name of ``TASKS``) in worker processes started by
    ``context`` (``"forkserver"`` or ``"spawn"``; ``"fork"`` is refused, see the module doc).

    ``shared_memory`` and ``autoreset_mode`` go to ``AsyncVectorEnv``; ``env_kwargs`` to each env
    (``gym.make``), including ``max_episode_steps``. Through ``gym.make_vec(id, num_envs,
    **kwargs)`` all of these are plain keyword arguments (Gymnasium refuses ``vector_kwargs`` for
    a vector entry point).
    """
    if task not in TASKS:
        raise ValueError(f"unknown simroll task {task!r}; expected one of {sorted(TASKS)}")
    if not (isinstance(num_envs, int) and num_envs >= 1):
        raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    if context not in ("forkserver", "spawn"):
        raise ValueError(
            f"context must be 'forkserver' or 'spawn', got {context!r}: a forked worker hangs "
            "when it renders after its parent initialised EGL"
        )
    make_one = functools.partial(_make_one, env_id(task), dict(env_kwargs))
    return gym.vector.AsyncVectorEnv(
        [make_one] * num_envs,
        context=context,
        shared_memory=shared_memory,
        autoreset_mode=autoreset_mode,
    )


def _vector_entry_point(task: str):
    def create(num_envs: int = 1, **kwargs: Any) -> gym.vector.AsyncVectorEnv:
        return make_vector_env(task, num_envs, **kwargs)

    create.__name__ = create.__qualname__ = f"make_{task}_vector"
    create.__doc__ = f"``vector_entry_point`` of ``{env_id(task)}``: see :func:`make_vector_env`."
    return create


# make_SoftLift_vector, ...: the string vector entry points that simroll.register_envs names
for _task in ENV_TABLE:
    globals()[f"make_{_task}_vector"] = _vector_entry_point(_task)
del _task
