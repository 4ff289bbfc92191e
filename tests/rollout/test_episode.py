"""The episode loop and its backends: records, control delay, faults, and equal receipts for the
same episode across runs and backends (local, vector, ray)."""

from __future__ import annotations

import dataclasses
import functools
import math
import os

import numpy as np
import pytest
import torch

from simroll.experts import SoftExpert
from simroll.rollout.backends import EpisodeJob, run_backend
from simroll.rollout.episode import (
    EnvConfig,
    EpisodeObserver,
    latency_to_delay_steps,
    planning_latency,
    run_episode,
)
from simroll.rollout.records import EpisodeRecord, EpisodeSpec, derive_seed
from simroll.rollout.runner import make_specs


def outcome(record) -> dict:
    """A record's outcome: what its receipt covers (no wall times, attempt or error text)."""
    return record.outcome


def gentle_expert(env):
    return SoftExpert(env, "gentle")


class ExplodingPolicy:
    def __init__(self, env):
        self.calls = 0

    def reset(self):
        pass

    def select_action(self, obs):
        self.calls += 1
        if self.calls == 3:
            raise RuntimeError("policy blew up at call 3")
        return np.zeros(5, dtype=np.float32)


class CrashOncePolicy(SoftExpert):
    """Kills its worker process the first time it runs (marker file), then behaves."""

    def __init__(self, env, marker: str):
        super().__init__(env, "gentle")
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(3)


SPEC = EpisodeSpec("SoftLift", "sponge", "default", derive_seed("soft", "SoftLift", 0), 0)


def test_run_episode_records_a_successful_expert_episode():
    record = run_episode(SPEC, gentle_expert, policy_id="expert/gentle")
    assert record.success and record.dsr_success
    assert record.termination_reason == "success"
    assert record.error is None
    assert record.steps == record.policy_calls > 10
    assert math.isclose(record.sim_time, record.steps / 20)
    assert 0 < record.peak_deformation < record.tolerance
    assert record.policy_compute_s > 0 and record.episode_wall_s >= record.policy_compute_s


def test_same_spec_gives_the_same_receipt_twice_though_wall_times_differ():
    first, second = run_episode(SPEC, gentle_expert), run_episode(SPEC, gentle_expert, attempt=2)
    assert outcome(first) == outcome(second)
    assert first.receipt == second.receipt
    assert first.measurements != second.measurements  # wall times and attempt
    stored = [EpisodeRecord.from_json(record.to_json()) for record in (first, second)]
    assert stored[0].receipt == stored[1].receipt == first.receipt


class NoisyPolicy:
    """Samples its action from torch's global generator, as diffusion and flow policies do."""

    def __init__(self, env):
        self.actions = []

    def reset(self):
        pass

    def select_action(self, obs):
        action = (0.3 * torch.randn(5)).clamp(-1, 1).numpy().astype(np.float32)
        self.actions.append(action)
        return action


def test_a_stochastic_policys_episode_is_fixed_by_its_spec_not_by_earlier_draws():
    policies = []

    def factory(env):
        policies.append(NoisyPolicy(env))
        return policies[-1]

    short = dataclasses.replace(SPEC, seed=SPEC.seed + 1)
    first = run_episode(SPEC, factory)
    torch.randn(100)  # whatever ran in between must not matter
    run_episode(short, factory)
    again = run_episode(SPEC, factory)
    assert outcome(first) == outcome(again)
    np.testing.assert_array_equal(policies[0].actions, policies[2].actions)
    assert not np.array_equal(policies[0].actions[0], policies[1].actions[0])


def test_control_delay_changes_the_episode_and_is_recorded():
    delayed = run_episode(SPEC, gentle_expert, control_delay_steps=3)
    baseline = run_episode(SPEC, gentle_expert)
    assert delayed.control_delay_steps == 3
    assert delayed.steps == delayed.policy_calls
    assert outcome(delayed) != outcome(baseline)


def test_policy_exception_is_recorded_not_raised():
    record = run_episode(SPEC, ExplodingPolicy)
    assert record.error is not None and "policy blew up at call 3" in record.error
    assert record.termination_reason == "error"
    assert not record.success
    assert record.steps == 2


class Tally(EpisodeObserver):
    """Notes every hook call it gets."""

    def __init__(self):
        self.events = []

    def on_reset(self, env, obs, info, policy):
        self.events.append(("reset", policy))

    def on_step(self, env, obs, info, action):
        self.events.append(("step", action.copy()))

    def on_end(self, record):
        self.events.append(("end", record))


def test_observers_see_the_reset_each_applied_action_and_the_record_once():
    tally = Tally()
    policies = []

    def factory(env):
        policies.append(SoftExpert(env, "gentle"))
        return policies[-1]

    short = EnvConfig(kwargs={"max_episode_steps": 5})
    record = run_episode(SPEC, factory, env_config=short, control_delay_steps=2, observers=[tally])
    assert [kind for kind, _ in tally.events] == ["reset"] + ["step"] * 5 + ["end"]
    assert tally.events[0][1] is policies[0] and tally.events[-1][1] is record
    held = [action for kind, action in tally.events[1:3]]  # the delay: the hand holds still
    np.testing.assert_array_equal(held, [[0, 0, 0, 0, -1]] * 2)
    assert record.steps == 5 and record.termination_reason == "time_limit"


