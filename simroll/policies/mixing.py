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

A :class:`Perturbation` (``perturb``) injects disturbances into the executed actions, so that the
learner's rollouts visit the states a disturbance leads to and the expert labels how to recover from
them (disturbance injection as in DART, Laskey et al. 2017): at each step of a chosen expert phase
(``SoftExpert.phase``, e.g. ``lift`` and ``carry``), with probability ``rate``, some channels of the
executed action are overwritten (e.g. the gripper opened) for ``steps`` steps, at most
``per_episode`` times an episode; a channel given as ``[low, high]`` takes a value drawn uniformly
once per disturbance (e.g. a push of the hand in a random horizontal direction while the gripper
opens, so an object is let go beside where the expert would have released it). The labels stay the
expert's action at every state; only what is executed changes. With ``expert_after = n`` the
expert's action is executed for the ``n`` steps after each disturbance, so its recovery is
demonstrated on the disturbed path, not only labelled along the learner's. Its coins come from a
jump of the same generator, so they neither move the beta coins nor the env's stream.

:func:`mixing_policy` is the Hydra target (``_partial_: true``) whose ``learner`` and ``expert``
are policy configs Hydra instantiates into factories.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simroll.checks import is_int, is_number
from simroll.policies.base import CountsNetworkEvaluations, LabelsStates, policy_name


@dataclass(frozen=True)
class Perturbation:
    """Overwrite the executed action's channels where ``action`` has a number (``None`` keeps the
    driver's; ``(low, high)`` a uniform draw per disturbance) for ``steps`` steps, started with
    probability ``rate`` at each step whose expert phase is in ``phases`` (every step when empty),
    at most ``per_episode`` times an episode; then execute the expert's action for ``expert_after``
    steps (0: the driver goes on)."""

    action: tuple[float | tuple[float, float] | None, ...]
    phases: tuple[str, ...] = ()
    rate: float = 0.1
    steps: int = 5
    per_episode: int = 1
    expert_after: int = 0

    @classmethod
    def from_config(cls, config: Mapping[str, Any], action_space: Any) -> Perturbation:
        """Check a ``perturb`` mapping against the env's action space; the error names the bad
        key and value."""
        known = {"action", "phases", "rate", "steps", "per_episode", "expert_after"}
        if not isinstance(config, Mapping) or set(config) - known or "action" not in config:
            raise ValueError(
                "perturb must be a mapping with an action and optionally "
                f"{sorted(known - {'action'})}, got {config!r}"
            )
        low, high = np.asarray(action_space.low), np.asarray(action_space.high)
        action = config["action"]

        def is_range(v: Any) -> bool:
            return (
                isinstance(v, Sequence)
                and not isinstance(v, str)
                and len(v) == 2
                and all(is_number(x) for x in v)
                and v[0] <= v[1]
            )

        if not (
            isinstance(action, Sequence)
            and not isinstance(action, str)
            and len(action) == low.size
            and all(v is None or is_number(v) or is_range(v) for v in action)
            and any(v is not None for v in action)
        ):
            raise ValueError(
                f"perturb.action must list {low.size} channels, each a number, a range "
                f"[low, high] (drawn per disturbance) or null (keep the driver's), at least one "
                f"not null; got {action!r}"
            )
        for i, value in enumerate(action):
            ends = () if value is None else tuple(value) if is_range(value) else (value,)
            if not all(low[i] <= end <= high[i] for end in ends):
                raise ValueError(
                    f"perturb.action[{i}] = {value!r} is outside the action space "
                    f"[{low[i]}, {high[i]}]"
                )
        phases = config.get("phases", ())
        if isinstance(phases, str) or not all(isinstance(p, str) for p in phases):
            raise ValueError(f"perturb.phases must be a list of phase names, got {phases!r}")
        rate = config.get("rate", cls.rate)
        if not (is_number(rate) and 0.0 < rate <= 1.0):
            raise ValueError(f"perturb.rate must be a probability in (0, 1], got {rate!r}")
        least = {"steps": 1, "per_episode": 1, "expert_after": 0}
        counts = {name: config.get(name, getattr(cls, name)) for name in least}
        for name, value in counts.items():
            if not is_int(value, least[name]):
                raise ValueError(
                    f"perturb.{name} must be an integer >= {least[name]}, got {value!r}"
                )
        return cls(
            action=tuple(
                None if v is None else float(v) if is_number(v) else (float(v[0]), float(v[1]))
                for v in action
            ),
            phases=tuple(phases),
            rate=float(rate),
            steps=int(counts["steps"]),
            per_episode=int(counts["per_episode"]),
            expert_after=int(counts["expert_after"]),
        )

    @property
    def drawn(self) -> bool:
        """Whether a channel is a range, drawn anew for each disturbance."""
        return any(isinstance(v, tuple) for v in self.action)

    def draw(self, rng: np.random.Generator) -> tuple[float | None, ...]:
        """The channel values of one disturbance: each range drawn uniformly (in channel order,
        one draw per range), numbers and nulls as given; nothing is drawn without a range, so
        such settings keep their random streams."""
        if not self.drawn:
            return self.action  # type: ignore[return-value]  (no tuple in it)
        return tuple(float(rng.uniform(*v)) if isinstance(v, tuple) else v for v in self.action)

    def apply(self, action: np.ndarray, values: Sequence[float | None]) -> np.ndarray:
        """``action`` with the channels of ``values`` (one disturbance's :meth:`draw`)
        overwritten where they are not None."""
        out = action.copy()
        for i, value in enumerate(values):
            if value is not None:
                out[i] = value
        return out


