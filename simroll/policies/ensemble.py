"""A checkpoint ensemble: one policy that executes the mean (or median) of its members' actions.

SimVLA checkpoints of different training runs fail different episodes, far more than one
checkpoint resampled does (``scripts/outcome_agreement.py`` measures it), so averaging their
actions asks whether that disagreement is variance an average removes.

:class:`EnsemblePolicy` asks every member at every control step, so each member's action-chunk
queue and observation history advance as if it drove alone, and returns the (optionally
weighted) mean action, or with ``combine="median"`` the per-channel median, which one member's
outlying action (an early release, a swerve) does not move; e.g. with three members the gripper
opens only when two of them open it. Members draw their sampling noise from torch's stream in the
order given, so a seeded episode stays reproducible. Network evaluations add up over the members.

:func:`ensemble_policy` is the Hydra target (``_partial_: true``) whose ``members`` are policy
configs Hydra instantiates into factories (``configs/policy/vla_ensemble.yaml``); its
``overrides`` apply to every member, so an acceleration knob (``configs/accel/``) accelerates the
whole ensemble.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from simroll.checks import is_number
from simroll.policies.base import CountsNetworkEvaluations, policy_name

COMBINES = ("mean", "median")


class EnsemblePolicy:
    """The mean of ``members``' actions, weighted by ``weights`` (equal when None), or their
    per-channel median (``combine="median"``, equal weights only)."""

    def __init__(
        self,
        members: Sequence[Any],
        weights: Sequence[float] | None = None,
        combine: str = "mean",
    ):
        members = list(members)
        if combine not in COMBINES:
            raise ValueError(f"combine must be one of {COMBINES}, got {combine!r}")
        if combine == "median" and weights is not None:
            raise ValueError(
                f"combine='median' takes equal members (weights null), got weights {weights!r}"
            )
        if len(members) < 2:
            raise ValueError(f"an ensemble needs at least 2 members, got {len(members)}")
        if weights is None:
            weights = [1.0] * len(members)
        weights = list(weights)
        if len(weights) != len(members):
            raise ValueError(f"weights has {len(weights)} entries for {len(members)} members")
        if not all(is_number(w) and w >= 0 for w in weights) or not sum(weights) > 0:
            raise ValueError(f"weights must be numbers >= 0 with a positive sum, got {weights}")
        self.members = members
        self.weights = np.asarray(weights, dtype=np.float64) / float(sum(weights))
        self.combine = combine

    @property
    def policy_id(self) -> str:
        return "ensemble(" + ",".join(policy_name(member) for member in self.members) + ")"

    @property
    def network_evaluations(self) -> int:
        return sum(
            member.network_evaluations
            for member in self.members
            if isinstance(member, CountsNetworkEvaluations)
        )

    def reset(self) -> None:
        for member in self.members:
            member.reset()

    def select_action(self, obs: Any) -> np.ndarray:
        actions = np.stack([np.asarray(m.select_action(obs), np.float64) for m in self.members])
        if self.combine == "median":
            return np.median(actions, axis=0).astype(np.float32)
        return (self.weights @ actions).astype(np.float32)


def with_overrides(member: Callable[[Any], Any], overrides: Mapping[str, Any]) -> functools.partial:
    """``member``, a policy factory from a ``_partial_`` config with an ``overrides`` argument
    (``load_policy``), with ``overrides`` merged over its own (ValueError naming it otherwise)."""
    if (
        not isinstance(member, functools.partial)
        or "overrides" not in inspect.signature(member.func).parameters
    ):
        raise ValueError(
            f"ensemble overrides {dict(overrides)} need members whose factory takes overrides "
            f"(e.g. simroll.policies.lerobot.load_policy), got {member!r}"
        )
    own = member.keywords.get("overrides") or {}
    return functools.partial(
        member.func, *member.args, **{**member.keywords, "overrides": {**own, **overrides}}
    )


def ensemble_policy(
    env: Any,
    members: Sequence[Callable[[Any], Any]],
    weights: Sequence[float] | None = None,
    combine: str = "mean",
    overrides: Mapping[str, Any] | None = None,
) -> EnsemblePolicy:
    """``EnsemblePolicy([member(env) for member in members], weights, combine)``: the factory a
    config names (each member a policy factory, e.g. an instantiated ``_partial_`` config).
    ``overrides`` (inference settings such as an acceleration knob's ``num_flow_steps``) apply to
    every member, over its own."""
    if overrides:
        members = [with_overrides(member, overrides) for member in members]
    return EnsemblePolicy([member(env) for member in members], weights, combine)
