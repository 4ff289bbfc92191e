"""Backend faults: a dead worker is charged only for the episode it was running, never for
queued ones, on the vector and the Ray backend alike; resuming does not charge again."""

from __future__ import annotations

import functools
import os
import time

import pytest

from simroll.experts import SoftExpert
from simroll.rollout.backends import EpisodeJob, WorkersKeepDyingError, run_backend
from simroll.rollout.episode import EnvConfig
from simroll.rollout.runner import count_errors, evaluate, make_specs
from simroll.rollout.store import MAX_ATTEMPTS, RecordStore, attempt_of

VICTIM = "foam_cylinder"


class DiesOnOneObject(SoftExpert):
    """The gentle expert, except that on ``victim`` its first action kills its worker process."""

    def __init__(self, env, victim: str = VICTIM):
        super().__init__(env, "gentle")
        self.fatal = env.unwrapped.object_name == victim

    def select_action(self, obs):
        if self.fatal:
            os._exit(1)
        return super().select_action(obs)


def gentle_expert(env):
    return SoftExpert(env, "gentle")


def _die_once_on_unpickling(marker: str):
    """Unpickling hook: the first worker to unpickle the job dies before it can start anything."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return gentle_expert


def _raise_once_on_unpickling(marker: str):
    """Unpickling hook: the first actor to unpickle the job fails to build itself."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("cannot build this worker")
    return gentle_expert


class FailsActorOnceWhenUnpickled:
    """A policy factory whose first unpickling (in a Ray actor's constructor) raises."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (_raise_once_on_unpickling, (self.marker,))


class KillsWorkerWhenUnpickled:
    """A policy factory whose unpickling in a worker kills that worker (once, or always)."""

    def __init__(self, marker: str | None):
        self.marker = marker

    def __reduce__(self):
        if self.marker is None:
            return (os._exit, (1,))
        return (_die_once_on_unpickling, (self.marker,))


def lift_specs(episodes: int):
    # The victim first, so that the sponge episodes are still queued when its workers die.
    return make_specs("soft", ["SoftLift"], [VICTIM, "sponge"], ["default"], episodes=episodes)


def killer_job() -> EpisodeJob:
    return EpisodeJob(
        functools.partial(DiesOnOneObject, victim=VICTIM), EnvConfig(), "expert/dies", "h"
    )


def check_only_the_victim_is_charged(run_dir, backend: str, episodes: int, workers: int) -> None:
    specs = lift_specs(episodes)
    records = evaluate(run_dir, specs, killer_job(), backend, workers, progress=False)
    by_object = {}
    for record in records:
        by_object.setdefault(record.spec.object, []).append(record)
    assert len(records) == 2 * episodes
    for record in by_object[VICTIM]:
        assert record.error is not None and not record.success
        assert attempt_of(record) == MAX_ATTEMPTS  # charged once per death, retried once
    for record in by_object["sponge"]:
        assert record.error is None and record.success
        assert attempt_of(record) == 1  # queued behind a dying worker, never charged
    assert count_errors(records) == episodes
    lines = RecordStore(run_dir).path.read_text().splitlines()
    assert len(lines) == episodes * MAX_ATTEMPTS + episodes
    resumed = evaluate(run_dir, specs, killer_job(), backend, workers, progress=False)
    assert RecordStore(run_dir).path.read_text().splitlines() == lines  # not charged again
    assert [r.spec.key for r in resumed] == [r.spec.key for r in records]
    assert count_errors(resumed) == episodes


def test_vector_dead_worker_is_charged_only_for_its_own_episode(tmp_path):
    check_only_the_victim_is_charged(tmp_path, "vector", episodes=2, workers=2)


def test_ray_dead_actor_is_charged_only_for_its_own_episode(tmp_path):
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    # One worker, so the sponge episode waits in the queue while the victim's actor dies twice;
    # one Ray instance for both rounds, so the test pays Ray's start-up once.
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        check_only_the_victim_is_charged(tmp_path, "ray", episodes=1, workers=1)
    finally:
        ray.shutdown()


@pytest.mark.slow  # ~12 s of Ray start-up; the dead-actor rule stays in the fast suite
def test_ray_episode_whose_actor_failed_to_build_is_not_charged(tmp_path):
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    specs = make_specs("soft", ["SoftLift"], ["sponge"], ["default"], episodes=2)
    job = EpisodeJob(FailsActorOnceWhenUnpickled(str(tmp_path / "failed")), EnvConfig(), "e", "h")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        records = list(run_backend("ray", job, specs, workers=1))
    finally:
        ray.shutdown()
    assert (tmp_path / "failed").exists()  # the first actor really failed to build
    assert sorted(r.spec.key for r in records) == sorted(s.key for s in specs)
    assert all(r.error is None and r.success and attempt_of(r) == 1 for r in records)


def test_vector_episode_handed_to_a_worker_that_died_before_starting_it_is_not_charged(
    tmp_path,
):
    specs = make_specs("soft", ["SoftLift"], ["sponge"], ["default"], episodes=2)
    job = EpisodeJob(KillsWorkerWhenUnpickled(str(tmp_path / "died")), EnvConfig(), "e", "h")
    records = list(run_backend("vector", job, specs, workers=1))
    assert (tmp_path / "died").exists()  # the first worker really died
    assert sorted(r.spec.key for r in records) == sorted(s.key for s in specs)
    assert all(r.error is None and r.success and attempt_of(r) == 1 for r in records)


def test_vector_gives_up_when_workers_die_before_starting_anything():
    specs = make_specs("soft", ["SoftLift"], ["sponge"], ["default"], episodes=1)
    job = EpisodeJob(KillsWorkerWhenUnpickled(None), EnvConfig(), "e", "h")
    with pytest.raises(WorkersKeepDyingError, match="before starting an episode"):
        list(run_backend("vector", job, specs, workers=1))


def test_closing_the_vector_backend_early_terminates_its_workers():
    psutil = pytest.importorskip("psutil")
    from multiprocessing import forkserver

    specs = make_specs("soft", ["SoftLift"], ["sponge"], ["default"], episodes=8)
    job = EpisodeJob(gentle_expert, EnvConfig(), "expert/gentle", "h")
    records = run_backend("vector", job, specs, workers=2)
    assert next(records).error is None
    server = psutil.Process(forkserver._forkserver._forkserver_pid)
    assert len(server.children()) == 2  # both workers, one of them mid-episode
    start = time.perf_counter()
    records.close()  # what Ctrl-C does through evaluate
    assert time.perf_counter() - start < 2.0
    assert server.children() == []
