"""Why a learned SoftSqueeze policy crushes what it squeezes: hand motion or grip force?

Two measurements on SoftSqueeze (delta gripper, seeded specs, each episode run by
:func:`simroll.rollout.episode.run_episode`):

* **Perturbed expert.** The gentle expert (:class:`simroll.experts.SoftExpert`), with its action
  perturbed only while its recovered phase is ``squeeze`` (pads on the object, the hand told to
  stay still): ``none``; ``hand_xyz`` / ``hand_z`` / ``hand_xy`` (each named hand axis moved by a
  random sign times U(``--hand-low``, ``--hand-high``) of the maximum step, the size of a learned
  policy's hand error); ``grip`` (the gripper command plus N(``--grip-mean``, ``--grip-std``)).
  Per mode: successes, successes over the object's deformation tolerance, the median peak
  deformation over tolerance.
* **The policy against the expert.** ``--policy`` (the shipped SimVLA by default) drives; at every
  step the expert labels the same observation (DAgger's mixture at beta 0,
  :class:`simroll.policies.mixing.ExpertMixing`). Over the steps the
  expert calls ``squeeze``: the mean, standard deviation and mean absolute value of the policy's
  action minus the label per action dimension, and the share of steps whose hand-z action is
  more than half a maximum step below the label (pressing down).

Writes ``--out`` (JSON, atomically) and prints a summary.

Run: ``python scripts/diagnose_squeeze.py [--episodes 10] [--policy-episodes 5] [--grip-mean 0.15
--grip-std 0.4] --out benchmarks/results/squeeze_diagnosis.json`` (about 5 minutes on one core).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

OBJECTS = ("sponge", "tofu", "foam_cylinder", "dumpling")
MODES = ("none", "hand_xyz", "hand_z", "hand_xy", "grip")
AXES = ("x", "y", "z", "yaw", "gripper")
HAND_AXES = {"hand_xyz": (0, 1, 2), "hand_z": (2,), "hand_xy": (0, 1)}


def perturbed_expert(mode: str, hand: tuple[float, float], grip: tuple[float, float], seed: int):
    """A policy factory: the gentle expert, its squeeze-phase actions perturbed per ``mode``."""
    import numpy as np

    from simroll.experts import SoftExpert

    class PerturbedExpert(SoftExpert):
        def reset(self) -> None:
            super().reset()
            self.rng = np.random.default_rng(seed)

        def select_action(self, obs) -> np.ndarray:
            action = super().select_action(obs).copy()
            if self.phase != "squeeze" or mode == "none":
                return action
            if mode == "grip":
                action[4] += self.rng.normal(*grip)
            else:
                for axis in HAND_AXES[mode]:
                    action[axis] += self.rng.choice((-1.0, 1.0)) * self.rng.uniform(*hand)
            return np.clip(action, -1.0, 1.0).astype(np.float32)

    return lambda env: PerturbedExpert(env.unwrapped)


def outcome_row(records: list[Any]) -> dict[str, Any]:
    return {
        "episodes": len(records),
        "errors": sum(r.error is not None for r in records),
        "successes": sum(r.success for r in records),
        "successes_over_tolerance": sum(r.success and not r.dsr_success for r in records),
        "median_peak_over_tolerance": statistics.median(
            r.peak_deformation / r.tolerance for r in records
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10, help="per object and mode")
    parser.add_argument("--policy", default="policies/vla_soft")
    parser.add_argument("--policy-episodes", type=int, default=5, help="per object; 0 skips")
    parser.add_argument("--hand-low", type=float, default=0.1)
    parser.add_argument("--hand-high", type=float, default=0.35)
    parser.add_argument("--grip-mean", type=float, default=0.0)
    parser.add_argument("--grip-std", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.policy_episodes < 0:
        parser.error(
            f"--episodes must be >= 1 and --policy-episodes >= 0, got {args.episodes} and "
            f"{args.policy_episodes}"
        )
    if not 0.0 <= args.hand_low <= args.hand_high <= 1.0:
        parser.error(
            f"need 0 <= --hand-low <= --hand-high <= 1, got {args.hand_low}, {args.hand_high}"
        )

    import numpy as np

    from simroll.experts import SoftExpert
    from simroll.io import write_json_atomic
    from simroll.policies.lerobot import load_policy
    from simroll.policies.mixing import ExpertMixing
    from simroll.rollout.episode import EnvConfig, EpisodeObserver, run_episode
    from simroll.rollout.records import EpisodeSpec

    def specs(count: int) -> list[EpisodeSpec]:
        return [
            EpisodeSpec("SoftSqueeze", obj, seed=args.seed + i, index=i)
            for obj in OBJECTS
            for i in range(count)
        ]

    state = EnvConfig(obs_mode="state", gripper_mode="delta")
    perturbed: dict[str, Any] = {}
    for mode in MODES:
        records = [
            run_episode(
                spec,
                perturbed_expert(
                    mode,
                    (args.hand_low, args.hand_high),
                    (args.grip_mean, args.grip_std),
                    spec.seed,
                ),
                env_config=state,
            )
            for spec in specs(args.episodes)
        ]
        perturbed[mode] = outcome_row(records)
        print(f"expert, {mode:8s}: {json.dumps(perturbed[mode])}", flush=True)

    class SqueezeErrors(EpisodeObserver):
        """The policy's action minus the expert's label at each step the expert calls squeeze,
        read from the DAgger mixture that drives (:class:`ExpertMixing`, beta 0: the policy
        acts, the expert labels the same observation)."""

        def on_reset(self, env, obs, info, policy):
            self.mixture = policy
            self.errors: list[np.ndarray] = []

        def on_step(self, env, obs, info, action):
            if self.mixture.expert.phase == "squeeze":
                self.errors.append(np.asarray(action, dtype=float) - self.mixture.action_label)

    def policy_labelled(env):
        return ExpertMixing(load_policy(env, args.policy), SoftExpert(env.unwrapped), env, 0.0)

    policy_part: dict[str, Any] | None = None
    if args.policy_episodes:
        full = EnvConfig(obs_mode="full", gripper_mode="delta", image_size=64)
        records, errors = [], []
        for spec in specs(args.policy_episodes):
            log = SqueezeErrors()
            records.append(run_episode(spec, policy_labelled, env_config=full, observers=[log]))
            errors.extend(log.errors)
        diff = np.array(errors).reshape(-1, len(AXES))
        policy_part = {
            "policy": args.policy,
            **outcome_row(records),
            "squeeze_steps": len(diff),
            "error_mean": dict(zip(AXES, diff.mean(axis=0).round(4).tolist(), strict=True)),
            "error_std": dict(zip(AXES, diff.std(axis=0).round(4).tolist(), strict=True)),
            "error_abs_mean": dict(
                zip(AXES, np.abs(diff).mean(axis=0).round(4).tolist(), strict=True)
            ),
            "share_z_below_label_by_half_step": float(np.mean(diff[:, 2] < -0.5)),
        }
        print(f"policy: {json.dumps(policy_part)}", flush=True)

    payload = {
        "command": "python scripts/diagnose_squeeze.py " + " ".join(argv or sys.argv[1:]),
        "task": "SoftSqueeze",
        "objects": list(OBJECTS),
        "seed": args.seed,
        "hand_perturbation": [args.hand_low, args.hand_high],
        "grip_perturbation": [args.grip_mean, args.grip_std],
        "perturbed_expert": perturbed,
        "policy_against_expert": policy_part,
    }
    write_json_atomic(args.out, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
