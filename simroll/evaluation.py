"""The library API of evaluation: ``simroll.evaluate(policy, ...) -> RunResult``.

One call runs a policy on a suite's episode specs and leaves a run directory, as ``simroll eval``
does (that command only maps its Hydra config onto :func:`run_evaluation`): it validates every
setting before any episode runs (:class:`~simroll.rollout.settings.ConfigError` naming the value
and the valid choices), applies a policy checkpoint's recorded env settings where the caller did
not set them, builds the policy once to fail early, holds the directory's lock, writes the run
manifest (a resume with other outcome settings is refused, growing ``episodes`` is allowed), runs
the missing episodes on the chosen backend (:func:`simroll.rollout.runner.evaluate`; resumable,
Ctrl-C keeps what finished and raises :class:`~simroll.rollout.rundir.Interrupted`) and writes
``summary.json`` (with ``episodes_run``), ``summary.md``, ``tolerance_curve.png`` and
``report.html``.

Videos and the dataset come from the scored episodes themselves, in the workers that run them
(observers in the :class:`~simroll.rollout.backends.EpisodeJob`); nothing is re-run. Which
episodes are filmed is decided from the specs before the run (:func:`choose_video_specs`: one
episode of each (task, object, variation) group in turn, lowest index first), so it cannot depend
on outcomes. With ``record=True`` every episode is written as its own dataset shard under
``dataset_shards/`` and the shards of the episodes that ended without error are merged in spec
order into ``dataset/`` (:func:`simroll.rollout.dataset.merge_shards`). A resumed run keeps what
it finished; an episode stored without the video or shard now asked for is re-run once to record
it (said in one line, counted in ``episodes_run``, its score kept).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import shutil
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from simroll.checks import is_int, is_number
from simroll.envs import TASKS, task_objects
from simroll.envs.clutter import PRIMITIVE_TASKS
from simroll.envs.core import GRIPPER_MODES, OBS_MODES
from simroll.envs.variations import VARIATIONS
from simroll.policies.resolve import ResolvedPolicy, resolve_policy
from simroll.rollout.backends import BACKENDS, EpisodeJob, ObserverFactory
from simroll.rollout.episode import (
    EnvConfig,
    config_hash,
    latency_to_delay_steps,
    measure_latency,
)
from simroll.rollout.manifest import (
    ManifestError,
    RunManifest,
    outcome_fingerprint,
    read_manifest,
    start_run,
)
from simroll.rollout.records import EpisodeRecord, EpisodeSpec
from simroll.rollout.rundir import hold_run_dir, kept_on_interrupt
from simroll.rollout.runner import count_errors, make_specs
from simroll.rollout.runner import evaluate as run_specs
from simroll.rollout.settings import (
    RECORDED_ENV_KEYS,
    ConfigError,
    apply_checkpoint_env,
    only_cameras_read,
)
from simroll.rollout.store import RecordStore
from simroll.rollout.video import DEFAULT_SIZE, EpisodeVideos
from simroll.scoring.summary import import_report_modules, write_report

ENV_DEFAULTS = Path(__file__).resolve().parent / "_data" / "configs" / "env" / "soft_suite.yaml"
VIDEOS_DIRNAME = "videos"
DATASET_DIRNAME = "dataset"
SHARDS_DIRNAME = "dataset_shards"
# How the library's arguments are named in messages; the command passes its config keys.
ARGUMENT_NAMES: dict[str, str] = {}
CONFIG_KEYS = {
    "tasks": "env.tasks",
    "objects": "env.objects",
    "variations": "env.variations",
    "backend": "backend.name",
    "workers": "backend.workers",
    "videos": "video.episodes",
    "video_size": "video.size",
    "obs_mode": "env.obs_mode",
    "gripper_mode": "env.gripper_mode",
    "image_size": "env.image_size",
}


@dataclass(frozen=True, repr=False)
class RunResult:
    """What an evaluation left: its records (spec order), run directory, summary (the content of
    ``summary.json``: per-group TSR/DSR with intervals), how many episodes the backend ran for it
    (``episodes_run``: retries and re-runs to record included; 0 for a finished run resumed),
    the episodes in error, the Markdown table, the videos and the dataset (None without
    ``record``)."""

    run_dir: Path
    records: tuple[EpisodeRecord, ...]
    summary: dict[str, Any]
    episodes_run: int
    errors: int
    table: str
    videos: tuple[Path, ...] = ()
    dataset: Path | None = None

    @property
    def groups(self) -> list[dict[str, Any]]:
        """The per-(task, object, variation) rows and each task's ``"all"`` row."""
        return list(self.summary.get("groups", []))

    @property
    def receipts(self) -> dict[str, str]:
        """Each record's receipt by spec key."""
        return {record.spec.key: record.receipt for record in self.records}

    def __repr__(self) -> str:
        lines = [
            f"RunResult(run_dir={str(self.run_dir)!r}, episodes={len(self.records)}, "
            f"episodes_run={self.episodes_run}, errors={self.errors}, videos={len(self.videos)}, "
            f"dataset={None if self.dataset is None else str(self.dataset)!r})"
        ]
        for group in self.groups:
            if group["object"] == "all":
                lines.append(
                    f"  {group['task']}: TSR {_rate(group['tsr'])}  DSR {_rate(group['dsr'])}  "
                    f"({group['episodes']} episodes)"
                )
        return "\n".join(lines)


