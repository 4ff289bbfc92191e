"""Policy-visible sensing: RGB cameras and two-finger tactile built from MuJoCo contact data.

Tactile (see MUJOCO_NOTES.md: MuJoCo's native tactile sensor reads zeros against flex bodies, so
it is built here from ``d.contact``): every contact between a finger pad and the object gives a
point on the pad and a force from ``mj_contactForce`` (normal and tangential, contact frame).
* ``force``: each contact's normal force spread with a Gaussian gel footprint onto a
  ``rows x cols`` taxel grid spanning the pad face, in newtons per taxel (the image sums to the
  finger's total normal force): what a pressure/depth image of the gel would show.
* ``markers``: an ``11 x 9`` grid of gel markers displaced by the tangential (shear) force of
  each contact, spread with a Gaussian kernel of the gel's footprint and scaled by the gel's shear
  compliance; millimetres in the pad's (along-finger, vertical) plane.
Also the net contact force per finger (3-vector, world frame) for the evaluator.

Cameras: a lazily created ``mujoco.Renderer`` per image size; it must be created after any fork
(the GL context is per process), which a lazy creation in the worker guarantees.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

MARKER_GRID = (11, 9)  # along the pad's vertical axis x along its length, as GelSight Mini
GEL_SHEAR_COMPLIANCE_MM_PER_N = 0.8
GEL_KERNEL_SIGMA = 0.006  # metres: how far a contact's shear drags the markers
GEL_PRESSURE_SIGMA = 0.003  # metres: footprint of a contact in the pressure image


@dataclass
class TactileReading:
    force: np.ndarray  # (2, rows, cols) float32, newtons per taxel
    markers: np.ndarray  # (2, 99, 2) float32, millimetres
    net_force: np.ndarray  # (2, 3) float64, world frame, newtons (evaluator use)
    contacts: int

    @property
    def normal_force(self) -> np.ndarray:
        """Total normal force per finger (N)."""
        return self.force.reshape(2, -1).sum(axis=1)


class TactileSensor:
    """Reads per-finger pressure images and marker fields from the current contacts."""

    def __init__(
        self,
        model: mujoco.MjModel,
        pad_geoms,
        object_geom: int,
        flex: int,
        rows: int = 16,
        cols: int = 12,
    ):
        self.model = model
        self.pad_geoms = [int(g) for g in pad_geoms]
        self.object_geom = int(object_geom)
        self.flex = int(flex)
        self.rows, self.cols = rows, cols
        half = model.geom_size[self.pad_geoms[0]]
        self.half_length, self.half_height = float(half[0]), float(half[2])
        # marker rest positions in pad coordinates (u along pad x, v along pad z), metres
        mu = np.linspace(-self.half_length * 0.9, self.half_length * 0.9, MARKER_GRID[1])
        mv = np.linspace(-self.half_height * 0.9, self.half_height * 0.9, MARKER_GRID[0])
        grid_v, grid_u = np.meshgrid(mv, mu, indexing="ij")
        self.marker_uv = np.stack([grid_u.ravel(), grid_v.ravel()], axis=1)
        self._force6 = np.zeros(6)
        # taxel centres: rows run down the pad (v from +h to -h), columns along it (u)
        tu = np.linspace(-self.half_length, self.half_length, cols)
        tv = np.linspace(self.half_height, -self.half_height, rows)
        self.taxel_v, self.taxel_u = np.meshgrid(tv, tu, indexing="ij")

    def _touches_object(self, contact) -> bool:
        if self.flex >= 0:
            return self.flex in (contact.flex[0], contact.flex[1])
        return self.object_geom in (contact.geom[0], contact.geom[1])

    def read(self, data: mujoco.MjData) -> TactileReading:
        force = np.zeros((2, self.rows, self.cols), dtype=np.float64)
        markers = np.zeros((2, self.marker_uv.shape[0], 2), dtype=np.float64)
        net = np.zeros((2, 3))
        count = 0
        for i in range(data.ncon):
            contact = data.contact[i]
            geoms = (contact.geom[0], contact.geom[1])
            finger = next((k for k, g in enumerate(self.pad_geoms) if g in geoms), None)
            if finger is None or not self._touches_object(contact):
                continue
            count += 1
            mujoco.mj_contactForce(self.model, data, i, self._force6)
            frame = contact.frame.reshape(3, 3)  # rows: normal, tangent1, tangent2
            world_force = frame.T @ self._force6[:3]
            # contact normal points from geom[0] to geom[1]; make force act on the pad
            sign = -1.0 if geoms[0] == self.pad_geoms[finger] else 1.0
            world_force = sign * world_force
            net[finger] += world_force
            pad_rot = data.geom_xmat[self.pad_geoms[finger]].reshape(3, 3)
            local = pad_rot.T @ (contact.pos - data.geom_xpos[self.pad_geoms[finger]])
            local_force = pad_rot.T @ world_force
            u, v = local[0], local[2]
            self._splat(force[finger], u, v, abs(self._force6[0]))
            shear = np.array([local_force[0], local_force[2]])
            weights = np.exp(
                -((self.marker_uv - (u, v)) ** 2).sum(axis=1) / (2 * GEL_KERNEL_SIGMA**2)
            )
            markers[finger] += GEL_SHEAR_COMPLIANCE_MM_PER_N * weights[:, None] * shear[None, :]
        return TactileReading(force.astype(np.float32), markers.astype(np.float32), net, count)

    def _splat(self, image: np.ndarray, u: float, v: float, value: float) -> None:
        """Spread one contact's normal force over the taxels with the gel's Gaussian footprint
        (weights normalised over the pad, so the image still sums to the total normal force)."""
        weights = np.exp(-((self.taxel_u - u) ** 2 + (self.taxel_v - v) ** 2)
                         / (2 * GEL_PRESSURE_SIGMA**2))
        total = weights.sum()
        if total > 0:
            image += value * weights / total


def tactile_to_rgb(
    reading_force: np.ndarray, scale_newton: float = 0.15, size: int = 64
) -> np.ndarray:
    """Both fingers' pressure maps side by side as a uint8 RGB image (dark = no contact, bright
    orange = ``scale_newton`` per taxel or more), for videos and datasets."""
    low, high = np.array([25.0, 25.0, 35.0]), np.array([255.0, 170.0, 40.0])
    panels = []
    for finger in range(reading_force.shape[0]):
        pressure = np.clip(reading_force[finger] / scale_newton, 0.0, 1.0)
        rows, cols = pressure.shape
        reps = max(1, size // rows)
        big = np.kron(pressure, np.ones((reps, reps)))[..., None]
        panels.append((low + (high - low) * np.sqrt(big)).astype(np.uint8))
        panels.append(np.full((big.shape[0], 2, 3), 255, dtype=np.uint8))
    return np.concatenate(panels[:-1], axis=1)


class CameraRig:
    """Renders named cameras at one image size; the GL context is created on first use."""

    def __init__(self, model: mujoco.MjModel, cameras: tuple[str, ...], height: int, width: int):
        self.model, self.cameras, self.height, self.width = model, cameras, height, width
        self._renderer: mujoco.Renderer | None = None

    def render(self, data: mujoco.MjData) -> dict[str, np.ndarray]:
        if self._renderer is None:
            self._renderer = mujoco.Renderer(self.model, self.height, self.width)
        images = {}
        for camera in self.cameras:
            self._renderer.update_scene(data, camera=camera)
            images[camera] = self._renderer.render().copy()
        return images

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
