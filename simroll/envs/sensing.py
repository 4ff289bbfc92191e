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
(the GL context is per process), which a lazy creation in the worker guarantees. Observations
carry :class:`LazyImages`: each camera's scene is captured when the observation is made (cheap)
and rendered only when its pixels are first read (on CPU, EGL through llvmpipe, 10-30 ms per
camera, mostly the shadow map), so the steps whose observation a policy skips between re-plans
cost no rendering. The images are exactly those an immediate render gives (tested).
"""

from __future__ import annotations

import copy
import time
import weakref
from collections import deque
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import mujoco
import numpy as np

from simroll import _speedups

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

    @cached_property
    def normal_force(self) -> np.ndarray:
        """Total normal force per finger (N); computed once per reading (it is read every step
        by the evaluator and the observation)."""
        return np.add.reduce(self.force.reshape(2, -1), axis=1)


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
        self._taxel_u_row, self._taxel_v_row = (
            self.taxel_u.ravel()[None],
            self.taxel_v.ravel()[None],
        )
        self._pad_array = np.array(self.pad_geoms)
        # finger index of each geom id (-1: not a pad), one entry longer so that geom -1 (the
        # flex side of a flex contact) maps to -1
        self._finger_of_geom = np.full(model.ngeom + 1, -1, dtype=np.int64)
        self._finger_of_geom[self.pad_geoms] = np.arange(len(self.pad_geoms))

    def read(self, data: mujoco.MjData) -> TactileReading:
        if data.ncon == 0:
            return self._empty()
        contacts = data.contact
        geoms = contacts.geom
        # per contact and side, the finger whose pad that side is (-1: neither; a flex side's
        # geom is -1, which the table's extra last entry maps to -1 too)
        pad_side = self._finger_of_geom[geoms]
        if pad_side.max() < 0:  # most steps: the pads touch nothing
            return self._empty()
        if self.flex >= 0:
            object_side = contacts.flex == self.flex
        else:
            object_side = geoms == self.object_geom
        # the finger touching the object in each contact: the pad opposite the object's side
        finger_of = np.where(object_side, pad_side[:, ::-1], -1).max(axis=1)
        first = np.flatnonzero(finger_of == 0)
        second = np.flatnonzero(finger_of == 1)
        if first.size == 0 and second.size == 0:  # the pads touch something else
            return self._empty()
        # both fingers' contacts in one batch (finger 0's first, each in contact order): the
        # per-contact arithmetic runs once, the per-finger sums on the two slices
        index = np.concatenate((first, second))
        fingers = (slice(0, first.size), slice(first.size, index.size))
        pads = self._pad_array[finger_of[index]]
        # contact-frame force (normal, tangent1, tangent2), as mj_contactForce gives it
        local_contact_force = self._contact_forces(data, index)
        frames = contacts.frame[index].reshape(-1, 3, 3)  # rows: normal, tangent1, tangent2
        world_force = np.einsum("nij,ni->nj", frames, local_contact_force)
        # the contact normal points from geom[0] to geom[1]: make each force act on the pad
        world_force[geoms[index, 0] == pads] *= -1.0
        offset = contacts.pos[index] - data.geom_xpos[pads]
        local_pos = np.empty_like(offset)
        local_force = np.empty_like(world_force)
        net = np.zeros((2, 3))
        for finger, rows in enumerate(fingers):
            if rows.start == rows.stop:
                continue
            pad_rot = data.geom_xmat[self.pad_geoms[finger]].reshape(3, 3)
            local_pos[rows] = offset[rows] @ pad_rot
            local_force[rows] = world_force[rows] @ pad_rot
            net[finger] = world_force[rows].sum(axis=0)
        u, v = local_pos[:, 0], local_pos[:, 2]
        footprint = np.exp(
            -((self._taxel_u_row - u[:, None]) ** 2 + (self._taxel_v_row - v[:, None]) ** 2)
            / (2 * GEL_PRESSURE_SIGMA**2)
        )
        totals = footprint.sum(axis=1, keepdims=True)
        footprint = np.divide(footprint, totals, out=np.zeros_like(footprint), where=totals > 0)
        normal = np.abs(local_contact_force[:, 0])
        drag = np.exp(
            -((self.marker_uv[None] - local_pos[:, None, 0::2]) ** 2).sum(axis=2)
            / (2 * GEL_KERNEL_SIGMA**2)
        )
        shear = local_force[:, 0::2]
        force = np.zeros((2, self.rows * self.cols), dtype=np.float64)
        markers = np.zeros((2, self.marker_uv.shape[0], 2), dtype=np.float64)
        for finger, rows in enumerate(fingers):
            if rows.start == rows.stop:
                continue
            force[finger] = normal[rows] @ footprint[rows]
            markers[finger] = GEL_SHEAR_COMPLIANCE_MM_PER_N * drag[rows].T @ shear[rows]
        return TactileReading(
            force.reshape(2, self.rows, self.cols).astype(np.float32),
            markers.astype(np.float32),
            net,
            int(index.size),
        )

    def _empty(self) -> TactileReading:
        """The reading without any pad-object contact: all zeros (fresh arrays per reading)."""
        return TactileReading(
            np.zeros((2, self.rows, self.cols), dtype=np.float32),
            np.zeros((2, self.marker_uv.shape[0], 2), dtype=np.float32),
            np.zeros((2, 3)),
            0,
        )

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


# mujoco.Renderer's default scene size, for the rig's own (eager) scene; captured scenes are
# smaller (about 1 MB and 9 ms to allocate instead of 10 MB and 90 ms) and pooled. A capture that
# fills one falls back to an eager render, so no image ever loses a geom.
EAGER_MAXGEOM = 10000
CAPTURE_MAXGEOM = 1000
# Unrendered observations a rig keeps scenes for; capturing one more first renders the oldest
# (a caller that keeps every observation and reads its pixels later still gets them all).
MAX_UNRENDERED = 4


_lazy_render_s = 0.0  # seconds this process spent rendering LazyImages on first read


def lazy_render_seconds() -> float:
    """Seconds this process has spent rendering camera images when they were first read. The
    episode engine subtracts what accrues during ``select_action``: rendering is the env's work,
    not the policy's, wherever it happens."""
    return _lazy_render_s