def _rate(rate: Mapping[str, Any]) -> str:
    if not rate["trials"]:
        return "n/a"
    return f"{rate['rate']:.2f} [{rate['low']:.2f}, {rate['high']:.2f}]"


@dataclass(frozen=True)
class EvalPlan:
    """A validated evaluation, ready to run: the resolved policy and env, the spec settings, and
    the config the run records (manifest and provenance)."""

    policy: ResolvedPolicy
    env: EnvConfig
    suite: str
    tasks: tuple[str, ...]
    objects: tuple[str, ...]
    variations: tuple[str, ...]
    episodes: int
    seed: int
    run_dir: Path
    control_delay_steps: int = 0
    policy_latency_s: float | str | None = None
    backend: str = "local"
    workers: int = 2
    videos: int = 0
    video_size: tuple[int, int] = DEFAULT_SIZE
    record: bool = False
    record_tactile_image: bool | None = None
    record_features: tuple[str, ...] | None = None
    progress: bool = True
    config: dict[str, Any] = field(default_factory=dict)


def check_choice(
    key: str, values: Sequence[Any], valid: Collection[Any], error: type[ValueError] = ConfigError
) -> None:
    """``error`` (ConfigError by default) unless every one of ``values`` is in ``valid``."""
    for value in values:
        if value not in valid:
            raise error(f"{key}: unknown value {value!r}; expected one of {sorted(valid)}")


