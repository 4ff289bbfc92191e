"""``simroll certify --config-name certify_diffusion`` end to end: CARE on the shipped diffusion
policy's acceleration configs (fewer denoising steps, longer executed chunks), small and loose so
that it runs in CI; costs are the engine-recorded network evaluations, not wall time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.certify.test_certify_cli import simroll

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # ~45 s: diffusion rollouts of the reference and two candidates


@pytest.fixture(scope="module")
def certified(tmp_path_factory):
    out = tmp_path_factory.mktemp("certify") / "diffusion"
    result = simroll(
        "certify",
        "--config-name",
        "certify_diffusion",
        f"output_dir={out}",
        "design=fixed",
        "method=bonferroni",  # every candidate is tested (fixed-sequence stops at a failure)
        "risk=joint",  # candidates run on every spec, whatever the reference did
        "episodes=4",
        "epsilon=0.6",
        "delta=0.2",
        "~policy@candidates.denoise_5",
        "~accel@candidates.denoise_5",
        "~policy@candidates.denoise_5_chunk_2",
        "~accel@candidates.denoise_5_chunk_2",
        "env.objects=[sponge]",
        "progress=false",
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out, json.loads((out / "certificate.json").read_text())


def test_candidates_cost_fewer_network_evaluations_per_step_than_the_reference(certified):
    _, certificate = certified
    reference = certificate["reference"]["cost"]["model_calls_per_step"]
    by_name = {c["name"]: c for c in certificate["candidates"]}
    assert set(by_name) == {"denoise_5_chunk_5", "denoise_2_chunk_5"}
    # the shipped checkpoint's own chunk: reference `steps` denoising steps per `chunk` actions;
    # denoise_5 + chunk_5: 5 per 5 actions; denoise_2 + chunk_5: 2 per 5
    shipped = json.loads((ROOT / "policies" / "diffusion_soft_lift" / "config.json").read_text())
    steps, chunk = shipped["num_inference_steps"], shipped["n_action_steps"]
    assert reference == pytest.approx(steps / chunk, rel=0.15)
    assert by_name["denoise_5_chunk_5"]["speedup_model_calls"] == pytest.approx(
        (steps / chunk) / (5 / 5), rel=0.2
    )
    assert by_name["denoise_2_chunk_5"]["speedup_model_calls"] == pytest.approx(
        (steps / chunk) / (2 / 5), rel=0.2
    )


def test_candidates_ran_the_same_specs_and_the_reference_only_where_needed(certified):
    """Joint risk, fixed design: every candidate runs every calibration spec; the reference runs
    the specs on which some candidate failed (elsewhere no loss is possible), plus the first
    ``reference_cost_episodes`` (2) specs when it had run fewer, to measure its cost. Which specs
    fail depends on the policy's outcomes, which may differ between CPUs (float kernels)."""
    out, certificate = certified
    rows = {}
    for name in ("diffusion", "denoise_5_chunk_5", "denoise_2_chunk_5"):
        lines = (out / name / "records.jsonl").read_text().splitlines()
        rows[name] = {row["spec"]["index"]: row for row in map(json.loads, lines)}
    assert set(rows["denoise_5_chunk_5"]) == set(rows["denoise_2_chunk_5"]) == {0, 1, 2, 3}
    for index, row in rows["diffusion"].items():
        assert row["spec"]["seed"] == rows["denoise_5_chunk_5"][index]["spec"]["seed"]
    failed_somewhere = {
        index
        for name in ("denoise_5_chunk_5", "denoise_2_chunk_5")
        for index, row in rows[name].items()
        if not row["success"]
    }
    expected = failed_somewhere | ({0, 1} if len(failed_somewhere) < 2 else set())
    assert set(rows["diffusion"]) == expected
    assert certificate["rollouts"]["per_policy"]["reference"] == len(expected)
    assert certificate["chosen"] in ("diffusion", "denoise_5_chunk_5", "denoise_2_chunk_5")
