"""Benchmarks the evaluation engine and writes benchmarks/results/eval.json.

Throughput and engine overhead are measured in one run on the same 20 specs (SoftLift and
SoftSqueeze on sponge and foam cylinder, 5 seeds each, gentle expert, state observations):
* throughput: episodes per second of the ``vector`` backend with 2 workers divided by the
  ``local`` backend's (goal >= 1.6 on 2 cores; worker start-up is included);
* engine overhead: wall time of ``run_episode`` per episode divided by a bare loop
  (``env.reset`` + ``policy.select_action`` + ``env.step``) on the same envs, minus 1
  (goal <= 5 %). The two are interleaved spec by spec so that machine load affects both alike;
* resume overhead (``resume``): a run directory holding 10,000 synthetic records (and one holding
  2,000) with 500 specs still pending; the wall time from calling ``evaluate`` to the moment it
  hands the pending specs to a backend (reading and checking the store, working out what is
  pending and each spec's attempt; goal < 2 s), in wall and in CPU seconds (on a shared machine
  the wall time includes waiting for a core), next to one read of the store. The engine before
  this benchmark read the whole store once per pending spec; ``old_engine_estimate_s`` is that
  many reads times one measured read (an estimate, not a run).

Run: ``python scripts/bench_eval.py`` (about 2 minutes on 2 cores; close other work first), or
``python scripts/bench_eval.py --only resume`` (about 20 s) to re-measure one part: the other
part's figures in eval.json are kept as they were, each part carrying its own date.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402

from simroll.experts import SoftExpert  # noqa: E402
from simroll.io import write_json_atomic  # noqa: E402
from simroll.rollout import runner  # noqa: E402
from simroll.rollout.backends import EpisodeJob, run_backend  # noqa: E402
from simroll.rollout.episode import EnvConfig, EnvPool, run_episode  # noqa: E402
from simroll.rollout.records import EpisodeRecord, EpisodeSpec  # noqa: E402
from simroll.rollout.runner import evaluate, make_specs  # noqa: E402
from simroll.rollout.store import RecordStore  # noqa: E402

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


class _HandedToBackend(BaseException):
    """Stops ``evaluate`` where it would start running episodes."""


def synthetic_record(spec: EpisodeSpec) -> EpisodeRecord:
    return EpisodeRecord(
        spec=spec,
        policy_id="expert/gentle",
        policy_config_hash="bench",
        success=True,
        steps=120,
        sim_time=6.0,
        termination_reason="success",
        peak_deformation=0.012,
        tolerance=0.05,
        policy_calls=120,
        policy_compute_s=0.01,
        episode_wall_s=0.4,
        extra={"attempt": 1},
    )


def bench_resume(stored: int, pending: int = 500) -> dict:
    """Seconds from ``evaluate`` to its first backend call on a store of ``stored`` records."""
    specs = make_specs("soft", ["SoftLift"], ["sponge"], ["default"], episodes=stored + pending)
    job = EpisodeJob(gentle_expert, EnvConfig(), "expert/gentle", "bench")
    handed: list[int] = []

    def first_backend_call(backend, job, todo, workers, attempts):
        handed.append(len(todo))
        raise _HandedToBackend

    with tempfile.TemporaryDirectory() as scratch:
        store = RecordStore(scratch)
        lines = (synthetic_record(spec).to_json() + "\n" for spec in specs[:stored])
        store.path.write_text("".join(lines))
        start = time.perf_counter()
        contents = store.load()
        load_s = time.perf_counter() - start
        assert contents.ok and len(contents.records) == stored, contents.summary()
        real_run_backend = runner.run_backend
        runner.run_backend = first_backend_call
        try:
            start, cpu_start = time.perf_counter(), time.process_time()
            try:
                evaluate(scratch, specs, job, progress=False)
            except _HandedToBackend:
                pass
            overhead_s = time.perf_counter() - start
            overhead_cpu_s = time.process_time() - cpu_start
        finally:
            runner.run_backend = real_run_backend
    assert handed == [pending], handed
    return {
        "stored_records": stored,
        "pending_specs": pending,
        "resume_overhead_s": overhead_s,
        "resume_overhead_cpu_s": overhead_cpu_s,  # the same, less time waiting for a busy CPU
        "store_read_s": load_s,
        "old_engine_estimate_s": (pending + 2) * load_s,
    }


def measure_resume() -> dict:
    return {
        "stores": [bench_resume(2000), bench_resume(10_000)],
        "resume_overhead_goal_s": 2.0,
        "command": "python scripts/bench_eval.py --only resume",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_average_1min": os.getloadavg()[0],
    }


def measure_throughput() -> dict:
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

    return {
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
        "command": "python scripts/bench_eval.py --only throughput",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_average_1min": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("throughput", "resume"), default=None)
    args = parser.parse_args()
    result = json.loads(OUT.read_text()) if args.only and OUT.exists() else {}
    if args.only in (None, "throughput"):
        result.update(measure_throughput())
    if args.only in (None, "resume"):
        result["resume"] = measure_resume()
    result["machine"] = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "mujoco": mujoco.__version__,
    }
    write_json_atomic(OUT, result)
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))


if __name__ == "__main__":
    main()
