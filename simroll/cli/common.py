"""Pieces the Hydra entry points share: their config error (the library's, re-exported), the env
config (with the env settings a policy checkpoint records applied, unless set on the command
line), and the chosen policy's factory (its keys checked against the factory's arguments)."""

from __future__ import annotations

import difflib
import inspect

from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_object, instantiate
from omegaconf import DictConfig, OmegaConf

from simroll.rollout.episode import EnvConfig
from simroll.rollout.settings import RECORDED_ENV_KEYS, ConfigError, apply_checkpoint_env

__all__ = ["ConfigError", "env_config_from", "policy_from"]


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


def env_config_from(env: DictConfig, policy: DictConfig | None) -> EnvConfig:
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
    # a missing path (``???``) loads no record here; it is reported when the policy loads
    policy_config = (
        OmegaConf.to_container(policy, resolve=True) if isinstance(policy, DictConfig) else None
    )
    chosen, notes = apply_checkpoint_env(
        settings,
        policy_config,
        _command_line_env_keys(),
        key_prefix="env.",
        where="the command line",
    )
    for key in RECORDED_ENV_KEYS:
        if chosen[key] != settings[key]:
            env[key] = chosen[key]
    for note in notes:
        print(note)
    return EnvConfig(**chosen, rigid_twin=env.rigid_twin)


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
