"""scripts/merge_datasets.py: collect datasets of one env join into one, with its env record."""

from __future__ import annotations

import shutil

import pytest
import yaml
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from scripts import merge_datasets as merge
from simroll.experts import SoftExpert
from simroll.rollout.dataset import DatasetRecorder, load_episode_meta
from simroll.rollout.episode import EnvConfig, EnvPool
from simroll.rollout.runner import make_specs
from simroll.train.trainer import dataset_env

ENV = {"obs_mode": "state", "image_size": 96, "gripper_mode": "continuous"}


def _collect(root, seed):
    specs = make_specs("soft", ["SoftLift"], ["sponge"], ["default"], 1, base_seed=seed)
    pool = EnvPool(EnvConfig(obs_mode="state"))
    with DatasetRecorder(
        root, pool.get(specs[0]).observation_space, repo_id="simroll/x", only_success=False
    ) as recorder:
        for spec in specs:
            recorder.record(spec, lambda env: SoftExpert(env, "gentle"), env=pool.get(spec))
    pool.close()
    record = {"env": ENV, "policy": {"_target_": "expert"}, "seed": seed, "episodes": 1}
    (root / "meta" / "simroll_collect.yaml").write_text(yaml.safe_dump(record))


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    base = tmp_path_factory.mktemp("merge")
    roots = [base / "a", base / "b"]
    for root, seed in zip(roots, (1000, 2000), strict=True):
        _collect(root, seed)
    return roots


def test_joined_dataset_has_every_episode_and_says_where_they_came_from(sources, tmp_path):
    out = tmp_path / "ab"
    assert merge.main([str(s) for s in sources] + ["--out", str(out)]) == 0
    dataset = LeRobotDataset("simroll/ab", root=out)
    parts = [LeRobotDataset("simroll/x", root=s) for s in sources]
    assert dataset.num_episodes == 2
    assert dataset.num_frames == sum(p.num_frames for p in parts)
    seeds = [row["spec"]["seed"] for _, row in sorted(load_episode_meta(out).items())]
    assert seeds == [load_episode_meta(s)[0]["spec"]["seed"] for s in sources]
    record = yaml.safe_load((out / "meta" / "simroll_collect.yaml").read_text())
    assert [m["seed"] for m in record["merged_from"]] == [1000, 2000]
    assert "seed" not in record  # no single seed made it
    assert dataset_env(out) == {key: ENV[key] for key in ("gripper_mode", "obs_mode", "image_size")}


def test_datasets_of_different_envs_are_refused(sources, tmp_path, capsys):
    other = tmp_path / "c"
    shutil.copytree(sources[1], other)
    record = yaml.safe_load((other / "meta" / "simroll_collect.yaml").read_text())
    record["env"]["gripper_mode"] = "binary"
    (other / "meta" / "simroll_collect.yaml").write_text(yaml.safe_dump(record))
    with pytest.raises(SystemExit):
        merge.main([str(sources[0]), str(other), "--out", str(tmp_path / "out")])
    assert "env settings" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
