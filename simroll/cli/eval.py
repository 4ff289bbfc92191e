"""``simroll eval``: evaluate a policy in closed loop and write records, a report and videos.

Validates the whole config before any episode runs (unknown tasks, objects, variations, backends
or bad counts fail naming the value and the valid choices), builds the episode specs, runs them
through the chosen backend into ``output_dir`` (resumable), prints the TSR/DSR table and writes
``summary.json``, ``summary.md``, ``tolerance_curve.png`` and ``videos/*.mp4``; with
``record=true`` also ``dataset/``, the evaluated episodes as a LeRobotDataset (re-run in this
process, as the videos are).
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
from simroll.cli.common import (  # noqa: E402
    ConfigError,
    check_policy_loads,
    env_config_from,
    policy_from,
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
from simroll.rollout.runner import evaluate, make_specs  # noqa: E402
from simroll.rollout.video import record_video  # noqa: E402
from simroll.scoring.report import write_report  # noqa: E402

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
    env_config = env_config_from(cfg.env)
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
    run_dir = Path(cfg.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
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
    if cfg.video.episodes > 0 and records:
        chosen = sorted(records, key=lambda r: (r.dsr_success, r.success, r.spec.key))
        for record in chosen[: cfg.video.episodes]:
            name = record.spec.key.replace("/", "_") + ".mp4"
            path, _ = record_video(
                record.spec,
                policy_factory,
                env_config,
                run_dir / "videos" / name,
                size=tuple(cfg.video.size),
                control_delay_steps=delay,
            )
            print(f"video: {path}")
    if cfg.record and records:
        # Like the videos, a re-run of the scored specs in this process (episodes are
        # deterministic for a deterministic policy); each dataset episode stores its own record.
        # Imported here: LeRobot's dataset stack takes seconds to import.
        from simroll.rollout.dataset import record_specs

        dataset_dir = run_dir / "dataset"
        if dataset_dir.exists():
            shutil.rmtree(dataset_dir)  # a resumed run re-records every episode
        recorder = record_specs(
            dataset_dir,
            [record.spec for record in records],
            policy_factory,
            env_config,
            progress=cfg.progress,
            episode_kwargs={
                "policy_id": str(choice),
                "policy_config_hash": config_hash(policy_cfg),
                "control_delay_steps": delay,
            },
            repo_id=f"simroll/eval_{choice}",
        )
        print(
            f"dataset: {dataset_dir} ({recorder.episodes_written} episodes, "
            f"{recorder.frames_written} frames)"
        )
    print(f"report: {run_dir / 'summary.md'}, plot: {run_dir / 'tolerance_curve.png'}")
    write_html_report_or_warn(run_dir)  # never raises: a page failure is only a warning
    return table


@hydra.main(config_path=CONFIG_DIR, config_name="eval", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    try:
        run(cfg)
    except ConfigError as exc:
        print(f"simroll eval: config error: {exc}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    _hydra_main()
