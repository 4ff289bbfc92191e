"""Pieces the Hydra entry points share: their config error, the env config, the chosen policy's
factory, and a check that the policy can be built before any episode runs."""

from __future__ import annotations

from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from simroll.rollout.episode import EnvConfig
from simroll.rollout.records import EpisodeSpec


class ConfigError(ValueError):
    """A config value is invalid; the message names it and the valid choices."""


def env_config_from(env: DictConfig) -> EnvConfig:
    """The ``EnvConfig`` of an ``env`` config group entry."""
    return EnvConfig(
        obs_mode=env.obs_mode,
        gripper_mode=env.gripper_mode,
        image_size=env.image_size,
        rigid_twin=env.rigid_twin,
    )


def policy_from(cfg: DictConfig, group: str = "policy") -> tuple[object, str]:
    """The policy factory of ``cfg.policy`` and the name it was chosen by (``policy=<name>``)."""
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
