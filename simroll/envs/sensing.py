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

    def read(self, data: mujoco.MjData) -> TactileReading:
        force = np.zeros((2, self.rows, self.cols), dtype=np.float64)
        markers = np.zeros((2, self.marker_uv.shape[0], 2), dtype=np.float64)
        net = np.zeros((2, 3))
        count = 0
        if data.ncon == 0:
            return TactileReading(force.astype(np.float32), markers.astype(np.float32), net, 0)
        contacts = data.contact
        geoms = contacts.geom
        if self.flex >= 0:
            on_object = (contacts.flex == self.flex).any(axis=1)
        else:
            on_object = (geoms == self.object_geom).any(axis=1)
        for finger, pad in enumerate(self.pad_geoms):
            index = np.flatnonzero(on_object & (geoms == pad).any(axis=1))
            if index.size == 0:
                continue
            count += index.size
            # contact-frame force (normal, tangent1, tangent2), as mj_contactForce gives it
            local_contact_force = self._contact_forces(data, index)
            frames = contacts.frame[index].reshape(-1, 3, 3)  # rows: normal, tangent1, tangent2
            world_force = np.einsum("nij,ni->nj", frames, local_contact_force)
            # the contact normal points from geom[0] to geom[1]: make each force act on the pad
            sign = np.where(geoms[index, 0] == pad, -1.0, 1.0)
            world_force *= sign[:, None]
            net[finger] = world_force.sum(axis=0)
            pad_rot = data.geom_xmat[pad].reshape(3, 3)
            local_pos = (contacts.pos[index] - data.geom_xpos[pad]) @ pad_rot
            local_force = world_force @ pad_rot
            u, v = local_pos[:, 0], local_pos[:, 2]
            footprint = np.exp(
                -(
                    (self.taxel_u.ravel()[None] - u[:, None]) ** 2
                    + (self.taxel_v.ravel()[None] - v[:, None]) ** 2
                )
                / (2 * GEL_PRESSURE_SIGMA**2)
            )
            totals = footprint.sum(axis=1, keepdims=True)
            footprint = np.divide(footprint, totals, out=np.zeros_like(footprint), where=totals > 0)
            normal = np.abs(local_contact_force[:, 0])
            force[finger] = (normal @ footprint).reshape(self.rows, self.cols)
            drag = np.exp(
                -((self.marker_uv[None] - np.stack([u, v], axis=1)[:, None]) ** 2).sum(axis=2)
                / (2 * GEL_KERNEL_SIGMA**2)
            )
            shear = np.stack([local_force[:, 0], local_force[:, 2]], axis=1)
            markers[finger] = GEL_SHEAR_COMPLIANCE_MM_PER_N * drag.T @ shear
        return TactileReading(force.astype(np.float32), markers.astype(np.float32), net, count)

    def _contact_forces(self, data: mujoco.MjData, index: np.ndarray) -> np.ndarray:
        """(n, 3) normal and tangential forces of contacts ``index`` in their contact frames.

        With elliptic cones (the soft scene's setting) these are the contact's first three
        constraint forces; otherwise ``mj_contactForce`` converts pyramidal ones."""
        if self.model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC:
            address = data.contact.efc_address[index]
            forces = np.zeros((index.size, 3))
            valid = address >= 0
            forces[valid] = data.efc_force[address[valid, None] + np.arange(3)]
            return forces
        forces = np.zeros((index.size, 3))
        for row, i in enumerate(index):
            mujoco.mj_contactForce(self.model, data, int(i), self._force6)
            forces[row] = self._force6[:3]
        return forces


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
