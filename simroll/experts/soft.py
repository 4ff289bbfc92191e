"""Scripted privileged expert for the soft suite, with a grip-firmness knob.

The expert reads the true object pose and extents from the simulator and drives the hand through
phases (align above, descend, close until both pads touch, squeeze, then the task's own motion).
``approach_gain`` (default 1: deadbeat) scales the proportional step toward the pose above the
object: below 1 the hand converges over several steps, which gives imitation data many frames
that show how hand-object offsets map to motion (at 1 that happens in one or two frames).
Its main knob is ``closure``: the grip force (newtons per finger, as the tactile images measure it)
that the expert regulates the jaw to once both pads touch, by moving the jaw servo's target a
little each step; the jaw never closes more than ``MAX_SQUEEZE`` past first contact.
``"gentle"`` (1.0 N) holds every object without crushing it, ``"firm"`` (6 N, usually reaching
the travel limit on soft objects) also succeeds but squeezes far harder. On SoftSqueeze, whose
success is a force band of 1.5-4 N, gentle aims at 2.0 N and firm at 3.8 N. This is what makes DSR
meaningful: both settings complete the tasks, only one does it carefully.

It exposes the policy verbs (``reset``, ``select_action``) so the episode engine treats it like
any other policy; it needs the env it controls (``env.unwrapped``).
"""

from __future__ import annotations

import math

import numpy as np

from simroll.envs.core import GRIPPER_STEP, MAX_STEP, SoftTaskEnv
from simroll.envs.scene import FINGER_TRAVEL

CLOSURES = {"gentle": 1.0, "firm": 6.0}
SQUEEZE_FORCE = {"gentle": 2.0, "firm": 3.8}
MAX_SQUEEZE = 0.03  # metres past first contact
FORCE_GAIN = 0.0015  # metres of jaw target per newton of force error per step (clipped at 1 N)
CARRY_SPEED = 0.5  # fraction of the maximum hand speed while carrying
CONTACT_FORCE = 0.15  # N per finger that counts as "touching"
PAD_HALF_HEIGHT = 0.03