class _NotRendered:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<not rendered yet>"


_NOT_RENDERED = _NotRendered()


class LazyImages(dict):
    """``camera -> (H, W, 3) uint8`` image, each rendered from the scene captured when the
    observation was made, the first time it is read (``obs["pixels"]["scene"]``, ``.items()``,
    ``.values()``, ``dict(...)``, pickling, comparison). A ``dict`` to every reader; pickled or
    copied it is rendered first. ``materialize()`` renders them all now."""

    __slots__ = ("__weakref__", "_rig", "_scenes")

    def __init__(self, rig: CameraRig, scenes: dict[str, mujoco.MjvScene]):
        dict.__init__(self, dict.fromkeys(scenes, _NOT_RENDERED))
        self._rig = rig
        self._scenes = scenes  # camera -> captured scene until rendered (the rig holds it too)

    # ---------------------------------------------------------------- rendering
    def _value(self, key: str) -> Any:
        value = dict.__getitem__(self, key)
        if value is _NOT_RENDERED:
            value = self._rig._render_captured(self, key)
        return value

    def materialize(self) -> LazyImages:
        """Render every image not rendered yet; returns self."""
        for key in list(dict.keys(self)):
            self._value(key)
        return self

    @property
    def pending(self) -> tuple[str, ...]:
        """The cameras not rendered yet."""
        return tuple(key for key, value in dict.items(self) if value is _NOT_RENDERED)

    def _drop(self, key: Any) -> None:
        scene = self._scenes.pop(key, None)
        if scene is not None:
            self._rig._release(scene)

    # ---------------------------------------------------------------- reading
    def __getitem__(self, key: str) -> Any:
        return self._value(key)

    def get(self, key: str, default: Any = None) -> Any:
        return self._value(key) if dict.__contains__(self, key) else default

    def __iter__(self):  # a Python-level __iter__ keeps dict(x) and {**x} off the C fast path
        return dict.__iter__(self)

    def values(self):
        return dict.values(self.materialize())

    def items(self):
        return dict.items(self.materialize())

    def copy(self) -> dict:
        return dict(self.items())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyImages):
            other = other.copy()
        return dict.__eq__(self.copy(), other)

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self.copy())

    def __or__(self, other: Any) -> dict:
        return self.copy() | other

    def __ror__(self, other: Any) -> dict:
        return dict(other) | self.copy()

    @classmethod
    def _rendered(cls, images: dict[str, Any]) -> LazyImages:
        """An instance holding ``images`` (nothing left to render, no rig)."""
        instance = cls.__new__(cls)
        dict.__init__(instance, images)
        instance._rig, instance._scenes = None, {}
        return instance

    def __reduce_ex__(self, protocol: int):
        return (LazyImages._rendered, (self.copy(),))

    def __reduce__(self):
        return (LazyImages._rendered, (self.copy(),))

    def __copy__(self) -> LazyImages:
        return LazyImages._rendered(self.copy())

    def __deepcopy__(self, memo: dict) -> LazyImages:
        return LazyImages._rendered({k: copy.deepcopy(v, memo) for k, v in self.items()})

    # ---------------------------------------------------------------- writing
    def __setitem__(self, key: str, value: Any) -> None:
        self._drop(key)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: str) -> None:
        dict.__delitem__(self, key)
        self._drop(key)

    def pop(self, key: str, *default: Any) -> Any:
        if dict.__contains__(self, key):
            value = self._value(key)
            dict.__delitem__(self, key)
            return value
        return dict.pop(self, key, *default)

    def popitem(self) -> tuple[str, Any]:
        key = next(reversed(dict.keys(self)))
        return key, self.pop(key)

    def setdefault(self, key: str, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return self._value(key)
        dict.__setitem__(self, key, default)
        return default

    def update(self, *args: Any, **kwargs: Any) -> None:
        other = dict(*args, **kwargs)
        for key in other:
            self._drop(key)
        dict.update(self, other)

    def __ior__(self, other: Any) -> LazyImages:
        self.update(other)
        return self

    def clear(self) -> None:
        for key in list(self._scenes):
            self._drop(key)
        dict.clear(self)


class _SceneRenderer(mujoco.Renderer):
    """``mujoco.Renderer`` that can also render a scene captured earlier (same GL pipeline)."""

    def render_scene(self, scene: mujoco.MjvScene) -> np.ndarray:
        own, self._scene = self._scene, scene
        try:
            return self.render()
        finally:
            self._scene = own


class CameraRig:
    """Renders named cameras at one image size; the GL context is created on first use.

    :meth:`render` renders now; :meth:`capture` returns :class:`LazyImages` that render when
    read. With the fast paths on (``simroll._speedups``) the offscreen framebuffer has the rig's
    image size instead of the model's ``offwidth x offheight`` (same pixels, less to clear and
    resolve)."""

    def __init__(self, model: mujoco.MjModel, cameras: tuple[str, ...], height: int, width: int):
        self.model, self.cameras, self.height, self.width = model, cameras, height, width
        self._renderer: _SceneRenderer | None = None
        self._option = mujoco.MjvOption()  # what mujoco.Renderer.update_scene uses by default
        self._views: dict[str, mujoco.MjvCamera] = {}
        for camera in cameras:
            camera_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
            if camera_id < 0:
                raise ValueError(f'The camera "{camera}" does not exist.')
            view = mujoco.MjvCamera()
            view.type = mujoco.mjtCamera.mjCAMERA_FIXED
            view.fixedcamid = camera_id
            self._views[camera] = view
        self._free: list[mujoco.MjvScene] = []
        self._outstanding: deque[tuple[weakref.ref, dict[str, mujoco.MjvScene]]] = deque()

    def _get_renderer(self) -> _SceneRenderer:
        if self._renderer is None:
            visual = self.model.vis.global_
            saved = (visual.offwidth, visual.offheight)
            if _speedups.enabled() and self.width <= saved[0] and self.height <= saved[1]:
                # MuJoCo renders into the bottom-left corner of its offscreen buffer: one of the
                # image's own size gives the same pixels (tested) with less to clear and resolve.
                visual.offwidth, visual.offheight = self.width, self.height
            try:
                self._renderer = _SceneRenderer(
                    self.model, self.height, self.width, max_geom=EAGER_MAXGEOM
                )
            finally:
                visual.offwidth, visual.offheight = saved
        return self._renderer

    def render(self, data: mujoco.MjData) -> dict[str, np.ndarray]:
        renderer = self._get_renderer()
        images = {}
        for camera in self.cameras:
            renderer.update_scene(data, camera=camera)
            images[camera] = renderer.render().copy()
        return images

    def capture(self, data: mujoco.MjData) -> LazyImages | dict[str, np.ndarray]:
        """The cameras' images of ``data``'s current state, rendered when first read (a plain
        dict rendered now when the fast paths are off or a scene has too many geoms)."""
        if not _speedups.enabled():
            return self.render(data)
        self._get_renderer()  # the GL context exists (and fails here, not later) before capture
        self._reclaim()
        scenes: dict[str, mujoco.MjvScene] = {}
        for camera in self.cameras:
            scene = self._free.pop() if self._free else self._new_scene()
            mujoco.mjv_updateScene(
                self.model,
                data,
                self._option,
                None,
                self._views[camera],
                mujoco.mjtCatBit.mjCAT_ALL.value,
                scene,
            )
            scenes[camera] = scene
            if scene.ngeom >= scene.maxgeom:  # possibly truncated: render everything now
                self._free.extend(scenes.values())
                return self.render(data)
        images = LazyImages(self, scenes)
        self._outstanding.append((weakref.ref(images), scenes))
        return images

    def _new_scene(self) -> mujoco.MjvScene:
        return mujoco.MjvScene(self.model, maxgeom=CAPTURE_MAXGEOM)

    def _render_captured(self, images: LazyImages, camera: str) -> np.ndarray:
        global _lazy_render_s
        start = time.perf_counter()
        scene = images._scenes.pop(camera)
        image = self._get_renderer().render_scene(scene)
        self._free.append(scene)
        _lazy_render_s += time.perf_counter() - start
        dict.__setitem__(images, camera, image)
        return image

    def _release(self, scene: mujoco.MjvScene) -> None:
        self._free.append(scene)

    def _reclaim(self) -> None:
        """Take back the scenes of observations dropped unrendered, and render the oldest kept
        ones beyond ``MAX_UNRENDERED``."""
        kept: deque[tuple[weakref.ref, dict[str, mujoco.MjvScene]]] = deque()
        for ref, scenes in self._outstanding:
            if not scenes:
                continue
            if ref() is None:
                self._free.extend(scenes.values())
                scenes.clear()
                continue
            kept.append((ref, scenes))
        while len(kept) >= MAX_UNRENDERED:
            ref, _ = kept.popleft()
            images = ref()
            if images is not None:
                images.materialize()
        self._outstanding = kept

    def close(self) -> None:
        if self._renderer is not None:
            for ref, scenes in self._outstanding:  # they need this GL context: render them now
                images = ref()
                if images is not None and scenes:
                    images.materialize()
            self._renderer.close()
            self._renderer = None
        self._outstanding.clear()
        self._free.clear()
