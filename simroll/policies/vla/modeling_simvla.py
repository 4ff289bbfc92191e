"""SimVLA: a small vision-language-action policy with a flow-matching action head (LeRobot).

Context tokens, in this order: the patch tokens of each camera (a strided conv stem turns a 64 px
image into 8 x 8 tokens of 8 px patches; each camera has its own learned position embeddings),
the tactile tokens (one per taxel row per finger, or one per finger, from the 2 x 16 x 12 force
maps), one proprioception token, one following-error token when the config reads
``observation.following_error`` (divided by fixed per-entry scales) and the word tokens of the
instruction (a word-level tokenizer over ``config.vocabulary``; no hub downloads). A pre-norm
transformer encoder mixes them.

Actions (pi0-style rectified flow, openpi conventions): a chunk ``x_t = t * noise + (1 - t) *
actions`` of ``chunk_size`` noisy action tokens, each fused with a sinusoidal embedding of ``t``,
goes through a decoder (self-attention over the chunk, cross-attention to the context) that
predicts the velocity ``noise - actions``; training minimises its squared error on the unpadded
steps. Inference integrates from ``t = 1`` (Gaussian noise) to ``t = 0`` with ``num_flow_steps``
Euler steps (LeRobot's shared ``euler_integrate``), encoding the context and projecting its
keys/values once per chunk. ``noise_scale`` scales the starting noise: 0 integrates from the
noise distribution's mean, a deterministic chunk per observation. ``num_action_samples`` > 1
integrates that many chunks from independent noise in one batch and returns their mean.
``temporal_ensemble_coeff`` averages, every step, the actions that the overlapping chunks
predicted for it (ACT's temporal ensembling, LeRobot's implementation).

With ``goal_loss_weight`` > 0 a small head on the mean of the encoded context predicts the
target's table position (``GOAL_AXES``), trained against the labels the trainer adds to the batch
(``simroll.train.goal_labels``); its error joins the training loss. With ``goal_conditioning``
the decoder also reads that estimate: a linear map of it (detached, so only the labels train the
head; zero at initialisation, so a fine-tune starts from its checkpoint's behaviour) is added to
every action token, and inference runs the head too. Without it inference never runs the head.
With ``goal_source="label"`` (or ``"label_offset"``, the target's offset from the hand) the map
reads the true target instead (the batch's ``GOAL_LABEL_KEY`` times ``GOAL_MASK_KEY``: the
trainer's labels, and at inference the env's target that
``simroll.policies.lerobot.load_policy`` adds), a privileged diagnostic.

Acceleration knobs (config fields, settable through ``load_policy(..., overrides=...)``):
``num_flow_steps``, ``n_action_steps``, ``keep_visual_tokens`` (keep the top-k patch tokens of
each camera by the norm of their stem features, a cheap saliency) and ``quantize_int8``
(:func:`quantize_int8` after loading: every ``nn.Linear`` becomes a dynamically quantized int8
layer; inference only, such a policy cannot be trained or saved).
"""

from __future__ import annotations

import re
import warnings
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from lerobot.policies.common.flow_matching import euler_integrate, sample_noise, sample_time_beta
from lerobot.policies.common.vla_utils import create_sinusoidal_pos_embedding
from lerobot.policies.pretrained import PreTrainedPolicy
from lerobot.utils.constants import ACTION, OBS_STATE
from torch import Tensor, nn

from simroll.features import GOAL_LABEL_KEY, GOAL_MASK_KEY, STATE_NAMES
from simroll.policies.vla.configuration_simvla import SimVLAConfig

PAD_ID, UNK_ID = 0, 1
TASK_KEY = "task"
GOAL_AXES = ("x", "y")  # what the auxiliary goal head predicts (table position, GOAL_LABEL_KEY)


class QuantizedPolicyError(RuntimeError):
    """A policy quantized to int8 was asked to train or to be saved."""


