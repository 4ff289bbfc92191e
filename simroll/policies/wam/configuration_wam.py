"""Configuration of simroll's world-action model (LeRobot type ``wam``), in rollout or RIFT mode.

A world-action model predicts the scene's future and conditions its actions on that prediction.
``WAMConfig`` holds both deployment modes of one architecture (``mode``):

- ``"rollout"`` (the reference): the future frames' latents are denoised jointly with the action
  chunk over ``num_video_steps`` flow steps; at every step the action expert reads the video
  expert's keys/values of the evolving future (``rollout_cache="evolving"``), or the future is
  denoised first and the actions then read one final clean cache (``"final_clean"``).
- ``"rift"``: the future rows are learned anticipation tokens, one per future position; one pass
  of the video expert over [current frame + tokens] builds the whole future cache and the action
  flow steps read it. No future frame is denoised at deployment.

Inputs: one camera (``camera``), resized to ``frame_size`` and cut into ``patch_size`` patches
whose raw pixels are the frame latents; ``observation.state``; the tactile force maps (one token
per finger); the batch's ``task`` instruction. Training loads the camera at the current step and
at ``future_offsets`` control steps ahead (``observation_delta_indices``), the futures the model
learns to predict. Inference knobs (``load_policy(..., overrides=...)``): ``mode`` (a rollout
checkpoint cannot run in RIFT mode: its anticipation tokens are untrained), ``num_video_steps``,
``num_flow_steps``, ``rollout_cache``, ``n_action_steps``, and for analysis
``cache_intervention`` (:data:`CACHE_INTERVENTIONS`; replaying one fixed final-clean cache for
the whole chunk is ``rollout_cache="final_clean"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lerobot.configs import FeatureType, NormalizationMode, PolicyFeature, PreTrainedConfig
from lerobot.utils.constants import OBS_STATE

from simroll.checks import is_int
from simroll.features import FINGERS, TACTILE_KEY, TAXEL_GRID, image_key
from simroll.policies.presets import AdamWCosinePresets
from simroll.policies.vla.configuration_simvla import DEFAULT_VOCABULARY

MODES = ("rollout", "rift")
ROLLOUT_CACHES = ("evolving", "final_clean")
# analysis only (the paper's cache interventions): what the action expert reads of the future
# cache. mask_future zeroes the future rows' values; reassign_future gives each future position
# the values of the mirrored position (the future frames' order and every frame's patches
# reversed), keys unchanged.
CACHE_INTERVENTIONS = ("none", "mask_future", "reassign_future")


@PreTrainedConfig.register_subclass("wam")
@dataclass
class WAMConfig(AdamWCosinePresets, PreTrainedConfig):
    """Two transformer experts with one masked joint attention per layer (a Mixture of
    Transformers): the video expert over conditioning tokens (instruction, proprioception, touch),
    the current frame's patch latents and the future rows; the action expert over the noisy
    action chunk, whose queries read that layer's video keys/values and its own. Video rows never
    read actions, so the video expert's per-layer keys/values are a cache the action flow steps
    reuse. Flow matching (rectified flow, ``x_t = t * noise + (1 - t) * x``) for both futures and
    actions."""

    mode: str = "rollout"
    n_obs_steps: int = 1
    chunk_size: int = 10
    n_action_steps: int = 5

    normalization_mapping: dict[str, NormalizationMode] = field(
        default_factory=lambda: {
            "VISUAL": NormalizationMode.IDENTITY,
            "STATE": NormalizationMode.MEAN_STD,
            "ACTION": NormalizationMode.MEAN_STD,
        }
    )

    camera: str = image_key("scene")
    frame_size: int = 32  # the camera image is average-pooled to this side
    patch_size: int = 8  # latent of a patch: its raw pixels, 3 * patch_size^2 values in [-1, 1]
    future_offsets: list[int] = field(default_factory=lambda: [5, 10])  # control steps ahead

    tactile_feature: str = TACTILE_KEY
    tactile_shape: tuple[int, int, int] = (FINGERS, *TAXEL_GRID)
    tactile_force_scale: float = 0.01
    vocabulary: list[str] = field(default_factory=lambda: list(DEFAULT_VOCABULARY))
    max_instruction_tokens: int = 16

    video_dim: int = 128
    action_dim_model: int = 64
    n_heads: int = 4
    head_dim: int = 32  # the joint attention's width is n_heads * head_dim for both experts
    n_layers: int = 4
    ffn_multiplier: int = 4
    dropout: float = 0.0

    num_video_steps: int = 10  # rollout mode: joint future/action flow steps
    num_flow_steps: int = 10  # action flow steps reading a fixed cache (RIFT, final_clean)
    rollout_cache: str = "evolving"
    cache_intervention: str = "none"
    time_sampling_beta_alpha: float = 1.5
    time_sampling_beta_beta: float = 1.0
    time_sampling_scale: float = 0.999
    time_sampling_offset: float = 0.001
    min_period: float = 4e-3
    max_period: float = 4.0

    # RIFT training: action flow matching reads the anticipation tokens; auxiliary losses (video
    # flow-matching co-training and the future head on the tokens' outputs) weigh 1.0 until
    # aux_anneal_start of scheduler_decay_steps, then fall linearly to aux_anneal_to.
    video_loss_weight: float = 1.0
    future_head_weight: float = 1.0
    aux_anneal_start: float = 0.7
    aux_anneal_to: float = 0.2
    future_head_layers: int = 2

    optimizer_lr: float = 3e-4
    optimizer_betas: tuple[float, float] = (0.9, 0.95)
    optimizer_eps: float = 1e-8
    optimizer_weight_decay: float = 1e-4
    optimizer_grad_clip_norm: float = 1.0
    scheduler_warmup_steps: int = 200
    scheduler_decay_steps: int = 10_000
    scheduler_decay_lr: float = 3e-5

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check()

    def check(self) -> None:
        """Raise ``ValueError`` naming any inconsistent value (also run when a policy is built,
        after inference overrides are applied)."""
        positive = {
            name: getattr(self, name)
            for name in (
                "chunk_size",
                "n_action_steps",
                "frame_size",
                "patch_size",
                "video_dim",
                "action_dim_model",
                "n_heads",
                "head_dim",
                "n_layers",
                "num_video_steps",
                "num_flow_steps",
                "future_head_layers",
                "max_instruction_tokens",
            )
        }
        for name, value in positive.items():
            if not is_int(value, 1):
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.rollout_cache not in ROLLOUT_CACHES:
            raise ValueError(
                f"rollout_cache must be one of {ROLLOUT_CACHES}, got {self.rollout_cache!r}"
            )
        if self.cache_intervention not in CACHE_INTERVENTIONS:
            raise ValueError(
                f"cache_intervention must be one of {CACHE_INTERVENTIONS}, got "
                f"{self.cache_intervention!r}"
            )
        if self.n_action_steps > self.chunk_size:
            raise ValueError(
                f"n_action_steps ({self.n_action_steps}) must be <= chunk_size ({self.chunk_size})"
            )
        if self.n_obs_steps != 1:
            raise ValueError(f"the WAM reads one observation step, got {self.n_obs_steps}")
        if self.frame_size % self.patch_size:
            raise ValueError(
                f"frame_size ({self.frame_size}) must be a multiple of patch_size "
                f"({self.patch_size})"
            )
        offsets = list(self.future_offsets)
        if not offsets or not all(is_int(offset, 1) for offset in offsets):
            raise ValueError(
                f"future_offsets must be control-step offsets >= 1, got {self.future_offsets!r}"
            )
        if offsets != sorted(set(offsets)):
            raise ValueError(f"future_offsets must be increasing, got {self.future_offsets!r}")
        for name in ("video_dim", "action_dim_model"):
            if getattr(self, name) % 2:
                raise ValueError(f"{name} must be even, got {getattr(self, name)}")
        if not 0.0 <= self.aux_anneal_start <= 1.0 or self.aux_anneal_to < 0:
            raise ValueError(
                f"aux_anneal_start must be in [0, 1] and aux_anneal_to >= 0, got "
                f"{self.aux_anneal_start!r}, {self.aux_anneal_to!r}"
            )

    @property
    def tokens_per_frame(self) -> int:
        return (self.frame_size // self.patch_size) ** 2

    @property
    def latent_dim(self) -> int:
        return 3 * self.patch_size**2

    @property
    def future_rows(self) -> int:
        """Rows of the future in the video stream: one per patch of every future frame."""
        return len(self.future_offsets) * self.tokens_per_frame

    def reads(self, key: str, feature: PolicyFeature) -> bool:
        """Whether the model reads input feature ``key``: ``camera``, ``observation.state`` and
        ``tactile_feature``; every other dataset feature is dropped when the policy is built."""
        if feature.type is FeatureType.VISUAL:
            return key == self.camera
        return feature.type is FeatureType.STATE and key in (OBS_STATE, self.tactile_feature)

    def validate_features(self) -> None:
        features = self.input_features or {}
        self.input_features = {k: f for k, f in features.items() if self.reads(k, f)}
        camera = self.input_features.get(self.camera)
        if camera is None:
            raise ValueError(
                f"the WAM predicts frames of {self.camera}; the dataset has no such camera "
                f"(its features: {sorted(features)})"
            )
        channels, height, width = camera.shape
        if channels != 3 or height != width or height % self.frame_size:
            raise ValueError(
                f"{self.camera} must be a square RGB image whose side is a multiple of "
                f"frame_size {self.frame_size}, got shape {tuple(camera.shape)}"
            )
        tactile = self.input_features.get(self.tactile_feature)
        expected = self.tactile_shape[0] * self.tactile_shape[1] * self.tactile_shape[2]
        if tactile is not None and tuple(tactile.shape) != (expected,):
            raise ValueError(
                f"{self.tactile_feature} must have shape ({expected},) for tactile_shape "
                f"{tuple(self.tactile_shape)}, got {tuple(tactile.shape)}"
            )
        if self.action_feature is None:
            raise ValueError("the WAM needs an 'action' output feature")

    @property
    def observation_delta_indices(self) -> list[int]:
        return [0, *self.future_offsets]  # training reads the futures; inference only index 0

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.chunk_size))

    @property
    def reward_delta_indices(self) -> None:
        return None
