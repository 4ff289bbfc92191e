"""Pre/post-processors of the TRACE student: batching and device moves, no normalization (its
inputs are metres, flags, counts and indices; its output a primitive index)."""

from __future__ import annotations

from typing import Any

import torch
from lerobot.processor import (
    PolicyAction,
    PolicyProcessorPipeline,
    make_default_policy_processor_steps,
    make_policy_processor_pipelines,
)

from simroll.policies.trace.configuration_trace import TraceStudentConfig


def make_trace_student_pre_post_processors(
    config: TraceStudentConfig,
    dataset_stats: dict[str, dict[str, torch.Tensor]] | None = None,
) -> tuple[
    PolicyProcessorPipeline[dict[str, Any], dict[str, Any]],
    PolicyProcessorPipeline[PolicyAction, PolicyAction],
]:
    steps = make_default_policy_processor_steps(config, dataset_stats)
    return make_policy_processor_pipelines(
        input_steps=[steps.rename_observations, steps.add_batch_dim, steps.to_device],
        output_steps=[steps.to_cpu],
    )
