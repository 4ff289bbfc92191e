"""``simroll certify --config-name certify_diffusion`` end to end: CARE on the shipped diffusion
policy's acceleration configs (fewer denoising steps, longer executed chunks), small and loose so
that it runs in CI; costs are the engine-recorded network evaluations, not wall time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.certify.test_certify_cli import simroll

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # ~1 min: diffusion rollouts of the reference and four candidates
# candidate -> (denoising steps, actions executed per chunk); None: the shipped checkpoint's chunk
CANDIDATES = {
    "denoise_5": (5, None),
    "denoise_5_chunk_2": (5, 2),
    "denoise_5_chunk_5": (5, 5),
    "denoise_2_chunk_5": (2, 5),
}


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
    assert set(by_name) == set(CANDIDATES)
    # the shipped checkpoint: `steps` denoising steps per `chunk` executed actions
    shipped = json.loads((ROOT / "policies" / "diffusion_soft_lift" / "config.json").read_text())
    steps, chunk = shipped["num_inference_steps"], shipped["n_action_steps"]
    assert reference == pytest.approx(steps / chunk, rel=0.15)
    for name, (candidate_steps, candidate_chunk) in CANDIDATES.items():
        per_step = candidate_steps / (candidate_chunk or chunk)
        assert by_name[name]["speedup_model_calls"] == pytest.approx(
            (steps / chunk) / per_step, rel=0.2
        ), name


def test_candidates_ran_the_same_specs_and_the_reference_only_where_needed(certified):
    """Joint risk, fixed design: every candidate runs every calibration spec; the reference runs
    the specs on which some candidate failed (elsewhere no loss is possible), plus the first
    ``reference_cost_episodes`` (2) specs when it had run fewer, to measure its cost. Which specs
    fail depends on the policy's outcomes, which may differ between CPUs (float kernels)."""
    out, certificate = certified
    rows = {}
    for name in ("diffusion", *CANDIDATES):
        lines = (out / name / "records.jsonl").read_text().splitlines()
        rows[name] = {row["spec"]["index"]: row for row in map(json.loads, lines)}
    assert all(set(rows[name]) == {0, 1, 2, 3} for name in CANDIDATES)
    for index, row in rows["diffusion"].items():
        assert row["spec"]["seed"] == rows["denoise_5_chunk_5"][index]["spec"]["seed"]
    failed_somewhere = {
        index for name in CANDIDATES for index, row in rows[name].items() if not row["success"]
    }
    expected = failed_somewhere | ({0, 1} if len(failed_somewhere) < 2 else set())
    assert set(rows["diffusion"]) == expected
    assert certificate["rollouts"]["per_policy"]["reference"] == len(expected)
    assert certificate["chosen"] in ("diffusion", *CANDIDATES)