def check_settings(
    *,
    tasks: Sequence[str],
    objects: Sequence[str],
    variations: Sequence[str],
    episodes: Any,
    control_delay_steps: Any,
    policy_latency_s: Any,
    backend: Any,
    workers: Any,
    record: Any,
    videos: Any,
    video_size: Any,
    names: Mapping[str, str] = ARGUMENT_NAMES,
) -> None:
    """Refuse any invalid setting with a :class:`ConfigError` naming it (as ``names`` spells it,
    default the argument's own name) and what was expected; nothing has run yet."""

    def name(key: str) -> str:
        return names.get(key, key)

    check_choice(name("tasks"), tasks, TASKS)
    for task in tasks:
        check_choice(name("objects"), objects, task_objects(task))
    check_choice(name("variations"), variations, VARIATIONS)
    check_choice(name("backend"), [backend], BACKENDS)
    if not is_int(episodes, 1):
        raise ConfigError(f"{name('episodes')} must be an integer >= 1, got {episodes!r}")
    if not is_int(control_delay_steps, 0):
        raise ConfigError(
            f"{name('control_delay_steps')} must be an integer >= 0, got {control_delay_steps!r}"
        )
    latency = policy_latency_s
    if latency is not None and latency != "measured" and not (is_number(latency) and latency >= 0):
        raise ConfigError(
            f"{name('policy_latency_s')} must be null, 'measured' or seconds >= 0, got {latency!r}"
        )
    delayed = control_delay_steps > 0 or latency not in (None, 0, 0.0)
    macro = [task for task in tasks if task in PRIMITIVE_TASKS]
    if delayed and macro:
        raise ConfigError(
            f"{name('control_delay_steps')}/{name('policy_latency_s')} delay 5-D hand actions by "
            f"control steps; {macro} take one primitive per step (a macro action), which a "
            f"control delay does not apply to: set {name('control_delay_steps')}=0 and "
            f"{name('policy_latency_s')}=null"
        )
    if not is_int(workers, 1):
        raise ConfigError(f"{name('workers')} must be an integer >= 1, got {workers!r}")
    if not isinstance(record, bool):
        raise ConfigError(f"{name('record')} must be true or false, got {record!r}")
    if not is_int(videos, 0):
        raise ConfigError(f"{name('videos')} must be an integer >= 0, got {videos!r}")
    if not (
        isinstance(video_size, Sequence)
        and len(video_size) == 2
        and all(is_int(side, 2) for side in video_size)
    ):
        raise ConfigError(
            f"{name('video_size')} must be [height, width] in pixels >= 2, got {video_size!r}"
        )


def check_env(env: EnvConfig, names: Mapping[str, str] = ARGUMENT_NAMES) -> None:
    """Refuse an env config whose observation mode, gripper mode or image size no env takes."""

    def name(key: str) -> str:
        return names.get(key, key)

    check_choice(name("obs_mode"), [env.obs_mode], OBS_MODES)
    check_choice(name("gripper_mode"), [env.gripper_mode], GRIPPER_MODES)
    if not (is_int(env.image_size, 16) and env.image_size <= 1024):
        raise ConfigError(
            f"{name('image_size')} must be an integer in [16, 1024], got {env.image_size!r}"
        )


