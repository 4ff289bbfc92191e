"""The digital twin: block poses estimated from one RGB-D + segmentation frame, settled in MuJoCo.

:func:`estimate_poses` back-projects each block's segmentation mask through the depth image and
the scene camera's intrinsics and pose to world points, keeps its top face (points within 4 mm of
the highest), and fits the block's known footprint to them: for each yaw on a 1-degree grid over
the shape's symmetry period the footprint is centred on the points' centroid and scored by how
far points fall outside it and how far its own interior lies from the points; the best yaw wins.
Boxes are also fitted by OpenCV's minimum-area rectangle, which seeds the grid search.
:func:`build_twin` loads those poses into a second ClutterRetrieve env (state mode: it renders
nothing) and lets the scene settle there, so a teacher can plan in the twin instead of the truth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import mujoco
import numpy as np

from simroll.envs.clutter.layout import Shape
from simroll.envs.clutter.retrieve import ClutterRetrieveEnv
from simroll.envs.core import SETTLE_STEPS

TOP_BAND = 0.004  # metres below a block's highest point still counted as its top face
MIN_POINTS = 6
SYMMETRY = {  # yaw period of each footprint (radians)
    "cuboid": math.pi,
    "cube": math.pi / 2,
    "bar": math.pi,
    "cylinder": 2 * math.pi,  # any yaw fits; the fit reports 0
    "triangular_prism": 2 * math.pi / 3,
    "hexagonal_prism": math.pi / 3,
    "l_shape": 2 * math.pi,
}


def _period(shape: Shape) -> float:
    """Yaw period of a footprint: from ``SYMMETRY``, else (a soft target's box or cylinder
    footprint) a quarter turn for a square box, half a turn for another box, any for a cylinder."""
    if shape.name in SYMMETRY:
        return SYMMETRY[shape.name]
    if shape.kind == "cylinder":
        return 2 * math.pi
    (part,) = shape.parts
    extent = part.max(axis=0) - part.min(axis=0)
    return math.pi / 2 if math.isclose(extent[0], extent[1]) else math.pi


@dataclass
class Estimate:
    poses: np.ndarray  # (n, 3): x, y, yaw
    found: np.ndarray  # (n,) bool: the block had enough top-face pixels
    points: list[np.ndarray]  # per block, its top-face world points (x, y)


def back_project(model: mujoco.MjModel, data: mujoco.MjData, depth: np.ndarray) -> np.ndarray:
    """World coordinates (H, W, 3) of every pixel of the scene camera's depth image."""
    camera = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, "scene")
    height, width = depth.shape
    focal = (height / 2) / math.tan(math.radians(model.cam_fovy[camera]) / 2)
    cols, rows = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    local = np.stack(
        [(cols - width / 2) / focal * depth, -(rows - height / 2) / focal * depth, -depth], axis=-1
    )
    rotation = data.cam_xmat[camera].reshape(3, 3)
    return local @ rotation.T + data.cam_xpos[camera]


def _misfit(poly_parts: list[np.ndarray], points: np.ndarray, interior: np.ndarray) -> float:
    outside = np.full(len(points), np.inf)
    for part in poly_parts:
        edges = np.roll(part, -1, axis=0) - part
        normals = np.stack([edges[:, 1], -edges[:, 0]], axis=1)
        normals /= np.linalg.norm(normals, axis=1, keepdims=True)
        # signed distance outside a convex polygon (counter-clockwise: outward normals)
        signed = ((points[:, None, :] - part[None]) * normals[None]).sum(-1).max(axis=1)
        outside = np.minimum(outside, np.maximum(signed, 0.0))
    near = np.sqrt(((interior[:, None, :] - points[None]) ** 2).sum(-1).min(axis=1))
    return float(np.mean(outside**2) + np.mean(near**2))


