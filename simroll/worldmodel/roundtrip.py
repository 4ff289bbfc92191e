"""Rollouts with a trust signal: the round-trip discrepancy C_i of a bidirectional world model.

Roll the model forward ``i`` steps from ``z_0`` under actions ``a_0 .. a_{i-1}``, then backward
``i`` steps from the prediction ``z_i`` under the same actions in reverse; ``C_i`` is the RMS
distance (in the standardized latent) between where the round trip lands and ``z_0``.
``C_0 = 0`` by definition. Needing no ground truth, ``C_i`` is available at deployment and
tracks the unobservable forward error ``E_i`` (the RMS distance between the prediction ``z_i``
and the true latent), which :mod:`simroll.worldmodel.calibrate` turns into an error estimate
with intervals.

Every rollout of :class:`RoundTripWorldModel` returns a :class:`TrustedRollout` carrying ``C_i``
(and, with a calibrator, the predicted error, its intervals and where to abstain). A future that
some other model imagined (a WAM's latent future, decoded to this state space) is scored the same
way by :meth:`RoundTripWorldModel.trust_of_future`: the backward model walks it home.

Sampling noise is a per-step table drawn from the rollout seed and shared by every rollout in a
batch, so a rollout's result does not depend on what else is batched with it.

``C_i`` can be averaged over several backward samples (``samples``; geometric mean, since
``C_i`` spans orders of magnitude): each walks the same forward prediction home with its own
noise seed, so the average scores that one prediction, with less of the backward sampler's own
luck in it. It costs ``samples`` times the backward steps; ``samples=1`` is the plain round trip.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.numpy import load_file
from safetensors.numpy import save as safetensors_bytes

from simroll.io import write_bytes_atomic
from simroll.worldmodel.calibrate import RoundTripCalibrator
from simroll.worldmodel.latent import StateLatent
from simroll.worldmodel.model import DiffusionWorldModel

SAMPLE_SEED_STRIDE = 7919  # seed step between the backward samples of one round trip
DISTANCE_FLOOR = 1e-12  # keeps the geometric mean of C_i finite when a walk lands exactly home


def rms(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """RMS distance over the last axis."""
    return np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2, axis=-1))


def noise_table(seed: int, steps: int, dim: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(int(seed))
    return torch.randn((steps, dim), generator=generator)


def rollout_latents(
    model: DiffusionWorldModel,
    start: np.ndarray,
    actions: np.ndarray,
    direction: str = "forward",
    seed: int = 0,
) -> np.ndarray:
    """Autoregressive rollout ``(B, H + 1, L)`` from ``start (B, L)`` under ``actions (B, H, A)``.

    Backward, ``actions[:, k]`` is the action that led into the state at step ``k`` of the
    rollout, i.e. the forward actions in reverse order.
    """
    start = np.asarray(start, dtype=np.float32)
    actions = np.asarray(actions, dtype=np.float32)
    if start.ndim != 2 or actions.ndim != 3 or len(start) != len(actions):
        raise ValueError(
            f"start must be (B, L) and actions (B, H, A); got {start.shape} and {actions.shape}"
        )
    horizon, dim = actions.shape[1], start.shape[1]
    noise = noise_table(seed, horizon, dim)
    latent = torch.as_tensor(start)
    out = [latent]
    for k in range(horizon):
        latent = model.step(latent, torch.as_tensor(actions[:, k]), direction, noise=noise[k])
        out.append(latent)
    return torch.stack(out, dim=1).numpy().astype(np.float64)


def roundtrip_discrepancy(
    model: DiffusionWorldModel,
    start: np.ndarray,
    future: np.ndarray,
    actions: np.ndarray,
    depths: Sequence[int] | None = None,
    seed: int = 1,
    samples: int = 1,
) -> np.ndarray:
    """``C (B, H + 1)``: walk each future point ``future[:, i - 1]`` back ``i`` steps to ``start``.

    ``future (B, H, L)`` holds the predicted latents at steps 1..H (from this model or any other);
    ``actions (B, H, A)`` the forward actions. Depths not in ``depths`` are NaN; ``C_0 = 0``.
    With ``samples > 1``, ``C_i`` is the geometric mean over that many backward walks, with
    seeds ``seed + SAMPLE_SEED_STRIDE * k`` (the first is the single-sample round trip).
    """
    return combine_walks(roundtrip_walks(model, start, future, actions, depths, seed, samples))


def combine_walks(walks: np.ndarray) -> np.ndarray:
    """Geometric mean over the first axis (backward walks); exact zeros (``C_0``) stay zero."""
    walks = np.asarray(walks, dtype=np.float64)
    if len(walks) == 1:
        return walks[0].copy()  # one walk: exactly the plain round trip
    combined = np.exp(np.log(np.maximum(walks, DISTANCE_FLOOR)).mean(axis=0))
    return np.where(np.all(walks == 0.0, axis=0), 0.0, combined)


def roundtrip_walks(
    model: DiffusionWorldModel,
    start: np.ndarray,
    future: np.ndarray,
    actions: np.ndarray,
    depths: Sequence[int] | None = None,
    seed: int = 1,
    samples: int = 1,
) -> np.ndarray:
    """The single-walk discrepancies ``(samples, B, H + 1)`` behind ``roundtrip_discrepancy``."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    future = np.asarray(future, dtype=np.float64)
    horizon = future.shape[1]
    depths = range(1, horizon + 1) if depths is None else depths
    result = np.full((samples, len(start), horizon + 1), np.nan)
    result[:, :, 0] = 0.0
    for depth in depths:
        if not 1 <= depth <= horizon:
            raise ValueError(f"round-trip depth must be in [1, {horizon}], got {depth}")
        back_actions = np.asarray(actions)[:, :depth][:, ::-1]
        for k in range(samples):
            back = rollout_latents(
                model,
                future[:, depth - 1],
                back_actions,
                "backward",
                seed + SAMPLE_SEED_STRIDE * k,
            )
            result[k, :, depth] = rms(back[:, -1], start)
    return result