class SoftExpert:
    """Phase-scripted grasping expert for SoftLift, SoftPlace and SoftSqueeze."""

    def __init__(
        self,
        env,
        closure: str | float = "gentle",
        gripper_mode: str | None = None,
        approach_gain: float = 1.0,
    ):
        self.env: SoftTaskEnv = env.unwrapped
        if not (isinstance(approach_gain, int | float) and 0.05 <= approach_gain <= 1.0):
            raise ValueError(f"approach_gain must be in [0.05, 1], got {approach_gain!r}")
        self.approach_gain = float(approach_gain)
        if isinstance(closure, str):
            if closure not in CLOSURES:
                raise ValueError(
                    f"closure must be one of {sorted(CLOSURES)} or metres, got {closure!r}"
                )
            self.grip_force = CLOSURES[closure]
            self.squeeze_force = SQUEEZE_FORCE[closure]
        else:
            if not (isinstance(closure, int | float) and 0.1 <= closure <= 20.0):
                raise ValueError(
                    f"closure must be 'gentle', 'firm' or a force in [0.1, 20] N, got {closure!r}"
                )
            self.grip_force = float(closure)
            self.squeeze_force = float(np.clip(closure, 1.6, 3.9))
        self.closure = closure
        self.reset()

    @property
    def policy_id(self) -> str:
        return f"expert/{self.closure}"

    def reset(self) -> None:
        self.phase = "align"
        self.phase_steps = 0
        self.grip = 0.0  # commanded finger travel (m)
        self.contact_travel: float | None = None
        self.carry_offset: np.ndarray | None = None

    # -------------------------------------------------------------- helpers
    def _grasp_height(self) -> float:
        center = self.env.rest_center
        return max(float(center[2]), PAD_HALF_HEIGHT + 0.004)

    def _finger_forces(self, obs) -> np.ndarray:
        return np.asarray(obs["tactile"]["force"]).reshape(2, -1).sum(axis=1)

    def _goto(self, xyz_world, yaw: float, gain: float = 1.0) -> tuple[np.ndarray, float]:
        target = self.env.hand_target()
        desired = np.array(
            [xyz_world[0], xyz_world[1], xyz_world[2] - self.env.ids.hand_base_z, yaw]
        )
        delta = np.clip(gain * (desired - target) / MAX_STEP, -1.0, 1.0)
        error = float(np.linalg.norm(self.env.hand_pose()[:3] - np.asarray(xyz_world)))
        return delta, error

    def _action(self, delta: np.ndarray) -> np.ndarray:
        if self.env.gripper_mode == "binary":
            gripper = 1.0 if self.grip > 1e-4 else -1.0
        elif self.env.gripper_mode == "delta":  # move the env's jaw target toward self.grip
            gripper = (self.grip - self.env.gripper_target) / GRIPPER_STEP
        else:
            gripper = 2.0 * self.grip / FINGER_TRAVEL - 1.0
        return np.clip(np.append(delta, gripper), -1.0, 1.0).astype(np.float32)

    def _regulate_grip(self, forces: np.ndarray, target: float) -> None:
        error = float(np.clip(target - forces.mean(), -1.0, 1.0))
        limit = (self.contact_travel or 0.0) + MAX_SQUEEZE
        self.grip = float(np.clip(self.grip + FORCE_GAIN * error, 0.0, min(limit, FINGER_TRAVEL)))

    def _next(self, phase: str) -> None:
        self.phase, self.phase_steps = phase, 0

    # -------------------------------------------------------------- policy verbs
    def select_action(self, obs) -> np.ndarray:
        env = self.env
        self.phase_steps += 1
        center = env.object_center()
        yaw = env.object_yaw() if env._yaw_matters() else 0.0
        grasp_z = self._grasp_height()
        forces = self._finger_forces(obs)
        task = env.task_name

        if self.phase == "align":
            delta, error = self._goto(
                (center[0], center[1], grasp_z + 0.08), yaw, self.approach_gain
            )
            if error < 0.006 and abs(env.hand_pose()[3] - yaw) < 0.03:
                self._next("descend")
            return self._action(delta)
        if self.phase == "descend":
            delta, error = self._goto((center[0], center[1], grasp_z), yaw)
            if error < 0.004 or self.phase_steps > 40:
                self._next("close")
            return self._action(delta)
        hold = env.hand_target()
        if self.phase == "close":
            # close at 4 mm per step until both pads touch (the contact point is privileged here,
            # the touch itself is what the tactile images show)
            if (forces > CONTACT_FORCE).all() or self.grip >= FINGER_TRAVEL:
                self.contact_travel = float(env.data.qpos[env.ids.finger_qpos].mean())
                self._next("squeeze")
            else:
                self.grip = min(FINGER_TRAVEL, self.grip + 0.004)
            return self._action(np.zeros(4))
        if self.phase in ("squeeze", "lift", "carry", "lower"):
            self._regulate_grip(
                forces, self.squeeze_force if task == "SoftSqueeze" else self.grip_force
            )
        if self.phase == "squeeze":
            if task != "SoftSqueeze" and self.phase_steps >= 8:
                self._next("lift")
            return self._action(np.zeros(4))
        if self.phase == "lift":
            height = 0.10 if task == "SoftLift" else 0.07
            delta, _ = self._goto((hold[0], hold[1], grasp_z + height), hold[3])
            if task == "SoftPlace" and env.hand_pose()[2] > grasp_z + height - 0.01:
                self.carry_offset = center[:2] - env.hand_pose()[:2]
                self._next("carry")
            return self._action(delta)
        if self.phase == "carry":
            goal = env.goal_position()[:2] - self.carry_offset
            delta, error = self._goto((goal[0], goal[1], grasp_z + 0.07), hold[3])
            if error < 0.005:
                self._next("lower")
            return self._action(np.clip(delta, -CARRY_SPEED, CARRY_SPEED))
        if self.phase == "lower":
            goal = env.goal_position()[:2] - self.carry_offset
            delta, error = self._goto((goal[0], goal[1], grasp_z + 0.003), hold[3])
            if error < 0.004 or self.phase_steps > 30:
                self._next("release")
            return self._action(delta)
        if self.phase == "release":
            self.grip = 0.0
            if self.phase_steps > 6:
                self._next("retreat")
            return self._action(np.zeros(4))
        if self.phase == "retreat":
            pose = env.hand_pose()
            delta, _ = self._goto((pose[0], pose[1], grasp_z + 0.12), hold[3])
            return self._action(delta)
        raise RuntimeError(f"unknown expert phase {self.phase!r}")  # pragma: no cover

    def predict_action_chunk(self, obs) -> np.ndarray:
        return self.select_action(obs)[None]


def yaw_distance(a: float, b: float) -> float:
    return abs(math.remainder(a - b, 2 * math.pi))
