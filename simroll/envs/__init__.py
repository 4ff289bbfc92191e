"""Gymnasium environments; importing this module registers ``simroll/<Task>-v0`` ids."""

from __future__ import annotations

import gymnasium as gym

from simroll.envs.soft import MAX_EPISODE_STEPS, TASKS


def register_envs() -> None:
    for name, cls in TASKS.items():
        env_id = f"simroll/{name}-v0"
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point=f"{cls.__module__}:{cls.__name__}",
                max_episode_steps=MAX_EPISODE_STEPS[name],
            )


def env_ids() -> list[str]:
    return [f"simroll/{name}-v0" for name in TASKS]


register_envs()
