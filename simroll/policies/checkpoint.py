"""Checks a policy checkpoint directory before LeRobot reads any of it.

LeRobot's loaders trust what a checkpoint names: a processor JSON step written as
``{"class": "<module>.<name>", "config": {...}}`` is imported and called with its config (so
``"class": "subprocess.Popen"`` runs a command), and some policy and processor types fetch
tokenizers or encoders by a name in their config with ``trust_remote_code=True``.
:func:`validate_checkpoint` reads the directory as data first (JSON and file names only, no
import of anything the checkpoint names) and refuses, with :class:`UntrustedCheckpointError`
naming the file, the value and what was expected:

- ``config.json`` that is not a JSON object, or whose ``type`` is not a registered LeRobot policy
  type (LeRobot's own, simroll's ``simvla``, installed ``lerobot_policy_*`` plugins); a string
  field named like a reference the type fetches when built (``*_name``, ``*_path``, ``*_repo``,
  ``*_tokenizer``, ``pretrained_backbone_weights``, ...) set to other than the type's default;
- weights other than ``model.safetensors``: no pickle-format file (``.bin``, ``.pt``, ``.pkl``,
  ...) may sit beside it;
- a processor step (``policy_preprocessor.json``, ``policy_postprocessor.json``) that does not
  name a step in LeRobot's ``ProcessorStepRegistry`` (by ``registry_name``, or by a ``class`` path
  that is exactly a registered class's), has keys other than ``registry_name`` / ``class`` /
  ``config`` / ``state_file``, leaves ``trust_remote_code`` on, names a pickle file in its config,
  or has a ``state_file`` that is not a ``.safetensors`` file in the checkpoint directory;
  normalizer feature shapes that disagree with ``config.json``;
- a ``simroll_env.json`` (the env settings of the training data) with unknown keys or values.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simroll.features import GRIPPER_MODES, OBS_MODES

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
PROCESSOR_FILES = ("policy_preprocessor.json", "policy_postprocessor.json")
ENV_RECORD = "simroll_env.json"  # in a checkpoint: the env settings of its training data
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib")
STEP_KEYS = ("registry_name", "class", "config", "state_file")
# config.json string fields named like a reference to weights, tokenizers or code that a policy
# type fetches when it is built (some with trust_remote_code=True)
FETCH_FIELD = re.compile(
    r"(_name|_name_or_path|_path|_repo|_repo_id|_model_id|_base|_tokenizer)$"
    r"|^pretrained_backbone_weights$"
)
# a schedule's name; provenance LeRobot records but does not load from when reading a checkpoint
NOT_FETCHED = frozenset({"scheduler_name", "pretrained_path", "pretrained_revision"})


class PolicyLoadError(ValueError):
    """A checkpoint is missing, corrupt, or does not match the env it should run in."""


class UntrustedCheckpointError(PolicyLoadError):
    """A checkpoint names code, a policy type or a file format that simroll does not load."""


@dataclass(frozen=True)
class CheckpointContents:
    """What :func:`validate_checkpoint` read: the policy config and the env record."""

    path: Path
    config: dict[str, Any]
    env_record: dict[str, Any] = field(default_factory=dict)


@functools.cache
def register_policy_types() -> None:
    """Make non-built-in LeRobot policy types known to LeRobot's config registry: simroll's own
    ``simvla`` and those of installed ``lerobot_policy_*`` plugins (LeRobot's CLIs do the latter
    themselves). Idempotent; call before resolving a policy type by name."""
    from lerobot.utils.import_utils import register_third_party_plugins

    import simroll.policies.trace  # noqa: F401 - registers the "trace_student" policy type
    import simroll.policies.vla  # noqa: F401 - registers the "simvla" policy type
    import simroll.policies.wam  # noqa: F401 - registers the "wam" policy type

    register_third_party_plugins()


def registered_policy_types() -> list[str]:
    """The policy types a ``config.json`` may name."""
    from lerobot.configs.policies import PreTrainedConfig

    register_policy_types()
    return sorted(PreTrainedConfig.get_known_choices())


def registered_steps(policy_type: str) -> dict[str, type]:
    """LeRobot's processor-step registry (name -> class) once the processors of LeRobot and of
    ``policy_type`` (a registered type: its ``processor_<type>`` module beside its configuration
    module, where policy packages register their own steps) are imported."""
    import lerobot.processor  # noqa: F401 - registers LeRobot's steps
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.processor.pipeline import ProcessorStepRegistry

    module = PreTrainedConfig.get_choice_class(policy_type).__module__
    package, _, name = module.rpartition(".")
    if name.startswith("configuration_"):
        processors = f"{package}.processor_{name.removeprefix('configuration_')}"
        if importlib.util.find_spec(processors) is not None:
            importlib.import_module(processors)
    return {name: ProcessorStepRegistry.get(name) for name in ProcessorStepRegistry.list()}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise PolicyLoadError(f"{path} is not valid JSON: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise PolicyLoadError(f"{path} is not a UTF-8 JSON text file: {exc}") from exc


def _check_config(path: Path) -> dict[str, Any]:
    config_path = path / CONFIG_FILE
    config = _read_json(config_path)
    if not isinstance(config, dict):
        raise UntrustedCheckpointError(
            f"{config_path} must hold a JSON object, got {type(config).__name__}"
        )
    policy_type = config.get("type")
    known = registered_policy_types()
    if policy_type not in known:
        raise UntrustedCheckpointError(
            f"{config_path}: policy type {policy_type!r} is not a registered LeRobot policy "
            f"type; expected one of {known}"
        )
    _check_fetch_fields(config, config_path)
    return config


def _field_default(item: dataclasses.Field) -> Any:
    if item.default is not dataclasses.MISSING:
        return item.default
    if item.default_factory is not dataclasses.MISSING:
        return item.default_factory()
    return None


def _check_fetch_fields(config: dict[str, Any], config_path: Path) -> None:
    """A checkpoint may not redirect what its policy type fetches by name (pretrained
    backbones, tokenizers; some load with ``trust_remote_code=True``)."""
    from lerobot.configs.policies import PreTrainedConfig

    config_class = PreTrainedConfig.get_choice_class(config["type"])
    defaults = {item.name: item for item in dataclasses.fields(config_class)}
    for key, value in config.items():
        if key in NOT_FETCHED or not FETCH_FIELD.search(key) or not isinstance(value, str):
            continue
        default = _field_default(defaults[key]) if key in defaults else None
        if value != default:
            raise UntrustedCheckpointError(
                f"{config_path}: {key}={value!r} would make the {config['type']} policy load "
                f"something by that name; simroll accepts null or the type's default "
                f"({default!r}) there"
            )


def _check_weights(path: Path) -> None:
    if not (path / WEIGHTS_FILE).is_file():
        raise PolicyLoadError(f"policy checkpoint {path} has no {WEIGHTS_FILE}")
    pickled = sorted(p.name for p in path.iterdir() if p.suffix.lower() in PICKLE_SUFFIXES)
    if pickled:
        raise UntrustedCheckpointError(
            f"policy checkpoint {path} holds pickle-format file(s) {pickled}; simroll loads "
            f"weights from {WEIGHTS_FILE} only and refuses checkpoints that carry pickles "
            f"(convert them to safetensors or remove them)"
        )


def _string_values(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _string_values(item)
    elif isinstance(value, list):
        for item in value:
            yield from _string_values(item)


def _step_class(
    step: dict[str, Any], steps: dict[str, type], where: str
) -> tuple[type, dict[str, Any]]:
    """The registered class a step entry names, checked without importing anything."""
    unknown = sorted(set(step) - set(STEP_KEYS))
    if unknown:
        raise UntrustedCheckpointError(
            f"{where} has unknown key(s) {unknown}; a processor step has only {list(STEP_KEYS)}"
        )
    by_path = {f"{cls.__module__}.{cls.__name__}": cls for cls in steps.values()}
    step_class = None
    if "registry_name" in step:
        name = step["registry_name"]
        if not isinstance(name, str) or name not in steps:
            raise UntrustedCheckpointError(
                f"{where} names registry_name {name!r}, which is not a registered processor "
                f"step; expected one of {sorted(steps)}"
            )
        step_class = steps[name]
    if "class" in step:
        path = step["class"]
        if not isinstance(path, str) or path not in by_path:
            raise UntrustedCheckpointError(
                f"{where} names class {path!r}, which is not a registered processor step; "
                f"simroll imports no class a checkpoint names, only registered steps "
                f"(by registry_name, e.g. {sorted(steps)[:3]}, or their exact class path)"
            )
        step_class = step_class or by_path[path]
    if step_class is None:
        raise UntrustedCheckpointError(f"{where} names no step (registry_name or class)")
    config = step.get("config", {})
    if not isinstance(config, dict):
        raise UntrustedCheckpointError(
            f"{where}: config must be a JSON object, got {type(config).__name__}"
        )
    return step_class, config


def _check_step_config(step_class: type, config: dict[str, Any], where: str) -> None:
    try:
        parameters = inspect.signature(step_class).parameters
    except (TypeError, ValueError):  # no introspectable signature: the key alone decides
        parameters = config
    if "trust_remote_code" in parameters and config.get("trust_remote_code") is not False:
        raise UntrustedCheckpointError(
            f"{where} ({step_class.__name__}) would load a tokenizer with remote code; simroll "
            f"needs its config to set trust_remote_code to false"
        )
    for value in _string_values(config):
        if value.lower().endswith(PICKLE_SUFFIXES):
            raise UntrustedCheckpointError(
                f"{where}: its config names {value!r}, a pickle-format file; simroll loads no "
                f"pickles (state goes in a .safetensors state_file)"
            )


def _check_state_file(step: dict[str, Any], checkpoint: Path, where: str) -> None:
    if "state_file" not in step:
        return
    name = step["state_file"]
    if (
        not isinstance(name, str)
        or Path(name).name != name
        or name in ("", ".", "..")
        or not name.endswith(".safetensors")
    ):
        raise UntrustedCheckpointError(
            f"{where}: state_file {name!r} must be the name of a .safetensors file in the "
            f"checkpoint directory"
        )
    if not (checkpoint / name).is_file():
        raise PolicyLoadError(f"{where}: state_file {name!r} is missing from {checkpoint}")


def _check_feature_shapes(
    config: dict[str, Any], step_config: dict[str, Any], config_path: Path, where: str
) -> None:
    """A normalizer's features must have the shapes ``config.json`` gives them."""
    features = step_config.get("features")
    if not isinstance(features, dict):
        return
    declared = {**config.get("input_features", {}), **config.get("output_features", {})}
    for key, feature in features.items():
        if key not in declared or not isinstance(feature, dict):
            continue
        shape, expected = feature.get("shape"), declared[key].get("shape")
        if shape is not None and expected is not None and list(shape) != list(expected):
            raise PolicyLoadError(
                f"{where}: feature {key} has shape {shape} but {config_path} gives it {expected}"
            )


