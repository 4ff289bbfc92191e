"""Interactive imitation (DAgger): the learner drives, a privileged expert labels what it visits.

:func:`run_dagger` does what ``simroll train ... dagger.rounds=N`` runs. Round 0 is the starting
policy: the checkpoint ``init_from`` names, or one trained by :func:`simroll.train.trainer.train`
on the base dataset. Each round ``r = 1..N`` then

1. rolls out the previous round's checkpoint through :func:`simroll.evaluate` (any backend,
   seeded by ``seed + r``, so no two rounds and no evaluation share episodes) as an
   :class:`~simroll.policies.mixing.ExpertMixing` policy: the expert's action is executed with
   probability ``beta * beta_decay ** (r - 1)``, the learner's otherwise, and every visited
   state is labelled with the expert's action (the dataset's ``action``); ``perturb``
   optionally injects disturbances into what is executed (see
   :class:`~simroll.policies.mixing.Perturbation`), so the labels cover recoveries;
2. joins the labelled episodes onto the previous round's dataset with LeRobot's
   ``aggregate_datasets`` (:func:`simroll.rollout.dataset.join_datasets`), each row of
   ``meta/simroll_episodes.jsonl`` marked with its ``dagger_round`` (0: the base dataset);
3. trains on the joined dataset for ``steps_per_round`` steps, starting from the previous
   round's weights (``init_from``), and keeps the checkpoint.

A last rollout of the final checkpoint with no expert help (``beta = 0``, not recorded, on base
seed ``seed - 1``: episodes no round trained on, the same whatever the number of rounds) measures
where the run ended, in ``final_round_<N>/``. Every rollout's success rate and deformation-aware
success rate with 95% intervals, the labels added and the training losses go to
``<output_dir>/dagger.json`` after each stage (written atomically) and to ``dagger.png``; its
``seconds`` is the wall time summed over the run's invocations (each up to its last save).

A killed run resumes: a finished stage is found on disk and kept (rollouts resume through the
evaluation's own run directory; a joined dataset and a training run count once their summaries
exist). The settings that change what a round produces are stored in ``dagger_config.json``
(``init_from`` with the SHA-256 of its weights, so weights retrained at the same path count as
different); a resume with different ones is refused, except that ``rounds`` may grow (more
rounds continue the same run).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simroll.checks import is_int, is_number
from simroll.io import write_json_atomic
from simroll.policies.checkpoint import weights_digest
from simroll.policies.resolve import checkpoint_config
from simroll.train.trainer import TrainConfig, TrainingDataError, dataset_env, train

CONFIG_FILE = "dagger_config.json"
INIT_DIGEST = "init_from_weights_sha256"  # beside init_from in a run's fingerprint
METRICS_FILE = "dagger.json"
PLOT_FILE = "dagger.png"
COLLECT_RECORD = Path("meta") / "simroll_collect.yaml"


class DaggerError(ValueError):
    """A DAgger setting or run directory that cannot be used; the message says why."""


def _check_perturbation(made, dagger) -> None:
    """Refuse a bad ``dagger.perturb`` (channels, bounds, phase names the labeller never reports)
    on ``made``, an env of the run's first cell, before round 0 trains: the rollouts' own check
    comes only after it."""
    if dagger.perturb is None:
        return
    from hydra.utils import instantiate

    from simroll.policies.mixing import ExpertMixing

    try:
        ExpertMixing(None, instantiate(dict(dagger.labeller))(made), made, perturb=dagger.perturb)
    except ValueError as error:
        message = str(error)
        raise DaggerError(
            f"dagger.{message}" if message.startswith("perturb") else message
        ) from error


def _recorded_features(base: Path, made, dagger, tactile_image: bool | None) -> tuple[str, ...]:
    """The features a round records so that its episodes join onto ``base`` (LeRobot joins
    datasets of equal features only): the base dataset's own. A dataset collected by an older
    simroll lacks observations added since (such as ``observation.following_error``); its rounds
    leave them out. Raise :class:`DaggerError`, before any rollout, when ``base`` has features
    that this simroll's envs (``made``: one of the run's) do not offer."""
    from lerobot.utils.constants import DEFAULT_FEATURES  # the columns LeRobot adds itself

    from simroll.features import dataset_features

    space = made.observation_space
    if tactile_image is None:
        tactile_image = "pixels" in space.spaces
    offered = set(dataset_features(space, with_tactile_image=bool(tactile_image)))
    info = json.loads((base / "meta" / "info.json").read_text())
    stored = {key for key in info["features"] if key not in DEFAULT_FEATURES}
    if stored - offered:
        raise DaggerError(
            f"dataset {base} has {sorted(stored - offered)}, which this simroll's "
            f"{dagger.suite} envs do not record; DAgger joins its episodes onto it (LeRobot joins "
            f"datasets of equal features only), so re-collect it with this simroll "
            f"(the command is in its {COLLECT_RECORD})"
        )
    return tuple(sorted(stored))


@dataclass
class DaggerConfig:
    """How many rounds, how much each does, and who labels. ``episodes_per_round`` counts per
    (task, object, variation) cell, like ``simroll eval``'s ``episodes``."""

    rounds: int = 4
    episodes_per_round: int = 5
    steps_per_round: int = 1000
    beta: float = 0.0  # probability the expert's action is executed, in round 1
    beta_decay: float = 0.5  # round r executes the expert with probability beta * decay^(r-1)
    perturb: dict[str, Any] | None = None  # disturbances in the rollouts (mixing.Perturbation)
    final_episodes: int = 5  # per cell: the final checkpoint alone; 0 skips it
    labeller: dict[str, Any] = field(
        default_factory=lambda: {"_target_": "simroll.experts.SoftExpert", "_partial_": True}
    )
    suite: str = "soft"
    tasks: Sequence[str] = ("SoftLift",)
    objects: Sequence[str] = ("sponge",)
    variations: Sequence[str] = ("default",)
    rigid_twin: bool = False
    backend: str = "local"
    workers: int = 2
    seed: int = 5000  # rollout base seed of round 1 (round r: seed + r - 1; the final: seed - 1)

    def check(self) -> None:
        for name, minimum in (
            ("rounds", 1),
            ("episodes_per_round", 1),
            ("steps_per_round", 1),
            ("final_episodes", 0),
        ):
            value = getattr(self, name)
            if not is_int(value, minimum):
                raise DaggerError(f"dagger.{name} must be an integer >= {minimum}, got {value!r}")
        for name in ("beta", "beta_decay"):
            value = getattr(self, name)
            if not (is_number(value) and 0.0 <= value <= 1.0):
                raise DaggerError(f"dagger.{name} must be a number in [0, 1], got {value!r}")
        if self.perturb is not None and not isinstance(self.perturb, Mapping):
            raise DaggerError(f"dagger.perturb must be a mapping or null, got {self.perturb!r}")
        if not (isinstance(self.labeller, Mapping) and "_target_" in self.labeller):
            raise DaggerError(
                f"dagger.labeller must be a policy config with a _target_, got {self.labeller!r}"
            )

    def beta_of(self, round_index: int) -> float:
        return float(self.beta * self.beta_decay ** (round_index - 1))

    def fingerprint(self, train_config: TrainConfig) -> dict[str, Any]:
        """What a resumed run must share with the stored one (all but ``rounds``, the backend
        and the progress display, which change no episode)."""
        mine = dataclasses.asdict(self)
        for key in ("rounds", "backend", "workers"):
            mine.pop(key)
        if mine["perturb"] is None:  # (absent from runs made before the setting existed)
            mine.pop("perturb")
        mine = json.loads(json.dumps(mine))  # tuples as lists, as stored
        trained = {
            key: getattr(train_config, key)
            for key in (
                "dataset_root",
                "policy_type",
                "input_features",
                "policy_overrides",
                "batch_size",
                "seed",
                "ema_decay",
                "init_from",
                "steps",
            )
        }
        if train_config.task_weights:  # (absent from runs made before the setting existed)
            trained["task_weights"] = dict(train_config.task_weights)
        if not train_config.fit_lr_schedule:  # (likewise)
            trained["fit_lr_schedule"] = False
        # the path alone would let weights retrained at init_from join the stored rounds
        init_from = train_config.init_from
        trained[INIT_DIGEST] = None if init_from is None else weights_digest(init_from)
        return {"dagger": mine, "train": json.loads(json.dumps(trained))}


