"""Asset catalog: finds objects and scenes under ``assets/``, validates them, exposes calibration.

Each object lives in ``assets/objects/<name>/`` as ``soft.xml`` (a flexcomp body named
``object``), ``rigid.xml`` (its rigid twin, a free body named ``object``) and
``calibration.yaml`` (the deformation tolerance and how it was measured, written by
``scripts/calibrate_objects.py``). Malformed or missing files raise :class:`AssetError` naming
the file and what was expected.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml


class AssetError(ValueError):
    """An asset file is missing, malformed, or names something unknown."""


def assets_root() -> Path:
    """The ``assets/`` folder: beside the package in a source checkout or editable install."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_data" / "assets", here.parent / "assets"):
        if (candidate / "objects").is_dir():
            return candidate
    raise AssetError(f"cannot find simroll's assets/ folder near {here}")


@dataclass(frozen=True)
class Calibration:
    """Fixed, reproducible deformation tolerance of one object (percent, see envs.deformation)."""

    tolerance: float
    reference_peak: float
    safety_factor: float
    procedure: str
    raw: dict[str, Any]


@dataclass(frozen=True)
class ObjectAsset:
    name: str
    folder: Path

    @property
    def soft_xml(self) -> Path:
        return self.folder / "soft.xml"

    @property
    def rigid_xml(self) -> Path:
        return self.folder / "rigid.xml"

    @property
    def calibration_file(self) -> Path:
        return self.folder / "calibration.yaml"

    def body_element(self, rigid_twin: bool) -> ET.Element:
        """The parsed ``<body name="object">`` element of the soft object or its twin."""
        return _object_body(self.rigid_xml if rigid_twin else self.soft_xml)

    def asset_elements(self, rigid_twin: bool) -> list[ET.Element]:
        """Children of the file's ``<asset>`` section (meshes, materials), to merge into a scene."""
        return [
            ET.fromstring(text)
            for text in _asset_texts(self.rigid_xml if rigid_twin else self.soft_xml)
        ]

    def calibration(self) -> Calibration:
        return load_calibration(self.calibration_file)

    @property
    def yaw_symmetric(self) -> bool:
        """Whether turning the object about the vertical axis leaves its shape unchanged: its
        rigid twin's geoms are all unrotated cylinders, spheres or capsules (read from the XML,
        so a new object needs no entry in any list). Boxes and meshes are not."""
        geoms = list(self.body_element(rigid_twin=True).iter("geom"))
        return bool(geoms) and all(
            geom.get("type") in ("cylinder", "sphere", "capsule")
            and not any(geom.get(key) for key in ("euler", "quat", "axisangle", "xyaxes", "zaxis"))
            for geom in geoms
        )


def list_objects() -> list[str]:
    root = assets_root() / "objects"
    return sorted(p.name for p in root.iterdir() if (p / "soft.xml").is_file())


def get_object(name: str) -> ObjectAsset:
    names = list_objects()
    if name not in names:
        raise AssetError(f"unknown object {name!r}; expected one of {names}")
    return ObjectAsset(name, assets_root() / "objects" / name)


def scene_xml(name: str = "soft_table") -> Path:
    path = assets_root() / "scenes" / f"{name}.xml"
    if not path.is_file():
        raise AssetError(f"unknown scene {name!r}: {path} does not exist")
    return path


@cache
def _object_body_text(path: Path) -> str:
    if not path.is_file():
        raise AssetError(f"object file {path} is missing")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise AssetError(f"object file {path} is not valid XML: {exc}") from exc
    bodies = [b for b in root.iter("body") if b.get("name") == "object"]
    if root.tag != "mujoco" or len(bodies) != 1:
        raise AssetError(f'{path} must be a <mujoco> file with exactly one <body name="object">')
    return ET.tostring(bodies[0], encoding="unicode")


@cache
def _asset_texts(path: Path) -> tuple[str, ...]:
    _object_body_text(path)  # validates the file
    root = ET.parse(path).getroot()
    return tuple(
        ET.tostring(child, encoding="unicode")
        for section in root.findall("asset")
        for child in section
    )


def _object_body(path: Path) -> ET.Element:
    return ET.fromstring(_object_body_text(path))


def load_calibration(path: Path) -> Calibration:
    if not path.is_file():
        raise AssetError(
            f"calibration file {path} is missing; run `python scripts/calibrate_objects.py`"
        )
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise AssetError(f"calibration file {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise AssetError(f"calibration file {path} must hold a mapping, got {type(data).__name__}")
    try:
        tolerance = float(data["tolerance"])
        reference = float(data["reference_peak"])
        factor = float(data["safety_factor"])
    except (KeyError, TypeError, ValueError) as exc:
        raise AssetError(
            f"calibration file {path} needs numeric tolerance, reference_peak, safety_factor: {exc}"
        ) from exc
    if not (math.isfinite(tolerance) and tolerance > 0):
        raise AssetError(
            f"calibration file {path}: tolerance must be finite and > 0, got {tolerance}"
        )
    return Calibration(tolerance, reference, factor, str(data.get("procedure", "")), data)
