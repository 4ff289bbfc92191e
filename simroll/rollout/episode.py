"""The one episode loop: ``run_episode(spec, policy_factory) -> EpisodeRecord``.

Every consumer (eval, certification, training-time validation, benchmarks) runs episodes through
this function, whatever backend hosts it. An episode is fully determined by its
:class:`EpisodeSpec`: the env is reset with ``seed=spec.seed`` and ``variation=spec.variation``,
and torch's global generator (a stochastic policy's sampling noise) is seeded with ``spec.seed``.

The policy is built per episode by ``policy_factory(env)`` (privileged experts need the env they
control; learned policies ignore it) and must offer ``reset()`` and ``select_action(obs)``. Each
``select_action`` call is timed (``time.perf_counter``, less the time the env spent rendering
camera images the policy read for the first time: see ``simroll.envs.sensing.LazyImages``) and
the total and count go into the record; the wall times, the attempt number and an error's
traceback text are the record's measurements, outside its receipt, so rerunning a spec gives
the same receipt (see :mod:`simroll.rollout.records`). An optional control delay of ``k`` steps
applies the action computed from the observation at step ``t`` at step ``t + k`` (until then the
hand holds still and the gripper keeps its last command), so a slow policy can be scored under
the timing it would really have.

``on_step(env, obs, info)`` is called after the reset and after every step; a callback that
declares an ``action`` parameter also gets the action that step applied (``None`` after the
reset), which dataset recording pairs with the previous observation.

An episode that raises is recorded with its error (``termination_reason="error"``) instead of
propagating; a diverging simulation ends with the env's ``termination_reason``.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

import simroll.envs  # noqa: F401  (registers the envs)
from simroll.envs.sensing import lazy_render_seconds
from simroll.rollout.records import EpisodeRecord, EpisodeSpec

PolicyFactory = Callable[[gym.Env], Any]
FrameCallback = Callable[..., None]  # (env, obs, info) or (env, obs, info, action)


@dataclass(frozen=True)
class EnvConfig:
    """How envs are built for a run (everything but the per-episode spec)."""

    obs_mode: str = "state"
    gripper_mode: str = "continuous"
    image_size: int = 96
    rigid_twin: bool = False
    render_mode: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)

    def make(self, spec: EpisodeSpec) -> gym.Env:
        return gym.make(
            f"simroll/{spec.task}-v0",
            object=spec.object,
            obs_mode=self.obs_mode,
            gripper_mode=self.gripper_mode,
            image_size=self.image_size,
            rigid_twin=self.rigid_twin,
            render_mode=self.render_mode,
            **self.kwargs,
        )


class EnvPool:
    """Keeps one env per (task, object) so episodes in a worker reuse compiled models."""

    def __init__(self, config: EnvConfig):
        self.config = config
        self._envs: dict[tuple[str, str], gym.Env] = {}

    def get(self, spec: EpisodeSpec) -> gym.Env:
        key = (spec.task, spec.object)
        if key not in self._envs:
            self._envs[key] = self.config.make(spec)
        return self._envs[key]

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()


def config_hash(config: Any) -> str:
    """Short stable hash of a JSON-able policy/env configuration."""
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def latency_to_delay_steps(latency_s: float, control_hz: float = 20.0) -> int:
    """Control steps a policy with ``latency_s`` seconds per call lags behind: an action computed
    from the observation at ``t`` is ready ``ceil(latency * hz)`` steps later (0 for latency 0)."""
    if not (latency_s >= 0 and math.isfinite(latency_s)):
        raise ValueError(f"policy latency must be a finite number of seconds >= 0, got {latency_s}")
    return math.ceil(round(latency_s * control_hz, 9))


def measure_latency(
    spec: EpisodeSpec, policy_factory: PolicyFactory, env_config: EnvConfig, calls: int = 20
) -> float:
    """Median wall time (s) of ``select_action`` over the first ``calls`` steps of ``spec``."""
    timings: list[float] = []
    env = env_config.make(spec)
    try:
        policy = policy_factory(env)
        obs, _ = env.reset(seed=spec.seed, options={"variation": spec.variation})
        policy.reset()
        for _ in range(calls):
            start, rendered = time.perf_counter(), lazy_render_seconds()
            action = policy.select_action(obs)
            timings.append(time.perf_counter() - start - (lazy_render_seconds() - rendered))
            obs, _, terminated, truncated, _ = env.step(np.asarray(action, dtype=np.float32))
            if terminated or truncated:
                break
    finally:
        env.close()
    return float(np.median(timings))


def _takes_action(callback: FrameCallback) -> bool:
    """Whether ``callback`` accepts the applied action (an ``action`` parameter or ``**kwargs``)."""
    try:
        parameters = inspect.signature(callback).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: the 3-argument protocol
        return False
    return any(p.name == "action" or p.kind is p.VAR_KEYWORD for p in parameters)


def _hold_action(previous: np.ndarray | None) -> np.ndarray:
    action = np.zeros(5, dtype=np.float32)
    action[4] = -1.0 if previous is None else previous[4]
    return action


def _seed_policy_randomness(seed: int) -> None:
    """Seed torch's global generator, which stochastic policies sample from (LeRobot's diffusion
    noise, SimVLA's flow noise), so their episode too is fixed by its spec and not by whatever
    ran earlier in this process or worker. Torch is seeded only when a policy has imported it."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


