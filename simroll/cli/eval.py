"""``simroll eval``: the Hydra front end of :func:`simroll.evaluate`.

Maps ``configs/eval.yaml`` onto :func:`simroll.evaluation.run_evaluation`: checks every setting
first (unknown tasks, objects, variations, backends or bad counts fail naming the config key and
the valid choices), applies a policy checkpoint's recorded env settings unless the command line
sets them, builds the chosen policy (its keys checked against its factory), and runs the plan into
``output_dir``: records, ``summary.json``/``summary.md``/``tolerance_curve.png``, the
``video.episodes`` videos (chosen before the run, see
:func:`simroll.evaluation.choose_video_specs`) and, with ``record=true``, ``dataset/``, all from
the scored episodes in one pass. Config errors and a refused resume are one line and exit status
2, Ctrl-C keeps what finished and exits 130, and a run with episodes in error exits 1 after
writing its report. In a multirun (``-m``) each job writes to ``<output_dir>/<job number>``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import hydra  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from simroll.cli import schema  # noqa: E402, F401  (registers the config schemas)
from simroll.cli.common import env_config_from, policy_from  # noqa: E402
from simroll.cli.rundir import (  # noqa: E402
    check_output_dir_override,
    job_output_dir,
    one_line_errors,
)
from simroll.evaluation import (  # noqa: E402
    CONFIG_KEYS,
    EvalPlan,
    check_env,
    check_settings,
    run_evaluation,
)
from simroll.policies.resolve import ResolvedPolicy  # noqa: E402
from simroll.rollout.lerobot_io import WRITER_MODULES  # noqa: E402
from simroll.rollout.worker_start import start_worker_server  # noqa: E402

EXIT_EPISODE_ERRORS = 1  # some episodes ended in error (the report is still written)
CONFIG_DIR = str(Path(__file__).resolve().parents[1] / "_data" / "configs")


def validate(cfg: DictConfig) -> None:
    """Every setting of ``cfg`` checked, errors naming its config key."""
    check_settings(
        tasks=cfg.env.tasks,
        objects=cfg.env.objects,
        variations=cfg.env.variations,
        episodes=cfg.episodes,
        control_delay_steps=cfg.control_delay_steps,
        policy_latency_s=cfg.policy_latency_s,
        backend=cfg.backend.name,
        workers=cfg.backend.workers,
        record=cfg.record,
        videos=cfg.video.episodes,
        video_size=list(cfg.video.size),
        names=CONFIG_KEYS,
    )


def plan_from(cfg: DictConfig) -> EvalPlan:
    """The evaluation ``cfg`` asks for (validated, the policy built)."""
    validate(cfg)
    if cfg.backend.name == "vector":  # the workers' imports overlap this process's start-up
        # with record=true the workers write dataset shards: LeRobot's dataset stack too
        start_worker_server(cfg.policy.get("_target_"), WRITER_MODULES if cfg.record else ())
    run_dir = job_output_dir(cfg)
    env_config = env_config_from(cfg.env, cfg.policy)
    check_env(env_config, names=CONFIG_KEYS)
    policy_factory, choice = policy_from(cfg)
    policy = ResolvedPolicy(
        policy_factory, str(choice), OmegaConf.to_container(cfg.policy, resolve=True)
    )
    return EvalPlan(
        policy=policy,
        env=env_config,
        suite=cfg.env.suite,
        tasks=tuple(cfg.env.tasks),
        objects=tuple(cfg.env.objects),
        variations=tuple(cfg.env.variations),
        episodes=cfg.episodes,
        seed=cfg.seed,
        run_dir=run_dir,
        control_delay_steps=cfg.control_delay_steps,
        policy_latency_s=cfg.policy_latency_s,
        backend=cfg.backend.name,
        workers=cfg.backend.workers,
        videos=cfg.video.episodes,
        video_size=(int(cfg.video.size[0]), int(cfg.video.size[1])),
        record=cfg.record,
        progress=cfg.progress,
        config=OmegaConf.to_container(cfg, resolve=True),
    )


def run(cfg: DictConfig) -> str:
    """Run ``simroll eval`` for ``cfg``; returns the report table, exits 1 on episodes in error."""
    result = run_evaluation(plan_from(cfg))
    if result.errors:  # the scores are written, but a run with errored episodes must not look clean
        print(
            f"simroll eval: ERROR: {result.errors} of {len(result.records)} episodes ended in "
            f"error and count as failures (listed in {result.run_dir / 'summary.md'})",
            file=sys.stderr,
        )
        sys.exit(EXIT_EPISODE_ERRORS)
    return result.table


@hydra.main(config_path=CONFIG_DIR, config_name="eval", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    with one_line_errors("eval"):
        run(cfg)


def main() -> None:
    check_output_dir_override("eval", sys.argv[1:])
    _hydra_main()
