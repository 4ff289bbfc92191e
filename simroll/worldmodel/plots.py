"""Figures of the round-trip study (matplotlib, Agg): what the README shows.

* ``roundtrip_scatter.png``: C_i against the true error E_i on held-out and shifted windows at a
  few depths, with the calibrator's median line and 95% band;
* ``roundtrip_depth.png``: mean E_i and C_i against depth (held-out vs shifted), and the forward
  error of the bidirectional model against the forward-only specialist;
* ``roundtrip_selective.png``: mean incurred error against coverage when abstaining on the
  calibrated C_i, on depth alone, and on the true error (oracle);
* ``roundtrip_trajectory.png``: C_D and E_D along the start times of one held-out episode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from simroll.io import atomic_path  # noqa: E402
from simroll.worldmodel.calibrate import RoundTripCalibrator  # noqa: E402

COLORS = {
    "test": "tab:blue",
    "ood_soft": "tab:orange",
    "ood_stiff": "tab:red",
    "ood_very_soft": "tab:purple",
    "ood_heavy": "tab:brown",
    "ood_tofu": "tab:green",
}


def make_figures(
    directory: Path, evals: dict[str, Any], calibrator: RoundTripCalibrator, results: dict
) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    test = evals["test"]
    depth = test.bidirectional.error.shape[1] - 1
    shown = [name for name in evals if name == "test" or name.startswith("ood")]
    paths = []

    # C_i vs E_i at three depths
    picks = sorted({1, max(1, depth // 2), depth})
    fig, axes = plt.subplots(1, len(picks), figsize=(4.2 * len(picks), 3.8), sharey=True)
    for ax, i in zip(np.atleast_1d(axes), picks, strict=True):
        for name in shown:
            r = evals[name].bidirectional
            ax.scatter(
                r.roundtrip[:, i],
                r.error[:, i],
                s=6,
                alpha=0.5,
                color=COLORS.get(name, "tab:gray"),
                label=name,
            )
        c = np.geomspace(*np.nanpercentile(test.bidirectional.roundtrip[:, i], [0.5, 99.5]), 50)
        depth_grid = np.full_like(c, i)
        ax.plot(c, calibrator.predict(c, depth_grid), "k-", lw=1, label="calibrator")
        low, high = calibrator.interval(c, depth_grid, 0.95)
        ax.fill_between(c, low, high, color="k", alpha=0.1, label="95% interval")
        rho = results["correlation"]["fixed_depth_latent"][i]
        ax.set(
            xscale="log",
            yscale="log",
            xlabel=f"round-trip error C_{i}",
            title=f"depth {i} ({i * 50} ms): Spearman {rho:.2f}",
        )
    np.atleast_1d(axes)[0].set_ylabel("true forward error E_i (latent RMS)")
    np.atleast_1d(axes)[0].legend(fontsize=7, markerscale=2)
    fig.tight_layout()
    paths.append(_save(fig, directory / "roundtrip_scatter.png"))

    # error and round trip against depth; bidirectional vs forward-only
    depths = np.arange(1, depth + 1)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name in shown:
        r = evals[name].bidirectional
        color = COLORS.get(name, "tab:gray")
        ax1.plot(depths, r.error[:, 1:].mean(0), "-", color=color, label=f"E_i {name}")
        ax1.plot(depths, r.roundtrip[:, 1:].mean(0), "--", color=color, label=f"C_i {name}")
    ax1.set(
        xlabel="depth i (control steps)",
        ylabel="mean (latent RMS)",
        yscale="log",
        title="true error and round-trip error",
    )
    ax1.legend(fontsize=7)
    acc = results["accuracy"]
    ax2.plot(
        depths,
        [acc["bidirectional_error"][int(i)] for i in depths],
        "o-",
        label="bidirectional (one model)",
    )
    ax2.plot(
        depths,
        [acc["forward_only_error"][int(i)] for i in depths],
        "s--",
        label="forward-only specialist",
    )
    ax2.set(
        xlabel="depth i (control steps)",
        ylabel="mean forward error E_i",
        title="forward accuracy on held-out windows",
    )
    ax2.legend(fontsize=8)
    fig.tight_layout()
    paths.append(_save(fig, directory / "roundtrip_depth.png"))

    # selective prediction curves (pooled windows x depths)
    c, e = test.bidirectional.roundtrip[:, 1:], test.bidirectional.error[:, 1:]
    grid = np.broadcast_to(depths, c.shape)
    coverages = np.linspace(0.05, 1.0, 40)
    fig, ax = plt.subplots(figsize=(5, 3.8))
    rng = np.random.default_rng(0)
    for label, score in (
        ("calibrated C_i", calibrator.predict(c, grid)),
        ("depth only", grid.astype(float) + 1e-3 * rng.random(grid.shape)),
        ("oracle (true error)", e),
    ):
        order = np.argsort(score.ravel(), kind="stable")
        sorted_error = e.ravel()[order]
        kept = [sorted_error[: max(1, int(round(f * len(order))))].mean() for f in coverages]
        ax.plot(coverages, kept, label=label)
    ax.axvline(results["selective"]["coverage"], color="gray", ls=":", lw=1)
    ax.set(
        xlabel="coverage (fraction of predictions kept)",
        ylabel="mean error kept",
        title="selective prediction",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(_save(fig, directory / "roundtrip_selective.png"))

    # one held-out trajectory: C_D and E_D along its start times
    episodes, counts = np.unique(test.windows.episode, return_counts=True)
    episode = episodes[np.argmax(counts)]
    mask = test.windows.episode == episode
    fig, ax = plt.subplots(figsize=(6, 3.4))
    steps = test.windows.step[mask]
    ax.plot(steps, test.bidirectional.error[mask, depth], "o-", label=f"true error E_{depth}")
    ax.plot(
        steps, test.bidirectional.roundtrip[mask, depth], "s--", label=f"round-trip error C_{depth}"
    )
    ax.set(
        xlabel="window start (control step)",
        ylabel="latent RMS",
        yscale="log",
        title=f"one held-out episode (depth {depth})",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(_save(fig, directory / "roundtrip_trajectory.png"))
    return paths


def _save(fig, path: Path) -> Path:
    with atomic_path(path) as temporary:
        fig.savefig(temporary, dpi=110)
    plt.close(fig)
    return path
