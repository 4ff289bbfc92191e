"""Configuration of SimVLA, simroll's small vision-language-action policy (LeRobot type ``simvla``).

``SimVLAConfig`` is a LeRobot ``PreTrainedConfig`` registered under the choice name ``simvla``, so
``make_policy_config("simvla", ...)``, ``PreTrainedConfig.from_pretrained`` and LeRobot's CLIs
(``--policy.type=simvla``, through the ``lerobot_policy_simvla`` plugin) all find it. Besides the
architecture it holds the inference-time acceleration knobs that certification varies through
``load_policy(..., overrides={...})``: ``num_flow_steps`` (Euler steps of the flow-matching head),
``n_action_steps`` (actions executed per predicted chunk), ``keep_visual_tokens`` (patch tokens
kept per camera, ranked by feature norm) and ``quantize_int8`` (dynamic int8 quantization of
every ``nn.Linear`` after the weights are loaded), and two sampling settings: ``noise_scale``,
the scale of the flow's starting noise (0: a deterministic policy), and
``temporal_ensemble_coeff`` (ACT's temporal ensembling of overlapping chunks). ``n_obs_steps``
(a training setting) gives the model the last that many observations instead of one; with 2 the
shipped recipe scored much worse in closed loop (README, "A memory of the previous frame").
``goal_loss_weight`` (training) adds an auxiliary head that predicts the SoftPlace target's
position; measured in README, "An auxiliary target estimate". ``goal_conditioning`` (training)
feeds that estimate to the action decoder; it placed no better (README, "The estimate fed to the
action decoder"). ``goal_source="label"`` (``"label_offset"``: its offset from the hand) feeds
the true target instead (privileged: README, "The true target fed to the action decoder").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from lerobot.configs import FeatureType, NormalizationMode, PolicyFeature, PreTrainedConfig
from lerobot.utils.constants import OBS_STATE

from simroll.checks import is_int
from simroll.features import (
    FINGERS,
    FOLLOWING_ERROR_KEY,
    FOLLOWING_ERROR_NAMES,
    STATE_NAMES,
    TACTILE_KEY,
    TAXEL_GRID,
)
from simroll.policies.presets import AdamWCosinePresets

logger = logging.getLogger(__name__)

# what goal_conditioning feeds the decoder: the head's estimate, the true target, or the true
# target's offset from the hand's observed (x, y)
GOAL_SOURCES = ("estimate", "label", "label_offset")

# The instruction vocabulary: every word of simroll's task templates and object names, plus common
# manipulation words so that paraphrases mostly stay in-vocabulary. Anything else maps to <unk>.
DEFAULT_VOCABULARY = (
    # simroll's task templates and objects
    "pick up the and lift it gently put on green target squeeze firmly but carefully "
    "sponge tofu foam cylinder dumpling "
    # general manipulation language
    "a an to of in into onto from with at off over under near by then place move push pull "
    "grasp grab hold release drop open close press lower raise slide rotate turn stack "
    "left right front back top bottom middle center side red blue yellow white black orange "
    "soft hard slowly quickly lightly gentle firm careful without crushing damaging breaking "
    "object cube ball box block table bowl plate cup tray goal zone area marker"
).split()


@PreTrainedConfig.register_subclass("simvla")
@dataclass
class SimVLAConfig(AdamWCosinePresets, PreTrainedConfig):
    """SimVLA: patch tokens of each camera, tactile tokens, a proprioception token and the
    tokenized instruction form the context of a small transformer; a flow-matching action expert
    (pi0-style) denoises an action chunk of ``chunk_size`` steps while attending to it.

    Inputs are the dataset features named in ``input_features`` (set by the trainer): camera
    images (``observation.images.*``, square, side divisible by ``patch_size``), the flattened
    tactile force maps ``tactile_feature`` of shape ``tactile_shape``, ``observation.state`` and the
    batch's ``task`` strings, and ``following_error_feature`` when a dataset has it (the hand and
    jaw commands' lead over the measured pose: what a pressing hand or squeezing jaw hides from
    ``observation.state``). Tactile forces are not normalized with dataset statistics (many
    taxels are never touched in demonstrations, so their std is ~0); the model compresses them
    with ``log1p(force / tactile_force_scale)`` instead. Any other input feature (such as
    ``observation.tactile_markers`` or ``observation.environment_state`` of a ``simroll collect``
    dataset) is dropped from ``input_features`` when the policy is built.

    ``ignored_state`` names entries of ``observation.state`` (:data:`simroll.features.STATE_NAMES`)
    that the model never reads (their columns are left out before the state token is made). A
    vision-only ablation drops the tactile feature *and* ``grip_force_left``/``grip_force_right``,
    the per-finger totals of the tactile maps that proprioception otherwise carries.
    """

    # Input / output structure.
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

    # Vision: a strided conv stem turns each camera image into one token per patch (16 px patches:
    # 4 x 4 tokens per 64 px camera; 8 px patches give 8 x 8 tokens at ~2.5x the training cost).
    patch_size: int = 16
    stem_channels: int = 32
    keep_visual_tokens: int | None = None  # per camera; None keeps all (acceleration knob)

    # Touch.
    tactile_feature: str = TACTILE_KEY
    tactile_shape: tuple[int, int, int] = (FINGERS, *TAXEL_GRID)  # fingers, rows, columns
    tactile_tokens: str = "finger"  # "finger": one token per finger; "row": one per taxel row
    tactile_force_scale: float = 0.01

    # Proprioception: entries of observation.state (STATE_NAMES) the model leaves out.
    ignored_state: list[str] = field(default_factory=list)
    # The controllers' following error (commanded minus measured hand pose and jaw opening), one
    # token when it is an input; divided by these scales (m, m, m, rad, m) instead of dataset
    # statistics, which are near zero for a dataset of clean expert motion.
    following_error_feature: str = FOLLOWING_ERROR_KEY
    following_error_scale: tuple[float, ...] = (0.005, 0.005, 0.005, 0.05, 0.01)

    # Language: a word-level tokenizer over a fixed vocabulary (ids 0 = <pad>, 1 = <unk>).
    vocabulary: list[str] = field(default_factory=lambda: list(DEFAULT_VOCABULARY))
    max_instruction_tokens: int = 16

    # Transformer.
    dim_model: int = 128
    n_heads: int = 4
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    ffn_multiplier: int = 4
    dropout: float = 0.0

    # Flow matching (openpi conventions: t=1 is noise, t=0 the action chunk).
    num_flow_steps: int = 10
    # Inference-only: scale of the Gaussian noise the flow starts from. 1 samples the learned
    # action distribution; below 1 leans towards its central mode (0: one deterministic chunk per
    # observation, so the policy's rollout is a function of the episode's spec alone).
    noise_scale: float = 1.0
    # Inference-only: draw this many chunks from independent starting noise (one batched flow)
    # and act on their mean, an estimate of the conditional mean action that narrows the
    # sampling scatter at the cost of blending modes; 1 acts on one sample.
    num_action_samples: int = 1
    # Inference-only: ACT's temporal ensembling (LeRobot's ACTTemporalEnsembler). With
    # n_action_steps 1, each step's action is the weighted mean of what every chunk still covering
    # that step predicted for it, weight exp(-coeff * i) with i = 0 for the oldest; None: off.
    temporal_ensemble_coeff: float | None = None
    time_sampling_beta_alpha: float = 1.5
    time_sampling_beta_beta: float = 1.0
    time_sampling_scale: float = 0.999
    time_sampling_offset: float = 0.001
    min_period: float = 4e-3
    max_period: float = 4.0

    # Inference-only: quantize every nn.Linear to int8 (dynamic) after loading the weights.
    quantize_int8: bool = False

    # Training-only: weight of an auxiliary loss in which a small head on the encoded context
    # predicts the table position (x, y) of the task's visible target (the SoftPlace disc), in
    # units of ``goal_loss_scale`` metres; 0 builds no head. The trainer supplies the labels
    # (``simroll.train.goal_labels``); the actions never read the head.
    goal_loss_weight: float = 0.0
    goal_loss_scale: float = 0.1
    # Training: the decoder reads the goal head's estimate (needs goal_loss_weight > 0); a
    # fine-tune may add it to a checkpoint without it (its input map starts at zero).
    goal_conditioning: bool = False
    # What that conditioning reads: "estimate" (the goal head's, from the images), "label" (the
    # task's true target: the trainer's labels, and at inference the env's target, which
    # ``load_policy`` passes in) or "label_offset" (that target minus the hand's observed x, y,
    # which the head then also predicts). The labels are privileged, like ManiSkill's
    # ``goal_pos``: they measure how much placing depends on locating the target.
    goal_source: str = "estimate"

    # Training presets.
    optimizer_lr: float = 3e-4
    optimizer_betas: tuple[float, float] = (0.9, 0.95)
    optimizer_eps: float = 1e-8
    optimizer_weight_decay: float = 1e-4
    optimizer_grad_clip_norm: float = 1.0
    scheduler_warmup_steps: int = 200
    scheduler_decay_steps: int = 30_000
    scheduler_decay_lr: float = 3e-5

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check()

    def check(self) -> None:
        """Raise ``ValueError`` for inconsistent values (also run when a policy is built, after
        inference overrides have been applied with ``setattr``)."""
        positive = {
            "chunk_size": self.chunk_size,
            "n_action_steps": self.n_action_steps,
            "num_flow_steps": self.num_flow_steps,
            "num_action_samples": self.num_action_samples,
            "n_obs_steps": self.n_obs_steps,
            "dim_model": self.dim_model,
            "n_heads": self.n_heads,
            "n_decoder_layers": self.n_decoder_layers,
            "max_instruction_tokens": self.max_instruction_tokens,
            "stem_channels": self.stem_channels,
        }
        for name, value in positive.items():
            if not is_int(value, 1):
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if self.n_encoder_layers < 0:
            raise ValueError(f"n_encoder_layers must be >= 0, got {self.n_encoder_layers!r}")
        if self.n_action_steps > self.chunk_size:
            raise ValueError(
                f"n_action_steps ({self.n_action_steps}) must be <= chunk_size ({self.chunk_size})"
            )
        if isinstance(self.noise_scale, bool) or not (
            isinstance(self.noise_scale, int | float) and self.noise_scale >= 0
        ):
            raise ValueError(f"noise_scale must be a number >= 0, got {self.noise_scale!r}")
        for name in ("goal_loss_weight", "goal_loss_scale"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (isinstance(value, int | float) and value >= 0):
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        if not self.goal_loss_scale > 0:
            raise ValueError(f"goal_loss_scale must be > 0, got {self.goal_loss_scale!r}")
        if not isinstance(self.goal_conditioning, bool):
            raise ValueError(
                f"goal_conditioning must be true or false, got {self.goal_conditioning!r}"
            )
        if self.goal_source not in GOAL_SOURCES:
            raise ValueError(
                f"goal_source must be one of {list(GOAL_SOURCES)}, got {self.goal_source!r}"
            )
        if self.goal_source != "estimate" and not self.goal_conditioning:
            raise ValueError(
                f"goal_source={self.goal_source!r} feeds the target to the decoder: it needs "
                "goal_conditioning=true"
            )
        if self.goal_conditioning and not self.goal_loss_weight > 0:
            raise ValueError(
                "goal_conditioning needs the goal head it reads: set goal_loss_weight > 0 "
                f"(got {self.goal_loss_weight!r})"
            )
        if self.temporal_ensemble_coeff is not None:
            if isinstance(self.temporal_ensemble_coeff, bool) or not isinstance(
                self.temporal_ensemble_coeff, int | float
            ):
                raise ValueError(
                    "temporal_ensemble_coeff must be None or a number, got "
                    f"{self.temporal_ensemble_coeff!r}"
                )
            if self.n_action_steps != 1:
                raise ValueError(
                    "temporal_ensemble_coeff needs n_action_steps 1 (a new chunk every step), got "
                    f"n_action_steps={self.n_action_steps}"
                )
        if self.dim_model % self.n_heads or self.dim_model % 2:
            raise ValueError(
                f"dim_model ({self.dim_model}) must be even and divisible by n_heads "
                f"({self.n_heads})"
            )
        if self.patch_size < 8 or self.patch_size & (self.patch_size - 1):
            raise ValueError(f"patch_size must be a power of two >= 8, got {self.patch_size!r}")
        if self.keep_visual_tokens is not None and (
            not isinstance(self.keep_visual_tokens, int) or self.keep_visual_tokens < 1
        ):
            raise ValueError(
                f"keep_visual_tokens must be None or an integer >= 1, got "
                f"{self.keep_visual_tokens!r}"
            )
        if self.tactile_tokens not in ("row", "finger"):
            raise ValueError(
                f"tactile_tokens must be 'row' or 'finger', got {self.tactile_tokens!r}"
            )
        if not self.tactile_force_scale > 0:
            raise ValueError(f"tactile_force_scale must be > 0, got {self.tactile_force_scale!r}")
        unknown = [name for name in self.ignored_state if name not in STATE_NAMES]
        if unknown or len(set(self.ignored_state)) != len(self.ignored_state):
            raise ValueError(
                f"ignored_state must name distinct entries of observation.state, got "
                f"{list(self.ignored_state)!r}; expected names from {list(STATE_NAMES)}"
            )
        if len(set(self.vocabulary)) != len(self.vocabulary):
            raise ValueError("vocabulary has repeated words")

    # ------------------------------------------------------------------ LeRobot protocol
    def reads(self, key: str, feature: PolicyFeature) -> bool:
        """Whether the model reads input feature ``key``: camera images, ``observation.state``,
        ``tactile_feature`` and ``following_error_feature``."""
        if feature.type is FeatureType.VISUAL:
            return True
        return feature.type is FeatureType.STATE and key in (
            OBS_STATE,
            self.tactile_feature,
            self.following_error_feature,
        )

    def drop_unread_features(self) -> list[str]:
        """Remove the input features the model does not read and return their keys.

        ``lerobot-train`` gives a new policy every ``observation.*`` feature of its dataset
        (``make_policy``); a ``simroll collect`` dataset also holds ``observation.tactile_markers``
        (and, in state mode, ``observation.environment_state``). Like LeRobot's own policies,
        SimVLA leaves them out; unlike them it also drops them from ``input_features``, so its
        processors do not normalize them and the saved config does not ask an env for them.
        """
        features = self.input_features or {}
        unread = [key for key, feature in features.items() if not self.reads(key, feature)]
        if unread:
            self.input_features = {
                key: feature for key, feature in features.items() if key not in unread
            }
            logger.info(
                "SimVLA reads camera images, %s and %s; ignoring the input features %s",
                OBS_STATE,
                self.tactile_feature,
                unread,
            )
        return unread

    def validate_features(self) -> None:
        """Drop the input features the model does not read (:meth:`drop_unread_features`), then
        check the rest against what the model can read (called when it is built)."""
        self.drop_unread_features()
        images = self.image_features
        if not images and self.robot_state_feature is None:
            raise ValueError(
                "SimVLA needs at least one camera image or observation.state as input, got "
                f"{sorted(self.input_features or {})}"
            )
        if len({tuple(feature.shape) for feature in images.values()}) > 1:
            shapes = {key: tuple(feature.shape) for key, feature in images.items()}
            raise ValueError(f"SimVLA needs all camera images of one shape, got {shapes}")
        for key, feature in images.items():
            channels, height, width = feature.shape
            if channels != 3 or height != width or height % self.patch_size:
                raise ValueError(
                    f"{key} must be a square RGB image with a side divisible by patch_size "
                    f"{self.patch_size}, got shape {tuple(feature.shape)}"
                )
            if (
                self.keep_visual_tokens is not None
                and self.keep_visual_tokens > (height // self.patch_size) ** 2
            ):
                raise ValueError(
                    f"keep_visual_tokens ({self.keep_visual_tokens}) exceeds the "
                    f"{(height // self.patch_size) ** 2} patch tokens of {key}"
                )
        tactile = (self.input_features or {}).get(self.tactile_feature)
        if tactile is not None:
            expected = self.tactile_shape[0] * self.tactile_shape[1] * self.tactile_shape[2]
            if tuple(tactile.shape) != (expected,):
                raise ValueError(
                    f"{self.tactile_feature} must have shape ({expected},) for tactile_shape "
                    f"{tuple(self.tactile_shape)}, got {tuple(tactile.shape)}"
                )
        following = (self.input_features or {}).get(self.following_error_feature)
        if following is not None and tuple(following.shape) != (len(FOLLOWING_ERROR_NAMES),):
            raise ValueError(
                f"{self.following_error_feature} must have shape ({len(FOLLOWING_ERROR_NAMES)},) "
                f"({list(FOLLOWING_ERROR_NAMES)}), got {tuple(following.shape)}"
            )
        if len(self.following_error_scale) != len(FOLLOWING_ERROR_NAMES) or not all(
            isinstance(scale, int | float) and scale > 0 for scale in self.following_error_scale
        ):
            raise ValueError(
                f"following_error_scale must be {len(FOLLOWING_ERROR_NAMES)} numbers > 0, got "
                f"{self.following_error_scale!r}"
            )
        if self.action_feature is None:
            raise ValueError("SimVLA needs an 'action' output feature")

    @property
    def observation_delta_indices(self) -> list[int] | None:
        """The observation steps a training sample holds: the last ``n_obs_steps`` frames."""
        return list(range(1 - self.n_obs_steps, 1)) if self.n_obs_steps > 1 else None

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.chunk_size))

    @property
    def reward_delta_indices(self) -> None:
        return None
