"""simroll.train.table_cache: items read through the loaded columns equal LeRobot's own."""

from __future__ import annotations

import pytest
import torch

from simroll.experts import SoftExpert
from simroll.rollout.dataset import DatasetRecorder
from simroll.rollout.episode import EnvConfig, EnvPool
from simroll.rollout.lerobot_io import open_dataset
from simroll.rollout.runner import make_specs
from simroll.train.table_cache import LoadedColumns, cache_columns

# past and future frames, so queries reach across episode ends (LeRobot clamps and pads them)
DELTAS = {
    "observation.state": [-0.1, -0.05, 0.0],
    "observation.environment_state": [0.0],
    "action": [i / 20 for i in range(-1, 15)],
}


@pytest.fixture(scope="module")
def tactile_dataset(tmp_path_factory):
    """State-mode SoftLift episodes with the rendered tactile image, a camera stream whose
    frames' timestamps every item queries."""
    root = tmp_path_factory.mktemp("datasets") / "lift_tactile"
    specs = make_specs("soft", ["SoftLift"], ["sponge", "tofu"], ["default"], 2, base_seed=11)
    pool = EnvPool(EnvConfig(obs_mode="state"))
    with DatasetRecorder(
        root,
        pool.get(specs[0]).observation_space,
        repo_id="simroll/lift_state",
        with_tactile_image=True,
    ) as recorder:
        for spec in specs:
            recorder.record(spec, lambda env: SoftExpert(env, "gentle"), env=pool.get(spec))
    pool.close()
    return root


def _open(root, episodes=None):
    deltas = dict(DELTAS)
    probe = open_dataset("simroll/lift_state", root=root)
    for key in probe.meta.video_keys:  # the camera streams' timestamps are queried too
        deltas[key] = [-0.05, 0.0]
    return open_dataset("simroll/lift_state", root=root, episodes=episodes, delta_timestamps=deltas)


def _assert_items_equal(plain, cached):
    assert len(plain) == len(cached) > 30
    for index in range(len(plain)):
        expected, got = plain[index], cached[index]
        assert expected.keys() == got.keys()
        for key, value in expected.items():
            if isinstance(value, torch.Tensor):
                assert value.dtype == got[key].dtype, (index, key)
                assert torch.equal(value, got[key]), (index, key)
            else:
                assert value == got[key], (index, key)


def test_cached_items_equal_lerobots_on_every_frame(tactile_dataset):
    plain, cached = _open(tactile_dataset), _open(tactile_dataset)
    assert cached.meta.video_keys  # the tactile image: camera timestamps are queried too
    cache = cache_columns(cached)
    assert isinstance(cache, LoadedColumns)
    _assert_items_equal(plain, cached)
    # only the queried columns were loaded, each once
    assert set(DELTAS) <= set(cache.columns)
    assert "observation.images.tactile" not in cache.columns


def test_an_episode_subset_reads_its_own_rows(tactile_dataset):
    """A dataset opened on some episodes maps absolute frame indices to its rows."""
    plain = _open(tactile_dataset, episodes=[1, 3])
    cached = _open(tactile_dataset, episodes=[1, 3])
    assert cache_columns(cached) is not None
    _assert_items_equal(plain, cached)


def test_a_dataset_without_delta_timestamps_is_left_alone(lift_dataset):
    dataset = open_dataset("simroll/lift_state", root=lift_dataset)
    assert cache_columns(dataset) is None
    assert dataset[0]["observation.state"].shape == (12,)
