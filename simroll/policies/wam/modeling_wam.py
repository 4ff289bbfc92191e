"""The world-action model: a video expert and an action expert sharing one joint attention per
layer, trained with flow matching on future frame latents and action chunks (LeRobot policy).

Video stream rows, in order: instruction words, one proprioception token, one token per finger of
touch, the current frame's patch latents, then the future rows (``future_rows``: every patch of
every future frame). In rollout mode a future row holds a noisy future latent and its flow time;
in RIFT mode it holds a learned anticipation token (one per future position). Action stream rows:
the noisy action chunk with its flow time.

Per layer, each expert projects its rows to queries/keys/values of one shared attention width;
video queries read video keys only, action queries read video and action keys. Since video rows
never read actions, one pass of the video expert (:meth:`WAMModel.video_pass`, the "backbone
pass") yields every layer's video keys/values, the future cache, and the action expert
(:meth:`WAMModel.action_velocity`) reads that cache at each flow step without recomputing it.

Deployment (:meth:`WAMModel.sample`): rollout mode runs ``num_video_steps`` joint Euler steps,
each a backbone pass over the current future estimate and an action step reading its cache
(``evolving``), or denoises the future first and lets ``num_flow_steps`` action steps read the
final clean cache (``final_clean``); RIFT mode runs one backbone pass and ``num_flow_steps``
action steps. ``cache_edit`` lets an analysis change the cache the actions read (masking,
reassigning future positions, replaying a fixed cache).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from lerobot.policies.common.flow_matching import sample_noise, sample_time_beta
from lerobot.policies.common.vla_utils import create_sinusoidal_pos_embedding
from lerobot.policies.pretrained import PreTrainedPolicy
from lerobot.utils.constants import ACTION, OBS_STATE
from torch import Tensor, nn

from simroll.policies.vla.modeling_simvla import (
    PAD_ID,
    TASK_KEY,
    ActionChunkQueue,
    FeedForward,
    WordTokenizer,
    unpadded_mean,
)
from simroll.policies.wam.configuration_wam import WAMConfig

# per layer, the video stream's (keys, values), each (B, heads, rows, head_dim)
Cache = list[tuple[Tensor, Tensor]]
CacheEdit = Callable[[Cache, int], Cache]  # (cache, number of conditioning+current rows) -> cache


def intervention(name: str) -> CacheEdit | None:
    """The cache edit of ``config.cache_intervention`` (None for ``"none"``): ``mask_future``
    zeroes the values of every future row; ``reassign_future`` gives future row ``i`` the values
    of row ``n - 1 - i`` (frames and patches reversed), keys unchanged."""
    if name == "none":
        return None

    def mask_future(cache: Cache, rows: int) -> Cache:
        return [
            (k, torch.cat([v[:, :, :rows], torch.zeros_like(v[:, :, rows:])], 2)) for k, v in cache
        ]

    def reassign_future(cache: Cache, rows: int) -> Cache:
        return [(k, torch.cat([v[:, :, :rows], v[:, :, rows:].flip(2)], 2)) for k, v in cache]

    return {"mask_future": mask_future, "reassign_future": reassign_future}[name]


class ExpertLayer(nn.Module):
    """One expert's half of a joint-attention layer: pre-norm, query/key/value projection to the
    shared attention width, output projection and feed-forward."""

    def __init__(self, dim: int, config: WAMConfig):
        super().__init__()
        width = config.n_heads * config.head_dim
        self.n_heads, self.head_dim = config.n_heads, config.head_dim
        self.norm_attention, self.norm_ffn = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * width)
        self.out = nn.Linear(width, dim)
        self.ffn = FeedForward(dim, config.ffn_multiplier, config.dropout)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        batch, rows, _ = x.shape
        q, k, v = self.qkv(self.norm_attention(x)).chunk(3, dim=-1)
        return tuple(  # type: ignore[return-value]
            t.view(batch, rows, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v)
        )

    def finish(self, x: Tensor, attended: Tensor) -> Tensor:
        batch, _, rows, _ = attended.shape
        x = x + self.out(attended.transpose(1, 2).reshape(batch, rows, -1))
        return x + self.ffn(self.norm_ffn(x))


class VideoExpert(nn.Module):
    """The backbone: the video expert's layers over the video stream. One call is one backbone
    pass; it returns the stream's outputs and every layer's keys/values (the cache)."""

    def __init__(self, config: WAMConfig):
        super().__init__()
        self.layers = nn.ModuleList(
            ExpertLayer(config.video_dim, config) for _ in range(config.n_layers)
        )
        self.norm = nn.LayerNorm(config.video_dim)

    def forward(self, x: Tensor, mask: Tensor) -> tuple[Tensor, Cache]:
        """``mask``: bool (B, 1, 1, rows), True where a video row may be attended to."""
        cache: Cache = []
        for layer in self.layers:
            q, k, v = layer.project(x)
            cache.append((k, v))
            x = layer.finish(x, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
        return self.norm(x), cache


class ActionExpert(nn.Module):
    """The action expert's layers: its queries read the layer's video cache and its own rows."""

    def __init__(self, config: WAMConfig):
        super().__init__()
        self.layers = nn.ModuleList(
            ExpertLayer(config.action_dim_model, config) for _ in range(config.n_layers)
        )
        self.norm = nn.LayerNorm(config.action_dim_model)

    def forward(self, x: Tensor, cache: Cache, video_mask: Tensor) -> Tensor:
        own = torch.ones(*video_mask.shape[:3], x.shape[1], dtype=torch.bool, device=x.device)
        mask = torch.cat([video_mask, own], dim=-1)
        for layer, (video_k, video_v) in zip(self.layers, cache, strict=True):
            q, k, v = layer.project(x)
            keys, values = torch.cat([video_k, k], dim=2), torch.cat([video_v, v], dim=2)
            x = layer.finish(x, F.scaled_dot_product_attention(q, keys, values, attn_mask=mask))
        return self.norm(x)


class FutureHead(nn.Module):
    """RIFT's small flow-matching head: predicts the velocity of a noisy future latent from it,
    its flow time and the anticipation token's output at that position (what shapes the
    tokens)."""

    def __init__(self, config: WAMConfig):
        super().__init__()
        dim = config.video_dim
        self.latent_in = nn.Linear(config.latent_dim, dim)
        self.blocks = nn.ModuleList(
            nn.Sequential(
                nn.LayerNorm(2 * dim), nn.Linear(2 * dim, dim), nn.GELU(approximate="tanh")
            )
            for _ in range(config.future_head_layers)
        )
        self.out = nn.Linear(dim, config.latent_dim)

    def forward(self, noisy: Tensor, time_embedding: Tensor, condition: Tensor) -> Tensor:
        x = self.latent_in(noisy) + time_embedding
        for block in self.blocks:
            x = x + block(torch.cat([x, condition], dim=-1))
        return self.out(x)


class WAMModel(nn.Module):
    """The network (no queues, no I/O); see the module docstring."""

    def __init__(self, config: WAMConfig):
        super().__init__()
        self.config = config
        dv, da = config.video_dim, config.action_dim_model
        self.action_dim = config.action_feature.shape[0]
        self.has_state = config.robot_state_feature is not None
        self.has_tactile = config.tactile_feature in (config.input_features or {})
        self.tokenizer = WordTokenizer(config.vocabulary, config.max_instruction_tokens)
        self.word_embedding = nn.Embedding(self.tokenizer.size, dv, padding_idx=PAD_ID)
        self.word_position = nn.Parameter(torch.randn(config.max_instruction_tokens, dv) * 0.02)
        if self.has_state:
            self.state_in = nn.Linear(config.robot_state_feature.shape[0], dv)
        if self.has_tactile:
            fingers, rows, columns = config.tactile_shape
            self.tactile_in = nn.Linear(rows * columns, dv)
            self.tactile_position = nn.Parameter(torch.randn(fingers, dv) * 0.02)
        self.condition_position = nn.Parameter(torch.randn(1, dv) * 0.02)
        frames = 1 + len(config.future_offsets)
        self.latent_in = nn.Linear(config.latent_dim, dv)
        self.frame_position = nn.Parameter(torch.randn(frames, config.tokens_per_frame, dv) * 0.02)
        self.anticipation = nn.Parameter(torch.randn(config.future_rows, dv) * 0.02)
        self.video = VideoExpert(config)
        self.future_out = nn.Linear(dv, config.latent_dim)
        self.future_head = FutureHead(config)

        self.action_in = nn.Linear(self.action_dim, da)
        self.action_time = nn.Sequential(nn.Linear(2 * da, da), nn.SiLU(), nn.Linear(da, da))
        self.action_position = nn.Parameter(torch.randn(config.chunk_size, da) * 0.02)
        self.action = ActionExpert(config)
        self.action_out = nn.Linear(da, self.action_dim)
        for layer in (self.action_out, self.future_out):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)
        self.register_buffer("train_step", torch.zeros((), dtype=torch.long), persistent=True)

    # ------------------------------------------------------------------ inputs
    def latents(self, images: Tensor) -> Tensor:
        """Patch latents (B, tokens_per_frame, latent_dim) in [-1, 1] of images (B, 3, H, W)."""
        config = self.config
        frame = F.adaptive_avg_pool2d(images, config.frame_size) * 2.0 - 1.0
        patches = F.unfold(frame, config.patch_size, stride=config.patch_size)
        return patches.transpose(1, 2)

    @staticmethod
    def current(value: Tensor, frame_dims: int) -> Tensor:
        """The current step of an observation: index 0 of its time axis when it has one."""
        return value[:, 0] if value.dim() == frame_dims + 2 else value

    def conditioning(self, batch: dict[str, Any]) -> tuple[Tensor, Tensor]:
        """Conditioning rows (B, n, video_dim) and their key mask (B, n), True = real."""
        images = self.current(batch[self.config.camera], 3)
        batch_size, device = images.shape[0], images.device
        tasks = batch.get(TASK_KEY)
        if tasks is None:
            tasks = [""] * batch_size
        elif isinstance(tasks, str):
            tasks = [tasks] * batch_size
        words = self.tokenizer(tasks, device)
        rows = [self.word_embedding(words) + self.word_position[: words.shape[1]]]
        real = [words != PAD_ID]
        if self.has_state:
            state = self.current(batch[OBS_STATE], 1)
            rows.append((self.state_in(state) + self.condition_position).unsqueeze(1))
            real.append(torch.ones(batch_size, 1, dtype=torch.bool, device=device))
        if self.has_tactile:
            fingers, taxel_rows, columns = self.config.tactile_shape
            force = self.current(batch[self.config.tactile_feature], 1)
            force = force.reshape(batch_size, fingers, taxel_rows * columns).clamp_min(0.0)
            force = torch.log1p(force / self.config.tactile_force_scale)
            rows.append(self.tactile_in(force) + self.tactile_position)
            real.append(torch.ones(batch_size, fingers, dtype=torch.bool, device=device))
        return torch.cat(rows, dim=1), torch.cat(real, dim=1)

    def prefix(self, batch: dict[str, Any]) -> tuple[Tensor, Tensor]:
        """Conditioning rows followed by the current frame's latent rows, and their key mask."""
        condition, real = self.conditioning(batch)
        frame = self.latents(self.current(batch[self.config.camera], 3))
        current = self.latent_in(frame) + self.frame_position[0]
        ones = torch.ones(frame.shape[:2], dtype=torch.bool, device=frame.device)
        return torch.cat([condition, current], dim=1), torch.cat([real, ones], dim=1)

    def future_latents(self, batch: dict[str, Any]) -> Tensor:
        """Ground-truth future latents (B, future_rows, latent_dim) from a training batch."""
        images = batch[self.config.camera]
        if images.dim() != 5 or images.shape[1] != 1 + len(self.config.future_offsets):
            raise ValueError(
                f"training needs {self.config.camera} at offsets "
                f"{self.config.observation_delta_indices}, got shape {tuple(images.shape)}"
            )
        futures = images[:, 1:]
        latents = self.latents(futures.flatten(0, 1))
        return latents.reshape(images.shape[0], self.config.future_rows, -1)

    def _time(self, time: Tensor, dim: int, like: Tensor) -> Tensor:
        config = self.config
        return create_sinusoidal_pos_embedding(
            time, dim, config.min_period, config.max_period, device=like.device
        ).to(like.dtype)

    def noisy_future_rows(self, noisy: Tensor, time: Tensor) -> Tensor:
        positions = self.frame_position[1:].flatten(0, 1)
        embedded = self.latent_in(noisy) + positions
        return embedded + self._time(time, self.config.video_dim, noisy)[:, None, :]

    def anticipation_rows(self, batch_size: int) -> Tensor:
        positions = self.frame_position[1:].flatten(0, 1)
        return (self.anticipation + positions).expand(batch_size, -1, -1)

    # ------------------------------------------------------------------ passes
    def video_pass(
        self, prefix: Tensor, real: Tensor, future: Tensor
    ) -> tuple[Tensor, Cache, Tensor]:
        """One backbone pass over [prefix + future rows]: outputs, cache and its key mask."""
        rows = torch.cat([prefix, future], dim=1)
        ones = torch.ones(future.shape[:2], dtype=torch.bool, device=future.device)
        mask = torch.cat([real, ones], dim=1)[:, None, None, :]
        out, cache = self.video(rows, mask)
        return out, cache, mask

    def action_velocity(self, x_t: Tensor, time: Tensor, cache: Cache, mask: Tensor) -> Tensor:
        """Predicted velocity (B, chunk, action_dim) of the noisy chunk, reading ``cache``."""
        da = self.config.action_dim_model
        actions = self.action_in(x_t)
        embedded = self._time(time, da, x_t)[:, None, :].expand_as(actions)
        x = self.action_time(torch.cat([actions, embedded], dim=-1)) + self.action_position
        return self.action_out(self.action(x, cache, mask))

    # ------------------------------------------------------------------ training
    def _sample_time(self, batch_size: int, device) -> Tensor:
        config = self.config
        return sample_time_beta(
            batch_size,
            device,
            alpha=config.time_sampling_beta_alpha,
            beta=config.time_sampling_beta_beta,
            scale=config.time_sampling_scale,
            offset=config.time_sampling_offset,
        )

    def aux_weight(self) -> float:
        """Weight of RIFT's auxiliary losses at the current training step: 1 until
        ``aux_anneal_start`` of the schedule, then linear to ``aux_anneal_to`` at its end."""
        config = self.config
        progress = float(self.train_step) / max(1, config.scheduler_decay_steps)
        if progress <= config.aux_anneal_start:
            return 1.0
        span = max(1e-9, 1.0 - config.aux_anneal_start)
        fraction = min(1.0, (progress - config.aux_anneal_start) / span)
        return 1.0 + fraction * (config.aux_anneal_to - 1.0)

    def losses(self, batch: dict[str, Any]) -> dict[str, Tensor]:
        """Per-element action flow loss (B, chunk, action_dim) and the scalar auxiliary losses.

        Both modes co-train video flow matching: future rows hold noisy future latents at a
        sampled time, and their outputs predict the velocity. Rollout mode's action expert reads
        that noisy-future cache (at an independently sampled time, so both the joint and the
        final-clean schedules are in its training distribution). RIFT mode's action expert reads
        a second pass whose future rows are the anticipation tokens, and the future head learns
        the future latents' velocity from those tokens' outputs."""
        config = self.config
        actions = batch[ACTION]
        batch_size, device = actions.shape[0], actions.device
        prefix, real = self.prefix(batch)
        future = self.future_latents(batch)
        noise_future = sample_noise(future.shape, device)
        t_video = self._sample_time(batch_size, device)
        noisy_future = t_video[:, None, None] * noise_future + (1 - t_video[:, None, None]) * future
        out, cache, mask = self.video_pass(
            prefix, real, self.noisy_future_rows(noisy_future, t_video)
        )
        future_out = out[:, prefix.shape[1] :]
        video_loss = F.mse_loss(self.future_out(future_out), noise_future - future)
        result = {"video_loss": video_loss}
        if config.mode == "rift":
            out, cache, mask = self.video_pass(prefix, real, self.anticipation_rows(batch_size))
            tokens_out = out[:, prefix.shape[1] :]
            t_head = self._sample_time(batch_size, device)
            noise_head = sample_noise(future.shape, device)
            noisy_head = t_head[:, None, None] * noise_head + (1 - t_head[:, None, None]) * future
            embedded = self._time(t_head, config.video_dim, noisy_head)[:, None, :]
            predicted = self.future_head(noisy_head, embedded, tokens_out)
            result["future_head_loss"] = F.mse_loss(predicted, noise_head - future)
        noise = sample_noise(actions.shape, device)
        t_action = self._sample_time(batch_size, device)
        x_t = t_action[:, None, None] * noise + (1 - t_action[:, None, None]) * actions
        predicted = self.action_velocity(x_t, t_action, cache, mask)
        result["action_errors"] = F.mse_loss(predicted, noise - actions, reduction="none")
        return result

    # ------------------------------------------------------------------ inference
    @torch.no_grad()
    def sample(
        self,
        batch: dict[str, Any],
        noise: Tensor | None = None,
        cache_edit: CacheEdit | None = None,
        keep: dict[str, Any] | None = None,
    ) -> Tensor:
        """An action chunk (B, chunk, action_dim) in normalized units, by the configured mode.
        ``cache_edit(cache, prefix_rows)`` replaces the cache the action steps read; ``keep``
        (a dict) receives the last cache read (``"cache"``) and the predicted future latents
        (``"future"``, rollout mode)."""
        config = self.config
        prefix, real = self.prefix(batch)
        batch_size = prefix.shape[0]
        shape = (batch_size, config.chunk_size, self.action_dim)
        x_a = sample_noise(shape, prefix.device) if noise is None else noise
        edit = cache_edit or (lambda cache, rows: cache)
        rows = prefix.shape[1]
        if config.mode == "rift":
            _, cache, mask = self.video_pass(prefix, real, self.anticipation_rows(batch_size))
            cache = edit(cache, rows)
            x_a = self._integrate(x_a, config.num_flow_steps, cache, mask)
        else:
            generator_shape = (batch_size, config.future_rows, config.latent_dim)
            x_f = sample_noise(generator_shape, prefix.device)
            steps = config.num_video_steps
            dt = -1.0 / steps
            for step in range(steps):
                time = torch.full((batch_size,), 1.0 + step * dt, device=prefix.device)
                out, cache, mask = self.video_pass(prefix, real, self.noisy_future_rows(x_f, time))
                velocity_f = self.future_out(out[:, rows:])
                if config.rollout_cache == "evolving":
                    cache = edit(cache, rows)
                    x_a = x_a + dt * self.action_velocity(x_a, time, cache, mask)
                x_f = x_f + dt * velocity_f
            if config.rollout_cache == "final_clean":
                zero = torch.zeros(batch_size, device=prefix.device)
                _, cache, mask = self.video_pass(prefix, real, self.noisy_future_rows(x_f, zero))
                cache = edit(cache, rows)
                x_a = self._integrate(x_a, config.num_flow_steps, cache, mask)
            if keep is not None:
                keep["future"] = x_f
        if keep is not None:
            keep["cache"], keep["prefix_rows"] = cache, rows
        return x_a

    def _integrate(self, x_a: Tensor, steps: int, cache: Cache, mask: Tensor) -> Tensor:
        dt = -1.0 / steps
        for step in range(steps):
            time = torch.full((x_a.shape[0],), 1.0 + step * dt, device=x_a.device)
            x_a = x_a + dt * self.action_velocity(x_a, time, cache, mask)
        return x_a


