"""The MuJoCo task env base of the soft suite: physics, control, sensing, evaluator state.

``SoftTaskEnv`` owns one compiled scene (table, floating parallel-jaw hand, one soft object or its
rigid twin) and steps it at 20 Hz with 25 physics substeps of 2 ms. Subclasses (one task per file in
``simroll.envs.soft``) only randomise their task and say what success is (``evaluate``).

Action (``Box(-1, 1, (5,))``; the layout and names of actions and observations are in
:mod:`simroll.features`): Cartesian delta of the hand target ``[dx, dy, dz, dyaw]`` scaled by
``MAX_STEP`` (1.2 cm and 0.15 rad per control step), then the gripper command. With
``gripper_mode="continuous"`` it maps linearly from fully open (-1) to fully closed (+1); with
``"binary"`` any value > 0 closes fully and <= 0 opens; with ``"delta"`` it moves the jaw's
target by up to ``GRIPPER_STEP`` (5 mm per finger) per control step, closing for positive values,
like the hand deltas (a learner then closes by repeating one command instead of predicting an
absolute opening it must keep just past the first touch). NaN, infinite, wrongly shaped or
out-of-range actions raise ``InvalidActionError``.

Observation (``Dict``): ``pixels`` (``scene`` and ``wrist`` RGB, ``image_size`` square, only in
``obs_mode="full"``; ``cameras`` names a subset to render only those, e.g. the ones a policy
reads; a :class:`~simroll.envs.sensing.LazyImages` dict that renders each image when it is
first read), ``tactile`` (``force``: per-finger normal-force taxel image; ``markers``:
per-finger gel-marker displacement field, see ``sensing``), ``agent_pos`` (hand x, y, z, yaw,
their velocities, jaw opening and its velocity, and each finger's grip force in newtons, the
total of its taxel image, as a gripper's effort reading: 12 floats), ``following_error`` (the
hand target's x, y, z, yaw and the jaw target's opening minus their measured values: a hand or jaw
held back by an object shows here how far its commands have run ahead; 5 floats),
``environment_state`` (only in
``obs_mode="state"``: object centre and yaw, goal position, and the object's offset from the
observed hand pose, x/y/z and wrapped yaw: 11 floats) and ``task_description`` (the instruction
text; ``with_task_description=False`` leaves it out, so every entry is a ``Box`` and
``gymnasium.wrappers.FlattenObservation`` applies).

Evaluator-only state is in ``info["eval"]``, never in the observation: the normalized deformation
of this step and its running peak (``simroll.envs.deformation``), the object's calibrated
tolerance, the net contact force on each finger, and everything the task's ``evaluate()`` measures
(as ManiSkill's ``get_info`` passes ``evaluate()`` on): its ``success`` (before the hold
requirement) as ``task_success_now`` and every other key under its own name (``lift_height``,
``distance_to_goal``, ``finger_force``). ``info["is_success"]`` follows Gymnasium.
A simulation that produces NaN/inf state or MuJoCo instability warnings ends the episode with
``info["termination_reason"] = "diverged"`` instead of raising.

Rendering in a process forked after its parent initialised EGL hangs in the EGL driver; an env
raises :class:`ForkedRenderingError` there instead (see ``simroll.envs`` for the start methods
that work).
"""

from __future__ import annotations

import copy
import math
import os
import string
import sys
from typing import Any, ClassVar

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium import spaces

from simroll.assets import get_object
from simroll.envs.deformation import RestShape
from simroll.envs.scene import FINGER_TRAVEL, OPEN_HALF_WIDTH, compile_model, scene_ids
from simroll.envs.sensing import MARKER_GRID, CameraRig, TactileSensor
from simroll.envs.variations import PhysicsSnapshot, Variation, resolve_variation
from simroll.features import (
    ACTION_DIM,
    CAMERAS,
    ENVIRONMENT_STATE_NAMES,
    FINGERS,
    FOLLOWING_ERROR_NAMES,
    GRIPPER,
    GRIPPER_MODES,
    HAND,
    OBS_MODES,
    STATE_NAMES,
    TAXEL_GRID,
)

