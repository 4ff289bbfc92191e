"""Hydra multiruns (``-m``): every job of ``eval``, ``collect``, ``train`` and ``certify`` writes
to its own ``<output_dir>/<job number>``, never into a directory another job writes to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simroll.rollout.manifest import read_expected_specs, read_manifest
from simroll.rollout.store import RecordStore
from tests import helpers


def simroll(*args: str, timeout: int = 600):
    return helpers.simroll(*args, timeout=timeout)


def job_dirs(root: Path) -> list[Path]:
    return sorted(path for path in root.iterdir() if path.is_dir())


def test_eval_multirun_jobs_get_their_own_directories_and_records(tmp_path):
    out = tmp_path / "sweep"
    result = simroll(
        "eval",
        "-m",
        "env=soft_lift",
        "env.objects=[sponge]",
        "episodes=1",
        "seed=0,1",
        "video.episodes=0",
        "progress=false",
        f"output_dir={out}",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert [path.name for path in job_dirs(out)] == ["0", "1"]
    seeds = []
    for job in job_dirs(out):
        records = list(RecordStore(job).load().records.values())
        assert len(records) == 1  # one seed's episode each, never both in one store
        assert read_manifest(job).fingerprint["seed"] == int(job.name)
        assert [s.key for s in read_expected_specs(job)] == [records[0].spec.key]
        assert json.loads((job / "summary.json").read_text())["episodes"] == 1
        seeds.append(records[0].spec.seed)
    assert seeds[0] != seeds[1]


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("collect") / "demos"
    result = simroll(
        "collect",
        "-m",
        "env=soft_lift",
        "env.objects=[sponge]",
        "env.obs_mode=state",
        "episodes=1",
        "seed=1000,1001",
        "only_success=false",
        "use_videos=false",
        "tactile_image=false",
        "progress=false",
        f"output_dir={out}",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out


@pytest.mark.slow  # collect and train multiruns: ~30 s together
def test_collect_multirun_jobs_write_separate_datasets(collected):
    jobs = job_dirs(collected)
    assert [path.name for path in jobs] == ["0", "1"]
    seeds = []
    for job in jobs:
        assert (job / "meta/info.json").exists() and (job / "meta/simroll_collect.yaml").exists()
        assert not (job / ".collect" / "shards").exists()  # merged, moved into place, removed
        rows = [json.loads(line) for line in (job / "meta/simroll_episodes.jsonl").open()]
        assert len(rows) == 1
        seeds.append(rows[0]["spec"]["seed"])
        assert read_manifest(job).command == "collect"
    assert seeds[0] != seeds[1]


@pytest.mark.slow
def test_train_multirun_jobs_write_separate_checkpoints(collected, tmp_path):
    out = tmp_path / "train"
    result = simroll(
        "train",
        "-m",
        "policy=act",
        f"dataset={collected / '0'}",
        "steps=2",
        "batch_size=2",
        "log_every=1",
        "checkpoint_every=2",
        "seed=0,1",
        "progress=false",
        f"output_dir={out}",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    jobs = job_dirs(out)
    assert [path.name for path in jobs] == ["0", "1"]
    for job in jobs:
        assert (job / "checkpoints" / "last").is_dir()
        assert (job / "metrics.json").exists()
    for job in jobs:
        assert f"seed={job.name}" in (job / ".hydra" / "overrides.yaml").read_text()


def test_certify_multirun_jobs_write_separate_certifications(tmp_path):
    out = tmp_path / "certify"
    result = simroll(
        "certify",
        "-m",
        "design=fixed",
        "episodes=1",
        "epsilon=0.9",
        "delta=0.5",
        "~policy@candidates.expert_replan1_5",
        "~policy@candidates.expert_replan2_5",
        "~policy@candidates.expert_replan3",
        "reference_cost_episodes=0",
        "seed=0,1",
        "progress=false",
        f"output_dir={out}",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    jobs = job_dirs(out)
    assert [path.name for path in jobs] == ["0", "1"]
    seeds = []
    for job in jobs:
        certificate = json.loads((job / "certificate.json").read_text())
        assert certificate["calibration"]["base_seed"] == int(job.name)
        for policy in ("expert", "expert_replan2"):
            records = RecordStore(job / policy).load().records
            assert len(records) == 1
        seeds.append(next(iter(records.values())).spec.seed)
    assert seeds[0] != seeds[1]
