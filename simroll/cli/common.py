"""Pieces every Hydra entry point shares: the env config and the chosen policy's factory."""

from __future__ import annotations

from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig

from simroll.rollout.episode import EnvConfig


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
    factory = instantiate(cfg.policy)
    try:
        choice = HydraConfig.get().runtime.choices.get(group) or group
    except ValueError:  # called outside a Hydra run (tests)
        choice = group
    return factory, str(choice)
