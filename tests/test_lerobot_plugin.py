"""The LeRobot env plugin: ``lerobot-eval --env.type=simroll`` runs a LeRobot checkpoint in simroll.

The checkpoint is a tiny randomly initialised ACT policy (no pretrained backbone, nothing from a
hub) saved with its pre/post processors the way ``lerobot-train`` saves them; success is not
expected, only that LeRobot's own evaluation loop drives simroll's env end to end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lerobot_env_simroll", reason="plugin not installed (make installs it)")

IMAGE_SIZE = 32


def test_env_config_is_registered_and_names_features_like_simroll_datasets():
    from lerobot.envs.configs import EnvConfig
    from lerobot.envs.utils import env_to_policy_features

    config = EnvConfig.get_choice_class("simroll")(image_size=IMAGE_SIZE, tactile_image=True)
    assert config.gym_id == "lerobot_env_simroll/SoftLift-v0"
    features = env_to_policy_features(config)
    assert features["observation.images.scene"].shape == (3, IMAGE_SIZE, IMAGE_SIZE)
    assert features["observation.state"].shape == (12,)
    assert features["observation.tactile"].shape == (384,)
    assert features["observation.tactile_markers"].shape == (396,)
    assert features["observation.images.tactile"].shape == (3, IMAGE_SIZE, IMAGE_SIZE)
    assert features["action"].shape == (5,)


@pytest.mark.parametrize(
    ("collect_overrides", "plugin_settings"),
    [([], {}), (["env.obs_mode=state"], {"obs_type": "environment_state_agent_pos"})],
    ids=["defaults", "state-mode"],
)
def test_env_plugin_defaults_give_what_simroll_collect_records(collect_overrides, plugin_settings):
    """With no flags but the obs mode, ``--env.type=simroll`` presents the observations that
    ``simroll collect`` records with no flags: same image size, gripper mode, tactile image and
    feature names, types and shapes. A policy ``lerobot-train`` made from such a dataset
    evaluates in ``lerobot-eval`` as it is."""
    import gymnasium as gym
    from hydra import compose, initialize_config_dir
    from lerobot.envs.configs import EnvConfig
    from lerobot.envs.utils import env_to_policy_features
    from lerobot.utils.feature_utils import dataset_to_policy_features
    from lerobot_env_simroll import OBS_TYPES

    import simroll.cli.collect  # noqa: F401 - registers the config schemas collect.yaml names
    from simroll.cli.eval import CONFIG_DIR
    from simroll.features import dataset_features

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        collect = compose("collect", overrides=collect_overrides)
    plugin = EnvConfig.get_choice_class("simroll")(**plugin_settings)
    assert OBS_TYPES[plugin.obs_type] == collect.env.obs_mode
    assert plugin.image_size == collect.env.image_size
    assert plugin.gripper_mode == collect.env.gripper_mode
    assert plugin.tactile_image == collect.tactile_image
    assert plugin.task.removesuffix("-v0") in collect.env.tasks

    env = gym.make(
        f"simroll/{plugin.task}",
        obs_mode=collect.env.obs_mode,
        image_size=collect.env.image_size,
        gripper_mode=collect.env.gripper_mode,
    )
    try:
        recorded = dataset_features(
            env.observation_space,
            use_videos=collect.use_videos,
            with_tactile_image=collect.tactile_image,
        )
    finally:
        env.close()
    from_dataset = dataset_to_policy_features(recorded)
    from_plugin = env_to_policy_features(plugin)
    assert {key: (f.type, f.shape) for key, f in from_dataset.items()} == {
        key: (f.type, f.shape) for key, f in from_plugin.items()
    }


def test_wrapped_env_speaks_lerobot_observations_and_ignores_its_reset_marker():
    from lerobot.envs.configs import EnvConfig
    from lerobot.envs.factory import make_env
    from lerobot.envs.utils import NEW_ROLLOUT_OPTION, preprocess_observation

    config = EnvConfig.get_choice_class("simroll")(
        task="SoftSqueeze-v0",
        obs_type="environment_state_agent_pos",
        tactile_image=True,
        episode_length=3,
    )
    envs = make_env(config, n_envs=1)
    env = envs["simroll"][0]
    try:
        obs, _ = env.reset(seed=[3], options={NEW_ROLLOUT_OPTION: True})
        batch = preprocess_observation(obs)
        assert set(batch) == {
            "observation.state",
            "observation.following_error",
            "observation.environment_state",
            "observation.tactile",
            "observation.tactile_markers",
            "observation.images.tactile",
        }
        assert batch["observation.images.tactile"].shape == (1, 3, 64, 64)
        assert env.call("task_description")[0] == "squeeze the sponge firmly but carefully"
        overshoot = np.array([[0.0, 0.0, 1.05, 0.0, -1.2]], dtype=np.float32)  # clipped, not raised
        for _ in range(3):
            obs, _, terminated, truncated, _ = env.step(overshoot)
        assert truncated[0] and not terminated[0]
    finally:
        env.close()


@pytest.mark.parametrize("target", ["cuboid", "sponge"])
def test_low_level_clutter_retrieval_is_a_lerobot_env_too(target):
    """ClutterRetrieve (the hand's 5-D action) through LeRobot's factory, with a rigid and a soft
    target: every block's pose as a flat environment_state, the same features the config names."""
    from lerobot.envs.configs import EnvConfig
    from lerobot.envs.factory import make_env
    from lerobot.envs.utils import preprocess_observation

    config = EnvConfig.get_choice_class("simroll")(
        task="ClutterRetrieve-v0",
        object=target,
        obs_type="environment_state_agent_pos",
        tactile_image=False,
        episode_length=2,
    )
    assert config.features["environment_state"].shape == (44,)
    env = make_env(config, n_envs=1)["simroll"][0]
    try:
        obs, _ = env.reset(seed=[0])
        batch = preprocess_observation(obs)
        assert batch["observation.environment_state"].shape == (1, 44)
        assert set(batch) == {
            "observation.state",
            "observation.following_error",
            "observation.environment_state",
            "observation.tactile",
            "observation.tactile_markers",
        }
        assert env.call("task_description")[0] == f"retrieve the red {target} from the clutter"
        for _ in range(2):
            obs, _, terminated, truncated, _ = env.step(np.zeros((1, 5), dtype=np.float32))
        assert truncated[0] and not terminated[0]
    finally:
        env.close()


def make_tiny_act_checkpoint(directory: Path) -> Path:
    import torch
    from lerobot.configs import FeatureType, NormalizationMode, PolicyFeature
    from lerobot.policies import make_pre_post_processors
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy

    image = PolicyFeature(FeatureType.VISUAL, (3, IMAGE_SIZE, IMAGE_SIZE))
    config = ACTConfig(
        input_features={
            "observation.state": PolicyFeature(FeatureType.STATE, (12,)),
            "observation.images.scene": image,
            "observation.images.wrist": image,
        },
        output_features={"action": PolicyFeature(FeatureType.ACTION, (5,))},
        normalization_mapping={
            "VISUAL": NormalizationMode.IDENTITY,
            "STATE": NormalizationMode.MEAN_STD,
            "ACTION": NormalizationMode.MEAN_STD,
        },
        pretrained_backbone_weights=None,
        dim_model=32,
        n_heads=2,
        dim_feedforward=64,
        n_encoder_layers=1,
        n_decoder_layers=1,
        use_vae=False,
        chunk_size=5,
        n_action_steps=5,
        device="cpu",
    )
    torch.manual_seed(0)
    policy = ACTPolicy(config)
    stats = {
        "observation.state": {"mean": torch.zeros(12), "std": torch.ones(12)},
        "action": {"mean": torch.zeros(5), "std": torch.full((5,), 0.3)},
    }
    preprocessor, postprocessor = make_pre_post_processors(config, dataset_stats=stats)
    policy.save_pretrained(directory)
    preprocessor.save_pretrained(directory)
    postprocessor.save_pretrained(directory)
    return directory


def lerobot_eval_command() -> list[str]:
    script = Path(sys.executable).with_name("lerobot-eval")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "lerobot.scripts.lerobot_eval"]


@pytest.mark.slow
def test_lerobot_eval_runs_a_saved_act_checkpoint_for_two_episodes(tmp_path):
    checkpoint = make_tiny_act_checkpoint(tmp_path / "checkpoint")
    output = tmp_path / "eval"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",  # nothing may come from a hub
        "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
        "OMP_NUM_THREADS": "1",  # a 32-pixel ACT gains nothing from threads on a shared CPU
    }
    result = subprocess.run(
        [
            *lerobot_eval_command(),
            "--env.type=simroll",
            "--env.task=SoftLift-v0",
            f"--env.image_size={IMAGE_SIZE}",
            "--env.episode_length=15",
            "--env.render_height=64",
            "--env.render_width=64",
            f"--policy.path={checkpoint}",
            "--policy.device=cpu",
            "--policy.use_amp=false",
            "--eval.n_episodes=2",
            "--eval.batch_size=1",
            f"--output_dir={output}",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    info = json.loads((output / "eval_info.json").read_text())
    assert info["overall"]["n_episodes"] == 2
    assert len(info["per_task"][0]["metrics"]["successes"]) == 2
    assert len(list((output / "videos").rglob("*.mp4"))) == 2
