"""Shared helpers for the env tests: an expert episode and an exact observation comparison."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from simroll.experts import SoftExpert

StepCallback = Callable[[SoftExpert, dict, dict], None]


def run_expert_episode(
    env: gym.Env,
    closure: str | float = "gentle",
    seed: int = 0,
    on_step: StepCallback | None = None,
) -> tuple[dict[str, Any], int]:
    """Run the scripted expert for one episode; returns the last info and the step count."""
    expert = SoftExpert(env, closure=closure)
    obs, info = env.reset(seed=seed)
    expert.reset()
    steps = 0
    while True:
        obs, _, terminated, truncated, info = env.step(expert.select_action(obs))
        steps += 1
        if on_step is not None:
            on_step(expert, obs, info)
        if terminated or truncated:
            return info, steps


def assert_identical(first: Any, second: Any, path: str = "") -> None:
    """Bit-for-bit equality of nested dicts of arrays, numbers and strings."""
    if isinstance(first, dict):
        assert isinstance(second, dict) and first.keys() == second.keys(), path
        for key in first:
            assert_identical(first[key], second[key], f"{path}/{key}")
    elif isinstance(first, np.ndarray):
        assert isinstance(second, np.ndarray), path
        assert first.dtype == second.dtype and first.shape == second.shape, path
        assert np.array_equal(first, second), f"{path} differs"
    else:
        assert type(first) is type(second) and first == second, f"{path}: {first!r} != {second!r}"


def all_finite(obs: dict) -> bool:
    """Every numeric array in a (nested) observation is finite."""
    for value in obs.values():
        if isinstance(value, dict):
            if not all_finite(value):
                return False
        elif isinstance(value, np.ndarray) and not np.all(np.isfinite(value)):
            return False
    return True