def env_defaults() -> dict[str, Any]:
    """The default env settings: configs/env/soft_suite.yaml (what ``simroll eval`` runs)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(ENV_DEFAULTS), resolve=True)


def evaluate(
    policy: Any,
    *,
    tasks: Sequence[str] | None = None,
    objects: Sequence[str] | None = None,
    variations: Sequence[str] | None = None,
    episodes: int = 3,
    seed: int = 0,
    suite: str | None = None,
    obs_mode: str | None = None,
    image_size: int | None = None,
    gripper_mode: str | None = None,
    rigid_twin: bool | None = None,
    env: EnvConfig | None = None,
    control_delay_steps: int = 0,
    policy_latency_s: float | str | None = None,
    backend: str = "local",
    workers: int = 2,
    output_dir: str | Path | None = None,
    videos: int = 0,
    video_size: tuple[int, int] = DEFAULT_SIZE,
    record: bool = False,
    record_tactile_image: bool | None = None,
    record_features: Sequence[str] | None = None,
    progress: bool = True,
    policy_name: str | None = None,
) -> RunResult:
    """Evaluate ``policy`` in closed loop and return the run's :class:`RunResult`.

    ``policy``: a shipped policy config name (``"expert"``), a checkpoint directory, a policy
    config mapping with ``_target_``, or a factory ``factory(env) -> policy`` (see
    :mod:`simroll.policies.resolve`); ``policy_name`` overrides the name its records carry.
    Tasks, objects, variations, suite and the env settings default to configs/env/soft_suite.yaml
    (every soft task and object, state observations, delta gripper); ``obs_mode``, ``image_size``
    and ``gripper_mode`` left None take a checkpoint's recorded values (``simroll_env.json``)
    when it has them, and a value passed that contradicts them is refused. ``env`` (an
    :class:`EnvConfig`) replaces all env settings at once, as given. ``episodes`` per (task,
    object, variation), ``seed`` the base seed; ``control_delay_steps`` or ``policy_latency_s``
    (seconds or ``"measured"``, turned into a delay) simulate a slow policy. ``backend``:
    ``local``, ``vector`` or ``ray`` with ``workers``. ``output_dir`` (default
    ``runs/eval/<time>``) resumes when it holds a run made with the same settings. ``videos``:
    how many episodes to film (chosen before the run, see :func:`choose_video_specs`) at
    ``video_size`` (height, width); ``record``: also write the episodes as a LeRobotDataset,
    with ``observation.images.tactile`` when ``record_tactile_image`` (None: when the
    observations have camera images), so that it can join a ``simroll collect`` dataset;
    ``record_features`` (None: all) keeps only those observation features, to join a dataset
    recorded before an observation was added.
    ``progress`` shows the progress bar and the run's messages.
    """
    defaults = env_defaults()
    tasks = list(defaults["tasks"] if tasks is None else tasks)
    objects = list(defaults["objects"] if objects is None else objects)
    variations = list(defaults["variations"] if variations is None else variations)
    for key, value in (("tasks", tasks), ("objects", objects), ("variations", variations)):
        if not value or isinstance(value, str):
            raise ConfigError(f"{key} must be a non-empty list of names, got {value!r}")
    check_settings(
        tasks=tasks,
        objects=objects,
        variations=variations,
        episodes=episodes,
        control_delay_steps=control_delay_steps,
        policy_latency_s=policy_latency_s,
        backend=backend,
        workers=workers,
        record=record,
        videos=videos,
        video_size=video_size,
    )
    resolved = policy if isinstance(policy, ResolvedPolicy) else resolve_policy(policy, policy_name)
    echo = print if progress else _silent
    if env is None:
        given = {"obs_mode": obs_mode, "image_size": image_size, "gripper_mode": gripper_mode}
        explicit = {key for key, value in given.items() if value is not None}
        settings = {key: given[key] if key in explicit else defaults[key] for key in given}
        settings, notes = apply_checkpoint_env(settings, resolved.config, explicit)
        for note in notes:
            echo(note)
        twin = defaults["rigid_twin"] if rigid_twin is None else rigid_twin
        env = EnvConfig(**settings, rigid_twin=bool(twin))
    elif any(value is not None for value in (obs_mode, image_size, gripper_mode, rigid_twin)):
        raise ConfigError(
            "pass either env (an EnvConfig) or obs_mode/image_size/gripper_mode/rigid_twin, "
            "not both"
        )
    if not isinstance(env, EnvConfig):
        raise ConfigError(f"env must be a simroll EnvConfig, got {type(env).__name__}")
    check_env(env)
    run_dir = Path(output_dir or f"runs/eval/{datetime.now():%Y-%m-%d_%H-%M-%S}")
    suite = defaults["suite"] if suite is None else suite
    plan = EvalPlan(
        policy=resolved,
        env=env,
        suite=suite,
        tasks=tuple(tasks),
        objects=tuple(objects),
        variations=tuple(variations),
        episodes=episodes,
        seed=seed,
        run_dir=run_dir,
        control_delay_steps=control_delay_steps,
        policy_latency_s=policy_latency_s,
        backend=backend,
        workers=workers,
        videos=videos,
        video_size=(int(video_size[0]), int(video_size[1])),
        record=record,
        record_tactile_image=record_tactile_image,
        record_features=_record_features(record_features),
        progress=progress,
    )
    config = {
        "env": env_record(plan),
        "policy": resolved.config,
        "backend": {"name": backend, "workers": workers},
        "episodes": episodes,
        "seed": seed,
        "control_delay_steps": control_delay_steps,
        "policy_latency_s": policy_latency_s,
        "output_dir": str(run_dir),
        "progress": progress,
        "record": record,
        "video": {"episodes": videos, "size": list(plan.video_size)},
    }
    if record_tactile_image is not None:
        config["record_tactile_image"] = bool(record_tactile_image)
    if plan.record_features is not None:
        config["record_features"] = list(plan.record_features)
    return run_evaluation(dataclasses.replace(plan, config=config), echo=echo)


def env_record(plan: EvalPlan) -> dict[str, Any]:
    """The env settings of ``plan`` as the ``env`` config group spells them."""
    return {
        "suite": plan.suite,
        "tasks": list(plan.tasks),
        "objects": list(plan.objects),
        "variations": list(plan.variations),
        **{key: getattr(plan.env, key) for key in RECORDED_ENV_KEYS},
        "rigid_twin": plan.env.rigid_twin,
    }


def choose_video_specs(specs: Sequence[EpisodeSpec], count: int) -> list[EpisodeSpec]:
    """The ``count`` specs to film, fixed before the run: the first episode of each (task,
    object, variation) group in spec order, then each group's second, and so on."""
    groups: dict[tuple[str, str, str], list[EpisodeSpec]] = {}
    for spec in specs:
        groups.setdefault((spec.task, spec.object, spec.variation), []).append(spec)
    chosen: list[EpisodeSpec] = []
    depth = 0
    while len(chosen) < min(count, len(specs)):
        for members in groups.values():
            if depth < len(members) and len(chosen) < count:
                chosen.append(members[depth])
        depth += 1
    return chosen


