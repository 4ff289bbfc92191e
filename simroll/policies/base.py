"""The policy contract: what the episode engine, dataset recording and certification may ask of a
policy, as ``typing.Protocol`` classes.

Every policy is a :class:`Policy`: ``reset()`` at the start of an episode and
``select_action(obs)`` once per control step, returning a float32 action of
:data:`simroll.features.ACTION_DIM` (LeRobot's verbs; learned policies keep their own action-chunk
queue behind them). The optional abilities below are runtime-checkable, so a consumer asks
``isinstance(policy, CountsNetworkEvaluations)`` instead of probing attributes: a policy that
counts its network evaluations (the deterministic compute cost records and certificates use), one
that names itself for records, one that adds its own counts to the record, one that declares its
action space, one that labels each step with an action other than the one it executes
(noise-injected demonstrations store the clean action), and an expert that can label any state
(the labeller of interactive imitation; the scripted :class:`simroll.experts.SoftExpert` is
one). Structural typing means a policy needs no base class: having the members is enough.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Policy(Protocol):
    """What the episode engine calls: ``reset()`` per episode, ``select_action(obs)`` per step."""

    def reset(self) -> None: ...

    def select_action(self, obs: Any) -> np.ndarray: ...


@runtime_checkable
class CountsNetworkEvaluations(Protocol):
    """A policy that counts the forward passes of its network since ``reset`` (chunks times
    denoising or flow steps), recorded as ``extra["network_evaluations"]``."""

    @property
    def network_evaluations(self) -> int: ...


@runtime_checkable
class NamesItself(Protocol):
    """A policy with its own id for records and wrappers' names (``policy_id``)."""

    @property
    def policy_id(self) -> str: ...


@runtime_checkable
class LabelsActions(Protocol):
    """A policy whose step is stored in a dataset with ``action_label`` (set by each
    ``select_action``; None before the first) instead of the action it returned."""

    action_label: np.ndarray | None


@runtime_checkable
class DeclaresActionSpace(Protocol):
    """A policy that declares the action space it acts in (a Gymnasium space), checked against the
    env's before certification runs it."""

    action_space: Any


@runtime_checkable
class ReportsEpisodeExtras(Protocol):
    """A policy with per-episode counts of its own for the record's ``extra`` (read once, when
    the episode ends; e.g. how many steps a DAgger mixture let the expert act)."""

    def episode_extras(self) -> dict[str, int | float | str]: ...


@runtime_checkable
class LabelsStates(Protocol):
    """A privileged expert that can label any state, not only those on its own path: its
    ``select_action(obs)`` depends on the current simulator state alone (no memory of earlier
    steps of the episode that changes the action), so it may be asked at states another policy
    drove the env into. Interactive imitation (DAgger) needs this of its labeller."""

    labels_any_state: bool


def policy_name(policy: object) -> str:
    """``policy.policy_id`` when the policy names itself, else its class name."""
    return policy.policy_id if isinstance(policy, NamesItself) else type(policy).__name__
