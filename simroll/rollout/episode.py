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

Whatever must see the episode as it runs (video frames, dataset frames, per-step readings) is an
:class:`EpisodeObserver` passed in ``observers``: ``on_reset`` after the reset, ``on_step`` after
every step with the action that step applied, ``on_end`` once with the finished record, before
``run_episode`` returns it. So the episode that is scored is the one recorded; nothing re-runs an
episode to film or store it. The backends build observers inside their workers from picklable
factories (:class:`simroll.rollout.backends.EpisodeJob`).

An episode that raises is recorded with its error (``termination_reason="error"``) instead of
propagating, and so is one whose observer raises (the run did not produce what was asked of it);
a diverging simulation ends with the env's ``termination_reason``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

import simroll.envs  # noqa: F401  (registers the envs)
from simroll.envs.sensing import lazy_render_seconds
from simroll.envs.wrappers import ControlDelay
from simroll.policies.base import CountsNetworkEvaluations, ReportsEpisodeExtras
from simroll.rollout.records import EpisodeRecord, EpisodeSpec

PolicyFactory = Callable[[gym.Env], Any]


class EpisodeObserver:
    """Watches one episode from inside :func:`run_episode`; every hook is a no-op here, so an
    observer overrides only the ones it needs.

    * ``on_reset(env, obs, info, policy)``: after the env's reset and the policy's, before the
      first action. ``policy`` is the episode's policy (dataset recording reads its
      ``action_label``).
    * ``on_step(env, obs, info, action)``: after every step; ``action`` is the action that step
      applied (after any control delay), ``obs`` and ``info`` what the step returned.
    * ``on_end(record)``: exactly once, with the episode's :class:`EpisodeRecord`, before
      ``run_episode`` returns it; also when the episode raised, possibly before any ``on_reset``
      (then ``record.error`` is set). Release resources here.

    A hook that raises makes the episode an error record; observers that come later in the list
    then see that record in their ``on_end``.
    """

    def on_reset(self, env: gym.Env, obs: dict, info: dict, policy: Any) -> None:
        """After the reset, before the first action."""

    def on_step(self, env: gym.Env, obs: dict, info: dict, action: np.ndarray) -> None:
        """After every step, with the action that step applied."""

    def on_end(self, record: EpisodeRecord) -> None:
        """Once, with the finished episode's record."""


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
    spec: EpisodeSpec, policy_factory: PolicyFactory, env_config: EnvConfig, calls: int = 40
) -> float:
    """Wall time (s) of a planning call of ``select_action``, from the first ``calls`` steps of
    ``spec``: see :func:`planning_latency`."""
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
    return planning_latency(timings)


def planning_latency(timings: Sequence[float]) -> float:
    """The latency of the calls that plan, from the wall times of consecutive ``select_action``
    calls. A chunking policy plans on one call in ``n_action_steps`` and pops a queued action on
    the others; the actions of a chunk wait for the planning call, so that call's time is the
    delay they suffer (the median over all calls would be a pop's microseconds). Planning calls
    are those above the geometric midpoint of the fastest and the slowest call (pops take
    microseconds, plans milliseconds; one slow outlier does not move the midpoint past the
    plans); their median is returned. A policy that plans every call keeps about its median."""
    values = np.asarray(timings, dtype=float)
    if values.size == 0:
        raise ValueError("no select_action call was timed")
    low, high = max(float(values.min()), 1e-9), max(float(values.max()), 1e-9)
    planning = values[values >= math.sqrt(low * high)]
    return float(np.median(planning))


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
    observers: Sequence[EpisodeObserver] = (),
) -> EpisodeRecord:
    """Run one episode of ``spec`` with a fresh policy from ``policy_factory``, shown to
    ``observers`` as it runs; never raises for failures inside the episode or an observer (they
    are recorded), only for bad arguments."""
    if control_delay_steps < 0:
        raise ValueError(f"control_delay_steps must be >= 0, got {control_delay_steps}")
    owns_env = env is None
    wall_start = time.perf_counter()
    compute, calls, steps = 0.0, 0, 0
    info: dict[str, Any] = {}
    reason = "error"
    error = None
    policy = None
    try:
        if env is None:
            env = (env_config or EnvConfig()).make(spec)
        policy = policy_factory(env)  # the env itself: privileged experts read its state
        delayed = ControlDelay(env, control_delay_steps)  # never closed: it would close ``env``
        obs, info = delayed.reset(seed=spec.seed, options={"variation": spec.variation})
        policy.reset()
        _seed_policy_randomness(spec.seed)
        for observer in observers:
            observer.on_reset(env, obs, info, policy)
        while True:
            start, rendered = time.perf_counter(), lazy_render_seconds()
            action = policy.select_action(obs)
            compute += time.perf_counter() - start - (lazy_render_seconds() - rendered)
            calls += 1
            obs, _, terminated, truncated, info = delayed.step(action)
            applied = delayed.applied_action
            steps += 1
            for observer in observers:
                observer.on_step(env, obs, info, applied)
            if terminated or truncated:
                reason = info.get("termination_reason") or ("time_limit" if truncated else "ended")
                break
    except Exception as exc:  # noqa: BLE001 - an episode's failure is recorded, not raised
        error = _error_text(exc)
        reason = "error"
    finally:
        if owns_env and env is not None:
            env.close()
    extra: dict[str, Any] = {"attempt": attempt}
    if isinstance(policy, CountsNetworkEvaluations):
        extra["network_evaluations"] = int(policy.network_evaluations)
    if isinstance(policy, ReportsEpisodeExtras):
        extra.update(policy.episode_extras())
    # an env whose steps are macro actions (the clutter primitives) reports its own costs
    metrics = info.get("episode_metrics") or {}
    extra.update(metrics)
    evaluation = info.get("eval", {})
    tolerance = float(evaluation.get("tolerance", float("nan")))
    peak = float(evaluation.get("peak_deformation", float("nan")))
    if error is not None:
        peak = float("nan") if not evaluation else peak
    record = EpisodeRecord(
        spec=spec,
        policy_id=policy_id,
        policy_config_hash=policy_config_hash,
        success=bool(info.get("is_success", False)) and error is None,
        steps=steps,
        sim_time=_sim_time(steps, env, metrics),
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
    for observer in observers:
        try:
            observer.on_end(record)
        except Exception as exc:  # noqa: BLE001 - the episode did not give what was asked
            if record.error is None:
                record = dataclasses.replace(
                    record, success=False, termination_reason="error", error=_error_text(exc)
                )
    return record


def _sim_time(steps: int, env: gym.Env | None, metrics: dict[str, Any]) -> float:
    """Simulated seconds of an episode: its steps at the env's control rate, or the execution
    time a macro-step env measured."""
    if "execution_time" in metrics:
        return round(float(metrics["execution_time"]), 6)
    return round(steps / env.metadata["render_fps"], 6) if env is not None else 0.0


def _error_text(exc: BaseException) -> str:
    """An error's one-line summary and the last frames of its traceback, as records store it."""
    text = "".join(traceback.format_exception_only(exc)).strip()
    return text + "\n" + "".join(traceback.format_tb(exc.__traceback__)[-3:])
