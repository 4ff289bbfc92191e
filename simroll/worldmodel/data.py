"""Trajectories for the world model, collected from the simulator through the episode engine.

Each episode runs through :func:`simroll.rollout.episode.run_episode`; an observer
(:class:`StateRecorder`) records the simulator state after the reset and after every step, and the
action each step applied. The state of one step is a flat vector (``STATE_LAYOUT``): the soft
object's flex vertices relative to their centroid in the object's own frame (its deformation),
the object's yaw and centroid, the hand pose, the jaw opening, and the controller's state (hand
target, gripper target), which makes the 20 Hz transition close to Markov. Velocities are left
out: sampled at 20 Hz during contact they are dominated by vibration (their step-to-step
increments are anti-correlated), so they add noise that no model can predict, forward or back.
The action of step ``t`` is the one that took state ``t`` to state ``t + 1``.

The behaviour policy is the scripted expert (gentle or firm grip) with Gaussian action noise,
which after it has grasped the object usually hands over to an exploration phase: random
squeeze-and-release cycles of the gripper and smooth random hand motion. Releases let the object
relax, fall and settle on its own, so the data holds free deformation as well as deformation
under the gripper. Every choice is drawn from the episode seed, so a split is reproducible.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import gymnasium as gym
import numpy as np

from simroll.envs.core import MAX_STEP
from simroll.envs.variations import Variation, resolve_variation
from simroll.experts import SoftExpert
from simroll.features import ACTION_DIM, GRIPPER, HAND
from simroll.io import atomic_path
from simroll.rollout.episode import EnvConfig, EnvPool, EpisodeObserver, run_episode
from simroll.rollout.records import EpisodeSpec
from simroll.rollout.runner import make_specs

# name -> width of each block of the flat state vector, in order
STATE_LAYOUT: dict[str, int] = {
    "shape": 0,  # 3 x number of flex vertices, relative to the centroid, in the object's frame
    "object_yaw": 1,
    "centroid": 3,
    "hand_pose": 4,
    "jaw_opening": 1,
    "hand_target": 4,
    "gripper_target": 1,
}
CONTACT_PHASES = ("squeeze", "lift", "carry", "lower", "release", "retreat")


def state_layout(vertices: int) -> dict[str, slice]:
    """Slices of each block of the flat state vector for an object with ``vertices`` points."""
    widths = {**STATE_LAYOUT, "shape": 3 * vertices}
    slices, start = {}, 0
    for name, width in widths.items():
        slices[name] = slice(start, start + width)
        start += width
    return slices


def read_state(env: gym.Env) -> np.ndarray:
    """The flat state vector of the env's current simulator state (see ``STATE_LAYOUT``).

    The shape block is de-rotated by the object's yaw so that it holds deformation only; a rigid
    turn of the object is one number (``object_yaw``) instead of a pattern over every vertex.
    """
    env = env.unwrapped
    if env.ids.flex < 0:
        raise ValueError("the world model needs a soft (flex) object, got a rigid twin")
    points = env.object_points()
    centroid = points.mean(axis=0)
    yaw = env.object_yaw()
    return np.concatenate(
        [
            rotate_z(points - centroid, -yaw).ravel(),
            [yaw],
            centroid,
            env.hand_pose(),
            [env.jaw_opening()],
            env.hand_target(),
            [env.data.ctrl[4]],  # the jaw servo's set point: controller state, like the target
        ]
    )


def rotate_z(points: np.ndarray, angle: np.ndarray | float) -> np.ndarray:
    """Rotate ``(..., n, 3)`` points about the z axis by ``angle (...)`` radians."""
    angle = np.asarray(angle, dtype=np.float64)[..., None]
    c, s = np.cos(angle), np.sin(angle)
    x, y = points[..., 0], points[..., 1]
    return np.stack([c * x - s * y, s * x + c * y, points[..., 2]], axis=-1)


def vertex_positions(states: np.ndarray, vertices: int) -> np.ndarray:
    """World positions ``(..., n, 3)`` of the object's vertices from flat states."""
    layout = state_layout(vertices)
    shape = states[..., layout["shape"]].reshape(*states.shape[:-1], vertices, 3)
    yaw = states[..., layout["object_yaw"]][..., 0]
    return rotate_z(shape, yaw) + states[..., layout["centroid"]][..., None, :]