def _learner_config(checkpoint: Path) -> dict[str, Any]:
    return checkpoint_config(checkpoint.resolve(), device="cpu")


def mixing_config(
    checkpoint: Path,
    labeller: Mapping[str, Any],
    beta: float,
    perturb: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The policy config of a round's rollouts: the checkpoint drives, ``labeller`` labels,
    ``perturb`` (when given) disturbs what is executed."""
    config = {
        "_target_": "simroll.policies.mixing.mixing_policy",
        "_partial_": True,
        "learner": _learner_config(checkpoint),
        "expert": dict(labeller),
        "beta": float(beta),
    }
    if perturb is not None:
        config["perturb"] = json.loads(json.dumps(dict(perturb)))
    return config


def _rate(records: Sequence[Any], attribute: str) -> dict[str, Any]:
    from simroll.scoring.stats import binomial_rate

    hits = sum(bool(getattr(record, attribute)) for record in records)
    return binomial_rate(hits, len(records)).to_dict()


def _rollout_entry(result: Any, beta: float, checkpoint: Path) -> dict[str, Any]:
    records = result.records
    return {
        "policy": str(checkpoint),
        "beta": beta,
        "episodes": len(records),
        "errors": result.errors,
        "tsr": _rate(records, "success"),
        "dsr": _rate(records, "dsr_success"),
        "frames": sum(int(record.steps) for record in records),
        "expert_steps": sum(int(record.extra.get("expert_steps", 0)) for record in records),
        "perturbed_steps": sum(int(record.extra.get("perturbed_steps", 0)) for record in records),
        "run_dir": str(result.run_dir),
    }


def _trained(output_dir: Path, steps: int) -> Path | None:
    """The finished training run's last checkpoint in ``output_dir``, if it ran ``steps``."""
    try:
        summary = json.loads((output_dir / "metrics.json").read_text())
    except (OSError, ValueError):
        return None
    last = output_dir / "checkpoints" / "last"
    if summary.get("steps") == steps and (last / "model.safetensors").is_file():
        return last
    return None


def _train_once(config: TrainConfig, progress: bool, echo: Callable[..., None]) -> dict[str, Any]:
    out = Path(config.output_dir)
    if _trained(out, config.steps) is None:
        shutil.rmtree(out, ignore_errors=True)  # a killed run's partial checkpoints
        train(config, progress=progress)
    else:
        echo(f"dagger: kept the finished training run in {out}")
    summary = json.loads((out / "metrics.json").read_text())
    result = {
        key: summary[key]
        for key in (
            "steps",
            "first_loss",
            "final_loss",
            "seconds",
            "dataset_episodes",
            "dataset_frames",
            "checkpoint",
        )
    }
    if "final_goal_loss" in summary:  # written by the trainer only for a policy with a goal head
        result["final_goal_loss"] = summary["final_goal_loss"]
    return result


def _check_resume(
    output_dir: Path, fingerprint: dict[str, Any], echo: Callable[..., None] = print
) -> None:
    path = output_dir / CONFIG_FILE
    if path.is_file():
        stored = json.loads(path.read_text())
        if INIT_DIGEST not in stored.get("train", {}) and "train" in stored:
            # a run from before the digest was fingerprinted: adopted, its digest recorded now
            stored["train"][INIT_DIGEST] = fingerprint["train"][INIT_DIGEST]
            if stored == fingerprint:
                echo(f"note: {path} predates init_from's weights digest; recording it now")
                write_json_atomic(path, fingerprint)
        if stored != fingerprint:
            changed = sorted(
                f"{section}.{key}"
                for section in fingerprint
                for key in set(fingerprint[section]) | set(stored.get(section, {}))
                if fingerprint[section].get(key) != stored.get(section, {}).get(key)
            )
            raise DaggerError(
                f"{output_dir} holds a DAgger run made with other settings ({', '.join(changed)}"
                " differ); resume it with the same settings or choose a new output_dir"
            )
    else:
        write_json_atomic(path, fingerprint)


def run_dagger(
    train_config: TrainConfig,
    dagger: DaggerConfig,
    *,
    progress: bool = True,
    echo: Callable[..., None] = print,
) -> dict[str, Any]:
    """Run (or resume) DAgger into ``train_config.output_dir`` (see the module docstring);
    returns what ``dagger.json`` holds. ``train_config.steps`` trains round 0 when
    ``train_config.init_from`` is None; each later round trains ``dagger.steps_per_round``."""
    import simroll
    from simroll.rollout.dataset import join_datasets
    from simroll.rollout.episode import EnvConfig
    from simroll.rollout.records import EpisodeSpec

    dagger.check()
    output_dir = Path(train_config.output_dir)
    base = Path(train_config.dataset_root)
    recorded = dataset_env(base)
    missing = [key for key in ("obs_mode", "image_size", "gripper_mode") if key not in recorded]
    if missing or not (base / COLLECT_RECORD).is_file():
        raise DaggerError(
            f"dataset {base} has no {COLLECT_RECORD} with the env settings it was recorded with "
            f"(missing {missing or 'the file'}); DAgger rolls out in that env: use a dataset "
            "made by `simroll collect`"
        )
    env = EnvConfig(
        obs_mode=recorded["obs_mode"],
        image_size=int(recorded["image_size"]),
        gripper_mode=recorded["gripper_mode"],
        rigid_twin=dagger.rigid_twin,
    )
    made = env.make(EpisodeSpec(dagger.tasks[0], dagger.objects[0], seed=0, index=0))
    try:
        features = _recorded_features(base, made, dagger, recorded.get("tactile_image"))
        _check_perturbation(made, dagger)
    finally:
        made.close()
    output_dir.mkdir(parents=True, exist_ok=True)
    fingerprint = dagger.fingerprint(train_config)  # hashes init_from's weights: once
    _check_resume(output_dir, fingerprint, echo)
    metrics_path = output_dir / METRICS_FILE
    metrics: dict[str, Any] = {
        "config": {**fingerprint, "rounds": dagger.rounds},
        "env": dataclasses.asdict(env),
        "rounds": [],
    }
    started = time.perf_counter()
    # wall time summed over this run's invocations (each up to its last save): a resumed run
    # adds to what the earlier ones recorded
    earlier = 0.0
    if metrics_path.is_file():
        earlier = float(json.loads(metrics_path.read_text()).get("seconds", 0.0))

    def save() -> None:
        metrics["seconds"] = earlier + time.perf_counter() - started
        write_json_atomic(metrics_path, metrics)
        plot_dagger(metrics, output_dir / PLOT_FILE)

    # round 0: the starting policy
    if train_config.init_from is not None:
        checkpoint = Path(train_config.init_from)
        if not (checkpoint / "model.safetensors").is_file():
            raise TrainingDataError(f"init_from={checkpoint} is not a checkpoint")
        metrics["rounds"].append({"round": 0, "train": {"init_from": str(checkpoint)}})
    else:
        first = dataclasses.replace(train_config, output_dir=str(output_dir / "round_00" / "train"))
        echo(f"dagger: round 0, training on {base} for {first.steps} steps")
        trained = _train_once(first, progress, echo)
        checkpoint = Path(trained["checkpoint"])
        metrics["rounds"].append({"round": 0, "train": trained})
    save()
    dataset = base
    for index in range(1, dagger.rounds + 1):
        round_dir = output_dir / f"round_{index:02d}"
        beta = dagger.beta_of(index)
        echo(f"dagger: round {index}/{dagger.rounds}, rollouts of {checkpoint} (beta {beta:g})")
        result = simroll.evaluate(
            mixing_config(checkpoint, dagger.labeller, beta, dagger.perturb),
            tasks=list(dagger.tasks),
            objects=list(dagger.objects),
            variations=list(dagger.variations),
            episodes=dagger.episodes_per_round,
            seed=dagger.seed + index - 1,
            suite=dagger.suite,
            env=env,
            backend=dagger.backend,
            workers=dagger.workers,
            output_dir=round_dir / "rollouts",
            record=True,
            record_tactile_image=recorded.get("tactile_image"),
            record_features=features,
            progress=progress,
            policy_name=f"dagger_round{index}",
        )
        entry: dict[str, Any] = {
            "round": index,
            "rollouts": _rollout_entry(result, beta, checkpoint),
        }
        joined = round_dir / "dataset"
        info = joined / "meta" / "info.json"
        if not (info.is_file() and (joined / COLLECT_RECORD).is_file()):
            if result.dataset is None:
                raise DaggerError(f"round {index}: every rollout ended in error; nothing to label")
            join_datasets(
                [dataset, result.dataset],
                joined,
                repo_id=f"simroll/{output_dir.name}_round{index}",
                tags=[{"dagger_round": 0}, {"dagger_round": index}],
            )
            shutil.copy2(dataset / COLLECT_RECORD, joined / COLLECT_RECORD)
        meta = json.loads(info.read_text())
        entry["dataset"] = {
            "root": str(joined),
            "episodes": meta["total_episodes"],
            "frames": meta["total_frames"],
            "labelled_episodes": len(result.records) - result.errors,
            "labelled_frames": entry["rollouts"]["frames"],
        }
        dataset = joined
        round_train = dataclasses.replace(
            train_config,
            dataset_root=str(joined),
            output_dir=str(round_dir / "train"),
            steps=dagger.steps_per_round,
            init_from=str(checkpoint),
            seed=train_config.seed + index,
        )
        echo(
            f"dagger: round {index}, training on {entry['dataset']['episodes']} episodes "
            f"({entry['dataset']['labelled_episodes']} new) for {dagger.steps_per_round} steps"
        )
        entry["train"] = _train_once(round_train, progress, echo)
        checkpoint = Path(entry["train"]["checkpoint"])
        metrics["rounds"].append(entry)
        save()
    if dagger.final_episodes:
        echo(f"dagger: final rollouts of {checkpoint} without the expert")
        final = simroll.evaluate(
            checkpoint,
            tasks=list(dagger.tasks),
            objects=list(dagger.objects),
            variations=list(dagger.variations),
            episodes=dagger.final_episodes,
            seed=dagger.seed - 1,
            suite=dagger.suite,
            env=env,
            backend=dagger.backend,
            workers=dagger.workers,
            output_dir=output_dir / f"final_round_{dagger.rounds:02d}",
            progress=progress,
            policy_name="dagger_final",
        )
        metrics["final"] = _rollout_entry(final, 0.0, checkpoint)
    metrics["checkpoint"] = str(checkpoint)
    metrics["dataset_episodes"] = metrics["rounds"][-1]["dataset"]["episodes"]
    save()
    return metrics


def plot_dagger(metrics: Mapping[str, Any], path: Path) -> None:
    """TSR and DSR (95% intervals) of each round's rollouts and of the final rollouts, against
    the round that produced them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from simroll.io import atomic_path

    points = [
        (entry["round"] - 1, entry["rollouts"], f"beta {entry['rollouts']['beta']:g}")
        for entry in metrics["rounds"]
        if "rollouts" in entry
    ]
    if "final" in metrics:
        points.append((len(metrics["rounds"]) - 1, metrics["final"], "final, alone"))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for key, colour, shift in (("tsr", "tab:blue", -0.06), ("dsr", "tab:orange", 0.06)):
        xs = [x + shift for x, _, _ in points]
        ys = [rollout[key]["rate"] for _, rollout, _ in points]
        low = [rollout[key]["rate"] - rollout[key]["low"] for _, rollout, _ in points]
        high = [rollout[key]["high"] - rollout[key]["rate"] for _, rollout, _ in points]
        ax.errorbar(xs, ys, yerr=[low, high], fmt="o-", color=colour, capsize=3, label=key.upper())
    for x, _, label in points:
        ax.annotate(label, (x, 1.07), ha="center", fontsize=7, color="0.4")
    ax.set_xlabel("policy of round (0: before DAgger)")
    ax.set_ylabel("rate in its rollouts (95% CI)")
    ax.set_ylim(0.0, 1.12)
    ax.set_xticks(sorted({x for x, _, _ in points}))
    ax.legend(loc="lower right", fontsize=8)  # rates sit high; the low corner is free
    ax.set_title("DAgger: closed-loop success of each round's policy")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
