"""Primitive-level policies of the clutter family, baselines of TRACE's comparison.

* :class:`NominalReplay`: executes the episode's fixed nominal plan (``plan_primitives`` of the
  observation, planned once in the digital twin) open loop, ending with its grasp.
* :class:`ClosedLoopTeacher`: the privileged teacher re-planning from the true state at every
  primitive, which looks (withdraws the hand) when its view of the target's neighbourhood is
  stale: the upper reference. With ``looks=False`` it never looks (it reads the true state, so
  it needs no view): the labeller of the student's demonstrations and DAgger rounds
  (``configs/policy/clutter_labeller.yaml``), so the student learns to act without withdrawing.
  With ``follow_plan=True`` it keeps to the observation's nominal plan while the plan's remaining
  pushes, simulated from the true state, still end in a clear grasp or in a state the search
  clears within ``repair_pushes`` more pushes; it re-plans only when they do not, and once the
  plan's pushes are spent it grasps when a grasp is clear and re-plans otherwise. Its labels
  agree with the plan the student is conditioned on, and the mending happens at the plan's end,
  where the student's ``grasp_check`` can see it (``configs/policy/clutter_plan_labeller.yaml``).
  With ``budget_aware=True`` it also keeps within the episode's budgets (TRACE's push travel and
  primitive caps, which it reads from the env like the true state): it never labels a push the
  budgets cannot pay for before the grasp, so it re-plans with at most the pushes left, and grasps
  when none is left. A student that has wandered past its plan is then taught to grasp before the
  budget ends its episode, instead of pushing until it does
  (``configs/policy/clutter_budget_labeller.yaml``, the labeller of DAgger rounds).

Both return a one-element int64 array (the primitive index), which the plan-conditioned envs
``simroll/ClutterRetrieve{Easy,Medium,Hard}-v0`` take.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from simroll.features import GRASP_PRIMITIVE as GRASP


class NominalReplay:
    """Replays the observation's nominal plan, which ends in the grasp (see the module doc)."""

    policy_id = "nominal_replay"

    def __init__(self, env: gym.Env | None = None):
        self._index = 0

    def reset(self) -> None:
        self._index = 0

    def select_action(self, obs: dict[str, Any]) -> np.ndarray:
        plan = np.asarray(obs["plan_primitives"])
        length = int(obs["plan_length"])
        action = int(plan[self._index]) if self._index < length else GRASP
        self._index += 1
        return np.array([action], dtype=np.int64)


class ClosedLoopTeacher:
    """The privileged teacher acting closed loop on ``env``'s true state (see the module doc)."""

    policy_id = "closed_loop_teacher"
    labels_any_state = True

    def __init__(
        self,
        env: gym.Env,
        beam: int = 2,
        max_pushes: int = 15,
        looks: bool = True,
        follow_plan: bool = False,
        repair_pushes: int = 0,
        budget_aware: bool = False,
    ):
        from simroll.experts.clutter import ClutterTeacher

        self.env = env
        self.looks = bool(looks)
        self.follow_plan = bool(follow_plan)
        if not (isinstance(repair_pushes, int) and repair_pushes >= 0):
            raise ValueError(f"repair_pushes must be an int >= 0, got {repair_pushes!r}")
        self.repair_pushes = repair_pushes
        self.budget_aware = bool(budget_aware)
        self.teacher = ClutterTeacher(beam=beam, max_pushes=max_pushes, tier=env.unwrapped.tier)

    def reset(self) -> None:
        self.teacher.reset()

    def pushes_left(self) -> int | None:
        """Pushes the episode's budgets still pay for with the grasp after them (None when the
        env sets no budget): whole ``PUSH_LENGTH`` pushes within the travel left, and one
        primitive kept for the grasp."""
        from simroll.envs.clutter.primitives import PUSH_LENGTH  # policies import no env module

        env = self.env
        left: float = math.inf
        max_travel = env.get_wrapper_attr("max_travel")
        if max_travel is not None:
            travel = float(env.get_wrapper_attr("_travel"))
            left = math.floor(max(0.0, max_travel - travel) / PUSH_LENGTH + 1e-9)
        max_primitives = env.get_wrapper_attr("max_primitives")
        if max_primitives is not None:
            used = int(env.get_wrapper_attr("_primitives"))
            left = min(left, max(0, max_primitives - used - 1))
        return None if math.isinf(left) else int(left)

    def _planned_push(self, obs: dict[str, Any], left: int | None = None) -> int | None:
        """The plan's next push when the plan's remaining pushes still end in a clear grasp from
        the true state (within ``repair_pushes`` more, and within ``left`` pushes in all when
        given); None when they are spent, fail or cost more than is left."""
        if "plan_primitives" not in obs:
            raise ValueError(
                "follow_plan needs the plan in the observation (plan_primitives, plan_length, "
                "plan_step): run it on a plan-conditioned env, simroll/ClutterRetrieve{Easy,"
                f"Medium,Hard}}-v0; got keys {sorted(obs)}"
            )
        plan = np.asarray(obs["plan_primitives"]).reshape(-1)
        length, step = int(np.asarray(obs["plan_length"])), int(np.asarray(obs["plan_step"]))
        pushes = [int(p) for p in plan[step:length] if int(p) != GRASP]
        if not pushes or (left is not None and len(pushes) > left):
            return None
        repair = self.repair_pushes if left is None else min(self.repair_pushes, left - len(pushes))
        state = self.env.unwrapped.get_sim_state()
        holds = self.teacher.plan_holds(state, pushes, repair=repair)
        return pushes[0] if holds else None

    def select_action(self, obs: dict[str, Any]) -> np.ndarray:
        left = self.pushes_left() if self.budget_aware else None
        if left == 0:  # the budgets pay for no push: the grasp is the best left
            self.teacher.note_action(GRASP)
            return np.array([GRASP], dtype=np.int64)
        if self.follow_plan:
            push = self._planned_push(obs, left)
            if push is not None:
                self.teacher.note_action(push)
                return np.array([push], dtype=np.int64)
        seen = obs if self.looks else None  # without looks it acts on the true state alone
        action = self.teacher.label(self.env.unwrapped, seen, max_pushes=left)
        return np.array([action], dtype=np.int64)