# ------------------------------------------------------------------------- behaviour policy
@dataclass(frozen=True)
class BehaviourConfig:
    """How the data-collection policy perturbs the scripted expert."""

    closures: tuple[str, ...] = ("gentle", "firm")
    max_noise_std: float = 0.15  # per-episode action-noise std drawn from U(0, max)
    explore_probability: float = 0.75  # episodes that switch to exploration after the grasp
    explore_delay: tuple[int, int] = (0, 6)  # steps after the grasp before exploring
    gripper_segment: tuple[int, int] = (5, 15)  # steps between new random gripper levels
    gripper_rate: float = 0.3  # largest change of the gripper command per step
    hand_speed: float = 0.5  # std of the smoothed random hand motion (action units)


class ExploringExpert:
    """The scripted expert with action noise, then (optionally) random squeeze-release cycles.

    Exposes the policy verbs (``reset``, ``select_action``). All randomness comes from ``seed``.
    """

    def __init__(self, env: gym.Env, seed: int, config: BehaviourConfig = BehaviourConfig()):
        rng = np.random.default_rng(seed)
        self.config = config
        self.closure = str(rng.choice(config.closures))
        self.expert = SoftExpert(env, self.closure)
        self.noise_std = float(rng.uniform(0.0, config.max_noise_std))
        self.explores = bool(rng.random() < config.explore_probability)
        self.explore_delay = int(rng.integers(config.explore_delay[0], config.explore_delay[1] + 1))
        self.seed = seed
        self.reset()

    def reset(self) -> None:
        self.expert.reset()
        self.rng = np.random.default_rng([self.seed, 1])
        self.exploring = False
        self.contact_steps = 0
        self.gripper = -1.0
        self.gripper_goal = -1.0
        self.segment_left = 0
        self.hand_velocity = np.zeros(4)

    def select_action(self, obs) -> np.ndarray:
        config = self.config
        if not self.exploring:
            action = np.asarray(self.expert.select_action(obs), dtype=np.float64)
            action[HAND] += self.rng.normal(0.0, self.noise_std, 4)
            if self.expert.phase in CONTACT_PHASES:
                self.contact_steps += 1
            if self.explores and self.contact_steps > self.explore_delay:
                self.exploring = True
                self.gripper = self.gripper_goal = float(action[GRIPPER])
                self.anchor = self.expert.env.hand_target()
            return np.clip(action, -1.0, 1.0).astype(np.float32)
        if self.segment_left <= 0:
            self.gripper_goal = float(self.rng.uniform(-1.0, 1.0))
            self.segment_left = int(self.rng.integers(*config.gripper_segment))
        self.segment_left -= 1
        step = np.clip(self.gripper_goal - self.gripper, -config.gripper_rate, config.gripper_rate)
        self.gripper = float(self.gripper + step)
        # AR(1) motion with stationary std hand_speed, pulled weakly back to where exploring
        # began so that the hand stays near the object
        self.hand_velocity = 0.8 * self.hand_velocity + 0.6 * self.rng.normal(
            0.0, config.hand_speed, 4
        )
        self.hand_velocity[3] *= 0.3  # little yaw
        pull = -0.1 * (self.expert.env.hand_target() - self.anchor) / MAX_STEP
        action = np.append(self.hand_velocity + pull, self.gripper)
        return np.clip(action, -1.0, 1.0).astype(np.float32)


# ------------------------------------------------------------------------- data set
@dataclass
class Trajectory:
    """States ``(T + 1, F)`` and the actions ``(T, 5)`` between them, for one episode."""

    states: np.ndarray
    actions: np.ndarray
    spec_key: str
    behaviour: str
    termination_reason: str

    def __post_init__(self) -> None:
        if self.states.ndim != 2 or self.actions.shape != (len(self.states) - 1, ACTION_DIM):
            raise ValueError(
                f"trajectory needs states (T+1, F) and actions (T, {ACTION_DIM}); got "
                f"{self.states.shape} and {self.actions.shape}"
            )