class WAMPolicy(ActionChunkQueue, PreTrainedPolicy):
    """The world-action model with LeRobot's verbs: ``reset``, ``select_action`` (from a queue of
    ``n_action_steps``), ``predict_action_chunk`` and ``forward`` (the training loss)."""

    config_class = WAMConfig
    name = "wam"

    def __init__(self, config: WAMConfig, **kwargs: Any):
        super().__init__(config)
        config.check()
        config.validate_features()
        self.config = config
        self.model = WAMModel(config)
        self.cache_edit: CacheEdit | None = None  # set by an analysis; else cache_intervention
        self.reset()

    @torch.no_grad()
    def predict_action_chunk(
        self, batch: dict[str, Any], noise: Tensor | None = None, **kwargs: Any
    ) -> Tensor:
        self.eval()
        edit = self.cache_edit or intervention(self.config.cache_intervention)
        return self.model.sample(batch, noise=noise, cache_edit=edit, keep=kwargs.get("keep"))

    def forward(self, batch: dict[str, Any], **kwargs: Any):
        """Training loss: the action flow loss over unpadded chunk steps plus the auxiliary
        losses at their annealed weight."""
        losses = self.model.losses(batch)
        action_loss = unpadded_mean(losses["action_errors"], batch)
        weight = self.model.aux_weight()
        loss = action_loss + weight * self.config.video_loss_weight * losses["video_loss"]
        info = {
            "action_loss": float(action_loss.detach()),
            "video_loss": float(losses["video_loss"].detach()),
            "aux_weight": weight,
        }
        if "future_head_loss" in losses:
            loss = loss + weight * self.config.future_head_weight * losses["future_head_loss"]
            info["future_head_loss"] = float(losses["future_head_loss"].detach())
        if self.training:
            self.model.train_step += 1
        return loss, info
