"""Run any LeRobot policy checkpoint in simroll envs (``simroll eval policy.path=<dir>``).

:func:`load_policy` reads a LeRobot pretrained directory (``config.json`` +
``model.safetensors`` + the saved pre/post-processor pipelines; safetensors and JSON only, nothing
is unpickled) after :mod:`simroll.policies.checkpoint` has checked it as data (registered policy
type and processor steps only, so a checkpoint cannot name code to run), checks that the env can
feed every input feature the policy was trained on, with the shapes it was trained on, and that
the action is 5-D, and returns a :class:`LeRobotPolicy` that converts simroll observations
into a LeRobot batch with the dataset recorder's own mapping
(:func:`simroll.rollout.dataset.observation_frame`), so training and evaluation see identical
features.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simroll.policies.cache import cache_key, cached_build
from simroll.policies.checkpoint import (
    ENV_RECORD,
    PolicyLoadError,
    UntrustedCheckpointError,
    read_env_record,
    register_policy_types,
    validate_checkpoint,
)
from simroll.rollout.dataset import observation_frame

ACTION_DIM = 5
__all__ = [
    "ENV_RECORD",
    "LeRobotPolicy",
    "PolicyLoadError",
    "UntrustedCheckpointError",
    "check_compatible",
    "check_gripper_mode",
    "load_policy",
    "read_env_record",
    "register_policy_types",
    "resolve_checkpoint",
]


class LeRobotPolicy:
    """A LeRobot ``PreTrainedPolicy`` with its processors, speaking simroll observations."""

    def __init__(self, policy, preprocessor, postprocessor, task: str | None = None):
        self.policy, self.preprocessor, self.postprocessor = policy, preprocessor, postprocessor
        self.input_keys = list(policy.config.input_features)
        tactile = policy.config.input_features.get("observation.images.tactile")
        self.tactile_image_size = int(tactile.shape[1]) if tactile is not None else None
        self.task = task
        self.policy.eval()
        self.chunk_predictions = 0  # model calls since reset (each predicts one action chunk)
        self._actions: deque[torch.Tensor] = deque()  # the current chunk, un-normalized
        predict = policy.predict_action_chunk

        def counted_predict(*args, **kwargs):
            self.chunk_predictions += 1
            return predict(*args, **kwargs)

        # LeRobot policies call self.predict_action_chunk from select_action when their action
        # queue runs dry; an instance attribute shadows the method, so every chunk is counted.
        policy.predict_action_chunk = counted_predict

    @property
    def network_evaluations(self) -> int:
        """Forward passes of the network since ``reset``: one per predicted chunk, times the
        denoising (diffusion) or flow-integration (SimVLA) steps each chunk takes. This is the
        deterministic compute proxy the episode engine records (``extra["network_evaluations"]``).
        """
        config = self.policy.config
        steps = getattr(config, "num_flow_steps", None) or getattr(
            config, "num_inference_steps", None
        )
        if steps is None and hasattr(config, "num_train_timesteps"):
            steps = config.num_train_timesteps  # diffusion without an inference-step override
        return self.chunk_predictions * int(steps or 1)

    def reset(self) -> None:
        self.policy.reset()
        self.chunk_predictions = 0
        self._actions.clear()

    def batch(self, obs: dict[str, Any]) -> dict[str, Any]:
        frame = observation_frame(obs, self.tactile_image_size)
        batch: dict[str, Any] = {}
        for key in self.input_keys:
            value = torch.from_numpy(np.asarray(frame[key]))
            if key.startswith("observation.images."):
                value = value.permute(2, 0, 1).float() / 255.0
            batch[key] = value.unsqueeze(0)
        batch["task"] = [self.task or str(obs.get("task_description", ""))]
        return batch

    def _pending(self) -> deque | None:
        """The wrapped policy's queue of normalized actions still to execute, for the policy
        types whose ``select_action`` this wrapper knows (ACT, diffusion, SimVLA); else None."""
        config = self.policy.config
        if config.type == "simvla" or (
            config.type == "act" and config.temporal_ensemble_coeff is None
        ):
            return getattr(self.policy, "_action_queue", None)
        if config.type == "diffusion":
            return getattr(self.policy, "_queues", {}).get("action")
        return None

    def _observation_unused(self, pending: deque | None) -> bool:
        """Whether this step's observation can influence neither the next action nor any later
        one: the next action is queued, and (diffusion) at least ``n_obs_steps`` actions are, so
        the observation leaves the history queue before the next re-plan reads it. SimVLA also
        re-plans when ``n_action_steps`` changed since the queue was made."""
        if not pending:
            return False
        config = self.policy.config
        if config.type == "diffusion":
            return len(pending) >= config.n_obs_steps
        return pending.maxlen == config.n_action_steps

    @torch.no_grad()
    def select_action(self, obs: dict[str, Any]) -> np.ndarray:
        """The next action. Between re-plans the observation is not converted or normalized
        (when :meth:`_observation_unused`), and each new chunk is un-normalized once, whole,
        instead of action by action (in a one-off profile, not a repo benchmark, these were
        about 0.6 of the 0.7 ms a non-planning step took in closed loop). The actions are
        exactly those of calling LeRobot's ``select_action`` and post-processor on every step
        (tested)."""
        pending = self._pending()
        if self._observation_unused(pending):
            pending.popleft()  # the normalized copy of the action taken from self._actions
            action = self._actions.popleft()
        else:
            planned = self.chunk_predictions
            action = self.policy.select_action(self.preprocessor(self.batch(obs)))
            if pending is None:  # a policy type this wrapper does not know: step by step
                action = self.postprocessor(action)
            elif self.chunk_predictions != planned:
                # the queue afresh: SimVLA makes a new one when n_action_steps changed
                chunk = self.postprocessor(torch.stack([action, *self._pending()]))
                action, self._actions = chunk[0], deque(chunk[1:])
            else:
                action = self._actions.popleft()
        return np.clip(action.squeeze(0).cpu().numpy().astype(np.float32), -1.0, 1.0)

    @torch.no_grad()
    def predict_action_chunk(self, obs: dict[str, Any]) -> np.ndarray:
        batch = self.preprocessor(self.batch(obs))
        chunk = self.policy.predict_action_chunk(batch)
        return np.clip(self.postprocessor(chunk).squeeze(0).cpu().numpy(), -1.0, 1.0)


def resolve_checkpoint(path: str | Path) -> Path:
    """``path`` as given, or relative to the repository (shipped ``policies/``) if not found."""
    path = Path(path)
    if not path.exists() and not path.is_absolute():
        shipped = Path(__file__).resolve().parents[2] / path
        if shipped.exists():
            return shipped
    return path


def _shape_hint(key: str, shape: tuple[int, ...]) -> str:
    """How to make the env give ``key`` the policy's ``shape``."""
    if key.startswith("observation.images."):
        return f"run it with env.image_size={shape[1]}" if shape[1] == shape[2] else "(not square)"
    if key == "observation.tactile":
        return "the env's taxel grid differs from the training data's"
    return "the env's observation layout differs from the training data's"