@dataclass
class SplitData:
    """All trajectories of one split (train, calib, test, or an out-of-distribution regime)."""

    name: str
    variation: str
    trajectories: list[Trajectory] = field(default_factory=list)
    collect_s: float = 0.0

    @property
    def transitions(self) -> int:
        return sum(len(t.actions) for t in self.trajectories)

    def save(self, path: str | Path) -> Path:
        """One ``.npz`` per split (plain arrays; loaded with ``allow_pickle=False``)."""
        path = Path(path)
        arrays: dict[str, np.ndarray] = {
            "name": np.array(self.name),
            "variation": np.array(self.variation),
            "collect_s": np.array(self.collect_s),
            "lengths": np.array([len(t.actions) for t in self.trajectories], dtype=np.int64),
            "spec_keys": np.array([t.spec_key for t in self.trajectories]),
            "behaviours": np.array([t.behaviour for t in self.trajectories]),
            "reasons": np.array([t.termination_reason for t in self.trajectories]),
        }
        if self.trajectories:
            arrays["states"] = np.concatenate([t.states for t in self.trajectories])
            arrays["actions"] = np.concatenate([t.actions for t in self.trajectories])
        with atomic_path(path) as temporary, open(temporary, "wb") as file:
            np.savez_compressed(file, **arrays)
        return path

    @classmethod
    def load(cls, path: str | Path) -> SplitData:
        with np.load(path, allow_pickle=False) as archive:
            lengths = archive["lengths"]
            split = cls(
                str(archive["name"]), str(archive["variation"]), [], float(archive["collect_s"])
            )
            if len(lengths) == 0:
                return split
            states, actions = archive["states"], archive["actions"]
            state_start = np.concatenate([[0], np.cumsum(lengths + 1)])
            action_start = np.concatenate([[0], np.cumsum(lengths)])
            for i, length in enumerate(lengths):
                split.trajectories.append(
                    Trajectory(
                        states=states[state_start[i] : state_start[i] + length + 1],
                        actions=actions[action_start[i] : action_start[i] + length],
                        spec_key=str(archive["spec_keys"][i]),
                        behaviour=str(archive["behaviours"][i]),
                        termination_reason=str(archive["reasons"][i]),
                    )
                )
        return split


@dataclass(frozen=True)
class SplitConfig:
    name: str
    episodes: int  # per task
    variation: str | Mapping[str, float] = "default"
    seed_group: str = "train"  # splits sharing a group share episode seeds (paired starts)
    object: str | None = None  # another object with the same vertex count (else the run's)


def split_variation(split: SplitConfig) -> Variation:
    if isinstance(split.variation, str):
        return resolve_variation(split.variation)
    return Variation(name=split.name, **dict(split.variation))


def collect_split(
    split: SplitConfig,
    tasks: list[str],
    object_name: str = "sponge",
    behaviour: BehaviourConfig = BehaviourConfig(),
    base_seed: int = 0,
    pool: EnvPool | None = None,
    progress: Callable[[str], None] | None = None,
) -> SplitData:
    """Run ``split.episodes`` episodes per task through ``run_episode`` and keep their states."""
    variation = split_variation(split)
    object_name = split.object or object_name
    specs = make_specs(
        f"roundtrip/{split.seed_group}",
        tasks,
        [object_name],
        [variation],
        split.episodes,
        base_seed,
    )
    own_pool = pool is None
    pool = pool or EnvPool(EnvConfig(obs_mode="state"))
    data = SplitData(split.name, variation.name)
    start = time.perf_counter()
    try:
        for spec in specs:
            data.trajectories.extend(_collect_episode(spec, pool, behaviour, progress))
    finally:
        if own_pool:
            pool.close()
    data.collect_s = time.perf_counter() - start
    return data


class StateRecorder(EpisodeObserver):
    """The simulator state after the reset and after every step, and each step's action; a step
    whose env diverged (and reset its state to keep obs finite) is no real successor state."""

    def __init__(self) -> None:
        self.states: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []

    def on_reset(self, env: gym.Env, obs: dict, info: dict, policy: object) -> None:
        self.states.append(read_state(env))

    def on_step(self, env: gym.Env, obs: dict, info: dict, action: np.ndarray) -> None:
        if "diverged" in str(info.get("termination_reason") or ""):
            return
        self.states.append(read_state(env))
        self.actions.append(np.asarray(action, dtype=np.float64))


def _collect_episode(
    spec: EpisodeSpec,
    pool: EnvPool,
    behaviour: BehaviourConfig,
    progress: Callable[[str], None] | None,
) -> list[Trajectory]:
    recorder = StateRecorder()
    policies: list[ExploringExpert] = []

    def factory(env):
        policy = ExploringExpert(env, spec.seed, behaviour)
        policies.append(policy)
        return policy

    record_ = run_episode(spec, factory, env=pool.get(spec), observers=[recorder])
    if record_.error is not None:
        raise RuntimeError(f"data collection episode {spec.key} failed: {record_.error}")
    states, actions = recorder.states, recorder.actions[: len(recorder.states) - 1]
    if len(actions) < 2:
        return []
    policy = policies[-1]
    label = f"{policy.closure},noise={policy.noise_std:.2f},explore={policy.explores}"
    if progress is not None:
        progress(f"{spec.task} seed {spec.seed}: {len(actions)} steps ({label})")
    return [
        Trajectory(np.array(states), np.array(actions), spec.key, label, record_.termination_reason)
    ]
