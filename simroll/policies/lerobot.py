"""Run any LeRobot policy checkpoint in simroll envs (``simroll eval policy.path=<dir>``).

:func:`load_policy` reads a LeRobot pretrained directory (``config.json`` +
``model.safetensors`` + the saved pre/post-processor pipelines; safetensors and JSON only, nothing
is unpickled) after :mod:`simroll.policies.checkpoint` has checked it as data (registered policy
type and processor steps only, so a checkpoint cannot name code to run), checks that the env can
feed every input feature the policy was trained on, with the shapes it was trained on, and that
the action is 5-D, and returns a :class:`LeRobotPolicy` that converts simroll observations
into a LeRobot batch with the dataset recorder's own mapping
(:func:`simroll.features.observation_frame`), so training and evaluation see identical features.

:class:`LeRobotPolicy` uses the wrapped policy's public verbs only: for the policy types whose
``select_action`` re-plans from a queue (ACT, diffusion, SimVLA) it keeps that queue itself,
calling ``predict_action_chunk`` when it runs dry, and it counts network evaluations with a
forward hook on the module each evaluation runs once.

A SimVLA trained with ``goal_source="label"`` (or ``"label_offset"``) reads the task's true
target: :func:`load_policy` gives its wrapper the env's target (:func:`env_goal`), added to the
batch at every re-plan.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simroll.checks import is_int
from simroll.features import (
    ACTION_DIM,
    ENVIRONMENT_STATE_KEY,
    GOAL_LABEL_KEY,
    GOAL_MASK_KEY,
    IMAGE_PREFIX,
    TACTILE_IMAGE_KEY,
    TACTILE_KEY,
    dataset_features,
    is_camera_key,
    observation_frame,
)
from simroll.policies.cache import cache_key, cached_build
from simroll.policies.checkpoint import (
    ENV_RECORD,
    PolicyLoadError,
    UntrustedCheckpointError,
    read_env_record,
    register_policy_types,
    resolve_checkpoint,
    validate_checkpoint,
)

__all__ = [
    "ENV_RECORD",
    "EVALUATED_MODULE",
    "LeRobotPolicy",
    "PolicyLoadError",
    "UntrustedCheckpointError",
    "check_compatible",
    "check_gripper_mode",
    "env_goal",
    "load_policy",
    "read_env_record",
    "register_policy_types",
    "resolve_checkpoint",
]

# The module that one network evaluation runs exactly once, by policy type: diffusion's
# noise-prediction UNet (once per denoising step), ACT's whole model (once per chunk), SimVLA's
# decoder output norm (once per velocity evaluation, i.e. per flow-integration step).
EVALUATED_MODULE: dict[str, Callable[[Any], torch.nn.Module]] = {
    "diffusion": lambda policy: policy.diffusion.unet,
    "act": lambda policy: policy.model,
    "simvla": lambda policy: policy.model.decoder_norm,
    "wam": lambda policy: policy.model.video,  # backbone passes: what RIFT saves
}


# ``noise_seed`` k moves an episode's sampling-noise seed by k strides (a large prime, so that
# streams of nearby episode seeds do not meet).
NOISE_SEED_STRIDE = 1_000_003


class LeRobotPolicy:
    """A LeRobot ``PreTrainedPolicy`` with its processors, speaking simroll observations.

    For ACT, diffusion and SimVLA without temporal ensembling, whose ``select_action`` plans a
    chunk with ``predict_action_chunk`` from the last ``n_obs_steps`` observations when its queue
    is empty and then pops one of ``n_action_steps`` actions per step, this wrapper runs that loop
    itself on its own queue of un-normalized actions. It converts and normalizes only the
    observations a re-plan will read (in a one-off profile, not a repo benchmark, that and
    un-normalizing each chunk once, whole, were about 0.6 of the 0.7 ms a non-planning step took
    in closed loop), and the actions are exactly those of calling LeRobot's ``select_action``
    and post-processor on every step (tested). The wrapped policy's own queues stay empty:
    diffusion's ``predict_action_chunk`` then reads the observation history it is given. Other
    policy types are called step by step through their ``select_action``.
    """

    def __init__(
        self,
        policy,
        preprocessor,
        postprocessor,
        task: str | None = None,
        noise_seed: int = 0,
        goal: Callable[[dict[str, Any]], tuple[np.ndarray, bool]] | None = None,
    ):
        self.policy, self.preprocessor, self.postprocessor = policy, preprocessor, postprocessor
        # the task's target (x, y) and whether it has one, from the observation a re-plan reads
        self.goal = goal
        self.noise_seed = int(noise_seed)
        self._reseed = False
        config = policy.config
        self.input_keys = list(config.input_features)
        tactile = config.input_features.get(TACTILE_IMAGE_KEY)
        self.tactile_image_size = int(tactile.shape[1]) if tactile is not None else None
        self.task = task
        self.policy.eval()
        # a temporal ensemble is LeRobot's select_action's own (ACT's, SimVLA's): call it
        self.owns_queue = config.type in ("diffusion", "simvla", "wam", "act") and (
            getattr(config, "temporal_ensemble_coeff", None) is None
        )
        # diffusion-style models and SimVLA with n_obs_steps > 1 read a stacked observation
        # history (LeRobot's training batches carry one exactly when observation_delta_indices is
        # set); ACT and a one-step SimVLA read one step
        self._stacks_history = config.observation_delta_indices is not None
        self._history: deque[dict[str, Any]] = deque(maxlen=max(1, int(config.n_obs_steps)))
        self._actions: deque[np.ndarray] = deque()  # the current chunk, un-normalized
        self._chunk_steps = int(config.n_action_steps)
        self._evaluations = 0  # since reset
        evaluated = EVALUATED_MODULE.get(config.type)
        self._hook = None
        if evaluated is not None:
            self._hook = evaluated(policy).register_forward_hook(self._count_evaluation)

    def _count_evaluation(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        # SimVLA's num_action_samples chunks run as one batch: each is a pass's worth of compute
        self._evaluations += int(getattr(self.policy.config, "num_action_samples", 1))

    @property
    def network_evaluations(self) -> int:
        """Forward passes of the network since ``reset``, as counted by a forward hook on
        :data:`EVALUATED_MODULE` of the policy type: chunks times denoising (diffusion) or
        flow-integration (SimVLA) steps, times SimVLA's ``num_action_samples``. A policy type
        outside that table counts one per ``select_action`` call to it. This is the deterministic
        compute proxy the episode engine records (``extra["network_evaluations"]``)."""
        return self._evaluations

    def reset(self) -> None:
        self.policy.reset()
        self._reseed = self.noise_seed != 0
        self._evaluations = 0
        self._history.clear()
        self._actions.clear()
        self._chunk_steps = int(self.policy.config.n_action_steps)

    def batch(self, obs: dict[str, Any]) -> dict[str, Any]:
        frame = observation_frame(obs, self.tactile_image_size)
        batch: dict[str, Any] = {}
        for key in self.input_keys:
            value = torch.from_numpy(np.asarray(frame[key]))
            if key.startswith(IMAGE_PREFIX):
                value = value.permute(2, 0, 1).float() / 255.0
            batch[key] = value.unsqueeze(0)
        batch["task"] = [self.task or str(obs.get("task_description", ""))]
        return batch

    def _model_input(self, history: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The batch ``predict_action_chunk`` reads from ``history`` (``n_obs_steps`` normalized
        observations, oldest first): the latest, or for a model with an observation history each
        of its tensors stacked over the history (time on dim 1)."""
        latest = history[-1]
        if not self._stacks_history:
            return latest
        return {
            key: torch.stack([step[key] for step in history], dim=1)
            if isinstance(value, torch.Tensor)
            else value
            for key, value in latest.items()
        }

    def with_goal(self, batch: dict[str, Any], obs: dict[str, Any]) -> dict[str, Any]:
        """``batch`` plus the target at observation ``obs`` (``GOAL_LABEL_KEY``,
        ``GOAL_MASK_KEY``) when the policy reads it."""
        if self.goal is None:
            return batch
        target, labelled = self.goal(obs)
        goal = torch.as_tensor(np.asarray(target, dtype=np.float32)[:2]).unsqueeze(0)
        return {**batch, GOAL_LABEL_KEY: goal, GOAL_MASK_KEY: torch.tensor([float(labelled)])}

    def _chunk(
        self, batch: dict[str, Any], obs: dict[str, Any], steps: int | None = None
    ) -> np.ndarray:
        """The chunk planned from ``batch`` at the latest observation ``obs``: its first
        ``steps`` actions (all when None) as (steps, action_dim), un-normalized and clipped to
        the action space."""
        chunk = self.postprocessor(
            self.policy.predict_action_chunk(self.with_goal(batch, obs))[:, :steps]
        )
        return np.clip(chunk[0].cpu().numpy().astype(np.float32), -1.0, 1.0)

    @torch.no_grad()
    def select_action(self, obs: dict[str, Any]) -> np.ndarray:
        """The next action; a policy with a queue re-plans when it is empty (see the class)."""
        if self._reseed:  # the episode's first call: the engine has seeded torch by now
            self._reseed = False
            torch.manual_seed((torch.initial_seed() + NOISE_SEED_STRIDE * self.noise_seed) % 2**63)
        if not self.owns_queue:
            batch = self.with_goal(self.preprocessor(self.batch(obs)), obs)
            action = self.postprocessor(self.policy.select_action(batch))
            if self._hook is None:
                self._evaluations += 1
            action = action.squeeze(0).cpu().numpy().astype(np.float32)
            if getattr(self.policy, "discrete_actions", False):
                return action  # a primitive index (clutter), not a point of the box
            return np.clip(action, -1.0, 1.0)
        if self._chunk_steps != self.policy.config.n_action_steps:
            # n_action_steps changed since the chunk was planned: re-plan now, as SimVLA does
            self._chunk_steps = int(self.policy.config.n_action_steps)
            self._actions.clear()
        if len(self._actions) < self._history.maxlen:  # the next re-plan reads this observation
            batch = self.preprocessor(self.batch(obs))
            if not self._history:  # the first observation fills the history, as LeRobot's does
                self._history.extend([batch] * self._history.maxlen)
            else:
                self._history.append(batch)
        if not self._actions:
            batch = self._model_input(self._history)
            self._actions.extend(self._chunk(batch, obs, self._chunk_steps))
        return self._actions.popleft()

    @torch.no_grad()
    def predict_action_chunk(self, obs: dict[str, Any]) -> np.ndarray:
        """The chunk the policy plans from ``obs`` alone (an observation history is filled with
        it, as on an episode's first step); the action queue is left as it is."""
        batch = self.preprocessor(self.batch(obs))
        return self._chunk(self._model_input([batch] * self._history.maxlen), obs)


