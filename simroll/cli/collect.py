"""``simroll collect``: record a policy's episodes as a LeRobotDataset (demonstrations).

Runs the chosen policy (the gentle scripted expert by default) on the episode specs of the chosen
env group, built by ``make_specs`` with base seed 1000 so that demonstrations never repeat the
episodes ``simroll eval`` scores (seed 0), through the same episode engine as ``simroll eval``
(:func:`simroll.rollout.runner.evaluate`) on the chosen backend (``backend=local``, ``vector``
with ``backend.workers`` processes, or ``ray``): one code path whatever the backend, so the same
command gives the same dataset on each. Every episode is recorded in the worker that runs it as
its own finished dataset shard (:class:`~simroll.rollout.dataset.DatasetShards`: full
observations at ``env.image_size`` 96, videos, the tactile image); once every episode has run,
the shards of the kept episodes (``only_success``: the successful ones; otherwise every one
that ended without error) are joined in spec order with LeRobot's ``aggregate_datasets``
(:func:`~simroll.rollout.dataset.merge_shards`).

``output_dir`` (default ``data/<env>_<policy>``) is then a LeRobotDataset root: ``meta/``
(with the per-episode evaluator data ``meta/simroll_episodes.jsonl`` and the resolved config
``meta/simroll_collect.yaml``), ``data/``, ``videos/``; beside ``meta/`` sit the run manifest and
its ``specs.jsonl`` (:mod:`simroll.rollout.manifest`) and the hidden ``.collect/``, which holds
the run's record store (``records.jsonl``, kept: it documents the run) and, while the run lasts,
the shards (``.collect/shards/``) and the merged dataset before it is moved into place
(``.collect/dataset/``, ``meta/`` moved last). So ``meta/`` exists only once the dataset is
complete, and the shards are removed after that.

Resume: an interrupted collect (Ctrl-C, a killed process or machine) rerun with the same command
keeps the episodes that finished (their records and shards) and runs the rest; a finished one
rerun does nothing. A rerun with other settings (env, policy, seed, episodes, the dataset
settings; not the backend) is refused before any episode runs, naming what differs;
``overwrite=true`` empties ``output_dir`` and starts over. Shards recorded with other features
(by a simroll version that changed them, before the resume) cannot be joined: the run stops
there, naming what differs, and keeps its records. The run holds ``output_dir``'s lock
throughout; a multirun gives every job its own ``<output_dir>/<job number>``. The whole config is
validated, and the policy built once, before the first episode.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import hydra  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from simroll.cli import schema  # noqa: E402, F401  (registers the config schemas)
from simroll.cli.common import ConfigError, env_config_from, policy_from  # noqa: E402
from simroll.cli.eval import CONFIG_DIR  # noqa: E402
from simroll.cli.rundir import (  # noqa: E402
    LOCK_FILENAME,
    RunDirError,
    check_output_dir_override,
    hold_run_dir,
    job_output_dir,
    kept_on_interrupt,
    one_line_errors,
)
from simroll.envs import TASKS, task_objects  # noqa: E402
from simroll.envs.variations import VARIATIONS  # noqa: E402
from simroll.evaluation import check_choice, check_policy_loads  # noqa: E402
from simroll.io import write_text_atomic  # noqa: E402
from simroll.rollout.backends import BACKENDS, EpisodeJob  # noqa: E402
from simroll.rollout.episode import config_hash  # noqa: E402
from simroll.rollout.lerobot_io import WRITER_MODULES  # noqa: E402
from simroll.rollout.manifest import (  # noqa: E402
    ManifestError,
    RunManifest,
    outcome_fingerprint,
    read_manifest,
    start_run,
)
from simroll.rollout.records import EpisodeRecord, EpisodeSpec  # noqa: E402
from simroll.rollout.runner import evaluate as run_specs  # noqa: E402
from simroll.rollout.runner import make_specs  # noqa: E402
from simroll.rollout.store import RecordStore  # noqa: E402
from simroll.rollout.worker_start import start_worker_server  # noqa: E402

CONFIG_RECORD = Path("meta") / "simroll_collect.yaml"
# The run's record store, its shards and the merged dataset before its move, inside output_dir:
# LeRobot's loader reads only meta/, data/ and videos/ of a dataset root.
COLLECT_DIRNAME = ".collect"
SHARDS_DIRNAME = "shards"
MERGED_DIRNAME = "dataset"
META_DIRNAME = "meta"  # moved into place last: the dataset exists once it is there


def validate(cfg: DictConfig) -> None:
    env = cfg.env
    check_choice("env.tasks", env.tasks, TASKS)
    for task in env.tasks:
        check_choice("env.objects", env.objects, task_objects(task))
    check_choice("env.variations", env.variations, VARIATIONS)
    check_choice("env.obs_mode", [env.obs_mode], ("full", "state"))
    check_choice("backend.name", [cfg.backend.name], BACKENDS)
    if not isinstance(cfg.episodes, int) or cfg.episodes < 1:
        raise ConfigError(f"episodes must be an integer >= 1, got {cfg.episodes!r}")
    if not isinstance(cfg.backend.workers, int) or cfg.backend.workers < 1:
        raise ConfigError(f"backend.workers must be an integer >= 1, got {cfg.backend.workers!r}")
    if not isinstance(env.image_size, int) or not 16 <= env.image_size <= 1024:
        raise ConfigError(
            f"env.image_size must be an integer in [16, 1024], got {env.image_size!r}"
        )


def fingerprint(cfg: DictConfig, choice: str) -> dict[str, Any]:
    """What a collect's episodes and dataset are made with: a resume must match it (the backend,
    workers and progress may change)."""
    return outcome_fingerprint(
        OmegaConf.to_container(cfg.env, resolve=True),
        {"policy": (choice, OmegaConf.to_container(cfg.policy, resolve=True))},
        seed=cfg.seed,
        **{
            f"dataset.{key}": cfg[key]
            for key in ("only_success", "use_videos", "tactile_image", "repo_id")
        },
    )


def claim_output_dir(
    root: Path, manifest: RunManifest, specs: Sequence[EpisodeSpec], overwrite: bool
) -> str | None:
    """Make ``root`` (held by this run) this collect's: emptied with ``overwrite``; otherwise a
    collect made with the same settings is resumed and anything else refused. Returns a note
    for the user, or None."""
    earlier = [path for path in root.iterdir() if path.name != LOCK_FILENAME]
    if overwrite:
        for path in earlier:
            _remove(path)
    elif earlier:
        try:
            made_by_a_run = read_manifest(root) is not None
        except ManifestError as exc:
            raise ManifestError(f"{exc}, or pass overwrite=true to replace it") from None
        if not made_by_a_run:
            raise ConfigError(
                f"output_dir {root} already holds files that no simroll collect run made; pass "
                "overwrite=true to replace them or choose another output_dir"
            )
    try:
        return start_run(root, manifest, specs, episodes_may_change=False)
    except ManifestError as exc:
        raise ManifestError(f"{exc}, or pass overwrite=true to replace it") from None


def run(cfg: DictConfig) -> int:
    validate(cfg)
    if cfg.backend.name == "vector":  # the workers' imports overlap this process's start-up
        start_worker_server(cfg.policy.get("_target_"), WRITER_MODULES)
    root = job_output_dir(cfg)
    env_config = env_config_from(cfg.env, cfg.policy)
    policy_factory, choice = policy_from(cfg)
    specs = make_specs(
        cfg.env.suite, cfg.env.tasks, cfg.env.objects, cfg.env.variations, cfg.episodes, cfg.seed
    )
    try:
        check_policy_loads(policy_factory, env_config, specs[0])
    except ValueError as exc:  # PolicyLoadError, AssetError, bad policy arguments
        raise ConfigError(f"policy {choice!r} cannot run on {specs[0].task}: {exc}") from exc
    manifest = RunManifest(
        command="collect",
        fingerprint=fingerprint(cfg, str(choice)),
        episodes=cfg.episodes,
        config=OmegaConf.to_container(cfg, resolve=True),
    )
    # Imported here: LeRobot's dataset stack takes seconds to import.
    from simroll.rollout.dataset import DatasetShards

    work = root / COLLECT_DIRNAME
    shards = DatasetShards(
        work / SHARDS_DIRNAME,
        repo_id=cfg.repo_id,
        use_videos=cfg.use_videos,
        with_tactile_image=cfg.tactile_image,
        only_success=cfg.only_success,
    )
    job = EpisodeJob(
        policy_factory=policy_factory,
        env_config=env_config,
        policy_id=str(choice),
        policy_config_hash=config_hash(OmegaConf.to_container(cfg.policy, resolve=True)),
        observers=(shards,),
    )
    with hold_run_dir(root), kept_on_interrupt(root, specs, stores=[work]):
        note = claim_output_dir(root, manifest, specs, cfg.overwrite)
        if note:
            print(note)
        if (root / META_DIRNAME).is_dir():
            _remove(work / SHARDS_DIRNAME)  # left by a run stopped while removing them
            episodes = json.loads((root / META_DIRNAME / "info.json").read_text())
            print(
                f"simroll collect: {root} already holds the finished dataset "
                f"({episodes['total_episodes']} episodes); nothing to run (overwrite=true "
                "records it again)"
            )
            return 0
        _remove_partial_outputs(work)
        done = len(specs) - len(RecordStore(work).pending(specs))
        print(
            f"simroll collect: {len(specs)} episodes of policy {choice!r} on backend "
            f"{cfg.backend.name} -> {root}"
            + (f" (resuming: {done} already recorded)" if done else "")
        )
        rerun = _unrecorded(work, specs, shards, cfg.only_success)
        records = run_specs(
            work,
            specs,
            job,
            backend=cfg.backend.name,
            workers=cfg.backend.workers,
            progress=cfg.progress,
            rerun=rerun,
        )
        kept = _kept(records, shards, cfg.only_success)
        if not kept:
            print(
                f"simroll collect: no episode was kept ({len(records)} run, none "
                + ("successful and " if cfg.only_success else "")
                + "without error); no dataset written",
                file=sys.stderr,
            )
            return 1
        merged = work / MERGED_DIRNAME
        from simroll.rollout.dataset import DatasetFeaturesError, merge_shards

        try:
            episodes, frames = merge_shards(shards, kept, merged)
        except DatasetFeaturesError as exc:  # shards recorded by another simroll version
            raise RunDirError(
                f"{exc}. {root} holds episodes recorded with other dataset features (a resume "
                "across a simroll version that changed them?): pass overwrite=true to record "
                "them all again"
            ) from None
        write_text_atomic(merged / CONFIG_RECORD, OmegaConf.to_yaml(cfg, resolve=True))
        _move_into_place(merged, root)
        _remove(work / SHARDS_DIRNAME)
    dropped = len(specs) - episodes
    print(
        f"simroll collect: wrote {episodes} episodes, {frames} frames to {root}"
        + (f" ({dropped} episodes left out: failed or in error)" if dropped else "")
    )
    return 0


def _unrecorded(
    work: Path, specs: Sequence[EpisodeSpec], shards: Any, only_success: bool
) -> list[EpisodeSpec]:
    """Finished episodes the dataset will hold whose shard is missing (removed by hand): they
    run once more to record them (their stored records are kept)."""
    stored = RecordStore(work).load().records
    missing = [
        spec
        for spec in specs
        if (record := stored.get(spec.key)) is not None
        and _keeps(record, only_success)
        and not shards.has_shard_of(record)
    ]
    if missing:
        print(
            f"{len(missing)} finished episode(s) have no dataset shard: running them once more "
            "to record them"
        )
    return missing


def _keeps(record: EpisodeRecord, only_success: bool) -> bool:
    return record.error is None and (record.success or not only_success)


def _kept(records: Sequence[EpisodeRecord], shards: Any, only_success: bool) -> list:
    """The records the dataset holds, in spec order: kept by ``only_success``, with a shard."""
    chosen = [record for record in records if _keeps(record, only_success)]
    kept = [record for record in chosen if shards.has_shard_of(record)]
    if len(kept) < len(chosen):
        print(
            f"simroll collect: {len(chosen) - len(kept)} episode(s) have no shard holding their "
            "record and are left out (see the lines above)",
            file=sys.stderr,
        )
    return kept


def _remove_partial_outputs(work: Path) -> None:
    """What a stopped run left half-made: shards a killed worker was writing, and the merged
    dataset (maybe partly moved into place): merged again from the shards."""
    for partial in (work / SHARDS_DIRNAME).glob(".*.tmp"):
        _remove(partial)
    for partial in (work / MERGED_DIRNAME, work / f".{MERGED_DIRNAME}.tmp"):
        _remove(partial)


def _move_into_place(merged: Path, root: Path) -> None:
    """Move the merged dataset's entries up into ``root``, ``meta/`` last, replacing what an
    earlier, stopped move left there."""
    entries = sorted(merged.iterdir(), key=lambda path: (path.name == META_DIRNAME, path.name))
    for entry in entries:
        _remove(root / entry.name)
        entry.rename(root / entry.name)
    merged.rmdir()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


@hydra.main(config_path=CONFIG_DIR, config_name="collect", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    with one_line_errors("collect"):
        status = run(cfg)
    if status:
        sys.exit(status)


def main() -> None:
    check_output_dir_override("collect", sys.argv[1:])
    _hydra_main()
