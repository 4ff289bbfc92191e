"""Target-position labels for an auxiliary training loss, recomputed from each episode's spec.

A ``simroll collect`` or DAgger dataset stores every episode's spec (task, object, variation,
seed) in ``meta/simroll_episodes.jsonl``. An episode's target is fixed at reset, so resetting
the episode's env with its spec gives the target's table position exactly, without storing a
privileged feature in the dataset. Only tasks whose target the cameras see are labelled
(``GOAL_TASKS``: the SoftPlace disc); other frames carry a zero mask.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from simroll.rollout.records import EpisodeSpec

GOAL_TASKS = ("SoftPlace",)
EPISODES_FILE = "simroll_episodes.jsonl"


class GoalLabelError(ValueError):
    """A dataset cannot be labelled (no episode specs, or specs of another suite)."""


def episode_goals(root: str | Path) -> dict[int, tuple[float, float]]:
    """``{episode_index: (x, y)}``: the target's table position of each episode of the dataset at
    ``root`` whose task is in ``GOAL_TASKS``, from a reset of a state-only env with its spec."""
    path = Path(root) / "meta" / EPISODES_FILE
    if not path.is_file():
        raise GoalLabelError(
            f"{path} is missing: goal labels need the episode specs that `simroll collect` "
            "and DAgger rounds write there"
        )
    specs: dict[int, EpisodeSpec] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            spec = EpisodeSpec.from_dict(row["spec"])
            if spec.suite != "soft":
                raise GoalLabelError(f"goal labels are for the soft suite, got spec {spec.key}")
            if spec.task in GOAL_TASKS:
                specs[int(row["episode_index"])] = spec
    from simroll.rollout.episode import EnvConfig, EnvPool  # simulator code, only when labelling

    pool = EnvPool(EnvConfig(obs_mode="state"))
    goals: dict[int, tuple[float, float]] = {}
    try:
        for index, spec in sorted(specs.items()):
            env = pool.get(spec)
            env.reset(seed=spec.seed, options={"variation": spec.variation})
            x, y = env.unwrapped.goal_position()[:2]
            goals[index] = (float(x), float(y))
    finally:
        pool.close()
    return goals


class GoalTable:
    """Looks up a batch's goal labels by its ``episode_index``: ``(goals (B, 2), mask (B,))``,
    mask 1 where the episode is labelled."""

    def __init__(self, goals: dict[int, tuple[float, float]], episodes: int):
        self.goals = torch.zeros(episodes, 2)
        self.mask = torch.zeros(episodes)
        for index, goal in goals.items():
            self.goals[index] = torch.tensor(goal)
            self.mask[index] = 1.0

    def __call__(self, episode_index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        index = episode_index.reshape(-1).long()
        return self.goals[index], self.mask[index]
