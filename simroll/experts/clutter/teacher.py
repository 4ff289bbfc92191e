"""The privileged clutter teacher: a beam search over the 16 pushes, simulated in MuJoCo.

Given a simulation state of a ClutterRetrieve env (the true one, or a digital twin's), the
teacher simulates every push from it in a private search copy (its own state-mode env under
:class:`~simroll.envs.clutter.primitives.PrimitiveActions`: the same controller and physics as
execution), scores each outcome by :func:`~simroll.envs.clutter.layout.grasp_blockage` (the
least pad overlap with clutter over the 16 grasp yaws; 0 means a clear grasp) plus a small pull
towards the target, keeps the ``beam`` best and goes one push deeper, until a state is graspable
(:func:`~simroll.envs.clutter.layout.grasp_clear`) or ``max_pushes`` is reached.

* :meth:`ClutterTeacher.plan` returns a :class:`Plan`: the pushes then the grasp, with the
  block poses the simulation predicts after each push. Run in the twin built from one unoccluded
  observation it is TRACE's fixed nominal rollout.
* :meth:`ClutterTeacher.label` is the closed-loop teacher's decision in a state: from the true
  state it grasps when a grasp is clear, else re-plans and returns the first push. Given an
  observation whose view of the target's neighbourhood is stale (a block within ``LOOK_RADIUS``
  of the target hidden) and after a primitive that was not a look, it looks first; those
  sensing withdrawals are what TRACE's student avoids. Without an observation it never looks
  (the labeller of the student's data).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simroll.envs.clutter.layout import footprint, grasp_blockage, grasp_clear
from simroll.envs.clutter.primitives import GRASP, LOOK, PUSHES, PrimitiveActions
from simroll.envs.clutter.retrieve import OBJECT_FIELDS, ClutterRetrieveEnv

LOOK_RADIUS = 0.10  # metres: neighbours of the target the closed-loop teacher must see
HAND_PULL = 2e-4  # score per metre of hand-to-target distance (m^2 of blockage per m)
VISIBLE = OBJECT_FIELDS.index("visible")


@dataclass
class Plan:
    """A push sequence ending in the grasp, and the block poses predicted after each push."""

    primitives: list[int] = field(default_factory=list)
    poses: list[np.ndarray] = field(default_factory=list)  # (11, 4) per push
    graspable: bool = False
    simulated: int = 0  # pushes simulated to find it

    def __len__(self) -> int:
        return len(self.primitives)


def blockage(env: ClutterRetrieveEnv) -> tuple[float, bool]:
    """Score of a state (lower is better) and whether a grasp is clear in it."""
    poses = env.block_poses()
    prints = [
        footprint(shape, pose[[0, 1, 3]])
        for shape, pose in zip(env.layout.shapes, poses, strict=True)
    ]
    centre = np.mean(np.concatenate(prints[0]), axis=0)
    clear = bool(grasp_clear(prints[0], centre, prints[1:]))
    score = 0.0 if clear else grasp_blockage(prints[0], centre, prints[1:])
    score += HAND_PULL * float(np.linalg.norm(env.hand_pose()[:2] - poses[0, :2]))
    return score, clear


class ClutterTeacher:
    """Beam search over pushes in a private search copy (see the module doc)."""

    def __init__(self, beam: int = 2, max_pushes: int = 12, tier: str = "medium"):
        if not (isinstance(beam, int) and beam >= 1):
            raise ValueError(f"beam must be an int >= 1, got {beam!r}")
        if not (isinstance(max_pushes, int) and max_pushes >= 1):
            raise ValueError(f"max_pushes must be an int >= 1, got {max_pushes!r}")
        self.beam, self.max_pushes = beam, max_pushes
        # plans in rigid twins: a soft target's state is carried over as poses (fast, and what
        # a planner that cannot simulate the flex would know)
        self._sim = PrimitiveActions(
            ClutterRetrieveEnv(tier=tier, obs_mode="state", rigid_twin=True)
        )
        self._last_action: int | None = None

    def close(self) -> None:
        self._sim.close()

    def _expand(self, state: dict[str, Any], push: int):
        self._sim.load(state)
        _, _, terminated, truncated, _ = self._sim.step(push)
        raw = self._sim.unwrapped
        score, clear = blockage(raw)
        if terminated or truncated:  # diverged or fell off: never a good branch
            score, clear = math.inf, False
        return score, clear, raw.get_sim_state(), raw.block_poses()

    def plan(self, state: dict[str, Any], max_pushes: int | None = None) -> Plan:
        """Pushes from ``state`` until a grasp is clear (or ``max_pushes``, by default the
        teacher's), then the grasp."""
        self._sim.load(state)
        score, clear = blockage(self._sim.unwrapped)
        if clear:
            return Plan([GRASP], [], graspable=True)
        frontier = [(score, [], [], state)]
        best = frontier[0]
        simulated = 0
        for _ in range(self.max_pushes if max_pushes is None else max_pushes):
            children = []
            for _, pushes, poses, node in frontier:
                for push in range(len(PUSHES)):
                    child_score, child_clear, child_state, child_poses = self._expand(node, push)
                    simulated += 1
                    child = (child_score, [*pushes, push], [*poses, child_poses], child_state)
                    if child_clear:
                        return Plan([*child[1], GRASP], child[2], True, simulated)
                    children.append(child)
            children.sort(key=lambda c: c[0])  # stable: ties keep the primitive order
            frontier = children[: self.beam]
            if frontier[0][0] < best[0]:
                best = frontier[0]
        # no clear grasp within the budget: the best state found, then try the grasp anyway
        return Plan([*best[1], GRASP], best[2], False, simulated)

    def plan_holds(self, state: dict[str, Any], pushes: list[int], repair: int = 0) -> bool:
        """Whether executing ``pushes`` from ``state`` (simulated in the search copy) ends in a
        state with a clear grasp, or in one from which the search finds a clear grasp within
        ``repair`` more pushes: the check by which a plan-following labeller keeps to a nominal
        plan that still works from the true state (mended at its end, if need be)."""
        self._sim.load(state)
        for push in pushes:
            _, _, terminated, truncated, _ = self._sim.step(push)
            if terminated or truncated:
                return False
        if blockage(self._sim.unwrapped)[1]:
            return True
        if repair < 1:
            return False
        return self.plan(self._sim.unwrapped.get_sim_state(), max_pushes=repair).graspable

    def note_action(self, action: int) -> None:
        """Record a primitive chosen for this teacher's episode outside :meth:`label` (a
        plan-following labeller's), so the next look decision knows the last primitive."""
        self._last_action = int(action)

    def label(
        self,
        env: ClutterRetrieveEnv,
        obs: dict[str, Any] | None = None,
        max_pushes: int | None = None,
    ) -> int:
        """The closed-loop teacher's primitive in ``env``'s current (true) state, re-planning
        with at most ``max_pushes`` pushes (by default the teacher's own limit)."""
        if obs is not None and "objects" in obs and self._last_action != LOOK:
            objects = np.asarray(obs["objects"])
            truth = env.block_poses()
            near = np.linalg.norm(truth[:, :2] - truth[0, :2], axis=1) <= LOOK_RADIUS
            if not objects[near, VISIBLE].all():
                self._last_action = LOOK
                return LOOK
        action = self.plan(env.get_sim_state(), max_pushes=max_pushes).primitives[0]
        self._last_action = action
        return action

    def reset(self) -> None:
        self._last_action = None
