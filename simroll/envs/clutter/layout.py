"""Dense-clutter scene layouts from a seed: block shapes, their footprints, and the slide-in.

Every block is a prism standing on the table, so a layout is 2-D: each block is a shape (one or
more convex footprint polygons and a height) at a pose ``(x, y, yaw)``. A layout is made the way
TRACE's scenes are: the target is placed near the workspace centre, then each of the ten clutter
blocks starts far out on its own bearing and slides straight towards the target in 1 mm steps,
stopping at the last step whose gap to every block already placed is at least the tier's gap.
(Distance between polygons changes by at most 1 mm per 1 mm step, so whole runs of steps that
cannot reach the gap are taken at once; the stopping step is the one 1 mm stepping finds.)

The tier decides the gap and how many of the target's 16 **grasp corridors** must be blocked
(TRACE: easy 3.0 mm / 12, medium 1.5 mm / 14, hard 0.75 mm / 16). Corridor ``k`` is the strip
of a finger's width leaving the target's outline along bearing ``k * 22.5`` degrees, 4 cm long;
it is blocked when a clutter footprint overlaps it. A layout is kept only when the target is
also **not graspable** (no grasp yaw of :func:`grasp_clear` has both pad footprints free), so a
policy must push before it can grasp. Rejected draws are redrawn from the same generator, at most
``MAX_ATTEMPTS`` times; then :class:`InfeasibleSceneError` names the seed and tier.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache

import numpy as np

WORKSPACE_HALF = 0.224  # metres: the 0.448 m square workspace of TRACE's scenes
SLIDE_STEP = 0.001  # metres per slide-in step
START_RADIUS = 0.26  # metres from the target where every clutter block starts its slide
CLUTTER_BLOCKS = 10
CORRIDORS = 16
CORRIDOR_WIDTH = 0.024  # a finger pad's width plus a little
CORRIDOR_LENGTH = 0.04
GRASP_YAWS = 16  # grasp rotations over half a turn (the jaw is symmetric)
PAD_HALF = (0.015, 0.005)  # finger pad footprint half extents: along the jaw, across it
PAD_CLEARANCE = 0.006  # room a descending pad needs beside the target's outline
MAX_GRASP_WIDTH = 0.09  # the open jaw (13 cm) less the pads' clearance on both sides
MAX_ATTEMPTS = 200


class InfeasibleSceneError(RuntimeError):
    """No valid layout came from a seed within the attempt budget."""


@dataclass(frozen=True)
class Tier:
    name: str
    gap: float  # metres between neighbouring blocks after the slide-in
    min_blocked: int  # of CORRIDORS grasp corridors


TIERS = {
    "easy": Tier("easy", 0.003, 12),
    "medium": Tier("medium", 0.0015, 14),
    "hard": Tier("hard", 0.00075, 16),
}


def _box(hx: float, hy: float, cx: float = 0.0, cy: float = 0.0) -> np.ndarray:
    return np.array(
        [[cx - hx, cy - hy], [cx + hx, cy - hy], [cx + hx, cy + hy], [cx - hx, cy + hy]]
    )


def _regular(sides: int, circumradius: float, phase: float = 0.0) -> np.ndarray:
    angles = phase + 2 * math.pi * np.arange(sides) / sides
    return circumradius * np.stack([np.cos(angles), np.sin(angles)], axis=1)


@dataclass(frozen=True)
class Shape:
    """A prism: convex footprint parts (counter-clockwise, body frame) and a half height.

    ``kind`` is how the MJCF draws it: ``box`` parts, a ``cylinder`` (``radius``), or a convex
    ``mesh`` prism of the single footprint. A cylinder's footprint is the circumscribed 24-gon,
    so gaps measured on it are never larger than the true ones."""

    name: str
    kind: str
    parts: tuple[np.ndarray, ...]
    half_height: float
    radius: float = 0.0
    colour: str = "grey"

    @property
    def reach(self) -> float:
        """Radius of the footprint's bounding circle about the body origin."""
        return float(max(np.linalg.norm(p, axis=1).max() for p in self.parts))


def _cylinder(radius: float) -> np.ndarray:
    return _regular(24, radius / math.cos(math.pi / 24))


