"""scripts/diagnose_clutter_grasps.py picks the student's failed grasps the reference solved."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location(
        "diagnose_clutter_grasps", ROOT / "scripts" / "diagnose_clutter_grasps.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(run, rows):
    run.mkdir(parents=True)
    (run / "records.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_failed_grasps_are_those_the_reference_retrieved(tmp_path):
    specs = [{"task": "ClutterRetrieveEasy", "object": "cube", "seed": s} for s in (1, 2, 3, 4)]
    student = [
        ("grasp_failed", False),
        ("grasp_failed", False),
        ("budget", False),
        ("success", True),
    ]
    reference = [True, False, True, True]
    _write(
        tmp_path / "s",
        [
            {"spec": spec, "termination_reason": reason, "success": ok}
            for spec, (reason, ok) in zip(specs, student, strict=True)
        ],
    )
    _write(
        tmp_path / "r",
        [{"spec": spec, "success": ok} for spec, ok in zip(specs, reference, strict=True)],
    )
    assert _module().failed_grasps(tmp_path, "s", "r") == [specs[0]]
    with pytest.raises(SystemExit, match="no records"):
        _module().failed_grasps(tmp_path, "s", "missing")
