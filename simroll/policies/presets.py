"""Optimizer and scheduler presets shared by simroll's flow-matching policy configs.

LeRobot asks a ``PreTrainedConfig`` for ``get_optimizer_preset``/``get_scheduler_preset``; SimVLA
and the world-action model both train with AdamW and a cosine decay after a linear warm-up, read
from the same config fields (``optimizer_*``, ``scheduler_*``).
"""

from __future__ import annotations

from lerobot.optim import AdamWConfig
from lerobot.optim.schedulers import CosineDecayWithWarmupSchedulerConfig


class AdamWCosinePresets:
    """Mixin for a config dataclass with ``optimizer_lr``, ``optimizer_betas``,
    ``optimizer_eps``, ``optimizer_weight_decay``, ``optimizer_grad_clip_norm``,
    ``scheduler_warmup_steps``, ``scheduler_decay_steps`` and ``scheduler_decay_lr``."""

    def get_optimizer_preset(self) -> AdamWConfig:
        return AdamWConfig(
            lr=self.optimizer_lr,
            betas=self.optimizer_betas,
            eps=self.optimizer_eps,
            weight_decay=self.optimizer_weight_decay,
            grad_clip_norm=self.optimizer_grad_clip_norm,
        )

    def get_scheduler_preset(self) -> CosineDecayWithWarmupSchedulerConfig:
        return CosineDecayWithWarmupSchedulerConfig(
            peak_lr=self.optimizer_lr,
            decay_lr=self.scheduler_decay_lr,
            num_warmup_steps=self.scheduler_warmup_steps,
            num_decay_steps=self.scheduler_decay_steps,
        )