def check_policy_loads(policy_factory: Callable, env_config: EnvConfig, spec: EpisodeSpec) -> None:
    """Build the policy once for ``spec``'s env, so a missing or mismatched checkpoint fails
    before any episode runs (instead of as an error record in every episode)."""
    env = env_config.make(spec)
    try:
        policy_factory(env)
    finally:
        env.close()


def _silent(*args: Any, **kwargs: Any) -> None:
    """What a quiet run prints: nothing."""


def run_evaluation(plan: EvalPlan, echo: Callable[..., None] = print) -> RunResult:
    """Run a validated :class:`EvalPlan` into its run directory (see the module docstring);
    ``echo`` prints the run's messages."""
    policy, env_config = plan.policy, plan.env
    specs = make_specs(
        plan.suite, plan.tasks, plan.objects, plan.variations, plan.episodes, plan.seed
    )
    try:
        check_policy_loads(policy.factory, env_config, specs[0])
    except ValueError as exc:  # PolicyLoadError, AssetError, bad policy arguments
        raise ConfigError(f"policy {policy.name!r} cannot run on {specs[0].task}: {exc}") from exc
    if plan.backend != "local":  # the workers are still starting (importing their policy stack)
        import_report_modules()
    delay = plan.control_delay_steps
    if plan.policy_latency_s is not None:
        if plan.policy_latency_s == "measured":
            latency = measure_latency(specs[0], policy.factory, env_config)
        else:
            latency = float(plan.policy_latency_s)
        delay = latency_to_delay_steps(latency)
        echo(f"policy latency {latency * 1000:.1f} ms -> control delay of {delay} step(s)")
    run_dir = plan.run_dir
    extra_env = {"env_kwargs": dict(env_config.kwargs)} if env_config.kwargs else {}
    manifest = RunManifest(
        command="eval",
        fingerprint=outcome_fingerprint(
            env_record(plan),
            {"policy": (policy.name, policy.config)},
            seed=plan.seed,
            control_delay_steps=delay,
            **extra_env,
        ),
        episodes=plan.episodes,
        config=plan.config,
    )
    video_specs = choose_video_specs(specs, plan.videos)
    videos = EpisodeVideos(
        run_dir / VIDEOS_DIRNAME, frozenset(spec.key for spec in video_specs), plan.video_size
    )
    shards = (
        _dataset_shards(run_dir, policy.name, plan.record_tactile_image, plan.record_features)
        if plan.record
        else None
    )
    observers: tuple[ObserverFactory, ...] = tuple(
        factory for factory in (videos if video_specs else None, shards) if factory is not None
    )
    job = EpisodeJob(
        policy_factory=policy.factory,
        # rendering only the cameras the policy reads changes no outcome, only the work: it is
        # left out of the manifest, and a dataset needs every camera
        env_config=env_config if plan.record else only_cameras_read(env_config, policy.config),
        policy_id=policy.name,
        policy_config_hash=config_hash(policy.config),
        control_delay_steps=delay,
        observers=observers,
    )
    with hold_run_dir(run_dir), kept_on_interrupt(run_dir, specs):
        if plan.record:
            _check_recording(run_dir, plan.config)
        note = start_run(run_dir, manifest, specs, episodes_may_change=True)
        if note:
            echo(note)
        echo(f"simroll eval: {len(specs)} episodes of policy {policy.name!r} -> {run_dir}")
        _remove_partial_outputs(run_dir)
        rerun = _unrecorded(run_dir, specs, videos if video_specs else None, shards, echo)
        records = run_specs(
            run_dir,
            specs,
            job,
            backend=plan.backend,
            workers=plan.workers,
            progress=plan.progress,
            rerun=rerun,
        )
        table = write_report(
            run_dir,
            records,
            plan.config,
            expected=len(specs),
            episodes_run=records.episodes_run,
        )
        echo(table)
        filmed = _videos_made(records, video_specs, videos, echo)
        dataset = _merge_dataset(run_dir, records, shards, echo) if shards is not None else None
        echo(f"report: {run_dir / 'summary.md'}, plot: {run_dir / 'tolerance_curve.png'}")
        from simroll.report import write_html_report_or_warn

        quiet = echo is _silent
        with contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
            write_html_report_or_warn(run_dir)  # never raises: a page failure is only a warning
    summary = json.loads((run_dir / "summary.json").read_text())
    return RunResult(
        run_dir=run_dir,
        records=tuple(records),
        summary=summary,
        episodes_run=records.episodes_run,
        errors=count_errors(records),
        table=table,
        videos=tuple(filmed),
        dataset=dataset,
    )


