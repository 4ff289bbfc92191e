"""Distribution shifts applied on top of authored physics, and restored on every reset.

A :class:`Variation` scales object stiffness (Young's modulus, needs its own compiled model), mass
and friction, scales the lights, moves the scene camera, and injects hardware shifts as in
Self-Adaptive VLA: an actuation bias (a constant offset added to every commanded hand target) and
an encoder offset (a constant offset added to the observed hand joint positions). The env keeps a
snapshot of the authored model fields and restores it before applying a variation, so shifts
never leak from one episode to the next.

Named presets (``VARIATIONS``) follow SoftVTBench's OOD conditions; a mapping of field names to
values is accepted too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from simroll.checks import is_int, is_number


@dataclass(frozen=True)
class Variation:
    name: str = "default"
    young_scale: float = 1.0
    mass_scale: float = 1.0
    friction_scale: float = 1.0
    light_scale: float = 1.0
    camera_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    actuation_bias: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  # x, y, z (m), yaw
    encoder_offset: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    # clutter stressors (the soft tasks ignore them): each block's pose at execution differs from
    # the scene the first frame showed by up to (metres, radians), uniform; each detection of
    # the partial object observation is lost with this probability
    block_pose_noise: tuple[float, float] = (0.0, 0.0)
    detection_dropout: float = 0.0
    # ...and (plan-conditioned clutter envs) for this many consecutive primitives from a seeded
    # start within the plan, nothing is detected
    blackout_primitives: int = 0

    def __post_init__(self) -> None:
        for key in ("young_scale", "mass_scale", "friction_scale", "light_scale"):
            value = getattr(self, key)
            if not (isinstance(value, int | float) and np.isfinite(value) and value > 0):
                raise ValueError(
                    f"variation {self.name!r}: {key} must be a finite number > 0, got {value!r}"
                )
        dropout = self.detection_dropout
        if not (is_number(dropout) and 0 <= dropout < 1):
            raise ValueError(
                f"variation {self.name!r}: detection_dropout must be in [0, 1), "
                f"got {self.detection_dropout!r}"
            )
        blackout = self.blackout_primitives
        if not is_int(blackout, 0):
            raise ValueError(
                f"variation {self.name!r}: blackout_primitives must be an int >= 0, "
                f"got {blackout!r}"
            )
        noise = np.asarray(self.block_pose_noise, dtype=float)
        if noise.shape != (2,) or not np.all(np.isfinite(noise)) or np.any(noise < 0):
            raise ValueError(
                f"variation {self.name!r}: block_pose_noise must be (metres, radians) >= 0, "
                f"got {self.block_pose_noise!r}"
            )
        for key, size in (("camera_offset", 3), ("actuation_bias", 4), ("encoder_offset", 4)):
            value = np.asarray(getattr(self, key), dtype=float)
            if value.shape != (size,) or not np.all(np.isfinite(value)):
                raise ValueError(
                    f"variation {self.name!r}: {key} must be {size} finite numbers, "
                    f"got {getattr(self, key)!r}"
                )


VARIATIONS: dict[str, Variation] = {
    v.name: v
    for v in [
        Variation(),
        Variation("soft_x0.5", young_scale=0.5),
        Variation("stiff_x2", young_scale=2.0),
        Variation("heavy_x1.75", mass_scale=1.75),
        Variation("heavy_x2.5", mass_scale=2.5),
        Variation("slippery_x0.6", friction_scale=0.6),
        Variation("dim_x0.5", light_scale=0.5),
        Variation("bright_x2", light_scale=2.0),
        Variation("camera_shift", camera_offset=(0.03, -0.03, 0.02)),
        Variation("actuation_bias", actuation_bias=(0.012, -0.008, 0.0, 0.0)),
        Variation("encoder_offset", encoder_offset=(0.01, 0.01, 0.0, 0.05)),
        # clutter stressors (TRACE's): execution pose noise, 10% detection dropout, a 5-step
        # observation blackout
        Variation("pose_noise", block_pose_noise=(0.003, float(np.radians(2.0)))),
        # three times TRACE's execution noise: a harsher stressor, under which the twin's plan
        # goes stale sooner (nominal replay is strong under the 3 mm one)
        Variation("pose_noise_x3", block_pose_noise=(0.009, float(np.radians(6.0)))),
        Variation("detection_dropout", detection_dropout=0.1),
        Variation("blackout", blackout_primitives=5),
    ]
}


def resolve_variation(value: str | Variation | dict[str, Any] | None) -> Variation:
    """A preset name, a Variation, or a mapping of Variation fields."""
    if value is None:
        return VARIATIONS["default"]
    if isinstance(value, Variation):
        return value
    if isinstance(value, str):
        if value not in VARIATIONS:
            raise ValueError(f"unknown variation {value!r}; expected one of {sorted(VARIATIONS)}")
        return VARIATIONS[value]
    if isinstance(value, dict):
        fields = {f.name for f in dataclasses.fields(Variation)}
        unknown = set(value) - fields
        if unknown:
            raise ValueError(
                f"unknown variation fields {sorted(unknown)}; expected {sorted(fields)}"
            )
        return Variation(**{"name": "custom", **value})
    raise TypeError(f"variation must be a name, Variation or dict, got {type(value).__name__}")


class PhysicsSnapshot:
    """Authored values of the model fields a variation touches; ``apply`` restores then shifts."""

    def __init__(self, model: mujoco.MjModel):
        self.body_mass = model.body_mass.copy()
        self.body_inertia = model.body_inertia.copy()
        self.geom_friction = model.geom_friction.copy()
        self.flex_friction = model.flex_friction.copy()
        self.light_diffuse = model.light_diffuse.copy()
        self.light_ambient = model.light_ambient.copy()
        self.light_specular = model.light_specular.copy()
        self.cam_pos = model.cam_pos.copy()
        self.headlight_diffuse = model.vis.headlight.diffuse.copy()
        self.headlight_ambient = model.vis.headlight.ambient.copy()

    def apply(
        self,
        model: mujoco.MjModel,
        variation: Variation,
        object_bodies: np.ndarray,
        contact_geoms: np.ndarray,
        scene_camera: int,
    ) -> None:
        """Restore authored values, then apply ``variation``.

        Friction is scaled on the object and on the finger pads together, since MuJoCo combines
        two geoms' friction by taking the larger one.
        """
        model.body_mass[:] = self.body_mass
        model.body_inertia[:] = self.body_inertia
        model.geom_friction[:] = self.geom_friction
        model.flex_friction[:] = self.flex_friction
        model.light_diffuse[:] = self.light_diffuse
        model.light_ambient[:] = self.light_ambient
        model.vis.headlight.diffuse[:] = self.headlight_diffuse
        model.vis.headlight.ambient[:] = self.headlight_ambient
        model.light_specular[:] = self.light_specular
        model.cam_pos[:] = self.cam_pos
        model.body_mass[object_bodies] *= variation.mass_scale
        model.body_inertia[object_bodies] *= variation.mass_scale
        if len(contact_geoms):
            model.geom_friction[contact_geoms, 0] *= variation.friction_scale
        if model.nflex:
            model.flex_friction[:, 0] *= variation.friction_scale
        model.vis.headlight.diffuse[:] = np.clip(
            self.headlight_diffuse * variation.light_scale, 0, 1
        )
        model.vis.headlight.ambient[:] = np.clip(
            self.headlight_ambient * variation.light_scale, 0, 1
        )
        model.light_diffuse[:] = np.clip(self.light_diffuse * variation.light_scale, 0, 1)
        model.light_specular[:] = np.clip(self.light_specular * variation.light_scale, 0, 1)
        model.cam_pos[scene_camera] += np.asarray(variation.camera_offset)