# The family: at least six shapes (TRACE uses six); every one may be clutter, the single-part ones
# may be the target.
SHAPES: dict[str, Shape] = {
    "cuboid": Shape("cuboid", "box", (_box(0.02, 0.015),), 0.02),
    "cube": Shape("cube", "box", (_box(0.0175, 0.0175),), 0.0175),
    "bar": Shape("bar", "box", (_box(0.035, 0.0125),), 0.015),
    "cylinder": Shape("cylinder", "cylinder", (_cylinder(0.018),), 0.02, radius=0.018),
    "triangular_prism": Shape("triangular_prism", "mesh", (_regular(3, 0.025),), 0.02),
    "hexagonal_prism": Shape("hexagonal_prism", "mesh", (_regular(6, 0.02),), 0.02),
    "l_shape": Shape(
        "l_shape", "box", (_box(0.03, 0.01, 0.0, -0.01), _box(0.01, 0.01, -0.02, 0.01)), 0.02
    ),
}
TARGET_SHAPES = ("cuboid", "cube", "cylinder", "hexagonal_prism")
# soft-suite objects that may be the target of the soft-target variant (a flexcomp target; its
# footprint is its rigid twin's): those whose twin is one upright box or cylinder
SOFT_TARGETS = ("sponge", "tofu")


@cache
def _twin_shape(name: str) -> Shape:
    """The footprint of soft object ``name``: its rigid twin's single upright box or cylinder
    (read from the asset, so footprint and MuJoCo body cannot disagree)."""
    from simroll.assets import get_object

    geoms = list(get_object(name).body_element(rigid_twin=True).iter("geom"))
    kind = geoms[0].get("type") if len(geoms) == 1 else None
    if kind not in ("box", "cylinder") or any(
        geoms[0].get(key) for key in ("pos", "euler", "quat", "axisangle", "xyaxes", "zaxis")
    ):
        raise ValueError(
            f"soft target {name!r} needs a rigid twin of one upright, centred box or cylinder"
        )
    size = [float(v) for v in geoms[0].get("size", "").split()]
    if kind == "box":
        return Shape(name, "box", (_box(size[0], size[1]),), size[2])
    return Shape(name, "cylinder", (_cylinder(size[0]),), size[1], radius=size[0])


def block_shape(name: str) -> Shape:
    """A block shape by name: clutter shapes and soft targets' footprints."""
    if name in SHAPES:
        return SHAPES[name]
    if name in SOFT_TARGETS:
        return _twin_shape(name)
    raise ValueError(
        f"unknown block shape {name!r}; expected one of {sorted(SHAPES)} or a soft target "
        f"of {SOFT_TARGETS}"
    )


def footprint(shape: Shape, pose: np.ndarray) -> list[np.ndarray]:
    """World footprint polygons of ``shape`` at ``pose = (x, y, yaw)``."""
    c, s = math.cos(pose[2]), math.sin(pose[2])
    rotation = np.array([[c, -s], [s, c]])
    return [part @ rotation.T + pose[:2] for part in shape.parts]


def _separated(a: np.ndarray, b: np.ndarray) -> bool:
    """Separating-axis test for two convex polygons (True when they do not overlap)."""
    for poly in (a, b):
        edges = np.roll(poly, -1, axis=0) - poly
        normals = np.stack([edges[:, 1], -edges[:, 0]], axis=1)
        pa, pb = a @ normals.T, b @ normals.T
        if np.any((pa.max(axis=0) < pb.min(axis=0)) | (pb.max(axis=0) < pa.min(axis=0))):
            return True
    return False


def _point_segment(points: np.ndarray, poly: np.ndarray) -> float:
    start, end = poly, np.roll(poly, -1, axis=0)
    edge = end - start
    rel = points[:, None, :] - start[None]
    t = np.clip((rel * edge).sum(-1) / (edge * edge).sum(-1), 0.0, 1.0)
    closest = start[None] + t[..., None] * edge[None]
    return float(np.linalg.norm(points[:, None, :] - closest, axis=-1).min())


