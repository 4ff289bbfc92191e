"""Benchmarks ``simroll collect`` on the local and the vector backend, and writes
benchmarks/results/collect.json (atomically).

Runs the same collect twice, as users run it (a ``simroll collect`` process each, start-up and
the final merge of the shards included): ``env=soft_lift env.image_size=64 policy=expert_noisy``
with full observations, camera and tactile videos and the tactile image (collect's defaults), on
the 4 soft objects x ``--episodes`` (3) seeds, once with ``backend=local`` and once with
``backend=vector backend.workers=--workers`` (2). Each figure is episodes per minute of the
command's wall time. The two datasets must hold the same episodes in the same order with
identical ``action`` and ``observation.state`` columns and the same record receipts
(``identical``); the script fails otherwise. The machine is shared: the 1-minute load average
before and after each run is stored with it.

``--merge-sources N`` also times the join of N one-episode datasets into one, as a collect of N
kept episodes joins its shards (420: the soft_suite demonstration set): copies of one shard
recorded here (SoftLift on the sponge, same settings), joined once in one flat
``aggregate_datasets`` call and once in groups (as :func:`simroll.rollout.dataset.join_datasets`
joins more than 32 sources), stored under ``merge``.

Run: ``nice python scripts/bench_collect.py`` (about 2 minutes on 2 cores; with
``--merge-sources 420`` about 10 more).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_env import machine_info  # scripts/ is on sys.path when this file runs

os.environ.setdefault("MUJOCO_GL", "egl")

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "collect.json"
SETTINGS = ("env=soft_lift", "env.image_size=64", "policy=expert_noisy")
REPO_ID = "simroll/bench_collect"


def collect(output: Path, episodes: int, backend: list[str]) -> dict:
    """One ``simroll collect`` process into ``output``; its wall time and the machine's load."""
    command = [
        sys.executable,
        "-m",
        "simroll.cli.main",
        "collect",
        *SETTINGS,
        f"episodes={episodes}",
        f"repo_id={REPO_ID}",
        f"output_dir={output}",
        "progress=false",
        *backend,
    ]
    print(" ".join(["simroll", *command[3:]]), flush=True)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"collect failed ({result.returncode}):\n{result.stderr[-3000:]}")
    print(f"  {wall:.1f} s: {result.stdout.strip().splitlines()[-1]}", flush=True)
    return {
        "wall_s": round(wall, 2),
        "load_average_1min_before": round(load_before, 2),
        "load_average_1min_after": round(os.getloadavg()[0], 2),
    }


def contents(root: Path) -> dict:
    from simroll.rollout.dataset import load_episode_meta
    from simroll.rollout.lerobot_io import open_dataset

    dataset = open_dataset(REPO_ID, root=root)
    data = dataset.hf_dataset.with_format("numpy")[:]
    rows = load_episode_meta(root)
    return {
        "episodes": dataset.num_episodes,
        "frames": dataset.num_frames,
        "action": np.asarray(data["action"]),
        "observation.state": np.asarray(data["observation.state"]),
        "spec_keys": [rows[index]["spec_key"] for index in sorted(rows)],
        "receipts": [rows[index]["record"]["receipt"] for index in sorted(rows)],
    }


def compare(local: dict, vector: dict) -> dict:
    def same(key: str) -> bool:
        if isinstance(local[key], np.ndarray):
            return local[key].shape == vector[key].shape and bool(
                np.array_equal(local[key], vector[key])
            )
        return local[key] == vector[key]

    return {
        key.replace(".", "_"): same(key)
        for key in ("spec_keys", "receipts", "action", "observation.state")
    }


def one_shard(scratch: Path) -> Path:
    """A one-episode dataset shard of SoftLift on the sponge, recorded as the collects record."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from simroll.rollout.backends import EpisodeJob
    from simroll.rollout.dataset import DatasetShards
    from simroll.rollout.episode import EnvConfig
    from simroll.rollout.runner import evaluate, make_specs

    policy = instantiate(OmegaConf.load(ROOT / "configs" / "policy" / "expert_noisy.yaml"))
    env = EnvConfig(obs_mode="full", image_size=64, gripper_mode="delta")
    shards = DatasetShards(scratch / "shards", repo_id=REPO_ID, with_tactile_image=True)
    spec = make_specs("soft", ["SoftLift"], ["sponge"], ["default"], 1, 1000)[0]
    job = EpisodeJob(policy, env, "expert_noisy", "bench", observers=(shards,))
    evaluate(scratch / "shard_run", [spec], job, "local", progress=False)
    return shards.path(spec)


def time_merge(copies: int, scratch: Path) -> dict:
    """Join ``copies`` of a one-episode shard, in groups and flat; seconds each."""
    from simroll.rollout import dataset

    source = one_shard(scratch)
    result: dict = {"sources": copies}
    default = dataset.JOIN_GROUP_LIMIT
    for name, limit in (("grouped", default), ("flat", copies)):
        dataset.JOIN_GROUP_LIMIT = limit  # no groups when the limit is the number of sources
        start = time.perf_counter()
        try:
            episodes, frames = dataset.join_datasets(
                [source] * copies, scratch / f"merge_{name}", repo_id=REPO_ID
            )
        finally:
            dataset.JOIN_GROUP_LIMIT = default
        result[f"{name}_s"] = round(time.perf_counter() - start, 2)
        result.update(episodes=episodes, frames=frames)
        print(f"join of {copies} one-episode datasets, {name}: {result[f'{name}_s']} s", flush=True)
    result["load_average_1min_after"] = round(os.getloadavg()[0], 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=3, help="seeds per object")
    parser.add_argument("--workers", type=int, default=2, help="vector workers")
    parser.add_argument("--merge-sources", type=int, default=0, help="also time this join")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    machine = machine_info()
    runs: dict[str, dict] = {}
    found: dict[str, dict] = {}
    backends = {
        "local": ["backend=local"],
        "vector": ["backend=vector", f"backend.workers={args.workers}"],
    }
    with tempfile.TemporaryDirectory(prefix="bench_collect_") as scratch:
        for name, overrides in backends.items():
            output = Path(scratch) / name
            runs[name] = collect(output, args.episodes, overrides)
            found[name] = contents(output)
        if args.merge_sources:
            merge = time_merge(args.merge_sources, Path(scratch))
    specs = 4 * args.episodes  # soft_lift's 4 objects
    for name, run in runs.items():
        run.update(
            episodes_run=specs,
            episodes_kept=found[name]["episodes"],
            frames=found[name]["frames"],
            episodes_per_min=round(60 * specs / run["wall_s"], 2),
        )
    runs["vector"]["workers"] = args.workers
    identical = compare(found["local"], found["vector"])
    result = {
        "machine": machine,
        "command": "simroll collect " + " ".join(SETTINGS) + f" episodes={args.episodes}",
        "note": (
            "wall time of each command (start-up, episodes, merge of the shards); full obs, "
            "camera and tactile videos, 64 px; the machine is shared (load averages per run)"
        ),
        "runs": runs,
        "vector_over_local": round(
            runs["vector"]["episodes_per_min"] / runs["local"]["episodes_per_min"], 3
        ),
        "identical": identical,
    }
    if args.merge_sources:
        result["merge"] = merge
    from simroll.rollout.store import write_json_atomic

    write_json_atomic(args.out, result)
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))
    print(f"wrote {args.out}")
    if not all(identical.values()):
        sys.exit(f"the local and vector datasets differ: {identical}")


if __name__ == "__main__":
    main()