@dataclass
class TrustedRollout:
    """A world-model rollout and its trust signal, per rollout ``b`` and depth ``i = 0..H``."""

    latents: np.ndarray  # (B, H + 1, L), the start included
    states: np.ndarray  # (B, H + 1, F), decoded
    roundtrip_error: np.ndarray  # (B, H + 1): C_i
    predicted_error: np.ndarray | None = None  # (B, H + 1), calibrated estimate of E_i
    interval_68: np.ndarray | None = None  # (B, H + 1, 2)
    interval_95: np.ndarray | None = None
    abstain: np.ndarray | None = None  # (B, H + 1) True where the prediction is not trusted

    @property
    def trusted_horizon(self) -> np.ndarray:
        """Per rollout, the number of steps before the first abstention (H if none)."""
        if self.abstain is None:
            return np.full(len(self.latents), self.latents.shape[1] - 1)
        flagged = self.abstain[:, 1:]
        return np.where(flagged.any(axis=1), flagged.argmax(axis=1), flagged.shape[1])

    def log_rows(self) -> list[dict[str, Any]]:
        """One JSON-able trust row per rollout, for logs beside the rollout's consumer."""
        rows = []
        for b in range(len(self.latents)):
            row: dict[str, Any] = {
                "roundtrip_error": _finite_list(self.roundtrip_error[b]),
                "trusted_horizon": int(self.trusted_horizon[b]),
            }
            if self.predicted_error is not None:
                row["predicted_error"] = _finite_list(self.predicted_error[b])
                row["interval_68"] = [_finite_list(x) for x in self.interval_68[b].T]
                row["interval_95"] = [_finite_list(x) for x in self.interval_95[b].T]
            rows.append(row)
        return rows


def _finite_list(values: np.ndarray) -> list[float | None]:
    return [round(float(v), 6) if np.isfinite(v) else None for v in values]