class WordTokenizer:
    """Lower-cases, splits on anything that is not a letter or digit, and maps words to ids
    (0 = padding, 1 = unknown word, then ``vocabulary`` in order)."""

    def __init__(self, vocabulary: Sequence[str], max_tokens: int):
        self.ids = {word.lower(): index + 2 for index, word in enumerate(vocabulary)}
        self.max_tokens = max_tokens
        self.size = len(vocabulary) + 2

    def words(self, text: str) -> list[str]:
        return re.findall(r"[a-z0-9]+", text.lower())

    def __call__(self, texts: Sequence[str], device: torch.device | str = "cpu") -> Tensor:
        """Token ids (len(texts), n), right-padded with ``PAD_ID``; n is the longest instruction's
        word count (at least 1, at most ``max_tokens``)."""
        tokens = torch.full((len(texts), self.max_tokens), PAD_ID, dtype=torch.long)
        for row, text in enumerate(texts):
            ids = [self.ids.get(word, UNK_ID) for word in self.words(str(text))][: self.max_tokens]
            if ids:
                tokens[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        longest = int((tokens != PAD_ID).sum(dim=1).max()) if len(texts) else 0
        return tokens[:, : max(longest, 1)].to(device)  # padding no instruction needs costs time


class Attention(nn.Module):
    """Multi-head attention with separate query and key/value projections, so the keys/values of
    a fixed context can be computed once (:meth:`project_kv`) and reused."""

    def __init__(self, dim: int, n_heads: int, dropout: float):
        super().__init__()
        self.n_heads, self.dropout = n_heads, dropout
        self.query = nn.Linear(dim, dim)
        self.key_value = nn.Linear(dim, 2 * dim)
        self.out = nn.Linear(dim, dim)

    def _heads(self, x: Tensor) -> Tensor:
        batch, length, dim = x.shape
        return x.view(batch, length, self.n_heads, dim // self.n_heads).transpose(1, 2)

    def project_kv(self, context: Tensor) -> tuple[Tensor, Tensor]:
        key, value = self.key_value(context).chunk(2, dim=-1)
        return self._heads(key), self._heads(value)

    def forward(self, x: Tensor, kv: tuple[Tensor, Tensor], mask: Tensor | None = None) -> Tensor:
        """``mask``: bool (batch, 1, 1, keys), True where a key may be attended to."""
        query = self._heads(self.query(x))
        attended = F.scaled_dot_product_attention(
            query, *kv, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0
        )
        batch, _, length, _ = attended.shape
        return self.out(attended.transpose(1, 2).reshape(batch, length, -1))


class FeedForward(nn.Sequential):
    def __init__(self, dim: int, multiplier: int, dropout: float):
        super().__init__(
            nn.Linear(dim, multiplier * dim),
            nn.GELU(approximate="tanh"),
            nn.Dropout(dropout),
            nn.Linear(multiplier * dim, dim),
        )


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, n_heads: int, multiplier: int, dropout: float):
        super().__init__()
        self.norm_attention, self.norm_ffn = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attention = Attention(dim, n_heads, dropout)
        self.ffn = FeedForward(dim, multiplier, dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        normed = self.norm_attention(x)
        x = x + self.attention(normed, self.attention.project_kv(normed), mask)
        return x + self.ffn(self.norm_ffn(x))


class DecoderBlock(nn.Module):
    """Self-attention over the action chunk, cross-attention to the context, feed-forward."""

    def __init__(self, dim: int, n_heads: int, multiplier: int, dropout: float):
        super().__init__()
        self.norm_self, self.norm_cross, self.norm_ffn = (nn.LayerNorm(dim) for _ in range(3))
        self.self_attention = Attention(dim, n_heads, dropout)
        self.cross_attention = Attention(dim, n_heads, dropout)
        self.ffn = FeedForward(dim, multiplier, dropout)

    def forward(self, x: Tensor, context_kv: tuple[Tensor, Tensor], context_mask: Tensor) -> Tensor:
        normed = self.norm_self(x)
        x = x + self.self_attention(normed, self.self_attention.project_kv(normed))
        x = x + self.cross_attention(self.norm_cross(x), context_kv, context_mask)
        return x + self.ffn(self.norm_ffn(x))


def patch_stem(patch_size: int, channels: int, dim: int) -> nn.Sequential:
    """A conv patchifier (B, 3, H, W) -> (B, dim, H / patch_size, W / patch_size): a 4 px
    patchifying conv to ``channels``, then stride-2 3x3 convs (doubling the channels, the last one
    to ``dim``) until the stride reaches ``patch_size``. The 3x3 convs overlap neighbouring
    patches, so each token sees a little context around its patch."""
    layers: list[nn.Module] = [nn.Conv2d(3, channels, 4, stride=4)]
    width = channels
    for stage in range(patch_size.bit_length() - 3):  # log2(patch_size / 4) stride-2 stages
        layers += [nn.GroupNorm(min(8, width), width), nn.GELU(approximate="tanh")]
        last = stage == patch_size.bit_length() - 4
        out = dim if last else 2 * width
        layers.append(nn.Conv2d(width, out, 3, stride=2, padding=1))
        width = out
    return nn.Sequential(*layers)


class SimVLAModel(nn.Module):
    """The network: context encoder plus flow-matching action decoder (no queues, no I/O)."""

    def __init__(self, config: SimVLAConfig):
        super().__init__()
        self.config = config
        dim = config.dim_model
        self.camera_keys = list(config.image_features)
        self.has_state = config.robot_state_feature is not None
        self.has_tactile = config.tactile_feature in (config.input_features or {})
        self.has_following_error = config.following_error_feature in (config.input_features or {})
        self.action_dim = config.action_feature.shape[0]
        self.tokenizer = WordTokenizer(config.vocabulary, config.max_instruction_tokens)

        if self.camera_keys:
            self.image_hw = tuple(config.image_features[self.camera_keys[0]].shape[1:])
            side = self.image_hw[0] // config.patch_size
            self.patches_per_camera = side * side
            self.stem = patch_stem(config.patch_size, config.stem_channels, dim)
            self.camera_position = nn.Parameter(
                torch.randn(len(self.camera_keys), self.patches_per_camera, dim) * 0.02
            )
        if self.has_tactile:
            fingers, rows, columns = config.tactile_shape
            per_token = columns if config.tactile_tokens == "row" else rows * columns
            self.tactile_tokens = fingers * rows if config.tactile_tokens == "row" else fingers
            self.tactile_in = nn.Linear(per_token, dim)
            self.tactile_position = nn.Parameter(torch.randn(self.tactile_tokens, dim) * 0.02)
        if self.has_state:
            state_size = config.robot_state_feature.shape[0]
            kept = [i for i, name in enumerate(STATE_NAMES) if name not in config.ignored_state]
            if config.ignored_state and state_size != len(STATE_NAMES):
                raise ValueError(
                    f"ignored_state needs observation.state of {len(STATE_NAMES)} entries "
                    f"({list(STATE_NAMES)}), got shape {tuple(config.robot_state_feature.shape)}"
                )
            # the columns of observation.state the model reads (all unless ignored_state is set)
            self.state_columns = kept if config.ignored_state else None
            self.state_in = nn.Linear(len(kept) if config.ignored_state else state_size, dim)
            self.state_position = nn.Parameter(torch.randn(1, dim) * 0.02)
        if self.has_following_error:
            scale = torch.tensor(config.following_error_scale, dtype=torch.float32)
            self.register_buffer("following_error_scale", scale, persistent=False)
            self.following_error_in = nn.Linear(len(config.following_error_scale), dim)
            self.following_error_position = nn.Parameter(torch.randn(1, dim) * 0.02)
        if config.n_obs_steps > 1:  # only then: one-step checkpoints keep their state dict
            self.step_position = nn.Parameter(torch.randn(config.n_obs_steps, 1, dim) * 0.02)
        self.word_embedding = nn.Embedding(self.tokenizer.size, dim, padding_idx=PAD_ID)
        self.word_position = nn.Parameter(torch.randn(config.max_instruction_tokens, dim) * 0.02)

        block_args = (dim, config.n_heads, config.ffn_multiplier, config.dropout)
        self.encoder = nn.ModuleList(
            EncoderBlock(*block_args) for _ in range(config.n_encoder_layers)
        )
        self.encoder_norm = nn.LayerNorm(dim)

        self.action_in = nn.Linear(self.action_dim, dim)
        self.action_time_mlp = nn.Sequential(
            nn.Linear(2 * dim, dim), nn.SiLU(), nn.Linear(dim, dim)
        )
        self.action_position = nn.Parameter(torch.randn(config.chunk_size, dim) * 0.02)
        self.decoder = nn.ModuleList(
            DecoderBlock(*block_args) for _ in range(config.n_decoder_layers)
        )
        self.decoder_norm = nn.LayerNorm(dim)
        self.action_out = nn.Linear(dim, self.action_dim)
        nn.init.zeros_(self.action_out.weight)
        nn.init.zeros_(self.action_out.bias)
        if config.goal_loss_weight > 0:  # only then: other checkpoints keep their state dict
            self.goal_head = nn.Sequential(
                nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, len(GOAL_AXES))
            )
        if config.goal_conditioning:  # the decoder reads the head's estimate (needs the head)
            self.goal_in = nn.Linear(len(GOAL_AXES), dim)
            nn.init.zeros_(self.goal_in.weight)
            nn.init.zeros_(self.goal_in.bias)

    # ------------------------------------------------------------------ context
    def visual_tokens(self, batch: dict[str, Any]) -> Tensor:
        """(B, cameras * kept, dim): each camera's patch tokens, pruned to the
        ``keep_visual_tokens`` most salient (largest stem-feature norm) when that is set."""
        images = torch.stack([batch[key] for key in self.camera_keys], dim=1)
        if tuple(images.shape[-2:]) != self.image_hw:
            height, width = images.shape[-2:]
            raise ValueError(
                f"SimVLA: camera images are {height}x{width} pixels, but this checkpoint reads "
                f"{self.image_hw[0]}x{self.image_hw[1]} ({self.camera_keys[0]}); evaluate it at "
                f"that size (simroll: env.image_size={self.image_hw[0]}; lerobot-eval: "
                f"--env.image_size={self.image_hw[0]})"
            )
        batch_size, cameras = images.shape[:2]
        features = self.stem(images.flatten(0, 1) * 2.0 - 1.0)  # [0, 1] pixels -> [-1, 1]
        features = features.flatten(2).transpose(1, 2)  # (B * cameras, patches, dim)
        features = features.view(batch_size, cameras, self.patches_per_camera, -1)
        tokens = features + self.camera_position
        keep = self.config.keep_visual_tokens
        if keep is not None and keep < self.patches_per_camera:
            saliency = features.detach().norm(dim=-1)  # (B, cameras, patches)
            index = saliency.topk(keep, dim=-1, sorted=False).indices
            tokens = tokens.gather(2, index.unsqueeze(-1).expand(-1, -1, -1, tokens.shape[-1]))
        return tokens.flatten(1, 2)

    def touch_tokens(self, force: Tensor) -> Tensor:
        fingers, rows, columns = self.config.tactile_shape
        force = force.reshape(force.shape[0], fingers, rows, columns).clamp_min(0.0)
        force = torch.log1p(force / self.config.tactile_force_scale)
        per_token = force.reshape(force.shape[0], self.tactile_tokens, -1)
        return self.tactile_in(per_token) + self.tactile_position

    def encode(self, batch: dict[str, Any]) -> tuple[Tensor, Tensor]:
        """Encoded context (B, tokens, dim) and its key mask (B, 1, 1, tokens), True = real.

        With ``n_obs_steps`` T > 1 every observation tensor is (B, T, ...): each step's tokens
        are made as one observation's, plus a learned embedding of the step, and the steps'
        tokens come one after another (oldest first) before the instruction's."""
        steps = self.config.n_obs_steps
        if steps == 1:
            observed = self.observation_tokens(batch)
        else:
            # the keys select_action stacks and the trainer loads a history of: the input features
            read = [key for key in self.config.input_features if key in batch]
            flat = {**batch, **{key: batch[key].flatten(0, 1) for key in read}}
            tokens = self.observation_tokens(flat)  # (B * T, n, dim)
            tokens = tokens.view(-1, steps, *tokens.shape[1:]) + self.step_position
            observed = tokens.flatten(1, 2)
        batch_size, device = observed.shape[0], observed.device
        words = self.instruction_tokens(batch, batch_size, device)
        context = torch.cat(
            [observed, self.word_embedding(words) + self.word_position[: words.shape[1]]], dim=1
        )
        real = torch.ones(batch_size, context.shape[1], dtype=torch.bool, device=device)
        real[:, -words.shape[1] :] = words != PAD_ID
        mask = real[:, None, None, :]
        for block in self.encoder:
            context = block(context, mask)
        return self.encoder_norm(context), mask

    def observation_tokens(self, batch: dict[str, Any]) -> Tensor:
        """One observation step's tokens (B, n, dim): cameras, touch, state, following error."""
        parts: list[Tensor] = []
        if self.camera_keys:
            parts.append(self.visual_tokens(batch))
        if self.has_tactile:
            parts.append(self.touch_tokens(batch[self.config.tactile_feature]))
        if self.has_state:
            state = batch[OBS_STATE]
            if self.state_columns is not None:
                state = state[..., self.state_columns]
            parts.append((self.state_in(state) + self.state_position).unsqueeze(1))
        if self.has_following_error:
            error = batch[self.config.following_error_feature] / self.following_error_scale
            token = self.following_error_in(error) + self.following_error_position
            parts.append(token.unsqueeze(1))
        return torch.cat(parts, dim=1)

    def instruction_tokens(self, batch: dict[str, Any], batch_size: int, device) -> Tensor:
        tasks = batch.get(TASK_KEY)
        if tasks is None:
            tasks = [""] * batch_size
        elif isinstance(tasks, str):
            tasks = [tasks] * batch_size
        if len(tasks) != batch_size:
            raise ValueError(f"batch has {len(tasks)} task strings for {batch_size} observations")
        return self.tokenizer(tasks, device)

    # ------------------------------------------------------------------ actions
    def context_kv(self, context: Tensor) -> list[tuple[Tensor, Tensor]]:
        return [block.cross_attention.project_kv(context) for block in self.decoder]

    def velocity(
        self,
        x_t: Tensor,
        time: Tensor,
        context_kv: list[tuple[Tensor, Tensor]],
        mask: Tensor,
        condition: Tensor | None = None,
    ) -> Tensor:
        """Predicted flow velocity (B, chunk, action_dim) of the noisy chunk ``x_t`` at ``time``;
        ``condition`` (B, dim), when given, is added to every action token
        (:meth:`goal_condition`)."""
        config = self.config
        time_embedding = create_sinusoidal_pos_embedding(
            time, config.dim_model, config.min_period, config.max_period, device=x_t.device
        ).to(x_t.dtype)
        actions = self.action_in(x_t)
        time_embedding = time_embedding[:, None, :].expand_as(actions)
        x = self.action_time_mlp(torch.cat([actions, time_embedding], dim=-1))
        x = x + self.action_position[: x.shape[1]]
        if condition is not None:
            x = x + condition[:, None, :]
        for block, kv in zip(self.decoder, context_kv, strict=True):
            x = block(x, kv, mask)
        return self.action_out(self.decoder_norm(x))

    def predict_goal(self, context: Tensor, mask: Tensor) -> Tensor:
        """The goal head's target position (B, 2) in ``goal_loss_scale`` units, read from the
        mean of the encoded context's real tokens."""
        real = mask[:, 0, 0, :].unsqueeze(-1).to(context.dtype)  # (B, tokens, 1)
        return self.goal_head((context * real).sum(dim=1) / real.sum(dim=1))

    def goal_condition(self, predicted: Tensor | None, batch: dict[str, Any]) -> Tensor | None:
        """The decoder's conditioning (B, dim): with ``goal_source="estimate"`` on the goal head's
        estimate ``predicted`` (detached: the action loss does not train the head), with
        ``"label"``/``"label_offset"`` on the batch's true target (zero where unlabelled); None
        without ``goal_conditioning``."""
        if not self.config.goal_conditioning:
            return None
        if self.config.goal_source == "estimate":
            return self.goal_in(predicted.detach())
        if GOAL_LABEL_KEY not in batch or GOAL_MASK_KEY not in batch:
            raise ValueError(
                f"goal_source={self.config.goal_source!r} needs the target in the batch "
                f"({GOAL_LABEL_KEY!r} and {GOAL_MASK_KEY!r}); got keys {sorted(batch)}"
            )
        reference = self.goal_in.weight
        target = batch[GOAL_LABEL_KEY].to(reference) / self.config.goal_loss_scale
        return self.goal_in(target * batch[GOAL_MASK_KEY].to(reference)[:, None])

    def goal_error(self, predicted: Tensor | None, batch: dict[str, Any]) -> Tensor | None:
        """Mean squared error of the goal head's estimate ``predicted`` (:meth:`predict_goal`)
        over the batch's labelled samples (``GOAL_MASK_KEY``), in ``goal_loss_scale`` units;
        None without a head or labels."""
        if predicted is None or GOAL_LABEL_KEY not in batch:
            return None
        target = batch[GOAL_LABEL_KEY].to(predicted) / self.config.goal_loss_scale
        labelled = batch[GOAL_MASK_KEY].to(predicted)
        per_sample = ((predicted - target) ** 2).mean(dim=-1)
        return (per_sample * labelled).sum() / labelled.sum().clamp_min(1.0)

    def loss(self, batch: dict[str, Any], noise: Tensor | None = None, time: Tensor | None = None):
        """Per-element squared velocity error (B, chunk, action_dim), and the goal head's error
        (:meth:`goal_error`, None when there is none)."""
        actions = batch[ACTION]
        batch_size = actions.shape[0]
        if noise is None:
            noise = sample_noise(actions.shape, actions.device)
        if time is None:
            time = sample_time_beta(
                batch_size,
                actions.device,
                alpha=self.config.time_sampling_beta_alpha,
                beta=self.config.time_sampling_beta_beta,
                scale=self.config.time_sampling_scale,
                offset=self.config.time_sampling_offset,
            )
        expanded = time[:, None, None]
        x_t = expanded * noise + (1 - expanded) * actions
        target = noise - actions
        context, mask = self.encode(batch)
        goal = self.predict_goal(context, mask) if hasattr(self, "goal_head") else None
        predicted = self.velocity(
            x_t, time, self.context_kv(context), mask, self.goal_condition(goal, batch)
        )
        return F.mse_loss(predicted, target, reduction="none"), self.goal_error(goal, batch)

    @torch.no_grad()
    def sample(self, batch: dict[str, Any], noise: Tensor | None = None) -> Tensor:
        """An action chunk (B, chunk, action_dim) in normalized units."""
        context, mask = self.encode(batch)
        samples = self.config.num_action_samples
        batch_size = context.shape[0]
        shape = (batch_size * samples, self.config.chunk_size, self.action_dim)
        if noise is None:
            noise = sample_noise(shape, context.device) * self.config.noise_scale
        elif noise.shape[0] != shape[0]:
            raise ValueError(
                f"noise has {noise.shape[0]} rows; expected batch size x num_action_samples = "
                f"{batch_size} x {samples}"
            )
        condition = None
        if self.config.goal_conditioning:  # the head runs only when the decoder reads it
            estimate = (
                self.predict_goal(context, mask) if self.config.goal_source == "estimate" else None
            )
            condition = self.goal_condition(estimate, batch)
        kv = self.context_kv(context)  # projected once; the samples share it
        if samples > 1:  # one batched flow: observation b's samples are rows b*K .. b*K+K-1
            kv = [(k.repeat_interleave(samples, 0), v.repeat_interleave(samples, 0)) for k, v in kv]
            mask = mask.repeat_interleave(samples, 0)
            if condition is not None:
                condition = condition.repeat_interleave(samples, 0)
        chunks = euler_integrate(
            lambda x_t, time: self.velocity(x_t, time, kv, mask, condition),
            noise,
            self.config.num_flow_steps,
        )
        return chunks.unflatten(0, (batch_size, samples)).mean(dim=1)


def quantize_int8(module: nn.Module) -> nn.Module:
    """``module`` with every ``nn.Linear`` replaced in place by a dynamically quantized int8 layer
    (weights int8, activations quantized per call; CPU inference only)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notice (torchao)
        return torch.ao.quantization.quantize_dynamic(
            module, {nn.Linear}, dtype=torch.qint8, inplace=True
        )


def unpadded_mean(errors: Tensor, batch: dict[str, Any]) -> Tensor:
    """Mean of per-element action errors (B, chunk, action_dim) over the chunk steps that are
    not padding (``action_is_pad``: steps past an episode's end)."""
    pad = batch.get(f"{ACTION}_is_pad")
    if pad is None:
        return errors.mean()
    valid = (~pad).unsqueeze(-1).to(errors.dtype)
    return (errors * valid).sum() / (valid.sum() * errors.shape[-1]).clamp_min(1.0)


class ActionChunkQueue:
    """LeRobot's acting verbs for a policy that predicts action chunks (SimVLA, the WAM):
    ``select_action`` returns one action at a time from a queue of ``config.n_action_steps``,
    refilled by ``predict_action_chunk`` when empty, or, with ``config.temporal_ensemble_coeff``
    set, predicts a chunk every step and returns LeRobot's ACT temporal ensemble of the chunks
    covering this step; ``reset`` drops the queue and the ensemble."""

    def get_optim_params(self):
        return self.parameters()

    def reset(self) -> None:
        """Call whenever the environment is reset: drops the queued (or ensembled) actions."""
        self._action_queue: deque[Tensor] = deque([], maxlen=self.config.n_action_steps)
        self._ensembler = None
        self._ensemble_coeff = getattr(self.config, "temporal_ensemble_coeff", None)
        if self._ensemble_coeff is not None:
            from lerobot.policies.act.modeling_act import ACTTemporalEnsembler

            self._ensembler = ACTTemporalEnsembler(self._ensemble_coeff, self.config.chunk_size)

    @torch.no_grad()
    def select_action(self, batch: dict[str, Any], noise: Tensor | None = None, **kwargs: Any):
        """The next action (B, action_dim); a new chunk is predicted when the queue is empty."""
        if self.training:  # Module.eval() walks every submodule: ~0.3 ms, so not on every step
            self.eval()
        if self._action_queue.maxlen != self.config.n_action_steps or self._ensemble_coeff != (
            getattr(self.config, "temporal_ensemble_coeff", None)
        ):
            self.reset()  # n_action_steps or the ensembling was changed after construction
        if self._ensembler is not None:  # a new chunk every step, averaged with the earlier ones
            return self._ensembler.update(self.predict_action_chunk(batch, noise=noise))
        if not self._action_queue:
            chunk = self.predict_action_chunk(batch, noise=noise)[:, : self.config.n_action_steps]
            self._action_queue.extend(chunk.transpose(0, 1))
        return self._action_queue.popleft()


class SimVLAPolicy(ActionChunkQueue, PreTrainedPolicy):
    """SimVLA with LeRobot's verbs: ``reset``, ``select_action`` (one action at a time from a
    queue of ``n_action_steps``), ``predict_action_chunk`` and ``forward`` (training loss)."""

    config_class = SimVLAConfig
    name = "simvla"

    def __init__(self, config: SimVLAConfig, **kwargs: Any):
        super().__init__(config)
        config.check()
        config.validate_features()
        self.config = config
        self.model = SimVLAModel(config)
        self.quantized = False
        self.reset()

    @classmethod
    def from_pretrained(cls, pretrained_name_or_path: str | Path, **kwargs: Any) -> SimVLAPolicy:
        policy = super().from_pretrained(pretrained_name_or_path, **kwargs)
        if policy.config.quantize_int8:
            policy.to_int8()
        return policy

    def to_int8(self) -> SimVLAPolicy:
        """Quantize the network's linear layers to int8 in place (inference only)."""
        if not self.quantized:
            self.to("cpu")
            quantize_int8(self.model)
            self.quantized = True
            self.config.quantize_int8 = True
        return self

    def _save_pretrained(self, save_directory: Path, state_dict=None) -> None:
        if self.quantized:
            raise QuantizedPolicyError(
                "an int8-quantized SimVLA cannot be saved; save the float policy and load it "
                "with overrides={'quantize_int8': True}"
            )
        super()._save_pretrained(save_directory, state_dict=state_dict)

    def reset(self) -> None:
        """Drops the queued actions and, with ``n_obs_steps`` > 1, the observation history."""
        super().reset()
        self._history: dict[str, deque[Tensor]] | None = None

    @torch.no_grad()
    def select_action(self, batch: dict[str, Any], noise: Tensor | None = None, **kwargs: Any):
        """The next action (B, action_dim). With ``n_obs_steps`` T > 1 every observation is
        kept and the last T (the first repeated at an episode's start, LeRobot's
        ``populate_queues``) are stacked as (B, T, ...) for the model."""
        if self.config.n_obs_steps > 1:
            from lerobot.policies.utils import populate_queues

            keys = [key for key in self.config.input_features if key in batch]
            if self._history is None:
                self._history = {key: deque(maxlen=self.config.n_obs_steps) for key in keys}
            self._history = populate_queues(self._history, {key: batch[key] for key in keys})
            batch = {
                **batch,
                **{key: torch.stack(list(q), dim=1) for key, q in self._history.items()},
            }
        return super().select_action(batch, noise=noise, **kwargs)

    @torch.no_grad()
    def predict_action_chunk(
        self, batch: dict[str, Any], noise: Tensor | None = None, **kwargs: Any
    ) -> Tensor:
        """A normalized action chunk (B, chunk_size, action_dim); ``noise`` fixes the flow start."""
        self.eval()
        return self.model.sample(batch, noise=noise)

    def forward(
        self, batch: dict[str, Any], noise: Tensor | None = None, time: Tensor | None = None
    ):
        """Training loss: the mean squared flow-velocity error over unpadded chunk steps."""
        if self.quantized:
            raise QuantizedPolicyError("an int8-quantized SimVLA is for inference only")
        errors, goal_error = self.model.loss(batch, noise=noise, time=time)
        loss = unpadded_mean(errors, batch)
        info = {"flow_loss": float(loss.detach())}
        if goal_error is not None:
            info["goal_loss"] = float(goal_error.detach())
            loss = loss + self.config.goal_loss_weight * goal_error
        return loss, info
