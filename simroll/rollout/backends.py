"""Where episodes run: in-process (``local``), worker processes (``vector``) or Ray (``ray``).

Every backend takes a list of specs and yields one :class:`EpisodeRecord` per spec, built by the
same :func:`run_episode`, so they give identical records (timings aside) for the same specs.
* ``vector``: a ``forkserver`` process pool (never ``fork`` after a GL context exists); each
  worker builds its envs and renderers lazily and keeps them for its lifetime. A worker that dies
  turns its unfinished episodes into error records, which the engine re-runs once.
* ``ray`` (extra ``simroll[ray]``): long-lived actors, each holding an env pool and the policy
  factory; Ray restarts an actor whose process dies and retries its task once
  (``max_restarts=1, max_task_retries=1``). Joins a running cluster when ``ray.init`` was already
  called, otherwise starts a local instance with ``workers`` CPUs and shuts it down afterwards.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from simroll.rollout.episode import EnvConfig, EnvPool, PolicyFactory, run_episode
from simroll.rollout.records import EpisodeRecord, EpisodeSpec

BACKENDS = ("local", "vector", "ray")


@dataclass(frozen=True)
class EpisodeJob:
    """Everything a worker needs besides the spec (must pickle for the vector backend)."""

    policy_factory: PolicyFactory
    env_config: EnvConfig
    policy_id: str
    policy_config_hash: str
    control_delay_steps: int = 0


def _run(job: EpisodeJob, pool: EnvPool, spec: EpisodeSpec, attempt: int) -> EpisodeRecord:
    return run_episode(
        spec,
        job.policy_factory,
        env=pool.get(spec),
        policy_id=job.policy_id,
        policy_config_hash=job.policy_config_hash,
        control_delay_steps=job.control_delay_steps,
        attempt=attempt,
    )


def run_local(
    job: EpisodeJob, specs: Sequence[EpisodeSpec], attempts: dict[str, int] | None = None
) -> Iterator[EpisodeRecord]:
    pool = EnvPool(job.env_config)
    try:
        for spec in specs:
            yield _run(job, pool, spec, (attempts or {}).get(spec.key, 1))
    finally:
        pool.close()


_WORKER: dict[str, Any] = {}


def _init_worker(job: EpisodeJob) -> None:
    _WORKER["job"] = job
    _WORKER["pool"] = EnvPool(job.env_config)


def _worker_run(spec: EpisodeSpec, attempt: int) -> EpisodeRecord:
    return _run(_WORKER["job"], _WORKER["pool"], spec, attempt)


def _crash_record(job: EpisodeJob, spec: EpisodeSpec, attempt: int, error: str) -> EpisodeRecord:
    return EpisodeRecord(
        spec=spec,
        policy_id=job.policy_id,
        policy_config_hash=job.policy_config_hash,
        success=False,
        steps=0,
        sim_time=0.0,
        termination_reason="error",
        peak_deformation=float("nan"),
        tolerance=float("nan"),
        control_delay_steps=job.control_delay_steps,
        error=error,
        extra={"attempt": attempt},
    )


def run_vector(
    job: EpisodeJob,
    specs: Sequence[EpisodeSpec],
    workers: int = 2,
    attempts: dict[str, int] | None = None,
    start_method: str = "forkserver",
) -> Iterator[EpisodeRecord]:
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    context = multiprocessing.get_context(start_method)
    attempts = attempts or {}
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_init_worker, initargs=(job,)
    ) as executor:
        futures = {
            executor.submit(_worker_run, spec, attempts.get(spec.key, 1)): spec for spec in specs
        }
        remaining = set(futures)
        while remaining:
            done, remaining = wait(remaining, return_when=FIRST_COMPLETED)
            for future in done:
                spec = futures[future]
                try:
                    yield future.result()
                except BrokenProcessPool as exc:
                    yield _crash_record(
                        job, spec, attempts.get(spec.key, 1), f"worker process died: {exc}"
                    )


class _RayWorker:
    """A Ray actor: one env pool and one job for its whole life."""

    def __init__(self, job: EpisodeJob) -> None:
        _init_worker(job)

    def run(self, spec: EpisodeSpec, attempt: int) -> EpisodeRecord:
        return _worker_run(spec, attempt)


def run_ray(
    job: EpisodeJob,
    specs: Sequence[EpisodeSpec],
    workers: int = 2,
    attempts: dict[str, int] | None = None,
) -> Iterator[EpisodeRecord]:
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError("backend 'ray' needs the extra: pip install 'simroll[ray]'") from exc
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    attempts = attempts or {}
    started = not ray.is_initialized()
    if started:
        ray.init(
            num_cpus=workers,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}},
        )
    actor_class = ray.remote(num_cpus=1, max_restarts=1, max_task_retries=1)(_RayWorker)
    actors = [actor_class.remote(job) for _ in range(min(workers, len(specs)))]
    queue = list(specs)
    running: dict[Any, tuple[Any, EpisodeSpec]] = {}
    try:

        def submit(actor) -> None:
            spec = queue.pop(0)
            running[actor.run.remote(spec, attempts.get(spec.key, 1))] = (actor, spec)

        for actor in actors:
            if queue:
                submit(actor)
        while running:
            done, _ = ray.wait(list(running), num_returns=1)
            actor, spec = running.pop(done[0])
            try:
                yield ray.get(done[0])
            except ray.exceptions.RayError as exc:
                yield _crash_record(
                    job,
                    spec,
                    attempts.get(spec.key, 1),
                    f"ray worker failed: {type(exc).__name__}: {exc}",
                )
            if queue:
                submit(actor)
    finally:
        for actor in actors:
            ray.kill(actor)
        if started:
            ray.shutdown()


def run_backend(
    name: str,
    job: EpisodeJob,
    specs: Sequence[EpisodeSpec],
    workers: int = 2,
    attempts: dict[str, int] | None = None,
) -> Iterator[EpisodeRecord]:
    if name == "local":
        return run_local(job, specs, attempts)
    if name == "vector":
        return run_vector(job, specs, workers, attempts)
    if name == "ray":
        return run_ray(job, specs, workers, attempts)
    raise ValueError(f"unknown backend {name!r}; expected one of {BACKENDS}")
