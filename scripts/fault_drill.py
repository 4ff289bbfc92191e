"""Fault drill for the evaluation engine; writes benchmarks/results/faults.json.

Runs the same ``simroll eval`` twice on the ``vector`` backend (gentle scripted expert, SoftLift
on the four soft objects, state observations, 50 episodes each: 200 episodes): once undisturbed
(the reference) and once under fire. During the second run, at random points (a random number of
records written, seeded by ``--seed``), it SIGKILLs one worker process three times (a worker is a
child of the forkserver, itself a child of the eval process) and the whole process group three
times (as a machine losing power would), re-running the same command after each group kill
until the run completes. It then compares the drilled run's ``records.jsonl`` with the
reference's, per spec key: records lost, duplicated (more than one finished record for a key),
outcomes that differ (success, steps, termination, peak deformation, error or not), receipts that
differ (the receipt covers the outcome only, so a retried episode still matches), episodes still
in error, and how many attempts the worker kills charged. A last re-run checks that resuming a
complete run appends nothing.

``--family clutter`` drills the plan-conditioned clutter family instead: nominal replay on
ClutterRetrieveMedium over its four target shapes (twin, plan and primitives run inside the
workers), writing ``benchmarks/results/faults_clutter.json``.

Run: ``python scripts/fault_drill.py`` (about 4 minutes on 2 cores); ``--episodes 5 --out
/tmp/smoke.json`` for a 20-episode smoke run; ``--keep DIR`` keeps both run directories and the
eval output (``drill.log``) for inspection.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from simroll.io import write_json_atomic  # noqa: E402
from simroll.rollout.records import EpisodeRecord  # noqa: E402
from simroll.rollout.store import RecordStore, attempt_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "faults.json"
OBJECTS = ("sponge", "tofu", "foam_cylinder", "dumpling")
CLUTTER_TARGETS = ("cuboid", "cube", "cylinder", "hexagonal_prism")
# what each family's drill evaluates (four objects each, state observations)
FAMILIES = {
    "soft": ["env=soft_lift", f"env.objects=[{','.join(OBJECTS)}]", "policy=expert"],
    "clutter": [
        "env=clutter",
        "env.tasks=[ClutterRetrieveMedium]",
        f"env.objects=[{','.join(CLUTTER_TARGETS)}]",
        "policy=clutter_replay",
    ],
}
FAULTS = ("worker",) * 3 + ("group",) * 3
POLL_S = 0.05


def eval_command(run_dir: Path, episodes: int, family: str = "soft") -> list[str]:
    return [
        sys.executable,
        "-m",
        "simroll.cli.main",
        "eval",
        f"output_dir={run_dir}",
        *FAMILIES[family],
        "env.obs_mode=state",
        f"episodes={episodes}",
        "backend=vector",
        "backend.workers=2",
        "video.episodes=0",
        "progress=false",
    ]


def start_eval(run_dir: Path, episodes: int, log, family: str) -> subprocess.Popen:
    # Its own session and process group, so that the group can be killed as a whole.
    return subprocess.Popen(
        eval_command(run_dir, episodes, family),
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def line_count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _parent_pids() -> dict[int, int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # exited while we looked
            continue
        # The command name (field 2) may hold spaces; the fields after its ')' are plain.
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def worker_pids(eval_pid: int) -> list[int]:
    """The eval's episode workers: the grandchildren of the eval process (forkserver children)."""
    parents = _parent_pids()
    children = {pid for pid, parent in parents.items() if parent == eval_pid}
    return sorted(pid for pid, parent in parents.items() if parent in children)