def _check_processor(path: Path, filename: str, config: dict[str, Any]) -> None:
    processor_path = path / filename
    if not processor_path.is_file():
        raise PolicyLoadError(f"policy checkpoint {path} has no {filename}")
    pipeline = _read_json(processor_path)
    if not isinstance(pipeline, dict) or not isinstance(pipeline.get("steps"), list):
        raise UntrustedCheckpointError(
            f"{processor_path} must hold a JSON object with a 'steps' list"
        )
    steps = registered_steps(config["type"])
    for index, step in enumerate(pipeline["steps"]):
        where = f"{processor_path} step {index}"
        if not isinstance(step, dict):
            raise UntrustedCheckpointError(
                f"{where} must be a JSON object, got {type(step).__name__}"
            )
        step_class, step_config = _step_class(step, steps, where)
        _check_step_config(step_class, step_config, where)
        _check_state_file(step, path, where)
        _check_feature_shapes(config, step_config, path / CONFIG_FILE, where)


def _env_record_values() -> dict[str, tuple[type, tuple | None]]:
    return {
        "gripper_mode": (str, GRIPPER_MODES),
        "obs_mode": (str, OBS_MODES),
        "image_size": (int, None),
        "tactile_image": (bool, (True, False)),
    }


def read_env_record(path: str | Path) -> dict[str, Any]:
    """The env settings a checkpoint was trained for (``ENV_RECORD``, written by ``simroll train``
    from the dataset: gripper mode, obs mode, image size, tactile image); empty when it has none.
    Unknown keys and ill-typed values are refused."""
    record_path = Path(path) / ENV_RECORD
    if not record_path.is_file():
        return {}
    record = _read_json(record_path)
    if not isinstance(record, dict):
        raise PolicyLoadError(f"{record_path} must hold a JSON object, got {type(record).__name__}")
    expected = _env_record_values()
    for key, value in record.items():
        if key not in expected:
            raise PolicyLoadError(
                f"{record_path}: unknown key {key!r}; expected some of {sorted(expected)}"
            )
        kind, choices = expected[key]
        valid = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        if key == "image_size":
            valid = valid and 16 <= value <= 1024
        if not valid or (choices is not None and value not in choices):
            wanted = f"one of {list(choices)}" if choices else "an integer in [16, 1024]"
            raise PolicyLoadError(f"{record_path}: {key}={value!r}; expected {wanted}")
    return record


