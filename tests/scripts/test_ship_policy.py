"""scripts/ship_policy.py: the card's per-task goal table and DAgger section come from the run
files, and an inference setting lands in the shipped config.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import ship_policy as script
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parents[2]


def _rate(rate, low, high):
    return {"rate": rate, "low": low, "high": high}


def _eval_run(path: Path, rows: dict[str, tuple[float, float]]) -> Path:
    path.mkdir(parents=True)
    groups = [
        {
            "task": task,
            "object": "all",
            "episodes": 100,
            "tsr": _rate(tsr, tsr - 0.06, min(1.0, tsr + 0.03)),
            "dsr": _rate(dsr, dsr - 0.09, dsr + 0.08),
            "compute_per_call_s": 0.01,
        }
        for task, (tsr, dsr) in rows.items()
    ]
    summary = {
        "episodes": 100 * len(rows),
        "groups": groups,
        "provenance": {"config": {"env": {}, "policy": {}}, "git_sha": "abc", "command": None},
    }
    (path / "summary.json").write_text(json.dumps(summary))
    return path


def test_per_task_table_states_the_goal_ratios(tmp_path):
    mine = _eval_run(tmp_path / "mine", {"SoftLift": (0.96, 0.77), "SoftPlace": (0.5, 0.0)})
    expert = _eval_run(tmp_path / "expert", {"SoftLift": (1.0, 1.0), "SoftPlace": (0.8, 0.8)})
    table = script.per_task(mine, expert).splitlines()
    assert table[2] == "| SoftLift | 0.96 [0.90, 0.99] | 1.00 | 0.96 | 0.90 | 0.80 |"
    assert table[3] == "| SoftPlace | 0.50 [0.44, 0.53] | 0.80 | 0.62 | 0.55 | 0.00 |"


def test_goal_ratios_follow_the_two_runs_they_compare(tmp_path):
    mine = _eval_run(tmp_path / "mine", {"SoftLift": (0.96, 0.77), "SoftPlace": (0.5, 0.0)})
    expert = _eval_run(tmp_path / "expert", {"SoftLift": (1.0, 1.0), "SoftPlace": (0.8, 0.8)})
    fresh = _eval_run(tmp_path / "fresh", {"SoftLift": (0.9, 0.9), "SoftPlace": (0.7, 0.7)})
    text = "\n".join(script.results_section([mine, expert, fresh]))
    ratios = text.index("`mine` against `expert` (same specs):")
    assert text.index("### `expert`") < ratios < text.index("### `fresh`")
    assert text.index("| SoftLift | 0.96 [0.90, 0.99] | 1.00 | 0.96 |") > ratios


def test_dagger_section_lists_every_round(tmp_path):
    run = tmp_path / "dagger"
    run.mkdir()
    rounds = [{"round": 0, "train": {"init_from": "policies/x"}}] + [
        {
            "round": index,
            "rollouts": {
                "beta": 0.3 / 2 ** (index - 1),
                "tsr": _rate(0.8, 0.7, 0.9),
                "dsr": _rate(0.5, 0.4, 0.6),
                "expert_steps": 10 * index,
                "frames": 100,
            },
            "dataset": {"labelled_frames": 100, "episodes": 10 + index},
            "train": {"final_loss": 1.0 / index},
        }
        for index in (1, 2)
    ]
    config = {
        "rounds": 2,
        "dagger": {
            "episodes_per_round": 5,
            "steps_per_round": 30,
            "tasks": ["SoftLift"],
            "objects": ["sponge"],
            "seed": 5000,
            "labeller": {"_target_": "simroll.experts.SoftExpert", "closure": "gentle"},
        },
        "train": {"init_from": "policies/x", "dataset_root": "data/base"},
    }
    metrics = {"config": config, "rounds": rounds, "seconds": 600.0}
    (run / "dagger.json").write_text(json.dumps(metrics))
    section = script.dagger_section(run)
    assert "2 rounds from `policies/x` on base dataset `data/base`" in section
    assert (
        "| 1 | 0.3 | 0.80 [0.70, 0.90] | 0.50 [0.40, 0.60] | 10 of 100 | 100 | 11 | 1.000 |"
        in section
    )
    assert "| 2 | 0.15 |" in section and "10 minutes" in section
    assert "task_weights" not in section
    # a copy of dagger.json (its run directory gone) reads the same; task_weights are named
    config["train"]["task_weights"] = {"squeeze": 3.0}
    copy = tmp_path / "dagger_copy.json"
    copy.write_text(json.dumps(metrics))
    section = script.dagger_section(copy)
    assert "2 rounds from `policies/x`" in section and "| 2 | 0.15 |" in section
    assert 'task_weights `{"squeeze": 3.0}`' in section


@pytest.mark.slow
def test_an_unknown_inference_key_is_refused(tmp_path):
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"type": "simvla", "n_action_steps": 5}))
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "ship_policy.py"),
            "--checkpoint",
            str(checkpoint),
            "--name",
            "_test_ship_unknown_key",
            "--train-run",
            str(tmp_path),
            "--inference",
            "n_action_step=1",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    shipped = ROOT / "policies" / "_test_ship_unknown_key"
    try:
        assert result.returncode != 0
        assert "n_action_step" in result.stderr and "not in" in result.stderr
    finally:
        import shutil

        shutil.rmtree(shipped, ignore_errors=True)


def test_a_setting_the_checkpoint_predates_is_a_field_at_its_default():
    """--inference may set a config field newer than the checkpoint's config.json: the card
    then names the field's default as training's value."""
    defaults = load_script("ship_policy").config_defaults("trace_student")
    assert defaults["grasp_gate"] is False and "n_action_step" not in defaults


@pytest.mark.slow
def test_reship_keeps_the_training_sections_and_rewrites_settings_and_results(tmp_path):
    """--reship: a shipped policy gets a new inference setting and new results; its card's
    training and DAgger sections stay, and the inference line names training's value, also when
    re-shipped again."""
    import shutil

    target = ROOT / "policies" / "_test_reship"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir()
    try:
        (target / "config.json").write_text(json.dumps({"type": "diffusion", "n_action_steps": 2}))
        (target / "model.safetensors").write_bytes(b"weights")
        old_card = [
            "# `_test_reship`: diffusion policy",
            "",
            "## Training",
            "",
            "- data: `runs/x/dataset` (3 episodes)",
            "- recipe overrides: `{}`",
            "",
            "## Interactive imitation (DAgger)",
            "",
            "| round | beta |",
            "## Closed-loop results",
            "",
            "old results",
            "Training command: `simroll train dagger.rounds=4`",
            "Checkpoint selection: round 4",
        ]
        (target / "card.md").write_text("\n".join(old_card) + "\n")
        mine = _eval_run(tmp_path / "mine", {"SoftLift": (0.97, 0.88)})
        expert = _eval_run(tmp_path / "expert", {"SoftLift": (1.0, 1.0)})

        def reship(*extra):
            return subprocess.run(
                [
                    sys.executable,
                    str(ROOT / "scripts" / "ship_policy.py"),
                    "--name",
                    "_test_reship",
                    "--reship",
                    "--inference",
                    "n_action_steps=1",
                    "--eval-run",
                    str(mine),
                    "--eval-run",
                    str(expert),
                    *extra,
                ],
                capture_output=True,
                text=True,
                cwd=ROOT,
            )

        for _ in range(2):  # the second re-ship finds the first one's inference line
            result = reship()
            assert result.returncode == 0, result.stderr
            card = (target / "card.md").read_text()
            assert json.loads((target / "config.json").read_text())["n_action_steps"] == 1
            line = (
                '- inference settings changed from training\'s {"n_action_steps": 2}: '
                '`{"n_action_steps": 1}` (stored in `config.json`)'
            )
            assert card.count("inference settings changed") == 1 and line in card
            lines = card.splitlines()
            assert lines[lines.index(line) - 1] == "- recipe overrides: `{}`"
            assert "## Interactive imitation (DAgger)\n\n| round | beta |" in card
            assert "old results" not in card and "0.97 / 1.00" in card
            assert "Training command: `simroll train dagger.rounds=4`" in card
            assert "Checkpoint selection: round 4" in card
        refused = reship("--train-run", str(tmp_path))
        assert refused.returncode != 0 and "--reship" in refused.stderr
    finally:
        shutil.rmtree(target, ignore_errors=True)


def test_the_card_states_a_learning_rate_schedule_that_lerobot_fitted_to_the_steps():
    fitted = {
        "warmup_steps": 100,
        "decay_steps": 15000,
        "configured_warmup_steps": 200,
        "configured_decay_steps": 30000,
        "fitted_to_steps": True,
    }
    assert script.lr_schedule_line(fitted) == [
        "- learning-rate schedule as trained: warm-up 100, cosine decay over 15000 steps "
        "(LeRobot fitted the configured 200 / 30000 to the run's steps)"
    ]
    kept = {**fitted, "warmup_steps": 200, "decay_steps": 30000, "fitted_to_steps": False}
    assert script.lr_schedule_line(kept) == [
        "- learning-rate schedule: warm-up 200, cosine decay over 30000 steps"
    ]
    assert script.lr_schedule_line(None) == []  # a run from before the record
    assert script.lr_schedule_line({"type": "DiffuserSchedulerConfig", "steps": 5}) == []


def _ship(*args):
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "ship_policy.py"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_an_ensemble_card_lists_its_members_and_the_ensembles_results(tmp_path):
    """--ensemble-config: the card names each member shipped under the folder (size, noise
    seed, its own card) and the ensemble's results against the expert; a member's card points at
    the ensemble's; a member not shipped under the folder is refused, naming it."""
    import shutil

    import yaml

    target = ROOT / "policies" / "_test_ensemble"
    shutil.rmtree(target, ignore_errors=True)
    members = []
    try:
        for index in range(2):
            member = target / f"member_{index}"
            member.mkdir(parents=True)
            (member / "config.json").write_text(json.dumps({"type": "simvla"}))
            (member / "model.safetensors").write_bytes(b"w" * 1000)
            (member / "card.md").write_text("# member\n")
            members.append({"path": f"policies/_test_ensemble/member_{index}", "noise_seed": index})
        config = tmp_path / "ens.yaml"
        config.write_text(yaml.safe_dump({"weights": None, "members": members}))
        mine = _eval_run(tmp_path / "mine", {"SoftLift": (0.94, 0.93), "SoftPlace": (0.92, 0.88)})
        expert = _eval_run(tmp_path / "expert", {"SoftLift": (1.0, 1.0), "SoftPlace": (1.0, 1.0)})
        result = _ship(
            "--name", "_test_ensemble", "--ensemble-config", str(config),
            "--eval-run", str(mine), "--eval-run", str(expert),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        card = (target / "card.md").read_text()
        assert "an ensemble of 2 checkpoints" in card and "mean of their actions" in card
        assert "| 1 | `policies/_test_ensemble/member_1` | simvla | 0.0 MB | 1 |" in card
        assert "[card](member_0/card.md)" in card
        assert "| SoftPlace | 0.92 [0.86, 0.95] | 1.00 | 0.92 | 0.86 | 0.96 |" in card

        members.append({"path": "policies/vla_soft", "noise_seed": 2})
        config.write_text(yaml.safe_dump({"members": members}))
        refused = _ship("--name", "_test_ensemble", "--ensemble-config", str(config))
        assert refused.returncode != 0 and "member 2: policies/vla_soft" in refused.stderr
    finally:
        shutil.rmtree(target, ignore_errors=True)


def test_a_members_card_points_at_the_ensemble():
    lines = script.results_section([], member_of="ens")
    assert lines[0] == "## Closed-loop results" and "`policies/ens/card.md`" in lines[2]
