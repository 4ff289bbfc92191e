"""``simroll eval``: evaluate a policy in closed loop and write records, a report and videos.

Validates the whole config before any episode runs (unknown tasks, objects, variations, backends or
bad counts fail naming the value and the valid choices), builds the episode specs, holds
``output_dir``'s lock, writes the run manifest (:mod:`simroll.rollout.manifest`; a resume with
other outcome settings is refused, growing ``episodes`` is allowed), runs the specs through the
chosen backend into ``output_dir`` (resumable; Ctrl-C keeps what finished and exits 130), prints
the TSR/DSR table and writes ``summary.json``, ``summary.md``, ``tolerance_curve.png`` and
``videos/*.mp4``; with ``record=true`` also ``dataset/``, the evaluated episodes as a
LeRobotDataset (re-run in this process, as the videos are). In a multirun (``-m``) each job writes
to ``<output_dir>/<job number>``.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import hydra  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from simroll.assets import list_objects  # noqa: E402
from simroll.cli import schema  # noqa: E402, F401  (registers the config schemas)
from simroll.cli.common import (  # noqa: E402
    ConfigError,
    check_policy_loads,
    env_config_from,
    policy_from,
)
from simroll.cli.rundir import (  # noqa: E402
    check_output_dir_override,
    hold_run_dir,
    job_output_dir,
    kept_on_interrupt,
    one_line_errors,
)
from simroll.envs.soft import TASKS  # noqa: E402
from simroll.envs.variations import VARIATIONS  # noqa: E402
from simroll.report import write_html_report_or_warn  # noqa: E402
from simroll.rollout.backends import BACKENDS, EpisodeJob  # noqa: E402
from simroll.rollout.episode import (  # noqa: E402
    config_hash,
    latency_to_delay_steps,
    measure_latency,
)
from simroll.rollout.manifest import RunManifest, outcome_fingerprint, start_run  # noqa: E402
from simroll.rollout.runner import count_errors, evaluate, make_specs  # noqa: E402
from simroll.rollout.video import record_video  # noqa: E402
from simroll.rollout.worker_start import start_worker_server  # noqa: E402
from simroll.scoring.report import write_report  # noqa: E402

EXIT_EPISODE_ERRORS = 1  # some episodes ended in error (the report is still written)
CONFIG_DIR = str(Path(__file__).resolve().parents[1] / "_data" / "configs")


def _check_choice(key: str, values, valid) -> None:
    for value in values:
        if value not in valid:
            raise ConfigError(f"{key}: unknown value {value!r}; expected one of {sorted(valid)}")


def validate(cfg: DictConfig) -> None:
    env = cfg.env
    _check_choice("env.tasks", env.tasks, TASKS)
    _check_choice("env.objects", env.objects, list_objects())
    _check_choice("env.variations", env.variations, VARIATIONS)
    _check_choice("backend.name", [cfg.backend.name], BACKENDS)
    if not isinstance(cfg.episodes, int) or cfg.episodes < 1:
        raise ConfigError(f"episodes must be an integer >= 1, got {cfg.episodes!r}")
    if not isinstance(cfg.control_delay_steps, int) or cfg.control_delay_steps < 0:
        raise ConfigError(
            f"control_delay_steps must be an integer >= 0, got {cfg.control_delay_steps!r}"
        )
    latency = cfg.policy_latency_s
    if (
        latency is not None
        and latency != "measured"
        and not (isinstance(latency, int | float) and latency >= 0)
    ):
        raise ConfigError(
            f"policy_latency_s must be null, 'measured' or seconds >= 0, got {latency!r}"
        )
    if not isinstance(cfg.backend.workers, int) or cfg.backend.workers < 1:
        raise ConfigError(f"backend.workers must be an integer >= 1, got {cfg.backend.workers!r}")
    if not isinstance(cfg.record, bool):
        raise ConfigError(f"record must be true or false, got {cfg.record!r}")


def run(cfg: DictConfig) -> str:
    validate(cfg)
    if cfg.backend.name == "vector":  # the workers' imports overlap this process's start-up
        start_worker_server(cfg.policy.get("_target_"))
    run_dir = job_output_dir(cfg)
    env_config = env_config_from(cfg.env, cfg.policy, restrict_cameras=not cfg.record)
    policy_factory, choice = policy_from(cfg)
    policy_cfg = OmegaConf.to_container(cfg.policy, resolve=True)
    specs = make_specs(
        cfg.env.suite, cfg.env.tasks, cfg.env.objects, cfg.env.variations, cfg.episodes, cfg.seed
    )
    try:
        check_policy_loads(policy_factory, env_config, specs[0])
    except ValueError as exc:  # PolicyLoadError, AssetError, bad policy arguments
        raise ConfigError(f"policy {choice!r} cannot run on {specs[0].task}: {exc}") from exc
    delay = cfg.control_delay_steps
    if cfg.policy_latency_s is not None:
        if cfg.policy_latency_s == "measured":
            latency = measure_latency(specs[0], policy_factory, env_config)
        else:
            latency = float(cfg.policy_latency_s)
        delay = latency_to_delay_steps(latency)
        print(f"policy latency {latency * 1000:.1f} ms -> control delay of {delay} step(s)")
    job = EpisodeJob(
        policy_factory=policy_factory,
        env_config=env_config,
        policy_id=str(choice),
        policy_config_hash=config_hash(policy_cfg),
        control_delay_steps=delay,
    )
    manifest = RunManifest(
        command="eval",
        fingerprint=outcome_fingerprint(
            OmegaConf.to_container(cfg.env, resolve=True),
            {"policy": (str(choice), policy_cfg)},
            seed=cfg.seed,
            control_delay_steps=delay,
        ),
        episodes=cfg.episodes,
        config=OmegaConf.to_container(cfg, resolve=True),
    )
    with hold_run_dir(run_dir), kept_on_interrupt(run_dir, specs):
        note = start_run(run_dir, manifest, specs, episodes_may_change=True)
        if note:
            print(note)
        print(f"simroll eval: {len(specs)} episodes of policy {choice!r} -> {run_dir}")
        records = evaluate(
            run_dir,
            specs,
            job,
            backend=cfg.backend.name,
            workers=cfg.backend.workers,
            progress=cfg.progress,
        )
        table = write_report(
            run_dir, records, OmegaConf.to_container(cfg, resolve=True), expected=len(specs)
        )
        print(table)
        _record_videos_and_dataset(cfg, run_dir, records, job)
        print(f"report: {run_dir / 'summary.md'}, plot: {run_dir / 'tolerance_curve.png'}")
        write_html_report_or_warn(run_dir)  # never raises: a page failure is only a warning
    errors = count_errors(records)
    if errors:  # the scores are written, but a run with errored episodes must not look clean
        print(
            f"simroll eval: ERROR: {errors} of {len(specs)} episodes ended in error and count as "
            f"failures (listed in {run_dir / 'summary.md'})",
            file=sys.stderr,
        )
        sys.exit(EXIT_EPISODE_ERRORS)
    return table


def _record_videos_and_dataset(cfg: DictConfig, run_dir: Path, records, job: EpisodeJob) -> None:
    """The ``video.episodes`` videos (failures first) and, with ``record=true``, the dataset."""
    # Never episodes in error: re-running one here could kill this process as it killed its
    # worker (a segfault, os._exit), before the report and the exit status are written.
    scored = [record for record in records if record.error is None]
    if cfg.video.episodes > 0 and scored:
        chosen = sorted(scored, key=lambda r: (r.dsr_success, r.success, r.spec.key))
        for record in chosen[: cfg.video.episodes]:
            name = record.spec.key.replace("/", "_") + ".mp4"
            path, _ = record_video(
                record.spec,
                job.policy_factory,
                job.env_config,
                run_dir / "videos" / name,
                size=tuple(cfg.video.size),
                control_delay_steps=job.control_delay_steps,
            )
            print(f"video: {path}")
    if cfg.record and scored:
        # Like the videos, a re-run of the scored specs in this process (episodes are
        # deterministic for a deterministic policy); each dataset episode stores its own record.
        # Imported here: LeRobot's dataset stack takes seconds to import.
        from simroll.rollout.dataset import record_specs

        dataset_dir = run_dir / "dataset"
        if dataset_dir.exists():
            shutil.rmtree(dataset_dir)  # a resumed run re-records every episode
        recorder = record_specs(
            dataset_dir,
            [record.spec for record in scored],
            job.policy_factory,
            job.env_config,
            progress=cfg.progress,
            episode_kwargs={
                "policy_id": job.policy_id,
                "policy_config_hash": job.policy_config_hash,
                "control_delay_steps": job.control_delay_steps,
            },
            repo_id=f"simroll/eval_{job.policy_id}",
        )
        left_out = len(records) - len(scored)
        print(
            f"dataset: {dataset_dir} ({recorder.episodes_written} episodes, "
            f"{recorder.frames_written} frames"
            + (f"; {left_out} episodes in error left out)" if left_out else ")")
        )


@hydra.main(config_path=CONFIG_DIR, config_name="eval", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    with one_line_errors("eval"):
        run(cfg)


def main() -> None:
    check_output_dir_override("eval", sys.argv[1:])
    _hydra_main()
