"""Resumable runs: a killed evaluation resumes to the same report as an uninterrupted one; a dead
worker is charged only for its own episode and makes the run exit non-zero; Ctrl-C stops at once;
a resume reads the store once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simroll.rollout.backends import EpisodeJob
from simroll.rollout.episode import EnvConfig
from simroll.rollout.runner import evaluate, make_specs
from simroll.rollout.store import RecordStore
from tests.rollout.test_episode import gentle_expert, outcome
from tests.rollout.test_records import make_record

ARGS = [
    "env=soft_lift",
    "env.objects=[sponge,foam_cylinder]",
    "episodes=2",
    "video.episodes=0",
    "progress=false",
]


def simroll_eval(out: Path, *extra: str, args: list[str] = ARGS) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "simroll.cli.main", "eval", f"output_dir={out}", *args, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def scores(run_dir: Path) -> list[dict]:
    groups = json.loads((run_dir / "summary.json").read_text())["groups"]
    for group in groups:
        group.pop("compute_per_call_s")
    return groups


@pytest.mark.slow  # ~25 s; scripts/fault_drill.py and the Ctrl-C test cover kill-and-resume too
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


@pytest.mark.slow
def test_eval_with_a_dying_worker_charges_only_its_episodes_and_exits_non_zero(tmp_path):
    """The issue's reproduction: a policy that kills its worker on one object only."""
    run_dir = tmp_path / "run"
    dying = [
        "backend=vector",
        "policy._target_=tests.rollout.test_backends.DiesOnOneObject",
        "~policy.closure",
    ]
    # With the default two videos, chosen before the run (one per group: sponge/0 and
    # foam_cylinder/0), filmed in the workers as they run: the episode in error gets none.
    with_videos = [arg for arg in ARGS if not arg.startswith("video.")]
    process = simroll_eval(run_dir, *dying, args=with_videos)
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 1, output
    assert "ERROR: 2 of 4 episodes ended in error" in output.strip().splitlines()[-1]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["errors"] == 2
    assert {e["key"].split("/")[2] for e in summary["errored_episodes"]} == {"foam_cylinder"}
    assert "**Episodes in error:** 2 of 4" in (run_dir / "summary.md").read_text()
    assert "2 raised" in (run_dir / "report.html").read_text()
    videos = [path.name for path in (run_dir / "videos").glob("*.mp4")]
    assert len(videos) == 1 and videos[0].startswith("soft_SoftLift_sponge_default_0_"), videos
    assert summary["episodes_run"] == 6  # 2 sponge episodes, 2 foam_cylinder ones tried twice
    records = RecordStore(run_dir).load().records.values()
    assert sorted((r.spec.object, r.error is None, r.extra["attempt"]) for r in records) == [
        ("foam_cylinder", False, 2),
        ("foam_cylinder", False, 2),
        ("sponge", True, 1),
        ("sponge", True, 1),
    ]
    lines = (run_dir / "records.jsonl").read_text()
    # A resume charges nothing again; with record=true the dataset, like the videos, holds only
    # the episodes that did not end in error. They were stored without a dataset shard, so they
    # run once more to be recorded: said, and counted, but not stored again.
    resumed = simroll_eval(run_dir, *dying, "record=true", args=with_videos)
    output, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 1, output
    assert (run_dir / "records.jsonl").read_text() == lines
    assert "2 finished episode(s) have no dataset shard yet" in output, output
    assert "(2 episodes" in output and "2 episodes in error left out" in output, output
    assert json.loads((run_dir / "summary.json").read_text())["episodes_run"] == 2


def test_ctrl_c_stops_a_vector_eval_at_once_and_leaves_a_valid_store(tmp_path):
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simroll.cli.main",
            "eval",
            f"output_dir={run_dir}",
            *ARGS[:2],
            "episodes=40",  # 80 episodes: most of them still queued when Ctrl-C comes
            *ARGS[3:],
            "backend=vector",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        # a test run in the background inherits an ignored SIGINT; the CLI must see a real one
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    records = run_dir / "records.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline:
        if records.exists() and len(records.read_bytes().splitlines()) >= 2:
            break
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    start = time.perf_counter()
    lines = []
    for line in process.stdout:  # the CLI's message comes once evaluate has returned
        lines.append(line)
        if "interrupted" in line:
            break
    stopped_s = time.perf_counter() - start
    output = "".join(lines) + process.communicate(timeout=30)[0]  # then the interpreter exits
    assert stopped_s < 5.0, f"took {stopped_s:.1f} s to stop\n{output}"
    assert process.returncode != 0
    contents = RecordStore(run_dir).load()
    assert contents.ok, contents.summary()
    assert 2 <= len(contents.records) < 80
    assert all(r.error is None for r in contents.records.values())
    deadline = time.time() + 5  # the workers and the forkserver are gone too
    while time.time() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("processes of the interrupted eval are still running")


class _FirstEpisodeStarted(BaseException):
    """Stops ``evaluate`` when its first episode builds its policy (not an episode error)."""


def _stop_at_first_episode(env):
    raise _FirstEpisodeStarted


def test_resume_reads_the_store_once_however_many_specs_are_pending(tmp_path, monkeypatch):
    specs = make_specs("soft", ["SoftLift"], ["sponge"], ["default"], episodes=300)
    store = RecordStore(tmp_path)
    store.path.write_text(
        "".join(
            make_record(spec=spec, extra={"attempt": 1}).to_json() + "\n" for spec in specs[:200]
        )
    )
    loads = []
    real_load = RecordStore.load
    monkeypatch.setattr(RecordStore, "load", lambda self: loads.append(1) or real_load(self))
    job = EpisodeJob(_stop_at_first_episode, EnvConfig(), "stop", "hash")
    with pytest.raises(_FirstEpisodeStarted):
        evaluate(tmp_path, specs, job, progress=False)
    assert len(loads) == 1  # the old engine read it once per pending spec: 101 times
