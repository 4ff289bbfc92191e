"""Per-control-step compute of the shipped learned policies and their acceleration knobs, one run.

For each policy config named on the command line (``configs/policy/<name>.yaml``: its checkpoint
``path``), the reference and every acceleration variant in ``VARIANTS`` (each a combination of
``configs/accel/*.yaml`` knobs: fewer denoising/flow steps, longer executed chunks, visual-token
pruning, int8 dynamic quantization) run through the episode engine on the same seeded specs,
interleaved spec by spec so that load on a shared machine falls on every variant alike.
``benchmarks/results/policy.json`` gets, per policy and variant: measured policy compute per
control step (wall time summed from the episode records), network evaluations per step (chunks
times denoising or flow steps: the deterministic proxy) and both ratios to that policy's
reference, the control-budget ratio (compute per step / 50 ms), and TSR/DSR with intervals on
those specs.

Run: ``python scripts/bench_policy.py --policies diffusion act vla --episodes 2``. SimVLA reads
both cameras at 64 px (``obs_mode=full``); the diffusion and ACT policies read proprioception and
object state (``obs_mode=state``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import yaml

os.environ.setdefault("MUJOCO_GL", "egl")

from simroll.io import write_json_atomic  # noqa: E402
from simroll.policies.lerobot import load_policy, read_env_record  # noqa: E402
from simroll.rollout.backends import EpisodeJob  # noqa: E402
from simroll.rollout.episode import EnvConfig  # noqa: E402
from simroll.rollout.runner import evaluate, make_specs  # noqa: E402
from simroll.scoring.stats import binomial_rate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "policy.json"
CONTROL_PERIOD_S = 0.05
# policy type -> variant name -> accel configs combined (empty: the reference)
VARIANTS = {
    "simvla": {
        "reference": [],
        "flow_5": ["flow_5"],
        "flow_2": ["flow_2"],
        "chunk_10": ["chunk_10"],
        "keep_tokens_8": ["keep_tokens_8"],
        "int8": ["int8"],
        "flow_1": ["flow_1"],
        "flow_2+chunk_10": ["flow_2", "chunk_10"],
        "flow_1+chunk_10": ["flow_1", "chunk_10"],
        "flow_1+chunk_10+keep_tokens_8": ["flow_1", "chunk_10", "keep_tokens_8"],
    },
    "diffusion": {
        "reference": [],
        "denoise_5": ["denoise_5"],
        "denoise_2": ["denoise_2"],
        "chunk_8": ["chunk_8"],
        "chunk_12": ["chunk_12"],
        "denoise_2+chunk_12": ["denoise_2", "chunk_12"],
        "denoise_2+chunk_15": ["denoise_2", "chunk_15"],
    },
    "act": {"reference": [], "chunk_8": ["chunk_8"], "chunk_12": ["chunk_12"]},
}
OBS = {"simvla": ("full", 64), "diffusion": ("state", 96), "act": ("state", 96)}
TASKS = {"soft_lift": ["SoftLift"], "soft_squeeze": ["SoftSqueeze"], "soft_place": ["SoftPlace"]}


def accel_overrides(names: list[str]) -> dict:
    """The merged ``overrides`` of the named ``configs/accel`` files."""
    merged: dict = {}
    for name in names:
        merged.update(
            yaml.safe_load((ROOT / "configs" / "accel" / f"{name}.yaml").read_text())["overrides"]
        )
    return merged


def bench_one(path: str, specs, scratch: Path, args) -> dict:
    policy_type = json.loads((Path(path) / "config.json").read_text())["type"]
    obs_mode, image_size = OBS.get(policy_type, ("state", 96))
    trained = read_env_record(Path(path))  # the env settings of the training data
    obs_mode = trained.get("obs_mode", obs_mode)
    image_size = trained.get("image_size", image_size)
    gripper_mode = trained.get("gripper_mode", "continuous")
    env_config = EnvConfig(obs_mode=obs_mode, image_size=image_size, gripper_mode=gripper_mode)
    variants = VARIANTS.get(policy_type, {"reference": []})
    overrides = {name: accel_overrides(accels) for name, accels in variants.items()}
    jobs = {
        name: EpisodeJob(
            functools.partial(load_policy, path=path, overrides=knobs),
            env_config,
            name,
            json.dumps(knobs, sort_keys=True),
        )
        for name, knobs in overrides.items()
    }
    # Interleaved: every variant runs spec k before any runs spec k + 1 (each run directory
    # resumes), so a slower spell of a shared machine falls on all variants alike.
    for count in range(1, len(specs) + 1):
        for name, job in jobs.items():
            evaluate(scratch / f"{policy_type}_{name}", specs[:count], job, progress=False)
    results = {}
    for name, accels in variants.items():
        records = evaluate(scratch / f"{policy_type}_{name}", specs, jobs[name], progress=False)
        steps = sum(r.steps for r in records)
        compute = sum(r.policy_compute_s for r in records)
        successes = sum(r.success for r in records)
        results[name] = {
            "accel": accels,
            "overrides": overrides[name],
            "episodes": len(records),
            "compute_per_step_s": compute / steps,
            "network_evaluations_per_step": sum(r.network_evaluations for r in records) / steps,
            "control_budget_ratio": compute / steps / CONTROL_PERIOD_S,
            "tsr": binomial_rate(successes, len(records)).to_dict(),
            "dsr": binomial_rate(sum(r.dsr_success for r in records), len(records)).to_dict(),
            "errors": sum(r.error is not None for r in records),
        }
        print(
            f"{policy_type:9s} {name:20s} {1000 * compute / steps:7.2f} ms/step  "
            f"TSR {successes}/{len(records)}",
            flush=True,
        )
    reference = results["reference"]["compute_per_step_s"]
    evaluations = results["reference"]["network_evaluations_per_step"]
    for row in results.values():
        row["speedup_vs_reference"] = reference / row["compute_per_step_s"]
        row["network_evaluation_ratio"] = evaluations / row["network_evaluations_per_step"]
    return {
        "checkpoint": path,
        "policy_type": policy_type,
        "obs_mode": obs_mode,
        "image_size": image_size,
        "gripper_mode": gripper_mode,
        "variants": results,
        "fastest_speedup": max(row["speedup_vs_reference"] for row in results.values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--policies",
        nargs="+",
        default=["diffusion", "act", "vla"],
        help="policy config names under configs/policy (their `path` is benchmarked)",
    )
    parser.add_argument("--env", default="soft_lift", choices=sorted(TASKS))
    parser.add_argument(
        "--objects", nargs="+", default=["sponge", "tofu", "foam_cylinder", "dumpling"]
    )
    parser.add_argument("--episodes", type=int, default=2, help="per object")
    args = parser.parse_args()

    specs = make_specs("soft", TASKS[args.env], args.objects, ["default"], args.episodes)
    policies = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.policies:
            config = yaml.safe_load((ROOT / "configs" / "policy" / f"{name}.yaml").read_text())
            policies[name] = bench_one(str(ROOT / config["path"]), specs, Path(scratch), args)
            policies[name]["checkpoint"] = config["path"]
    write_json_atomic(
        OUT,
        {
            "env": args.env,
            "objects": args.objects,
            "episodes_per_object": args.episodes,
            "policies": policies,
            "fastest_speedup": {name: row["fastest_speedup"] for name, row in policies.items()},
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
            "command": "python scripts/bench_policy.py --policies "
            + " ".join(args.policies)
            + f" --env {args.env} --objects {' '.join(args.objects)} --episodes {args.episodes}",
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        },
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
