"""Does touch help? Two checkpoints of one recipe, with and without touch, on paired episodes.

SoftVTBench's central question asked in simroll: the same SimVLA recipe trained twice on the same
data, steps and seed, once reading the tactile maps and per-finger grip force
(``configs/policy/vla.yaml``) and once vision-only (``configs/policy/vla_vision.yaml``), is
evaluated in distribution (``default``) and under each shift (softer, stiffer, heavier, slippery
objects, dim light, a moved camera, an actuation bias). Both policies run the same seeded specs
(``simroll.evaluate``, resumable run directories under ``--runs``), so episodes pair by spec key:
for each condition the JSON holds both policies' TSR and DSR with 95% intervals and the exact
McNemar test on the discordant pairs (:func:`simroll.report.compare.compare_runs`, what
``simroll report A B`` prints). The verdict per condition is "touch better", "vision better" or
"no significant difference" at p < 0.05 (per condition, uncorrected for the 8 comparisons; the
JSON keeps the p-values).

Writes ``benchmarks/results/touch.json`` and ``touch.png``.

Run: ``python scripts/bench_touch.py --touch <vla checkpoint> --vision <vla_vision checkpoint>
[--episodes 25] [--backend vector]`` (25 episodes per object x 4 objects = 100 specs per task
and condition; about 7 episodes/min per core with 64 px cameras).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CONDITIONS = (
    "default",
    "soft_x0.5",
    "stiff_x2",
    "heavy_x2.5",
    "slippery_x0.6",
    "dim_x0.5",
    "camera_shift",
    "actuation_bias",
)
TASKS = ("SoftLift", "SoftPlace", "SoftSqueeze")
OBJECTS = ("sponge", "tofu", "foam_cylinder", "dumpling")


def verdict(outcome: Any, alpha: float = 0.05) -> str:
    """Which policy the paired test favours (B is touch), or that it favours neither."""
    if outcome.p_value >= alpha or outcome.a_only == outcome.b_only:
        return "no significant difference"
    return "touch better" if outcome.b_only > outcome.a_only else "vision better"


def paired(outcome: Any) -> dict[str, Any]:
    return {
        "pairs": outcome.pairs,
        "vision": outcome.rate_a,
        "touch": outcome.rate_b,
        "vision_only": outcome.a_only,
        "touch_only": outcome.b_only,
        "p_value": outcome.p_value,
        "verdict": verdict(outcome),
    }


def rates(records: list[Any]) -> dict[str, Any]:
    from simroll.scoring.stats import binomial_rate

    n = len(records)
    return {
        "episodes": n,
        "errors": sum(record.error is not None for record in records),
        "tsr": binomial_rate(sum(r.success for r in records), n).to_dict(),
        "dsr": binomial_rate(sum(r.dsr_success for r in records), n).to_dict(),
    }


def run_condition(args: argparse.Namespace, condition: str) -> dict[str, Any]:
    import simroll
    from simroll.report.compare import compare_runs, paired_outcome
    from simroll.report.runs import load_eval_run
    from simroll.scoring.dsr import ALL

    dirs = {}
    for name, checkpoint in (("vision", args.vision), ("touch", args.touch)):
        dirs[name] = args.runs / f"{name}_{condition}"
        result = simroll.evaluate(
            checkpoint,
            tasks=args.tasks,
            objects=args.objects,
            variations=[condition],
            episodes=args.episodes,
            seed=args.seed,
            backend=args.backend,
            workers=args.workers,
            output_dir=dirs[name],
            progress=False,
            policy_name=name,
        )
        if result.errors:
            print(f"  {name}/{condition}: {result.errors} episode(s) in error", file=sys.stderr)
    comparison = compare_runs(load_eval_run(dirs["vision"]), load_eval_run(dirs["touch"]))
    pairs = comparison.pairs
    per_task = {
        g.task: {"tsr": paired(g.tsr), "dsr": paired(g.dsr)}
        for g in comparison.groups
        if g.task != ALL and g.object == ALL
    }
    return {
        "vision": rates([a for a, _ in comparison.pairs]),
        "touch": rates([b for _, b in comparison.pairs]),
        "paired": {
            "tsr": paired(paired_outcome([(a.success, b.success) for a, b in pairs])),
            "dsr": paired(paired_outcome([(a.dsr_success, b.dsr_success) for a, b in pairs])),
        },
        "per_task": per_task,
        "unpaired_episodes": len(comparison.only_a) + len(comparison.only_b),
        "runs": {name: str(path) for name, path in dirs.items()},
    }


def summarize(conditions: dict[str, Any]) -> dict[str, Any]:
    """Whether touch raised TSR/DSR in distribution and under shift (counts of verdicts)."""
    out: dict[str, Any] = {}
    for measure in ("tsr", "dsr"):
        shifted = [c for c in conditions if c != "default"]
        counts: dict[str, int] = {}
        for condition in shifted:
            key = conditions[condition]["paired"][measure]["verdict"]
            counts[key] = counts.get(key, 0) + 1
        higher = sum(
            conditions[c]["touch"][measure]["rate"] > conditions[c]["vision"][measure]["rate"]
            for c in shifted
        )
        out[measure] = {
            "in_distribution": conditions["default"]["paired"][measure]["verdict"]
            if "default" in conditions
            else None,
            "under_shift_verdicts": counts,
            "under_shift_touch_higher_point_estimate": f"{higher}/{len(shifted)}",
        }
    return out


def plot(conditions: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from simroll.io import atomic_path

    names = list(conditions)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    for ax, measure in zip(axes, ("tsr", "dsr"), strict=True):
        for offset, policy, colour in ((-0.2, "vision", "tab:gray"), (0.2, "touch", "tab:blue")):
            xs = [i + offset for i in range(len(names))]
            values = [conditions[c][policy][measure] for c in names]
            ys = [v["rate"] for v in values]
            err = [[v["rate"] - v["low"] for v in values], [v["high"] - v["rate"] for v in values]]
            ax.bar(xs, ys, width=0.4, color=colour, label=policy, yerr=err, capsize=2)
        for i, c in enumerate(names):
            p = conditions[c]["paired"][measure]["p_value"]
            ax.annotate(f"p={p:.2g}", (i, 1.02), ha="center", fontsize=7)
        ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
        ax.set_title(f"{measure.upper()} (95% CI; exact McNemar p)")
        ax.set_ylim(0, 1.1)
    axes[0].legend(loc="lower left")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--touch", required=True, help="checkpoint of the vision + touch recipe")
    parser.add_argument("--vision", required=True, help="checkpoint of the vision-only recipe")
    parser.add_argument("--episodes", type=int, default=25, help="per (task, object, condition)")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--objects", nargs="+", default=list(OBJECTS))
    parser.add_argument("--conditions", nargs="+", default=list(CONDITIONS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="vector")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "touch")
    parser.add_argument("--out", type=Path, default=RESULTS / "touch.json")
    args = parser.parse_args(argv)
    for name in ("touch", "vision"):
        if not (Path(getattr(args, name)) / "model.safetensors").is_file():
            parser.error(f"--{name} {getattr(args, name)} is not a checkpoint directory")
    from simroll.envs.variations import VARIATIONS

    unknown = [c for c in args.conditions if c not in VARIATIONS]
    if unknown:
        parser.error(f"unknown condition(s) {unknown}; expected variations from {list(VARIATIONS)}")
    started = time.time()
    conditions: dict[str, Any] = {}
    for condition in args.conditions:
        print(f"{condition}: vision and touch on the same specs ...", flush=True)
        conditions[condition] = run_condition(args, condition)
        c = conditions[condition]
        print(
            f"  TSR vision {c['vision']['tsr']['rate']:.2f} touch {c['touch']['tsr']['rate']:.2f}"
            f" (p={c['paired']['tsr']['p_value']:.3g}); DSR vision {c['vision']['dsr']['rate']:.2f}"
            f" touch {c['touch']['dsr']['rate']:.2f} (p={c['paired']['dsr']['p_value']:.3g})",
            flush=True,
        )
    result = {
        "command": "python scripts/bench_touch.py " + " ".join(argv or sys.argv[1:]),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_1min": os.getloadavg()[0],
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        },
        "touch": str(args.touch),
        "vision": str(args.vision),
        "episodes_per_cell": args.episodes,
        "tasks": args.tasks,
        "objects": args.objects,
        "seed": args.seed,
        "conditions": conditions,
        "summary": summarize(conditions),
        "seconds": time.time() - started,
    }
    from simroll.io import write_json_atomic

    write_json_atomic(args.out, result)
    plot(conditions, args.out.with_suffix(".png"))
    print(json.dumps(result["summary"], indent=2))
    return result


if __name__ == "__main__":
    main()