RECORDING_KEYS = ("record_tactile_image", "record_features")


def _check_recording(run_dir: Path, config: Mapping[str, Any]) -> None:
    """Refuse (ManifestError) to record into ``run_dir`` when it holds dataset shards recorded
    with other frame layout settings: its finished episodes keep their shards, so their dataset
    would be of the old layout, or of both, which LeRobot cannot join."""
    existing = read_manifest(run_dir)
    shards = run_dir / SHARDS_DIRNAME
    if existing is None or not shards.is_dir() or not any(shards.iterdir()):
        return
    before = {key: existing.config.get(key) for key in RECORDING_KEYS}
    now = {key: config.get(key) for key in RECORDING_KEYS}
    if before != now:
        changed = ", ".join(
            f"{key} {before[key]!r} -> {now[key]!r}"
            for key in RECORDING_KEYS
            if before[key] != now[key]
        )
        raise ManifestError(
            f"output_dir {run_dir} holds dataset shards recorded with other settings ({changed}; "
            "None: every feature / the env's default); its finished episodes would keep frames "
            "of the old layout. Use a new output_dir, or the settings it recorded with"
        )


def _dataset_shards(
    run_dir: Path,
    policy_name: str,
    tactile_image: bool | None = None,
    features: tuple[str, ...] | None = None,
):
    # Imported here: LeRobot's dataset stack takes seconds to import.
    from simroll.rollout.dataset import DatasetShards

    return DatasetShards(
        run_dir / SHARDS_DIRNAME,
        repo_id=f"simroll/eval_{policy_name}",
        with_tactile_image=tactile_image,
        keep_features=features,
    )


