"""TRACE's discrete action set for clutter retrieval, each primitive one macro step.

:class:`PrimitiveActions` wraps a ``simroll/ClutterRetrieve-v0`` env (``Discrete(18)``):

* ``0-15``: pushes of 4 cm in the hand's frame at push height (closed jaw as the pusher): the four
  axial pushes (+x, -x, +y, -y), then per diagonal (++, +-, -+, --) a straight 4 cm push and two
  L-shaped ones (2 cm along x then 2 cm along y, and y then x). ``PUSHES`` lists the waypoints.
* ``16`` (``GRASP``): withdraw out of the camera's view, read the target and its neighbours from
  that unoccluded observation's detections (in ``obs_mode="state"``, the true poses), pick the
  grasp yaw with the most clearance (:func:`simroll.envs.clutter.layout.grasp_clear` on the
  detected footprints), set the jaw to the target's width plus the pads' clearance (a binary jaw
  stays open), descend, close, lift. A rigid target is squeezed shut; a soft (flexcomp) target
  is held gently, as the soft suite's expert holds it: the jaw closes until the pads touch, then
  its target follows the tactile grip force towards ``GRASP_FORCE`` newtons per finger through
  the close and the lift (a binary jaw cannot: it closes fully). On success the env's own success
  test ends the episode; a failed grasp opens, lifts and returns to the push pose it left.
* ``17`` (``LOOK``): withdraw out of view for one observation and come back (a sensing
  withdrawal, what a closed-loop teacher does when its view is occluded).

Every primitive runs a low-level controller through the wrapped env's 5-D ``step`` at 20 Hz, so
physics, contacts, tactile and the evaluator are the env's own; the wrapper adds up what a
primitive cost: ``info["primitive"]``, ``low_level_steps``, and running totals
``execution_time_s`` (simulated seconds), ``primitives``, ``withdrawals`` (grasps and looks each
withdraw once) and ``travel`` (metres of hand path in the plane while pushing). Budgets
(TRACE's: ``max_primitives`` = plan length + 20, ``max_travel`` = plan length x 4 cm + 15 cm)
truncate the episode with ``info["termination_reason"] = "budget"``.

At reset the hand moves from its home, in the air, to the free spot nearest the target where the
closed jaw fits with 5 mm to spare (:func:`start_spot`, from the first observation's detections)
and descends there to push height.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from simroll.envs.clutter.layout import (
    distance,
    footprint,
    grasp_blockage,
    grasp_clear,
    grasp_opening,
    pad_footprints,
)
from simroll.envs.clutter.scene import HAND_HOME
from simroll.envs.core import CONTROL_HZ, GRIPPER_STEP, MAX_STEP
from simroll.envs.scene import FINGER_TRAVEL, OPEN_HALF_WIDTH
from simroll.features import GRASP_PRIMITIVE, PRIMITIVE_NAMES

PUSH_LENGTH = 0.04
PUSH_Z = 0.032  # pad centre height while pushing: pads span the blocks' height, palm clears them
SAFE_Z = 0.10  # above every block
LIFT_Z = 0.12
GRASP_Z = 0.032
PUSHER_HALF = (0.015, 0.012)  # the closed jaw's footprint, hand frame
START_CLEARANCE = 0.005
GRASP_FORCE = 1.0  # N per finger a soft target is held with (the soft expert's gentle closure)
GENTLE_CLOSE_STEPS = 30  # most control steps the force-regulated close may take


def _pushes() -> list[list[tuple[float, float]]]:
    half = PUSH_LENGTH / 2
    diag = PUSH_LENGTH / math.sqrt(2)
    out: list[list[tuple[float, float]]] = [
        [(PUSH_LENGTH, 0.0)],
        [(-PUSH_LENGTH, 0.0)],
        [(0.0, PUSH_LENGTH)],
        [(0.0, -PUSH_LENGTH)],
    ]
    for sx, sy in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
        out.append([(sx * diag, sy * diag)])
        out.append([(sx * half, 0.0), (sx * half, sy * half)])
        out.append([(0.0, sy * half), (sx * half, sy * half)])
    return out


PUSHES = _pushes()  # per push primitive: cumulative waypoints in the hand frame
NAMES = PRIMITIVE_NAMES
GRASP = GRASP_PRIMITIVE
LOOK = NAMES.index("look")
assert GRASP == len(PUSHES) == 16 and LOOK == 17


def detections(obs: dict[str, Any]) -> np.ndarray:
    """The block detections an observation gives, as rows of the partial object observation:
    ``objects`` in ``obs_mode="full"``; in ``"state"`` mode every true pose, seen and fresh."""
    if "objects" in obs:
        return np.asarray(obs["objects"])
    poses = np.asarray(obs["environment_state"])
    flags = np.tile([1.0, 0.0, 1.0], (len(poses), 1))
    return np.concatenate([poses, flags], axis=1)


def detected_footprints(objects: np.ndarray, shapes) -> list[list[np.ndarray] | None]:
    """Footprints at the detected poses (rows of :func:`detections`); None for blocks never
    seen."""
    out: list[list[np.ndarray] | None] = []
    for row, shape in zip(objects, shapes, strict=True):
        seen = row[6] > 0
        out.append(footprint(shape, np.array([row[0], row[1], row[3]])) if seen else None)
    return out


def start_spot(prints: list[list[np.ndarray] | None], target_xy: np.ndarray) -> np.ndarray:
    """The free point nearest the target (16 bearings, 5 mm rings) where the closed jaw at yaw 0
    keeps ``START_CLEARANCE`` from every detected block."""
    pusher = np.array(
        [
            [-PUSHER_HALF[0], -PUSHER_HALF[1]],
            [PUSHER_HALF[0], -PUSHER_HALF[1]],
            [PUSHER_HALF[0], PUSHER_HALF[1]],
            [-PUSHER_HALF[0], PUSHER_HALF[1]],
        ]
    )
    known = [p for p in prints if p is not None]
    for ring in range(1, 60):
        radius = 0.005 * ring
        for k in range(16):
            angle = 2 * math.pi * k / 16
            spot = target_xy + radius * np.array([math.cos(angle), math.sin(angle)])
            if all(distance([pusher + spot], other) >= START_CLEARANCE for other in known):
                return spot
    raise RuntimeError("no free start spot within 30 cm of the target")


def _best_grasp(prints: list[list[np.ndarray] | None]) -> tuple[float, bool, float]:
    """The grasp yaw for the target (``prints[0]``): a clear one if any, the one whose pads keep
    the most distance from the detected clutter; whether it was clear; that distance (m)."""
    target = prints[0]
    assert target is not None
    others = [p for p in prints[1:] if p is not None]
    centre = np.mean(np.concatenate(target), axis=0)
    clear = grasp_clear(target, centre, others)
    best, best_room = 0.0, -math.inf
    for k in range(16):
        yaw = math.pi * k / 16
        pads = pad_footprints(target, centre, yaw)
        if pads is None:
            continue
        room = min((distance([pad], other) for pad in pads for other in others), default=1.0)
        if (yaw in clear, room) > (best in clear, best_room):
            best, best_room = yaw, room
    return best, best in clear, best_room


def choose_grasp_yaw(prints: list[list[np.ndarray] | None]) -> tuple[float, bool]:
    """The grasp yaw for the target (``prints[0]``): a clear one if any, the one whose pads keep
    the most distance from the detected clutter; and whether it was clear."""
    yaw, clear, _ = _best_grasp(prints)
    return yaw, clear


def grasp_check(objects: np.ndarray, shapes) -> np.ndarray:
    """What the grasp primitive would find in these detections (rows of :func:`detections`):
    ``[clear, room, blockage]``: 1.0 when a grasp yaw's pads are clear of every detected block,
    else 0.0; the distance (m) the chosen yaw's pads keep from detected clutter (0 when they
    touch or overlap it); the least pad overlap with detected clutter over the grasp yaws (m^2,
    :func:`~simroll.envs.clutter.layout.grasp_blockage`; 0 when a yaw overlaps nothing). A
    target never seen gives zeros. Non-privileged: detections and the blocks' known shapes only
    (the plan-conditioned envs' ``grasp_check`` observation, which the TRACE student reads)."""
    prints = detected_footprints(objects, shapes)
    if prints[0] is None:
        return np.zeros(3, dtype=np.float32)
    _, clear, room = _best_grasp(prints)
    others = [p for p in prints[1:] if p is not None]
    centre = np.mean(np.concatenate(prints[0]), axis=0)
    blocked = grasp_blockage(prints[0], centre, others) if not clear else 0.0
    return np.array([float(clear), max(room, 0.0), min(blocked, 1.0)], dtype=np.float32)


def as_primitive(action: Any) -> int:
    """The primitive index of ``action``: an int, or a one-element array holding one (as the
    episode engine passes actions on)."""
    value = np.asarray(action)
    if value.size == 1 and np.issubdtype(value.dtype, np.number):
        number = float(value.reshape(-1)[0])
        if number.is_integer() and 0 <= number < len(NAMES):
            return int(number)
    raise ValueError(f"primitive must be an int in [0, {len(NAMES) - 1}], got {action!r}")


class PrimitiveActions(gym.Wrapper):
    """Discrete push / grasp / look primitives over a ClutterRetrieve env (see the module doc)."""

    def __init__(
        self,
        env: gym.Env,
        max_primitives: int | None = None,
        max_travel: float | None = None,
        settle_steps: int = 2,
    ):
        super().__init__(env)
        if max_primitives is not None and not (
            isinstance(max_primitives, int) and max_primitives > 0
        ):
            raise ValueError(f"max_primitives must be an int > 0 or None, got {max_primitives!r}")
        if max_travel is not None and not (max_travel > 0 and math.isfinite(max_travel)):
            raise ValueError(f"max_travel must be metres > 0 or None, got {max_travel!r}")
        self.action_space = spaces.Discrete(len(NAMES))
        self.max_primitives, self.max_travel = max_primitives, max_travel
        self.settle_steps = settle_steps
        self._grip_force: float | None = None  # set while a soft target's grip is regulated
        # callables (obs, info) -> None called after every low-level control step of a primitive
        # (a video films the motion, not only the primitives' end states)
        self.low_level_observers: list[Callable[[dict, dict], None]] = []

    # ----------------------------------------------------------------- low-level control
    def _drive(self, goal: np.ndarray, grip: float, max_steps: int, tol: float = 0.002):
        """Step towards ``goal`` (x, y, z, yaw of the hand target) until the commanded target is
        there (the hand may lag behind a block it pushes); returns the last step's results."""
        raw = self.env.unwrapped
        result = None
        for _ in range(max_steps):
            delta = (goal - raw.hand_target()) / MAX_STEP
            delta[3] = math.remainder(goal[3] - raw.hand_target()[3], 2 * math.pi) / MAX_STEP[3]
            if np.abs(delta * MAX_STEP).max() < tol and result is not None:
                break
            result = self._step(np.r_[np.clip(delta, -1, 1), grip])
            if result[2] or result[3]:
                break
        return result

    def _step(self, action: np.ndarray):
        raw = self.env.unwrapped
        if self._grip_force is not None:
            action = action.copy()
            action[4] = self._regulated_grip(self._grip_force)
        before = raw.hand_pose()[:2]
        result = self.env.step(action.astype(np.float32))
        if self._pushing:
            self._travel += float(np.linalg.norm(raw.hand_pose()[:2] - before))
        self._low_level += 1
        self._last = result
        for observe in self.low_level_observers:
            observe(result[0], result[4])
        return result

    def _hold(self, grip: float, steps: int):
        raw = self.env.unwrapped
        result = self._last
        for _ in range(steps):
            result = self._drive(raw.hand_target(), grip, 1)
            if result[2] or result[3]:
                break
        return result

    def _finger_forces(self) -> np.ndarray:
        """Per-finger grip force (N) in the last observation's tactile images."""
        return np.asarray(self._last[0]["tactile"]["force"]).reshape(2, -1).sum(axis=1)

    def _regulated_grip(self, force: float) -> float:
        """The gripper command that moves the jaw target one step towards ``force`` newtons per
        finger: closing by the soft expert's closing step until a pad touches, then by its force
        gain on the (clipped) force error, within the fingers' travel."""
        from simroll.experts.soft import CLOSE_STEP, CONTACT_FORCE, regulated_jaw_target

        raw = self.env.unwrapped
        forces = self._finger_forces()
        if (forces < CONTACT_FORCE).all():
            goal = float(np.clip(raw.gripper_target + CLOSE_STEP, 0.0, FINGER_TRAVEL))
        else:
            goal = regulated_jaw_target(raw.gripper_target, forces, force, FINGER_TRAVEL)
        if raw.gripper_mode == "delta":
            return float(np.clip((goal - raw.gripper_target) / GRIPPER_STEP, -1.0, 1.0))
        return 2.0 * goal / FINGER_TRAVEL - 1.0  # continuous: the jaw target itself

    def _close_gently(self):
        """Close on a soft target under grip-force regulation until the force has settled near
        ``GRASP_FORCE`` (or ``GENTLE_CLOSE_STEPS``); regulation stays on until the grasp ends."""
        from simroll.experts.soft import CONTACT_FORCE, FORCE_TOLERANCE

        raw = self.env.unwrapped
        self._grip_force = GRASP_FORCE
        result = self._last
        for _ in range(GENTLE_CLOSE_STEPS):
            result = self._drive(raw.hand_target(), 0.0, 1)
            if result[2] or result[3]:
                break
            forces = self._finger_forces()
            if (forces > CONTACT_FORCE).all() and abs(forces.mean() - GRASP_FORCE) <= (
                FORCE_TOLERANCE
            ):
                break
        return result

    def _pose(self, x: float, y: float, z: float, yaw: float) -> np.ndarray:
        return np.array([x, y, z - self.env.unwrapped.ids.hand_base_z, yaw])

    # ----------------------------------------------------------------- episode
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.first_observation = obs  # before the approach: the hand is out of view
        self._travel, self._low_level, self._primitives, self._withdrawals = 0.0, 0, 0, 0
        self._pushing = False
        self._last = (obs, 0.0, False, False, info)
        raw = self.env.unwrapped
        shapes = raw.layout.shapes
        found = detections(obs)
        spot = start_spot(detected_footprints(found, shapes), found[0, :2])
        self._drive(self._pose(*raw.hand_pose()[:2], SAFE_Z, 0.0), 1.0, 30)
        self._drive(self._pose(spot[0], spot[1], SAFE_Z, 0.0), 1.0, 60)
        obs, reward, terminated, truncated, info = self._drive(
            self._pose(spot[0], spot[1], PUSH_Z, 0.0), 1.0, 30
        )
        self._hold(1.0, self.settle_steps)
        obs, reward, terminated, truncated, info = self._last
        return obs, self._totals(info, None)

    def observe(self) -> dict[str, Any]:
        """A fresh observation of the current state (after a change made outside ``step``)."""
        obs = self.env.unwrapped._observation()
        result = self._last
        self._last = (obs, *result[1:]) if result is not None else (obs, 0.0, False, False, {})
        return obs

    def load(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`ClutterRetrieveEnv.get_sim_state` state with fresh totals (a
        search copy simulating primitives from a state of another env)."""
        self.env.unwrapped.set_sim_state(state)
        self._travel, self._low_level, self._primitives, self._withdrawals = 0.0, 0, 0, 0
        self._pushing = False
        self._last = None

    def step(self, action):
        action = as_primitive(action)
        self._primitives += 1
        start_steps = self._low_level
        if action < GRASP:
            self._pushing = True
            try:
                self._push(action)
            finally:
                self._pushing = False
        elif action == GRASP:
            self._grasp()
        else:
            self._look()
        obs, reward, terminated, truncated, info = self._last
        info = self._totals(info, action, self._low_level - start_steps)
        if not (terminated or truncated):
            over = (
                self.max_primitives is not None and self._primitives >= self.max_primitives
            ) or (self.max_travel is not None and self._travel > self.max_travel)
            if over:
                truncated = True
                info["termination_reason"] = "budget"
        return obs, reward, terminated, truncated, info

    def _totals(self, info: dict, action: int | None, steps: int = 0) -> dict:
        info = dict(info)
        info.update(
            primitive=None if action is None else NAMES[action],
            low_level_steps=steps,
            execution_time_s=self._low_level / CONTROL_HZ,
            primitives=self._primitives,
            withdrawals=self._withdrawals,
            travel=self._travel,
        )
        return info

    # ----------------------------------------------------------------- primitives
    def _push(self, index: int) -> None:
        raw = self.env.unwrapped
        start = raw.hand_target().copy()
        yaw = start[3]
        c, s = math.cos(yaw), math.sin(yaw)
        for wx, wy in PUSHES[index]:
            goal = start.copy()
            goal[:2] += [c * wx - s * wy, s * wx + c * wy]
            result = self._drive(goal, 1.0, 12)
            if result[2] or result[3]:
                return
        self._hold(1.0, self.settle_steps)

    def _withdraw(self):
        """Lift and move out of the camera's view; the observation there is unoccluded."""
        raw = self.env.unwrapped
        self._withdrawals += 1
        x, y = raw.hand_pose()[:2]
        yaw = raw.hand_target()[3]
        grip = 1.0
        for goal in (self._pose(x, y, SAFE_Z, yaw), self._pose(*HAND_HOME[:2], SAFE_Z, yaw)):
            result = self._drive(goal, grip, 60)
            if result[2] or result[3]:
                return result
        return self._hold(grip, 1)

    def _return(self, push_pose: np.ndarray, grip: float) -> None:
        above = push_pose.copy()
        above[2] = SAFE_Z - self.env.unwrapped.ids.hand_base_z
        for goal in (above, push_pose):
            result = self._drive(goal, grip, 60)
            if result[2] or result[3]:
                return
        self._hold(grip, self.settle_steps)

    def _preshape(self, opening: float):
        """Set the jaw to ``opening`` (m between the pads) and return the last step and the
        gripper command that holds it (a binary jaw can only stay fully open)."""
        raw = self.env.unwrapped
        travel = float(np.clip((2 * OPEN_HALF_WIDTH - opening) / 2, 0.0, FINGER_TRAVEL))
        mode = raw.gripper_mode
        if mode == "continuous":
            grip = 2 * travel / FINGER_TRAVEL - 1
            return self._hold(grip, 4), grip
        if mode == "delta":
            result = self._last
            for _ in range(16):
                step = (travel - raw.gripper_target) / GRIPPER_STEP
                if abs(step) < 1e-6:
                    break
                result = self._drive(raw.hand_target(), float(np.clip(step, -1, 1)), 1)
                if result[2] or result[3]:
                    break
            return self._hold(0.0, 2), 0.0
        return self._hold(-1.0, 1), -1.0

    def _look(self) -> None:
        push_pose = self.env.unwrapped.hand_target().copy()
        result = self._withdraw()
        if not (result[2] or result[3]):
            self._return(push_pose, 1.0)

    def _grasp(self) -> None:
        raw = self.env.unwrapped
        push_pose = raw.hand_target().copy()
        result = self._withdraw()
        if result[2] or result[3]:
            return
        prints = detected_footprints(detections(result[0]), raw.layout.shapes)
        if prints[0] is None:
            self._return(push_pose, 1.0)
            return
        yaw, _ = choose_grasp_yaw(prints)
        # the jaw is symmetric: of yaw and yaw - pi, turn through the smaller angle
        if abs(math.remainder(yaw - push_pose[3], 2 * math.pi)) > math.pi / 2:
            yaw -= math.pi
        centre = np.mean(np.concatenate(prints[0]), axis=0)
        result = self._drive(self._pose(centre[0], centre[1], SAFE_Z, yaw), -1.0, 60)
        if result[2] or result[3]:
            return
        # pre-shape the jaw to the target's width plus the pads' clearance, so the pads come
        # down where the clearance check looked (fully open they would land on neighbours)
        result, grip = self._preshape(grasp_opening(prints[0], centre, yaw))
        if result[2] or result[3]:
            return
        result = self._drive(self._pose(centre[0], centre[1], GRASP_Z, yaw), grip, 30)
        if result[2] or result[3]:
            return
        try:
            if raw.soft_target and raw.gripper_mode != "binary":
                result = self._close_gently()
            else:
                result = self._hold(1.0, 14)  # close (a delta jaw closes 5 mm per step)
            if result[2] or result[3]:
                return
            result = self._drive(self._pose(centre[0], centre[1], LIFT_Z, yaw), 1.0, 30)
            if result[2] or result[3]:
                return
            result = self._hold(1.0, 10)  # the env ends the episode once the lift has held
            if result[2] or result[3]:
                return
        finally:
            self._grip_force = None
        self._hold(-1.0, 6)  # failed: let go and go back to pushing
        self._return(push_pose, 1.0)
