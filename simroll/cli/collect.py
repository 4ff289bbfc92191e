"""``simroll collect``: record a policy's episodes as a LeRobotDataset (demonstrations).

Runs the chosen policy (the gentle scripted expert by default) on the episode specs of the chosen
env group, built by ``make_specs`` with base seed 1000 so that demonstrations never repeat the
episodes ``simroll eval`` scores (seed 0), and writes them with :class:`DatasetRecorder` to
``output_dir`` (default ``data/<env>_<policy>``): full observations at ``env.image_size`` 96,
successful episodes only, per-episode evaluator data in ``meta/simroll_episodes.jsonl`` and the
resolved config in ``meta/simroll_collect.yaml``; the run manifest and its ``specs.jsonl``
(:mod:`simroll.rollout.manifest`) sit beside ``meta/``. The dataset is recorded in
``output_dir/.recording`` and moved into place once finalized, while the run holds ``output_dir``'s
lock; a multirun gives every job its own ``<output_dir>/<job number>``. Episodes run one after
another in this process (the local backend); the scripted expert needs the simulator it controls,
and the dataset writer lives here. The whole config is validated before the first episode.
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
from simroll.cli.common import ConfigError, env_config_from, policy_from  # noqa: E402
from simroll.cli.eval import CONFIG_DIR  # noqa: E402
from simroll.cli.rundir import (  # noqa: E402
    LOCK_FILENAME,
    Interrupted,
    check_output_dir_override,
    hold_run_dir,
    job_output_dir,
    one_line_errors,
)
from simroll.envs.soft import TASKS  # noqa: E402
from simroll.envs.variations import VARIATIONS  # noqa: E402
from simroll.evaluation import check_choice  # noqa: E402
from simroll.io import write_text_atomic  # noqa: E402
from simroll.rollout.episode import config_hash  # noqa: E402
from simroll.rollout.manifest import RunManifest, outcome_fingerprint, write_manifest  # noqa: E402
from simroll.rollout.runner import make_specs  # noqa: E402

CONFIG_RECORD = Path("meta") / "simroll_collect.yaml"
# The dataset is recorded here inside output_dir and moved up when finalized: LeRobot creates its
# root itself, while output_dir must exist from the start to hold the run's lock and manifest.
STAGING_DIRNAME = ".recording"


def validate(cfg: DictConfig) -> None:
    env = cfg.env
    check_choice("env.tasks", env.tasks, TASKS)
    check_choice("env.objects", env.objects, list_objects())
    check_choice("env.variations", env.variations, VARIATIONS)
    check_choice("env.obs_mode", [env.obs_mode], ("full", "state"))
    if not isinstance(cfg.episodes, int) or cfg.episodes < 1:
        raise ConfigError(f"episodes must be an integer >= 1, got {cfg.episodes!r}")
    if not isinstance(env.image_size, int) or not 16 <= env.image_size <= 1024:
        raise ConfigError(
            f"env.image_size must be an integer in [16, 1024], got {env.image_size!r}"
        )


def clear_output_dir(root: Path, overwrite: bool) -> None:
    """Empty ``root`` (held by this run) for a new dataset; refuse an earlier one unless
    ``overwrite``. Hydra has created ``root`` (its run dir) empty; anything in it but the lock is
    an earlier dataset (or an interrupted recording)."""
    earlier = [path for path in root.iterdir() if path.name != LOCK_FILENAME]
    if earlier and not overwrite:
        raise ConfigError(
            f"output_dir {root} already holds files; pass overwrite=true to replace it "
            "or choose another output_dir"
        )
    for path in earlier:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def run(cfg: DictConfig) -> int:
    validate(cfg)
    root = job_output_dir(cfg)
    env_config = env_config_from(cfg.env, cfg.policy)
    policy_factory, choice = policy_from(cfg)
    specs = make_specs(
        cfg.env.suite, cfg.env.tasks, cfg.env.objects, cfg.env.variations, cfg.episodes, cfg.seed
    )
    manifest = RunManifest(
        command="collect",
        fingerprint=outcome_fingerprint(
            OmegaConf.to_container(cfg.env, resolve=True),
            {"policy": (str(choice), OmegaConf.to_container(cfg.policy, resolve=True))},
            seed=cfg.seed,
        ),
        episodes=cfg.episodes,
        config=OmegaConf.to_container(cfg, resolve=True),
    )
    with hold_run_dir(root):
        clear_output_dir(root, cfg.overwrite)
        write_manifest(root, manifest, specs)
        print(f"simroll collect: {len(specs)} episodes of policy {choice!r} -> {root}")
        try:
            recorder = _record(
                cfg, root / STAGING_DIRNAME, specs, policy_factory, env_config, str(choice)
            )
        except KeyboardInterrupt:
            raise Interrupted(
                f"interrupted: the dataset in {root} is incomplete (its episodes so far are in "
                f"{root / STAGING_DIRNAME}, not finalized); rerun the same command with "
                "overwrite=true to record it again"
            ) from None
        for path in (root / STAGING_DIRNAME).iterdir():
            path.rename(root / path.name)
        (root / STAGING_DIRNAME).rmdir()
        write_text_atomic(root / CONFIG_RECORD, OmegaConf.to_yaml(cfg, resolve=True))
    dropped = recorder.episodes_dropped
    print(
        f"simroll collect: wrote {recorder.episodes_written} episodes, "
        f"{recorder.frames_written} frames to {root}"
        + (f" ({dropped} episodes left out: failed or empty)" if dropped else "")
    )
    if recorder.episodes_written == 0:
        print("simroll collect: no episode was kept; the dataset is empty", file=sys.stderr)
        return 1
    return 0


def _record(cfg: DictConfig, root: Path, specs, policy_factory, env_config, choice: str):
    """Record ``specs`` of policy ``choice`` as a new LeRobotDataset at ``root``; the finalized
    recorder (its counts say what was written)."""
    # Imported here: LeRobot's dataset stack takes seconds to import.
    from simroll.rollout.dataset import record_specs

    return record_specs(
        root,
        specs,
        policy_factory,
        env_config,
        progress=cfg.progress,
        episode_kwargs={
            "policy_id": choice,
            "policy_config_hash": config_hash(OmegaConf.to_container(cfg.policy, resolve=True)),
        },
        repo_id=cfg.repo_id,
        use_videos=cfg.use_videos,
        with_tactile_image=cfg.tactile_image,
        only_success=cfg.only_success,
    )


@hydra.main(config_path=CONFIG_DIR, config_name="collect", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    with one_line_errors("collect"):
        status = run(cfg)
    if status:
        sys.exit(status)


def main() -> None:
    check_output_dir_override("collect", sys.argv[1:])
    _hydra_main()