def run_episode(
    spec: EpisodeSpec,
    policy_factory: PolicyFactory,
    *,
    env: gym.Env | None = None,
    env_config: EnvConfig | None = None,
    policy_id: str = "policy",
    policy_config_hash: str = "",
    control_delay_steps: int = 0,
    attempt: int = 1,
    on_step: FrameCallback | None = None,
) -> EpisodeRecord:
    """Run one episode of ``spec`` with a fresh policy from ``policy_factory``; never raises
    for failures inside the episode (they are recorded), only for bad arguments."""
    if control_delay_steps < 0:
        raise ValueError(f"control_delay_steps must be >= 0, got {control_delay_steps}")
    owns_env = env is None
    step_kwargs = {"action": None} if on_step is not None and _takes_action(on_step) else {}
    wall_start = time.perf_counter()
    compute, calls, steps = 0.0, 0, 0
    info: dict[str, Any] = {}
    reason = "error"
    error = None
    policy = None
    try:
        if env is None:
            env = (env_config or EnvConfig()).make(spec)
        policy = policy_factory(env)
        obs, info = env.reset(seed=spec.seed, options={"variation": spec.variation})
        policy.reset()
        _seed_policy_randomness(spec.seed)
        pending: deque[np.ndarray] = deque()
        applied: np.ndarray | None = None
        if on_step is not None:
            on_step(env, obs, info, **step_kwargs)
        while True:
            start, rendered = time.perf_counter(), lazy_render_seconds()
            action = policy.select_action(obs)
            compute += time.perf_counter() - start - (lazy_render_seconds() - rendered)
            calls += 1
            pending.append(np.asarray(action, dtype=np.float32).reshape(-1))
            if len(pending) > control_delay_steps:
                applied = pending.popleft()
            else:
                applied = _hold_action(applied)
            obs, _, terminated, truncated, info = env.step(applied)
            steps += 1
            if on_step is not None:
                if step_kwargs:
                    step_kwargs["action"] = applied
                on_step(env, obs, info, **step_kwargs)
            if terminated or truncated:
                reason = info.get("termination_reason") or ("time_limit" if truncated else "ended")
                break
    except Exception as exc:  # noqa: BLE001 - an episode's failure is recorded, not raised
        error = "".join(traceback.format_exception_only(exc)).strip()
        error += "\n" + "".join(traceback.format_tb(exc.__traceback__)[-3:])
        reason = "error"
    finally:
        if owns_env and env is not None:
            env.close()
    extra: dict[str, Any] = {"attempt": attempt}
    evaluations = getattr(policy, "network_evaluations", None)
    if isinstance(evaluations, int):
        extra["network_evaluations"] = evaluations
    evaluation = info.get("eval", {})
    tolerance = float(evaluation.get("tolerance", float("nan")))
    peak = float(evaluation.get("peak_deformation", float("nan")))
    if error is not None:
        peak = float("nan") if not evaluation else peak
    return EpisodeRecord(
        spec=spec,
        policy_id=policy_id,
        policy_config_hash=policy_config_hash,
        success=bool(info.get("is_success", False)) and error is None,
        steps=steps,
        sim_time=round(steps / env.metadata["render_fps"], 6) if env is not None else 0.0,
        termination_reason=reason,
        peak_deformation=peak,
        tolerance=tolerance,
        policy_calls=calls,
        policy_compute_s=compute,
        episode_wall_s=time.perf_counter() - wall_start,
        control_delay_steps=control_delay_steps,
        error=error,
        extra=extra,
    )
