"""Benchmarks recording videos and a dataset in the scoring pass, and writes
benchmarks/results/record.json.

On the same specs (SoftLift on sponge, tofu and foam cylinder, ``--episodes`` seeds each, gentle
expert, state observations, delta gripper), with 2 videos and a dataset of every episode, per
backend:

* ``scoring_s``: the evaluation alone (no observers), the floor both designs start from;
* ``old_s``: what ``simroll eval`` did before issue 14: the scoring pass, then a serial re-run in
  this process of the 2 filmed episodes (rendering) and of every episode into one dataset
  (:func:`record_serially`: one :class:`~simroll.rollout.dataset.DatasetRecorder` watching
  every episode in turn, as ``simroll collect`` also did before it ran on the backends);
* ``one_pass_s``: the scoring pass with the video and dataset-shard observers in its workers,
  then :func:`simroll.rollout.dataset.merge_shards` (``merge_s`` of it);
* ``episodes_run``: episodes each design ran (the old one ran every recorded episode twice).

LeRobot's dataset stack is imported in this process before any timing (the old design paid
that once, here); vector workers get it from their forkserver's preload, started by the one-pass
run, which goes first, as in a ``simroll eval`` process.
Each row is stored under ``<backend>/<episodes>`` with its date and the machine's load; rows of
other backends and sizes already in record.json are kept. Run: ``python scripts/bench_record.py``
(about 3 minutes on 2 cores; close other work first), ``--episodes 5 --backends vector`` for a
larger run on one backend.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from simroll.experts import SoftExpert  # noqa: E402
from simroll.rollout.backends import EpisodeJob  # noqa: E402
from simroll.rollout.dataset import DatasetRecorder, DatasetShards, merge_shards  # noqa: E402
from simroll.rollout.episode import EnvConfig, EnvPool, run_episode  # noqa: E402
from simroll.rollout.runner import evaluate, make_specs  # noqa: E402
from simroll.rollout.store import write_json_atomic  # noqa: E402
from simroll.rollout.video import EpisodeVideos  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "record.json"
ENV = EnvConfig(obs_mode="state", gripper_mode="delta")
VIDEOS = 2


def gentle_expert(env):
    return SoftExpert(env, "gentle")


def record_serially(root: Path, specs, policy_factory, env_config: EnvConfig) -> None:
    """The old design's dataset: every spec run in this process into one dataset at ``root``."""
    pool = EnvPool(env_config)
    try:
        with DatasetRecorder(root, pool.get(specs[0]).observation_space) as recorder:
            for spec in specs:
                recorder.record(spec, policy_factory, env=pool.get(spec))
    finally:
        pool.close()


def measure(backend: str, specs, scratch: Path) -> dict:
    filmed = frozenset(spec.key for spec in specs[:VIDEOS])
    # The one-pass run first: a vector backend's forkserver starts with the preload of the
    # first job it serves (LeRobot's dataset stack for shards), as in a `simroll eval` process.
    shards = DatasetShards(scratch / "new" / "dataset_shards")
    observers = (EpisodeVideos(scratch / "new" / "videos", filmed), shards)
    start = time.perf_counter()
    job = EpisodeJob(gentle_expert, ENV, "expert", "bench", observers=observers)
    records = evaluate(scratch / "new", specs, job, backend, workers=2, progress=False)
    merge_start = time.perf_counter()
    merge_shards(shards, records, scratch / "new" / "dataset")
    merge = time.perf_counter() - merge_start
    one_pass = time.perf_counter() - start
    one_pass_runs = records.episodes_run

    job = EpisodeJob(gentle_expert, ENV, "expert", "bench")
    start = time.perf_counter()
    evaluate(scratch / "scoring", specs, job, backend, workers=2, progress=False)
    scoring = time.perf_counter() - start

    start = time.perf_counter()
    records = evaluate(scratch / "old", specs, job, backend, workers=2, progress=False)
    videos = EpisodeVideos(scratch / "old" / "videos", filmed)
    for spec in specs[:VIDEOS]:
        run_episode(spec, gentle_expert, env_config=ENV, observers=[videos(spec)])
    record_serially(scratch / "old" / "dataset", specs, gentle_expert, ENV)
    old = time.perf_counter() - start
    old_runs = records.episodes_run + VIDEOS + len(specs)
    row = {
        "episodes": len(specs),
        "scoring_s": round(scoring, 2),
        "old_s": round(old, 2),
        "one_pass_s": round(one_pass, 2),
        "merge_s": round(merge, 2),
        "one_pass_over_old": round(one_pass / old, 3),
        "episodes_run": {"old": old_runs, "one_pass": one_pass_runs},
    }
    print(f"{backend}: {row}")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2, help="seeds per object")
    parser.add_argument("--backends", nargs="+", default=["local", "vector"])
    args = parser.parse_args()
    import lerobot.datasets.aggregate  # noqa: F401  (imported before any timing)

    specs = make_specs(
        "soft", ["SoftLift"], ["sponge", "tofu", "foam_cylinder"], ["default"], args.episodes
    )
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_record_") as scratch:
        for backend in args.backends:
            row = measure(backend, specs, Path(scratch) / backend)
            row.update(
                date=datetime.date.today().isoformat(),
                load_average_1min=round(os.getloadavg()[0], 2),
            )
            results[f"{backend}/{len(specs)}"] = row
    # rows of other backends and sizes, measured earlier, are kept
    earlier = json.loads(OUT.read_text()).get("runs", {}) if OUT.exists() else {}
    write_json_atomic(
        OUT,
        {
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
            "videos": VIDEOS,
            "runs": {**earlier, **results},
        },
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
