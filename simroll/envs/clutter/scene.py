"""The compiled MuJoCo model of a clutter scene: the soft suite's table and hand plus 11 blocks.

The soft suite's scene template (table, lights, floating parallel-jaw hand) is reused; its scene
camera is moved overhead so the whole 0.448 m workspace is in view, and the hand's home is
outside that view, so the first observation is unoccluded. Each block is a body with a free
joint named ``block_<i>`` (``block_0`` is the target) and geoms named ``block_<i>_<part>``; a
prism is a convex mesh of its footprint. The blocks' poses are set through their free joints, so
one compiled model serves every scene with the same sequence of shapes (cached). In the
soft-target variant block 0 is a soft-suite object instead: its flexcomp body (vertices on slide
joints, no geom) or its rigid twin (free joint ``block_0``, geom ``block_0_0``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from functools import lru_cache

import mujoco

from simroll.assets import AssetError, get_object, scene_xml
from simroll.envs.clutter.layout import SHAPES, SOFT_TARGETS, Shape
from simroll.envs.scene import scale_young

# overhead scene camera: 0.55 m up, a little towards -y, looking at the workspace centre
SCENE_CAMERA = {"pos": "0 -0.15 0.55", "xyaxes": "1 0 0 0 0.965 0.263", "fovy": "45"}
HAND_HOME = (-0.32, 0.0, 0.10)  # pad centre, world: beside the scene camera's view
TARGET_RGBA = "0.85 0.15 0.12 1"
CLUTTER_RGBA = (
    "0.20 0.45 0.80 1",
    "0.95 0.75 0.15 1",
    "0.30 0.65 0.35 1",
    "0.55 0.35 0.70 1",
    "0.90 0.55 0.20 1",
    "0.35 0.70 0.75 1",
    "0.60 0.60 0.62 1",
)
BLOCK_DENSITY = 600.0  # kg/m^3, wood
BLOCK_FRICTION = "0.6 0.005 0.0001"


def _fmt(values) -> str:
    return " ".join(f"{float(v):.6g}" for v in values)


def _mesh(shape: Shape, name: str) -> ET.Element:
    (poly,) = shape.parts
    h = shape.half_height
    vertices = [(*p, -h) for p in poly] + [(*p, h) for p in poly]
    return ET.Element("mesh", name=name, vertex=_fmt(v for vertex in vertices for v in vertex))


def block_body(index: int, shape: Shape, rgba: str) -> tuple[ET.Element, list[ET.Element]]:
    """The body of block ``index`` (at the origin; placed through its free joint) and the mesh
    assets it needs."""
    body = ET.Element("body", name=f"block_{index}", pos=f"0 0 {shape.half_height:.6g}")
    ET.SubElement(body, "freejoint", name=f"block_{index}")
    meshes = []
    common = {
        "density": f"{BLOCK_DENSITY:g}",
        "friction": BLOCK_FRICTION,
        "rgba": rgba,
        "condim": "4",
    }
    for k, part in enumerate(shape.parts):
        name = f"block_{index}_{k}"
        if shape.kind == "box":
            lo, hi = part.min(axis=0), part.max(axis=0)
            centre, half = (lo + hi) / 2, (hi - lo) / 2
            ET.SubElement(
                body,
                "geom",
                name=name,
                type="box",
                size=_fmt([half[0], half[1], shape.half_height]),
                pos=_fmt([centre[0], centre[1], 0.0]),
                **common,
            )
        elif shape.kind == "cylinder":
            ET.SubElement(
                body,
                "geom",
                name=name,
                type="cylinder",
                size=_fmt([shape.radius, shape.half_height]),
                **common,
            )
        elif shape.kind == "mesh":
            mesh = _mesh(shape, f"{name}_mesh")
            meshes.append(mesh)
            ET.SubElement(body, "geom", name=name, type="mesh", mesh=mesh.get("name"), **common)
        else:  # pragma: no cover - SHAPES only holds the kinds above
            raise ValueError(f"unknown shape kind {shape.kind!r}")
    return body, meshes


def soft_target_body(name: str, soft: bool, young_scale: float = 1.0):
    """Block 0 as soft-suite object ``name``: its flexcomp body (``soft``) or its rigid twin,
    renamed ``block_0`` (twin joint ``block_0``, geom ``block_0_0``) and coloured as the target,
    with the flex's Young's modulus scaled by ``young_scale``; and the asset elements it needs."""
    asset = get_object(name)
    body = asset.body_element(rigid_twin=not soft)
    body.set("name", "block_0")
    for element in body.iter():
        if element.tag in ("freejoint", "joint") and element.get("name") == "object":
            element.set("name", "block_0")
        if element.tag == "geom" and element.get("name") == "object":
            element.set("name", "block_0_0")
        if element.tag in ("geom", "flexcomp"):
            element.set("rgba", TARGET_RGBA)
    scale_young(body, young_scale)
    return body, asset.asset_elements(rigid_twin=not soft)


def build_xml(
    shape_names: tuple[str, ...], soft_target: bool = False, young_scale: float = 1.0
) -> str:
    """The scene XML for blocks of ``shape_names`` (index 0 is the target). A soft-suite object
    as the target is its flexcomp body when ``soft_target``, else its rigid twin."""
    unknown = [
        name
        for i, name in enumerate(shape_names)
        if name not in SHAPES and not (i == 0 and name in SOFT_TARGETS)
    ]
    if unknown:
        raise ValueError(
            f"unknown block shapes {unknown}; expected names from {sorted(SHAPES)} (the target "
            f"may also be a soft object of {SOFT_TARGETS})"
        )
    if soft_target and shape_names[0] not in SOFT_TARGETS:
        raise ValueError(f"a soft target must be one of {SOFT_TARGETS}, got {shape_names[0]!r}")
    root = ET.parse(scene_xml()).getroot()
    root.set("model", "simroll_clutter")
    worldbody = root.find("worldbody")
    assets = root.find("asset")
    if worldbody is None or assets is None:
        raise AssetError("scene template needs <worldbody> and <asset>")
    for camera in worldbody.iter("camera"):
        if camera.get("name") == "scene":
            camera.attrib.update(SCENE_CAMERA)
    headlight = root.find("visual/headlight")
    if headlight is not None:  # seen from straight above, the soft scene's light washes out
        headlight.attrib.update(ambient="0.25 0.25 0.25", diffuse="0.3 0.3 0.3")
    for site in list(worldbody.iter("site")):
        if site.get("name") == "target":  # the soft tasks' goal marker has no use here
            worldbody.remove(site)
    for geom in worldbody.iter("geom"):
        if geom.get("name") == "table":
            geom.set("size", "0.6 0.6 0.05")
    for index, name in enumerate(shape_names):
        if index == 0 and name in SOFT_TARGETS:
            body, meshes = soft_target_body(name, soft_target, young_scale)
            worldbody.append(body)
            assets.extend(meshes)
            continue
        rgba = TARGET_RGBA if index == 0 else CLUTTER_RGBA[(index - 1) % len(CLUTTER_RGBA)]
        body, meshes = block_body(index, SHAPES[name], rgba)
        worldbody.append(body)
        assets.extend(meshes)
    return ET.tostring(root, encoding="unicode")


@lru_cache(maxsize=16)
def compile_model(
    shape_names: tuple[str, ...], soft_target: bool = False, young_scale: float = 1.0
) -> mujoco.MjModel:
    """Compiled model for blocks of ``shape_names`` (shared: copy before changing fields)."""
    return mujoco.MjModel.from_xml_string(build_xml(tuple(shape_names), soft_target, young_scale))
