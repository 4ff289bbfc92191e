"""A conditional latent diffusion model that steps the dynamics forward or backward in time.

One network, one direction flag: given the current latent ``z``, the action ``a`` and the
direction ``d`` (+1 forward, -1 backward), it samples the latent one control step (50 ms) away.
Forward, ``a`` is the action applied at ``z``; backward, it is the action that led into ``z``.
The network denoises the standardized latent *increment* (``(z' - z) / delta_std``), so a system
that barely moves is a near-identity map and both directions share one scale.

The denoiser is a small residual MLP over ``[noisy increment, z, a, d, timestep embedding]``.
Training noise follows diffusers' ``DDPMScheduler``; sampling uses ``DDIMScheduler`` with
``eta = 0`` and a few steps, started from noise drawn from a seeded generator, so a rollout is a
deterministic function of its inputs and seed and a round trip is reproducible. A forward-only
specialist is the same class with ``directions=("forward",)``.

Weights are stored with safetensors (``model.safetensors``) beside ``config.json``; never pickled.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from diffusers import DDIMScheduler, DDPMScheduler
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes
from torch import nn

from simroll.features import ACTION_DIM
from simroll.io import write_bytes_atomic, write_json_atomic

FORWARD, BACKWARD = 1.0, -1.0
DIRECTIONS = {"forward": FORWARD, "backward": BACKWARD}


@dataclass(frozen=True)
class WorldModelConfig:
    latent_dim: int
    action_dim: int = ACTION_DIM
    hidden: int = 256
    blocks: int = 3
    time_embed: int = 32
    directions: tuple[str, ...] = ("forward", "backward")
    train_timesteps: int = 100
    inference_steps: int = 10
    prediction_type: str = "sample"
    beta_schedule: str = "squaredcos_cap_v2"

    def __post_init__(self) -> None:
        unknown = set(self.directions) - set(DIRECTIONS)
        if not self.directions or unknown:
            raise ValueError(f"directions must be a non-empty subset of {sorted(DIRECTIONS)}")
        if not 1 <= self.inference_steps <= self.train_timesteps:
            raise ValueError(
                f"inference_steps must be in [1, train_timesteps={self.train_timesteps}], "
                f"got {self.inference_steps}"
            )

    @property
    def bidirectional(self) -> bool:
        return len(self.directions) == 2


class _ResidualBlock(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.SiLU(), nn.Linear(2 * width, width)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.net(x)


def timestep_embedding(timesteps: torch.Tensor, dim: int, max_period: float = 1000.0):
    half = dim // 2
    frequencies = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    angles = timesteps.float()[:, None] * frequencies[None]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)


class Denoiser(nn.Module):
    """Residual MLP: (noisy increment, timestep, latent, action, direction) -> prediction."""

    def __init__(self, config: WorldModelConfig):
        super().__init__()
        self.config = config
        inputs = 2 * config.latent_dim + config.action_dim + 1 + config.time_embed
        self.inp = nn.Linear(inputs, config.hidden)
        self.blocks = nn.Sequential(*[_ResidualBlock(config.hidden) for _ in range(config.blocks)])
        self.out = nn.Sequential(
            nn.LayerNorm(config.hidden), nn.Linear(config.hidden, config.latent_dim)
        )

    def forward(self, noisy, timesteps, latent, action, direction) -> torch.Tensor:
        embedding = timestep_embedding(timesteps, self.config.time_embed)
        features = torch.cat([noisy, latent, action, direction[:, None], embedding], dim=-1)
        return self.out(self.blocks(self.inp(features)))


class DiffusionWorldModel(nn.Module):
    """Denoiser + increment scale + schedulers; ``step`` samples one control step."""

    def __init__(self, config: WorldModelConfig, delta_std: np.ndarray | None = None):
        super().__init__()
        self.config = config
        self.denoiser = Denoiser(config)
        scale = np.ones(config.latent_dim) if delta_std is None else np.asarray(delta_std)
        if scale.shape != (config.latent_dim,) or not np.all(scale > 0):
            raise ValueError(f"delta_std must be {config.latent_dim} positive numbers")
        self.register_buffer("delta_std", torch.as_tensor(scale, dtype=torch.float32))
        schedule = dict(
            num_train_timesteps=config.train_timesteps,
            beta_schedule=config.beta_schedule,
            prediction_type=config.prediction_type,
            clip_sample=False,
        )
        self.train_scheduler = DDPMScheduler(**schedule)
        self.sample_scheduler = DDIMScheduler(**schedule, set_alpha_to_one=True)
        self.sample_scheduler.set_timesteps(config.inference_steps)

    # -------------------------------------------------------------- training
    def loss(self, latent, action, target_latent, direction) -> torch.Tensor:
        """Denoising loss for transitions ``latent -> target_latent`` in ``direction`` (+1/-1)."""
        clean = (target_latent - latent) / self.delta_std
        noise = torch.randn_like(clean)
        timesteps = torch.randint(0, self.config.train_timesteps, (len(clean),))
        noisy = self.train_scheduler.add_noise(clean, noise, timesteps)
        prediction = self.denoiser(noisy, timesteps, latent, action, direction)
        kind = self.config.prediction_type
        if kind == "epsilon":
            target = noise
        elif kind == "sample":
            target = clean
        else:
            target = self.train_scheduler.get_velocity(clean, noise, timesteps)
        return nn.functional.mse_loss(prediction, target)

    # -------------------------------------------------------------- sampling
    @torch.no_grad()
    def step(
        self,
        latent: torch.Tensor,
        action: torch.Tensor,
        direction: str | float,
        noise: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Sample the latent one control step forward or backward (DDIM, ``eta = 0``).

        ``noise`` is the starting sample, ``(L,)`` (shared by the batch) or ``(B, L)``; drawn
        from torch's global generator when omitted.
        """
        sign = DIRECTIONS[direction] if isinstance(direction, str) else float(direction)
        name = "forward" if sign > 0 else "backward"
        if name not in self.config.directions:
            raise ValueError(f"this model was trained for {self.config.directions}, not {name}")
        latent = torch.as_tensor(latent, dtype=torch.float32)
        action = torch.as_tensor(action, dtype=torch.float32)
        flag = torch.full((len(latent),), sign)
        if noise is None:
            noise = torch.randn(latent.shape)
        sample = torch.broadcast_to(torch.as_tensor(noise, dtype=torch.float32), latent.shape)
        scheduler = self.sample_scheduler
        for t in scheduler.timesteps:
            timesteps = torch.full((len(latent),), int(t), dtype=torch.long)
            output = self.denoiser(sample, timesteps, latent, action, flag)
            sample = scheduler.step(output, t, sample, eta=0.0).prev_sample
        return latent + sample * self.delta_std

    # -------------------------------------------------------------- persistence
    def save(self, directory: str | Path, extra: dict | None = None) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().contiguous() for k, v in self.state_dict().items()}
        write_bytes_atomic(directory / "model.safetensors", safetensors_bytes(tensors))
        config = {"world_model": asdict(self.config), **(extra or {})}
        write_json_atomic(directory / "config.json", config)
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> DiffusionWorldModel:
        directory = Path(directory)
        config = json.loads((directory / "config.json").read_text())["world_model"]
        config["directions"] = tuple(config["directions"])
        model = cls(WorldModelConfig(**config))
        model.load_state_dict(load_file(str(directory / "model.safetensors")))
        model.eval()
        return model


