"""Camera observations render when read (``LazyImages``), and only the cameras asked for.

The images must be exactly those of rendering each step at once (``SIMROLL_FAST_PATHS=0``,
``mujoco.Renderer`` as it was used before), whatever order and however late they are read; an
observation whose pixels are never read renders nothing; an env built with ``cameras`` gives the
same images for those cameras as the full env.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from simroll import _speedups
from simroll.envs import sensing
from simroll.envs.sensing import LazyImages

ACTIONS = np.random.default_rng(7).uniform(-1, 1, size=(12, 5)).astype(np.float32)


def rollout(env, seed: int = 3) -> list[dict]:
    obs, _ = env.reset(seed=seed)
    kept = [obs]
    for action in ACTIONS:
        obs, *_ = env.step(action)
        kept.append(obs)
    return kept


def images(observations: list[dict], order=None) -> list[dict[str, np.ndarray]]:
    """Every camera image of ``observations``, read in ``order`` (indices; default in turn)."""
    order = range(len(observations)) if order is None else order
    read = {i: {k: observations[i]["pixels"][k] for k in observations[i]["pixels"]} for i in order}
    return [read[i] for i in range(len(observations))]


@pytest.fixture
def eager_reference(make_env, monkeypatch):
    """Each step's images rendered at once, as before the fast paths."""
    monkeypatch.setenv(_speedups.ENV_VAR, "0")
    reference = images(rollout(make_env("SoftLift", obs_mode="full", image_size=32)))
    monkeypatch.setenv(_speedups.ENV_VAR, "1")
    return reference


def assert_same_images(got, expected):
    assert len(got) == len(expected)
    for step, (a, b) in enumerate(zip(got, expected, strict=True)):
        assert a.keys() == b.keys()
        for camera in a:
            assert np.array_equal(a[camera], b[camera]), f"step {step} camera {camera}"


def test_lazy_images_equal_eager_renders_in_any_reading_order(make_env, eager_reference):
    env = make_env("SoftLift", obs_mode="full", image_size=32)
    observations = rollout(env)  # all kept: the oldest get rendered beyond MAX_UNRENDERED
    assert isinstance(observations[-1]["pixels"], LazyImages)
    backwards = list(range(len(observations)))[::-1]
    assert_same_images(images(observations, backwards), eager_reference)
    # read in turn, each observation right after its step (the usual loop)
    in_turn = []
    obs, _ = env.reset(seed=3)
    in_turn.append(dict(obs["pixels"]))
    for action in ACTIONS:
        obs, *_ = env.step(action)
        in_turn.append(dict(obs["pixels"]))
    assert_same_images(in_turn, eager_reference)
    # the images are there after the env closed
    obs, _ = env.reset(seed=3)
    env.close()
    assert np.array_equal(obs["pixels"]["scene"], eager_reference[0]["scene"])


def test_unread_observations_render_nothing_and_reuse_their_scenes(make_env, monkeypatch):
    # (Gymnasium's env checker reads the first observations: left out)
    env = make_env("SoftLift", obs_mode="full", image_size=32, disable_env_checker=True)
    renders = []
    render_scene = sensing._SceneRenderer.render_scene
    monkeypatch.setattr(
        sensing._SceneRenderer,
        "render_scene",
        lambda self, scene: renders.append(1) or render_scene(self, scene),
    )
    obs, _ = env.reset(seed=0)
    for action in ACTIONS:
        obs, *_ = env.step(action)  # the previous observation is dropped unread
    assert renders == []
    assert obs["pixels"].pending == ("scene", "wrist")
    rig = env.unwrapped._cameras
    # scenes of dropped observations went back to the pool: a handful, not one per step
    assert len(rig._free) + 2 * len(rig._outstanding) <= 2 * (sensing.MAX_UNRENDERED + 1)
    wrist = obs["pixels"]["wrist"]  # reading one camera renders that camera only
    assert len(renders) == 1 and obs["pixels"].pending == ("scene",)
    assert wrist.shape == (32, 32, 3) and wrist.dtype == np.uint8 and wrist.any()


