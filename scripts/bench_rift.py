"""RIFT against rollout: latency, success, latency as control delay, and cache interventions.

Two checkpoints of simroll's world-action model (LeRobot type ``wam``), one trained in rollout mode
and one in RIFT mode, are compared in one run:

1. **Latency.** Both modes plan action chunks from the same observations (env resets and steps
   of the seeded specs), interleaved chunk by chunk, with torch threads fixed (``--threads``):
   the median and quartiles of the wall time per chunk over ``--chunks`` chunks, and the
   backbone (video expert) and action-expert passes per chunk, counted with forward hooks.
2. **Success.** ``simroll.evaluate`` on the seeded specs (``--tasks`` x every object x
   ``--episodes``): TSR and DSR with 95% Clopper-Pearson intervals per task, once as fast as the
   simulator allows and once with ``policy_latency_s="measured"`` (each mode acts under its own
   measured latency as control delay).
3. **Cache interventions** (the paper's analysis) on paired seeded SoftLift episodes: the
   unmodified policy, the future cache's values masked, reassigned across future positions, and
   (rollout mode) one fixed final-clean cache replayed for the whole chunk. Per variant: success
   with its interval and the end-effector average displacement error (ADE, metres) against the
   unmodified episode of the same seed (mean over the steps both ran of the hand's distance).
4. **Paired tests.** Exact McNemar tests of TSR and DSR per task on the shared seeds: the two
   modes, each against itself under its own latency, and both under latency (``--add-paired``
   adds them to an existing ``--out`` from its runs, re-running nothing).

Writes ``benchmarks/results/rift.json``; run dirs go under ``--runs``. Run:
``python scripts/bench_rift.py --rollout policies/wam_soft --rift policies/wam_rift_soft``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OBJECTS = ("sponge", "tofu", "foam_cylinder", "dumpling")
MODES = ("rollout", "rift")
INTERVENTIONS = {
    "rollout": {
        "unmodified": {},
        "mask_future": {"cache_intervention": "mask_future"},
        "reassign_future": {"cache_intervention": "reassign_future"},
        "fixed_final_clean": {"rollout_cache": "final_clean"},
    },
    "rift": {
        "unmodified": {},
        "mask_future": {"cache_intervention": "mask_future"},
        "reassign_future": {"cache_intervention": "reassign_future"},
    },
}


def policy_config(path: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "_target_": "simroll.policies.lerobot.load_policy",
        "_partial_": True,
        "path": path,
        "overrides": dict(overrides or {}),
    }


def env_config(checkpoint: str):
    from simroll.policies.lerobot import read_env_record
    from simroll.rollout.episode import EnvConfig

    recorded = read_env_record(Path(checkpoint)) or {}
    return EnvConfig(
        obs_mode=recorded.get("obs_mode", "full"),
        image_size=int(recorded.get("image_size", 64)),
        gripper_mode=recorded.get("gripper_mode", "delta"),
    )


def measure_latency(args: argparse.Namespace, specs) -> dict[str, Any]:
    """Median wall time per action chunk of each mode, interleaved on the same observations."""
    import torch

    from simroll.policies.lerobot import load_policy

    torch.set_num_threads(args.threads)
    timings: dict[str, list[float]] = {mode: [] for mode in MODES}
    passes = {mode: {"backbone": 0, "action": 0} for mode in MODES}
    chunks = 0
    spec_index = 0
    while chunks < args.chunks:
        spec = specs[spec_index % len(specs)]
        spec_index += 1
        env = env_config(args.rollout).make(spec)
        try:
            policies = {
                mode: load_policy(env, path, threads=args.threads)
                for mode, path in (("rollout", args.rollout), ("rift", args.rift))
            }
            for mode, policy in policies.items():
                model = policy.policy.model
                for part, module in (("backbone", model.video), ("action", model.action)):
                    module.register_forward_hook(
                        lambda *_, m=mode, p=part: passes[m].__setitem__(p, passes[m][p] + 1)
                    )
            obs, _ = env.reset(seed=spec.seed, options={"variation": spec.variation})
            for _ in range(args.chunks_per_episode):
                for mode, policy in policies.items():
                    start = time.perf_counter()
                    chunk = policy.predict_action_chunk(obs)
                    timings[mode].append(time.perf_counter() - start)
                chunks += 1
                for action in chunk[: policy.policy.config.n_action_steps]:  # RIFT's plan
                    obs, _, terminated, truncated, _ = env.step(action)
                    if terminated or truncated:
                        break
                if terminated or truncated or chunks >= args.chunks:
                    break
        finally:
            env.close()
    result: dict[str, Any] = {"chunks": chunks, "threads": args.threads}
    for mode in MODES:
        values = np.array(timings[mode])
        result[mode] = {
            "median_s": float(np.median(values)),
            "p25_s": float(np.percentile(values, 25)),
            "p75_s": float(np.percentile(values, 75)),
            "backbone_passes_per_chunk": passes[mode]["backbone"] / len(values),
            "action_passes_per_chunk": passes[mode]["action"] / len(values),
        }
    rollout, rift = result["rollout"]["median_s"], result["rift"]["median_s"]
    result["rift_latency_reduction"] = 1.0 - rift / rollout
    return result


def rates(records) -> dict[str, Any]:
    from simroll.scoring.stats import binomial_rate

    return {
        "episodes": len(records),
        "errors": sum(r.error is not None for r in records),
        "tsr": binomial_rate(sum(r.success for r in records), len(records)).to_dict(),
        "dsr": binomial_rate(sum(r.dsr_success for r in records), len(records)).to_dict(),
    }


def evaluate_mode(args: argparse.Namespace, mode: str, path: str, latency: str | None):
    import simroll
    from simroll.report.runs import load_eval_run

    name = f"{mode}_latency" if latency else mode
    out = args.runs / name
    env = env_config(path)
    simroll.evaluate(
        policy_config(path),
        tasks=args.tasks,
        objects=args.objects,
        episodes=args.episodes,
        seed=args.seed,
        suite="soft",
        obs_mode=env.obs_mode,
        image_size=env.image_size,
        gripper_mode=env.gripper_mode,
        policy_latency_s=latency,
        backend=args.backend,
        workers=args.workers,
        output_dir=out,
        progress=False,
        policy_name=name,
    )
    run = load_eval_run(out)
    by_task = {task: rates([r for r in run.records if r.spec.task == task]) for task in args.tasks}
    delays = sorted({r.control_delay_steps for r in run.records})
    return {"run": str(out), "tasks": by_task, "all": rates(run.records), "delay_steps": delays}


PAIRS = (
    ("rollout", "rift"),
    ("rollout", "rollout_latency"),
    ("rift", "rift_latency"),
    ("rollout_latency", "rift_latency"),
)


def paired_comparisons(success: dict[str, Any], tasks: list[str]) -> list[dict[str, Any]]:
    """Exact McNemar tests of TSR and DSR per task between the evaluation runs of ``success``
    (same seeded specs in every run, paired by spec key as ``simroll report A B`` pairs them):
    the two modes, each mode against itself under its own latency, and the two modes under
    latency."""
    from simroll.report.compare import compare_runs
    from simroll.report.runs import load_eval_run
    from simroll.scoring.dsr import ALL

    runs = {name: load_eval_run(Path(row["run"])) for name, row in success.items()}
    rows = []
    for a, b in PAIRS:
        if a not in runs or b not in runs:
            continue
        groups = {
            group.task: group
            for group in compare_runs(runs[a], runs[b]).groups
            if group.object == ALL
        }
        for task in tasks:
            for metric in ("tsr", "dsr"):
                outcome = getattr(groups[task], metric)
                rows.append(
                    {
                        "a": a,
                        "b": b,
                        "task": task,
                        "metric": metric,
                        "pairs": outcome.pairs,
                        "rate_a": outcome.rate_a,
                        "rate_b": outcome.rate_b,
                        "a_only": outcome.a_only,
                        "b_only": outcome.b_only,
                        "p_value": outcome.p_value,
                    }
                )
    return rows


def add_paired(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """``--add-paired``: the paired section added to an existing ``--out`` of the same settings,
    from the evaluation runs it names (nothing is re-run)."""
    from simroll.io import write_json_atomic

    if not args.out.is_file():
        parser.error(f"--add-paired: {args.out} does not exist")
    payload = json.loads(args.out.read_text())
    expected = {
        "checkpoints": {"rollout": args.rollout, "rift": args.rift},
        "tasks": args.tasks,
        "objects": args.objects,
        "seed": args.seed,
    }
    differing = [key for key, value in expected.items() if payload.get(key) != value]
    if differing or "success" not in payload:
        parser.error(
            f"--add-paired: {args.out} was made with other settings ({differing}) or has no "
            "success section"
        )
    payload["paired"] = paired_comparisons(payload["success"], args.tasks)
    write_json_atomic(args.out, payload)
    print(f"wrote {args.out}")
    return payload


class HandPath:
    """Episode observer: the hand's position after every step."""

    def __init__(self) -> None:
        self.points: list[np.ndarray] = []

    def on_reset(self, env, obs, info, policy) -> None:
        self.points = [env.unwrapped.hand_pose()[:3]]

    def on_step(self, env, obs, info, action) -> None:
        self.points.append(env.unwrapped.hand_pose()[:3])

    def on_end(self, record) -> None:
        pass