def wait_for_group_gone(pgid: int, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(POLL_S)
    return False


def reference_run(run_dir: Path, episodes: int, log, family: str) -> dict:
    start = time.perf_counter()
    process = start_eval(run_dir, episodes, log, family)
    code = process.wait()
    return {"exit_code": code, "seconds": time.perf_counter() - start}


def drilled_run(
    run_dir: Path, episodes: int, total: int, rng: random.Random, log, family: str
) -> dict:
    """Run to completion while applying the faults at random record counts."""
    kinds = list(FAULTS)
    rng.shuffle(kinds)
    # Faults at distinct record counts spread over the run (not in its last few episodes, so
    # that the run is still going when they come).
    points = sorted(rng.sample(range(max(2, total // 50), max(total - total // 20, 8)), len(kinds)))
    schedule = list(zip(points, kinds, strict=True))
    records = run_dir / "records.jsonl"
    faults, exit_codes, starts = [], [], 0
    start = time.perf_counter()
    process = start_eval(run_dir, episodes, log, family)
    starts += 1
    while True:
        code = process.poll()
        if code is not None:  # finished (or failed: the comparison will tell)
            exit_codes.append(code)
            break
        if schedule and line_count(records) >= schedule[0][0]:
            at, kind = schedule.pop(0)
            fault = {"kind": kind, "at_lines": line_count(records), "scheduled_at_lines": at}
            fault["at_s"] = round(time.perf_counter() - start, 2)
            if kind == "worker":
                pids = worker_pids(process.pid)
                while not pids and process.poll() is None:  # between worker generations
                    time.sleep(POLL_S)
                    pids = worker_pids(process.pid)
                if pids:
                    victim = rng.choice(pids)
                    os.kill(victim, signal.SIGKILL)
                    fault["killed_pid"] = victim
            else:
                os.killpg(process.pid, signal.SIGKILL)
                exit_codes.append(process.wait())
                fault["group_gone"] = wait_for_group_gone(process.pid)
                process = start_eval(
                    run_dir, episodes, log, family
                )  # what a user does: the same command
                starts += 1
            faults.append(fault)
        time.sleep(POLL_S)
    return {
        "seconds": time.perf_counter() - start,
        "starts": starts,
        "exit_codes": exit_codes,
        "faults": faults,
        "faults_not_applied": [kind for _, kind in schedule],
    }


def outcome(record: EpisodeRecord) -> tuple:
    return (
        record.success,
        record.steps,
        record.termination_reason,
        repr(record.peak_deformation),
        record.error is None,
    )


def compare(reference_dir: Path, drilled_dir: Path) -> dict:
    reference = RecordStore(reference_dir).load()
    drilled = RecordStore(drilled_dir).load()
    finished_lines: Counter[str] = Counter()
    for raw in (drilled_dir / "records.jsonl").read_text().splitlines():
        try:
            record = EpisodeRecord.from_json(raw)
        except ValueError:
            continue
        if record.error is None:  # errored attempts replaced by a retry are not duplicates
            finished_lines[record.spec.key] += 1
    keys = set(reference.records)
    common = keys & set(drilled.records)
    return {
        "reference_records": len(reference.records),
        "drilled_records": len(drilled.records),
        "drilled_lines": drilled.line_count,
        "lost": len(keys - set(drilled.records)),
        "extra": len(set(drilled.records) - keys),
        "duplicated": len(drilled.duplicates) + sum(n - 1 for n in finished_lines.values()),
        "differing_outcomes": sum(
            outcome(reference.records[k]) != outcome(drilled.records[k]) for k in common
        ),
        "differing_receipts": sum(
            reference.records[k].receipt != drilled.records[k].receipt for k in common
        ),
        "equal_receipts": sum(
            reference.records[k].receipt == drilled.records[k].receipt for k in common
        ),
        "errors_in_drilled": sum(r.error is not None for r in drilled.records.values()),
        "errored_attempts_replaced": len(drilled.retried),
        "records_on_attempt_2": sum(attempt_of(r) > 1 for r in drilled.records.values()),
        "reference_store": reference.summary(),
        "drilled_store": drilled.summary(),
        "drilled_store_ok": drilled.ok,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=50, help="per object (4 objects)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the fault schedule")
    parser.add_argument(
        "--family",
        choices=sorted(FAMILIES),
        default="soft",
        help="soft: SoftLift with the scripted expert; clutter: ClutterRetrieveMedium replay",
    )
    parser.add_argument("--out", type=Path, default=None, help="default: faults[_clutter].json")
    parser.add_argument("--keep", type=Path, default=None, help="keep the run dirs here")
    args = parser.parse_args()
    if args.out is None:
        args.out = OUT if args.family == "soft" else OUT.with_name(f"faults_{args.family}.json")
    total = args.episodes * 4  # four objects per family
    rng = random.Random(args.seed)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        base = args.keep or Path(scratch)
        base.mkdir(parents=True, exist_ok=True)
        reference_dir, drilled_dir = base / "reference", base / "drilled"
        with open(base / "drill.log", "wb") as log:
            reference = reference_run(reference_dir, args.episodes, log, args.family)
            drilled = drilled_run(drilled_dir, args.episodes, total, rng, log, args.family)
            lines_before = line_count(drilled_dir / "records.jsonl")
            again = reference_run(drilled_dir, args.episodes, log, args.family)  # resume: complete
            again["appended_lines"] = line_count(drilled_dir / "records.jsonl") - lines_before
        comparison = compare(reference_dir, drilled_dir)
    result = {
        "episodes": total,
        "comparison": comparison,
        "reference_run": reference,
        "drilled_run": drilled,
        "resume_of_complete_run": again,
        "drill_seconds": time.perf_counter() - started,
        "command": " ".join(
            ["python scripts/fault_drill.py"]
            + ([f"--episodes {args.episodes}"] if args.episodes != 50 else [])
            + ([f"--seed {args.seed}"] if args.seed != 0 else [])
            + ([f"--family {args.family}"] if args.family != "soft" else [])
        ),
        "eval_command": " ".join(eval_command(Path("<run_dir>"), args.episodes, args.family)[1:]),
        "seed": args.seed,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {"cpus": os.cpu_count(), "load_average_1min": os.getloadavg()[0]},
    }
    write_json_atomic(args.out, result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
