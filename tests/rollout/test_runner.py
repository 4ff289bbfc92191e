"""Resumable runs: a killed evaluation resumes to the same report as an uninterrupted one."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from simroll.rollout.backends import EpisodeJob
from simroll.rollout.episode import EnvConfig
from simroll.rollout.runner import evaluate, make_specs
from simroll.rollout.store import RecordStore
from tests.rollout.test_episode import gentle_expert, outcome

ARGS = [
    "env=soft_lift",
    "env.objects=[sponge,foam_cylinder]",
    "episodes=2",
    "video.episodes=0",
    "progress=false",
]


def simroll_eval(out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "simroll.cli.main", "eval", f"output_dir={out}", *ARGS, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def scores(run_dir: Path) -> list[dict]:
    groups = json.loads((run_dir / "summary.json").read_text())["groups"]
    for group in groups:
        group.pop("compute_per_call_s")
    return groups


def test_killed_run_resumes_to_the_same_report(tmp_path):
    full, killed = tmp_path / "full", tmp_path / "killed"
    assert simroll_eval(full).wait(timeout=300) == 0
    process = simroll_eval(killed)
    records = killed / "records.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline:
        if records.exists() and len(records.read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    written = len(records.read_text().splitlines())
    assert 2 <= written < 4, "the run should have been killed part-way"
    resumed = simroll_eval(killed)
    output, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, output
    assert len(records.read_text().splitlines()) == 4  # nothing re-run, nothing double-counted
    assert scores(killed) == scores(full)
    a = {k: outcome(r) for k, r in RecordStore(full).load().records.items()}
    b = {k: outcome(r) for k, r in RecordStore(killed).load().records.items()}
    assert a == b


def test_evaluate_skips_finished_specs(tmp_path):
    specs = make_specs("soft", ["SoftSqueeze"], ["foam_cylinder"], ["default"], episodes=2)
    job = EpisodeJob(gentle_expert, EnvConfig(), "expert/gentle", "hash")
    first = evaluate(tmp_path, specs[:1], job, progress=False)
    both = evaluate(tmp_path, specs, job, progress=False)
    assert len(first) == 1 and len(both) == 2
    assert outcome(both[0]) == outcome(first[0]) and both[0].receipt == first[0].receipt
    assert len((tmp_path / "records.jsonl").read_text().splitlines()) == 2
