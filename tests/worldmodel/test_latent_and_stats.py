"""The PCA latent map, and the statistics the benchmark reports."""

from __future__ import annotations

import numpy as np
import pytest

from simroll.worldmodel.evaluate import auroc, selective_error, spearman, within_trajectory_spearman
from simroll.worldmodel.latent import StateLatent

LAYOUT = {"shape": slice(0, 12), "object_yaw": slice(12, 13), "hand_pose": slice(13, 17)}


def low_rank_states(n: int = 300, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    modes = rng.normal(size=(3, 12))
    shape = rng.normal(size=(n, 3)) @ modes * 0.01 + 0.05
    yaw = rng.normal(0, 0.2, size=(n, 1))
    hand = np.c_[rng.normal(0, 0.05, size=(n, 3)), rng.normal(0, 0.3, size=(n, 1))]
    return np.c_[shape, yaw, hand]


def test_pca_latent_is_exact_on_its_subspace_and_standardized():
    states = low_rank_states()
    latent = StateLatent.fit(states, LAYOUT, shape_components=3)
    z = latent.encode(states)
    assert z.shape == (300, 3 + 1 + 4)
    assert latent.explained_variance_ratio == pytest.approx(1.0)
    assert np.allclose(latent.decode(z), states, atol=1e-10)
    assert np.allclose(z.mean(0), 0, atol=1e-9)
    # one scale per unit group: the hand's x, y, z share it, its yaw has its own
    assert np.allclose(np.sqrt((z[:, 4:7] ** 2).mean(0).mean()), 1.0)
    assert np.sqrt((z[:, 7] ** 2).mean()) == pytest.approx(1.0)
    again = StateLatent.from_tensors(latent.tensors())
    assert np.allclose(again.encode(states), z)


def test_latent_drops_blocks_and_decodes_them_as_their_mean():
    states = low_rank_states()
    latent = StateLatent.fit(states, LAYOUT, shape_components=2, drop=("hand_pose",))
    assert latent.dim == 3
    decoded = latent.decode(latent.encode(states))
    assert np.allclose(decoded[:, 13:], states[:, 13:].mean(0))
    with pytest.raises(ValueError, match="drop"):
        StateLatent.fit(states, LAYOUT, drop=("shape",))
    with pytest.raises(ValueError, match="features"):
        latent.encode(states[:, :5])


def test_statistics():
    assert auroc(np.zeros(5), np.ones(5)) == 1.0
    assert auroc(np.ones(5), np.zeros(5)) == 0.0
    assert auroc(np.ones(5), np.ones(5)) == 0.5
    x = np.arange(10.0)
    assert spearman(x, x**3) == pytest.approx(1.0)
    assert np.isnan(spearman(x, np.ones(10)))
    within = within_trajectory_spearman(np.r_[x, x], np.r_[x, -x], np.r_[np.zeros(10), np.ones(10)])
    assert within["mean"] == pytest.approx(0.0) and within["std"] == pytest.approx(1.0)
    error = np.arange(1.0, 11.0)
    kept = selective_error(error, error, coverage=0.8)
    assert kept["mean_error_kept"] == pytest.approx(np.mean(error[:8]))
    assert selective_error(-error, error, coverage=0.8)["error_reduction"] < 0
