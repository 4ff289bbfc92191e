"""simroll.train.video_cache: items read through the decoded-once cache equal LeRobot's own."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("MUJOCO_GL", "egl")

from simroll.rollout.episode import EnvConfig
from simroll.rollout.lerobot_io import open_dataset
from simroll.rollout.runner import make_specs
from simroll.train.video_cache import DecodedVideos, cache_videos
from tests.helpers import record_expert_dataset

CAMERAS = ("observation.images.scene", "observation.images.wrist")
# a past frame and a future one too, so queries reach across episode ends (LeRobot pads them)
DELTAS = {"observation.images.scene": [-0.1, 0.0], "observation.images.wrist": [0.0, 0.05]}


@pytest.fixture(scope="module")
def video_dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets") / "lift_full"
    specs = make_specs("soft", ["SoftLift"], ["sponge", "tofu"], ["default"], 1, base_seed=7)
    return record_expert_dataset(root, specs, EnvConfig(obs_mode="full", image_size=32))


def _open(root):
    return open_dataset("simroll/lift_full", root=root, delta_timestamps=DELTAS)


def test_cached_items_equal_lerobots_on_every_frame(video_dataset):
    plain, cached = _open(video_dataset), _open(video_dataset)
    if plain._video_backend != "pyav":
        pytest.skip("the cache serves the PyAV decoder only")
    cache = cache_videos(cached)
    assert isinstance(cache, DecodedVideos)
    assert len(plain) > 60
    for index in range(len(plain)):
        expected, got = plain[index], cached[index]
        assert expected.keys() == got.keys()
        for key, value in expected.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(value, got[key]), (index, key)
            else:
                assert value == got[key], (index, key)
    # one decode per camera file, however many items asked
    assert len(cache.files) == len(plain.meta.video_keys)


def test_skipped_cameras_are_not_decoded(video_dataset):
    dataset = _open(video_dataset)
    if dataset._video_backend != "pyav":
        pytest.skip("the cache serves the PyAV decoder only")
    cache = cache_videos(dataset, skip=["observation.images.wrist"])
    item = dataset[5]
    assert item["observation.images.wrist"].numel() == 0
    assert item["observation.images.scene"].shape == (2, 3, 32, 32)
    assert all("wrist" not in str(path) for path in cache.files)


def test_a_timestamp_beyond_tolerance_is_refused(video_dataset):
    from lerobot.datasets.video_utils import FrameTimestampError

    dataset = _open(video_dataset)
    path = video_dataset / dataset.meta.get_video_file_path(0, CAMERAS[0])
    cache = DecodedVideos()
    times, frames = cache.frames(path)
    assert frames.dtype == torch.uint8 and frames.shape[0] == len(times)
    near = cache.query(path, [float(times[3]) + 0.001], 0.01, return_uint8=True)
    assert torch.equal(near[0], frames[3])
    with pytest.raises(FrameTimestampError, match="beyond the tolerance"):
        cache.query(path, [float(times[-1]) + 1.0], 0.01, return_uint8=False)
