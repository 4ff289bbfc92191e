"""simroll: closed-loop robot-policy rollouts in MuJoCo with deformation-aware scoring.

Importing ``simroll`` registers the Gymnasium ids ``simroll/<Task>-v0`` (``gym.make`` works after
``import simroll``). Registration names entry points as strings, so it loads neither MuJoCo nor the
env modules; ``gym.make`` imports them. Each id also has a ``vector_entry_point``
(:func:`simroll.envs.make_vector_env`): ``gym.make_vec(id, num_envs)`` runs the envs in
``forkserver`` worker processes, which stay safe after this process has rendered.

The library API is imported on first use, so ``import simroll`` stays light:
``simroll.evaluate(policy, ...)`` and its ``simroll.RunResult`` (:mod:`simroll.evaluation`).
"""

from __future__ import annotations

__version__ = "0.1.0"

# task name -> (env class entry point, time limit in control steps); the one table of the suite
ENV_TABLE: dict[str, tuple[str, int]] = {
    "SoftLift": ("simroll.envs.soft.lift:SoftLiftEnv", 120),
    "SoftPlace": ("simroll.envs.soft.place:SoftPlaceEnv", 200),
    "SoftSqueeze": ("simroll.envs.soft.squeeze:SoftSqueezeEnv", 100),
    "ClutterRetrieve": ("simroll.envs.clutter.retrieve:ClutterRetrieveEnv", 400),
    # primitive-level, plan-conditioned retrieval per tier (limits count primitives)
    "ClutterRetrieveEasy": ("simroll.envs.clutter.planned:ClutterRetrieveEasy", 80),
    "ClutterRetrieveMedium": ("simroll.envs.clutter.planned:ClutterRetrieveMedium", 80),
    "ClutterRetrieveHard": ("simroll.envs.clutter.planned:ClutterRetrieveHard", 80),
}


def env_id(task: str) -> str:
    """The Gymnasium id of a task name (``"SoftLift"`` -> ``"simroll/SoftLift-v0"``)."""
    return f"simroll/{task}-v0"


def register_envs() -> None:
    """Register every task's Gymnasium id (idempotent)."""
    import gymnasium as gym

    for task, (entry_point, max_episode_steps) in ENV_TABLE.items():
        if env_id(task) not in gym.registry:
            gym.register(
                id=env_id(task),
                entry_point=entry_point,
                vector_entry_point=f"simroll.envs:make_{task}_vector",
                max_episode_steps=max_episode_steps,
            )


register_envs()

# Public name -> the module that defines it, imported when the name is first used.
_LAZY: dict[str, str] = {
    "evaluate": "simroll.evaluation",
    "RunResult": "simroll.evaluation",
    # the subpackage itself, which is callable: simroll.certify(...) is simroll.certify.run.certify
    "certify": "simroll.certify",
    "Certificate": "simroll.certify.certificate",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'simroll' has no attribute {name!r}")
    import importlib

    imported = importlib.import_module(module)
    value = imported if module == f"{__name__}.{name}" else getattr(imported, name)
    globals()[name] = value  # later uses skip this hook
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
