"""Scripted privileged expert for the soft suite: a state-to-action labeller with a grip-firmness
knob.

The expert reads the true object pose and extents from the simulator and labels the current state
with an action. ``select_action(obs)`` keeps no memory of the episode: every call recovers the
phase of the grasp from the state alone (hand pose against the object's centre and grasp height,
both fingers' grip force from ``obs["tactile"]["force"]``, the jaw servo's target
``env.gripper_target``, the finger travel, the object's height above its rest and, on SoftPlace,
its distance to the goal), then acts for that phase. So it can be asked at states another policy
drove the env into, which is what an interactive-imitation (DAgger) labeller must do; it declares
this with ``labels_any_state = True`` (:class:`simroll.policies.base.LabelsStates`). On its own
path the phases follow each other as align above the object, descend, close until both pads
touch, squeeze, then the task's own motion (SoftLift: lift and hold; SoftPlace: lift, carry,
lower, release, retreat; SoftSqueeze: hold the squeeze). How each is recognised:

- *grasped*: both fingers read more than ``CONTACT_FORCE`` (or one does while the object is off the
  table). Otherwise the hand goes to the grasp, the jaw opening unless it is closing: *close* (the
  jaw target moves 4 mm per step, the hand held at the grasp pose) once the hand is at the grasp
  height over the object's centre (``CLOSE_XY``, ``CLOSE_Z``; twice those while the jaw is partly
  closed, so a closing grasp goes on), or has stopped short of it with its target there; *descend*
  once the hand is within ``ALIGN_XY`` of the pose ``ABOVE`` the object and yawed to it with the
  jaw open, and on the way down while it stays within ``DESCEND_XY``; *rise* when it is low
  beside the object; *align* (toward the pose above, at ``approach_gain``) otherwise.
- *squeeze* (grasped, object still on its rest height): hold the hand at the grasp height (with
  ``squeeze_hold_hand``: still, its target where it is, since a hand moving while the pads grip
  drags the object's surface) while the grip is regulated, until the mean grip force is within
  ``FORCE_TOLERANCE`` of its target or the jaw target has reached its travel limit; then *lift*,
  which goes on whatever the force once the object is more than ``LIFTED`` above its rest. Lift
  and place heights are raised by how far the object has slipped down in the grip.
- SoftPlace: *carry* at the carry height until the object's centre is within ``GOAL_REACHED`` of
  the goal, *lower* while it stays within ``GOAL_KEEP`` (and the hand is below the carry height),
  *release* (hand still, jaw opening) once the hand is down; with the object resting at the goal
  and not grasped, keep releasing until no pad touches and the fingers are ``JAW_CLEARANCE`` clear
  of its rest width, then *retreat* upwards. An object that is neither there nor held is grasped
  again.

``steer_to_goal`` (default off) changes one SoftPlace label: a held object more than
``STEER_LIFTED`` off the table is carried toward the goal at any height, rising to the carry
height on the way, instead of first lifted straight up to it. A learner that lowers the object
a few centimetres short of the goal is then told to move toward it, where the default tells it to
rise in place.

``approach_gain`` (default 1: deadbeat) scales the proportional step toward the pose above the
object: below 1 the hand converges over several steps, which gives imitation data many frames
that show how hand-object offsets map to motion (at 1 that happens in one or two frames).
Its main knob is ``closure``: the grip force (newtons per finger, as the tactile images measure it)
that the expert regulates the jaw to once both pads touch, by moving the jaw servo's target a
little each step from where it is; the jaw target never goes more than ``MAX_SQUEEZE`` past the
finger travel at which the pads meet the object's rest width (its half extent across the jaw).
``"gentle"`` (1.0 N) holds every object without crushing it, ``"firm"`` (6 N, which soft objects
never push back with, so the jaw goes to the travel limit before lifting) also succeeds but
squeezes far harder. On SoftSqueeze, whose success is a force band of 1.5-4 N, gentle aims at
2.0 N and firm at 3.8 N. This is what makes DSR meaningful: both settings complete the tasks, only
one does it carefully.

It exposes the policy verbs (``reset``, ``select_action``) so the episode engine treats it like
any other policy; it needs the env it controls (``env.unwrapped``). ``phase`` names the phase the
last call recovered (a report for observers; no call reads it).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from simroll.envs.core import GRIPPER_STEP, MAX_STEP, SoftTaskEnv
from simroll.envs.scene import FINGER_TRAVEL, OPEN_HALF_WIDTH

# every name ``SoftExpert.phase`` reports, in a SoftPlace episode's order (rise: a re-approach)
PHASES = (
    "rise",
    "align",
    "descend",
    "close",
    "squeeze",
    "lift",
    "carry",
    "lower",
    "release",
    "retreat",
)
CLOSURES = {"gentle": 1.0, "firm": 6.0}
SQUEEZE_FORCE = {"gentle": 2.0, "firm": 3.8}
MAX_SQUEEZE = 0.03  # metres of jaw target past the travel where the pads meet the object
FORCE_GAIN = 0.0015  # metres of jaw target per newton of force error per step (clipped at 1 N)
FORCE_TOLERANCE = 0.2  # N: the squeeze is done once the mean grip force is this close to target
CARRY_SPEED = 0.5  # fraction of the maximum hand speed while carrying
CONTACT_FORCE = 0.15  # N per finger that counts as "touching"
RELEASED_FORCE = 0.01  # N per finger below which a pad has let go (SoftPlace's success test)
CLOSE_STEP = 0.004  # metres of jaw target per step while closing toward the first touch
PAD_HALF_HEIGHT = 0.03
ABOVE = 0.08  # align this far above the grasp height
LIFT_HEIGHT = {"SoftLift": 0.10, "SoftPlace": 0.07}  # hand above the grasp height
LOWER_CLEARANCE = 0.003  # SoftPlace lowers the hand to this above the grasp height
RETREAT_HEIGHT = 0.12
MAX_SLIP = 0.05  # most that lift heights are raised for an object slipped down in the grip
LIFTED = 0.005  # object centre above its rest: the lift has begun
ALIGN_XY = 0.006  # hand this close to the pose above the object (and ALIGN_YAW) starts the descent
ALIGN_YAW = 0.03
DESCEND_XY = 0.015  # ... which goes on below that pose while the hand stays this close (horizontal)
DESCEND_YAW = 0.1
CLOSE_XY = 0.01  # hand this close to the grasp pose (horizontal, and CLOSE_Z in height) closes;
CLOSE_Z = 0.006  # twice these while the jaw is closing
GOAL_REACHED = 0.005  # SoftPlace: object centre this close to the goal ends the carry
GOAL_KEEP = 0.02  # ... and while within this, lower / release / retreat go on
STEER_LIFTED = 0.01  # steer_to_goal: an object this far off its rest is carried at any height
JAW_CLEARANCE = 0.005  # released once each finger is this far back from the object's rest width
STALL_SPEED = 0.005  # m/s: a hand at its commanded target and this slow has gone as far as it can
JAW_OPEN = 0.003  # jaw target (m) up to which the jaw counts as open (a closing step is 4 mm)


def regulated_jaw_target(
    gripper_target: float, forces: np.ndarray, target: float, limit: float
) -> float:
    """One grip-force regulation step: the jaw target (metres of finger travel) moved from
    ``gripper_target`` by ``FORCE_GAIN`` per newton of the mean finger force's error from
    ``target`` (clipped at 1 N), within ``[0, limit]``. The soft expert's grip and the clutter
    grasp primitive's hold of a soft target both use it."""
    error = float(np.clip(target - forces.mean(), -1.0, 1.0))
    return float(np.clip(gripper_target + FORCE_GAIN * error, 0.0, limit))