def intervention_episode(path: str, overrides: dict[str, Any], spec) -> tuple[np.ndarray, Any]:
    """One episode of ``path`` with ``overrides`` on ``spec``: the hand's path and the record."""
    from hydra.utils import instantiate

    from simroll.rollout.episode import run_episode

    observer = HandPath()
    factory = instantiate(policy_config(path, overrides))
    record = run_episode(spec, factory, env_config=env_config(path), observers=[observer])
    return np.array(observer.points), record


def run_interventions(args: argparse.Namespace, mode: str, path: str) -> dict[str, Any]:
    """Paired SoftLift episodes of every intervention of ``mode``; ADE against unmodified.

    Episodes run in ``--workers`` processes; each is seeded by its spec, so the pairing does not
    depend on which process ran it.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from simroll.rollout.runner import make_specs

    specs = make_specs(
        "soft",
        ["SoftLift"],
        args.objects,
        ["default"],
        args.intervention_episodes,
        base_seed=args.seed,
    )
    variants = INTERVENTIONS[mode]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max(1, args.workers), mp_context=context) as pool:
        futures = {
            variant: [pool.submit(intervention_episode, path, overrides, s) for s in specs]
            for variant, overrides in variants.items()
        }
        outcomes = {variant: [f.result() for f in fs] for variant, fs in futures.items()}
    result = {}
    for variant in variants:
        errors = []
        for (reference, _), (points, _) in zip(
            outcomes["unmodified"], outcomes[variant], strict=True
        ):
            steps = min(len(reference), len(points))
            errors.append(float(np.linalg.norm(reference[:steps] - points[:steps], axis=1).mean()))
        records = [record for _, record in outcomes[variant]]
        result[variant] = {**rates(records), "ade_m": statistics.fmean(errors)}
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollout", required=True, help="checkpoint trained in rollout mode")
    parser.add_argument("--rift", required=True, help="checkpoint trained in RIFT mode")
    parser.add_argument("--tasks", nargs="+", default=["SoftLift", "SoftPlace"])
    parser.add_argument("--objects", nargs="+", default=list(OBJECTS), choices=OBJECTS)
    parser.add_argument("--episodes", type=int, default=13, help="per (task, object)")
    parser.add_argument("--intervention-episodes", type=int, default=13, help="per object")
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--chunks-per-episode", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="local")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--skip", nargs="*", default=[], choices=["latency", "eval", "interventions"]
    )
    parser.add_argument(
        "--add-paired",
        action="store_true",
        help="only add the paired McNemar section to an existing --out made with these settings",
    )
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "rift")
    parser.add_argument("--out", type=Path, default=RESULTS / "rift.json")
    args = parser.parse_args(argv)
    for name in ("rollout", "rift"):
        path = Path(getattr(args, name))
        if not (path / "model.safetensors").is_file():
            parser.error(f"--{name} {path}: not a checkpoint directory (no model.safetensors)")
    if args.add_paired:
        return add_paired(args, parser)
    from simroll.io import write_json_atomic
    from simroll.rollout.runner import make_specs

    started = time.time()
    payload: dict[str, Any] = {
        "command": "python scripts/bench_rift.py " + " ".join(argv or sys.argv[1:]),
        "checkpoints": {"rollout": args.rollout, "rift": args.rift},
        "tasks": args.tasks,
        "objects": args.objects,
        "seed": args.seed,
    }
    specs = make_specs("soft", args.tasks, args.objects, ["default"], 1, base_seed=args.seed)
    if "latency" not in args.skip:
        payload["latency"] = measure_latency(args, specs)
        print("latency", {m: payload["latency"][m] for m in MODES}, flush=True)
    if "eval" not in args.skip:
        payload["success"] = {}
        for mode, path in (("rollout", args.rollout), ("rift", args.rift)):
            for latency in (None, "measured"):
                row = evaluate_mode(args, mode, path, latency)
                payload["success"][f"{mode}_latency" if latency else mode] = row
                print(
                    mode, latency, row["all"]["tsr"]["rate"], row["all"]["dsr"]["rate"], flush=True
                )
        payload["paired"] = paired_comparisons(payload["success"], args.tasks)
    if "interventions" not in args.skip:
        payload["interventions"] = {
            mode: run_interventions(args, mode, path)
            for mode, path in (("rollout", args.rollout), ("rift", args.rift))
        }
    payload["wall_s"] = round(time.time() - started, 1)
    write_json_atomic(args.out, payload)
    print(f"wrote {args.out}")
    return payload


if __name__ == "__main__":
    main()
    sys.exit(0)