def check_compatible(config: dict[str, Any], observation_space, path: Path) -> None:
    """Raise :class:`PolicyLoadError` when the env cannot provide what the policy reads, naming
    the feature, the policy's shape and the env's (images compared as LeRobot's CHW)."""
    from gymnasium import spaces

    from simroll.rollout.dataset import dataset_features

    if not isinstance(observation_space, spaces.Dict):
        raise PolicyLoadError(
            f"policy {path} needs a simroll env (a Dict observation space), got "
            f"{type(observation_space).__name__}"
        )
    available = dataset_features(observation_space, with_tactile_image=True)
    for key, feature in config.get("input_features", {}).items():
        if key not in available:
            hint = "obs_mode or cameras differ"
            if key == "observation.environment_state":
                hint = "it needs env.obs_mode=state"
            elif key.startswith("observation.images.") and key != "observation.images.tactile":
                hint = "it needs env.obs_mode=full"
            raise PolicyLoadError(
                f"policy {path} reads {key!r}, which this env does not provide ({hint}); "
                f"the env provides {sorted(k for k in available if 'obs' in k)}"
            )
        if key == "observation.images.tactile":
            continue  # LeRobotPolicy renders the pressure maps at the policy's own size
        shape = tuple(feature.get("shape") or ())
        actual = tuple(available[key]["shape"])
        if key.startswith("observation.images."):
            actual = (actual[2], actual[0], actual[1])  # LeRobot stores images as CHW
        if shape and shape != actual:
            raise PolicyLoadError(
                f"policy {path} reads {key} of shape {shape} but this env gives {actual}; "
                + _shape_hint(key, shape)
            )
    action = config.get("output_features", {}).get("action", {})
    if tuple(action.get("shape", (ACTION_DIM,))) != (ACTION_DIM,):
        raise PolicyLoadError(
            f"policy {path} outputs actions of shape {action.get('shape')}, "
            f"simroll envs take ({ACTION_DIM},)"
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
    threads thrash; ``None`` leaves torch's setting alone).
    """
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors

    del train  # the recipe of `simroll train`, kept in the same policy config
    path = resolve_checkpoint(path)
    contents = validate_checkpoint(path)
    check_compatible(contents.config, env.observation_space, path)
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
    return LeRobotPolicy(policy, preprocessor, postprocessor)
