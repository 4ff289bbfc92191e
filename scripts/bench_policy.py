"""Per-control-step compute of a learned policy and of its acceleration knobs, in one run.

For a LeRobot checkpoint (``--path``), every variant in ``VARIANTS`` (the reference first, then
fewer denoising/flow steps, longer executed chunks, visual-token pruning, int8 dynamic
quantization, where the policy type has them) is evaluated through the episode engine on the same
seeded specs, and ``benchmarks/results/policy.json`` gets, per variant: measured policy compute per
control step (wall, from the episode records), its ratio to the reference, the control-budget
ratio (compute per step / 50 ms), and TSR/DSR with intervals on those specs.

Run: ``python scripts/bench_policy.py --path runs/train/vla/checkpoints/last --env soft_lift
--episodes 3`` (needs the env's observation mode: ``full`` for SimVLA, ``state`` for the
state-based diffusion policy).
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

os.environ.setdefault("MUJOCO_GL", "egl")

from simroll.policies.lerobot import load_policy  # noqa: E402
from simroll.rollout.backends import EpisodeJob  # noqa: E402
from simroll.rollout.episode import EnvConfig  # noqa: E402
from simroll.rollout.runner import evaluate, make_specs  # noqa: E402
from simroll.rollout.store import write_json_atomic  # noqa: E402
from simroll.scoring.stats import binomial_rate  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "policy.json"
CONTROL_PERIOD_S = 0.05
VARIANTS = {
    "simvla": {
        "reference": {},
        "flow_steps_5": {"num_flow_steps": 5},
        "flow_steps_2": {"num_flow_steps": 2},
        "chunk_10": {"n_action_steps": 10},
        "keep_tokens_8": {"keep_visual_tokens": 8},
        "int8": {"quantize_int8": True},
        "flow_2_chunk_10": {"num_flow_steps": 2, "n_action_steps": 10},
    },
    "diffusion": {
        "reference": {},
        "denoise_5": {"num_inference_steps": 5},
        "denoise_2": {"num_inference_steps": 2},
        "chunk_12": {"n_action_steps": 12},
        "denoise_2_chunk_12": {"num_inference_steps": 2, "n_action_steps": 12},
    },
}
TASKS = {"soft_lift": ["SoftLift"], "soft_squeeze": ["SoftSqueeze"], "soft_place": ["SoftPlace"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", required=True, help="LeRobot checkpoint directory")
    parser.add_argument("--env", default="soft_lift", choices=sorted(TASKS))
    parser.add_argument(
        "--objects", nargs="+", default=["sponge", "tofu", "foam_cylinder", "dumpling"]
    )
    parser.add_argument("--episodes", type=int, default=3, help="per object")
    parser.add_argument("--obs-mode", default="full", choices=["full", "state"])
    parser.add_argument("--image-size", type=int, default=64)
    args = parser.parse_args()

    policy_type = json.loads((Path(args.path) / "config.json").read_text())["type"]
    variants = VARIANTS.get(policy_type, {"reference": {}})
    specs = make_specs("soft", TASKS[args.env], args.objects, ["default"], args.episodes)
    env_config = EnvConfig(obs_mode=args.obs_mode, image_size=args.image_size)
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, overrides in variants.items():
            factory = functools.partial(load_policy, path=args.path, overrides=overrides)
            job = EpisodeJob(factory, env_config, name, json.dumps(overrides, sort_keys=True))
            records = evaluate(Path(scratch) / name, specs, job, progress=False)
            steps = sum(r.steps for r in records)
            compute = sum(r.policy_compute_s for r in records)
            successes = sum(r.success for r in records)
            results[name] = {
                "overrides": overrides,
                "episodes": len(records),
                "compute_per_step_s": compute / steps,
                "control_budget_ratio": compute / steps / CONTROL_PERIOD_S,
                "tsr": binomial_rate(successes, len(records)).to_dict(),
                "dsr": binomial_rate(sum(r.dsr_success for r in records), len(records)).to_dict(),
                "errors": sum(r.error is not None for r in records),
            }
            print(
                f"{name:22s} {1000 * compute / steps:7.2f} ms/step  TSR {successes}/{len(records)}"
            )
    reference = results["reference"]["compute_per_step_s"]
    for row in results.values():
        row["speedup_vs_reference"] = reference / row["compute_per_step_s"]
    write_json_atomic(
        OUT,
        {
            "checkpoint": args.path,
            "policy_type": policy_type,
            "env": args.env,
            "objects": args.objects,
            "episodes_per_object": args.episodes,
            "variants": results,
            "fastest_speedup": max(row["speedup_vs_reference"] for row in results.values()),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
            "command": "python scripts/bench_policy.py "
            + " ".join(
                f"--{k.replace('_', '-')} {' '.join(v) if isinstance(v, list) else v}"
                for k, v in vars(args).items()
            ),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        },
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
