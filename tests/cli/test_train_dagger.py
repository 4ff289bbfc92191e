"""``simroll train ... dagger.rounds=N`` as a user runs it: from another directory, on a dataset
``simroll collect`` made, labelled by the shipped expert; a labeller that cannot label any state
is refused in one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from simroll.rollout.dataset import load_episode_meta
from tests import helpers


def simroll(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return helpers.simroll(*args, timeout=900, cwd=cwd)


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("collect") / "demos"
    result = simroll(
        "collect",
        "env=soft_lift",
        "env.objects=[sponge]",
        "env.obs_mode=state",
        "episodes=2",
        "use_videos=false",
        "tactile_image=false",
        "progress=false",
        f"output_dir={out}",
        cwd=out.parent,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out


TINY = [
    "policy=act",
    "steps=4",
    "batch_size=4",
    "log_every=2",
    "checkpoint_every=4",
    "env=soft_lift",
    "env.objects=[sponge]",
    "dagger.rounds=1",
    "dagger.episodes_per_round=1",
    "dagger.steps_per_round=2",
    "dagger.final_episodes=1",
    "progress=false",
]


@pytest.mark.slow
def test_dagger_from_the_command_line_labels_with_the_expert(demos, tmp_path):
    out = tmp_path / "run"
    result = simroll("train", *TINY, f"dataset={demos}", f"output_dir={out}", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "dagger: 1 round(s)" in result.stdout and "final TSR" in result.stdout
    metrics = json.loads((out / "dagger.json").read_text())
    assert [entry["round"] for entry in metrics["rounds"]] == [0, 1]
    assert metrics["final"]["episodes"] == 1
    rows = load_episode_meta(out / "round_01" / "dataset")
    assert sorted(row["dagger_round"] for row in rows.values()) == [0, 0, 1]
    # the round's checkpoint carries the dataset's env record, so eval applies it
    env_record = json.loads((out / "round_01/train/checkpoints/last/simroll_env.json").read_text())
    assert env_record["obs_mode"] == "state"

    again = simroll("train", *TINY, f"dataset={demos}", f"output_dir={out}", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "kept the finished training run" in again.stdout


@pytest.mark.slow
def test_a_labeller_that_cannot_label_any_state_is_refused(demos, tmp_path):
    result = simroll(
        "train",
        *TINY,
        "dagger.labeller=expert_replan2",
        f"dataset={demos}",
        f"output_dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "labels_any_state" in result.stderr and "Traceback" not in result.stderr
