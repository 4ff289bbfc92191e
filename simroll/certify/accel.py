"""A stand-in accelerated policy: run the wrapped policy on only a fraction of control steps.

:class:`ReplanEvery` wraps any policy with the ``reset()`` / ``select_action(obs)`` verbs and
calls it only on the control steps where ``floor(t / every)`` changes (``t`` counted from the
reset), so the wrapped model runs ``ceil``-ish ``steps / every`` times per episode instead of
``steps`` times: cheaper compute per control step, bought with stale decisions. Between two
re-plans it either holds the last command (``between="hold"``, :func:`simroll.features.
hold_action`: in simroll's action layout, four hand-pose *deltas* and one gripper command,
holding means zero deltas and the same absolute gripper command, or a zero gripper delta in
``gripper_mode="delta"``: the hand and jaw stay where last commanded) or repeats the last action
verbatim (``between="repeat"``: classic action repeat, which makes a deadbeat position controller
such as the scripted expert overshoot and oscillate).

This is an honest but crude acceleration, here so that certification (``simroll certify``) can be
demonstrated and tested end to end with the scripted expert until the learned policies' own
acceleration knobs (action chunking, token pruning, fewer flow steps) land. Its compute is
countable exactly: :attr:`ReplanEvery.network_evaluations` is the wrapped model's evaluations
since the reset (its own count where it keeps one, else its ``select_action`` calls), which the
episode engine records like any policy's and certification uses as its deterministic cost.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from simroll.checks import is_number
from simroll.features import hold_action
from simroll.policies.base import CountsNetworkEvaluations, policy_name

BETWEEN = ("hold", "repeat")


class ReplanEvery:
    """Call ``policy`` every ``every`` control steps (``every`` >= 1, may be fractional)."""

    def __init__(
        self,
        env: Any,
        policy: Callable[[Any], Any],
        every: float = 2.0,
        between: str = "hold",
    ) -> None:
        if not (is_number(every) and every >= 1.0):
            raise ValueError(f"every must be a number of control steps >= 1, got {every!r}")
        if between not in BETWEEN:
            raise ValueError(f"between must be one of {list(BETWEEN)}, got {between!r}")
        self.inner = policy(env)
        unwrapped = getattr(env, "unwrapped", env)
        self._gripper_mode = getattr(unwrapped, "gripper_mode", None) or "continuous"
        self.every = float(every)
        self.between = between
        self.reset()

    @property
    def policy_id(self) -> str:
        return f"{policy_name(self.inner)}/replan_every_{self.every:g}_{self.between}"

    def reset(self) -> None:
        self.inner.reset()
        self.steps = 0
        self.compute_calls = 0  # wrapped-model calls this episode
        self._last: np.ndarray | None = None

    def _computes_at(self, step: int) -> bool:
        return step == 0 or math.floor(step / self.every) != math.floor((step - 1) / self.every)

    def select_action(self, obs: Any) -> np.ndarray:
        if self._last is None or self._computes_at(self.steps):
            self._last = np.asarray(self.inner.select_action(obs), dtype=np.float32).copy()
            self.compute_calls += 1
            action = self._last
        elif self.between == "hold":
            action = hold_action(self._last, gripper_mode=self._gripper_mode)
        else:
            action = self._last
        self.steps += 1
        return action.copy()

    def predict_action_chunk(self, obs: Any) -> np.ndarray:
        return self.select_action(obs)[None]

    @property
    def network_evaluations(self) -> int:
        """Evaluations of the wrapped model since ``reset``: its own count when it keeps one
        (a LeRobot policy's chunks x denoising steps), else one per call made to it."""
        if isinstance(self.inner, CountsNetworkEvaluations):
            return self.inner.network_evaluations
        return self.compute_calls