def _interior(shape: Shape, spacing: float = 0.004) -> np.ndarray:
    lo = np.min([p.min(axis=0) for p in shape.parts], axis=0)
    hi = np.max([p.max(axis=0) for p in shape.parts], axis=0)
    xs, ys = np.meshgrid(np.arange(lo[0], hi[0], spacing), np.arange(lo[1], hi[1], spacing))
    grid = np.stack([xs.ravel(), ys.ravel()], axis=1) + spacing / 2
    inside = np.zeros(len(grid), dtype=bool)
    for part in shape.parts:
        edges = np.roll(part, -1, axis=0) - part
        cross = edges[None, :, 0] * (grid[:, None, 1] - part[None, :, 1]) - edges[None, :, 1] * (
            grid[:, None, 0] - part[None, :, 0]
        )
        inside |= (cross >= 0).all(axis=1)
    return grid[inside]


def fit_pose(shape: Shape, points: np.ndarray) -> np.ndarray:
    """``x, y, yaw`` of ``shape`` whose footprint best covers the top-face ``points`` (m)."""
    interior = _interior(shape)
    area_centre = interior.mean(axis=0)
    period = _period(shape)
    centroid = points.mean(axis=0)
    if shape.kind == "cylinder":
        return np.array([*centroid, 0.0])
    yaws = np.radians(np.arange(0.0, math.degrees(period), 1.0))
    if shape.kind == "box" and len(shape.parts) == 1:
        (_, _), (_, _), angle = cv2.minAreaRect(points.astype(np.float32))
        yaws = np.concatenate([np.radians(angle) + np.radians(np.arange(-3, 4)), yaws])
    best, best_cost = None, math.inf
    for yaw in yaws:
        c, s = math.cos(yaw), math.sin(yaw)
        rotation = np.array([[c, -s], [s, c]])
        origin = centroid - rotation @ area_centre
        parts = [p @ rotation.T + origin for p in shape.parts]
        cost = _misfit(parts, points, interior @ rotation.T + origin)
        if cost < best_cost:
            best, best_cost = np.array([origin[0], origin[1], yaw]), cost
    assert best is not None
    return best


def estimate_poses(
    env: ClutterRetrieveEnv, depth: np.ndarray, segmentation: np.ndarray
) -> Estimate:
    """Block poses (target first) from the scene camera's depth and segmentation images."""
    world = back_project(env.model, env.data, depth)
    shapes = env.layout.shapes
    poses = np.zeros((len(shapes), 3))
    found = np.zeros(len(shapes), dtype=bool)
    clouds = []
    for i, shape in enumerate(shapes):
        mask = segmentation == i
        points = world[mask]
        if len(points) >= MIN_POINTS:
            top = points[points[:, 2] >= points[:, 2].max() - TOP_BAND][:, :2]
            if len(top) >= MIN_POINTS:
                poses[i] = fit_pose(shape, top)
                found[i] = True
                clouds.append(top)
                continue
        clouds.append(np.zeros((0, 2)))
    return Estimate(poses, found, clouds)


def build_twin(
    env: ClutterRetrieveEnv, estimate: Estimate, twin: ClutterRetrieveEnv | None = None
) -> ClutterRetrieveEnv:
    """A state-mode ClutterRetrieve env holding ``env``'s hand and the estimated block poses,
    settled (blocks never found stay where the real layout had them: their shapes are known, a
    twin cannot leave them out)."""
    if twin is None:
        twin = ClutterRetrieveEnv(
            tier=env.tier, obs_mode="state", gripper_mode=env.gripper_mode, rigid_twin=True
        )
    state = env.get_sim_state()
    twin.set_sim_state(state)
    data = twin.data
    for i, pose in enumerate(estimate.poses):
        if estimate.found[i]:
            twin._set_block_pose(i, *pose, lift=1e-4)  # just clear of the table
    data.qvel[:] = 0.0
    mujoco.mj_forward(twin.model, data)
    for _ in range(SETTLE_STEPS):
        mujoco.mj_step(twin.model, data)
    twin.rest_center = twin.object_center()
    return twin
