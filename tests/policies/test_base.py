"""The policy contract: which policies satisfy which protocol, and the policies package's place at
the bottom of the layers (it imports neither the rollout nor the env package)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from simroll.certify.accel import ReplanEvery
from simroll.experts import SoftExpert
from simroll.experts.noise import ActionNoise
from simroll.policies.base import (
    CountsNetworkEvaluations,
    DeclaresActionSpace,
    LabelsActions,
    NamesItself,
    Policy,
    policy_name,
)


class Bare:
    def reset(self):
        pass

    def select_action(self, obs):
        return np.zeros(5, np.float32)


class Counting(Bare):
    @property
    def network_evaluations(self) -> int:
        raise AssertionError("an isinstance check must not evaluate the property")


def test_the_protocols_are_structural_and_do_not_evaluate_properties():
    assert isinstance(Bare(), Policy) and not isinstance(object(), Policy)
    assert isinstance(Counting(), CountsNetworkEvaluations)
    assert not isinstance(Bare(), CountsNetworkEvaluations | NamesItself | LabelsActions)
    assert not isinstance(Bare(), DeclaresActionSpace)
    assert policy_name(Bare()) == "Bare"


class NoEnv:
    """Stands in for the env the experts keep (``env.unwrapped``) but never touch when built."""

    @property
    def unwrapped(self):
        return self


def test_simrolls_policies_declare_what_they_offer():
    expert = SoftExpert(NoEnv(), "gentle")
    noisy = ActionNoise(expert, NoEnv())
    replan = ReplanEvery(None, lambda env: Bare(), every=2)
    assert all(isinstance(policy, Policy) for policy in (expert, noisy, replan))
    assert isinstance(noisy, LabelsActions) and not isinstance(expert, LabelsActions)
    assert policy_name(noisy) == "expert/gentle+noise0.3/0"
    assert isinstance(replan, CountsNetworkEvaluations)
    assert policy_name(replan) == "Bare/replan_every_2_hold"


def test_the_policies_package_imports_neither_rollout_nor_envs():
    code = """
import importlib, pkgutil, sys
import simroll.policies
for module in pkgutil.walk_packages(simroll.policies.__path__, "simroll.policies."):
    importlib.import_module(module.name)
print(sorted(m for m in sys.modules if m.startswith(("simroll.rollout", "simroll.envs"))))
print("simroll.policies.lerobot" in sys.modules and "simroll.policies.vla" in sys.modules)
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.split("\n")[:2] == ["[]", "True"], result.stdout