def _shape_hint(key: str, shape: tuple[int, ...]) -> str:
    """How to make the env give ``key`` the policy's ``shape``."""
    if key.startswith(IMAGE_PREFIX):
        return f"run it with env.image_size={shape[1]}" if shape[1] == shape[2] else "(not square)"
    if key == TACTILE_KEY:
        return "the env's taxel grid differs from the training data's"
    return "the env's observation layout differs from the training data's"


def check_compatible(
    config: dict[str, Any], observation_space, path: Path, action_space=None
) -> None:
    """Raise :class:`PolicyLoadError` when the env cannot provide what the policy reads, naming
    the feature, the policy's shape and the env's (images compared as LeRobot's CHW)."""
    from gymnasium import spaces

    if not isinstance(observation_space, spaces.Dict):
        raise PolicyLoadError(
            f"policy {path} needs a simroll env (a Dict observation space), got "
            f"{type(observation_space).__name__}"
        )
    available = dataset_features(observation_space, with_tactile_image=True)
    for key, feature in config.get("input_features", {}).items():
        if key not in available:
            hint = "obs_mode or cameras differ"
            if key == ENVIRONMENT_STATE_KEY:
                hint = "it needs env.obs_mode=state"
            elif is_camera_key(key):
                hint = "it needs env.obs_mode=full"
            raise PolicyLoadError(
                f"policy {path} reads {key!r}, which this env does not provide ({hint}); "
                f"the env provides {sorted(k for k in available if 'obs' in k)}"
            )
        if key == TACTILE_IMAGE_KEY:
            continue  # LeRobotPolicy renders the pressure maps at the policy's own size
        shape = tuple(feature.get("shape") or ())
        actual = tuple(available[key]["shape"])
        if key.startswith(IMAGE_PREFIX):
            actual = (actual[2], actual[0], actual[1])  # LeRobot stores images as CHW
        if shape and shape != actual:
            raise PolicyLoadError(
                f"policy {path} reads {key} of shape {shape} but this env gives {actual}; "
                + _shape_hint(key, shape)
            )
    action = config.get("output_features", {}).get("action", {})
    expected = (1,) if hasattr(action_space, "n") else (ACTION_DIM,)  # Discrete: a primitive
    if tuple(action.get("shape", (ACTION_DIM,))) != expected:
        raise PolicyLoadError(
            f"policy {path} outputs actions of shape {action.get('shape')}, "
            f"this env takes {expected}"
        )


