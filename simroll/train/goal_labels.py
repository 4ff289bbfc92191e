"""Target-position labels for an auxiliary training loss, recomputed from each episode's spec.

A ``simroll collect`` or DAgger dataset stores every episode's spec (task, object, variation,
seed) in ``meta/simroll_episodes.jsonl``. An episode's target is fixed at reset, so resetting
the episode's env with its spec gives the target's table position exactly, without storing a
privileged feature in the dataset. Only tasks whose target the cameras see are labelled
(``GOAL_TASKS``: the SoftPlace disc); other frames carry a zero mask. A SimVLA with
``goal_source="label_offset"`` trains on each frame's target minus the hand's observed (x, y)
(:func:`goal_offset`) instead.
"""

from __future__ import annotations

from pathlib import Path

import torch

from simroll.features import STATE_NAMES
from simroll.rollout.records import EpisodeSpec

GOAL_TASKS = ("SoftPlace",)
HAND_XY = slice(STATE_NAMES.index("hand_x"), STATE_NAMES.index("hand_y") + 1)  # in the state


def goal_offset(target, state):
    """The target's table position ``target`` (..., 2) minus the hand's observed (x, y) in
    ``state`` (..., 12: ``observation.state`` or ``agent_pos``), numpy or torch alike."""
    return target - state[..., HAND_XY]


class GoalLabelError(ValueError):
    """A dataset cannot be labelled (no episode specs, or specs of another suite)."""


def episode_goals(root: str | Path) -> dict[int, tuple[float, float]]:
    """``{episode_index: (x, y)}``: the target's table position of each episode of the dataset at
    ``root`` whose task is in ``GOAL_TASKS``, from a reset of a state-only env with its spec."""
    # simulator and dataset code, only when labelling
    from simroll.rollout.dataset import EPISODES_META, load_episode_meta
    from simroll.rollout.episode import EnvConfig, EnvPool

    if not (Path(root) / EPISODES_META).is_file():
        raise GoalLabelError(
            f"{Path(root) / EPISODES_META} is missing: goal labels need the episode specs that "
            "`simroll collect` and DAgger rounds write there"
        )
    specs: dict[int, EpisodeSpec] = {}
    for index, row in load_episode_meta(root).items():
        spec = EpisodeSpec.from_dict(row["spec"])
        if spec.suite != "soft":
            raise GoalLabelError(f"goal labels are for the soft suite, got spec {spec.key}")
        if spec.task in GOAL_TASKS:
            specs[index] = spec
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
    mask 1 where the episode is labelled; given the batch's raw ``state`` (B, 12), each labelled
    goal is its offset from the hand (:func:`goal_offset`)."""

    def __init__(self, goals: dict[int, tuple[float, float]], episodes: int):
        self.goals = torch.zeros(episodes, 2)
        self.mask = torch.zeros(episodes)
        for index, goal in goals.items():
            self.goals[index] = torch.tensor(goal)
            self.mask[index] = 1.0

    def __call__(
        self, episode_index: torch.Tensor, state: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        index = episode_index.reshape(-1).long()
        goals, mask = self.goals[index], self.mask[index]
        if state is not None:
            goals = goal_offset(goals, state.to(goals)) * mask[:, None]
        return goals, mask
