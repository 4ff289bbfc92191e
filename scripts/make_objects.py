"""Writes the soft-object MJCF assets and their rigid twins under assets/objects/.

Each object is authored here once, as a parameter row, so that the MJCF files are reproducible:
box-shaped objects use MuJoCo's 3-D ``grid`` flexcomp; round ones (cylinder, dome) use a
``direct`` flexcomp whose tetrahedra come from a Delaunay tetrahedralisation of a structured,
convex point set (rings and shells), which fills the convex hull with well-formed elements.
The rigid twin has the same outer shape, mass and colour as one rigid body with a free joint.

Run: ``python scripts/make_objects.py`` (then ``python scripts/calibrate_objects.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.spatial import Delaunay

from simroll.io import write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
CONTACT = 'condim="4" solref="0.005 1" solimp="0.99 0.999 0.0005" friction="1.5"'


@dataclass(frozen=True)
class ObjectDesign:
    name: str
    shape: str  # box | cylinder | dome
    size: tuple[
        float, ...
    ]  # box: half-extents xyz; cylinder: radius, half-height; dome: radius, height
    mass: float  # kg
    young: float  # Pa
    poisson: float
    damping: float
    rgba: tuple[float, float, float, float]
    description: str


DESIGNS = [
    ObjectDesign(
        "sponge",
        "box",
        (0.04, 0.04, 0.03),
        0.05,
        2.0e4,
        0.25,
        0.002,
        (0.95, 0.82, 0.25, 1),
        "kitchen sponge block, 8 x 8 x 6 cm, medium stiffness",
    ),
    ObjectDesign(
        "tofu",
        "box",
        (0.035, 0.035, 0.025),
        0.12,
        6.0e3,
        0.4,
        0.002,
        (0.96, 0.95, 0.88, 1),
        "tofu-like block, 7 x 7 x 5 cm, very soft and heavy",
    ),
    ObjectDesign(
        "foam_cylinder",
        "cylinder",
        (0.032, 0.04),
        0.06,
        3.0e4,
        0.3,
        0.002,
        (0.95, 0.5, 0.2, 1),
        "upright foam cylinder, 6.4 cm diameter, 8 cm tall, stiff",
    ),
    ObjectDesign(
        "dumpling",
        "dome",
        (0.036, 0.04),
        0.07,
        1.6e4,
        0.35,
        0.002,
        (0.93, 0.86, 0.74, 1),
        "dumpling-like dome, 7.2 cm across, 4 cm tall, flat base",
    ),
]


def _fmt(values) -> str:
    return " ".join(f"{v:.6g}" for v in np.asarray(values).ravel())


def cylinder_points(
    radius: float, half_height: float, rings: int = 8, layers: int = 4
) -> np.ndarray:
    points = []
    for z in np.linspace(-half_height, half_height, layers):
        points.append((0.0, 0.0, z))
        for k in range(rings):
            angle = 2 * math.pi * k / rings
            points.append((radius * math.cos(angle), radius * math.sin(angle), z))
    return np.array(points)


def dome_points(radius: float, height: float) -> np.ndarray:
    """Half-ellipsoid on a flat base (centred on its mid-height): rings at rising heights."""
    points = []
    for level, frac in enumerate((0.0, 0.45, 0.8)):
        z = frac * height
        ring_radius = radius * math.sqrt(max(0.0, 1.0 - frac**2))
        points.append((0.0, 0.0, z))
        for k in range(10):
            angle = 2 * math.pi * k / 10 + (math.pi / 10 if level % 2 else 0.0)
            points.append((ring_radius * math.cos(angle), ring_radius * math.sin(angle), z))
            if level == 0:
                points.append((0.5 * radius * math.cos(angle), 0.5 * radius * math.sin(angle), z))
    points.append((0.0, 0.0, height))
    return np.array(points) - np.array([0.0, 0.0, height / 2])


def tetrahedralise(points: np.ndarray) -> np.ndarray:
    tets = Delaunay(points).simplices
    keep = []
    for tet in tets:
        a, b, c, d = points[tet]
        volume = np.dot(np.cross(b - a, c - a), d - a) / 6.0
        if abs(volume) < 1e-9:
            continue  # sliver from co-spherical points
        keep.append(tet if volume > 0 else tet[[0, 2, 1, 3]])  # positive orientation
    return np.array(keep)


def soft_body(design: ObjectDesign) -> str:
    elasticity = (
        f'<elasticity young="{design.young:g}" poisson="{design.poisson:g}" '
        f'damping="{design.damping:g}"/>'
    )
    common = f'name="soft" dim="3" mass="{design.mass:g}" radius="0.001" rgba="{_fmt(design.rgba)}"'
    inner = (
        f'      <edge equality="false"/>\n      {elasticity}\n'
        f'      <contact {CONTACT} selfcollide="none" contype="1" conaffinity="3"/>\n'
    )
    if design.shape == "box":
        hx, hy, hz = design.size
        count = (4, 4, 3)
        spacing = (2 * hx / (count[0] - 1), 2 * hy / (count[1] - 1), 2 * hz / (count[2] - 1))
        flex = (
            f'    <flexcomp {common} type="grid" count="{_fmt(count)}" spacing="{_fmt(spacing)}" '
            f'pos="0 0 {hz:g}">\n{inner}    </flexcomp>'
        )
        height = 2 * hz
    else:
        if design.shape == "cylinder":
            radius, half_height = design.size
            points = cylinder_points(radius, half_height)
            height = 2 * half_height
        else:
            radius, height = design.size
            points = dome_points(radius, height)
        elements = tetrahedralise(points)
        flex = (
            f'    <flexcomp {common} type="direct" pos="0 0 {height / 2:g}"\n'
            f'              point="{_fmt(points)}"\n'
            f'              element="{" ".join(str(int(i)) for i in elements.ravel())}">\n'
            f"{inner}    </flexcomp>"
        )
    return (
        f'<mujoco model="{design.name}_soft">\n  <!-- {design.description}; generated by '
        f'scripts/make_objects.py -->\n  <worldbody>\n    <body name="object" pos="0 0 0">\n'
        f"{flex}\n    </body>\n  </worldbody>\n</mujoco>\n"
    ), height


def rigid_body(design: ObjectDesign) -> str:
    if design.shape == "box":
        geom = f'type="box" size="{_fmt(design.size)}"'
        half_height = design.size[2]
    elif design.shape == "cylinder":
        geom = f'type="cylinder" size="{_fmt(design.size)}"'
        half_height = design.size[1]
    else:  # the dome's twin: a convex mesh over the same points as the soft dome
        geom = 'type="mesh" mesh="object_shape"'
        half_height = design.size[1] / 2
    asset = ""
    if design.shape == "dome":
        points = dome_points(*design.size)
        asset = f'  <asset>\n    <mesh name="object_shape" vertex="{_fmt(points)}"/>\n  </asset>\n'
    return (
        f'<mujoco model="{design.name}_rigid">\n  <!-- rigid twin of {design.name}: same shape, '
        f"mass and colour; generated by scripts/make_objects.py -->\n{asset}  <worldbody>\n"
        f'    <body name="object" pos="0 0 {half_height:g}">\n      <freejoint name="object"/>\n'
        f'      <geom name="object" {geom} mass="{design.mass:g}" rgba="{_fmt(design.rgba)}" '
        f'{CONTACT} contype="1" conaffinity="3"/>\n    </body>\n  </worldbody>\n</mujoco>\n'
    )


def main() -> None:
    for design in DESIGNS:
        folder = ROOT / "assets" / "objects" / design.name
        folder.mkdir(parents=True, exist_ok=True)
        soft_xml, _ = soft_body(design)
        write_text_atomic(folder / "soft.xml", soft_xml)
        write_text_atomic(folder / "rigid.xml", rigid_body(design))
        print(f"wrote {folder.relative_to(ROOT)}/soft.xml and rigid.xml")


if __name__ == "__main__":
    main()
