"""Builds the compiled MuJoCo model of a soft-suite scene: table + hand + one object.

The scene template (``assets/scenes/soft_table.xml``) and the object body (soft flexcomp or rigid
twin) are merged as XML, with the object's Young's modulus optionally scaled (elastic stiffness is
baked into the compiled flex, so a stiffness variation needs its own compile). Compiled models are
cached per (object, twin, stiffness scale), so resets never recompile.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from functools import lru_cache

import mujoco
import numpy as np

from simroll.assets import AssetError, get_object, scene_xml

FINGER_TRAVEL = 0.065  # metres each finger can close from fully open (pads then touch)
OPEN_HALF_WIDTH = 0.065  # pad inner face to hand centre when fully open


@dataclass(frozen=True)
class SceneIds:
    """Indices into the compiled model that the env, sensing and experts use."""

    hand_joints: np.ndarray  # qpos addresses of x, y, z, yaw
    hand_dofs: np.ndarray
    finger_qpos: np.ndarray  # left, right
    finger_dof: np.ndarray
    pad_geoms: np.ndarray  # left, right
    hand_body: int
    object_body: int
    object_geom: int  # rigid twin geom, -1 for soft
    flex: int  # -1 for the rigid twin
    object_qpos: np.ndarray  # rigid: 7 free-joint qpos; soft: vertex slide qpos (nvert*3)
    target_site: int
    hand_base_z: float


def scale_young(body: ET.Element, young_scale: float) -> None:
    """Scale the Young's modulus of every ``<elasticity>`` under ``body`` (in place)."""
    if not young_scale > 0:
        raise ValueError(f"young_scale must be > 0, got {young_scale}")
    for elasticity in body.iter("elasticity"):
        elasticity.set("young", f"{float(elasticity.get('young', '0')) * young_scale:.6g}")


def flex_vertices(model: mujoco.MjModel, flex: int) -> tuple[np.ndarray, np.ndarray]:
    """The bodies of flex ``flex``'s vertices and the qpos addresses of their slide joints
    (x, y, z per vertex)."""
    first = model.flex_vertadr[flex]
    bodies = model.flex_vertbodyid[first : first + model.flex_vertnum[flex]].copy()
    qpos = np.concatenate([model.jnt_qposadr[model.body_jntadr[b]] + np.arange(3) for b in bodies])
    return bodies, qpos


def build_xml(object_name: str, rigid_twin: bool = False, young_scale: float = 1.0) -> str:
    """The merged scene XML as a string."""
    asset = get_object(object_name)
    scene = ET.parse(scene_xml()).getroot()
    body = asset.body_element(rigid_twin)
    scale_young(body, young_scale)
    worldbody = scene.find("worldbody")
    if worldbody is None:
        raise AssetError("scene template has no <worldbody>")
    worldbody.append(body)
    extra_assets = asset.asset_elements(rigid_twin)
    if extra_assets:
        section = scene.find("asset")
        if section is None:
            section = ET.SubElement(scene, "asset")
        section.extend(extra_assets)
    return ET.tostring(scene, encoding="unicode")


@lru_cache(maxsize=32)
def compile_model(object_name: str, rigid_twin: bool = False, young_scale: float = 1.0):
    """Compiled model (shared, read-only use: copy it before changing any field)."""
    xml = build_xml(object_name, rigid_twin, young_scale)
    try:
        return mujoco.MjModel.from_xml_string(xml)
    except ValueError as exc:
        raise AssetError(
            f"object {object_name!r} (rigid_twin={rigid_twin}) failed to compile: {exc}"
        ) from exc


def hand_ids(model: mujoco.MjModel) -> dict[str, object]:
    """The hand's entries of :class:`SceneIds` (every scene built on the template has them)."""

    def jid(name: str) -> int:
        return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)

    hand = [jid(n) for n in ("hand_x", "hand_y", "hand_z", "hand_yaw")]
    fingers = [jid("finger_left"), jid("finger_right")]
    pads = [
        mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, n) for n in ("pad_left", "pad_right")
    ]
    hand_body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "hand")
    return {
        "hand_joints": model.jnt_qposadr[hand],
        "hand_dofs": model.jnt_dofadr[hand],
        "finger_qpos": model.jnt_qposadr[fingers],
        "finger_dof": model.jnt_dofadr[fingers],
        "pad_geoms": np.array(pads),
        "hand_body": hand_body,
        "hand_base_z": float(model.body_pos[hand_body][2]),
    }


def scene_ids(model: mujoco.MjModel) -> SceneIds:
    object_body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "object")
    object_geom = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "object")
    flex = 0 if model.nflex > 0 else -1
    if flex >= 0:
        _, qpos = flex_vertices(model, flex)
    else:
        joint = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "object")
        qpos = model.jnt_qposadr[joint] + np.arange(7)
    return SceneIds(
        **hand_ids(model),
        object_body=object_body,
        object_geom=object_geom,
        flex=flex,
        object_qpos=qpos,
        target_site=mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, "target"),
    )
