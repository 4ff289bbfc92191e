"""Vector workers limit each library to one thread (Mesa llvmpipe, OpenMP, MKL, OpenBLAS, torch),
keep values the user set, and leave everything alone with the fast paths off."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from simroll import _speedups
from simroll.rollout import threads
from simroll.rollout.backends import EpisodeJob, run_backend
from simroll.rollout.episode import EnvConfig
from simroll.rollout.runner import make_specs


@pytest.fixture
def clean_thread_env(monkeypatch):
    for name in threads.WORKER_THREAD_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(_speedups.ENV_VAR, "1")
    return monkeypatch


def test_limits_are_set_once_and_user_values_kept(clean_thread_env):
    clean_thread_env.setenv("OMP_NUM_THREADS", "3")
    applied = threads.limit_worker_threads()
    assert applied["LP_NUM_THREADS"] == "1" and applied["OPENBLAS_NUM_THREADS"] == "1"
    assert applied["OMP_NUM_THREADS"] == "3"  # the user's choice stands
    assert os.environ["MKL_NUM_THREADS"] == "1"


def test_fast_paths_off_leaves_the_environment_alone(clean_thread_env):
    clean_thread_env.setenv(_speedups.ENV_VAR, "0")
    assert threads.limit_worker_threads() == {}
    assert all(name not in os.environ for name in threads.WORKER_THREAD_ENV)


class ReportingPolicy:
    """Holds still; on construction writes its worker's thread report to ``directory``."""

    def __init__(self, env, directory: str):
        import torch  # a learned policy's import, after the worker set its limits

        report = threads.thread_report()
        report["torch_threads"] = torch.get_num_threads()
        Path(directory, f"{os.getpid()}.json").write_text(json.dumps(report))

    def reset(self):
        pass

    def select_action(self, obs):
        return np.zeros(5, dtype=np.float32)


class ReportingFactory:
    def __init__(self, directory: str):
        self.directory = directory

    def __call__(self, env):
        return ReportingPolicy(env, self.directory)


def test_vector_workers_run_with_one_thread_per_library(clean_thread_env, tmp_path):
    specs = make_specs("soft", ["SoftLift"], ["sponge"], ["default"], 2)
    config = EnvConfig(kwargs={"max_episode_steps": 2})
    job = EpisodeJob(ReportingFactory(str(tmp_path)), config, "still", "test")
    records = list(run_backend("vector", job, specs, workers=2))
    assert [r.error for r in records] == [None, None]
    reports = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert reports, "no worker reported"
    for report in reports:
        assert report["env"] == {name: "1" for name in threads.WORKER_THREAD_ENV}
        assert report["torch_threads"] == 1
    assert "LP_NUM_THREADS" not in os.environ  # the parent process is not touched


def test_fork_server_preloads_the_policy_stack_of_simroll_factories(monkeypatch):
    import functools

    from simroll.experts import SoftExpert
    from simroll.policies.lerobot import load_policy
    from simroll.rollout.worker_start import ENGINE, preload_modules

    monkeypatch.setenv(_speedups.ENV_VAR, "1")
    checkpoint = functools.partial(load_policy, path="policies/vla_soft")
    assert preload_modules(checkpoint) == [
        ENGINE,
        "simroll.policies.lerobot",
        "simroll.rollout.preload_lerobot",
    ]
    assert preload_modules("simroll.policies.lerobot.load_policy") == preload_modules(checkpoint)
    assert preload_modules(SoftExpert) == [ENGINE, "simroll.experts.soft"]
    assert preload_modules(ReportingFactory("x")) == [ENGINE]  # not simroll's: never preloaded
    monkeypatch.setenv(_speedups.ENV_VAR, "0")
    assert preload_modules(checkpoint) == [ENGINE]


def test_an_early_fork_server_also_preloads_the_observers_modules(monkeypatch):
    """Once the server runs the backend cannot add the observers' ``worker_modules``, so a
    command that starts it early names them (collect and eval with record: LeRobot's writer)."""
    import multiprocessing
    from multiprocessing import forkserver

    from simroll.rollout import worker_start
    from simroll.rollout.dataset import DatasetShards
    from simroll.rollout.lerobot_io import WRITER_MODULES

    preloaded: list[list[str]] = []
    context = multiprocessing.get_context("forkserver")
    monkeypatch.setattr(
        type(context), "set_forkserver_preload", lambda self, m: preloaded.append(m)
    )
    monkeypatch.setattr(forkserver, "ensure_running", lambda: None)
    monkeypatch.setenv(_speedups.ENV_VAR, "1")
    assert worker_start.start_worker_server("simroll.experts.SoftExpert", WRITER_MODULES)
    assert preloaded == [[worker_start.ENGINE, "simroll.experts", *WRITER_MODULES]]
    assert DatasetShards.worker_modules == WRITER_MODULES
