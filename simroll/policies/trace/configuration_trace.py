"""Configuration of the TRACE student (LeRobot type ``trace_student``), the clutter family's
plan-conditioned recurrent policy.

``TraceStudentConfig`` is a LeRobot ``PreTrainedConfig`` registered as ``trace_student``, so
``simroll train policy=trace_student`` and LeRobot's own tools (through simroll's policy-type
registration) build it. It reads what the plan-conditioned clutter envs put in every observation,
as a ``simroll collect env=clutter`` dataset stores them: the partial object observation
(``observation.objects``), the fixed nominal plan (``observation.plan_primitives``,
``observation.plan_poses``, ``observation.plan_length``), the progress along it
(``observation.plan_step``) and proprioception (``observation.state``); it outputs one of the 18
primitives. It reads the last ``n_obs_steps`` observations (a GRU runs over them), and no feature
is normalized with dataset statistics: positions are in metres already, the rest are flags,
counts and indices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lerobot.configs import NormalizationMode, PreTrainedConfig
from lerobot.optim import AdamWConfig
from lerobot.utils.constants import OBS_STATE

from simroll.checks import is_int
from simroll.features import OBJECTS_KEY, PLAN_KEYS

REQUIRED_FEATURES = (OBJECTS_KEY, *PLAN_KEYS.values(), OBS_STATE)


@PreTrainedConfig.register_subclass("trace_student")
@dataclass
class TraceStudentConfig(PreTrainedConfig):
    """The student: per block a token (its detection with visibility and staleness, its pose in
    the plan now and over the next ``plan_horizon`` steps, its drift from the plan), pooled by a
    token-set encoder; global features (proprioception, progress, the next planned primitives);
    a trunk, a GRU over the last ``n_obs_steps`` observations, and primitive logits."""

    n_obs_steps: int = 8
    chunk_size: int = 1
    n_action_steps: int = 1
    n_primitives: int = 18
    n_blocks: int = 11
    max_plan: int = 16
    plan_horizon: int = 4
    token_dim: int = 64
    trunk_dim: int = 256
    gru_dim: int = 256
    dropout: float = 0.1
    # inference only: the grasp is taken only when the observation's grasp_check finds a clear
    # yaw, or when the travel budget leaves no push (see TraceStudentPolicy.choose); otherwise
    # the most likely push. Needs observation.grasp_check among the input features.
    grasp_gate: bool = False
    # whole 4 cm pushes TRACE's travel budget (plan length x 4 cm + 15 cm) pays for beyond the
    # plan's own pushes: its grasp's 4 cm and 15 cm more
    budget_spare_pushes: int = 4

    normalization_mapping: dict[str, NormalizationMode] = field(
        default_factory=lambda: {
            "STATE": NormalizationMode.IDENTITY,
            "ENV": NormalizationMode.IDENTITY,
            "ACTION": NormalizationMode.IDENTITY,
        }
    )

    optimizer_lr: float = 1e-3
    optimizer_weight_decay: float = 1e-4
    optimizer_grad_clip_norm: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("n_obs_steps", "plan_horizon", "token_dim", "trunk_dim", "gru_dim"):
            value = getattr(self, name)
            if not is_int(value, 1):
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not isinstance(self.grasp_gate, bool):
            raise ValueError(f"grasp_gate must be true or false, got {self.grasp_gate!r}")
        if not is_int(self.budget_spare_pushes, 0):
            raise ValueError(
                f"budget_spare_pushes must be an integer >= 0, got {self.budget_spare_pushes!r}"
            )
        if self.chunk_size != 1 or self.n_action_steps != 1:
            raise ValueError("the TRACE student chooses one primitive per step (chunk_size 1)")

    def get_optimizer_preset(self) -> AdamWConfig:
        return AdamWConfig(
            lr=self.optimizer_lr,
            weight_decay=self.optimizer_weight_decay,
            grad_clip_norm=self.optimizer_grad_clip_norm,
        )

    def get_scheduler_preset(self) -> None:
        return None

    def validate_features(self) -> None:
        missing = [key for key in REQUIRED_FEATURES if key not in self.input_features]
        if missing:
            raise ValueError(
                f"the TRACE student reads {list(REQUIRED_FEATURES)}; missing {missing} (record "
                "the dataset from a plan-conditioned clutter env: simroll collect env=clutter)"
            )

    @property
    def observation_delta_indices(self) -> list[int]:
        return list(range(1 - self.n_obs_steps, 1))

    @property
    def action_delta_indices(self) -> list[int]:
        return [0]

    @property
    def reward_delta_indices(self) -> None:
        return None