class SoftExpert:
    """Memoryless grasping expert for SoftLift, SoftPlace and SoftSqueeze: the phase of each step
    is recovered from the simulator state, so any state can be labelled."""

    labels_any_state: ClassVar[bool] = True
    phases: ClassVar[tuple[str, ...]] = PHASES  # every value ``phase`` takes

    def __init__(
        self,
        env,
        closure: str | float = "gentle",
        gripper_mode: str | None = None,
        approach_gain: float = 1.0,
        squeeze_hold_hand: bool = False,
        steer_to_goal: bool = False,
    ):
        self.env: SoftTaskEnv = env.unwrapped
        if not isinstance(steer_to_goal, bool):
            raise ValueError(f"steer_to_goal must be true or false, got {steer_to_goal!r}")
        self.steer_to_goal = steer_to_goal
        if not isinstance(squeeze_hold_hand, bool):
            raise ValueError(f"squeeze_hold_hand must be true or false, got {squeeze_hold_hand!r}")
        self.squeeze_hold_hand = squeeze_hold_hand
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
        return (
            f"expert/{self.closure}"
            + ("/hold" if self.squeeze_hold_hand else "")
            + ("/steer" if self.steer_to_goal else "")
        )

    def reset(self) -> None:
        """Nothing to forget (the expert is memoryless); clears the ``phase`` report."""
        self.phase: str | None = None

    # -------------------------------------------------------------- state readings
    def grasp_height(self) -> float:
        """The hand height (pad centre, world z, m) the expert closes the jaw at for this object."""
        center = self.env.rest_center
        return max(float(center[2]), PAD_HALF_HEIGHT + 0.004)

    def finger_forces(self, obs) -> np.ndarray:
        """Each finger's total normal force (N, shape (2,)) from an observation's tactile."""
        return np.asarray(obs["tactile"]["force"]).reshape(2, -1).sum(axis=1)

    def contact_travel(self) -> float:
        """Finger travel (m from fully open) at which the pads meet the object's rest width."""
        half_width = float(self.env.object_half_extents()[1])  # across the jaw (hand's y)
        return float(np.clip(OPEN_HALF_WIDTH - half_width, 0.0, FINGER_TRAVEL))

    def _grip_limit(self) -> float:
        return min(self.contact_travel() + MAX_SQUEEZE, FINGER_TRAVEL)

    def _slip(self, pose: np.ndarray, center: np.ndarray) -> float:
        """How far a held object hangs lower in the hand than where it was grasped (m, >= 0): the
        lift and place heights of the hand are raised by it, so they hold for the object."""
        grasped_offset = self.grasp_height() - float(self.env.rest_center[2])
        return float(np.clip(pose[2] - center[2] - grasped_offset, 0.0, MAX_SLIP))

    def _desired(self, xyz_world, yaw: float) -> np.ndarray:
        """A hand pose in the hand target's coordinates."""
        return np.array([xyz_world[0], xyz_world[1], xyz_world[2] - self.env.ids.hand_base_z, yaw])

    def _goto(self, xyz_world, yaw: float, gain: float = 1.0) -> np.ndarray:
        target = self.env.hand_target()
        return np.clip(gain * (self._desired(xyz_world, yaw) - target) / MAX_STEP, -1.0, 1.0)

    def _stalled(self, xyz_world, yaw: float) -> bool:
        """The hand's target is at a pose but the hand has stopped short of it (something blocks
        it: it has gone as far as it can)."""
        env = self.env
        target_error = np.linalg.norm(env.hand_target()[:3] - self._desired(xyz_world, yaw)[:3])
        speed = np.linalg.norm(env.data.qvel[env.ids.hand_dofs[:3]])
        return bool(target_error < 0.001 and speed < STALL_SPEED)

    # -------------------------------------------------------------- actions
    def _action(self, delta: np.ndarray, grip: float) -> np.ndarray:
        """Hand delta and a gripper command that sets the jaw target to ``grip`` metres."""
        env = self.env
        if env.gripper_mode == "binary":
            gripper = 1.0 if grip > JAW_OPEN else -1.0
        elif env.gripper_mode == "delta":  # move the env's jaw target toward grip
            gripper = (grip - env.gripper_target) / GRIPPER_STEP
        else:
            gripper = 2.0 * grip / FINGER_TRAVEL - 1.0
        return np.clip(np.append(delta, gripper), -1.0, 1.0).astype(np.float32)

    def _regulated_grip(self, forces: np.ndarray, target: float) -> float:
        """The jaw target one regulation step from the current one toward ``target`` newtons."""
        return regulated_jaw_target(self.env.gripper_target, forces, target, self._grip_limit())

    # -------------------------------------------------------------- policy verbs
    def select_action(self, obs) -> np.ndarray:
        self.phase, action = self._label(obs)
        return action

    def _label(self, obs) -> tuple[str, np.ndarray]:
        """The recovered phase and its action, from the current state alone."""
        env = self.env
        task = env.task_name
        center = env.object_center()
        pose = env.hand_pose()
        hold = env.hand_target()
        grasp_z = self.grasp_height()
        forces = self.finger_forces(obs)
        lifted = float(center[2] - env.rest_center[2])
        touching = forces > CONTACT_FORCE
        # both pads on the object, or it is off the table and one still holds it
        grasped = bool(touching.all() or (lifted > LIFTED and touching.any()))
        if self.squeeze_hold_hand:  # squeeze with the hand held where it is
            still = np.zeros(4)
        else:  # squeeze at the grasp height
            still = self._goto((hold[0], hold[1], grasp_z), hold[3])

        if task == "SoftPlace":
            placed = self._place(forces, grasped, center, pose, hold, grasp_z, lifted)
            if placed is not None:
                return placed
        if not grasped:
            return self._approach(center, pose, hold, grasp_z)
        if task == "SoftSqueeze":
            return "squeeze", self._action(still, self._regulated_grip(forces, self.squeeze_force))
        grip = self._regulated_grip(forces, self.grip_force)
        settled = abs(forces.mean() - self.grip_force) <= FORCE_TOLERANCE
        at_limit = env.gripper_target >= self._grip_limit() - 1e-5
        if lifted <= LIFTED and not (settled or at_limit):
            return "squeeze", self._action(still, grip)
        height = grasp_z + LIFT_HEIGHT[task] + self._slip(pose, center)
        steer = self.steer_to_goal and lifted > STEER_LIFTED  # carry on the way up (or down)
        if task == "SoftPlace" and (pose[2] > height - 0.01 or steer):
            goal = env.goal_position()[:2] - (center[:2] - pose[:2])
            delta = self._goto((goal[0], goal[1], height), hold[3])
            return "carry", self._action(np.clip(delta, -CARRY_SPEED, CARRY_SPEED), grip)
        return "lift", self._action(self._goto((hold[0], hold[1], height), hold[3]), grip)

    def _approach(self, center, pose, hold, grasp_z) -> tuple[str, np.ndarray]:
        """Not grasped: rise, align, descend, close (the jaw opening unless closing)."""
        env = self.env
        yaw = env.object_yaw() if env._yaw_matters() else 0.0
        yaw_error = abs(pose[3] - yaw)
        horizontal = float(np.linalg.norm(pose[:2] - center[:2]))
        height = float(pose[2] - grasp_z)
        above_z = grasp_z + ABOVE
        grasp = (center[0], center[1], grasp_z)
        closing = env.gripper_target > JAW_OPEN  # the jaw has begun to close (or not reopened)
        scale = 2.0 if closing else 1.0
        at_grasp = (horizontal < scale * CLOSE_XY and abs(height) < scale * CLOSE_Z) or (
            horizontal < CLOSE_XY and self._stalled(grasp, yaw)
        )
        if at_grasp and yaw_error < scale * DESCEND_YAW:  # close, holding the hand there
            grip = min(FINGER_TRAVEL, env.gripper_target + CLOSE_STEP)
            return "close", self._action(self._goto(grasp, yaw), grip)
        if not closing and (
            (horizontal < ALIGN_XY and yaw_error < ALIGN_YAW and pose[2] < above_z + ALIGN_XY)
            or (pose[2] < above_z - 0.01 and horizontal < DESCEND_XY and yaw_error < DESCEND_YAW)
        ):  # over the object with the jaw open: from the pose above it, or on the way down
            return "descend", self._action(self._goto(grasp, yaw), 0.0)
        if horizontal > DESCEND_XY and pose[2] < above_z - 0.02:  # low beside the object
            return "rise", self._action(self._goto((hold[0], hold[1], above_z), hold[3]), 0.0)
        delta = self._goto((center[0], center[1], above_z), yaw, self.approach_gain)
        return "align", self._action(delta, 0.0)

    def _place(self, forces, grasped, center, pose, hold, grasp_z, lifted):
        """SoftPlace near its goal: lower, release and retreat; None elsewhere."""
        env = self.env
        goal = env.goal_position()
        distance = float(np.linalg.norm(center[:2] - goal[:2]))
        if distance >= GOAL_KEEP:
            return None
        still = np.zeros(4)
        if grasped:
            slip = self._slip(pose, center)
            carry_z = grasp_z + LIFT_HEIGHT["SoftPlace"] + slip
            hand_goal = goal[:2] - (center[:2] - pose[:2])
            lower = (hand_goal[0], hand_goal[1], grasp_z + LOWER_CLEARANCE + slip)
            if pose[2] < lower[2] + CLOSE_Z or self._stalled(lower, hold[3]):
                return "release", self._action(still, 0.0)
            if distance < GOAL_REACHED or pose[2] < carry_z - 0.01:
                grip = self._regulated_grip(forces, self.grip_force)
                return "lower", self._action(self._goto(lower, hold[3]), grip)
            return None  # still at carry height, not yet over the goal: carry on
        if abs(lifted) >= 0.015:
            return None  # not resting at the goal (dropped on the way): grasp it again
        travel = float(env.data.qpos[env.ids.finger_qpos].max())
        if (forces > RELEASED_FORCE).any() or travel > self.contact_travel() - JAW_CLEARANCE:
            return "release", self._action(still, 0.0)
        retreat = (pose[0], pose[1], grasp_z + RETREAT_HEIGHT)
        return "retreat", self._action(self._goto(retreat, hold[3]), 0.0)

    def predict_action_chunk(self, obs) -> np.ndarray:
        return self.select_action(obs)[None]


def yaw_distance(a: float, b: float) -> float:
    return abs(math.remainder(a - b, 2 * math.pi))
