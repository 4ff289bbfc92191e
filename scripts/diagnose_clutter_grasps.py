"""Why a clutter student's grasps fail: re-runs its failed grasps with the truth logged.

From a ``bench_clutter.py`` runs directory, takes the scenes where the student (``--student``,
a run name under ``--runs``) ended with ``grasp_failed`` while the reference (``--reference``,
by default the plan-following labeller) succeeded, re-runs the first ``--episodes`` of them
with the student's checkpoint (same specs, same env settings as the benchmark, local backend)
and logs, at every grasp the student takes, what the observation's ``grasp_check`` said and
whether the grasp was clear in the true state (the teacher's own test,
:func:`simroll.experts.clutter.teacher.blockage`). Writes the per-episode rows and the counts to
``--out`` (JSON, atomically) and prints the counts.

Run: ``python scripts/diagnose_clutter_grasps.py --runs runs/clutter100 --student
trace_budget_dagger --checkpoint runs/trace_budget_dagger/round_03/train/checkpoints/last
--episodes 20 --out benchmarks/results/clutter_grasp_diagnosis.json`` (about 2 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")


def failed_grasps(runs: Path, student: str, reference: str) -> list:
    """Specs the student failed by its grasp and the reference retrieved, from the runs'
    record stores (:class:`simroll.rollout.store.RecordStore`, which validates every row)."""
    from simroll.rollout.store import RECORDS_FILENAME, RecordStore

    def load(name: str) -> dict:
        if not (runs / name / RECORDS_FILENAME).is_file():
            raise SystemExit(
                f"no records at {runs / name / RECORDS_FILENAME}: run bench_clutter.py with "
                f"{name} first"
            )
        return RecordStore(runs / name).load().records

    mine, theirs = load(student), load(reference)
    return [
        record.spec
        for key, record in mine.items()
        if record.termination_reason == "grasp_failed" and key in theirs and theirs[key].success
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--student", required=True, help="the student's run name under --runs")
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--reference", default="plan_labeller")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")

    import numpy as np

    from simroll.experts.clutter.teacher import blockage
    from simroll.features import GRASP_PRIMITIVE
    from simroll.io import write_json_atomic
    from simroll.policies.lerobot import load_policy
    from simroll.rollout.episode import EnvConfig, EpisodeObserver, run_episode

    class GraspLog(EpisodeObserver):
        """At every step, the observation the action was chosen on and the true clearness."""

        def on_reset(self, env, obs, info, policy):
            self.before = (obs, blockage(env.unwrapped)[1])
            self.grasps: list[dict[str, Any]] = []

        def on_step(self, env, obs, info, action):
            seen, clear = self.before
            if int(np.asarray(action).reshape(-1)[0]) == GRASP_PRIMITIVE:
                check = np.asarray(seen["grasp_check"], dtype=float)
                self.grasps.append(
                    {
                        "plan_step": int(seen["plan_step"]),
                        "plan_length": int(seen["plan_length"]),
                        "check_clear": bool(check[0] > 0.5),
                        "true_clear": bool(clear),
                    }
                )
            self.before = (obs, blockage(env.unwrapped)[1])

    specs = failed_grasps(args.runs, args.student, args.reference)[: args.episodes]
    config = EnvConfig(obs_mode="full", gripper_mode="delta", image_size=96)  # bench_clutter's
    rows = []
    for spec in specs:
        log = GraspLog()
        record = run_episode(
            spec, lambda env: load_policy(env, args.checkpoint), env_config=config, observers=[log]
        )
        rows.append(
            {
                "spec": spec.to_dict(),
                "success": record.success,
                "termination_reason": record.termination_reason,
                "grasps": log.grasps,
            }
        )
    last = [row["grasps"][-1] for row in rows if row["grasps"]]
    counts = {
        "episodes": len(rows),
        "ended_by_failed_grasp": sum(r["termination_reason"] == "grasp_failed" for r in rows),
        "grasps_check_not_clear": sum(not g["check_clear"] for g in last),
        "of_which_truly_not_clear": sum(not g["check_clear"] and not g["true_clear"] for g in last),
        "grasps_check_clear": sum(g["check_clear"] for g in last),
        "of_which_truly_clear": sum(g["check_clear"] and g["true_clear"] for g in last),
    }
    payload = {
        "command": "python scripts/diagnose_clutter_grasps.py " + " ".join(argv or sys.argv[1:]),
        "student": args.student,
        "checkpoint": str(args.checkpoint),
        "reference": args.reference,
        "counts": counts,
        "episodes": rows,
    }
    write_json_atomic(args.out, payload)
    print(json.dumps(counts, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
