"""Pre/post-processors of SimVLA: LeRobot's default pipelines, with tactile forces left raw.

The pre-processor batches, moves to the device and normalizes ``observation.state`` and
``action`` with the dataset's mean/std (``normalization_mapping``); images pass through as
[0, 1] floats. ``observation.tactile`` is not normalized: most taxels are never touched in
demonstrations, so their std is ~0 and any contact at test time would blow up; the model
compresses raw forces with ``log1p`` instead. ``observation.following_error`` is not normalized
either (near-zero spread in clean demonstrations); the model divides it by fixed scales. The
instruction (the batch's ``task`` strings)
passes through unchanged and is tokenized inside the model. The post-processor unnormalizes the
action and moves it to the CPU.
"""

from __future__ import annotations

from typing import Any

import torch
from lerobot.processor import (
    NormalizerProcessorStep,
    PolicyAction,
    PolicyProcessorPipeline,
    make_default_policy_processor_steps,
    make_policy_processor_pipelines,
)

from simroll.policies.vla.configuration_simvla import SimVLAConfig


def make_simvla_pre_post_processors(
    config: SimVLAConfig,
    dataset_stats: dict[str, dict[str, torch.Tensor]] | None = None,
) -> tuple[
    PolicyProcessorPipeline[dict[str, Any], dict[str, Any]],
    PolicyProcessorPipeline[PolicyAction, PolicyAction],
]:
    steps = make_default_policy_processor_steps(config, dataset_stats)
    features = {**config.input_features, **config.output_features}
    features.pop(config.tactile_feature, None)
    # scaled by the model (see its config); the world-action model shares these processors
    features.pop(getattr(config, "following_error_feature", None), None)
    normalize = NormalizerProcessorStep(
        features=features, norm_map=config.normalization_mapping, stats=dataset_stats
    )
    return make_policy_processor_pipelines(
        input_steps=[steps.rename_observations, steps.add_batch_dim, steps.to_device, normalize],
        output_steps=[steps.unnormalize, steps.to_cpu],
    )
