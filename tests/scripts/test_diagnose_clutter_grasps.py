"""scripts/diagnose_clutter_grasps.py picks the student's failed grasps the reference solved."""

from __future__ import annotations

import pytest

from tests.helpers import load_script


def _module():
    return load_script("diagnose_clutter_grasps")


def _write(run, rows):
    """Records of (spec, termination reason, success) through the project's record store."""
    from simroll.rollout.records import EpisodeRecord
    from simroll.rollout.store import RecordStore

    store = RecordStore(run)
    for spec, reason, success in rows:
        store.append(
            EpisodeRecord(
                spec=spec,
                policy_id=run.name,
                policy_config_hash="abc",
                success=success,
                steps=3,
                sim_time=8.0,
                termination_reason=reason,
                peak_deformation=0.0,
                tolerance=1.0,
            )
        )


def test_failed_grasps_are_those_the_reference_retrieved(tmp_path):
    from simroll.rollout.records import EpisodeSpec

    specs = [
        EpisodeSpec(task="ClutterRetrieveEasy", object="cube", seed=s, index=s, suite="clutter")
        for s in (1, 2, 3, 4)
    ]
    student = [
        ("grasp_failed", False),
        ("grasp_failed", False),
        ("budget", False),
        ("success", True),
    ]
    reference = [True, False, True, True]
    _write(tmp_path / "s", [(spec, *row) for spec, row in zip(specs, student, strict=True)])
    _write(
        tmp_path / "r",
        [
            (spec, "success" if ok else "grasp_failed", ok)
            for spec, ok in zip(specs, reference, strict=True)
        ],
    )
    assert _module().failed_grasps(tmp_path, "s", "r") == [specs[0]]
    with pytest.raises(SystemExit, match="no records"):
        _module().failed_grasps(tmp_path, "s", "missing")