class RoundTripWorldModel:
    """Latent map + bidirectional diffusion model (+ calibrator): rollouts that carry C_i.

    ``abstain_above`` is a threshold on the calibrated predicted error (latent RMS units): a
    prediction whose estimate exceeds it is flagged (selective prediction). ``roundtrip_samples``
    backward walks are averaged per ``C_i`` (the calibrator must have been fitted on ``C_i``
    computed the same way; the saved model keeps the two together).
    """

    def __init__(
        self,
        latent: StateLatent,
        model: DiffusionWorldModel,
        calibrator: RoundTripCalibrator | None = None,
        abstain_above: float | None = None,
        roundtrip_samples: int = 1,
    ):
        if not model.config.bidirectional:
            raise ValueError("round-trip trust needs a model trained in both directions")
        if abstain_above is not None and calibrator is None:
            raise ValueError("abstain_above needs a calibrator (it thresholds predicted error)")
        if roundtrip_samples < 1:
            raise ValueError(f"roundtrip_samples must be >= 1, got {roundtrip_samples}")
        self.latent, self.model = latent, model
        self.calibrator, self.abstain_above = calibrator, abstain_above
        self.roundtrip_samples = int(roundtrip_samples)

    def rollout(
        self,
        states: np.ndarray,
        actions: np.ndarray,
        seed: int = 0,
        depths: Sequence[int] | None = None,
    ) -> TrustedRollout:
        """Roll ``states (B, F)`` forward under ``actions (B, H, 5)``, with the trust signal.

        ``depths`` limits which C_i are computed (all by default: H (H + 1) / 2 extra backward
        steps; ``[H]`` costs one extra rollout).
        """
        start = self.latent.encode(states)
        latents = rollout_latents(self.model, start, actions, "forward", seed)
        return self._trusted(start, latents, actions, depths, seed)

    def trust_of_future(
        self,
        states: np.ndarray,
        future_states: np.ndarray,
        actions: np.ndarray,
        seed: int = 0,
        depths: Sequence[int] | None = None,
    ) -> TrustedRollout:
        """Trust signal for a future ``(B, H, F)`` imagined by another model (e.g. a WAM).

        The backward model walks each imagined state home under the same actions; a future
        that this system's dynamics cannot connect to the start gets a large C_i.
        """
        start = self.latent.encode(states)
        future = self.latent.encode(future_states)
        latents = np.concatenate([start[:, None], future], axis=1)
        return self._trusted(start, latents, actions, depths, seed)

    def _trusted(self, start, latents, actions, depths, seed) -> TrustedRollout:
        discrepancy = roundtrip_discrepancy(
            self.model, start, latents[:, 1:], actions, depths, seed + 1, self.roundtrip_samples
        )
        result = TrustedRollout(latents, self.latent.decode(latents), discrepancy)
        if self.calibrator is not None:
            depth = np.broadcast_to(np.arange(latents.shape[1]), discrepancy.shape)
            estimate = self.calibrator.predict(discrepancy, depth)
            result.predicted_error = estimate
            result.interval_68 = np.stack(self.calibrator.interval(discrepancy, depth, 0.68), -1)
            result.interval_95 = np.stack(self.calibrator.interval(discrepancy, depth, 0.95), -1)
            if self.abstain_above is not None:
                # a depth whose C_i was not computed inherits the last computed verdict
                flagged = np.where(np.isnan(estimate), False, estimate > self.abstain_above)
                result.abstain = np.maximum.accumulate(flagged, axis=1)
        return result

    # -------------------------------------------------------------- persistence
    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        extra: dict[str, Any] = {
            "abstain_above": self.abstain_above,
            "roundtrip_samples": self.roundtrip_samples,
        }
        if self.calibrator is not None:
            extra["calibrator"] = self.calibrator.to_dict()
        self.model.save(directory, extra)
        write_bytes_atomic(
            directory / "latent.safetensors", safetensors_bytes(self.latent.tensors())
        )
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> RoundTripWorldModel:
        directory = Path(directory)
        model = DiffusionWorldModel.load(directory)
        latent = StateLatent.from_tensors(load_file(str(directory / "latent.safetensors")))
        config = json.loads((directory / "config.json").read_text())
        calibrator = (
            RoundTripCalibrator.from_dict(config["calibrator"]) if "calibrator" in config else None
        )
        return cls(
            latent,
            model,
            calibrator,
            config.get("abstain_above"),
            int(config.get("roundtrip_samples", 1)),
        )
