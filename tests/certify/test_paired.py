"""Pairing records: same specs or a clear error; errored episodes; TSR vs DSR success."""

from __future__ import annotations

import dataclasses

import pytest

from simroll.certify.paired import pair_records
from simroll.certify.settings import CertifyError, PairingError
from simroll.rollout.records import EpisodeRecord, EpisodeSpec
from simroll.rollout.runner import make_specs


def record(spec: EpisodeSpec, success=True, peak=0.1, policy="p", error=None) -> EpisodeRecord:
    return EpisodeRecord(
        spec=spec,
        policy_id=policy,
        policy_config_hash="h",
        success=success,
        steps=10,
        sim_time=0.5,
        termination_reason="success" if success else "time_limit",
        peak_deformation=peak,
        tolerance=0.5,
        policy_calls=10,
        policy_compute_s=0.01,
        error=error,
    )


SPECS = make_specs("soft", ["SoftSqueeze"], ["foam_cylinder"], ["default"], 4)


def test_paired_records_give_outcomes_per_spec():
    reference = [record(s) for s in SPECS]
    candidate = [record(s, success=i != 2) for i, s in enumerate(reversed(SPECS))]
    specs, source = pair_records(reference, {"c": candidate})
    assert specs == SPECS
    assert source.candidate("c", range(4)) == {0: True, 1: False, 2: True, 3: True}


def test_dsr_success_counts_crushed_objects_as_failures():
    reference = [record(s) for s in SPECS]
    candidate = [record(s, peak=0.9 if i == 0 else 0.1) for i, s in enumerate(SPECS)]
    _, tsr = pair_records(reference, {"c": candidate}, "tsr")
    _, dsr = pair_records(reference, {"c": candidate}, "dsr")
    assert tsr.candidate("c", [0])[0] and not dsr.candidate("c", [0])[0]


def test_different_seeds_are_not_paired():
    reference = [record(s) for s in SPECS]
    shifted = [record(dataclasses.replace(s, seed=s.seed + 1)) for s in SPECS]
    with pytest.raises(PairingError, match=r"not paired.*differs in seed"):
        pair_records(reference, {"c": shifted})


def test_different_tasks_are_not_paired():
    reference = [record(s) for s in SPECS]
    other = make_specs("soft", ["SoftLift"], ["foam_cylinder"], ["default"], 4)
    with pytest.raises(PairingError, match=r"not paired.*task 'SoftSqueeze' vs 'SoftLift'"):
        pair_records(reference, {"c": [record(s) for s in other]})


def test_missing_or_duplicate_rollouts_are_not_paired():
    reference = [record(s) for s in SPECS]
    with pytest.raises(PairingError, match="no rollout of"):
        pair_records(reference, {"c": [record(s) for s in SPECS[:3]]})
    with pytest.raises(PairingError, match="two rollouts"):
        pair_records(reference, {"c": [record(s) for s in SPECS + SPECS[:1]]})


def test_errored_episode_and_no_candidates_are_clear_errors():
    reference = [record(s) for s in SPECS]
    broken = [
        record(s, error="RuntimeError: boom" if i == 1 else None) for i, s in enumerate(SPECS)
    ]
    with pytest.raises(CertifyError, match="raised and has no outcome.*boom"):
        pair_records(reference, {"c": broken})
    with pytest.raises(CertifyError, match="no candidates"):
        pair_records(reference, {})