def test_lazy_images_behave_as_a_dict_of_arrays(make_env):
    env = make_env("SoftLift", obs_mode="full", image_size=32, disable_env_checker=True)
    obs, _ = env.reset(seed=0)
    pixels = obs["pixels"]
    assert isinstance(pixels, dict) and list(pixels) == ["scene", "wrist"] and len(pixels) == 2
    assert "scene" in pixels and pixels.pending == ("scene", "wrist")  # keys render nothing
    for view in (dict(pixels), {**pixels}, pixels.copy()):
        assert type(view) is dict and all(isinstance(v, np.ndarray) for v in view.values())
    assert pixels.pending == ()
    for clone in (copy.copy(pixels), copy.deepcopy(pixels), pickle.loads(pickle.dumps(pixels))):
        assert type(clone) is LazyImages and clone.keys() == pixels.keys()
        assert all(np.array_equal(clone[k], pixels[k]) for k in pixels)
    assert env.observation_space.contains(obs)
    assert pixels.get("nope") is None and pixels.get("wrist") is pixels["wrist"]
    pixels["scene"] = np.zeros((32, 32, 3), np.uint8)
    assert not pixels["scene"].any()


def test_an_env_with_only_some_cameras_gives_the_same_images_for_them(make_env):
    full = rollout(make_env("SoftLift", obs_mode="full", image_size=32))
    wrist_env = make_env("SoftLift", obs_mode="full", image_size=32, cameras=["wrist"])
    assert list(wrist_env.observation_space["pixels"].spaces) == ["wrist"]
    wrist_only = rollout(wrist_env)
    for a, b in zip(full, wrist_only, strict=True):
        assert list(b["pixels"]) == ["wrist"]
        assert np.array_equal(a["pixels"]["wrist"], b["pixels"]["wrist"])
        assert np.array_equal(a["agent_pos"], b["agent_pos"])
    for bad in ([], ["top"], ["wrist", "wrist"], "wrist"):
        with pytest.raises(ValueError, match="cameras must be"):
            make_env("SoftLift", obs_mode="full", cameras=bad)


def test_right_sized_framebuffer_gives_mujoco_renderer_pixels(make_env):
    import mujoco

    env = make_env("SoftLift", obs_mode="full", image_size=48)
    obs, _ = env.reset(seed=1)
    obs, *_ = env.step(ACTIONS[0])
    unwrapped = env.unwrapped
    reference = mujoco.Renderer(unwrapped.model, 48, 48)  # the model's 640 x 480 framebuffer
    try:
        for camera in ("scene", "wrist"):
            reference.update_scene(unwrapped.data, camera=camera)
            assert np.array_equal(reference.render(), obs["pixels"][camera])
    finally:
        reference.close()
    renderer = unwrapped._cameras._renderer
    assert (renderer.width, renderer.height) == (48, 48)
    assert unwrapped.model.vis.global_.offwidth == 640  # the model keeps its setting


class ReadsPixels:
    """Reads every camera image each step and does nothing else."""

    def reset(self):
        pass

    def select_action(self, obs):
        dict(obs["pixels"])
        return np.zeros(5, dtype=np.float32)


def test_policy_time_leaves_out_rendering_the_images_it_reads():
    from simroll.rollout.episode import EnvConfig, run_episode
    from simroll.rollout.records import EpisodeSpec

    config = EnvConfig(obs_mode="full", image_size=32, kwargs={"max_episode_steps": 6})
    before = sensing.lazy_render_seconds()
    record = run_episode(
        EpisodeSpec("SoftLift", "sponge", "default", 0),
        lambda env: ReadsPixels(),
        env_config=config,
    )
    rendered = sensing.lazy_render_seconds() - before
    assert record.error is None and record.policy_calls == 6
    assert rendered > 0
    assert record.policy_compute_s < 0.5 * rendered  # the renders are the env's time
