"""Physics variations: every preset runs, shifts never leak into the next episode, hardware
shifts act where they should (encoder offset on the reading, actuation bias on the hand)."""

from __future__ import annotations

import numpy as np
import pytest

from simroll.envs.scene import compile_model
from simroll.envs.variations import VARIATIONS, Variation, resolve_variation
from tests.envs.helpers import assert_identical

VARIED_FIELDS = (
    "body_mass",
    "body_inertia",
    "geom_friction",
    "flex_friction",
    "flex_stiffness",
    "light_diffuse",
    "light_specular",
    "cam_pos",
)
ZERO_ACTION = np.zeros(5, dtype=np.float32)


def model_fields(env) -> dict[str, np.ndarray]:
    model = env.unwrapped.model
    fields = {name: getattr(model, name).copy() for name in VARIED_FIELDS}
    fields["headlight_diffuse"] = model.vis.headlight.diffuse.copy()
    fields["headlight_ambient"] = model.vis.headlight.ambient.copy()
    return fields


@pytest.mark.parametrize("name", sorted(VARIATIONS))
def test_every_preset_resets_and_steps(make_env, name):
    env = make_env("SoftLift")
    obs, info = env.reset(seed=0, options={"variation": name})
    assert env.unwrapped.variation is VARIATIONS[name]
    obs, *_, info = env.step(ZERO_ACTION)
    assert env.observation_space.contains(obs)
    assert info["termination_reason"] is None


@pytest.mark.parametrize(
    "name",
    ["heavy_x2.5", "slippery_x0.6", "dim_x0.5", "bright_x2", "camera_shift", "stiff_x2"],
)
def test_default_reset_restores_the_authored_model_exactly(make_env, name):
    fresh = make_env("SoftPlace")
    fresh_obs, _ = fresh.reset(seed=5)
    env = make_env("SoftPlace")
    env.reset(seed=5, options={"variation": name})
    shifted = model_fields(env)
    for _ in range(5):
        env.step(np.array([0.3, -0.2, -0.5, 0.1, 0.4], dtype=np.float32))
    obs, _ = env.reset(seed=5, options={"variation": "default"})
    authored = model_fields(fresh)
    assert any(not np.array_equal(shifted[key], authored[key]) for key in authored), name
    assert_identical(model_fields(env), authored)
    assert_identical(obs, fresh_obs)


def test_a_variation_never_touches_the_shared_compiled_model(make_env):
    shared = compile_model("sponge", False, 1.0)
    before = {name: getattr(shared, name).copy() for name in VARIED_FIELDS}
    env = make_env("SoftLift")
    env.reset(seed=0, options={"variation": "heavy_x2.5"})
    env.reset(seed=0, options={"variation": "slippery_x0.6"})
    assert env.unwrapped.model is not shared
    for name, value in before.items():
        assert np.array_equal(getattr(shared, name), value), name


def test_stiffness_variation_recompiles_with_scaled_flex_stiffness(make_env):
    env = make_env("SoftLift")
    env.reset(seed=0)
    authored = env.unwrapped.model.flex_stiffness.copy()
    env.reset(seed=0, options={"variation": "stiff_x2"})
    stiff = env.unwrapped.model.flex_stiffness
    assert env.unwrapped.loaded_young_scale == 2.0
    np.testing.assert_allclose(stiff, 2.0 * authored, rtol=1e-6, atol=1e-9)
    env.reset(seed=0, options={"variation": "soft_x0.5"})
    np.testing.assert_allclose(
        env.unwrapped.model.flex_stiffness, 0.5 * authored, rtol=1e-6, atol=1e-9
    )


def test_encoder_offset_shifts_the_reading_but_not_the_hand(make_env):
    plain, shifted = make_env("SoftLift"), make_env("SoftLift", variation="encoder_offset")
    offset = np.asarray(VARIATIONS["encoder_offset"].encoder_offset)
    observations = [(plain.reset(seed=2)[0], shifted.reset(seed=2)[0])]
    for _ in range(3):
        observations.append((plain.step(ZERO_ACTION)[0], shifted.step(ZERO_ACTION)[0]))
    for obs_plain, obs_shifted in observations:
        reading = obs_shifted["agent_pos"][:4] - obs_plain["agent_pos"][:4]
        np.testing.assert_allclose(reading, offset, atol=1e-6)
        np.testing.assert_array_equal(obs_shifted["agent_pos"][4:], obs_plain["agent_pos"][4:])
    assert np.array_equal(plain.unwrapped.hand_pose(), shifted.unwrapped.hand_pose())
    assert np.array_equal(plain.unwrapped.hand_target(), shifted.unwrapped.hand_target())


def test_actuation_bias_moves_the_true_hand(make_env):
    plain, shifted = make_env("SoftLift"), make_env("SoftLift", variation="actuation_bias")
    plain.reset(seed=2)
    shifted.reset(seed=2)
    for _ in range(4):
        plain.step(ZERO_ACTION)
        shifted.step(ZERO_ACTION)
    bias = np.asarray(VARIATIONS["actuation_bias"].actuation_bias)
    moved = shifted.unwrapped.hand_pose() - plain.unwrapped.hand_pose()
    np.testing.assert_allclose(moved, bias, atol=2e-4)
    # the commanded target (what the policy controls) is the same; only the hardware is off
    assert np.array_equal(plain.unwrapped.hand_target(), shifted.unwrapped.hand_target())


def test_variation_passed_to_the_constructor_is_the_default_for_resets(make_env):
    env = make_env("SoftLift", variation={"mass_scale": 2.0, "light_scale": 0.5})
    env.reset(seed=0)
    assert env.unwrapped.variation == Variation("custom", mass_scale=2.0, light_scale=0.5)
    env.reset(seed=0, options={"variation": "default"})
    assert env.unwrapped.variation is VARIATIONS["default"]
    env.reset(seed=0)
    assert env.unwrapped.variation.name == "custom"


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ("wobbly", ValueError, "unknown variation 'wobbly'"),
        ({"spin": 1.0}, ValueError, "unknown variation fields ['spin']"),
        ({"friction_scale": float("nan")}, ValueError, "friction_scale must be a finite number"),
        ({"camera_offset": (0.0, 1.0)}, ValueError, "camera_offset must be 3 finite numbers"),
        (3.0, TypeError, "variation must be a name, Variation or dict, got float"),
    ],
)
def test_bad_variations_are_rejected_with_the_bad_value(value, error, message):
    with pytest.raises(error) as raised:
        resolve_variation(value)
    assert message in str(raised.value)
