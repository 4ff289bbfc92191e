"""ClutterRetrieve: push clutter aside and lift the target block out of a dense cluster.

**Task description.** Eleven rigid blocks stand on the table: the red target and ten clutter
blocks of seven shapes (cuboid, cube, bar, cylinder, triangular and hexagonal prisms, L-shape),
packed around it by the slide-in of :mod:`simroll.envs.clutter.layout` so that no grasp of the
target is clear at the start. The soft suite's floating parallel-jaw hand starts outside the
scene camera's view; it must push neighbours aside (closed jaw as a pusher), then grasp the
target and lift it.

**Randomizations.** From the reset seed: the layout (target pose within 3 cm of the centre, every
clutter block's shape, yaw and bearing), redrawn until the tier's gap and corridor conditions
hold, the target is not graspable and the scene is settled (no block moves more than 2 mm in
0.3 s of physics). ``object`` names the target's shape (``cuboid``, ``cube``, ``cylinder``,
``hexagonal_prism``), ``tier`` the difficulty (``easy``, ``medium``, ``hard``).

**Soft-target variant.** ``object`` may instead be a soft-suite object of ``SOFT_TARGETS``
(``sponge``, ``tofu``): the target is then its flexcomp body (with ``rigid_twin=True``, its rigid
twin), its footprint the twin's, its pose its vertices' centroid and rotation, and the soft
suite's deformation measure runs every control step against the object's calibrated tolerance,
so DSR scores retrieval: pushes that crush it count. Stiffness variations apply to it.

**Success conditions.** The target's centre is at least ``LIFT_HEIGHT`` = 5 cm above its rest
height and both pads touch it, for 8 consecutive control steps (0.4 s). The episode ends on
success. The low-level time limit is 400 control steps (20 s); plan-relative budgets belong to
the primitive wrapper.

**Observations.** As the soft tasks (5-D action, ``agent_pos``, per-finger tactile maps of the
pads' contact with the target, the instruction) plus, in ``obs_mode="full"``, the scene camera's
``depth`` (metres) and ``segmentation`` (block index per pixel, -1 elsewhere) and ``objects``,
the partial object observation: per block (target first) ``x, y, z, yaw`` as last detected, with
Gaussian noise (``detection_noise``: 2 mm, 1 degree), then ``visible`` (1 when detected in this
step's segmentation render), ``staleness`` (control steps since last detected) and ``seen``
(ever detected). A block counts as detected when its visible pixels are at least
``VISIBLE_FRACTION`` of its count in the unoccluded first frame: blocks hidden by the hand or by
other blocks are missing, from the render, not from a sampled mask. ``obs_mode="state"`` gives
every block's true pose instead (``environment_state``, 11 x 4) and renders nothing.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import mujoco
import numpy as np
from gymnasium import spaces

from simroll.assets import get_object
from simroll.envs.clutter.layout import (
    SOFT_TARGETS,
    TARGET_SHAPES,
    TIERS,
    Layout,
    block_shape,
    generate_layout,
)
from simroll.envs.clutter.scene import HAND_HOME, compile_model
from simroll.envs.core import (
    SETTLE_STEPS,
    TEXT_CHARSET,
    SoftTaskEnv,
    _check_can_render,
    check_settings,
)
from simroll.envs.deformation import RestShape
from simroll.envs.scene import SceneIds, flex_vertices, hand_ids
from simroll.envs.sensing import MARKER_GRID, TactileSensor
from simroll.envs.variations import PhysicsSnapshot, resolve_variation
from simroll.features import (
    ACTION_DIM,
    CAMERAS,
    FINGERS,
    FOLLOWING_ERROR_NAMES,
    STATE_NAMES,
    TAXEL_GRID,
)

LIFT_HEIGHT = 0.05
BLOCKS = 11
OBJECT_FIELDS = ("x", "y", "z", "yaw", "visible", "staleness", "seen")
VISIBLE_FRACTION = 0.3
SETTLE_TOLERANCE = 0.002  # metres a block may move while the scene settles
MAX_SETTLE_DRAWS = 20
INTEGRATION_STATE = mujoco.mjtState.mjSTATE_INTEGRATION
RIGID_TOLERANCE = 1.0  # percent: a rigid target never deforms; DSR equals TSR on it


class ClutterRetrieveEnv(SoftTaskEnv):
    task_name = "ClutterRetrieve"
    instruction = "retrieve the red {object} from the clutter"

    def __init__(
        self,
        object: str = "cuboid",
        tier: str = "medium",
        rigid_twin: bool = False,
        obs_mode: str = "full",
        image_size: int = 96,
        gripper_mode: str = "continuous",
        variation: str | dict | None = None,
        render_mode: str | None = None,
        render_size: tuple[int, int] = (240, 320),
        tactile_shape: tuple[int, int] = TAXEL_GRID,
        detection_noise: tuple[float, float] = (0.002, math.radians(1.0)),
        with_task_description: bool = True,
        cameras: tuple[str, ...] | list[str] | None = None,
    ):
        if object not in TARGET_SHAPES + SOFT_TARGETS:
            raise ValueError(
                f"object must be a target shape of {TARGET_SHAPES} or a soft target of "
                f"{SOFT_TARGETS}, got {object!r}"
            )
        if tier not in TIERS:
            raise ValueError(f"tier must be one of {sorted(TIERS)}, got {tier!r}")
        check_settings(obs_mode, gripper_mode, render_mode, image_size)
        noise = np.asarray(detection_noise, dtype=float)
        if noise.shape != (2,) or not np.all(np.isfinite(noise)) or np.any(noise < 0):
            raise ValueError(
                f"detection_noise must be (metres, radians) >= 0, got {detection_noise!r}"
            )
        self.object_name, self.tier = object, tier
        # a soft target's rigid twin instead of its flexcomp body (rigid shapes are rigid already)
        self.rigid_twin = bool(rigid_twin)
        self.obs_mode, self.gripper_mode, self.render_mode = obs_mode, gripper_mode, render_mode
        self.image_size, self.render_size, self.tactile_shape = (
            image_size,
            render_size,
            tactile_shape,
        )
        self.detection_noise = noise
        self.tolerance = (
            get_object(object).calibration().tolerance
            if object in SOFT_TARGETS
            else RIGID_TOLERANCE
        )
        self.with_task_description = bool(with_task_description)
        cameras = CAMERAS if cameras is None else tuple(cameras)
        if (
            not cameras
            or any(c not in CAMERAS for c in cameras)
            or len(set(cameras)) != len(cameras)
        ):
            raise ValueError(f"cameras must be distinct names from {CAMERAS}, got {cameras!r}")
        self.cameras = tuple(c for c in CAMERAS if c in cameras)
        self.default_variation = resolve_variation(variation)
        self.variation = self.default_variation
        self.model = None
        self.soft_target = False  # whether the loaded model's target is a flexcomp body
        self._model_key: tuple = ()
        self._cameras = self._render_rig = None
        self._probe: mujoco.Renderer | None = None

        self.action_space = spaces.Box(-1.0, 1.0, shape=(ACTION_DIM,), dtype=np.float32)
        rows, cols = tactile_shape
        obs: dict[str, spaces.Space] = {
            "tactile": spaces.Dict(
                {
                    "force": spaces.Box(0.0, np.inf, (FINGERS, rows, cols), np.float32),
                    "markers": spaces.Box(
                        -np.inf, np.inf, (FINGERS, MARKER_GRID[0] * MARKER_GRID[1], 2), np.float32
                    ),
                }
            ),
            "agent_pos": spaces.Box(-np.inf, np.inf, (len(STATE_NAMES),), np.float32),
            "following_error": spaces.Box(
                -np.inf, np.inf, (len(FOLLOWING_ERROR_NAMES),), np.float32
            ),
        }
        if self.with_task_description:
            obs["task_description"] = spaces.Text(max_length=200, charset=TEXT_CHARSET)
        if obs_mode == "full":
            size = (image_size, image_size)
            obs["pixels"] = spaces.Dict(
                {c: spaces.Box(0, 255, (*size, 3), np.uint8) for c in self.cameras}
            )
            obs["depth"] = spaces.Box(0.0, np.inf, size, np.float32)
            obs["segmentation"] = spaces.Box(-1, BLOCKS - 1, size, np.int32)
            obs["objects"] = spaces.Box(-np.inf, np.inf, (BLOCKS, len(OBJECT_FIELDS)), np.float32)
        else:
            obs["environment_state"] = spaces.Box(-np.inf, np.inf, (BLOCKS, 4), np.float32)
        self.observation_space = spaces.Dict(obs)

    # ----------------------------------------------------------------- model
    def _load_model(  # type: ignore[override]
        self, shapes: tuple[str, ...], young_scale: float = 1.0
    ) -> None:
        """Load the model of blocks ``shapes``; the target is a flexcomp body when it is a soft
        object and this env is not its rigid twin (then ``young_scale`` scales its stiffness)."""
        soft = shapes[0] in SOFT_TARGETS and not self.rigid_twin
        key = (shapes, soft, float(young_scale) if soft else 1.0)
        if key == self._model_key and self.model is not None:
            return
        self.close()
        model = self.model = copy.deepcopy(compile_model(*key))
        self.data = mujoco.MjData(model)
        self._model_key, self.soft_target = key, soft

        def jid(name: str) -> int:
            return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)

        self._block_bodies = np.array(
            [
                mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"block_{i}")
                for i in range(BLOCKS)
            ]
        )
        bodies = self._block_bodies
        contiguous = bool((np.diff(bodies) == 1).all())
        # the bodies' rows in data.xpos/xmat: a slice (a view, cheaper every step) when they are
        # consecutive, as the scene builds them
        self._block_rows = slice(bodies[0], bodies[-1] + 1) if contiguous else bodies
        # free-joint qpos address per block; -1 for a flexcomp target (its vertices slide)
        self._block_qpos = np.array(
            [
                model.jnt_qposadr[jid(f"block_{i}")] if jid(f"block_{i}") >= 0 else -1
                for i in range(BLOCKS)
            ]
        )
        target_geom = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "block_0_0")
        if soft:
            start = model.flex_vertadr[0]
            self._vert_slice = slice(start, start + model.flex_vertnum[0])
            vertex_bodies, target_qpos = flex_vertices(model, 0)
            self._rest_vertices = model.body_pos[vertex_bodies].copy()
            self._object_bodies = vertex_bodies
            self._mass_bodies = np.concatenate([vertex_bodies, self._block_bodies[1:]])
        else:
            target_qpos = self._block_qpos[0] + np.arange(7)
            self._object_bodies = np.array([self._block_bodies[0]])
            self._mass_bodies = self._block_bodies
        self.ids = SceneIds(
            **hand_ids(model),
            object_body=int(self._block_bodies[0]),
            object_geom=target_geom,
            flex=0 if soft else -1,
            object_qpos=target_qpos,
            target_site=-1,
        )
        # geom id -> block index (-1: table, hand) for the segmentation image
        self._geom_block = np.full(model.ngeom + 1, -1, dtype=np.int32)
        for i, body in enumerate(self._block_bodies):
            self._geom_block[np.flatnonzero(model.geom_bodyid == body)] = i
        if soft:  # flex friction is scaled with the pads' by the variation snapshot
            self._contact_geoms = self.ids.pad_geoms.copy()
        else:
            self._contact_geoms = np.concatenate([self.ids.pad_geoms, [target_geom]])
            half = model.geom_aabb[target_geom][3:]
            corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
            self._twin_corners = corners * half + model.geom_aabb[target_geom][:3]
        self.tactile = TactileSensor(
            model, self.ids.pad_geoms, target_geom, self.ids.flex, *self.tactile_shape
        )
        self._scene_camera = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, "scene")
        self.snapshot = PhysicsSnapshot(model)

    # ----------------------------------------------------------------- target state
    @property
    def task_description(self) -> str:
        return self.instruction.format(object=self.object_name.replace("_", " "))

    def block_poses(self) -> np.ndarray:
        """True ``x, y, z, yaw`` of every block (target first), shape (11, 4); a flexcomp
        target's are its vertices' centroid and their rotation from the authored rest shape."""
        out = np.empty((BLOCKS, 4))
        out[:, :3] = self.data.xpos[self._block_rows]
        mats = self.data.xmat[self._block_rows]  # row-major 3x3: [3] is m10, [0] is m00
        out[:, 3] = np.arctan2(mats[:, 3], mats[:, 0])
        if self.soft_target:
            out[0, :3] = self.object_center()
            out[0, 3] = self.object_yaw()
        return out

    def _set_block_pose(
        self, index: int, x: float, y: float, yaw: float, lift: float = 0.0
    ) -> None:
        """Stand block ``index`` at ``x, y`` turned by ``yaw`` on the table, a rigid block
        ``lift`` metres above it (qpos only; the caller runs ``mj_forward``). A flexcomp target
        gets its rest shape, so moved."""
        if index == 0 and self.soft_target:
            self._place_object(x, y, yaw)  # the soft suite's: the rest shape turned and moved
            return
        data = self.data
        q = self._block_qpos[index]
        half_height = block_shape(self.layout_shapes[index]).half_height
        z = half_height + lift
        data.qpos[q : q + 7] = [x, y, z, math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]

    @property
    def layout_shapes(self) -> tuple[str, ...]:
        """Names of the loaded model's block shapes (target first)."""
        return self._model_key[0]

    def goal_position(self) -> np.ndarray:
        return np.zeros(3)  # retrieval has no goal site

    # ----------------------------------------------------------------- simulation state
    def get_sim_state(self) -> dict[str, Any]:
        """Everything a later :meth:`set_sim_state` needs to continue from here, in this env or in
        another ClutterRetrieve env (a teacher's search copy): MuJoCo's full integration state
        (so the copy steps bit-identically), the gripper mode, the hand and jaw targets, the
        evaluator's counters and the layout."""
        physics = np.empty(mujoco.mj_stateSize(self.model, INTEGRATION_STATE))
        mujoco.mj_getState(self.model, self.data, physics, INTEGRATION_STATE)
        return {
            "layout": self.layout,
            "physics": physics,  # qpos, qvel, act, warm start, controls, time, ...
            "gripper_mode": self.gripper_mode,
            "target": self._target.copy(),
            "gripper_target": self._gripper_target,
            "hold": self._hold,
            "elapsed_steps": self._elapsed_steps,
            "rest_center": self.rest_center.copy(),
            "rest_points": self._rest_points.copy(),
            "peak_deformation": self._peak_deformation,
            # what a model with the other kind of target needs (a rigid twin of a soft state)
            "soft_target": self.soft_target,
            "young_scale": self._model_key[2],
            "blocks": self.block_poses(),
            "hand_qpos": self.data.qpos[self.ids.hand_joints].copy(),
            "finger_qpos": self.data.qpos[self.ids.finger_qpos].copy(),
        }

    def set_sim_state(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (of :meth:`get_sim_state`); observation history (detections,
        staleness) restarts. A state whose target is of the other kind (a soft target's state in
        its rigid twin, as the teacher plans) is carried over as poses: the hand's and fingers'
        joints and every block's pose, at rest; the twin's shape is its rest shape."""
        layout = state["layout"]
        self._load_model(tuple(shape.name for shape in layout.shapes), state["young_scale"])
        self.layout = layout
        data = self.data
        self.gripper_mode = state["gripper_mode"]
        self._target = state["target"].copy()
        self._gripper_target = state["gripper_target"]
        if state["soft_target"] == self.soft_target:
            mujoco.mj_setState(self.model, data, state["physics"], INTEGRATION_STATE)
            self._rest_points = state["rest_points"].copy()
        else:
            mujoco.mj_resetData(self.model, data)
            data.qpos[self.ids.hand_joints] = state["hand_qpos"]
            data.qpos[self.ids.finger_qpos] = state["finger_qpos"]
            for i, pose in enumerate(state["blocks"]):
                self._set_block_pose(i, pose[0], pose[1], pose[3])
            self._apply_controls()
            mujoco.mj_forward(self.model, data)
            self._rest_points = self.object_points()
        self._hold, self._elapsed_steps = state["hold"], state["elapsed_steps"]
        self.rest_center = state["rest_center"].copy()
        self._rest_shape = RestShape(self._rest_points)
        self._peak_deformation = state["peak_deformation"]
        self._diverged = False
        mujoco.mj_forward(self.model, data)
        self._reset_detections()
        self._tactile_reading = self.tactile.read(data)

    def perturb_blocks(self, blocks: np.ndarray | None = None) -> None:
        """The execution pose-noise stressor: move ``blocks`` (default: all) by up to the
        variation's ``block_pose_noise`` (uniform in x, y and yaw) from where they stand, then let
        the scene settle (overlaps the noise creates are pushed apart by the physics)."""
        limit_m, limit_rad = self.variation.block_pose_noise
        if limit_m == 0 and limit_rad == 0:
            return
        rng, data = self.np_random, self.data
        for i in range(BLOCKS) if blocks is None else blocks:
            shift = rng.uniform(-limit_m, limit_m, size=2)
            turn = rng.uniform(-limit_rad, limit_rad)
            if i == 0 and self.soft_target:  # turn the vertices about their centroid, then shift
                c, s = math.cos(turn), math.sin(turn)
                rotation = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
                points = self.object_points()
                centre = points.mean(axis=0)
                moved = (points - centre) @ rotation.T + centre + np.array([*shift, 0.0])
                data.qpos[self.ids.object_qpos] += (moved - points).ravel()
                continue
            q = self._block_qpos[i]
            data.qpos[q : q + 2] += shift
            quat = np.array([math.cos(turn / 2), 0.0, 0.0, math.sin(turn / 2)])
            mujoco.mju_mulQuat(data.qpos[q + 3 : q + 7], quat, data.qpos[q + 3 : q + 7].copy())
        data.qvel[:] = 0.0
        mujoco.mj_forward(self.model, data)
        for _ in range(SETTLE_STEPS):
            mujoco.mj_step(self.model, data)
        if blocks is None or 0 in blocks:
            self.rest_center = self.object_center()
            if not self.soft_target:  # a soft target keeps its rest shape: a squeeze stays one
                self._rest_points = self.object_points()
                self._rest_shape = RestShape(self._rest_points)

    def _reset_detections(self) -> None:
        self.blackout = False  # set by the plan-conditioned wrapper during a blackout window
        self._last_seen = np.zeros((BLOCKS, 4))
        self._staleness = np.zeros(BLOCKS)
        self._seen = np.zeros(BLOCKS, dtype=bool)
        self._reference_pixels: np.ndarray | None = None

    # ----------------------------------------------------------------- episode
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super(SoftTaskEnv, self).reset(seed=seed)
        options = options or {}
        unknown = set(options) - {"variation"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; expected 'variation'")
        self.variation = resolve_variation(options.get("variation", self.default_variation))
        if self.variation.young_scale != 1.0 and (
            self.object_name not in SOFT_TARGETS or self.rigid_twin
        ):
            raise ValueError(
                f"variation {self.variation.name!r} scales stiffness, which a rigid target "
                f"({self.object_name!r}, rigid_twin={self.rigid_twin}) lacks"
            )
        rng = self.np_random
        for _ in range(MAX_SETTLE_DRAWS):
            layout = generate_layout(rng, self.object_name, self.tier)
            if self._place(layout):
                break
        else:
            raise RuntimeError(
                f"seed {seed}: {MAX_SETTLE_DRAWS} {self.tier} layouts in a row did not settle"
            )
        self.layout = layout
        self._rest_points = self.object_points()
        self._rest_shape = RestShape(self._rest_points)
        self.rest_center = self.object_center()
        self._peak_deformation = 0.0
        self._hold = 0
        self._elapsed_steps = 0
        self._diverged = False
        self._reset_detections()
        info = self._info(self._step_eval(), termination_reason=None)
        info["layout_attempts"] = layout.attempts
        return self._observation(), info

    def _place(self, layout: Layout) -> bool:
        """Load the layout's model, place blocks and hand, settle; False if a block moved."""
        self._load_model(tuple(shape.name for shape in layout.shapes), self.variation.young_scale)
        model, data = self.model, self.data
        self.snapshot.apply(
            model, self.variation, self._mass_bodies, self._contact_geoms, self._scene_camera
        )
        mujoco.mj_resetData(model, data)
        for i, pose in enumerate(layout.poses):
            self._set_block_pose(i, *pose)
        hand = np.array([HAND_HOME[0], HAND_HOME[1], HAND_HOME[2] - self.ids.hand_base_z, 0.0])
        data.qpos[self.ids.hand_joints] = hand
        self._target = hand.copy()
        self._gripper_target = 0.0
        self._apply_controls()
        mujoco.mj_forward(model, data)
        start = self.block_poses()[:, :3]
        for _ in range(SETTLE_STEPS):
            mujoco.mj_step(model, data)
        moved = np.linalg.norm(self.block_poses()[:, :3] - start, axis=1)
        return bool(moved.max() <= SETTLE_TOLERANCE)

    def _step_eval(self) -> dict[str, Any]:
        if self.soft_target:  # the soft suite's deformation measure, every control step
            return super()._step_eval()
        # a rigid target cannot deform: no shape fit per step (it would measure rounding)
        self._tactile_reading = self.tactile.read(self.data)
        self._deformation = 0.0
        return self.evaluate()

    def evaluate(self) -> dict[str, Any]:
        lifted = float(self.object_center()[2] - self.rest_center[2])
        both_pads = bool(np.logical_and.reduce(self._tactile_reading.normal_force > 0.05))
        return {"success": bool(lifted >= LIFT_HEIGHT and both_pads), "lift_height": lifted}

    # ----------------------------------------------------------------- observation
    def _observation(self) -> dict[str, Any]:
        obs = super()._observation()
        if self.obs_mode == "full":
            depth, segmentation = self._probe_render()
            obs["depth"] = depth
            obs["segmentation"] = segmentation
            obs["objects"] = self._detect(segmentation)
        return obs

    def _environment_state(self, agent: np.ndarray) -> np.ndarray:
        """Every block's true ``x, y, z, yaw`` (target first), shape (11, 4)."""
        return self.block_poses().astype(np.float32)

    def _probe_render(self) -> tuple[np.ndarray, np.ndarray]:
        if self._probe is None:
            _check_can_render()
            self._probe = mujoco.Renderer(self.model, self.image_size, self.image_size)
        renderer = self._probe
        renderer.update_scene(self.data, camera="scene")
        renderer.enable_depth_rendering()
        depth = renderer.render().astype(np.float32)
        renderer.disable_depth_rendering()
        renderer.enable_segmentation_rendering()
        ids = renderer.render()
        renderer.disable_segmentation_rendering()
        geom = np.where(ids[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM), ids[..., 0], -1)
        segmentation = self._geom_block[geom]
        if self.soft_target:  # the flexcomp target is drawn as a flex, not as geoms
            segmentation[ids[..., 1] == int(mujoco.mjtObj.mjOBJ_FLEX)] = 0
        return depth, segmentation

    def _detect(self, segmentation: np.ndarray) -> np.ndarray:
        counts = np.bincount(segmentation[segmentation >= 0].ravel(), minlength=BLOCKS)
        if self._reference_pixels is None:  # the unoccluded first frame of the episode
            self._reference_pixels = np.maximum(counts, 1)
        visible = counts >= np.maximum(VISIBLE_FRACTION * self._reference_pixels, 2)
        if self.blackout:  # the stressor: no detections at all for a while
            visible[:] = False
        dropout = self.variation.detection_dropout
        if dropout > 0:  # the stressor: detections lost at random
            visible &= self.np_random.uniform(size=BLOCKS) >= dropout
        truth = self.block_poses()
        noise = self.np_random.normal(size=(BLOCKS, 3)) * self.detection_noise[[0, 0, 1]]
        detected = truth.copy()
        detected[:, :2] += noise[:, :2]
        detected[:, 3] = np.angle(np.exp(1j * (truth[:, 3] + noise[:, 2])))
        self._last_seen[visible] = detected[visible]
        self._seen |= visible
        self._staleness = np.where(visible, 0, self._staleness + 1)
        out = np.concatenate(
            [
                self._last_seen,
                visible[:, None],
                np.where(self._seen, self._staleness, 0)[:, None],
                self._seen[:, None],
            ],
            axis=1,
        )
        return out.astype(np.float32)

    def close(self) -> None:
        super().close()
        if self._probe is not None:
            self._probe.close()
            self._probe = None