def polygon_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Distance between two convex polygons; 0 when they overlap."""
    if not _separated(a, b):
        return 0.0
    return min(_point_segment(a, b), _point_segment(b, a))


def distance(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return min(polygon_distance(p, q) for p in a for q in b)


@dataclass
class Layout:
    """Shapes and poses of one scene; index 0 is the target."""

    shapes: list[Shape]
    poses: np.ndarray  # (n, 3): x, y, yaw
    tier: Tier
    attempts: int = 1
    blocked: list[bool] = field(default_factory=list)  # per grasp corridor

    @property
    def footprints(self) -> list[list[np.ndarray]]:
        return [footprint(s, p) for s, p in zip(self.shapes, self.poses, strict=True)]

    def min_gap(self) -> float:
        prints = self.footprints
        return min(
            distance(prints[i], prints[j])
            for i in range(len(prints))
            for j in range(i + 1, len(prints))
        )


def _extent(polys: list[np.ndarray], centre: np.ndarray, direction: np.ndarray) -> float:
    return float(max(((p - centre) @ direction).max() for p in polys))


def corridors_blocked(
    target: list[np.ndarray], centre: np.ndarray, others: list[list[np.ndarray]]
) -> list[bool]:
    """Which of the target's 16 grasp corridors a clutter footprint overlaps."""
    blocked = []
    for k in range(CORRIDORS):
        angle = 2 * math.pi * k / CORRIDORS
        u = np.array([math.cos(angle), math.sin(angle)])
        v = np.array([-u[1], u[0]])
        r0 = _extent(target, centre, u)
        strip = np.array(
            [
                centre + r0 * u - CORRIDOR_WIDTH / 2 * v,
                centre + (r0 + CORRIDOR_LENGTH) * u - CORRIDOR_WIDTH / 2 * v,
                centre + (r0 + CORRIDOR_LENGTH) * u + CORRIDOR_WIDTH / 2 * v,
                centre + r0 * u + CORRIDOR_WIDTH / 2 * v,
            ]
        )
        blocked.append(any(not _separated(strip, q) for other in others for q in other))
    return blocked


def pad_footprints(
    target: list[np.ndarray], centre: np.ndarray, yaw: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """Where the two pads would descend for a grasp at hand ``yaw`` centred on ``centre``
    (None when the target is too wide across the jaw for that yaw)."""
    along = np.array([math.cos(yaw), math.sin(yaw)])  # the pads' length
    across = np.array([-along[1], along[0]])  # the closing axis (hand y)
    high, low = _extent(target, centre, across), _extent(target, centre, -across)
    if high + low > MAX_GRASP_WIDTH:
        return None
    pads = []
    for side, reach in ((1.0, high), (-1.0, low)):
        middle = centre + side * (reach + PAD_CLEARANCE + PAD_HALF[1]) * across
        pads.append(
            np.array(
                [
                    middle + sx * PAD_HALF[0] * along + sy * PAD_HALF[1] * across
                    for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))
                ]
            )
        )
    return pads[0], pads[1]


def grasp_opening(target: list[np.ndarray], centre: np.ndarray, yaw: float) -> float:
    """Jaw opening (between the pads) that :func:`pad_footprints` assumes at ``yaw``."""
    across = np.array([-math.sin(yaw), math.cos(yaw)])
    width = _extent(target, centre, across) + _extent(target, centre, -across)
    return width + 2 * PAD_CLEARANCE


def grasp_clear(
    target: list[np.ndarray], centre: np.ndarray, others: list[list[np.ndarray]]
) -> list[float]:
    """Hand yaws (of ``GRASP_YAWS`` over half a turn) at which both pads can descend beside the
    target without touching a clutter footprint."""
    clear = []
    for k in range(GRASP_YAWS):
        yaw = math.pi * k / GRASP_YAWS
        pads = pad_footprints(target, centre, yaw)
        if pads is None:
            continue
        if all(_separated(pad, q) for pad in pads for other in others for q in other):
            clear.append(yaw)
    return clear


def grasp_blockage(
    target: list[np.ndarray], centre: np.ndarray, others: list[list[np.ndarray]]
) -> float:
    """How far the target is from a clear grasp: over the ``GRASP_YAWS`` grasp yaws, the least
    total area (m^2) by which the two descending pads would overlap clutter footprints; 0 when a
    grasp's pads overlap nothing (:func:`grasp_clear` then decides touching), inf when the
    target is too wide for every yaw."""
    import cv2

    best = math.inf
    for k in range(GRASP_YAWS):
        pads = pad_footprints(target, centre, math.pi * k / GRASP_YAWS)
        if pads is None:
            continue
        area = 0.0
        for pad in pads:
            for other in others:
                for part in other:
                    if not _separated(pad, part):
                        area += cv2.intersectConvexConvex(
                            pad.astype(np.float32), part.astype(np.float32)
                        )[0]
        best = min(best, area)
    return best