def validate_checkpoint(path: str | Path) -> CheckpointContents:
    """Check the checkpoint directory at ``path`` as data, before any loader reads it; raise
    :class:`PolicyLoadError` (missing or corrupt files) or :class:`UntrustedCheckpointError`
    (something simroll will not load, see the module doc)."""
    path = Path(path)
    if not path.is_dir():
        raise PolicyLoadError(f"policy checkpoint {path} is not a directory")
    if not (path / CONFIG_FILE).is_file():
        raise PolicyLoadError(f"policy checkpoint {path} has no {CONFIG_FILE}")
    _check_weights(path)
    config = _check_config(path)
    for filename in PROCESSOR_FILES:
        _check_processor(path, filename, config)
    return CheckpointContents(path, config, read_env_record(path))


def resolve_checkpoint(path: str | Path) -> Path:
    """``path`` as given, or relative to the repository (shipped ``policies/``) if not found."""
    path = Path(path)
    if not path.exists() and not path.is_absolute():
        shipped = Path(__file__).resolve().parents[2] / path
        if shipped.exists():
            return shipped
    return path


def weights_digest(path: str | Path) -> str | None:
    """SHA-256 of the checkpoint's ``model.safetensors`` (at ``path`` as
    :func:`resolve_checkpoint` finds it), None when there is none: what a run manifest records so
    that a resume refuses other weights retrained at the same path."""
    weights = resolve_checkpoint(path) / "model.safetensors"
    if not weights.is_file():
        return None
    digest = hashlib.sha256()
    with weights.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
