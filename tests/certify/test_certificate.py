"""The Certificate: measured costs, the deployed policy, JSON / Markdown / plot."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from simroll.certify.care import run_fixed
from simroll.certify.certificate import PolicyCost, build_certificate, measure_cost
from simroll.certify.paired import ArraySource
from simroll.certify.settings import CareSettings, CertifyError
from simroll.rollout.runner import make_specs

from .test_paired import record

SPECS = make_specs("soft", ["SoftSqueeze"], ["foam_cylinder"], ["default"], 40)


def _certification():
    reference = np.ones(40, dtype=bool)
    broken = np.ones(40, dtype=bool)
    broken[::2] = False
    candidates = {"fast": np.ones(40, bool), "faster": np.ones(40, bool), "fastest": broken}
    settings = CareSettings(0.2, 0.1, "joint", method="bonferroni")
    return run_fixed(list(candidates), ArraySource(reference, candidates), settings, 40)


COSTS = {
    "ref": PolicyCost(40, 4000, 2e-3, 1.0),
    "fast": PolicyCost(40, 4000, 1e-3, 0.5),
    "faster": PolicyCost(40, 4000, 0.5e-3, 0.25),
    "fastest": PolicyCost(40, 4000, 0.1e-3, 0.1),
}


def test_fastest_certified_candidate_is_deployed_with_its_measured_speedup(tmp_path):
    certificate = build_certificate(
        _certification(),
        "ref",
        COSTS,
        "model_calls",
        SPECS,
        {
            "suite": "soft",
            "base_seed": 0,
            "tasks": ["SoftSqueeze"],
            "objects": ["foam_cylinder"],
            "variations": ["default"],
        },
        provenance={"git_sha": "abc"},
    )
    assert certificate.chosen == "faster" and not certificate.chosen_is_reference
    by_name = {c["name"]: c for c in certificate.candidates}
    assert by_name["faster"]["speedup"] == pytest.approx(4.0)
    assert by_name["faster"]["speedup_wall"] == pytest.approx(4.0)
    assert by_name["fastest"]["status"] == "not certified"
    assert certificate.rollouts["exhaustive"] == 160
    paths = certificate.write(tmp_path)
    data = json.loads(paths["json"].read_text())
    assert data["chosen"] == "faster" and data["settings"]["epsilon"] == 0.2
    assert [s["seed"] for s in data["calibration"]["specs"]] == [s.seed for s in SPECS]
    assert data["provenance"]["git_sha"] == "abc"
    markdown = paths["markdown"].read_text()
    assert "deploy `faster`" in markdown and "| `fastest` | not certified" in markdown
    assert paths["plot"].stat().st_size > 5000


def test_reference_is_deployed_when_nothing_is_certified_or_nothing_is_cheaper():
    reference = np.ones(40, dtype=bool)
    bad = {"a": np.zeros(40, bool)}
    settings = CareSettings(0.2, 0.1, "joint")
    none = run_fixed(["a"], ArraySource(reference, bad), settings, 40)
    costs = {"ref": COSTS["ref"], "a": COSTS["fast"]}
    certificate = build_certificate(none, "ref", costs, "model_calls", SPECS, {})
    assert certificate.chosen == "ref" and certificate.chosen_is_reference
    good = run_fixed(["a"], ArraySource(reference, {"a": reference}), settings, 40)
    slower = {"ref": COSTS["fast"], "a": COSTS["ref"]}
    certificate = build_certificate(good, "ref", slower, "wall", SPECS, {})
    assert certificate.chosen == "ref" and certificate.notes


def test_measured_cost_uses_recorded_network_evaluations_when_the_policy_counts_them():
    records = [record(s) for s in SPECS[:3]]  # 10 select_action calls, 10 steps, 10 ms each
    plain = measure_cost(records)
    assert plain.model_calls_per_step == 1.0 and plain.wall_s_per_step == pytest.approx(1e-3)
    counted = [dataclasses.replace(r, extra={"network_evaluations": 4}) for r in records]
    assert measure_cost(counted).model_calls_per_step == pytest.approx(0.4)
    assert math.isnan(measure_cost([]).wall_s_per_step)


def test_unknown_cost_measure_or_missing_reference_cost_is_an_error():
    with pytest.raises(CertifyError, match="cost must be one of"):
        build_certificate(_certification(), "ref", COSTS, "flops", SPECS, {})
    with pytest.raises(CertifyError, match="no measured cost for the reference"):
        build_certificate(_certification(), "nobody", COSTS, "wall", SPECS, {})
