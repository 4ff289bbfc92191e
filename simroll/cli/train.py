"""``simroll train``: train a learned policy from a LeRobotDataset with a Hydra config.

``simroll train policy=diffusion env=soft_lift`` reads the training recipe in the policy config
(``policy.train``: LeRobot policy type, input features, config overrides) and the dataset root
(``dataset``; made by ``simroll collect``), trains with :func:`simroll.train.trainer.train`, and
leaves ``<output_dir>/{metrics.csv,metrics.json,checkpoints/last}``, holding ``output_dir``'s
lock while it trains. With ``dagger.rounds=N`` (N > 0) it runs interactive imitation instead
(:func:`simroll.train.dagger.run_dagger`: rollouts on ``env``'s tasks and objects through
``backend``, labelled by ``dagger.labeller``), leaving ``round_XX/``, ``final_round_XX/``,
``dagger.json`` and ``dagger.png``; rerunning the same command resumes it. ``-m`` multiruns sweep
over overrides (e.g. ``seed=0,1``); every job writes to its own ``<output_dir>/<job number>``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from simroll.cli import schema  # noqa: F401  (registers the config schemas)
from simroll.cli.rundir import (
    Interrupted,
    check_output_dir_override,
    hold_run_dir,
    job_output_dir,
    one_line_errors,
)
from simroll.train.dagger import DaggerConfig, DaggerError, run_dagger
from simroll.train.trainer import (
    TrainConfig,
    TrainingDataError,
    check_lr_schedule,
    check_task_weights,
    train,
)

CONFIG_DIR = str(Path(__file__).resolve().parents[1] / "_data" / "configs")


def run(cfg: DictConfig) -> dict:
    recipe = cfg.policy.get("train")
    if recipe is None:
        raise TrainingDataError(
            f"policy config has no `train` recipe: {OmegaConf.to_yaml(cfg.policy)}"
        )
    output_dir = job_output_dir(cfg)
    train_config = TrainConfig(
        dataset_root=str(cfg.dataset),
        output_dir=str(output_dir),
        policy_type=recipe.type,
        input_features=list(recipe.input_features),
        policy_overrides=OmegaConf.to_container(recipe.overrides, resolve=True),
        steps=cfg.steps,
        batch_size=cfg.batch_size,
        seed=cfg.seed,
        log_every=cfg.log_every,
        checkpoint_every=cfg.checkpoint_every,
        threads=cfg.threads,
        ema_decay=recipe.get("ema_decay"),
        init_from=None if cfg.get("init_from") is None else str(cfg.init_from),
        task_weights=OmegaConf.to_container(cfg.task_weights, resolve=True)
        if cfg.get("task_weights") is not None
        else {},
        fit_lr_schedule=cfg.fit_lr_schedule,
    )
    if train_config.task_weights:  # refused now, not after DAgger's first rollouts
        check_task_weights(train_config)
    check_lr_schedule(train_config)
    if cfg.dagger.rounds > 0:
        return _dagger(cfg, train_config, output_dir)
    with hold_run_dir(output_dir):
        try:
            summary = train(train_config, progress=cfg.progress)
        except KeyboardInterrupt:
            raise Interrupted(
                f"interrupted: training stopped; the checkpoints saved so far are in "
                f"{output_dir / 'checkpoints'} (init_from=<one of them> continues from it)"
            ) from None
    print(
        f"trained {summary['policy_type']} ({summary['parameters']:,} parameters) for "
        f"{summary['steps']} steps in {summary['seconds']:.0f} s: loss {summary['first_loss']:.4f}"
        f" -> {summary['final_loss']:.4f}; checkpoint {summary['checkpoint']}"
    )
    schedule = summary["lr_schedule"]
    if schedule.get("fitted_to_steps"):
        print(
            f"note: LeRobot fitted the learning-rate schedule to the {summary['steps']} steps "
            f"(decay {schedule['configured_decay_steps']} -> {schedule['decay_steps']}, warm-up "
            f"{schedule['configured_warmup_steps']} -> {schedule['warmup_steps']}); "
            "fit_lr_schedule=false keeps the configured one"
        )
    return summary


def dagger_config(cfg: DictConfig) -> DaggerConfig:
    """The :class:`DaggerConfig` of a ``simroll train`` config (its ``dagger``, ``env`` and
    ``backend`` sections); the labeller is a policy config name."""
    from simroll.policies.resolve import policy_config

    section = cfg.dagger
    return DaggerConfig(
        rounds=section.rounds,
        episodes_per_round=section.episodes_per_round,
        steps_per_round=section.steps_per_round,
        beta=section.beta,
        beta_decay=section.beta_decay,
        perturb=None
        if section.get("perturb") is None
        else OmegaConf.to_container(section.perturb, resolve=True),
        final_episodes=section.final_episodes,
        labeller=policy_config(section.labeller),
        suite=cfg.env.suite,
        tasks=tuple(cfg.env.tasks),
        objects=tuple(cfg.env.objects),
        variations=tuple(cfg.env.variations),
        rigid_twin=cfg.env.rigid_twin,
        backend=cfg.backend.name,
        workers=cfg.backend.workers,
        seed=section.seed,
    )


def _dagger(cfg: DictConfig, train_config: TrainConfig, output_dir: Path) -> dict:
    dagger = dagger_config(cfg)
    with hold_run_dir(output_dir):
        try:
            metrics = run_dagger(train_config, dagger, progress=cfg.progress)
        except KeyboardInterrupt:
            raise Interrupted(
                f"interrupted: DAgger stopped; rerun the same command to continue from its last "
                f"finished stage in {output_dir}"
            ) from None
    final = metrics.get("final")
    print(
        f"dagger: {dagger.rounds} round(s), dataset now {metrics['dataset_episodes']} episodes; "
        f"checkpoint {metrics['checkpoint']}"
        + (
            f"; final TSR {final['tsr']['rate']:.2f}, DSR {final['dsr']['rate']:.2f} "
            f"({final['episodes']} episodes)"
            if final
            else ""
        )
        + f"; metrics {output_dir / 'dagger.json'}, plot {output_dir / 'dagger.png'}"
    )
    return metrics


@hydra.main(config_path=CONFIG_DIR, config_name="train", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    with one_line_errors("train"):
        try:
            run(cfg)
        except (TrainingDataError, DaggerError, ValueError) as exc:
            print(f"simroll train: error: {exc}", file=sys.stderr)
            sys.exit(2)


def main() -> None:
    check_output_dir_override("train", sys.argv[1:])
    _hydra_main()
