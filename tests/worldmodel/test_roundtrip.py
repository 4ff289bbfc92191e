"""Round trip, direction flag, reproducibility and the trust signal, on a tiny synthetic system.

The system is identity-like: ``z' = z + B a`` (nothing moves without an action), so a model that
learned it forward and backward must bring a round trip back to its start.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from simroll.worldmodel.calibrate import RoundTripCalibrator
from simroll.worldmodel.latent import StateLatent
from simroll.worldmodel.model import (
    DiffusionWorldModel,
    TrainConfig,
    WorldModelConfig,
    train_world_model,
)
from simroll.worldmodel.roundtrip import (
    SAMPLE_SEED_STRIDE,
    RoundTripWorldModel,
    rollout_latents,
    roundtrip_discrepancy,
    roundtrip_walks,
)

DIM, ACTIONS = 3, 2
B = np.array([[0.5, 0.0], [0.0, 0.5], [0.3, -0.3]])


def tiny_config(**overrides) -> WorldModelConfig:
    values = dict(
        latent_dim=DIM,
        action_dim=ACTIONS,
        hidden=64,
        blocks=1,
        time_embed=16,
        train_timesteps=50,
        inference_steps=5,
    )
    return WorldModelConfig(**{**values, **overrides})


@pytest.fixture(scope="module")
def trained() -> DiffusionWorldModel:
    rng = np.random.default_rng(0)
    z = rng.normal(size=(2000, DIM))
    a = rng.uniform(-1, 1, size=(2000, ACTIONS))
    model = DiffusionWorldModel(tiny_config(), delta_std=np.full(DIM, 0.4))
    train_world_model(
        model,
        z,
        a,
        z + a @ B.T,
        TrainConfig(steps=800, batch_size=128, learning_rate=3e-3, condition_noise=0.0),
    )
    return model


def random_windows(count: int, depth: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(count, DIM)) * 0.5, rng.uniform(-1, 1, size=(count, depth, ACTIONS))


def test_forward_then_backward_of_an_identity_like_system_returns_to_start(trained):
    start, actions = random_windows(64, 4)
    forward = rollout_latents(trained, start, actions, "forward", seed=0)
    truth = start + np.cumsum(actions @ B.T, axis=1)[:, -1]
    moved = np.sqrt(((truth - start) ** 2).mean(-1)).mean()
    back = rollout_latents(trained, forward[:, -1], actions[:, ::-1], "backward", seed=1)
    returned = np.sqrt(((back[:, -1] - start) ** 2).mean(-1)).mean()
    assert moved > 0.3
    assert returned < 0.1 * moved, (returned, moved)
    with torch.no_grad():
        still = trained.step(
            torch.tensor(start, dtype=torch.float32),
            torch.zeros(64, ACTIONS),
            "forward",
            noise=torch.zeros(DIM),
        )
    assert np.abs(still.numpy() - start).mean() < 0.05  # no action, no motion


def test_roundtrip_discrepancy_at_depth_zero_is_zero(trained):
    start, actions = random_windows(8, 3)
    forward = rollout_latents(trained, start, actions, "forward")
    c = roundtrip_discrepancy(trained, start, forward[:, 1:], actions)
    assert c.shape == (8, 4)
    assert np.all(c[:, 0] == 0.0)
    assert np.all(c[:, 1:] >= 0) and np.all(np.isfinite(c))


def test_averaged_roundtrip_is_the_geometric_mean_of_seeded_backward_walks(trained):
    start, actions = random_windows(8, 3)
    forward = rollout_latents(trained, start, actions, "forward")
    one = roundtrip_discrepancy(trained, start, forward[:, 1:], actions, seed=5)
    assert np.array_equal(
        one, roundtrip_discrepancy(trained, start, forward[:, 1:], actions, seed=5, samples=1)
    )
    walks = roundtrip_walks(trained, start, forward[:, 1:], actions, seed=5, samples=3)
    assert walks.shape == (3, 8, 4) and np.array_equal(walks[0], one)
    # walk k is the plain round trip with seed + k * SAMPLE_SEED_STRIDE
    third = roundtrip_discrepancy(
        trained, start, forward[:, 1:], actions, seed=5 + 2 * SAMPLE_SEED_STRIDE
    )
    assert np.allclose(walks[2], third)
    averaged = roundtrip_discrepancy(trained, start, forward[:, 1:], actions, seed=5, samples=3)
    assert np.all(averaged[:, 0] == 0.0)  # C_0 = 0 survives the average
    assert np.allclose(averaged[:, 1:], np.exp(np.log(walks[:, :, 1:]).mean(0)))
    assert np.all(averaged[:, 1:] >= walks[:, :, 1:].min(0) - 1e-12)
    assert np.all(averaged[:, 1:] <= walks[:, :, 1:].max(0) + 1e-12)
    # depths left out stay NaN
    partial = roundtrip_discrepancy(trained, start, forward[:, 1:], actions, [3], samples=2)
    assert np.all(np.isnan(partial[:, 1:3])) and np.all(np.isfinite(partial[:, 3]))
    with pytest.raises(ValueError, match="samples"):
        roundtrip_discrepancy(trained, start, forward[:, 1:], actions, samples=0)


def test_direction_flag_changes_the_prediction(trained):
    start, actions = random_windows(32, 1)
    z = torch.tensor(start, dtype=torch.float32)
    a = torch.tensor(actions[:, 0], dtype=torch.float32)
    noise = torch.zeros(DIM)
    forward = trained.step(z, a, "forward", noise=noise).numpy()
    backward = trained.step(z, a, "backward", noise=noise).numpy()
    expected = actions[:, 0] @ B.T
    assert np.abs((forward - backward) - 2 * expected).mean() < 0.1
    assert np.abs(forward - backward).mean() > 0.2
    # even untrained, the flag is an input that changes the output
    fresh = DiffusionWorldModel(tiny_config())
    assert not torch.allclose(
        fresh.step(z, a, "forward", noise=noise), fresh.step(z, a, "backward", noise=noise)
    )


def test_forward_only_specialist_refuses_to_step_backward():
    model = DiffusionWorldModel(tiny_config(directions=("forward",)))
    with pytest.raises(ValueError, match="backward"):
        model.step(torch.zeros(1, DIM), torch.zeros(1, ACTIONS), "backward")
    with pytest.raises(ValueError, match="both directions"):
        RoundTripWorldModel(_identity_latent(), model)


def test_rollouts_are_reproducible_and_survive_safetensors_save_and_load(trained, tmp_path):
    start, actions = random_windows(5, 3)
    first = rollout_latents(trained, start, actions, seed=7)
    assert np.array_equal(first, rollout_latents(trained, start, actions, seed=7))
    assert not np.array_equal(first, rollout_latents(trained, start, actions, seed=8))
    # a rollout does not depend on what else is in its batch
    assert np.allclose(
        first[:2], rollout_latents(trained, start[:2], actions[:2], seed=7), atol=1e-6
    )
    trained.save(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    loaded = DiffusionWorldModel.load(tmp_path)
    assert np.allclose(first, rollout_latents(loaded, start, actions, seed=7), atol=1e-6)


def _identity_latent() -> StateLatent:
    """A latent map over 2 'shape' features + 1 passed-through feature, no scaling."""
    rng = np.random.default_rng(0)
    states = rng.normal(size=(200, 3))
    layout = {"shape": slice(0, 2), "rest": slice(2, 3)}
    return StateLatent.fit(states, layout, shape_components=2)


def test_trust_signal_comes_with_every_rollout_and_abstains_past_the_threshold(trained):
    latent = _identity_latent()
    rng = np.random.default_rng(3)
    c = rng.lognormal(-2, 1, size=(500, 4))
    depth = np.broadcast_to(np.arange(1, 5), c.shape)
    e = c * np.exp(rng.normal(0, 0.2, size=c.shape))
    calibrator = RoundTripCalibrator.fit(c, depth, e)
    world = RoundTripWorldModel(latent, trained, calibrator, abstain_above=0.05)
    states = latent.decode(random_windows(6, 4)[0])
    actions = random_windows(6, 4)[1]
    trusted = world.rollout(states, actions, seed=0)
    assert trusted.latents.shape == (6, 5, DIM) and trusted.states.shape == (6, 5, 3)
    assert trusted.roundtrip_error.shape == (6, 5) and np.all(trusted.roundtrip_error[:, 0] == 0)
    low, high = trusted.interval_95[..., 0], trusted.interval_95[..., 1]
    assert np.all(low[:, 1:] <= trusted.predicted_error[:, 1:])
    assert np.all(trusted.predicted_error[:, 1:] <= high[:, 1:])
    # once a prediction is flagged, everything deeper is flagged too
    assert np.all(np.diff(trusted.abstain.astype(int), axis=1) >= 0)
    assert np.all(trusted.trusted_horizon <= 4)
    rows = trusted.log_rows()
    assert len(rows) == 6 and len(rows[0]["roundtrip_error"]) == 5
    # a future imagined elsewhere is scored by walking it home: our own future gives our C_i
    again = world.trust_of_future(states, trusted.states[:, 1:], actions, seed=0)
    assert np.allclose(again.roundtrip_error, trusted.roundtrip_error, atol=1e-4)


def test_trusted_rollouts_average_backward_walks_and_keep_the_setting_on_save(trained, tmp_path):
    latent = _identity_latent()
    states = latent.decode(random_windows(4, 3)[0])
    actions = random_windows(4, 3)[1]
    world = RoundTripWorldModel(latent, trained, roundtrip_samples=3)
    trusted = world.rollout(states, actions, seed=0)
    walks = roundtrip_walks(
        trained, trusted.latents[:, 0], trusted.latents[:, 1:], actions, seed=1, samples=3
    )
    assert np.allclose(trusted.roundtrip_error[:, 1:], np.exp(np.log(walks[:, :, 1:]).mean(0)))
    world.save(tmp_path)
    assert RoundTripWorldModel.load(tmp_path).roundtrip_samples == 3
    with pytest.raises(ValueError, match="roundtrip_samples"):
        RoundTripWorldModel(latent, trained, roundtrip_samples=0)
