"""Pieces the Hydra entry points share: their config error, the env config (with the env settings
a policy checkpoint records applied), the chosen policy's factory (its keys checked against the
factory's arguments), and a check that the policy can be built before any episode runs."""

from __future__ import annotations

import difflib
import inspect
import json
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_object, instantiate
from omegaconf import DictConfig, OmegaConf

from simroll.envs.core import CAMERAS
from simroll.rollout.episode import EnvConfig
from simroll.rollout.records import EpisodeSpec


class ConfigError(ValueError):
    """A config value is invalid; the message names it and the valid choices."""


CHECKPOINT_LOADER = "simroll.policies.lerobot.load_policy"
# EnvConfig fields a checkpoint's env record (simroll_env.json) sets
RECORDED_ENV_KEYS = ("obs_mode", "image_size", "gripper_mode")


def _command_line_env_keys() -> set[str]:
    """The ``env.<key>`` names set on the command line of this Hydra run (``env.image_size=96``,
    ``+env.x=1``, ``++env.x=1``); empty outside a Hydra run."""
    try:
        overrides = HydraConfig.get().overrides.task
    except ValueError:  # called outside a Hydra run (tests, scripts)
        return set()
    keys = set()
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if key.startswith("env."):
            keys.add(key.removeprefix("env."))
    return keys


def _checkpoint_env(
    policy: DictConfig | None,
) -> tuple[dict[str, Any], Path | None, bool, tuple[str, ...] | None]:
    """The env record of the checkpoint ``policy`` loads (empty when it loads none or the
    checkpoint has no record), the record's path, whether the policy reads camera images, and
    the cameras it reads (None when unknown: no checkpoint, or a config.json not read here)."""
    from simroll.policies.checkpoint import CONFIG_FILE, ENV_RECORD, read_env_record
    from simroll.policies.lerobot import resolve_checkpoint

    if (
        not isinstance(policy, DictConfig)
        or policy.get("_target_") != CHECKPOINT_LOADER
        or "path" not in policy
        or OmegaConf.is_missing(policy, "path")
        or policy.get("path") is None
    ):
        return {}, None, False, None
    path = resolve_checkpoint(str(policy.path))
    if not (path / ENV_RECORD).is_file():
        return {}, None, False, None  # a missing checkpoint is reported when the policy loads
    try:
        record = read_env_record(path)
    except ValueError as exc:  # PolicyLoadError: the record is malformed
        raise ConfigError(str(exc)) from exc
    try:
        inputs = json.loads((path / CONFIG_FILE).read_text()).get("input_features") or {}
        cameras: tuple[str, ...] | None = tuple(
            key.removeprefix("observation.images.")
            for key in inputs
            if key.startswith("observation.images.") and key != "observation.images.tactile"
        )
        reads_cameras = bool(cameras)
    except (OSError, ValueError, AttributeError, TypeError):
        reads_cameras, cameras = True, None  # a bad config.json is reported when it loads
    return record, path / ENV_RECORD, reads_cameras, cameras


def env_config_from(
    env: DictConfig, policy: DictConfig | None, restrict_cameras: bool = False
) -> EnvConfig:
    """The ``EnvConfig`` of an ``env`` config group entry, with the env settings of the policy's
    checkpoint applied.

    ``policy`` is the policy config that runs in this env (``cfg.policy``; certification passes
    its reference). When it loads a checkpoint (``load_policy``) that records its training
    data's env settings (``simroll_env.json``: obs mode, image size, gripper mode), those replace
    the env group's values, unless the command line sets them (``env.image_size=96``); a
    command-line value that contradicts the record raises :class:`ConfigError` naming the file (an
    image size only counts for a policy that reads camera images). The values used are written
    back into ``env``, so the run's recorded config says what ran.

    With ``restrict_cameras`` (evaluation that records no dataset), an env with camera
    observations renders only the cameras the checkpoint reads (its ``input_features``), through
    the env's ``cameras`` argument; the observations it reads are the same.
    """
    settings = {key: env[key] for key in RECORDED_ENV_KEYS}
    record, record_path, reads_cameras, cameras = _checkpoint_env(policy)
    command_line = _command_line_env_keys()
    applied = []
    for key in RECORDED_ENV_KEYS:
        if key not in record or record[key] == settings[key]:
            continue
        if key not in command_line:
            settings[key] = env[key] = record[key]
            applied.append(f"env.{key}={record[key]}")
        elif key != "image_size" or reads_cameras:
            raise ConfigError(
                f"env.{key}={settings[key]!r} contradicts {record_path}: the policy was trained "
                f"with {key}={record[key]!r}; drop env.{key} from the command line or set "
                f"env.{key}={record[key]}"
            )
    if applied:
        print(f"{', '.join(applied)} (from {record_path})")
    kwargs: dict[str, Any] = {}
    if (
        restrict_cameras
        and settings["obs_mode"] == "full"
        and cameras
        and set(cameras) < set(CAMERAS)  # a camera the env lacks is reported when it loads
    ):
        kwargs["cameras"] = tuple(camera for camera in CAMERAS if camera in cameras)
    return EnvConfig(**settings, rigid_twin=env.rigid_twin, kwargs=kwargs)


def _check_policy_keys(policy: DictConfig, choice: str, group: str) -> None:
    """Refuse a policy config key its ``_target_`` does not take (``+policy.devcie=cuda``),
    naming the key and the keys it takes; targets with ``**kwargs`` take any key."""
    target = policy.get("_target_")
    if not isinstance(target, str):
        return
    try:
        factory = get_object(target)
        parameters = list(inspect.signature(factory).parameters.values())
    except (ImportError, AttributeError, ValueError, TypeError):
        return  # instantiate reports an unknown target
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    accepted = [p.name for p in parameters if p.kind in named]
    if policy.get("_partial_"):
        accepted = accepted[1:]  # the env, passed when the policy is built
    unknown = [key for key in policy if not str(key).startswith("_") and key not in accepted]
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), accepted, n=1)
        raise ConfigError(
            f"{group}={choice} has no setting {unknown[0]!r} ({target} takes "
            f"{', '.join(accepted)})" + (f"; did you mean {group}.{close[0]}?" if close else "")
        )


def policy_from(cfg: DictConfig, group: str = "policy") -> tuple[object, str]:
    """The policy factory of ``cfg.policy`` and the name it was chosen by (``policy=<name>``).
    A missing value or a key the factory does not take fails here, naming it."""
    try:
        choice = HydraConfig.get().runtime.choices.get(group) or group
    except ValueError:  # called outside a Hydra run (tests)
        choice = group
    missing = sorted(OmegaConf.missing_keys(cfg.policy))
    if missing:  # Hydra would drop a `???` field from a partial and fail with a TypeError
        raise ConfigError(
            f"{group}={choice} needs a value for {', '.join(missing)} "
            f"(e.g. `{missing[0]}=<checkpoint dir>`)"
        )
    _check_policy_keys(cfg.policy, str(choice), group)
    factory = instantiate(cfg.policy)
    return factory, str(choice)


def check_policy_loads(policy_factory, env_config: EnvConfig, spec: EpisodeSpec) -> None:
    """Build the policy once for ``spec``'s env, so a missing or mismatched checkpoint fails
    before any episode runs (instead of as an error record in every episode)."""
    env = env_config.make(spec)
    try:
        policy_factory(env)
    finally:
        env.close()
