"""Measuring how well C_i tracks the true rollout error, on windows cut from held-out episodes.

A *window* is a start state of a recorded trajectory and the ``depth`` actions that followed it.
For each window the model rolls forward under the recorded actions (prediction ``z_i``), the
round trip gives ``C_i``, and the recorded states give the true error ``E_i`` (RMS in the
standardized latent) and its physical counterpart (RMS vertex error in millimetres against the
simulator's raw vertices, the PCA truncation included). A sampling-dispersion baseline (the
spread of a few forward rollouts with different noise seeds) is computed beside it.

Statistics come from scipy: Spearman's rank correlation, and the AUROC as the Mann-Whitney U
statistic divided by the number of pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from simroll.worldmodel.data import SplitData, vertex_positions
from simroll.worldmodel.latent import StateLatent
from simroll.worldmodel.model import DiffusionWorldModel
from simroll.worldmodel.roundtrip import combine_walks, rms, rollout_latents, roundtrip_walks


@dataclass
class Windows:
    start: np.ndarray  # (W, L) encoded start states
    actions: np.ndarray  # (W, D, A)
    latents: np.ndarray  # (W, D + 1, L) encoded true states
    states: np.ndarray  # (W, D + 1, F) raw true states
    episode: np.ndarray  # (W,) trajectory index within the split
    step: np.ndarray  # (W,) start step within the trajectory

    def __len__(self) -> int:
        return len(self.start)


def make_windows(split: SplitData, latent: StateLatent, depth: int, stride: int) -> Windows:
    """Every ``stride``-th start of every trajectory long enough for ``depth`` steps."""
    parts: dict[str, list] = {k: [] for k in ("actions", "latents", "states", "episode", "step")}
    for index, trajectory in enumerate(split.trajectories):
        length = len(trajectory.actions)
        encoded = latent.encode(trajectory.states)
        for s in range(0, length - depth + 1, stride):
            parts["actions"].append(trajectory.actions[s : s + depth])
            parts["latents"].append(encoded[s : s + depth + 1])
            parts["states"].append(trajectory.states[s : s + depth + 1])
            parts["episode"].append(index)
            parts["step"].append(s)
    if not parts["actions"]:
        raise ValueError(f"split {split.name!r} has no trajectory of at least {depth} steps")
    arrays = {k: np.array(v) for k, v in parts.items()}
    return Windows(start=arrays["latents"][:, 0], **arrays)


@dataclass
class WindowResults:
    predicted: np.ndarray  # (W, D + 1, L) forward rollout
    roundtrip: np.ndarray  # (W, D + 1) C_i
    error: np.ndarray  # (W, D + 1) E_i, latent RMS
    vertex_error_mm: np.ndarray  # (W, D + 1) physical E_i
    dispersion: np.ndarray | None = None  # (W, D + 1) sampling-dispersion baseline
    roundtrip_single: np.ndarray | None = None  # (W, D + 1) C_i of the first backward walk alone


def evaluate_windows(
    model: DiffusionWorldModel,
    latent: StateLatent,
    windows: Windows,
    seed: int = 0,
    with_roundtrip: bool = True,
    dispersion_samples: int = 0,
    batch: int = 512,
    roundtrip_samples: int = 1,
) -> WindowResults:
    """Forward rollouts, C_i (bidirectional models) and true errors for every window.

    ``roundtrip_samples`` backward walks are averaged per C_i (see ``roundtrip_discrepancy``).
    """
    chunks = []
    for lo in range(0, len(windows), batch):
        part = slice(lo, lo + batch)
        start, actions = windows.start[part], windows.actions[part]
        predicted = rollout_latents(model, start, actions, "forward", seed)
        if with_roundtrip:
            walks = roundtrip_walks(
                model, start, predicted[:, 1:], actions, seed=seed + 1, samples=roundtrip_samples
            )
            roundtrip = combine_walks(walks)
            single = walks[0]
        else:
            roundtrip = single = np.full(predicted.shape[:2], np.nan)
        dispersion = None
        if dispersion_samples > 1:
            samples = [
                rollout_latents(model, start, actions, "forward", seed + 1000 + k)
                for k in range(dispersion_samples)
            ]
            dispersion = np.sqrt(np.stack(samples).var(axis=0, ddof=1).mean(axis=-1))
        chunks.append((predicted, roundtrip, dispersion, single))
    predicted = np.concatenate([c[0] for c in chunks])
    roundtrip = np.concatenate([c[1] for c in chunks])
    dispersion = np.concatenate([c[2] for c in chunks]) if dispersion_samples > 1 else None
    single = np.concatenate([c[3] for c in chunks])
    vertices = len(latent.shape_mean) // 3
    true_points = vertex_positions(windows.states, vertices)
    predicted_points = vertex_positions(latent.decode(predicted), vertices)
    vertex_error = 1000 * np.sqrt(((predicted_points - true_points) ** 2).sum(-1).mean(-1))
    return WindowResults(
        predicted, roundtrip, rms(predicted, windows.latents), vertex_error, dispersion, single
    )


# ------------------------------------------------------------------------- statistics
def spearman(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.ravel(a), np.ravel(b)
    keep = np.isfinite(a) & np.isfinite(b)
    if keep.sum() < 3 or np.ptp(a[keep]) == 0 or np.ptp(b[keep]) == 0:
        return float("nan")
    return float(stats.spearmanr(a[keep], b[keep]).statistic)


def within_trajectory_spearman(
    score: np.ndarray, error: np.ndarray, episode: np.ndarray, min_windows: int = 5
) -> dict[str, float]:
    """Spearman across the windows of each trajectory at one depth; mean and std over them."""
    values = [
        spearman(score[episode == e], error[episode == e])
        for e in np.unique(episode)
        if (episode == e).sum() >= min_windows
    ]
    values = [v for v in values if np.isfinite(v)]
    if not values:
        return {"mean": float("nan"), "std": float("nan"), "trajectories": 0}
    return {
        "mean": float(np.mean(values)),
        "std": float(np.std(values)),
        "trajectories": len(values),
    }


def auroc(in_distribution: np.ndarray, out_of_distribution: np.ndarray) -> float:
    """P(score of an OOD sample > score of an ID sample), ties counted half."""
    a = np.ravel(out_of_distribution)
    b = np.ravel(in_distribution)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) == 0 or len(b) == 0:
        return float("nan")
    u = stats.mannwhitneyu(a, b, alternative="two-sided").statistic
    return float(u / (len(a) * len(b)))


def selective_error(
    score: np.ndarray, error: np.ndarray, coverage: float, seed: int = 0
) -> dict[str, float]:
    """Keep the ``coverage`` fraction with the lowest ``score`` (ties broken at random).

    Returns the mean error kept and its reduction relative to keeping everything.
    """
    score, error = np.ravel(score), np.ravel(error)
    keep_count = int(round(coverage * len(score)))
    tie_break = np.random.default_rng(seed).random(len(score))
    order = np.lexsort((tie_break, score))
    kept = error[order[:keep_count]]
    overall = float(error.mean())
    return {
        "mean_error_kept": float(kept.mean()),
        "mean_error_all": overall,
        "error_reduction": float(1 - kept.mean() / overall),
    }