def test_an_observer_that_raises_makes_the_episode_an_error_that_later_observers_see():
    class FullDisk(EpisodeObserver):
        def on_end(self, record):
            raise OSError(28, "No space left on device")

    later = Tally()
    short = EnvConfig(kwargs={"max_episode_steps": 3})
    record = run_episode(SPEC, gentle_expert, env_config=short, observers=[FullDisk(), later])
    assert record.error.startswith("OSError: [Errno 28] No space left on device")
    assert record.termination_reason == "error" and not record.success and record.steps == 3
    assert later.events[-1] == ("end", record)
    # an episode that raises before its reset still ends, once, for every observer
    tally = Tally()

    def no_policy(env):
        raise RuntimeError("no such checkpoint")

    failed = run_episode(SPEC, no_policy, env_config=short, observers=[tally])
    assert tally.events == [("end", failed)] and "no such checkpoint" in failed.error


def test_negative_delay_is_rejected():
    with pytest.raises(ValueError, match="control_delay_steps"):
        run_episode(SPEC, gentle_expert, control_delay_steps=-1)


BACKEND_SPECS = make_specs(
    "soft", ["SoftLift", "SoftSqueeze"], ["sponge", "foam_cylinder"], ["default"], episodes=2
)[:6]
BACKEND_JOB = EpisodeJob(gentle_expert, EnvConfig(), "expert/gentle", "hash")


@pytest.fixture(scope="module")
def local_receipts() -> dict[str, tuple[str, dict]]:
    """Receipt and outcome of each backend spec, run in-process: what every backend must give."""
    records = list(run_backend("local", BACKEND_JOB, BACKEND_SPECS))
    assert len(records) == 6 and all(r.error is None for r in records)
    return {r.spec.key: (r.receipt, outcome(r)) for r in records}


def receipts(records) -> dict[str, tuple[str, dict]]:
    """Receipt and outcome by spec key, read back from the stored JSON line."""
    loaded = [EpisodeRecord.from_json(r.to_json()) for r in records]
    return {r.spec.key: (r.receipt, outcome(r)) for r in loaded}


def test_local_and_vector_backends_give_identical_receipts(local_receipts):
    retried = {BACKEND_SPECS[0].key: 2}  # a retry's attempt number is bookkeeping, not outcome
    vector = run_backend("vector", BACKEND_JOB, BACKEND_SPECS, workers=2, attempts=retried)
    assert receipts(vector) == local_receipts


def test_dead_worker_becomes_an_error_record(tmp_path):
    marker = str(tmp_path / "crashed")
    job = EpisodeJob(functools.partial(CrashOncePolicy, marker=marker), EnvConfig(), "crash", "h")
    records = list(run_backend("vector", job, [SPEC], workers=1))
    assert len(records) == 1 and records[0].error is not None
    assert "worker process died" in records[0].error
    # the marker now exists, so a second run (the engine's retry) succeeds
    retry = list(run_backend("vector", job, [SPEC], workers=1, attempts={SPEC.key: 2}))
    assert retry[0].success and retry[0].extra["attempt"] == 2


@pytest.mark.slow  # two Ray actors start: about a minute on a 2-core machine; the fast suite
# keeps Ray through test_backends.py's dead-actor test and local/vector equality here
def test_ray_backend_gives_the_same_receipts_as_local(local_receipts):
    pytest.importorskip("ray", reason="the ray extra is not installed")
    remote = run_backend("ray", BACKEND_JOB, BACKEND_SPECS, workers=2)
    assert receipts(remote) == local_receipts


@pytest.mark.slow  # tests/rollout/test_backends.py pins the same rule for ray in the fast suite
def test_ray_dead_worker_becomes_an_error_record_and_its_retry_succeeds(tmp_path):
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    marker = str(tmp_path / "crashed")
    job = EpisodeJob(functools.partial(CrashOncePolicy, marker=marker), EnvConfig(), "crash", "h")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        records = list(run_backend("ray", job, [SPEC], workers=1))
        assert os.path.exists(marker)  # the first try really killed its worker process
        assert records[0].error is not None and records[0].extra["attempt"] == 1
        # Ray does not re-run it behind the engine's back; the engine's retry (attempt 2) does
        retry = list(run_backend("ray", job, [SPEC], workers=1, attempts={SPEC.key: 2}))
        assert retry[0].success and retry[0].extra["attempt"] == 2
    finally:
        ray.shutdown()


@pytest.mark.parametrize(
    ("latency", "steps"), [(0.0, 0), (0.01, 1), (0.05, 1), (0.051, 2), (0.12, 3)]
)
def test_latency_becomes_whole_control_steps_of_delay(latency, steps):
    assert latency_to_delay_steps(latency) == steps


def test_planning_latency_is_a_chunk_plan_not_a_queue_pop():
    chunked = [0.020 if i % 5 == 0 else 0.00005 for i in range(40)]  # plans 1 call in 5
    assert planning_latency(chunked) == pytest.approx(0.020)
    chunked[13] = 0.4  # one stall (garbage collection, a page fault) does not hide the plans
    assert planning_latency(chunked) == pytest.approx(0.020)
    every_call = [0.010, 0.011, 0.012, 0.009, 0.010]  # plans every call: about its median
    assert 0.010 <= planning_latency(every_call) <= 0.012
    with pytest.raises(ValueError, match="no select_action"):
        planning_latency([])


def test_bad_latency_is_rejected():
    with pytest.raises(ValueError, match="latency"):
        latency_to_delay_steps(-0.1)
