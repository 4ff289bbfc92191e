"""Loading LeRobot checkpoints: env checks at load, the env a checkpoint records, and re-planning.

A checkpoint whose input shapes the env cannot give fails at load naming the feature, both
shapes and the env setting to change; ``policy=lerobot`` refuses keys ``load_policy`` does not
take; the env settings a checkpoint records (``simroll_env.json``) are applied to the env config
unless the command line sets them, and a contradicting command-line value is refused naming the
file.

``LeRobotPolicy`` skips work between re-plans without changing an action. For each shipped
checkpoint (diffusion with a two-step observation history, ACT and SimVLA with one), the wrapper
and a second copy of the same weights driven the plain LeRobot way (convert and normalize every
observation, ``select_action``, un-normalize every action) see the same observations and the same
sampling noise. Their actions must be identical, the wrapper must have skipped the observation on
most steps, and its forward-hook count of network evaluations must be chunks x denoising (flow)
steps.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig

from simroll.cli.common import ConfigError, env_config_from, policy_from
from simroll.policies.lerobot import PolicyLoadError, load_policy
from simroll.rollout.episode import EnvConfig
from simroll.rollout.records import EpisodeSpec, derive_seed
from tests.helpers import plain_lerobot_action

POLICIES = Path(__file__).resolve().parents[2] / "policies"
STATE = EnvConfig(obs_mode="state", gripper_mode="delta")
PIXELS = EnvConfig(obs_mode="full", image_size=64, gripper_mode="delta")
CASES = {  # checkpoint, env, inference overrides (the acceleration knobs change the chunking)
    "diffusion": ("diffusion_soft_lift", STATE, {}),
    "diffusion-denoise_2-chunk_15": (
        "diffusion_soft_lift",
        STATE,
        {"num_inference_steps": 2, "n_action_steps": 15},
    ),
    "act": ("act_soft_lift", STATE, {}),
    "vla": ("vla_soft", PIXELS, {}),
    "vla-chunk_10": ("vla_soft", PIXELS, {"n_action_steps": 10, "num_flow_steps": 2}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_skipping_queued_steps_gives_the_same_actions(case):
    name, env_config, overrides = CASES[case]
    spec = EpisodeSpec("SoftLift", "tofu", "default", derive_seed("soft", "SoftLift", 0), 0)
    env = env_config.make(spec)
    try:
        obs, _ = env.reset(seed=spec.seed)
        fast = load_policy(env, path=POLICIES / name, overrides=overrides)
        plain = load_policy(env, path=POLICIES / name, overrides=overrides)
        converted = 0
        batch = fast.batch

        def counted(obs):
            nonlocal converted
            converted += 1
            return batch(obs)

        fast.batch = counted
        fast.reset()
        plain.policy.reset()

        steps = 40
        for step in range(steps):
            torch.manual_seed(step)
            action = fast.select_action(obs)
            torch.manual_seed(step)
            np.testing.assert_array_equal(
                action, plain_lerobot_action(plain, obs), err_msg=f"step {step}"
            )
            obs, *_ = env.step(action)
        chunk_steps = fast.policy.config.n_action_steps
        history = getattr(fast.policy.config, "n_obs_steps", 1)
        assert converted <= steps * min(history, chunk_steps) / chunk_steps + history, converted
        # the forward hook counts what the network ran: chunks x denoising or flow steps, the
        # same for the plain LeRobot loop (its module carries the other wrapper's hook)
        config = fast.policy.config
        if config.type == "diffusion":
            per_chunk = config.num_inference_steps or config.num_train_timesteps
        else:
            per_chunk = config.num_flow_steps if config.type == "simvla" else 1
        expected = math.ceil(steps / chunk_steps) * per_chunk
        assert fast.network_evaluations == plain.network_evaluations == expected
        fast.reset()
        assert fast.network_evaluations == 0
        chunk = fast.predict_action_chunk(obs)  # diffusion: its history filled with obs
        assert chunk.shape[0] >= chunk_steps and chunk.shape[1:] == (5,)
        assert fast.network_evaluations == per_chunk
    finally:
        env.close()


def test_an_image_of_another_size_fails_at_load_naming_feature_shapes_and_fix():
    spec = EpisodeSpec("SoftLift", "tofu", "default", derive_seed("soft", "SoftLift", 0), 0)
    env = EnvConfig(obs_mode="full", image_size=96, gripper_mode="delta").make(spec)
    try:
        with pytest.raises(PolicyLoadError) as error:
            load_policy(env, POLICIES / "vla_soft")
    finally:
        env.close()
    message = str(error.value)
    assert "observation.images.scene of shape (3, 64, 64) but this env gives (3, 96, 96)" in message
    assert "env.image_size=64" in message


@pytest.mark.slow
def test_noise_seed_gives_another_reproducible_noise_stream_for_the_same_episode():
    """A stochastic policy's sampling noise is fixed by the episode's seed; noise_seed moves it
    to another stream, the same on every run, and 0 leaves it alone."""
    from simroll.rollout.episode import run_episode
    from simroll.rollout.runner import make_specs

    (spec,) = make_specs("soft", ["SoftLift"], ["tofu"], ["default"], 1)
    env = STATE.make(spec)

    def actions(noise_seed: int) -> list[np.ndarray]:
        seen: list[np.ndarray] = []

        def factory(env):
            policy = load_policy(env, POLICIES / "diffusion_soft_lift", noise_seed=noise_seed)
            select = policy.select_action
            policy.select_action = lambda obs: seen.append(select(obs)) or seen[-1]
            return policy

        run_episode(spec, factory, env=env)
        return seen

    try:
        plain, again, other, other_again = actions(0), actions(0), actions(3), actions(3)
        assert all(np.array_equal(a, b) for a, b in zip(plain, again, strict=True))
        assert all(np.array_equal(a, b) for a, b in zip(other, other_again, strict=True))
        assert not np.array_equal(plain[0], other[0])  # the first chunk is sampled anew
        with pytest.raises(PolicyLoadError, match="noise_seed must be an integer"):
            load_policy(env, POLICIES / "diffusion_soft_lift", noise_seed=1.5)
    finally:
        env.close()


def test_load_policy_takes_no_unknown_keyword():
    spec = EpisodeSpec("SoftLift", "tofu", "default", 0, 0)
    env = STATE.make(spec)
    try:
        with pytest.raises(TypeError, match="devcie"):
            load_policy(env, POLICIES / "act_soft_lift", devcie="cuda")
    finally:
        env.close()


@pytest.fixture
def composed():
    """Compose the ``simroll eval`` config with overrides, as the running Hydra app sees it (its
    HydraConfig set, and cleared after the test)."""
    from simroll.cli import schema  # noqa: F401 - the typed eval config
    from simroll.cli.eval import CONFIG_DIR

    def compose_eval(*overrides: str):
        with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
            cfg = compose("eval", list(overrides), return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        return cfg

    yield compose_eval
    HydraConfig.instance().cfg = None


@pytest.mark.parametrize("policy", ["policy=vla", "policy.path=policies/vla_soft"])
def test_eval_takes_obs_mode_image_size_and_gripper_from_the_checkpoint(composed, policy):
    overrides = ["policy=lerobot", policy] if policy.startswith("policy.path") else [policy]
    cfg = composed(*overrides)
    assert (cfg.env.obs_mode, cfg.env.image_size) == ("state", 96)  # the env group's values
    env_config = env_config_from(cfg.env, cfg.policy)
    assert (env_config.obs_mode, env_config.image_size, env_config.gripper_mode) == (
        "full",
        64,
        "delta",
    )
    assert cfg.env.image_size == 64  # the run's recorded config says what ran


def test_a_command_line_env_value_contradicting_the_checkpoint_is_refused(composed):
    cfg = composed("policy=vla", "env.image_size=96")
    with pytest.raises(ConfigError) as error:
        env_config_from(cfg.env, cfg.policy)
    message = str(error.value)
    assert "env.image_size=96" in message and "simroll_env.json" in message
    assert "image_size=64" in message
    agreeing_cfg = composed("policy=vla", "env.image_size=64")
    agreeing = env_config_from(agreeing_cfg.env, agreeing_cfg.policy)
    assert agreeing.image_size == 64
    # a state policy reads no camera: its recorded image size does not bind
    state_cfg = composed("policy=act", "env.image_size=64")
    assert env_config_from(state_cfg.env, state_cfg.policy).image_size == 64
    binary_cfg = composed("policy=act", "env.gripper_mode=binary")
    with pytest.raises(ConfigError, match="env.gripper_mode='binary' contradicts"):
        env_config_from(binary_cfg.env, binary_cfg.policy)


def test_policy_config_keys_the_loader_does_not_take_are_refused(composed):
    cfg = composed("policy=lerobot", "policy.path=policies/act_soft_lift", "+policy.devcie=cuda")
    with pytest.raises(ConfigError) as error:
        policy_from(cfg)
    message = str(error.value)
    assert "policy=lerobot has no setting 'devcie'" in message
    assert "did you mean policy.device?" in message
    factory, choice = policy_from(composed("policy=lerobot", "policy.path=policies/act_soft_lift"))
    assert choice == "lerobot" and callable(factory)


def test_simroll_eval_refuses_an_image_size_the_checkpoint_contradicts(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "simroll.cli.main",
            "eval",
            f"output_dir={tmp_path}",
            "policy=vla",
            "env.image_size=96",
            "episodes=1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "simroll_env.json" in result.stderr and "env.image_size=96" in result.stderr
    assert not (tmp_path / "records.jsonl").exists()
