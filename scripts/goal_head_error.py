"""How well a SimVLA's auxiliary goal head locates the SoftPlace target on episodes it never saw.

For each seeded SoftPlace spec the gentle expert drives the episode (so every checkpoint is
judged on the same frames); at every ``--every``-th step the checkpoint's goal head predicts the
target's table position from the observation, and its error (metres) against the env's target
is kept with the expert's phase at that step. The baseline is the error of always predicting the
mean target of the same specs (what a head that ignores the images could do at best).

    python scripts/goal_head_error.py \
        --policy runs/dagger_vla_ft_recover_goal/round_02/train/checkpoints/last

writes ``benchmarks/results/goal_head_error.json``: median and 90th-percentile error per phase
and overall, and the baseline's.
"""

from __future__ import annotations

import argparse
import os
from collections import defaultdict
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> dict:
    os.environ.setdefault("MUJOCO_GL", "egl")
    import torch

    import simroll.envs  # noqa: F401
    from simroll.experts import SoftExpert
    from simroll.io import write_json_atomic
    from simroll.policies.lerobot import load_policy
    from simroll.rollout.episode import EnvConfig, EnvPool
    from simroll.rollout.runner import make_specs

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", required=True, help="a SimVLA checkpoint with a goal head")
    parser.add_argument(
        "--objects", nargs="+", default=["sponge", "tofu", "foam_cylinder", "dumpling"]
    )
    parser.add_argument("--episodes", type=int, default=5, help="per object")
    parser.add_argument("--seed", type=int, default=0, help="base seed of the specs")
    parser.add_argument("--every", type=int, default=5, help="evaluate every this many steps")
    parser.add_argument("--output", default="benchmarks/results/goal_head_error.json")
    args = parser.parse_args(argv)

    specs = make_specs("soft", ["SoftPlace"], args.objects, ["default"], args.episodes, args.seed)
    errors: dict[str, list[float]] = defaultdict(list)
    rows: list[tuple[str, np.ndarray, np.ndarray]] = []  # (phase, prediction, target)
    pool = EnvPool(EnvConfig(obs_mode="full", image_size=64, gripper_mode="delta"))
    policy = None
    for spec in specs:
        env = pool.get(spec)
        if policy is None:
            policy = load_policy(env, args.policy)
            model = policy.policy.model
            if not hasattr(model, "goal_head"):
                raise SystemExit(f"{args.policy} has no goal head (goal_loss_weight is 0)")
        obs, _ = env.reset(seed=spec.seed, options={"variation": spec.variation})
        expert = SoftExpert(env, "gentle")
        expert.reset()
        target = env.unwrapped.goal_position()[:2].copy()
        step, done = 0, False
        while not done:
            action = expert.select_action(obs)
            if step % args.every == 0:
                with torch.no_grad():
                    batch = policy.preprocessor(policy.batch(obs))
                    predicted = model.predict_goal(*model.encode(batch))[0].numpy()
                    predicted = predicted * model.config.goal_loss_scale
                rows.append((expert.phase or "start", predicted, target))
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
            step += 1
    pool.close()

    targets = np.array([row[2] for row in rows])
    mean_target = np.unique(targets, axis=0).mean(axis=0)  # one vote per spec
    baseline: list[float] = []
    for phase, predicted, target in rows:
        error = float(np.linalg.norm(predicted - target))
        errors[phase].append(error)
        errors["all"].append(error)
        baseline.append(float(np.linalg.norm(mean_target - target)))

    def stats(values: list[float]) -> dict:
        return {
            "frames": len(values),
            "median_m": float(np.median(values)),
            "p90_m": float(np.percentile(values, 90)),
        }

    result = {
        "command": "python scripts/goal_head_error.py " + " ".join(argv or []),
        "policy": args.policy,
        "specs": len(specs),
        "every": args.every,
        "phases": {phase: stats(values) for phase, values in errors.items()},
        "baseline_mean_target": stats(baseline),
    }
    write_json_atomic(Path(args.output), result)
    for phase, values in result["phases"].items():
        print(
            f"{phase:>10}: {values['frames']:4d} frames, "
            f"median {values['median_m'] * 100:.1f} cm, p90 {values['p90_m'] * 100:.1f} cm"
        )
    base = result["baseline_mean_target"]
    print(f"  baseline: median {base['median_m'] * 100:.1f} cm, p90 {base['p90_m'] * 100:.1f} cm")
    return result


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
