"""simroll's tasks as LeRobot sees a gym env: ``lerobot_env_simroll/<Task>-v0``.

``make_simroll_env`` builds a simroll task env and wraps it in :class:`LeRobotView`, which
presents what LeRobot's ``preprocess_observation`` and ``lerobot-eval``'s rollout expect:

* observations ``pixels`` (``scene``, ``wrist``, and ``tactile`` when asked: the pressure maps
  rendered as the same RGB image simroll datasets store), ``agent_pos``, ``following_error``,
  ``environment_state`` (state obs mode), and ``tactile`` / ``tactile_markers`` as flat float32
  vectors; LeRobot renames them ``observation.images.*``, ``observation.state``,
  ``observation.following_error``, ``observation.environment_state``, ``observation.tactile``
  and ``observation.tactile_markers``, the keys ``simroll collect`` writes.
  The ``task_description`` string leaves the observation (vector envs cannot batch it); LeRobot
  reads it with ``env.call("task_description")``.
* ``reset(options=...)`` keeps only simroll's ``variation`` option and drops LeRobot's rollout
  marker (simroll refuses unknown options).
* actions are clipped to ``[-1, 1]`` first (``clip_actions``), as a LeRobot policy's unnormalized
  output can overshoot the bounds slightly and simroll raises on out-of-range actions.

The tasks are the soft suite's and the low-level clutter retrieval env ``ClutterRetrieve`` (the
same 5-D hand action; its ``environment_state``, every block's pose, is flattened to 44 numbers;
depth, segmentation and the partial object observation are not passed on). The plan-conditioned
clutter tiers take one discrete primitive per step, which LeRobot's continuous policies and
rollout do not produce, so they are not registered.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from simroll.envs import clutter, soft
from simroll.features import tactile_image as render_tactile_image
from simroll.features import tactile_image_size

ID_PREFIX = "lerobot_env_simroll"
# tasks with the hand's continuous action: the soft suite and low-level clutter retrieval
TASKS = {**soft.TASKS, "ClutterRetrieve": clutter.TASKS["ClutterRetrieve"]}
MAX_EPISODE_STEPS = {
    **soft.MAX_EPISODE_STEPS,
    "ClutterRetrieve": clutter.MAX_EPISODE_STEPS["ClutterRetrieve"],
}


class LeRobotView(gym.ObservationWrapper):
    """A simroll env with the observation layout, reset options and action bounds LeRobot uses."""

    def __init__(
        self,
        env: gym.Env,
        tactile: bool = True,
        tactile_image: bool = False,
        clip_actions: bool = True,
    ) -> None:
        super().__init__(env)
        self.with_tactile, self.with_tactile_image = bool(tactile), bool(tactile_image)
        self.clip_actions = bool(clip_actions)
        source = env.observation_space
        force = source["tactile"]["force"]
        pixels = dict(source.spaces["pixels"].spaces) if "pixels" in source.spaces else {}
        self.tactile_size = tactile_image_size(source)
        if self.with_tactile_image:
            shape = (self.tactile_size, self.tactile_size, 3)
            pixels["tactile"] = spaces.Box(0, 255, shape, np.uint8)
        layout: dict[str, spaces.Space] = {}
        if pixels:
            layout["pixels"] = spaces.Dict(pixels)
        layout["agent_pos"] = source["agent_pos"]
        if "following_error" in source.spaces:
            layout["following_error"] = source["following_error"]
        if "environment_state" in source.spaces:  # a flat vector (clutter's is per block)
            state = source["environment_state"]
            layout["environment_state"] = spaces.Box(
                -np.inf, np.inf, (int(np.prod(state.shape)),), np.float32
            )
        if self.with_tactile:
            markers = source["tactile"]["markers"]
            size = int(np.prod(force.shape))
            layout["tactile"] = spaces.Box(0.0, np.inf, (size,), np.float32)
            size = int(np.prod(markers.shape))
            layout["tactile_markers"] = spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self.observation_space = spaces.Dict(layout)

    @property
    def task(self) -> str:
        return self.env.unwrapped.task_name

    @property
    def task_description(self) -> str:
        return self.env.unwrapped.task_description

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        kept = {key: value for key, value in (options or {}).items() if key == "variation"}
        return super().reset(seed=seed, options=kept or None)

    def step(self, action):
        if self.clip_actions:
            action = np.asarray(action, dtype=np.float32)
            if np.all(np.isfinite(action)):  # NaN/inf still reach simroll, which names them
                action = np.clip(action, -1.0, 1.0)
        return super().step(action)

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        force = np.asarray(observation["tactile"]["force"], dtype=np.float32)
        out: dict[str, Any] = {}
        pixels = dict(observation.get("pixels", {}))
        if self.with_tactile_image:
            pixels["tactile"] = render_tactile_image(force, self.tactile_size)
        if pixels:
            out["pixels"] = pixels
        out["agent_pos"] = observation["agent_pos"]
        if "following_error" in observation:
            out["following_error"] = observation["following_error"]
        if "environment_state" in observation:
            out["environment_state"] = np.asarray(observation["environment_state"]).reshape(-1)
        if self.with_tactile:
            out["tactile"] = force.reshape(-1)
            markers = np.asarray(observation["tactile"]["markers"], dtype=np.float32)
            out["tactile_markers"] = markers.reshape(-1)
        return out


def make_simroll_env(
    task: str,
    *,
    tactile: bool = True,
    tactile_image: bool = False,
    clip_actions: bool = True,
    **env_kwargs: Any,
) -> LeRobotView:
    """Build simroll task ``task`` (e.g. ``"SoftLift"``) with ``env_kwargs`` and wrap it."""
    if task not in TASKS:
        raise ValueError(f"unknown simroll task {task!r}; expected one of {sorted(TASKS)}")
    env = TASKS[task](**env_kwargs)
    return LeRobotView(env, tactile=tactile, tactile_image=tactile_image, clip_actions=clip_actions)


def register_envs() -> None:
    for name in TASKS:
        env_id = f"{ID_PREFIX}/{name}-v0"
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point=f"{__name__}:make_simroll_env",
                max_episode_steps=MAX_EPISODE_STEPS[name],
                kwargs={"task": name},
            )