def check_gripper_mode(path: Path, env, env_record: dict[str, Any] | None = None) -> None:
    """Refuse an env whose gripper command means something else than in the training data."""
    record = read_env_record(path) if env_record is None else env_record
    trained = record.get("gripper_mode")
    mode = getattr(env.unwrapped, "gripper_mode", None)
    if trained and mode and trained != mode:
        raise PolicyLoadError(
            f"policy {path} was trained with gripper_mode={trained!r} but the env uses "
            f"{mode!r}; run it with env.gripper_mode={trained}"
        )


def load_policy(
    env,
    path: str | Path,
    device: str = "cpu",
    overrides: dict | None = None,
    threads: int | None = 1,
    train: dict[str, Any] | None = None,
    noise_seed: int = 0,
) -> LeRobotPolicy:
    """Load the checkpoint at ``path`` for ``env`` (Hydra calls this with ``_partial_``).

    The directory is first checked as data (:func:`simroll.policies.checkpoint.
    validate_checkpoint`: registered policy type and processor steps only, safetensors weights,
    no pickles), then against ``env`` (input shapes, gripper mode), and only then read by
    LeRobot. ``overrides`` changes inference-time config fields (e.g. ``num_inference_steps``,
    ``n_action_steps``; for SimVLA also ``num_flow_steps``, ``keep_visual_tokens`` and
    ``quantize_int8``). ``train`` (the training recipe in the same config file, read by
    ``simroll train``) is ignored here; any other keyword is a TypeError. ``threads`` sets
    torch's intra-op threads for inference (one by default: on a small shared machine more
    threads thrash; ``None`` leaves torch's setting alone). ``noise_seed`` (0: as the episode
    engine seeds it) gives a stochastic policy another, still reproducible, sampling-noise stream
    for the same episode: at each episode's first call torch is re-seeded from the engine's seed
    moved by ``noise_seed`` strides. The same policy with another ``noise_seed`` as a CARE
    candidate measures how much of a certification's risk is the reference's own sampling noise.
    """
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors

    del train  # the recipe of `simroll train`, kept in the same policy config
    if not is_int(noise_seed):
        raise PolicyLoadError(f"noise_seed must be an integer, got {noise_seed!r}")
    path = resolve_checkpoint(path)
    contents = validate_checkpoint(path)
    check_compatible(contents.config, env.observation_space, path, env.action_space)
    check_gripper_mode(path, env, contents.env_record)
    if threads is not None:
        torch.set_num_threads(threads)

    def build():
        config = PreTrainedConfig.from_pretrained(path)
        for key, value in (overrides or {}).items():
            if not hasattr(config, key):
                raise PolicyLoadError(f"unknown policy override {key!r} for {config.type}")
            setattr(config, key, value)
        config.device = device
        policy = get_policy_class(config.type).from_pretrained(path, config=config)
        preprocessor, postprocessor = make_pre_post_processors(config, pretrained_path=str(path))
        return policy, preprocessor, postprocessor

    try:  # built once per process and deep-copied per call (simroll.policies.cache)
        key = cache_key(path, device=device, overrides=overrides or {})
        policy, preprocessor, postprocessor = cached_build(key, build)
    except PolicyLoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - any loader failure means a bad checkpoint
        raise PolicyLoadError(f"cannot load policy checkpoint {path}: {exc}") from exc
    config = policy.config
    source = getattr(config, "goal_source", "estimate")
    reads_target = getattr(config, "goal_conditioning", False) and source != "estimate"
    goal = env_goal(env, path, from_hand=source == "label_offset") if reads_target else None
    return LeRobotPolicy(policy, preprocessor, postprocessor, noise_seed=noise_seed, goal=goal)


