"""Benchmarks the evaluation engine and writes benchmarks/results/eval.json.

Measured in one run, on the same 20 specs (SoftLift and SoftSqueeze on sponge and foam cylinder,
5 seeds each, gentle expert, state observations):
* throughput: episodes per second of the ``vector`` backend with 2 workers divided by the
  ``local`` backend's (goal >= 1.6 on 2 cores; worker start-up is included);
* engine overhead: wall time of ``run_episode`` per episode divided by a bare loop
  (``env.reset`` + ``policy.select_action`` + ``env.step``) on the same envs, minus 1
  (goal <= 5 %). The two are interleaved spec by spec so that machine load affects both alike.

Run: ``python scripts/bench_eval.py`` (about 2 minutes on 2 cores). Close other work first.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402

from simroll.experts import SoftExpert  # noqa: E402
from simroll.rollout.backends import EpisodeJob, run_backend  # noqa: E402
from simroll.rollout.episode import EnvConfig, EnvPool, run_episode  # noqa: E402
from simroll.rollout.runner import make_specs  # noqa: E402
from simroll.rollout.store import write_json_atomic  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "eval.json"


def gentle_expert(env):
    return SoftExpert(env, "gentle")


def bare_episode(env, spec) -> int:
    policy = gentle_expert(env)
    obs, _ = env.reset(seed=spec.seed, options={"variation": spec.variation})
    policy.reset()
    steps = 0
    while True:
        obs, _, terminated, truncated, _ = env.step(policy.select_action(obs))
        steps += 1
        if terminated or truncated:
            return steps


def main() -> None:
    specs = make_specs(
        "soft", ["SoftLift", "SoftSqueeze"], ["sponge", "foam_cylinder"], ["default"], episodes=5
    )
    job = EpisodeJob(gentle_expert, EnvConfig(), "expert/gentle", "bench")

    start = time.perf_counter()
    local = list(run_backend("local", job, specs))
    local_s = time.perf_counter() - start
    start = time.perf_counter()
    vector = list(run_backend("vector", job, specs, workers=2))
    vector_s = time.perf_counter() - start
    same = sorted((r.spec.key, r.success, r.steps, r.peak_deformation) for r in local) == sorted(
        (r.spec.key, r.success, r.steps, r.peak_deformation) for r in vector
    )

    pool = EnvPool(EnvConfig())
    engine_times, bare_times = [], []
    for spec in specs:  # warm the pool's envs
        bare_episode(pool.get(spec), spec)
    for _ in range(2):
        for spec in specs:
            env = pool.get(spec)
            start = time.perf_counter()
            bare_episode(env, spec)
            bare_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            run_episode(spec, gentle_expert, env=env)
            engine_times.append(time.perf_counter() - start)
    pool.close()
    overhead = sum(engine_times) / sum(bare_times) - 1.0

    result = {
        "specs": len(specs),
        "local": {"seconds": local_s, "episodes_per_s": len(specs) / local_s},
        "vector_2_workers": {"seconds": vector_s, "episodes_per_s": len(specs) / vector_s},
        "vector_speedup": local_s / vector_s,
        "vector_speedup_goal": 1.6,
        "identical_outcomes": same,
        "engine_overhead": overhead,
        "engine_overhead_goal": 0.05,
        "engine_episode_s_median": statistics.median(engine_times),
        "bare_episode_s_median": statistics.median(bare_times),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "mujoco": mujoco.__version__,
        },
        "command": "python scripts/bench_eval.py",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    write_json_atomic(OUT, result)
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))


if __name__ == "__main__":
    main()