def _slide(
    shape: Shape, pose: np.ndarray, goal: np.ndarray, placed: list[list[np.ndarray]], gap: float
) -> np.ndarray:
    """Slide ``shape`` from ``pose`` towards ``goal`` in SLIDE_STEP steps; the last pose whose
    distance to every placed footprint is >= gap (the first step that would go below stops)."""
    direction = goal - pose[:2]
    length = float(np.linalg.norm(direction))
    direction = direction / length
    steps = 0
    max_steps = int(length / SLIDE_STEP)
    while steps < max_steps:
        candidate = pose.copy()
        candidate[:2] += direction * SLIDE_STEP * (steps + 1)
        prints = footprint(shape, candidate)
        room = min(distance(prints, other) for other in placed) - gap
        if room < 0:
            break
        # every step up to floor(room / step) more keeps the gap (1-Lipschitz distance)
        steps += 1 + int(math.floor(room / SLIDE_STEP + 1e-9))
        steps = min(steps, max_steps)
    final = pose.copy()
    final[:2] += direction * SLIDE_STEP * steps
    # the jump may overshoot by rounding; walk back until the gap holds
    while steps > 0 and min(distance(footprint(shape, final), o) for o in placed) < gap:
        steps -= 1
        final[:2] -= direction * SLIDE_STEP
    return final


def generate_layout(
    rng: np.random.Generator, target_shape: str = "cuboid", tier: str = "medium"
) -> Layout:
    """A valid layout for ``tier`` drawn from ``rng`` (see the module doc)."""
    if target_shape not in TARGET_SHAPES + SOFT_TARGETS:
        raise ValueError(
            f"target shape must be one of {TARGET_SHAPES + SOFT_TARGETS}, got {target_shape!r}"
        )
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {sorted(TIERS)}, got {tier!r}")
    spec = TIERS[tier]
    clutter_names = sorted(SHAPES)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        layout = _draw(rng, block_shape(target_shape), clutter_names, spec)
        if layout is None:
            continue
        prints = layout.footprints
        centre = layout.poses[0, :2]
        blocked = corridors_blocked(prints[0], centre, prints[1:])
        if sum(blocked) < spec.min_blocked:
            continue
        if grasp_clear(prints[0], centre, prints[1:]):
            continue
        layout.attempts, layout.blocked = attempt, blocked
        return layout
    raise InfeasibleSceneError(
        f"no {tier} layout with a {target_shape} target in {MAX_ATTEMPTS} draws (each needs "
        f">= {spec.min_blocked} of {CORRIDORS} corridors blocked and no clear grasp)"
    )


def _draw(
    rng: np.random.Generator, target: Shape, clutter_names: list[str], tier: Tier
) -> Layout | None:
    shapes = [target]
    poses = [
        np.array([rng.uniform(-0.03, 0.03), rng.uniform(-0.03, 0.03), rng.uniform(-np.pi, np.pi)])
    ]
    placed = [footprint(target, poses[0])]
    offset = rng.uniform(0, 2 * np.pi)
    for i in range(CLUTTER_BLOCKS):
        shape = SHAPES[clutter_names[rng.integers(len(clutter_names))]]
        bearing = offset + 2 * np.pi * i / CLUTTER_BLOCKS + rng.uniform(-0.25, 0.25)
        start = poses[0][:2] + START_RADIUS * np.array([math.cos(bearing), math.sin(bearing)])
        # aim a little off the target's centre so blocks pack around it, not only head-on
        aim = poses[0][:2] + rng.uniform(-0.015, 0.015, size=2)
        pose = np.array([start[0], start[1], rng.uniform(-np.pi, np.pi)])
        final = _slide(shape, pose, aim, placed, tier.gap)
        prints = footprint(shape, final)
        if max(np.abs(p).max() for p in prints) > WORKSPACE_HALF:
            return None  # it never met the cluster inside the workspace
        shapes.append(shape)
        poses.append(final)
        placed.append(prints)
    return Layout(shapes, np.array(poses), tier)
