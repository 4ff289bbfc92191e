"""The policy that drives a DAgger round: the learner acts, a privileged expert labels every state.

:class:`ExpertMixing` wraps a learner and an expert built on the same env. At every control step
it asks the expert for its action at the current state and keeps it as ``action_label`` (what a
dataset recorder stores as the step's ``action``), then executes the expert's action with
probability ``beta`` and the learner's otherwise (DAgger's beta-mixing, Ross et al. 2011; with
``beta=0`` the learner drives alone and the episode's outcome is the learner's own). The learner
is asked every step, even when the expert's action is executed, so its action-chunk queue and
observation history advance as they would if it were driving.

The expert must label any state (:class:`simroll.policies.base.LabelsStates`): its action may
depend on the current state only, since the states come from another policy's path. The mixing
coin is drawn from a copy of the env's generator taken right after its reset, so the same episode
seed gives the same mixture and the env's own random stream is untouched.

:func:`mixing_policy` is the Hydra target (``_partial_: true``) whose ``learner`` and ``expert``
are policy configs Hydra instantiates into factories.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from simroll.policies.base import CountsNetworkEvaluations, LabelsStates, policy_name


class ExpertMixing:
    """Execute the expert's action with probability ``beta``, else the learner's; label every step
    with the expert's action."""

    def __init__(self, learner: Any, expert: Any, env: Any, beta: float = 0.0) -> None:
        if not (isinstance(beta, int | float) and 0.0 <= beta <= 1.0):
            raise ValueError(f"beta must be a probability in [0, 1], got {beta!r}")
        if not (isinstance(expert, LabelsStates) and expert.labels_any_state):
            raise ValueError(
                f"the expert {policy_name(expert)!r} cannot label states it did not drive into "
                "(it needs labels_any_state = True, see simroll.policies.base.LabelsStates); "
                "DAgger needs a labeller whose action depends on the current state only"
            )
        self.learner, self.expert, self.env = learner, expert, env.unwrapped
        self.beta = float(beta)
        self.action_label: np.ndarray | None = None
        self.expert_steps = 0
        self.steps = 0
        self.rng = np.random.default_rng(0)

    @property
    def policy_id(self) -> str:
        return f"dagger({policy_name(self.learner)}|{policy_name(self.expert)},beta={self.beta:g})"

    @property
    def network_evaluations(self) -> int:
        learner = self.learner
        return learner.network_evaluations if isinstance(learner, CountsNetworkEvaluations) else 0

    def episode_extras(self) -> dict[str, int]:
        """``expert_steps``: the steps of this episode on which the expert's action was executed."""
        return {"expert_steps": self.expert_steps}

    def reset(self) -> None:
        self.learner.reset()
        self.expert.reset()
        self.rng = copy.deepcopy(self.env.np_random)
        self.action_label = None
        self.expert_steps = self.steps = 0

    def select_action(self, obs: Any) -> np.ndarray:
        label = np.asarray(self.expert.select_action(obs), dtype=np.float32)
        learned = np.asarray(self.learner.select_action(obs), dtype=np.float32)
        self.action_label = label.copy()
        self.steps += 1
        if self.beta > 0.0 and self.rng.random() < self.beta:
            self.expert_steps += 1
            return label
        return learned


def mixing_policy(
    env: Any,
    learner: Callable[[Any], Any],
    expert: Callable[[Any], Any],
    beta: float = 0.0,
) -> ExpertMixing:
    """``ExpertMixing(learner(env), expert(env), env, beta)``: the factory a round's config names
    (``learner`` and ``expert`` are policy factories, e.g. instantiated ``_partial_`` configs)."""
    return ExpertMixing(learner(env), expert(env), env, beta)
