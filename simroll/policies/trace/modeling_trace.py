"""The TRACE student (LeRobot type ``trace_student``): plan-conditioned, recurrent, primitives.

Per observation step, every block becomes a token: its last detection (position, heading, masked
until first seen), ``visible``, ``staleness``, ``seen``; where the twin's plan puts it now (at
``plan_step``) and over the next ``plan_horizon`` steps; its drift from the plan (detection minus
plan, where seen); and whether it is the target. A two-layer MLP embeds the tokens and a
token-set encoder pools them (mean, max and the target's own embedding). Global features join
them: proprioception, progress along the plan, the plan's length, the current and next planned
primitives (one-hot), the hand's offset from the detected target and, when the checkpoint reads
``observation.grasp_check``, the grasp primitive's own check on the detections (a clear yaw or
not, its room, the least pad overlap). A trunk and a GRU over the
last ``n_obs_steps`` steps give the logits of the 18 primitives; training minimises the
cross-entropy to the labelled primitive (the teacher's, in behaviour cloning and DAgger).
``select_action`` keeps the last ``n_obs_steps`` observations itself and returns the most likely
primitive.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import torch
import torch.nn.functional as F
from lerobot.policies.pretrained import PreTrainedPolicy
from lerobot.utils.constants import ACTION, OBS_STATE
from torch import Tensor, nn

from simroll.features import GRASP_CHECK_KEY, GRASP_PRIMITIVE, OBJECTS_KEY, PLAN_KEYS
from simroll.policies.trace.configuration_trace import TraceStudentConfig

OBJECT_FIELDS = 7  # x, y, z, yaw, visible, staleness, seen (simroll.envs.clutter.retrieve)
POSE_FIELDS = 4  # x, y, z, yaw
STALENESS_SCALE = 10.0
GRASP_CHECK_SCALE = (1.0, 100.0, 1e4)  # clear flag, room in cm, pad overlap in cm^2


def _steps(value: Tensor) -> Tensor:
    """(B, T, F) from a batch entry of (B, T), (B, T, F) or a single step (B, F) / (B,)."""
    if value.dim() == 1:
        value = value[:, None]
    if value.dim() == 2:
        value = value[..., None]
    return value.float()


class TraceStudentModel(nn.Module):
    def __init__(self, config: TraceStudentConfig):
        super().__init__()
        self.config = config
        horizon = config.plan_horizon
        token_in = 14 + 2 * horizon
        self.primitive_classes = config.n_primitives + 1  # the plan's -1 padding is a class
        # the grasp check on the detections, when the checkpoint reads it (older ones do not)
        self.reads_grasp_check = GRASP_CHECK_KEY in config.input_features
        global_in = 12 + 2 + 2 + (horizon + 1) * self.primitive_classes
        global_in += 3 if self.reads_grasp_check else 0
        width = config.token_dim
        self.token_mlp = nn.Sequential(
            nn.Linear(token_in, width), nn.GELU(), nn.Linear(width, width), nn.GELU()
        )
        self.global_mlp = nn.Sequential(nn.Linear(global_in, width), nn.GELU())
        self.trunk = nn.Sequential(
            nn.Linear(4 * width, config.trunk_dim),
            nn.GELU(),
            nn.Dropout(config.dropout),
            nn.Linear(config.trunk_dim, config.trunk_dim),
            nn.GELU(),
        )
        self.gru = nn.GRU(config.trunk_dim, config.gru_dim, batch_first=True)
        self.head = nn.Linear(config.gru_dim, config.n_primitives)

    def features(self, batch: dict[str, Any]) -> tuple[Tensor, Tensor]:
        """Block tokens (B, T, blocks, F) and global features (B, T, G)."""
        config = self.config
        objects = _steps(batch[OBJECTS_KEY])
        b, t = objects.shape[:2]
        objects = objects.reshape(b, t, config.n_blocks, OBJECT_FIELDS)
        poses = _steps(batch[PLAN_KEYS["plan_poses"]]).reshape(
            b, t, config.max_plan, config.n_blocks, POSE_FIELDS
        )
        primitives = _steps(batch[PLAN_KEYS["plan_primitives"]]).reshape(b, t, config.max_plan)
        length = _steps(batch[PLAN_KEYS["plan_length"]]).reshape(b, t)
        step = _steps(batch[PLAN_KEYS["plan_step"]]).reshape(b, t)
        state = _steps(batch[OBS_STATE])

        offsets = torch.arange(config.plan_horizon + 1, device=objects.device)
        index = (step.long()[..., None] + offsets).clamp(0, config.max_plan - 1)  # (B, T, H+1)
        gathered = torch.gather(
            poses,
            2,
            index[..., None, None].expand(-1, -1, -1, config.n_blocks, POSE_FIELDS),
        )  # (B, T, H+1, blocks, 4)
        now, ahead = gathered[:, :, 0], gathered[:, :, 1:]
        seen = objects[..., 6:7]
        detected = objects[..., :2] * seen
        heading = objects[..., 3]
        target = torch.zeros(b, t, config.n_blocks, 1, device=objects.device)
        target[:, :, 0] = 1.0
        tokens = torch.cat(
            [
                detected,
                torch.stack([heading.sin(), heading.cos()], dim=-1) * seen,
                objects[..., 4:5],
                (objects[..., 5:6] / STALENESS_SCALE).clamp(0.0, 3.0),
                seen,
                now[..., :2],
                torch.stack([now[..., 3].sin(), now[..., 3].cos()], dim=-1),
                ahead[..., :2].permute(0, 1, 3, 2, 4).reshape(b, t, config.n_blocks, -1),
                (objects[..., :2] - now[..., :2]) * seen,
                target,
            ],
            dim=-1,
        )
        planned = torch.gather(primitives, 2, index).long()
        planned = torch.where(planned < 0, config.n_primitives, planned)
        one_hot = F.one_hot(planned, self.primitive_classes).float().reshape(b, t, -1)
        progress = (step / length.clamp_min(1.0)).clamp(0.0, 2.0)
        hand_to_target = (objects[..., 0, :2] - state[..., :2]) * objects[..., 0, 6:7]
        parts = [
            state[..., :12],
            progress[..., None],
            (length / config.max_plan)[..., None],
            hand_to_target,
            one_hot,
        ]
        if self.reads_grasp_check:
            check = _steps(batch[GRASP_CHECK_KEY]).reshape(b, t, 3)
            parts.append(check * check.new_tensor(GRASP_CHECK_SCALE))
        return tokens, torch.cat(parts, dim=-1)

    def forward(self, batch: dict[str, Any]) -> Tensor:
        """Primitive logits (B, n_primitives) after the last observation step."""
        tokens, global_features = self.features(batch)
        embedded = self.token_mlp(tokens)  # (B, T, blocks, W)
        pooled = torch.cat(
            [embedded.mean(dim=2), embedded.max(dim=2).values, embedded[:, :, 0]], dim=-1
        )
        hidden = self.trunk(torch.cat([pooled, self.global_mlp(global_features)], dim=-1))
        out, _ = self.gru(hidden)
        return self.head(out[:, -1])


class TraceStudentPolicy(PreTrainedPolicy):
    """The student with LeRobot's verbs (``reset``, ``select_action``, ``forward``)."""

    config_class = TraceStudentConfig
    name = "trace_student"
    discrete_actions = True  # its action is a primitive index, not a point in [-1, 1]^d

    def __init__(self, config: TraceStudentConfig, **kwargs: Any):
        super().__init__(config)
        config.validate_features()
        self.config = config
        self.model = TraceStudentModel(config)
        if config.grasp_gate and not self.model.reads_grasp_check:
            raise ValueError(
                f"grasp_gate needs {GRASP_CHECK_KEY} among the input features; this "
                f"checkpoint reads {sorted(config.input_features)}"
            )
        self.reset()

    def get_optim_params(self):
        return self.parameters()

    def reset(self) -> None:
        """Call whenever the environment is reset: forgets the observation history."""
        self._history: deque[dict[str, Tensor]] = deque(maxlen=self.config.n_obs_steps)

    def _stacked(self, batch: dict[str, Any]) -> dict[str, Tensor]:
        step = {key: batch[key] for key in self.config.input_features}
        if not self._history:  # the first observation fills the history, as in training
            self._history.extend([step] * self.config.n_obs_steps)
        else:
            self._history.append(step)
        # one step is (B, F) (a scalar feature (B,) or (B, 1)): stack to (B, T, F)
        return {
            key: torch.stack([s[key].reshape(s[key].shape[0], -1) for s in self._history], dim=1)
            for key in step
        }

    def choose(self, logits: Tensor, batch: dict[str, Any]) -> Tensor:
        """The primitive (B,) from the logits after a stacked observation history: the most
        likely one; with ``grasp_gate`` the grasp only where the last observation's
        ``grasp_check`` finds a clear yaw or the travel budget pays for no more push (the plan's
        pushes plus ``budget_spare_pushes``, one per step so far), else the most
        likely other primitive. The gate is the grasp primitive's own precondition, read from
        the detections the student sees: the network learns when to grasp from a labeller that
        judges by the true state, which a check on the detections cannot always follow."""
        choice = logits.argmax(dim=-1)
        if not self.config.grasp_gate:
            return choice
        check = batch[GRASP_CHECK_KEY][:, -1].reshape(logits.shape[0], -1)
        length = batch[PLAN_KEYS["plan_length"]][:, -1].reshape(-1).float()
        step = batch[PLAN_KEYS["plan_step"]][:, -1].reshape(-1).float()
        spent = step >= length - 1 + self.config.budget_spare_pushes
        allowed = (check[:, 0] > 0.5) | spent
        others = logits.clone()
        others[:, GRASP_PRIMITIVE] = -torch.inf
        return torch.where((choice == GRASP_PRIMITIVE) & ~allowed, others.argmax(dim=-1), choice)

    @torch.no_grad()
    def predict_action_chunk(self, batch: dict[str, Any], **kwargs: Any) -> Tensor:
        """The chosen primitive (B, 1, 1) from a stacked observation history."""
        self.eval()
        return self.choose(self.model(batch), batch).float()[:, None, None]

    @torch.no_grad()
    def select_action(self, batch: dict[str, Any], **kwargs: Any) -> Tensor:
        """The next primitive (B, 1) from this observation and the ones before it."""
        if self.training:
            self.eval()
        stacked = self._stacked(batch)
        return self.choose(self.model(stacked), stacked).float()[:, None]

    def forward(self, batch: dict[str, Any]) -> tuple[Tensor, dict[str, float]]:
        """Cross-entropy of the logits against the labelled primitive."""
        logits = self.model(batch)
        target = batch[ACTION].reshape(logits.shape[0], -1)[:, -1].round().long()
        loss = F.cross_entropy(logits, target)
        accuracy = (logits.argmax(dim=-1) == target).float().mean()
        return loss, {"accuracy": float(accuracy)}
