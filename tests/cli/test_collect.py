"""``simroll collect`` on the episode engine: the same dataset on every backend, only the kept
episodes in it, and an interrupted collect that resumes instead of starting over.

The collects run in this process (the ``collect`` config composed as the running Hydra app sees
it), on state observations without images: SoftSqueeze on the sponge, 2 episodes of the noisy
expert with more executed noise than its default, whose first episode fails and second succeeds.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

from simroll.cli import collect as collect_cli
from simroll.cli.eval import CONFIG_DIR
from simroll.cli.rundir import RunDirError
from simroll.rollout.dataset import load_episode_meta, shard_name
from simroll.rollout.lerobot_io import open_dataset
from simroll.rollout.manifest import ManifestError
from simroll.rollout.rundir import Interrupted
from simroll.rollout.runner import evaluate, make_specs
from simroll.rollout.store import RecordStore

REPO_ID = "simroll/soft_squeeze_expert_noisy"
SETTINGS = (
    "env=soft_squeeze",
    "env.objects=[sponge]",
    "env.obs_mode=state",
    "policy=expert_noisy",
    "policy.arm_std=0.4",  # seeds 1000 and 1001 of SoftSqueeze: a failure, then a success
    "policy.gripper_std=0.4",  # (the state-labelling expert recovers from arm noise alone)
    "episodes=2",
    "use_videos=false",
    "tactile_image=false",
    "progress=false",
)
SPECS = make_specs("soft", ["SoftSqueeze"], ["sponge"], ["default"], 2, 1000)


def collect(output_dir: Path, *overrides: str) -> int:
    """``simroll collect`` with :data:`SETTINGS` and ``overrides`` into ``output_dir``, in this
    process; its exit status."""
    with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
        cfg = compose(
            "collect",
            [*SETTINGS, f"output_dir={output_dir}", *overrides],
            return_hydra_config=True,
        )
    HydraConfig.instance().set_config(cfg)
    try:
        with open_dict(cfg):
            del cfg["hydra"]  # as the command's config: the hydra section is not part of it
        return collect_cli.run(cfg)
    finally:
        HydraConfig.instance().cfg = None


def dataset_of(root: Path) -> dict:
    """What a collect wrote: its columns, per-episode rows and record receipts."""
    dataset = open_dataset(REPO_ID, root=root)
    data = dataset.hf_dataset.with_format("numpy")[:]
    rows = load_episode_meta(root)
    return {
        "episodes": dataset.num_episodes,
        "columns": {
            key: np.asarray(data[key])
            for key in ("action", "observation.state", "episode_index", "frame_index")
        },
        "spec_keys": [rows[index]["spec_key"] for index in sorted(rows)],
        "receipts": [rows[index]["record"]["receipt"] for index in sorted(rows)],
        "success": [rows[index]["success"] for index in sorted(rows)],
    }


def assert_same_dataset(mine: dict, expected: dict) -> None:
    assert mine["episodes"] == expected["episodes"]
    assert mine["spec_keys"] == expected["spec_keys"]
    assert mine["receipts"] == expected["receipts"]
    for key, column in expected["columns"].items():
        np.testing.assert_array_equal(mine["columns"][key], column, err_msg=key)


def store_receipts(root: Path) -> dict[str, str]:
    records = RecordStore(root / collect_cli.COLLECT_DIRNAME).load().records
    return {key: record.receipt for key, record in records.items()}


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    """Every episode without error kept (only_success=false), on the local backend."""
    root = tmp_path_factory.mktemp("collect") / "local"
    assert collect(root, "only_success=false") == 0
    return root


def test_local_collect_leaves_a_dataset_root_with_the_run_beside_it(local):
    found = dataset_of(local)
    assert found["episodes"] == 2 and found["success"] == [False, True]
    assert found["spec_keys"] == [spec.key for spec in SPECS]  # spec order
    assert {path.name for path in local.iterdir()} == {
        ".lock",
        ".collect",
        "manifest.json",
        "specs.jsonl",
        "meta",
        "data",
    }
    work = local / collect_cli.COLLECT_DIRNAME
    assert [path.name for path in work.iterdir()] == ["records.jsonl"]  # the shards are gone
    recorded = (local / "meta/simroll_collect.yaml").read_text()
    assert "name: local" in recorded and "only_success: false" in recorded


@pytest.mark.slow
def test_vector_collect_gives_the_local_dataset(local, tmp_path, capsys):
    root = tmp_path / "vector"
    assert collect(root, "only_success=false", "backend=vector", "backend.workers=2") == 0
    assert "on backend vector" in capsys.readouterr().out
    assert_same_dataset(dataset_of(root), dataset_of(local))
    assert store_receipts(root) == store_receipts(local)


def test_only_success_keeps_the_successful_episodes(local, tmp_path, capsys):
    root = tmp_path / "demos"
    assert collect(root) == 0
    assert "wrote 1 episodes" in capsys.readouterr().out
    found, every = dataset_of(root), dataset_of(local)
    assert found["success"] == [True] and found["spec_keys"] == every["spec_keys"][1:]
    second = every["columns"]["episode_index"] == 1
    for key in ("action", "observation.state"):
        np.testing.assert_array_equal(found["columns"][key], every["columns"][key][second])
    assert len(store_receipts(root)) == 2  # the failed episode ran and is in the run's records


def test_a_collect_without_a_kept_episode_writes_no_dataset(tmp_path, capsys):
    root = tmp_path / "none"
    assert collect(root, "episodes=1") == 1  # the failing episode alone
    assert "no episode was kept" in capsys.readouterr().err
    assert not (root / "meta").exists()


@pytest.mark.slow
def test_an_interrupted_collect_resumes_with_the_same_command(local, tmp_path, monkeypatch, capsys):
    root = tmp_path / "resumed"
    runs: list[int] = []

    def first_episode_then_ctrl_c(run_dir, specs, job, **kwargs):
        evaluate(run_dir, specs[:1], job, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(collect_cli, "run_specs", first_episode_then_ctrl_c)
    with pytest.raises(Interrupted, match="1 of 2 episodes kept"):
        collect(root, "only_success=false")
    assert not (root / "meta").exists()  # no dataset until it is complete
    shards = root / collect_cli.COLLECT_DIRNAME / collect_cli.SHARDS_DIRNAME
    assert [path.name for path in shards.iterdir()] == [shard_name(SPECS[0])]

    def counted(*args, **kwargs):
        records = evaluate(*args, **kwargs)
        runs.append(records.episodes_run)
        return records

    monkeypatch.setattr(collect_cli, "run_specs", counted)
    assert collect(root, "only_success=false", "backend.workers=3") == 0  # workers may change
    assert runs == [1]  # only the episode still missing ran
    assert "resuming: 1 already recorded" in capsys.readouterr().out
    assert_same_dataset(dataset_of(root), dataset_of(local))

    assert collect(root, "only_success=false") == 0  # finished: nothing runs
    assert runs == [1] and "already holds the finished dataset" in capsys.readouterr().out
    with pytest.raises(ManifestError, match=r"seed 1000 -> 1001.*overwrite=true"):
        collect(root, "only_success=false", "seed=1001")
    assert collect(root, "only_success=false", "overwrite=true") == 0
    assert runs == [1, 2]  # started over
    assert_same_dataset(dataset_of(root), dataset_of(local))


def test_a_collect_stopped_while_moving_the_dataset_into_place_finishes_it(
    local, tmp_path, monkeypatch
):
    root = tmp_path / "moving"
    move = collect_cli._move_into_place

    def stopped_before_meta(merged: Path, target: Path) -> None:
        for entry in merged.iterdir():
            if entry.name != collect_cli.META_DIRNAME:
                entry.rename(target / entry.name)
        raise KeyboardInterrupt

    monkeypatch.setattr(collect_cli, "_move_into_place", stopped_before_meta)
    with pytest.raises(Interrupted, match="2 of 2 episodes kept"):
        collect(root, "only_success=false")
    assert (root / "data").is_dir() and not (root / "meta").exists()
    monkeypatch.setattr(collect_cli, "_move_into_place", move)
    assert collect(root, "only_success=false") == 0
    assert_same_dataset(dataset_of(root), dataset_of(local))
    assert json.loads((root / "meta/info.json").read_text())["total_episodes"] == 2


@pytest.mark.slow
def test_a_resume_over_shards_with_other_features_stops_naming_them(tmp_path, monkeypatch):
    root = tmp_path / "upgraded"

    def first_episode_then_ctrl_c(run_dir, specs, job, **kwargs):
        evaluate(run_dir, specs[:1], job, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(collect_cli, "run_specs", first_episode_then_ctrl_c)
    with pytest.raises(Interrupted):
        collect(root, "only_success=false")
    # the first shard as a simroll version without the per-frame deformation would have left it
    info_path = root / collect_cli.COLLECT_DIRNAME / collect_cli.SHARDS_DIRNAME
    info_path = info_path / shard_name(SPECS[0]) / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    del info["features"]["eval.deformation"]
    info_path.write_text(json.dumps(info))
    monkeypatch.setattr(collect_cli, "run_specs", evaluate)
    with pytest.raises(RunDirError, match=r"only in .*: \['eval.deformation'\].*overwrite=true"):
        collect(root, "only_success=false")
    assert len(store_receipts(root)) == 2  # both episodes' records kept
    assert not (root / "meta").exists()
    assert collect(root, "only_success=false", "overwrite=true") == 0
    assert json.loads((root / "meta/info.json").read_text())["total_episodes"] == 2
