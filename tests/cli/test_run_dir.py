"""Run directories under faults: resumes with other settings, a directory in use, an
``output_dir`` that is a file or not writable, Ctrl-C, and ``simroll report`` reading the run
manifest instead of re-deriving the expected episodes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

from simroll.cli import rundir
from simroll.cli.eval import CONFIG_DIR, run
from simroll.cli.report import main as report_main
from simroll.cli.rundir import Interrupted, RunDirError, hold_run_dir, prepare_run_dir
from simroll.report.runs import load_eval_run
from simroll.rollout.manifest import ManifestError, RunManifest, read_manifest, write_manifest
from simroll.rollout.runner import make_specs
from simroll.rollout.store import RecordStore
from tests.helpers import simroll
from tests.report.conftest import SPECS, write_eval_run

FAST = ["env=soft_lift", "env.objects=[sponge]", "video.episodes=0", "progress=false"]


def eval_in_process(*overrides: str) -> str:
    """What ``simroll eval <overrides>`` runs, without a new interpreter (saves the imports)."""
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("eval", overrides=list(overrides), return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)  # the policy's name comes from Hydra's choices
        with open_dict(cfg):
            del cfg["hydra"]  # as under @hydra.main
        try:
            return run(cfg)
        finally:
            HydraConfig.instance().cfg = None


def record_lines(run_dir: Path) -> list[str]:
    return (run_dir / "records.jsonl").read_text().splitlines()


def test_resume_with_another_delay_is_refused_and_growing_episodes_is_said(tmp_path):
    first = simroll("eval", *FAST, "episodes=1", f"output_dir={tmp_path}")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    kept = record_lines(tmp_path)
    delayed = simroll(
        "eval", *FAST, "episodes=2", "control_delay_steps=3", f"output_dir={tmp_path}"
    )
    assert delayed.returncode == 2
    assert delayed.stderr.strip().splitlines() == [
        f"simroll eval: output_dir {tmp_path} was made with other settings: "
        "control_delay_steps 0 -> 3; use a new output_dir"
    ]
    assert record_lines(tmp_path) == kept  # refused before any episode ran
    grown = simroll("eval", *FAST, "episodes=2", f"output_dir={tmp_path}")
    assert grown.returncode == 0, grown.stdout[-3000:] + grown.stderr[-3000:]
    assert "the run grows from 1 to 2 episodes" in grown.stdout
    assert record_lines(tmp_path)[:1] == kept and len(record_lines(tmp_path)) == 2
    assert read_manifest(tmp_path).episodes == 2


@pytest.fixture(scope="module")
def one_episode_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("eval") / "run"
    eval_in_process(*FAST, "episodes=1", f"output_dir={out}")
    return out


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("policy=expert_firm", "policy expert -> expert_firm"),
        ("env.gripper_mode=continuous", "env.gripper_mode delta -> continuous"),
        ("seed=7", "seed 0 -> 7"),
        ("env.obs_mode=full", "env.obs_mode state -> full"),
    ],
)
def test_resume_with_another_policy_env_or_seed_is_refused(
    one_episode_run, tmp_path, override, named
):
    out = tmp_path / "run"
    shutil.copytree(one_episode_run, out)
    kept = record_lines(out)
    with pytest.raises(ManifestError, match="was made with other settings") as error:
        eval_in_process(*FAST, "episodes=1", override, f"output_dir={out}")
    assert named in str(error.value)
    assert record_lines(out) == kept


def test_a_directory_in_use_is_refused_at_once_naming_the_pid(tmp_path):
    with hold_run_dir(tmp_path):
        result = simroll("eval", *FAST, "episodes=1", f"output_dir={tmp_path}")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"simroll eval: {tmp_path} is in use by another simroll run (pid {os.getpid()}); wait "
        "for it to finish or choose another output_dir"
    ]
    assert not (tmp_path / "records.jsonl").exists()


def test_the_lock_is_released_when_the_run_ends(tmp_path):
    with hold_run_dir(tmp_path):
        with pytest.raises(RunDirError, match=f"pid {os.getpid()}"):
            with hold_run_dir(tmp_path):
                pass
    with hold_run_dir(tmp_path):  # free again
        pass


@pytest.mark.parametrize("command", ["eval", "collect", "certify", "train"])
def test_output_dir_that_is_a_file_is_one_line_before_hydra_starts(tmp_path, command):
    path = tmp_path / "a_file"
    path.write_text("not a directory")
    result = simroll(command, f"output_dir={path}")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"simroll {command}: output_dir {path} is a file; expected a directory (or a path that "
        "does not exist)"
    ]
    if command == "eval":  # the same check for every command; once is enough for a path below
        below = simroll(command, f"output_dir={path / 'run'}")
        assert below.returncode == 2
        assert below.stderr.strip() == (
            f"simroll {command}: output_dir {path / 'run'} cannot be created: {path} is a file"
        )


def test_output_dir_checks_in_process(tmp_path, monkeypatch):
    path = tmp_path / "a_file"
    path.write_text("")
    with pytest.raises(RunDirError, match="is a file; expected a directory"):
        prepare_run_dir(path)
    with pytest.raises(RunDirError, match="cannot be created: Not a directory"):
        prepare_run_dir(path / "run")
    read_only = tmp_path / "read_only"
    read_only.mkdir()
    real_open = os.open

    def refuse_in_read_only(file, *args, **kwargs):
        if Path(file).parent == read_only:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(rundir.os, "open", refuse_in_read_only)
    with pytest.raises(RunDirError, match=f"output_dir {read_only} is not writable: Permission"):
        with hold_run_dir(read_only):
            pass
    monkeypatch.setattr(rundir.os, "access", lambda path, mode: False)
    with pytest.raises(SystemExit) as exit_:
        rundir.check_output_dir_override("eval", [f"output_dir={read_only / 'run'}"])
    assert exit_.value.code == 2


def test_ctrl_c_keeps_finished_episodes_and_says_how_to_resume(tmp_path, monkeypatch):
    def one_then_ctrl_c(run_dir, specs, job, **kwargs):
        from simroll.rollout.backends import run_local

        RecordStore(run_dir).append(next(run_local(job, specs[:1])))
        raise KeyboardInterrupt

    monkeypatch.setattr("simroll.evaluation.run_specs", one_then_ctrl_c)
    with pytest.raises(Interrupted) as error:
        eval_in_process(*FAST, "episodes=2", f"output_dir={tmp_path}")
    assert str(error.value) == (
        f"interrupted: 1 of 2 episodes kept in {tmp_path}; rerun the same command to resume"
    )


def test_ctrl_c_from_the_command_line_exits_130_with_one_line(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "simroll.cli.main", "eval", *FAST, "episodes=4"]
        + [f"output_dir={tmp_path}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a test run in the background inherits an ignored SIGINT; the CLI must see a real one
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    records = tmp_path / "records.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and process.poll() is None:
        if records.exists() and records.read_text().count("\n") >= 1:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    kept = len(record_lines(tmp_path))
    assert process.returncode == 130, stderr
    assert 1 <= kept < 4
    assert stderr.strip().splitlines()[-1] == (
        f"simroll eval: interrupted: {kept} of 4 episodes kept in {tmp_path}; rerun the same "
        "command to resume"
    )


def test_report_reads_the_expected_episodes_from_the_manifest(tmp_path):
    run_dir = write_eval_run(tmp_path / "run")
    # The config in summary.json claims SPECS; the manifest says what the run really expected.
    expected = [*SPECS, *make_specs("soft", ["SoftSqueeze"], ["tofu"], ["default"], 1)]
    write_manifest(run_dir, RunManifest("eval", {"seed": 0}, 2), expected)
    run = load_eval_run(run_dir)
    assert run.expected == expected
    assert [spec.key for spec in run.missing] == [expected[-1].key]
    assert not any("manifest" in problem.what for problem in run.problems)


def test_report_falls_back_to_the_config_without_a_manifest_and_says_so(tmp_path):
    run = load_eval_run(write_eval_run(tmp_path / "run"))
    assert run.expected == SPECS
    warning = [p for p in run.problems if "no manifest.json" in p.what]
    assert warning and warning[0].severity == "warning"
    assert "re-derived from the run's config" in warning[0].what


def test_report_on_a_multirun_sweep_root_names_its_jobs(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    for job in ("0", "1"):
        write_manifest(sweep / job, RunManifest("eval", {"seed": int(job)}, 1), SPECS[:1])
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    with pytest.raises(SystemExit) as exit_:
        report_main([str(sweep)])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == (
        f"simroll report: {sweep} holds a multirun (-m) sweep, one run directory per job (0, 1); "
        f"report each job, e.g. `simroll report {sweep / '0'}`"
    )


def test_report_takes_the_config_from_the_manifest_before_hydra_s_copy(tmp_path):
    run_dir = write_eval_run(tmp_path / "run", summary=False)
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "config.yaml").write_text("control_delay_steps: 3\n")  # a refused run's
    config = {"control_delay_steps": 0, "episodes": 3}
    write_manifest(run_dir, RunManifest("eval", {"seed": 0}, 3, config=config), SPECS)
    run = load_eval_run(run_dir)
    assert run.config == config
    assert any(f"the config comes from {run_dir / 'manifest.json'}" in p.what for p in run.problems)