CONTROL_HZ = 20
SUBSTEPS = 25  # 2 ms physics steps per 50 ms control step
MAX_STEP = np.array([0.012, 0.012, 0.012, 0.15])
HOLD_STEPS = 8  # success must hold this many consecutive control steps
AGENT_POS_DIM = len(STATE_NAMES)  # hand pose, its velocity, the jaw, each finger's grip force
ENV_STATE_DIM = len(ENVIRONMENT_STATE_NAMES)  # object pose, goal, object offset from the hand
SETTLE_STEPS = 150  # physics steps after placing the object, before the episode starts
GRIPPER_STEP = 0.005  # metres of finger travel per control step at |gripper| = 1 ("delta")
TEXT_CHARSET = string.ascii_letters + string.digits + " ,.'-_"
UNSTABLE_WARNINGS = (
    mujoco.mjtWarning.mjWARN_BADQACC,
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
    mujoco.mjtWarning.mjWARN_INERTIA,
)
UNSTABLE_WARNING_INDEX = np.array([int(w) for w in UNSTABLE_WARNINGS])


class InvalidActionError(ValueError):
    """An action is NaN/inf, has the wrong shape, or is outside the action space."""


class ForkedRenderingError(RuntimeError):
    """This process was forked after its parent initialised EGL, so it cannot render."""


_EGL_INHERITED = False  # set in a forked child whose parent had an initialised EGL display


def _note_fork() -> None:
    global _EGL_INHERITED
    egl = sys.modules.get("mujoco.egl")
    if egl is not None and getattr(egl, "EGL_DISPLAY", None) is not None:
        _EGL_INHERITED = True


os.register_at_fork(after_in_child=_note_fork)


def _check_can_render() -> None:
    if _EGL_INHERITED:
        raise ForkedRenderingError(
            "this process was forked after its parent initialised EGL rendering, and EGL hangs "
            "when a forked child renders. Start env workers with 'forkserver' or 'spawn': "
            "gym.make_vec(id, num_envs) (simroll's vector entry point does), or "
            "gym.make_vec(id, num_envs, vectorization_mode='async', "
            "vector_kwargs={'context': 'forkserver'})"
        )


def check_settings(obs_mode: str, gripper_mode: str, render_mode: str | None, image_size) -> None:
    """ValueError naming the first env setting that is not one the envs take."""
    if obs_mode not in OBS_MODES:
        raise ValueError(f"obs_mode must be one of {OBS_MODES}, got {obs_mode!r}")
    if gripper_mode not in GRIPPER_MODES:
        raise ValueError(f"gripper_mode must be one of {GRIPPER_MODES}, got {gripper_mode!r}")
    if render_mode not in (None, "rgb_array"):
        raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
    if not (isinstance(image_size, int) and 16 <= image_size <= 1024):
        raise ValueError(f"image_size must be an int in [16, 1024], got {image_size!r}")


