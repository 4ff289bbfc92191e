"""scripts/bench_rift.py on two tiny untrained world-action models: every section runs and its
numbers mean what they say (passes counted per chunk, delays from measured latency, ADE 0 for
the unmodified policy against itself)."""

from __future__ import annotations

import json

import pytest
import torch

from scripts import bench_rift as script
from simroll.train.trainer import save_checkpoint
from tests.policies.test_wam import make_config

ENV = {"obs_mode": "full", "image_size": 64, "gripper_mode": "delta", "tactile_image": False}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    from simroll.policies.wam import WAMPolicy, make_wam_pre_post_processors

    stats = {
        "observation.state": {"mean": torch.zeros(12), "std": torch.ones(12)},
        "action": {"mean": torch.zeros(5), "std": 0.3 * torch.ones(5)},
    }
    paths = {}
    base = tmp_path_factory.mktemp("wam")
    for mode in ("rollout", "rift"):
        torch.manual_seed(0)
        policy = WAMPolicy(make_config(mode=mode))
        with torch.no_grad():
            policy.model.action_out.weight.normal_(0, 0.1)  # untrained but not constant
        pre, post = make_wam_pre_post_processors(policy.config, dataset_stats=stats)
        paths[mode] = base / mode
        save_checkpoint(paths[mode], policy, pre, post, env=ENV)
    return paths


def ARGS_OF(checkpoints, tmp_path) -> list[str]:  # noqa: N802 - reads as a constant
    return [
        "--rollout",
        str(checkpoints["rollout"]),
        "--rift",
        str(checkpoints["rift"]),
        "--tasks",
        "SoftLift",
        "--objects",
        "tofu",
        "--runs",
        str(tmp_path / "runs"),
    ]


def test_add_paired_refuses_results_of_other_settings(checkpoints, tmp_path, capsys):
    out = tmp_path / "rift.json"
    out.write_text(json.dumps({"checkpoints": {"rollout": "x", "rift": "y"}, "success": {}}))
    with pytest.raises(SystemExit):
        script.main([*ARGS_OF(checkpoints, tmp_path), "--out", str(out), "--add-paired"])
    assert "made with other settings" in capsys.readouterr().err


@pytest.mark.slow
def test_bench_rift_end_to_end(checkpoints, tmp_path):
    out = tmp_path / "rift.json"
    payload = script.main(
        [
            *ARGS_OF(checkpoints, tmp_path),
            "--episodes",
            "1",
            "--intervention-episodes",
            "1",
            "--chunks",
            "4",
            "--chunks-per-episode",
            "2",
            "--out",
            str(out),
        ]
    )
    assert json.loads(out.read_text()) == json.loads(json.dumps(payload))
    latency = payload["latency"]
    assert latency["chunks"] == 4
    assert latency["rift"]["backbone_passes_per_chunk"] == 1
    assert latency["rollout"]["backbone_passes_per_chunk"] == 3  # num_video_steps
    assert latency["rift"]["action_passes_per_chunk"] == 4  # num_flow_steps
    success = payload["success"]
    assert set(success) == {"rollout", "rollout_latency", "rift", "rift_latency"}
    assert success["rift"]["delay_steps"] == [0] and success["rift_latency"]["delay_steps"][0] >= 1
    assert {(row["a"], row["b"]) for row in payload["paired"]} == set(script.PAIRS)
    same = [row for row in payload["paired"] if row["a"] == "rollout" and row["b"] == "rift"]
    assert {row["metric"] for row in same} == {"tsr", "dsr"} and same[0]["pairs"] == 1
    added = script.main([*ARGS_OF(checkpoints, tmp_path), "--out", str(out), "--add-paired"])
    assert added["paired"] == payload["paired"]
    interventions = payload["interventions"]
    assert set(interventions["rollout"]) == {
        "unmodified",
        "mask_future",
        "reassign_future",
        "fixed_final_clean",
    }
    assert interventions["rift"]["unmodified"]["ade_m"] == 0.0  # paired seeds reproduce
    assert interventions["rift"]["mask_future"]["ade_m"] > 0.0


def test_a_missing_checkpoint_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        script.main(["--rollout", str(tmp_path), "--rift", str(tmp_path)])
    assert f"--rollout {tmp_path}: not a checkpoint" in capsys.readouterr().err
