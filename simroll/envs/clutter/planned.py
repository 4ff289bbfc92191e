"""Plan-conditioned clutter retrieval, TRACE's evaluation protocol, one Gymnasium id per tier.

``simroll/ClutterRetrieve{Easy,Medium,Hard}-v0`` are :class:`PlannedRetrieval` envs: the
primitive actions of :class:`~simroll.envs.clutter.primitives.PrimitiveActions` over a
``ClutterRetrieveEnv`` of that tier, plus what TRACE gives every method at the start of an
episode. At reset, from the one unoccluded frame (the hand still out of view) the digital twin
is built (:mod:`simroll.experts.clutter.twin`), the privileged teacher plans in it once
(:class:`~simroll.experts.clutter.ClutterTeacher`); then, under the ``pose_noise`` variation,
every real block is moved by up to 3 mm and 2 degrees (TRACE's execution noise), and after every
push each block it displaced is moved so again, so the plan meets a world that differs from its
twin and drifts further from it with every push; under ``blackout`` the partial observation
detects nothing during 5 consecutive primitives from a seeded start within the plan. The fixed
**nominal plan** sets the episode's budgets (TRACE's: ``plan length + 20`` primitives,
``plan length x 4 cm + 15 cm`` of push travel) and joins every observation:

* ``plan_primitives``: the plan's primitives, padded with -1 to ``MAX_PLAN``;
* ``plan_poses``: the twin's predicted block poses (``x, y, z, yaw``, target first) before the
  plan's first primitive and after each push, padded by repeating the last;
* ``plan_length``: the plan's number of primitives (its grasp included);
* ``plan_step``: primitives executed so far this episode (progress along the plan);
* ``grasp_check``: what the grasp primitive would find in the current detections
  (:func:`~simroll.envs.clutter.primitives.grasp_check`: a clear yaw or not, the chosen yaw's
  room, the least pad overlap), from detections and the blocks' shapes only.

An episode has one grasp, as TRACE judges the final grasp: a grasp that does not lift the target
ends it (``termination_reason`` ``"grasp_failed"``). With ``obs_mode="state"`` the twin starts
from the true poses instead (privileged perception, no rendering) and observations carry the true
poses. A policy reads the plan from the observation and nothing else from the twin; the
closed-loop teacher reads the true state instead (it is privileged). When the episode ends,
``info`` carries ``episode_metrics`` (``execution_time`` in simulated seconds, primitives,
withdrawals, push travel, plan length and whether the plan reached a clear grasp in the twin)
for the episode record.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from simroll.envs.clutter.primitives import (
    GRASP,
    PUSH_LENGTH,
    PrimitiveActions,
    as_primitive,
    detections,
    grasp_check,
)
from simroll.envs.clutter.retrieve import BLOCKS, ClutterRetrieveEnv

MAX_PLAN = 16
MOVED = 0.001  # metres: a block a push displaced this much gets the execution noise
BUDGET_PRIMITIVES = 20
BUDGET_TRAVEL = 0.15


class PlannedRetrieval(gym.Wrapper):
    """Primitive-level retrieval with a nominal plan from the twin (see the module doc)."""

    tier: ClassVar[str] = "medium"
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        object: str = "cuboid",
        obs_mode: str = "full",
        image_size: int = 96,
        gripper_mode: str = "delta",
        rigid_twin: bool = False,
        render_mode: str | None = None,
        beam: int = 2,
        max_pushes: int = MAX_PLAN - 1,
        **env_kwargs: Any,
    ):
        from simroll.experts.clutter import ClutterTeacher

        if obs_mode not in ("full", "state"):
            raise ValueError(f"obs_mode must be 'full' or 'state', got {obs_mode!r}")
        if not (isinstance(max_pushes, int) and 1 <= max_pushes < MAX_PLAN):
            raise ValueError(
                f"max_pushes must be an int in [1, {MAX_PLAN - 1}], got {max_pushes!r}"
            )
        env = ClutterRetrieveEnv(
            object=object,
            tier=self.tier,
            obs_mode=obs_mode,
            image_size=image_size,
            gripper_mode=gripper_mode,
            rigid_twin=rigid_twin,
            render_mode=render_mode,
            **env_kwargs,
        )
        super().__init__(PrimitiveActions(env))
        self.teacher = ClutterTeacher(beam=beam, max_pushes=max_pushes, tier=self.tier)
        self._twin: ClutterRetrieveEnv | None = None
        self.observation_space = spaces.Dict(
            {
                **env.observation_space.spaces,
                "plan_primitives": spaces.Box(-1, self.action_space.n - 1, (MAX_PLAN,), np.int64),
                "plan_poses": spaces.Box(-np.inf, np.inf, (MAX_PLAN, BLOCKS, 4), np.float32),
                "plan_length": spaces.Box(0, MAX_PLAN, (), np.int64),
                "plan_step": spaces.Box(0, np.iinfo(np.int64).max, (), np.int64),
                "grasp_check": spaces.Box(0.0, 1.0, (3,), np.float32),
            }
        )

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        from simroll.experts.clutter.twin import Estimate, build_twin, estimate_poses

        obs, info = self.env.reset(seed=seed, options=options)
        raw = self.env.unwrapped
        start = time.perf_counter()
        first = self.env.first_observation
        if raw.obs_mode == "full":
            estimate = estimate_poses(raw, first["depth"], first["segmentation"])
        else:  # privileged perception: the twin starts from the true poses
            true = raw.block_poses()[:, [0, 1, 3]]
            estimate = Estimate(true, np.ones(len(true), dtype=bool), [])
        self._twin = build_twin(raw, estimate, self._twin)
        plan = self.teacher.plan(self._twin.get_sim_state())
        self.plan = plan
        self._plan_seconds = time.perf_counter() - start
        primitives = np.full(MAX_PLAN, -1, dtype=np.int64)
        primitives[: len(plan)] = plan.primitives
        poses = [self._twin.block_poses(), *plan.poses]
        padded = np.array(poses + [poses[-1]] * (MAX_PLAN - len(poses)), dtype=np.float32)
        self._plan_obs = {
            "plan_primitives": primitives,
            "plan_poses": padded,
            "plan_length": np.array(len(plan), dtype=np.int64),
        }
        # the world the plan meets differs from the frame it was made from (pose-noise stressor)
        raw.perturb_blocks()
        obs = self.env.observe()
        length = raw.variation.blackout_primitives
        start_at = int(raw.np_random.integers(0, max(1, len(plan) - 1))) if length else 0
        self._blackout = range(start_at, start_at + length)
        self._peak_before_grasp: float | None = None
        self.env.max_primitives = len(plan) + BUDGET_PRIMITIVES
        self.env.max_travel = len(plan) * PUSH_LENGTH + BUDGET_TRAVEL
        info = {**info, "plan_length": len(plan), "plan_graspable": plan.graspable}
        return self._with_plan(obs), info

    def _with_plan(self, obs: dict[str, Any]) -> dict[str, Any]:
        steps = np.array(self.env.get_wrapper_attr("_primitives"), dtype=np.int64)
        plan = {key: value.copy() for key, value in self._plan_obs.items()}
        check = grasp_check(detections(obs), self.env.unwrapped.layout.shapes)
        return {**obs, **plan, "plan_step": steps, "grasp_check": check}

    def step(self, action):
        raw = self.env.unwrapped
        raw.blackout = self.env.get_wrapper_attr("_primitives") in self._blackout
        if as_primitive(action) == GRASP and self._peak_before_grasp is None:
            self._peak_before_grasp = float(raw._peak_deformation)  # what the pushes left
        before = raw.block_poses()
        obs, reward, terminated, truncated, info = self.env.step(action)
        if as_primitive(action) < GRASP and not (terminated or truncated):
            # execution noise: the blocks this push moved end up a little off the physics' answer
            moved = np.linalg.norm(raw.block_poses()[:, :2] - before[:, :2], axis=1) > MOVED
            if moved.any() and any(raw.variation.block_pose_noise):
                raw.perturb_blocks(np.flatnonzero(moved))
                obs = self.env.observe()
        raw.blackout = False
        if as_primitive(action) == GRASP and not (terminated or truncated):
            terminated = True  # one grasp per episode: TRACE judges the final grasp
            info = {**info, "termination_reason": "grasp_failed"}
        if terminated or truncated:
            info = {**info, "episode_metrics": self.episode_metrics(info)}
        return self._with_plan(obs), reward, terminated, truncated, info

    def episode_metrics(self, info: dict[str, Any]) -> dict[str, Any]:
        return {
            "execution_time": round(float(info["execution_time_s"]), 6),  # simulated seconds
            "primitives": int(info["primitives"]),
            "withdrawals": int(info["withdrawals"]),
            "travel_m": round(float(info["travel"]), 6),
            "plan_length": len(self.plan),
            "plan_graspable": bool(self.plan.graspable),
            "plan_wall_s": round(self._plan_seconds, 3),
            # the target's peak deformation when the grasp began (the episode's, if none did):
            # how much of a soft target's damage the pushes did
            "peak_deformation_before_grasp": round(
                self._peak_before_grasp
                if self._peak_before_grasp is not None
                else float(self.env.unwrapped._peak_deformation),
                6,
            ),
        }

    def close(self) -> None:
        self.teacher.close()
        if self._twin is not None:
            self._twin.close()
        super().close()


class ClutterRetrieveEasy(PlannedRetrieval):
    tier = "easy"


class ClutterRetrieveMedium(PlannedRetrieval):
    tier = "medium"


class ClutterRetrieveHard(PlannedRetrieval):
    tier = "hard"