def _record_features(features: Sequence[str] | None) -> tuple[str, ...] | None:
    """``record_features`` as a sorted tuple; ConfigError unless None or a list of keys."""
    if features is None:
        return None
    if isinstance(features, str) or not all(isinstance(key, str) for key in features):
        raise ConfigError(
            f"record_features must be a list of feature keys such as 'observation.state', "
            f"got {features!r}"
        )
    return tuple(sorted(features))


def _remove_partial_outputs(run_dir: Path) -> None:
    """Videos and dataset shards a killed worker left half-written (this run holds the lock, so
    no one else is writing them)."""
    for partial in (run_dir / VIDEOS_DIRNAME).glob("*.tmp.mp4"):
        partial.unlink()
    for partial in (run_dir / SHARDS_DIRNAME).glob(".*.tmp"):
        shutil.rmtree(partial, ignore_errors=True)


def _unrecorded(
    run_dir: Path,
    specs: Sequence[EpisodeSpec],
    videos: EpisodeVideos | None,
    shards: Any,
    echo: Callable[..., None],
) -> list[EpisodeSpec]:
    """Finished episodes (stored without error) that lack the video or dataset shard this run
    asks for: they must run again to be recorded."""
    if videos is None and shards is None:
        return []
    stored = RecordStore(run_dir).load().records
    missing: dict[str, list[EpisodeSpec]] = {"video": [], "dataset shard": []}
    for spec in specs:
        record = stored.get(spec.key)
        if record is None or record.error is not None:
            continue  # still to run (or retried): recorded as it runs; or left out in error
        if videos is not None and spec.key in videos.keys and not videos.has_video_of(record):
            missing["video"].append(spec)
        if shards is not None and not shards.has_shard_of(record):
            missing["dataset shard"].append(spec)
    lacking = {spec.key for specs_ in missing.values() for spec in specs_}
    if lacking:
        what = " or ".join(kind for kind, specs_ in missing.items() if specs_)
        echo(
            f"{len(lacking)} finished episode(s) have no {what} yet: running them once more "
            "to record them (their stored scores are kept)"
        )
    return [spec for spec in specs if spec.key in lacking]


def _videos_made(
    records: Sequence[EpisodeRecord],
    chosen: Sequence[EpisodeSpec],
    videos: EpisodeVideos,
    echo: Callable[..., None],
) -> list[Path]:
    by_key = {record.spec.key: record for record in records}
    made = []
    for spec in chosen:
        record = by_key.get(spec.key)
        if record is not None and videos.has_video_of(record):
            made.append(videos.path(spec))
            echo(f"video: {videos.path(spec)}")
        elif record is not None and record.error is not None:
            echo(f"video: none for {spec.key}, which ended in error")
    return made


def _merge_dataset(
    run_dir: Path, records: Sequence[EpisodeRecord], shards: Any, echo: Callable[..., None]
) -> Path | None:
    """Merge the shards of the records without error, in spec order, into ``dataset/``."""
    from simroll.rollout.dataset import merge_shards

    scored = [record for record in records if record.error is None]
    kept = [record for record in scored if shards.has_shard_of(record)]
    in_error = len(records) - len(scored)
    if len(kept) < len(scored):
        echo(
            f"dataset: {len(scored) - len(kept)} episode(s) have no shard holding their record "
            "and are left out (see the lines above)",
            file=sys.stderr,
        )
    if not kept:
        echo(f"dataset: none written (no episode to record; {in_error} in error)")
        return None
    dataset_dir = run_dir / DATASET_DIRNAME
    episodes, frames = merge_shards(shards, kept, dataset_dir)
    echo(
        f"dataset: {dataset_dir} ({episodes} episodes, {frames} frames"
        + (f"; {in_error} episodes in error left out)" if in_error else ")")
    )
    return dataset_dir
