"""TRACE's comparison on simroll's clutter family: success, execution time, withdrawals, travel.

Each method runs the same seeded scenes of ``simroll/ClutterRetrieve{Easy,Medium,Hard}-v0``
(through ``simroll.evaluate``: resumable run directories under ``--runs``, episodes paired by
spec key): ``nominal_replay`` (the fixed plan from the digital twin, open loop), the
``closed_loop_teacher`` (privileged, re-plans before every primitive, withdraws to look when its
view is stale), the ``plan_labeller`` (privileged, keeps to the nominal plan while it still works
from the true state, re-plans otherwise, never looks: the students' labeller) and any student
checkpoints given with ``--student NAME=CHECKPOINT`` (inference settings with ``--setting
NAME:KEY=VALUE``, e.g. ``grasp_gate=true``). Scenes run under the ``pose_noise``
variation by default (every block moved by up to 3 mm and 2 degrees after the first frame,
TRACE's execution noise), so the plan meets a world that differs from its twin.

Per method and tier the JSON holds the success rate with its 95% Clopper-Pearson interval, and
the means of execution time (simulated seconds), primitives, withdrawals and push travel, over
all episodes and over successful ones; for every pair of methods, the scenes each alone solved and
the exact McNemar p-value on the paired scenes. Writes ``benchmarks/results/clutter.json``.

Per method and tier it also holds DSR (success with the target's peak deformation within its
calibrated tolerance) and the median peak deformation: with ``--targets sponge`` (the soft-target
variant, a flexcomp target) pushes and grasps that crush the target count against DSR; a rigid
target never deforms, so there DSR equals success.

Run: ``python scripts/bench_clutter.py [--scenes 100] [--tiers easy medium hard]
[--targets ...] [--student trace_dagger=policies/trace_clutter]`` (scenes per tier, split evenly
over the targets; the teacher costs 10-40 s of CPU per scene, replay 2-8 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TIERS = ("easy", "medium", "hard")
TARGETS = ("cuboid", "cube", "cylinder", "hexagonal_prism")
BASELINES = {
    "nominal_replay": "clutter_replay",
    "closed_loop_teacher": "clutter_teacher",
    "plan_labeller": "clutter_plan_labeller",
}


def task_of(tier: str) -> str:
    return f"ClutterRetrieve{tier.capitalize()}"


def summarize(records: list[Any]) -> dict[str, Any]:
    from simroll.scoring.stats import binomial_rate

    def mean(key: str, rows: list[Any]) -> float | None:
        values = [float(r.extra[key]) for r in rows if key in r.extra]
        return statistics.fmean(values) if values else None

    wins = [r for r in records if r.success]
    gentle = [r for r in records if r.dsr_success]
    crushed = [r for r in wins if not r.dsr_success]
    reasons: dict[str, int] = {}
    for r in records:
        reasons[r.termination_reason] = reasons.get(r.termination_reason, 0) + 1
    return {
        "episodes": len(records),
        "errors": sum(r.error is not None for r in records),
        "success": binomial_rate(len(wins), len(records)).to_dict(),
        # success with the target's peak deformation within its tolerance (a rigid target never
        # deforms: equal to success)
        "dsr": binomial_rate(len(gentle), len(records)).to_dict(),
        # median: a diverged episode's peak is inf
        "peak_deformation_median": statistics.median(r.peak_deformation for r in records),
        # successes whose target ended over tolerance, and how many of them already were when
        # the grasp began (the pushes' doing; None for runs recorded before the metric existed)
        "successes_over_tolerance": len(crushed),
        "successes_over_tolerance_before_grasp": (
            sum(r.extra["peak_deformation_before_grasp"] > r.tolerance for r in crushed)
            if all("peak_deformation_before_grasp" in r.extra for r in crushed)
            else None
        ),
        "execution_time_s": mean("execution_time", records),
        "execution_time_s_successes": mean("execution_time", wins),
        "primitives": mean("primitives", records),
        "withdrawals": mean("withdrawals", records),
        "withdrawals_successes": mean("withdrawals", wins),
        "travel_m": mean("travel_m", records),
        "plan_length": mean("plan_length", records),
        "termination_reasons": reasons,
    }


def run_method(args: argparse.Namespace, name: str, policy: Any) -> tuple[dict[str, Any], list]:
    """The method's JSON row and its evaluation run (for the paired comparison)."""
    import simroll
    from simroll.report.runs import load_eval_run

    out = args.runs / name
    result = simroll.evaluate(
        policy,
        tasks=[task_of(t) for t in args.tiers],
        objects=list(args.targets),
        variations=[args.variation],
        episodes=args.scenes // len(args.targets),
        seed=args.seed,
        suite="clutter",
        obs_mode="full",
        image_size=96,
        gripper_mode="delta",
        backend=args.backend,
        workers=args.workers,
        output_dir=out,
        progress=args.progress,
        policy_name=name,
    )
    if result.errors:
        print(f"  {name}: {result.errors} episode(s) in error", file=sys.stderr)
    run = load_eval_run(out)
    records = run.records
    by_tier = {
        tier: summarize([r for r in records if r.spec.task == task_of(tier)]) for tier in args.tiers
    }
    return {"run": str(out), "tiers": by_tier, "all": summarize(records)}, run


