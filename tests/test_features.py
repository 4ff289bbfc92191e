"""The schema module: its names fit the envs' spaces, its LeRobot keys are LeRobot's, the hold
action, and importing it loads neither the simulator nor torch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from simroll import features
from simroll.envs.soft import SoftLiftEnv


@pytest.fixture(scope="module")
def envs():
    """A state-mode and a full-mode SoftLift, reset (full mode renders 32 px cameras)."""
    made = {mode: SoftLiftEnv(obs_mode=mode, image_size=32) for mode in features.OBS_MODES}
    yield {mode: (env, env.reset(seed=0)[0]) for mode, env in made.items()}
    for env in made.values():
        env.close()


def test_the_names_fit_the_env_spaces(envs):
    env, _ = envs["state"]
    assert env.action_space.shape == (features.ACTION_DIM,) == (len(features.ACTION_NAMES),)
    assert features.ACTION_NAMES[features.GRIPPER] == "gripper" == features.ACTION_NAMES[-1]
    assert features.ACTION_NAMES[features.HAND] == ("dx", "dy", "dz", "dyaw")
    assert env.observation_space["agent_pos"].shape == (len(features.STATE_NAMES),)
    shape = env.observation_space["following_error"].shape
    assert shape == (len(features.FOLLOWING_ERROR_NAMES),)
    spec = features.dataset_features(env.observation_space)
    assert spec[features.FOLLOWING_ERROR_KEY]["names"] == list(features.FOLLOWING_ERROR_NAMES)
    environment_state = env.observation_space["environment_state"].shape
    assert environment_state == (len(features.ENVIRONMENT_STATE_NAMES),)
    full, _ = envs["full"]
    assert tuple(full.observation_space["pixels"].spaces) == features.CAMERAS


@pytest.mark.parametrize("mode", features.OBS_MODES)
def test_an_observation_frame_has_every_feature_at_its_declared_shape(envs, mode):
    env, obs = envs[mode]
    size = features.tactile_image_size(env.observation_space)
    assert size == (32 if mode == "full" else features.TACTILE_IMAGE_SIZE)
    spec = features.dataset_features(env.observation_space, with_tactile_image=True)
    frame = features.observation_frame(obs, size)
    assert set(spec) - set(frame) == {features.ACTION_KEY, features.DEFORMATION_KEY}
    for key, value in frame.items():
        assert value.shape == tuple(spec[key]["shape"]), key
        names = spec[key]["names"]
        assert names is None or len(names) in (value.shape[0], len(value.shape)), key
    assert (features.ENVIRONMENT_STATE_KEY in frame) == (mode == "state")
    assert features.TACTILE_IMAGE_KEY not in features.observation_frame(obs, None)
    assert [k for k in frame if features.is_camera_key(k)] == [
        features.image_key(camera) for camera in features.CAMERAS if mode == "full"
    ]


def test_the_lerobot_keys_are_lerobots_own():
    from lerobot.utils.constants import ACTION, OBS_ENV_STATE, OBS_IMAGES, OBS_STATE

    assert features.STATE_KEY == OBS_STATE
    assert features.ENVIRONMENT_STATE_KEY == OBS_ENV_STATE
    assert features.IMAGE_PREFIX == OBS_IMAGES + "."
    assert features.ACTION_KEY == ACTION


def test_the_hold_action_stops_the_hand_and_keeps_the_jaw_in_every_gripper_mode():
    previous = np.array([0.3, -0.2, 0.1, 0.5, 0.7], np.float32)
    for mode in features.GRIPPER_MODES:
        assert features.hold_action(gripper_mode=mode).tolist() == [0, 0, 0, 0, -1]
    gripper = features.GRIPPER
    assert features.hold_action(previous).tolist()[:4] == [0, 0, 0, 0]
    assert features.hold_action(previous)[gripper] == np.float32(0.7)
    assert features.hold_action(previous, gripper_mode="binary")[gripper] == np.float32(0.7)
    assert features.hold_action(previous, gripper_mode="delta")[gripper] == 0.0
    assert features.hold_action().dtype == np.float32
    with pytest.raises(ValueError, match="gripper_mode must be one of"):
        features.hold_action(previous, gripper_mode="absolute")


def test_importing_the_schema_loads_no_simulator_torch_or_rollout():
    code = (
        "import sys, simroll.features; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mujoco', 'torch', 'lerobot')"
        " or m.startswith(('simroll.envs', 'simroll.rollout', 'simroll.policies'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