class SoftTaskEnv(gym.Env):
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": CONTROL_HZ}
    task_name: ClassVar[str] = "SoftTask"
    instruction: ClassVar[str] = "manipulate the {object}"

    def __init__(
        self,
        object: str = "sponge",
        rigid_twin: bool = False,
        obs_mode: str = "full",
        image_size: int = 96,
        gripper_mode: str = "continuous",
        variation: str | Variation | dict | None = None,
        render_mode: str | None = None,
        render_size: tuple[int, int] = (240, 320),
        tactile_shape: tuple[int, int] = TAXEL_GRID,
        tolerance: float | None = None,
        with_task_description: bool = True,
        cameras: tuple[str, ...] | list[str] | None = None,
    ):
        check_settings(obs_mode, gripper_mode, render_mode, image_size)
        self.object_asset = get_object(object)  # raises on unknown names
        self.object_name = object
        self.rigid_twin = bool(rigid_twin)
        self.obs_mode, self.gripper_mode, self.render_mode = obs_mode, gripper_mode, render_mode
        self.image_size, self.render_size, self.tactile_shape = (
            image_size,
            render_size,
            tactile_shape,
        )
        if tolerance is None:
            self.tolerance = self.object_asset.calibration().tolerance
        elif isinstance(tolerance, int | float) and tolerance > 0:
            self.tolerance = float(tolerance)  # an explicit override (sweeps, calibration runs)
        else:
            raise ValueError(f"tolerance must be a number > 0 or None, got {tolerance!r}")
        if not isinstance(with_task_description, bool):
            raise ValueError(
                f"with_task_description must be True or False, got {with_task_description!r}"
            )
        self.with_task_description = with_task_description
        if cameras is None:
            cameras = CAMERAS
        if isinstance(cameras, str) or not (
            len(cameras) > 0
            and all(camera in CAMERAS for camera in cameras)
            and len(set(cameras)) == len(cameras)
        ):
            raise ValueError(
                f"cameras must be a non-empty list of distinct names from {CAMERAS}, "
                f"got {cameras!r}"
            )
        self.cameras = tuple(camera for camera in CAMERAS if camera in cameras)
        self.default_variation = resolve_variation(variation)
        self.variation = self.default_variation
        self._load_model(self.variation.young_scale)

        self.action_space = spaces.Box(-1.0, 1.0, shape=(ACTION_DIM,), dtype=np.float32)
        rows, cols = tactile_shape
        markers = MARKER_GRID[0] * MARKER_GRID[1]
        obs = {
            "tactile": spaces.Dict(
                {
                    "force": spaces.Box(0.0, np.inf, (FINGERS, rows, cols), np.float32),
                    "markers": spaces.Box(-np.inf, np.inf, (FINGERS, markers, 2), np.float32),
                }
            ),
            "agent_pos": spaces.Box(-np.inf, np.inf, (AGENT_POS_DIM,), np.float32),
            "following_error": spaces.Box(
                -np.inf, np.inf, (len(FOLLOWING_ERROR_NAMES),), np.float32
            ),
        }
        if with_task_description:
            obs["task_description"] = spaces.Text(max_length=200, charset=TEXT_CHARSET)
        if obs_mode == "full":
            size = (image_size, image_size, 3)
            obs["pixels"] = spaces.Dict(
                {camera: spaces.Box(0, 255, size, np.uint8) for camera in self.cameras}
            )
        else:
            obs["environment_state"] = spaces.Box(-np.inf, np.inf, (ENV_STATE_DIM,), np.float32)
        self.observation_space = spaces.Dict(obs)

    # ----------------------------------------------------------------- model and state
    def _load_model(self, young_scale: float) -> None:
        shared = compile_model(self.object_name, self.rigid_twin, float(young_scale))
        self.model = copy.deepcopy(shared)  # private: variations write into model fields
        self.data = mujoco.MjData(self.model)
        self.ids = scene_ids(self.model)
        self.loaded_young_scale = young_scale
        self.snapshot = PhysicsSnapshot(self.model)
        if self.ids.flex >= 0:
            start = self.model.flex_vertadr[self.ids.flex]
            self._vert_slice = slice(start, start + self.model.flex_vertnum[self.ids.flex])
            self._object_bodies = self.model.flex_vertbodyid[self._vert_slice].copy()
            self._rest_vertices = self.model.body_pos[self._object_bodies].copy()
            self._contact_geoms = self.ids.pad_geoms.copy()
        else:
            self._object_bodies = np.array([self.ids.object_body])
            half = self.model.geom_aabb[self.ids.object_geom][3:]
            corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
            self._twin_corners = corners * half + self.model.geom_aabb[self.ids.object_geom][:3]
            self._contact_geoms = np.concatenate([self.ids.pad_geoms, [self.ids.object_geom]])
        self.tactile = TactileSensor(
            self.model, self.ids.pad_geoms, self.ids.object_geom, self.ids.flex, *self.tactile_shape
        )
        self._scene_camera = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, "scene")
        self._cameras: CameraRig | None = None
        self._render_rig: CameraRig | None = None

    def object_points(self) -> np.ndarray:
        """World positions of the object's points (flex vertices or twin box corners)."""
        if self.ids.flex >= 0:
            return self.data.flexvert_xpos[self._vert_slice].copy()
        body = self.ids.object_body
        return self.data.xpos[body] + self._twin_corners @ self.data.xmat[body].reshape(3, 3).T

    def object_center(self) -> np.ndarray:
        if self.ids.flex >= 0:
            return self.data.flexvert_xpos[self._vert_slice].mean(axis=0)
        return self.data.xpos[self.ids.object_body].copy()

    def object_yaw(self) -> float:
        """Yaw of the object's first principal horizontal axis relative to its rest pose."""
        if self.ids.flex >= 0:
            points = self.data.flexvert_xpos[self._vert_slice]
            rest = self._rest_vertices
            a = points[:, :2] - points[:, :2].mean(axis=0)
            b = rest[:, :2] - rest[:, :2].mean(axis=0)
            return float(math.atan2((b[:, 0] * a[:, 1] - b[:, 1] * a[:, 0]).sum(), (b * a).sum()))
        mat = self.data.xmat[self.ids.object_body].reshape(3, 3)
        return float(math.atan2(mat[1, 0], mat[0, 0]))

    def object_half_extents(self) -> np.ndarray:
        """Half extents of the object's rest shape (x, y, z) in its own frame."""
        if self.ids.flex >= 0:
            rest = self._rest_vertices
            return (rest.max(axis=0) - rest.min(axis=0)) / 2
        return self.model.geom_aabb[self.ids.object_geom][3:].copy()

    def hand_target(self) -> np.ndarray:
        return self._target.copy()

    @property
    def gripper_target(self) -> float:
        """The jaw servo's commanded finger travel (metres from fully open)."""
        return float(self._gripper_target)

    def hand_pose(self) -> np.ndarray:
        """True hand x, y, z (pad centre, world) and yaw."""
        q = self.data.qpos[self.ids.hand_joints].copy()
        q[2] += self.ids.hand_base_z
        return q

    def jaw_opening(self) -> float:
        """Distance between the pads' inner faces (m)."""
        travel = np.add.reduce(self.data.qpos[self.ids.finger_qpos])
        return float(2 * OPEN_HALF_WIDTH - travel)

    @property
    def task_description(self) -> str:
        return self.instruction.format(object=self.object_name.replace("_", " "))

    # ----------------------------------------------------------------- episode
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = options or {}
        unknown = set(options) - {"variation"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; expected 'variation'")
        self.variation = resolve_variation(options.get("variation", self.default_variation))
        if self.variation.young_scale != self.loaded_young_scale:
            self.close()
            self._load_model(self.variation.young_scale)
        self.snapshot.apply(
            self.model, self.variation, self._object_bodies, self._contact_geoms, self._scene_camera
        )
        model, data = self.model, self.data
        mujoco.mj_resetData(model, data)
        rng = self.np_random
        hand = np.array(
            [rng.uniform(-0.02, 0.02), rng.uniform(-0.02, 0.02), rng.uniform(-0.03, 0.0), 0.0]
        )
        data.qpos[self.ids.hand_joints] = hand
        self._target = hand.copy()
        self._gripper_target = 0.0
        self._place_object(
            rng.uniform(-0.03, 0.03),
            rng.uniform(-0.03, 0.03),
            rng.uniform(-0.35, 0.35) if self._yaw_matters() else 0.0,
        )
        self._randomize_task(rng)
        self._apply_controls()
        mujoco.mj_forward(model, data)
        for _ in range(SETTLE_STEPS):
            mujoco.mj_step(model, data)
        self._rest_shape = RestShape(self.object_points())
        self.rest_center = self.object_center()
        self._peak_deformation = 0.0
        self._hold = 0
        self._elapsed_steps = 0
        self._diverged = False
        info = self._info(self._step_eval(), termination_reason=None)
        return self._observation(), info

    def _yaw_matters(self) -> bool:
        return not self.object_asset.yaw_symmetric

    def _place_object(self, dx: float, dy: float, yaw: float) -> None:
        c, s = math.cos(yaw), math.sin(yaw)
        rotation = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
        if self.ids.flex >= 0:
            rest = self._rest_vertices
            placed = rest @ rotation.T + np.array([dx, dy, 0.0])
            self.data.qpos[self.ids.object_qpos] = (placed - rest).ravel()
        else:
            qpos = self.data.qpos[self.ids.object_qpos]
            qpos[:3] = self.model.body_pos[self.ids.object_body] + np.array([dx, dy, 0.0])
            qpos[3:] = [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
            self.data.qpos[self.ids.object_qpos] = qpos

    def _randomize_task(self, rng: np.random.Generator) -> None:
        """Task-specific randomisation (goal positions); called after the object is placed."""

    def evaluate(self) -> dict[str, Any]:
        """Task success of the current state (``"success"``, before the hold requirement) and the
        task's measurements behind it (e.g. ``"lift_height"``), all of which reach
        ``info["eval"]``: subclasses override."""
        raise NotImplementedError

    def goal_position(self) -> np.ndarray:
        return self.data.site_xpos[self.ids.target_site].copy()

    def _check_action(self, action) -> np.ndarray:
        array = np.asarray(action, dtype=np.float64)
        if array.shape != (ACTION_DIM,):
            raise InvalidActionError(f"action must have shape ({ACTION_DIM},), got {array.shape}")
        # NaN when any entry is NaN. Here and below in the per-step path, ufuncs are called
        # directly: the same arithmetic as .max()/np.clip/.sum()/.mean(), without their
        # Python-level wrappers (a few microseconds per call, every control step)
        largest = float(np.maximum.reduce(np.abs(array)))
        if largest <= 1.0 + 1e-6:
            return np.minimum(np.maximum(array, -1.0), 1.0)
        if not np.all(np.isfinite(array)):
            raise InvalidActionError(f"action must be finite, got {array.tolist()}")
        raise InvalidActionError(
            f"action must lie in [-1, 1] per dimension, got {np.round(array, 4).tolist()}"
        )

    def _apply_controls(self) -> None:
        bias = np.asarray(self.variation.actuation_bias)
        self.data.ctrl[:4] = self._target + bias
        self.data.ctrl[4] = self._gripper_target

    def step(self, action):
        action = self._check_action(action)
        ctrlrange = self.model.actuator_ctrlrange
        target = self._target + action[HAND] * MAX_STEP
        self._target = np.minimum(np.maximum(target, ctrlrange[:4, 0]), ctrlrange[:4, 1])
        if self.gripper_mode == "binary":
            self._gripper_target = (1.0 if action[GRIPPER] > 0 else 0.0) * FINGER_TRAVEL
        elif self.gripper_mode == "delta":
            self._gripper_target = float(
                np.clip(self._gripper_target + action[GRIPPER] * GRIPPER_STEP, 0.0, FINGER_TRAVEL)
            )
        else:
            self._gripper_target = (action[GRIPPER] + 1.0) / 2.0 * FINGER_TRAVEL
        self._apply_controls()
        reason = None
        try:
            for _ in range(SUBSTEPS):
                mujoco.mj_step(self.model, self.data)
        except mujoco.FatalError as exc:  # pragma: no cover - MuJoCo errors out on some blowups
            reason = f"diverged: {exc}"
        if reason is None and self._unstable():
            reason = "diverged"
        self._elapsed_steps += 1
        if reason is not None:
            self._diverged = True
            mujoco.mj_resetData(self.model, self.data)  # keep obs finite; episode is over
            mujoco.mj_forward(self.model, self.data)
            info = self._info({"success": False}, termination_reason=reason)
            info["eval"]["peak_deformation"] = math.inf
            return self._observation(), 0.0, True, False, info
        evaluation = self._step_eval()
        self._hold = self._hold + 1 if evaluation["success"] else 0
        success = self._hold >= HOLD_STEPS
        reason = "success" if success else None
        if reason is None and self.object_center()[2] < -0.05:
            reason = "object_off_table"
        info = self._info(evaluation, termination_reason=reason)
        reward = float(success)
        return self._observation(), reward, reason is not None, False, info

    def _unstable(self) -> bool:
        data = self.data
        # a sum is non-finite when any term is: one reduction per array instead of two
        if not math.isfinite(np.add.reduce(data.qpos)):
            return True
        # MuJoCo resets the state itself on these, or (INERTIA) keeps stepping with garbage
        # accelerations; none occur in normal episodes.
        if data.warning.number[UNSTABLE_WARNING_INDEX].any():
            return True
        # a NaN velocity propagates through max() and fails the comparison: no separate sum
        return not (np.maximum.reduce(np.abs(data.qvel)) <= 50.0)

    def _step_eval(self) -> dict[str, Any]:
        self._tactile_reading = self.tactile.read(self.data)
        deformation = self._rest_shape.deformation(self.object_points())
        self._deformation = deformation
        self._peak_deformation = max(self._peak_deformation, deformation)
        return self.evaluate()

    def _info(self, evaluation: dict[str, Any], termination_reason: str | None) -> dict[str, Any]:
        success = self._hold >= HOLD_STEPS
        reading = self._tactile_reading if not self._diverged else None
        measured = {
            "deformation": float(getattr(self, "_deformation", 0.0)),
            "peak_deformation": float(self._peak_deformation),
            "tolerance": float(self.tolerance),
            "contact_force": (
                reading.net_force.copy() if reading is not None else np.zeros((2, 3))
            ),
            "object_center": self.object_center(),
            "task_success_now": bool(evaluation.get("success", False)),
            "hold_steps": int(self._hold),
        }
        extras = {key: value for key, value in evaluation.items() if key != "success"}
        clash = sorted(extras.keys() & measured.keys())
        if clash:
            raise RuntimeError(
                f"{type(self).__name__}.evaluate() returns {clash}, which info['eval'] already "
                "holds; give the task's measurements their own names"
            )
        return {
            "is_success": bool(success),
            "termination_reason": termination_reason,
            "eval": {**measured, **extras},
        }

    def _following_error(self, measured_hand: np.ndarray, jaw_opening: float) -> np.ndarray:
        """Commanded minus measured hand pose (x, y, z, yaw, in the hand target's coordinates,
        the measurement as the encoders report it) and jaw opening (the opening the jaw target
        commands, both fingers at ``gripper_target`` travel, minus the measured one)."""
        commanded_jaw = 2.0 * (OPEN_HALF_WIDTH - self._gripper_target)
        error = np.empty(len(FOLLOWING_ERROR_NAMES), dtype=np.float32)
        error[:4] = self._target - measured_hand
        error[4] = commanded_jaw - jaw_opening
        return error

    def _observation(self) -> dict[str, Any]:
        data = self.data
        hand = data.qpos[self.ids.hand_joints] + np.asarray(self.variation.encoder_offset)
        hand_velocity = data.qvel[self.ids.hand_dofs]
        finger_velocities = data.qvel[self.ids.finger_dof]
        finger_velocity = -2 * (np.add.reduce(finger_velocities) / finger_velocities.size)
        reading = getattr(self, "_tactile_reading", None)
        if reading is None or self._diverged:
            reading = self.tactile.read(data)
        agent = np.concatenate(
            [hand, hand_velocity, [self.jaw_opening(), finger_velocity], reading.normal_force]
        )
        agent[2] += self.ids.hand_base_z
        obs = {
            "tactile": {"force": reading.force, "markers": reading.markers},
            "agent_pos": agent.astype(np.float32),
            "following_error": self._following_error(hand, agent[8]),
        }
        if self.with_task_description:
            obs["task_description"] = self.task_description
        if self.obs_mode == "full":
            if self._cameras is None:
                _check_can_render()
                self._cameras = CameraRig(
                    self.model, self.cameras, self.image_size, self.image_size
                )
            obs["pixels"] = self._cameras.capture(data)  # rendered when read
        else:
            obs["environment_state"] = self._environment_state(agent)
        return obs

    def _environment_state(self, agent: np.ndarray) -> np.ndarray:
        """The privileged ``environment_state`` of state observations (``agent``: the observed
        ``agent_pos``): object pose, goal, and the object's offset from the observed hand."""
        center, yaw = self.object_center(), self.object_yaw()
        offset = center - agent[:3]  # relative to the hand pose the policy observes
        yaw_offset = math.remainder(yaw - agent[3], 2 * math.pi)
        state = np.concatenate([center, [yaw], self.goal_position(), offset, [yaw_offset]])
        return state.astype(np.float32)

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        if self._render_rig is None:
            _check_can_render()
            height, width = self.render_size
            self._render_rig = CameraRig(self.model, ("scene",), height, width)
        return self._render_rig.render(self.data)["scene"]

    def close(self) -> None:
        for rig in (self._cameras, self._render_rig):
            if rig is not None:
                rig.close()
        self._cameras = self._render_rig = None
