"""Where episodes run: in-process (``local``), worker processes (``vector``) or Ray (``ray``).

Every backend takes a list of specs and yields one :class:`EpisodeRecord` per spec, built by the
same :func:`run_episode`, so they give identical records (timings aside) for the same specs.
The job's observer factories (videos, dataset shards) are called for each spec inside the worker
that runs it, so what they record is the scored episode itself, written where it ran.
Faults are charged to the episode that caused them and to no other:
* ``vector``: ``workers`` long-lived ``forkserver`` processes (never ``fork`` after a GL context
  exists), each building its envs lazily and keeping them for its lifetime. A worker holds at
  most one episode, handed over a pipe, and says "started" before running it. When a worker
  dies (OOM, segfault, ``os._exit``) only the episode it had started becomes an error record
  (charged one attempt; the engine re-runs it); an episode handed to it but not yet started goes
  back to the queue uncharged, and a fresh worker takes the dead one's place. Queued episodes
  stay in this process, so they can never be lost with a worker.
* ``ray`` (extra ``simroll[ray]``): long-lived actors, each holding an env pool and the policy
  factory, each running one episode at a time. A task whose actor died becomes an error record
  for that one episode; the actor is replaced by a fresh one and queued specs, which are never
  submitted ahead, are not charged. An actor that fails while building itself (or whose node is
  preempted) never started its episode, which goes back to the queue uncharged. Joins a
  running cluster when ``ray.init`` was already called, otherwise starts a local instance with
  ``workers`` CPUs and shuts it down afterwards.
Closing a backend's generator early (Ctrl-C, ``break``) stops at once: worker processes are
terminated and actors killed, queued episodes are dropped, and what was yielded stays yielded.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for_ready
from typing import Any

from simroll.rollout.episode import (
    EnvConfig,
    EnvPool,
    EpisodeObserver,
    PolicyFactory,
    run_episode,
)
from simroll.rollout.records import EpisodeRecord, EpisodeSpec
from simroll.rollout.threads import limit_worker_threads
from simroll.rollout.worker_start import preload_modules

# Builds the observer of one episode inside the worker that runs it, or None to leave the
# episode unobserved; must pickle (a frozen dataclass of paths and settings). A factory may name
# modules its observers need in ``worker_modules``, imported once for all vector workers.
ObserverFactory = Callable[[EpisodeSpec], EpisodeObserver | None]

BACKENDS = ("local", "vector", "ray")

# Fresh workers that may die in a row without any of them starting an episode before the run
# gives up (a policy or env that cannot even be unpickled in a worker, a machine out of memory).
MAX_DEATHS_BEFORE_START = 5

# Seconds a worker gets to exit after being asked to, before it is terminated.
_GRACEFUL_EXIT_S = 5.0


@dataclass(frozen=True)
class EpisodeJob:
    """Everything a worker needs besides the spec (must pickle for the vector and Ray backends).

    ``observers`` are factories called with each spec in the worker that runs it; each returns
    the episode's observer or None (e.g. a video only for the episodes chosen to be filmed).
    """

    policy_factory: PolicyFactory
    env_config: EnvConfig
    policy_id: str
    policy_config_hash: str
    control_delay_steps: int = 0
    observers: tuple[ObserverFactory, ...] = ()

    def observers_of(self, spec: EpisodeSpec) -> list[EpisodeObserver]:
        """The observers of ``spec``'s episode, built now (in the worker that runs it)."""
        built = (factory(spec) for factory in self.observers)
        return [observer for observer in built if observer is not None]


class WorkersKeepDyingError(RuntimeError):
    """Raised when fresh workers die again and again before any of them starts an episode."""


