"""Measures the scripted expert's success and deformation; writes benchmarks/results/expert.json.

For every soft task and object (default physics, ``obs_mode="state"``, ``--gripper-mode``
delta by default: the mode ``simroll collect`` records and the learned policies act in) the
gentle and the firm expert each run the same ``--episodes`` seeded episodes (seeds from
``derive_seed("soft", task, index)``, so both closures and all objects see the same seeds),
through the one episode loop ``simroll.rollout.episode.run_episode``. Per (task, object, closure)
the JSON holds the success rate with its Clopper-Pearson 95 % interval, the median and maximum
of the episodes' peak deformation, the object's calibrated tolerance, and the fraction of
successes whose peak exceeded it; the per-episode rows are kept too. The file is rewritten after
every (task, object), so an interrupted run leaves what it finished (``"complete": false``).

Goals: the gentle expert succeeds in >= 90 % of episodes on every task and object; the firm
expert's successes on SoftLift and SoftPlace mostly exceed the tolerance.

Run: ``python scripts/bench_expert.py [--episodes 50]`` (10-20 minutes on 2 cores at 50).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from functools import partial
from pathlib import Path

from bench_env import machine_info  # scripts/ is on sys.path when this file runs

from simroll.assets import list_objects
from simroll.envs.soft import TASKS
from simroll.experts import CLOSURES, SoftExpert
from simroll.io import write_json_atomic
from simroll.rollout.episode import EnvConfig, EnvPool, run_episode
from simroll.rollout.records import EpisodeRecord
from simroll.rollout.runner import make_specs
from simroll.scoring.stats import binomial_rate

OUT = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "expert.json"
GENTLE_SUCCESS_GOAL = 0.9
FIRM_EXCEEDS_TASKS = ("SoftLift", "SoftPlace")


def make_expert(env, closure: str) -> SoftExpert:
    return SoftExpert(env, closure)


def summarize(task: str, object_name: str, closure: str, records: list[EpisodeRecord]) -> dict:
    successes = [r for r in records if r.success]
    peaks = [r.peak_deformation for r in records if r.peak_deformation < float("inf")]
    exceeding = [r for r in successes if r.peak_deformation > r.tolerance]
    rate = binomial_rate(len(successes), len(records), method="beta")
    return {
        "task": task,
        "object": object_name,
        "closure": closure,
        "episodes": len(records),
        "successes": len(successes),
        "success_rate": rate.to_dict(),
        "tolerance": records[0].tolerance,
        "peak_deformation_median": statistics.median(peaks) if peaks else None,
        "peak_deformation_max": max(peaks) if peaks else None,
        "successes_exceeding_tolerance": len(exceeding),
        "fraction_of_successes_exceeding_tolerance": (
            len(exceeding) / len(successes) if successes else None
        ),
        "termination_reasons": dict(Counter(r.termination_reason for r in records)),
        "errors": sum(r.error is not None for r in records),
        "mean_steps": statistics.fmean(r.steps for r in records),
    }


def episode_row(closure: str, record: EpisodeRecord) -> dict:
    return {
        "task": record.spec.task,
        "object": record.spec.object,
        "closure": closure,
        "index": record.spec.index,
        "seed": record.spec.seed,
        "success": record.success,
        "steps": record.steps,
        "termination_reason": record.termination_reason,
        "peak_deformation": record.peak_deformation,
        "tolerance": record.tolerance,
        "error": record.error,
    }


def number(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def markdown_table(cells: list[dict]) -> str:
    lines = [
        "| task | object | closure | success [95% CI] | peak def. median / max (%) | tolerance (%) "
        "| successes > tolerance |",
        "|---|---|---|---|---|---|---|",
    ]
    for cell in cells:
        rate = cell["success_rate"]
        exceeding = cell["fraction_of_successes_exceeding_tolerance"]
        lines.append(
            f"| {cell['task']} | {cell['object']} | {cell['closure']} | "
            f"{cell['successes']}/{cell['episodes']} = {rate['rate']:.2f} "
            f"[{rate['low']:.2f}, {rate['high']:.2f}] | "
            f"{number(cell['peak_deformation_median'])} / {number(cell['peak_deformation_max'])} | "
            f"{cell['tolerance']:.3f} | {number(exceeding, 2)} |"
        )
    return "\n".join(lines)


def goal_failures(cells: list[dict]) -> list[str]:
    failures = []
    for cell in cells:
        name = f"{cell['task']}/{cell['object']}/{cell['closure']}"
        if cell["closure"] == "gentle" and cell["success_rate"]["rate"] < GENTLE_SUCCESS_GOAL:
            failures.append(f"{name}: gentle success {cell['success_rate']['rate']:.2f} < 0.9")
        exceeding = cell["fraction_of_successes_exceeding_tolerance"]
        if (
            cell["closure"] == "firm"
            and cell["task"] in FIRM_EXCEEDS_TASKS
            and (exceeding is None or exceeding <= 0.5)
        ):
            failures.append(f"{name}: firm successes exceeding tolerance {exceeding}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=50, help="episodes per cell")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--objects", nargs="+", default=list_objects())
    parser.add_argument(
        "--gripper-mode", default="delta", choices=["delta", "continuous", "binary"]
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")

    machine = machine_info()
    report = {
        "machine": machine,
        "episodes_per_cell": args.episodes,
        "obs_mode": "state",
        "gripper_mode": args.gripper_mode,
        "variation": "default",
        "command": "python scripts/bench_expert.py " + " ".join(sys.argv[1:]),
        "complete": False,
        "cells": [],
        "episodes": [],
    }
    pool = EnvPool(EnvConfig(obs_mode="state", gripper_mode=args.gripper_mode))
    started = time.perf_counter()
    for task in args.tasks:
        for object_name in args.objects:
            specs = make_specs("soft", [task], [object_name], ["default"], args.episodes)
            for closure in CLOSURES:
                records = [
                    run_episode(
                        spec,
                        partial(make_expert, closure=closure),
                        env=pool.get(spec),
                        policy_id=f"expert/{closure}",
                    )
                    for spec in specs
                ]
                cell = summarize(task, object_name, closure, records)
                report["cells"].append(cell)
                report["episodes"].extend(episode_row(closure, r) for r in records)
                print(
                    f"{task} {object_name} {closure}: {cell['successes']}/{cell['episodes']} "
                    f"peak median {number(cell['peak_deformation_median'])} "
                    f"({time.perf_counter() - started:.0f} s)",
                    flush=True,
                )
            write_json_atomic(args.out, report)
    pool.close()
    report["complete"] = True
    report["wall_s"] = time.perf_counter() - started
    report["goal_failures"] = goal_failures(report["cells"])
    write_json_atomic(args.out, report)
    print()
    print(markdown_table(report["cells"]))
    print()
    for failure in report["goal_failures"]:
        print(f"goal missed: {failure}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
