"""A small state-mode LeRobotDataset of gentle-expert SoftLift episodes, made once per session."""

from __future__ import annotations

import pytest

from simroll.rollout.episode import EnvConfig
from simroll.rollout.runner import make_specs
from tests.helpers import record_expert_dataset


@pytest.fixture(scope="session")
def lift_dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets") / "lift_state"
    specs = make_specs(
        "soft", ["SoftLift"], ["sponge", "foam_cylinder"], ["default"], 2, base_seed=1000
    )
    return record_expert_dataset(root, specs, EnvConfig(obs_mode="state"), only_success=True)
