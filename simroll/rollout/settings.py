"""A run's settings before it starts: the error for a bad one, and the env settings a policy
checkpoint records.

:class:`ConfigError` is what the library API and the commands raise for an invalid setting; its
message names the value and the valid choices (the commands print it as one line, exit 2).

:func:`apply_checkpoint_env` is the one rule for a checkpoint's ``simroll_env.json`` (the env
settings of its training data: obs mode, image size, gripper mode; for a checkpoint ensemble, its
members' agreeing records): they replace the run's values
unless the caller set those explicitly; an explicit value that contradicts the record is refused
naming the file (an image size only counts for a policy that reads camera images). ``simroll
eval``/``certify`` (:func:`simroll.cli.common.env_config_from`, where "explicit" means "on the
command line") and :func:`simroll.evaluate` (where it means "passed") both apply it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simroll.rollout.episode import EnvConfig

from simroll.features import CAMERAS, image_key, is_camera_key
from simroll.policies.resolve import CHECKPOINT_LOADER  # the target that loads a checkpoint

ENSEMBLE_TARGET = "simroll.policies.ensemble.ensemble_policy"  # a checkpoint ensemble's target

# EnvConfig fields a checkpoint's env record (simroll_env.json) sets
RECORDED_ENV_KEYS = ("obs_mode", "image_size", "gripper_mode")


class ConfigError(ValueError):
    """A config value is invalid; the message names it and the valid choices."""


def ensemble_members(policy: Mapping[str, Any] | None) -> list[Any] | None:
    """The member policy configs of a checkpoint-ensemble config (``ensemble_policy``), else
    None."""
    if isinstance(policy, Mapping) and policy.get("_target_") == ENSEMBLE_TARGET:
        members = policy.get("members")
        return list(members) if isinstance(members, Sequence) else []
    return None


def checkpoint_env(policy: Mapping[str, Any] | None) -> tuple[dict[str, Any], Path | None, bool]:
    """The env record of the checkpoint the policy config ``policy`` loads (empty when it loads
    none or the checkpoint has no record), the record's path, and whether the policy reads camera
    images. For a checkpoint ensemble, its members' records, which must agree (ConfigError
    naming two that differ)."""
    from simroll.policies.checkpoint import (
        CONFIG_FILE,
        ENV_RECORD,
        read_env_record,
        resolve_checkpoint,
    )

    members = ensemble_members(policy)
    if members is not None:
        found = [found for found in map(checkpoint_env, members) if found[1] is not None]
        if not found:
            return {}, None, False
        record, record_path, _ = found[0]
        for other, other_path, _ in found[1:]:
            if other != record:
                raise ConfigError(
                    f"the ensemble's members were trained with different env settings: "
                    f"{record_path} records {record}, {other_path} records {other}"
                )
        return record, record_path, any(reads for _, _, reads in found)
    if not isinstance(policy, Mapping) or policy.get("_target_") != CHECKPOINT_LOADER:
        return {}, None, False
    path = policy.get("path")
    if not isinstance(path, str | Path) or str(path) in ("", "???"):
        return {}, None, False
    path = resolve_checkpoint(str(path))
    if not (path / ENV_RECORD).is_file():
        return {}, None, False  # a missing checkpoint is reported when the policy loads
    try:
        record = read_env_record(path)
    except ValueError as exc:  # PolicyLoadError: the record is malformed
        raise ConfigError(str(exc)) from exc
    try:
        inputs = json.loads((path / CONFIG_FILE).read_text()).get("input_features") or {}
        reads_cameras = any(is_camera_key(key) for key in inputs)
    except (OSError, ValueError, AttributeError):
        reads_cameras = True  # a bad config.json is reported when the policy loads
    return record, path / ENV_RECORD, reads_cameras


def cameras_read(policy: Mapping[str, Any] | None) -> tuple[str, ...] | None:
    """The cameras the checkpoint that ``policy`` loads reads (its ``input_features``), in the
    env's order; None when unknown (no checkpoint, or a config.json that cannot be read here: it
    is reported when the policy loads)."""
    from simroll.policies.checkpoint import CONFIG_FILE, resolve_checkpoint

    members = ensemble_members(policy)
    if members is not None:  # an ensemble reads what any member reads
        read = [cameras_read(member) for member in members]
        if not read or any(cameras is None for cameras in read):
            return None
        return tuple(camera for camera in CAMERAS if any(camera in r for r in read))
    if not isinstance(policy, Mapping) or policy.get("_target_") != CHECKPOINT_LOADER:
        return None
    path = policy.get("path")
    if not isinstance(path, str | Path) or str(path) in ("", "???"):
        return None
    try:
        config = json.loads((resolve_checkpoint(str(path)) / CONFIG_FILE).read_text())
        keys = [key for key in config.get("input_features") or {} if is_camera_key(key)]
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    return tuple(camera for camera in CAMERAS if image_key(camera) in keys)


def only_cameras_read(env: EnvConfig, policy: Mapping[str, Any] | None) -> EnvConfig:
    """``env`` rendering only the cameras ``policy``'s checkpoint reads (the env's ``cameras``
    argument), when that is a known, proper subset of the env's cameras; else ``env``. The
    observations the policy reads are the same, so episodes are too (tested); a run that
    records datasets keeps every camera."""
    cameras = cameras_read(policy)
    if env.obs_mode != "full" or not cameras or set(cameras) >= set(CAMERAS):
        return env
    return dataclasses.replace(env, kwargs={**env.kwargs, "cameras": cameras})


def apply_checkpoint_env(
    settings: Mapping[str, Any],
    policy: Mapping[str, Any] | None,
    explicit: Collection[str],
    *,
    key_prefix: str = "",
    where: str = "the call",
) -> tuple[dict[str, Any], list[str]]:
    """``settings`` (values of :data:`RECORDED_ENV_KEYS`) with the record of ``policy``'s
    checkpoint applied to the keys not in ``explicit``, and the ``key=value (from file)`` notes
    of what was applied. An explicit value that contradicts the record raises ConfigError; keys
    are shown as ``key_prefix + key`` and ``where`` says where the explicit value came from."""
    settings = dict(settings)
    record, record_path, reads_cameras = checkpoint_env(policy)
    applied = []
    for key in RECORDED_ENV_KEYS:
        if key not in record or record[key] == settings[key]:
            continue
        name = f"{key_prefix}{key}"
        if key not in explicit:
            settings[key] = record[key]
            applied.append(f"{name}={record[key]}")
        elif key != "image_size" or reads_cameras:
            raise ConfigError(
                f"{name}={settings[key]!r} contradicts {record_path}: the policy was trained "
                f"with {key}={record[key]!r}; drop {name} from {where} or set "
                f"{name}={record[key]}"
            )
    notes = [f"{', '.join(applied)} (from {record_path})"] if applied else []
    return settings, notes