def paired(runs: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pair of methods on the scenes both ran, paired by spec key as ``simroll report A B``
    pairs them (:func:`simroll.report.compare.compare_runs`, all tiers pooled): their success
    rates, the discordant scenes each won and the exact McNemar p-value; the same for DSR."""
    from simroll.report.compare import compare_runs

    def row(outcome) -> dict[str, Any]:
        return {
            "rate_a": outcome.rate_a,
            "rate_b": outcome.rate_b,
            "a_only": outcome.a_only,
            "b_only": outcome.b_only,
            "mcnemar_p": outcome.p_value,
        }

    rows = []
    names = list(runs)
    for index, a in enumerate(names):
        for b in names[index + 1 :]:
            groups = compare_runs(runs[a], runs[b]).groups
            if not groups:  # no shared scene
                continue
            pooled = groups[-1]  # every tier and target (the one tier's own when one ran)
            rows.append(
                {"a": a, "b": b, "scenes": pooled.pairs, **row(pooled.tsr), "dsr": row(pooled.dsr)}
            )
    return rows


def student_settings(parser, items: list[str], students: dict[str, str]) -> dict[str, dict]:
    """``--setting NAME:KEY=VALUE`` items as {student name: {key: value}}."""
    from simroll.policies.resolve import parse_setting

    settings: dict[str, dict] = {}
    for item in items:
        name, sep, setting = item.partition(":")
        if not sep or name not in students:
            parser.error(
                f"--setting {item!r}: expected NAME:KEY=VALUE with NAME one of the --student "
                f"names {sorted(students)}"
            )
        try:
            key, value = parse_setting(setting)
        except ValueError as error:
            parser.error(f"--setting {item!r}: {error}")
        settings.setdefault(name, {})[key] = value
    return settings


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", type=int, default=100, help="per tier (over 4 targets)")
    parser.add_argument("--tiers", nargs="+", default=list(TIERS), choices=TIERS)
    parser.add_argument("--methods", nargs="*", default=list(BASELINES), choices=list(BASELINES))
    parser.add_argument(
        "--student",
        action="append",
        default=[],
        metavar="NAME=CHECKPOINT",
        help="a student checkpoint to compare (repeatable)",
    )
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE",
        help="an inference setting of student NAME's checkpoint, as `simroll eval "
        "+policy.overrides.KEY=VALUE` sets it (e.g. trace_dagger:grasp_gate=true; repeatable)",
    )
    parser.add_argument(
        "--targets",
        nargs="+",
        default=list(TARGETS),
        help="target objects: rigid shapes, or soft objects (the soft-target variant)",
    )
    parser.add_argument("--variation", default="pose_noise")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--backend", default="local")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "clutter")
    parser.add_argument("--out", type=Path, default=RESULTS / "clutter.json")
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args(argv)
    if args.scenes < len(args.targets) or args.scenes % len(args.targets):
        parser.error(
            f"--scenes must be a positive multiple of {len(args.targets)} (the targets), "
            f"got {args.scenes}"
        )
    methods: dict[str, Any] = {name: BASELINES[name] for name in args.methods}
    students = {}
    for item in args.student:
        name, sep, path = item.partition("=")
        if not sep or not (Path(path) / "model.safetensors").is_file():
            parser.error(f"--student {item!r}: expected NAME=<checkpoint directory>")
        students[name] = path
    settings = student_settings(parser, args.setting, students)
    from simroll.policies.resolve import checkpoint_config

    for name, path in students.items():
        methods[name] = path
        if settings.get(name):  # the checkpoint with inference settings, as policy=lerobot has
            methods[name] = checkpoint_config(
                Path(path).resolve(), device="cpu", overrides=settings[name]
            )
    if not methods:
        parser.error("nothing to run: give --methods and/or --student")
    from simroll.io import write_json_atomic

    started = time.time()
    results, runs = {}, {}
    for name, policy in methods.items():
        print(f"{name}: {args.scenes} scenes per tier {args.tiers} ...", flush=True)
        results[name], runs[name] = run_method(args, name, policy)
        for tier, row in results[name]["tiers"].items():
            rate = row["success"]
            print(
                f"  {tier:<6} success {rate['rate']:.2f} [{rate['low']:.2f}, {rate['high']:.2f}]"
                f"  DSR {row['dsr']['rate']:.2f}"
                f"  time {row['execution_time_s']:.1f} s  withdrawals {row['withdrawals']:.1f}"
                f"  travel {row['travel_m']:.2f} m  primitives {row['primitives']:.1f}"
            )
    payload = {
        "command": "python scripts/bench_clutter.py " + " ".join(argv or sys.argv[1:]),
        "scenes_per_tier": args.scenes,
        "targets": list(args.targets),
        "variation": args.variation,
        "seed": args.seed,
        "wall_s": round(time.time() - started, 1),
        "methods": results,
        "paired": paired(runs),
    }
    write_json_atomic(args.out, payload)
    print(f"wrote {args.out}")
    return payload


if __name__ == "__main__":
    main()
    sys.exit(0)
