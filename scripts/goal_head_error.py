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

For a checkpoint whose action decoder reads a goal (``goal_conditioning``: the head's estimate,
or with ``goal_source="label"`` / ``"label_offset"`` the true target / its offset from the hand),
the same frames also measure how much the
decoder listens: the first action of the chunk sampled from ``--draws`` fixed noise draws (scaled
by ``--noise-scale``, the evaluation's setting) with the goal it reads, and with that goal moved
``--shift`` metres along x and along y. ``decoder_response`` gives, per phase, the median change
of the hand's (x, y) command (action units, the env's [-1, 1]) under each shift, beside the
median spread of that command over the noise draws. A decoder that ignores its goal input
changes its command far less than its own sampling spread.
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
    from simroll.train.goal_labels import HAND_XY

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", required=True, help="a SimVLA checkpoint with a goal head")
    parser.add_argument(
        "--objects", nargs="+", default=["sponge", "tofu", "foam_cylinder", "dumpling"]
    )
    parser.add_argument("--episodes", type=int, default=5, help="per object")
    parser.add_argument("--seed", type=int, default=0, help="base seed of the specs")
    parser.add_argument("--every", type=int, default=5, help="evaluate every this many steps")
    parser.add_argument("--output", default="benchmarks/results/goal_head_error.json")
    parser.add_argument("--shift", type=float, default=0.05, help="goal shift (m), conditioned")
    parser.add_argument("--draws", type=int, default=4, help="noise draws per frame, conditioned")
    parser.add_argument("--noise-scale", type=float, default=0.5, help="of the noise draws")
    args = parser.parse_args(argv)

    specs = make_specs("soft", ["SoftPlace"], args.objects, ["default"], args.episodes, args.seed)
    errors: dict[str, list[float]] = defaultdict(list)
    rows: list[tuple[str, np.ndarray, np.ndarray]] = []  # (phase, prediction, target)
    responses: dict[str, list[tuple[float, float, float]]] = defaultdict(list)  # (dx, dy, spread)
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
                    if model.config.goal_source == "label_offset":  # the head learnt the offset
                        predicted = predicted + obs["agent_pos"][HAND_XY]
                    if model.config.goal_conditioning:
                        response = decoder_response(policy, obs, batch, args, seed=step)
                        responses[expert.phase or "start"].append(response)
                        responses["all"].append(response)
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

    def response_stats(values: list[tuple[float, float, float]]) -> dict:
        dx, dy, spread = np.array(values).T
        return {
            "frames": len(values),
            "median_change_shift_x": float(np.median(dx)),
            "median_change_shift_y": float(np.median(dy)),
            "median_sampling_spread": float(np.median(spread)),
        }

    result = {
        "command": "python scripts/goal_head_error.py " + " ".join(argv or []),
        "policy": args.policy,
        "specs": len(specs),
        "every": args.every,
        "phases": {phase: stats(values) for phase, values in errors.items()},
        "baseline_mean_target": stats(baseline),
    }
    if responses:
        result["decoder_reads"] = model.config.goal_source
        result["decoder_response"] = {
            "shift_m": args.shift,
            "draws": args.draws,
            "noise_scale": args.noise_scale,
            "phases": {phase: response_stats(values) for phase, values in responses.items()},
        }
    write_json_atomic(Path(args.output), result)
    for phase, values in result["phases"].items():
        print(
            f"{phase:>10}: {values['frames']:4d} frames, "
            f"median {values['median_m'] * 100:.1f} cm, p90 {values['p90_m'] * 100:.1f} cm"
        )
    base = result["baseline_mean_target"]
    print(f"  baseline: median {base['median_m'] * 100:.1f} cm, p90 {base['p90_m'] * 100:.1f} cm")
    for phase, values in result.get("decoder_response", {}).get("phases", {}).items():
        print(
            f"{phase:>10}: goal moved {args.shift * 100:.0f} cm along x / y changes the hand's "
            f"(x, y) command by {values['median_change_shift_x']:.4f} / "
            f"{values['median_change_shift_y']:.4f} (sampling spread "
            f"{values['median_sampling_spread']:.4f})"
        )
    return result


def decoder_response(policy, obs: dict, batch: dict, args, seed: int) -> tuple[float, float, float]:
    """The hand's (x, y) command's change when the goal the decoder reads moves ``args.shift``
    along x and along y (mean over ``args.draws`` fixed noise draws), and its spread over them."""
    import torch

    from simroll.features import GOAL_LABEL_KEY

    model = policy.policy.model
    scale = model.config.goal_loss_scale
    source = model.config.goal_source
    batch = policy.with_goal(batch, obs)  # the true target, for a decoder that reads it
    reads = model.goal_condition
    generator = torch.Generator().manual_seed(seed)
    shape = (args.draws, model.config.chunk_size, model.action_dim)
    noise = torch.randn(shape, generator=generator) * args.noise_scale
    drawn = {
        key: value.expand(args.draws, *value.shape[1:])
        for key, value in batch.items()
        if isinstance(value, torch.Tensor)
    }
    drawn["task"] = batch["task"] * args.draws

    def first_xy(shift: tuple[float, float]) -> np.ndarray:
        moved = torch.tensor(shift, dtype=torch.float32)

        def shifted(predicted, batch):
            if source != "estimate":
                return reads(predicted, {**batch, GOAL_LABEL_KEY: batch[GOAL_LABEL_KEY] + moved})
            return reads(predicted + moved / scale, batch)

        model.goal_condition = shifted
        try:
            with torch.no_grad():
                chunk = policy.postprocessor(model.sample(drawn, noise=noise))
        finally:
            del model.goal_condition  # the instance attribute; the method shows through again
        return chunk[:, 0, :2].cpu().numpy()

    base = first_xy((0.0, 0.0))
    change_x = np.linalg.norm(first_xy((args.shift, 0.0)) - base, axis=-1).mean()
    change_y = np.linalg.norm(first_xy((0.0, args.shift)) - base, axis=-1).mean()
    spread = float(np.linalg.norm(base.std(axis=0)))
    return float(change_x), float(change_y), spread


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