def env_goal(
    env, path: str | Path = "the policy", from_hand: bool = False
) -> Callable[[dict[str, Any]], tuple[np.ndarray, bool]]:
    """What a policy that reads the true target (SimVLA's ``goal_source="label"``) is given:
    a callable of an observation returning the env's current target ``(x, y)`` (with
    ``from_hand``, ``"label_offset"``: minus the observation's hand x, y,
    :func:`simroll.train.goal_labels.goal_offset`) and whether its task has one the policy was
    trained with (``GOAL_TASKS``), read at each call so that every episode's reset target is the
    one used."""
    from simroll.train.goal_labels import GOAL_TASKS, goal_offset

    task_env = env.unwrapped
    if not hasattr(task_env, "goal_position"):
        raise PolicyLoadError(
            f"{path} reads the task's target (goal_source='label'), which only simroll's task "
            f"envs give (goal_position()); got {type(task_env).__name__}"
        )
    labelled = getattr(task_env, "task_name", None) in GOAL_TASKS

    def target(obs: dict[str, Any]) -> tuple[np.ndarray, bool]:
        xy = np.asarray(task_env.goal_position(), dtype=np.float32)[:2]
        if from_hand:
            xy = goal_offset(xy, np.asarray(obs["agent_pos"], dtype=np.float32))
        return xy, labelled

    return target