# ------------------------------------------------------------------------- training loop
@dataclass(frozen=True)
class TrainConfig:
    steps: int = 5000
    batch_size: int = 256
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    condition_noise: float = 0.01  # std of noise on the conditioning latent (rollout robustness)
    seed: int = 0


def train_world_model(
    model: DiffusionWorldModel,
    latents: np.ndarray,
    actions: np.ndarray,
    next_latents: np.ndarray,
    config: TrainConfig = TrainConfig(),
    log: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """Fit ``model`` on transitions ``latents[i] --actions[i]--> next_latents[i]``.

    A bidirectional model sees each sampled transition in a random direction (half forward, half
    backward); a specialist sees only its own. Returns timing and the final loss.
    """
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    z = torch.as_tensor(latents, dtype=torch.float32)
    a = torch.as_tensor(actions, dtype=torch.float32)
    z_next = torch.as_tensor(next_latents, dtype=torch.float32)
    signs = torch.tensor([DIRECTIONS[d] for d in model.config.directions])
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
    )
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=config.learning_rate, total_steps=config.steps, pct_start=0.05
    )
    model.train()
    start = time.perf_counter()
    running = 0.0
    for step in range(config.steps):
        index = torch.as_tensor(rng.integers(0, len(z), config.batch_size))
        direction = signs[torch.randint(0, len(signs), (config.batch_size,))]
        forward = (direction > 0)[:, None]
        source = torch.where(forward, z[index], z_next[index])
        target = torch.where(forward, z_next[index], z[index])
        if config.condition_noise > 0:
            jitter = config.condition_noise * torch.randn_like(source)
            source, target = source + jitter, target + jitter  # same increment, noisier start
        loss = model.loss(source, a[index], target, direction)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        running = 0.98 * running + 0.02 * loss.item() if step else loss.item()
        if log is not None and (step + 1) % max(1, config.steps // 10) == 0:
            log(f"step {step + 1}/{config.steps} loss {running:.4f}")
    model.eval()
    return {"train_s": time.perf_counter() - start, "final_loss": running, "steps": config.steps}
