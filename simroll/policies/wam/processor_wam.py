"""Pre/post-processors of the world-action model: SimVLA's pipelines (LeRobot's defaults with the
tactile forces left raw, since the model compresses them with ``log1p``), which read only the
config's features, the tactile key and the normalization mapping."""

from __future__ import annotations

from typing import Any

import torch
from lerobot.processor import PolicyAction, PolicyProcessorPipeline

from simroll.policies.vla.processor_simvla import make_simvla_pre_post_processors
from simroll.policies.wam.configuration_wam import WAMConfig


def make_wam_pre_post_processors(
    config: WAMConfig,
    dataset_stats: dict[str, dict[str, torch.Tensor]] | None = None,
) -> tuple[
    PolicyProcessorPipeline[dict[str, Any], dict[str, Any]],
    PolicyProcessorPipeline[PolicyAction, PolicyAction],
]:
    return make_simvla_pre_post_processors(config, dataset_stats)  # type: ignore[arg-type]