class ExpertMixing:
    """Execute the expert's action with probability ``beta``, else the learner's; label every step
    with the expert's action."""

    def __init__(
        self,
        learner: Any,
        expert: Any,
        env: Any,
        beta: float = 0.0,
        perturb: Mapping[str, Any] | None = None,
    ) -> None:
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
        self.perturb = (
            None if perturb is None else Perturbation.from_config(perturb, env.action_space)
        )
        if self.perturb is not None and self.perturb.phases:
            if not hasattr(expert, "phase"):
                raise ValueError(
                    f"perturb.phases needs an expert that reports its phase; "
                    f"{policy_name(expert)!r} has no `phase` (leave phases empty to perturb at "
                    "any step)"
                )
            known = getattr(expert, "phases", self.perturb.phases)  # (if it lists them)
            unknown = sorted(set(self.perturb.phases) - set(known))
            if unknown:
                raise ValueError(
                    f"perturb.phases {unknown} are not phases of {policy_name(expert)!r}, "
                    f"whose phases are {list(known)}"
                )
        self.action_label: np.ndarray | None = None
        self.expert_steps = self.perturbed_steps = self.perturbations = self.perturb_left = 0
        self.steps = self.recover_left = 0
        self.perturb_values: tuple[float | None, ...] | None = None
        self.rng = np.random.default_rng(0)
        self.perturb_rng = np.random.default_rng(1)

    @property
    def policy_id(self) -> str:
        perturbed = "" if self.perturb is None else ",perturbed"
        return (
            f"dagger({policy_name(self.learner)}|{policy_name(self.expert)},"
            f"beta={self.beta:g}{perturbed})"
        )

    @property
    def network_evaluations(self) -> int:
        learner = self.learner
        return learner.network_evaluations if isinstance(learner, CountsNetworkEvaluations) else 0

    def episode_extras(self) -> dict[str, int]:
        """``expert_steps``: the steps of this episode on which the expert's action was executed
        (by beta's coin or after a disturbance); with ``perturb``, ``perturbed_steps``: those on
        which a disturbance overwrote the executed action."""
        extras = {"expert_steps": self.expert_steps}
        if self.perturb is not None:
            extras["perturbed_steps"] = self.perturbed_steps
        return extras

    def reset(self) -> None:
        self.learner.reset()
        self.expert.reset()
        self.rng = copy.deepcopy(self.env.np_random)
        self.perturb_rng = np.random.Generator(self.env.np_random.bit_generator.jumped())
        self.action_label = None
        self.expert_steps = self.steps = self.recover_left = 0
        self.perturbed_steps = self.perturbations = self.perturb_left = 0
        self.perturb_values = None

    def select_action(self, obs: Any) -> np.ndarray:
        label = np.asarray(self.expert.select_action(obs), dtype=np.float32)
        learned = np.asarray(self.learner.select_action(obs), dtype=np.float32)
        self.action_label = label.copy()
        self.steps += 1
        coin = self.beta > 0.0 and self.rng.random() < self.beta  # drawn every step
        recovering = self.recover_left > 0
        if recovering:
            self.recover_left -= 1
        executed = label if coin or recovering else learned
        self.expert_steps += executed is label
        return executed if self.perturb is None else self._perturbed(executed)

    def _perturbed(self, action: np.ndarray) -> np.ndarray:
        perturb = self.perturb
        if self.perturb_left == 0 and self.perturbations < perturb.per_episode:
            eligible = not perturb.phases or getattr(self.expert, "phase", None) in perturb.phases
            if eligible and self.perturb_rng.random() < perturb.rate:
                self.perturbations += 1
                self.perturb_left = perturb.steps
                self.perturb_values = perturb.draw(self.perturb_rng)  # after the coin
        if self.perturb_left == 0:
            return action
        self.perturb_left -= 1
        self.perturbed_steps += 1
        if self.perturb_left == 0:
            self.recover_left = perturb.expert_after
        return perturb.apply(action, self.perturb_values)


def mixing_policy(
    env: Any,
    learner: Callable[[Any], Any],
    expert: Callable[[Any], Any],
    beta: float = 0.0,
    perturb: Mapping[str, Any] | None = None,
) -> ExpertMixing:
    """``ExpertMixing(learner(env), expert(env), env, beta, perturb)``: the factory a round's
    config names (``learner`` and ``expert`` are policy factories, e.g. instantiated
    ``_partial_`` configs)."""
    return ExpertMixing(learner(env), expert(env), env, beta, perturb)