def _run(job: EpisodeJob, pool: EnvPool, spec: EpisodeSpec, attempt: int) -> EpisodeRecord:
    return run_episode(
        spec,
        job.policy_factory,
        env=pool.get(spec),
        policy_id=job.policy_id,
        policy_config_hash=job.policy_config_hash,
        control_delay_steps=job.control_delay_steps,
        attempt=attempt,
        observers=job.observers_of(spec),
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


def crash_record(job: EpisodeJob, spec: EpisodeSpec, attempt: int, error: str) -> EpisodeRecord:
    """The error record of an episode whose worker died while running it."""
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


def _vector_worker_main(connection: Connection, job: EpisodeJob) -> None:
    """A vector worker: run each ``(spec, attempt)`` received, saying "started" first."""
    # Ctrl-C reaches the whole process group; the parent decides and terminates its workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    limit_worker_threads()  # one thread per library: workers ~ cores (simroll.rollout.threads)
    pool = EnvPool(job.env_config)
    try:
        while True:
            try:
                message = connection.recv()
            except EOFError:  # the parent is gone
                return
            if message is None:
                return
            spec, attempt = message
            connection.send(("started", spec.key))
            connection.send(("done", _run(job, pool, spec, attempt)))
    except (BrokenPipeError, ConnectionResetError):  # the parent is gone
        return
    finally:
        pool.close()


class _VectorWorker:
    """One worker process, its pipe, and the episode it holds (at most one)."""

    def __init__(self, context: Any, job: EpisodeJob) -> None:
        self.connection, child = context.Pipe()
        self.process = context.Process(
            target=_vector_worker_main, args=(child, job), name="simroll-worker", daemon=True
        )
        self.process.start()
        child.close()
        self.spec: EpisodeSpec | None = None
        self.attempt = 1
        self.started = False
        self.stopped = False

    def assign(self, spec: EpisodeSpec, attempt: int) -> None:
        self.spec, self.attempt, self.started = spec, attempt, False
        try:
            self.connection.send((spec, attempt))
        except OSError:  # already dead: the spec was never started and goes back to the queue
            pass

    def receive(self) -> tuple[list[EpisodeRecord], bool]:
        """The records this worker has finished, and whether it has died.

        Liveness is read before the pipe is drained, so that everything a dead worker sent
        before dying (its "started", a finished record) is seen before its death is handled.
        """
        alive = self.process.is_alive()
        records = []
        try:
            while self.connection.poll():
                kind, payload = self.connection.recv()
                if kind == "started":
                    self.started = True
                else:
                    records.append(payload)
                    self.spec, self.started = None, False
        except (EOFError, OSError):
            alive = False
        return records, not alive

    def stop(self, graceful: bool) -> None:
        if self.stopped:
            return
        self.stopped = True
        if graceful and self.process.is_alive():
            try:
                self.connection.send(None)
            except OSError:
                pass
            self.process.join(_GRACEFUL_EXIT_S)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(_GRACEFUL_EXIT_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.connection.close()
        self.process.close()


def run_vector(
    job: EpisodeJob,
    specs: Sequence[EpisodeSpec],
    workers: int = 2,
    attempts: dict[str, int] | None = None,
    start_method: str = "forkserver",
) -> Iterator[EpisodeRecord]:
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if not specs:
        return
    context = multiprocessing.get_context(start_method)
    if start_method == "forkserver":
        # The server imports the engine once; each worker (and each replacement of a dead one)
        # is forked from it with MuJoCo and the envs already imported, and with the modules the
        # job's observers name in ``worker_modules`` (LeRobot's dataset stack for dataset
        # shards: seconds per worker otherwise). No effect once the server runs.
        observer_modules = [m for f in job.observers for m in getattr(f, "worker_modules", ())]
        context.set_forkserver_preload([*preload_modules(job.policy_factory), *observer_modules])
    attempts = attempts or {}
    queue = deque(specs)
    pool = [_VectorWorker(context, job) for _ in range(min(workers, len(specs)))]
    deaths_before_start = 0
    finished = False
    try:
        while queue or any(worker.spec is not None for worker in pool):
            for worker in pool:
                if worker.spec is None and queue:
                    spec = queue.popleft()
                    worker.assign(spec, attempts.get(spec.key, 1))
            waitables = [w.connection for w in pool] + [w.process.sentinel for w in pool]
            wait_for_ready(waitables)
            for index, worker in enumerate(pool):
                records, died = worker.receive()
                if worker.started or records:
                    deaths_before_start = 0
                yield from records
                if not died:
                    continue
                worker.process.join(_GRACEFUL_EXIT_S)  # its pipe may close before it is reaped
                exit_code = worker.process.exitcode
                if worker.spec is not None and worker.started:
                    yield crash_record(
                        job,
                        worker.spec,
                        worker.attempt,
                        f"worker process died (exit code {exit_code}) while running this episode",
                    )
                else:
                    deaths_before_start += 1
                    if worker.spec is not None:
                        queue.appendleft(worker.spec)  # never started: not charged
                    if deaths_before_start > MAX_DEATHS_BEFORE_START:
                        raise WorkersKeepDyingError(
                            f"{deaths_before_start} worker processes in a row died before "
                            f"starting an episode (last exit code {exit_code}); giving up"
                        )
                worker.stop(graceful=False)
                pool[index] = _VectorWorker(context, job)
        finished = True
    finally:
        # On Ctrl-C or an early close, terminate at once: queued episodes are simply not run.
        for worker in pool:
            worker.stop(graceful=finished)


class _RayWorker:
    """A Ray actor: one env pool and one job for its whole life."""

    def __init__(self, job: EpisodeJob) -> None:
        limit_worker_threads()
        self.job = job
        self.pool = EnvPool(job.env_config)

    def run(self, spec: EpisodeSpec, attempt: int) -> EpisodeRecord:
        return _run(self.job, self.pool, spec, attempt)


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
    if not specs:
        return
    attempts = attempts or {}
    started = not ray.is_initialized()
    if started:
        ray.init(
            num_cpus=workers,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}},
        )
    # No restarts and no task retries by Ray: a dead actor's task fails once, is charged to its
    # one episode here, and the actor is replaced, so no episode is ever run twice unrecorded.
    actor_class = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(_RayWorker)
    actors = [actor_class.remote(job) for _ in range(min(workers, len(specs)))]
    queue = deque(specs)
    running: dict[Any, tuple[int, EpisodeSpec]] = {}

    def submit(slot: int) -> None:
        spec = queue.popleft()
        reference = actors[slot].run.remote(spec, attempts.get(spec.key, 1))
        running[reference] = (slot, spec)

    deaths_before_start = 0
    try:
        for slot in range(len(actors)):
            submit(slot)
        while running:
            done, _ = ray.wait(list(running), num_returns=1)
            slot, spec = running.pop(done[0])
            try:
                record = ray.get(done[0])
            except ray.exceptions.RayError as exc:
                first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                if isinstance(exc, ray.exceptions.RayActorError):
                    ray.kill(actors[slot])
                    actors[slot] = actor_class.remote(job)
                if getattr(exc, "actor_init_failed", False) or getattr(exc, "preempted", False):
                    # The actor died building itself, or its node was taken away: the episode
                    # never started, so it goes back to the queue uncharged.
                    queue.appendleft(spec)
                    deaths_before_start += 1
                    if deaths_before_start > MAX_DEATHS_BEFORE_START:
                        raise WorkersKeepDyingError(
                            f"{deaths_before_start} Ray actors in a row died before starting an "
                            f"episode; last: {type(exc).__name__}: {first_line}"
                        ) from exc
                else:
                    deaths_before_start = 0
                    yield crash_record(
                        job,
                        spec,
                        attempts.get(spec.key, 1),
                        f"ray worker failed: {type(exc).__name__}: {first_line}",
                    )
            else:
                deaths_before_start = 0
                yield record
            if queue:
                submit(slot)
    finally:
        for actor in actors:  # also stops running tasks at once on Ctrl-C
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
    """One record per spec from backend ``name``; close the iterator to stop early."""
    if name == "local":
        return run_local(job, specs, attempts)
    if name == "vector":
        return run_vector(job, specs, workers, attempts)
    if name == "ray":
        return run_ray(job, specs, workers, attempts)
    raise ValueError(f"unknown backend {name!r}; expected one of {BACKENDS}")
