"""A small state-mode LeRobotDataset of gentle-expert SoftLift episodes, made once per session."""

from __future__ import annotations

import pytest

from simroll.experts import SoftExpert
from simroll.rollout.dataset import DatasetRecorder
from simroll.rollout.episode import EnvConfig, EnvPool
from simroll.rollout.runner import make_specs


@pytest.fixture(scope="session")
def lift_dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets") / "lift_state"
    specs = make_specs(
        "soft", ["SoftLift"], ["sponge", "foam_cylinder"], ["default"], 2, base_seed=1000
    )
    pool = EnvPool(EnvConfig(obs_mode="state"))
    with DatasetRecorder(
        root, pool.get(specs[0]).observation_space, repo_id="simroll/lift_state", only_success=True
    ) as recorder:
        for spec in specs:
            recorder.record(spec, lambda env: SoftExpert(env, "gentle"), env=pool.get(spec))
    pool.close()
    return root
