"""Copies a trained checkpoint into ``policies/<name>/`` and writes its card from real outputs.

The card (``card.md``) is assembled from files that commands produced, nothing typed by hand:
the training run's ``metrics.json`` and ``train_config.json`` (data, recipe, steps, losses, time),
the checkpoint's ``config.json``, and the ``summary.json`` of one or more ``simroll eval`` runs of
the shipped checkpoint (closed-loop TSR/DSR with 95% intervals, with the command that made them).

Run: ``python scripts/ship_policy.py --checkpoint runs/train/vla/checkpoints/last --name vla_soft
--train-run runs/train/vla --eval-run runs/ship_vla_eval [--eval-run runs/ship_expert_eval]
--train-command "simroll train ..."``

A checkpoint ensemble ships as its members under one folder, then its own card:
``--name ens/member_0 --member-of ens ...`` for each member, then ``--name ens
--ensemble-config configs/policy/ens.yaml --eval-run ...``.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from simroll.io import write_text_atomic

ROOT = Path(__file__).resolve().parents[1]


def eval_section(run_dir: Path) -> str:
    summary = json.loads((run_dir / "summary.json").read_text())
    config = summary["provenance"]["config"] or {}
    lines = [
        f"### `{run_dir.name}`: {summary['episodes']} episodes",
        "",
        f"Config: env tasks {config.get('env', {}).get('tasks')}, obs_mode "
        f"{config.get('env', {}).get('obs_mode')}, image_size "
        f"{config.get('env', {}).get('image_size')}, objects "
        f"{config.get('env', {}).get('objects')}, episodes per cell {config.get('episodes')}, "
        f"base seed {config.get('seed')}, policy `{config.get('policy', {}).get('_target_')}`"
        f" (git {str(summary['provenance']['git_sha'])[:10]}).",
        "",
        "| task | object | episodes | TSR [95% CI] | DSR [95% CI] | compute/call (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for group in summary["groups"]:
        tsr, dsr = group["tsr"], group["dsr"]
        lines.append(
            f"| {group['task']} | {group['object']} | {group['episodes']} | "
            f"{tsr['rate']:.2f} [{tsr['low']:.2f}, {tsr['high']:.2f}] | "
            f"{dsr['rate']:.2f} [{dsr['low']:.2f}, {dsr['high']:.2f}] | "
            f"{1000 * group['compute_per_call_s']:.2f} |"
        )
    command = summary["provenance"].get("command")
    if command:
        lines += ["", f"Command: `{command}`"]
    return "\n".join(lines)


def overall(run_dir: Path) -> dict:
    """The all-tasks, all-objects row of an eval run's summary."""
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = [g for g in summary["groups"] if g["object"] == "all" and g["task"] in ("all",)]
    rows = rows or [g for g in summary["groups"] if g["object"] == "all"]
    return rows[-1]


def comparison(policy_run: Path, reference_run: Path) -> str:
    """The policy's TSR as a fraction of the reference's (same seeded specs), from the summaries."""
    mine, ref = overall(policy_run), overall(reference_run)
    ratio = mine["tsr"]["rate"] / ref["tsr"]["rate"] if ref["tsr"]["rate"] else float("nan")
    return (
        f"**TSR relative to `{reference_run.name}` on the same specs:** "
        f"{mine['tsr']['rate']:.2f} / {ref['tsr']['rate']:.2f} = {ratio:.0%} "
        f"(DSR {mine['dsr']['rate']:.2f} vs {ref['dsr']['rate']:.2f})."
    )


def task_rows(run: Path) -> dict[str, dict]:
    """An eval run's all-objects row of each task."""
    summary = json.loads((run / "summary.json").read_text())
    return {g["task"]: g for g in summary["groups"] if g["object"] == "all"}


def per_task(policy_run: Path, reference_run: Path) -> str:
    """Per task: the policy's TSR (95% interval) against the reference's on the same specs, the
    ratios the policy goals are stated in, and the share of its successes within tolerance."""

    mine, ref = task_rows(policy_run), task_rows(reference_run)
    lines = [
        f"| task | TSR [95% CI] | `{reference_run.name}` TSR | TSR ratio | CI low / reference "
        "| DSR/TSR |",
        "|---|---|---|---|---|---|",
    ]
    for task in [name for name in mine if name in ref]:
        tsr, ref_tsr = mine[task]["tsr"], ref[task]["tsr"]["rate"]
        dsr = mine[task]["dsr"]["rate"]
        lines.append(
            f"| {task} | {tsr['rate']:.2f} [{tsr['low']:.2f}, {tsr['high']:.2f}] | "
            f"{ref_tsr:.2f} | {tsr['rate'] / ref_tsr:.2f} | {tsr['low'] / ref_tsr:.2f} | "
            + (f"{dsr / tsr['rate']:.2f} |" if tsr["rate"] else "n/a |")
        )
    return "\n".join(lines)


def dagger_section(run: Path) -> str:
    """The DAgger run a checkpoint came from: its base dataset and each round's rollouts,
    labels and training, from the run's ``dagger.json`` (``run`` may also be a copy of that
    file, e.g. ``benchmarks/results/dagger_vla.json`` once the run directory is gone)."""
    metrics = json.loads((run if run.is_file() else run / "dagger.json").read_text())
    config = metrics["config"]
    dagger, train = config["dagger"], config["train"]
    weights = train.get("task_weights")
    lines = [
        f"`{run}`: {config['rounds']} rounds from `{train['init_from'] or 'a BC run'}` on base "
        f"dataset `{train['dataset_root']}`; each round rolled the previous round's checkpoint out "
        f"on {dagger['episodes_per_round']} episodes per cell of {dagger['tasks']} x "
        f"{dagger['objects']} (base seed {dagger['seed']} + round - 1), executing the labeller's "
        f"action with probability beta, labelled every visited state with "
        f"`{dagger['labeller']['_target_']}` ({dagger['labeller'].get('closure', '')}), joined "
        f"the episodes onto the dataset and trained {dagger['steps_per_round']} steps from the "
        "previous weights"
        + (
            f", drawing frames with task_weights `{json.dumps(weights)}` (sampling weight by "
            "instruction)"
            if weights
            else ""
        )
        + ". Rollout rates are of the mixed policy that made the round's labels. "
        f"`dagger.json` counts {metrics['seconds'] / 60:.0f} minutes of wall time (summed "
        "over a resumed run's invocations).",
        "",
        "| round | beta | rollout TSR [95% CI] | rollout DSR [95% CI] | expert steps | labelled "
        "frames | dataset episodes | final loss |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for entry in metrics["rounds"]:
        if "rollouts" not in entry:
            continue
        rollout, trained = entry["rollouts"], entry["train"]
        tsr, dsr = rollout["tsr"], rollout["dsr"]
        lines.append(
            f"| {entry['round']} | {rollout['beta']:g} | {tsr['rate']:.2f} [{tsr['low']:.2f}, "
            f"{tsr['high']:.2f}] | {dsr['rate']:.2f} [{dsr['low']:.2f}, {dsr['high']:.2f}] | "
            f"{rollout['expert_steps']} of {rollout['frames']} | "
            f"{entry['dataset']['labelled_frames']} | {entry['dataset']['episodes']} | "
            f"{trained['final_loss']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def lr_schedule_line(schedule: dict[str, Any] | None) -> list[str]:
    """The card's line on the cosine learning-rate schedule as trained (none when the run did not
    record one), saying so when LeRobot fitted the configured, longer one to the run's steps."""
    if not schedule or "decay_steps" not in schedule:
        return []
    if schedule["fitted_to_steps"]:
        return [
            f"- learning-rate schedule as trained: warm-up {schedule['warmup_steps']}, cosine "
            f"decay over {schedule['decay_steps']} steps (LeRobot fitted the configured "
            f"{schedule['configured_warmup_steps']} / {schedule['configured_decay_steps']} "
            "to the run's steps)"
        ]
    return [
        f"- learning-rate schedule: warm-up {schedule['warmup_steps']}, cosine decay over "
        f"{schedule['decay_steps']} steps"
    ]


def data_source(dataset: Path) -> str:
    collect = dataset / "meta" / "simroll_collect.yaml"
    if not collect.is_file():
        return "demonstrations"
    import yaml

    cfg = yaml.safe_load(collect.read_text())
    policy = cfg.get("policy", {})
    noise = (
        f", executed-action noise std {policy['arm_std']} (hand) / {policy['gripper_std']} "
        "(gripper), clean expert actions stored"
        if "arm_std" in policy
        else ""
    )
    env = cfg.get("env", {})
    return (
        f"`{policy.get('_target_')}` ({policy.get('closure', '')}{noise}); env tasks "
        f"{env.get('tasks')}, objects {env.get('objects')}, obs_mode {env.get('obs_mode')}, "
        f"image_size {env.get('image_size')}, gripper_mode {env.get('gripper_mode')}"
    )


def config_defaults(policy_type: str) -> dict:
    """The fields of the policy type's config class with their defaults (None where a field
    has a factory)."""
    import dataclasses

    from lerobot.configs.policies import PreTrainedConfig

    from simroll.policies.lerobot import register_policy_types

    register_policy_types()
    fields = dataclasses.fields(PreTrainedConfig.get_choice_class(policy_type))
    return {f.name: (None if f.default is dataclasses.MISSING else f.default) for f in fields}


def inference_settings(args, parser, config: dict, checkpoint: Path) -> tuple[dict, dict]:
    """``--inference`` as {key: value}, and each key's value in ``config`` before it (a setting
    the checkpoint predates is a field of its config class, at the field's default)."""
    from simroll.policies.resolve import parse_setting

    try:
        settings = dict(parse_setting(item) for item in args.inference)
    except ValueError as error:
        parser.error(f"--inference: {error}")
    defaults = config_defaults(config["type"])
    unknown = [key for key in settings if key not in config and key not in defaults]
    if unknown:  # checked before anything in policies/ is replaced
        parser.error(
            f"--inference keys {unknown} are not in {checkpoint / 'config.json'} nor "
            f"fields of the {config['type']!r} config"
        )
    return settings, {key: config.get(key, defaults.get(key)) for key in settings}


INFERENCE_LINE = "- inference settings changed from training's "


def results_section(eval_runs: list[Path], member_of: str = "") -> list[str]:
    """The card's closed-loop results: the first eval run's table, then (with a second run, the
    expert on the same specs) its table and the TSR ratios between the two, then any further
    runs' tables; for a member of a shipped ensemble, a pointer to the ensemble's card, whose
    results are measured with every member acting."""
    if member_of:
        return [
            "## Closed-loop results",
            "",
            f"Measured as a member of the ensemble `{member_of}`: see its card "
            f"(`policies/{member_of}/card.md`).\n",
        ]
    lines = ["## Closed-loop results", "", *[eval_section(run) + "\n" for run in eval_runs[:2]]]
    if len(eval_runs) > 1:
        mine, expert = eval_runs[0], eval_runs[1]
        if len(task_rows(mine)) > 1:
            heading = f"`{mine.name}` against `{expert.name}` (same specs):"
            lines += [heading, "", per_task(mine, expert) + "\n"]
        else:  # one sentence that names both runs
            lines.append(comparison(mine, expert) + "\n")
    lines += [eval_section(run) + "\n" for run in eval_runs[2:]]
    return lines


def reship(args, parser) -> None:
    """``--reship``: new inference settings and results for the shipped ``policies/NAME``.

    Its card's sections from ``## Training`` up to ``## Closed-loop results`` (written by this
    script from the training and DAgger runs) are kept, except the inference-settings line,
    which is rewritten against the training's values: those the old line names, else the
    checkpoint's config before this change (a config the card does not say was changed holds the
    training's values). The closed-loop results come from the new ``--eval-run``s; the training
    command and selection lines are kept unless given anew."""
    target = ROOT / "policies" / args.name
    card_path = target / "card.md"
    if not card_path.is_file():
        parser.error(f"--reship needs a shipped policy with a card: {card_path} does not exist")
    if not args.inference or not args.eval_run:
        parser.error("--reship takes --inference settings and the --eval-run(s) measuring them")
    old = card_path.read_text().splitlines()
    try:
        start = old.index("## Training")
        end = old.index("## Closed-loop results")
    except ValueError:
        parser.error(f"{card_path} was not written by this script (no Training/results sections)")
    kept = old[start:end]
    config = json.loads((target / "config.json").read_text())
    settings, trained_with = inference_settings(args, parser, config, target)
    for line in kept:
        if line.startswith(INFERENCE_LINE):  # `{...}` after the prefix: training's values
            earlier = json.loads(line[len(INFERENCE_LINE) : line.index("}") + 1])
            trained_with.update({key: earlier[key] for key in settings if key in earlier})
    kept = [line for line in kept if not line.startswith(INFERENCE_LINE)]
    changed = {key: value for key, value in settings.items() if trained_with[key] != value}
    if changed:  # after the training list (the first blank line of the section)
        at = kept.index("", 2) if "" in kept[2:] else len(kept)
        kept.insert(
            at,
            f"{INFERENCE_LINE}{json.dumps({k: trained_with[k] for k in changed})}: "
            f"`{json.dumps(changed)}` (stored in `config.json`)",
        )
    config.update(settings)
    write_text_atomic(target / "config.json", json.dumps(config, indent=4) + "\n")
    carried = {
        prefix: next((line for line in old if line.startswith(prefix)), "")
        for prefix in ("Training command: ", "Checkpoint selection: ")
    }
    size_mb = sum(p.stat().st_size for p in target.iterdir() if p.name != "card.md") / 1e6
    card = [
        *old[:start],
        *kept,
        *results_section(args.eval_run),
        f"Training command: `{args.train_command}`\n"
        if args.train_command
        else (carried["Training command: "] + "\n" if carried["Training command: "] else ""),
        f"Checkpoint selection: {args.selection}\n"
        if args.selection
        else (
            carried["Checkpoint selection: "] + "\n" if carried["Checkpoint selection: "] else ""
        ),
        f"Re-shipped with new inference settings (`{json.dumps(settings)}`); the weights and "
        "the training sections above are those shipped before.\n",
        "_Card written by `python scripts/ship_policy.py`; numbers from the runs named above._",
    ]
    write_text_atomic(card_path, "\n".join(card) + "\n")
    print(f"re-shipped {target} ({size_mb:.1f} MB) with {json.dumps(settings)}")


def ensemble_card(args, parser) -> None:
    """``--ensemble-config``: the card of ``policies/NAME``, a checkpoint ensemble whose members
    were shipped under it (``--name NAME/member_0 --member-of NAME``, ...): the ensemble config
    (how actions combine, each member's checkpoint and noise seed), each member's size and card,
    then the closed-loop results of the ``--eval-run``s (the ensemble, then the expert)."""
    import yaml

    target = ROOT / "policies" / args.name
    config_path = args.ensemble_config
    if not config_path.is_file():
        parser.error(f"--ensemble-config: {config_path} does not exist")
    config = yaml.safe_load(config_path.read_text())
    members = config.get("members") if isinstance(config, dict) else None
    if not members or not all(isinstance(m, dict) and "path" in m for m in members):
        parser.error(f"--ensemble-config: {config_path} has no members with a checkpoint path")
    rows = []
    for index, member in enumerate(members):
        path = ROOT / member["path"]
        if not (path / "config.json").is_file() or not (path / "card.md").is_file():
            parser.error(
                f"member {index}: {path} is not a shipped checkpoint with a card (ship it first "
                f"with --name {args.name}/member_{index} --member-of {args.name})"
            )
        if not path.resolve().is_relative_to(target.resolve()):
            parser.error(f"member {index}: {member['path']} is not under policies/{args.name}")
        size_mb = sum(p.stat().st_size for p in path.iterdir() if p.name != "card.md") / 1e6
        kind = json.loads((path / "config.json").read_text())["type"]
        rows.append(
            f"| {index} | `{member['path']}` | {kind} | {size_mb:.1f} MB | "
            f"{member.get('noise_seed', 0)} | `{json.dumps(member.get('overrides') or {})}` | "
            f"[card]({path.relative_to(target)}/card.md) |"
        )
    shown = config_path.resolve()
    shown = shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown
    combine = config.get("combine", "mean")
    weights = config.get("weights")
    card = [
        f"# `{args.name}`: an ensemble of {len(members)} checkpoints",
        "",
        f"Every member acts at every control step and the env executes the {combine} of their "
        "actions"
        + (f", weighted {weights}" if weights else ", equally weighted")
        + f" (`simroll.policies.ensemble`). Config: `{shown}`; load with "
        f"`simroll eval policy={config_path.stem}`. Network evaluations per control step add up "
        "over the members.",
        "",
        "| member | checkpoint | type | size | noise seed | overrides | training |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        *results_section(args.eval_run),
        f"Checkpoint selection: {args.selection}\n" if args.selection else "",
        "_Card written by `python scripts/ship_policy.py --ensemble-config`; numbers from the runs "
        "named above._",
    ]
    write_text_atomic(target / "card.md", "\n".join(card) + "\n")
    print(f"wrote {target / 'card.md'} ({len(members)} members)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, help="required unless --reship")
    parser.add_argument("--name", required=True)
    parser.add_argument("--train-run", type=Path, help="required unless --reship")
    parser.add_argument(
        "--reship",
        action="store_true",
        help="re-ship policies/NAME itself with new --inference settings and --eval-run results: "
        "the weights stay, and the card's training and DAgger sections (written from its runs "
        "when it was shipped) are carried over",
    )
    parser.add_argument(
        "--eval-run",
        action="append",
        type=Path,
        default=[],
        help="eval runs of the shipped policy; a second one (the expert on the same specs) adds "
        "the TSR ratio",
    )
    parser.add_argument("--train-command", default="", help="the simroll train command line")
    parser.add_argument(
        "--dagger-run",
        action="append",
        type=Path,
        default=[],
        help="the DAgger run (simroll train dagger.rounds=N) it ends, or a copy of its "
        "dagger.json; repeat for runs that continued one another, first run first",
    )
    parser.add_argument(
        "--selection",
        default="",
        help="how this checkpoint was chosen among the run's checkpoints (named eval runs)",
    )
    parser.add_argument(
        "--inference",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an inference setting stored in the shipped config.json (e.g. n_action_steps=1); "
        "the card lists it",
    )
    parser.add_argument(
        "--member-of",
        default="",
        metavar="ENSEMBLE",
        help="the checkpoint is a member of the shipped ensemble policies/ENSEMBLE (--name "
        "ENSEMBLE/member_N): its card points at the ensemble's results instead of --eval-run",
    )
    parser.add_argument(
        "--ensemble-config",
        type=Path,
        help="write policies/NAME/card.md for the ensemble this policy config "
        "(configs/policy/*.yaml) loads from members shipped under policies/NAME, with the "
        "--eval-run results",
    )
    args = parser.parse_args()
    if args.ensemble_config is not None:
        if args.checkpoint is not None or args.train_run is not None or args.reship:
            parser.error(
                "--ensemble-config writes only the ensemble's card: no --checkpoint, "
                "--train-run or --reship"
            )
        ensemble_card(args, parser)
        return
    if args.member_of and args.eval_run:
        parser.error("--member-of: the ensemble's card holds the results; give no --eval-run")
    if args.reship:
        if args.checkpoint is not None or args.train_run is not None or args.dagger_run:
            parser.error(
                "--reship re-uses policies/NAME and its card's training sections: "
                "give no --checkpoint, --train-run or --dagger-run"
            )
        reship(args, parser)
        return
    if args.checkpoint is None or args.train_run is None:
        parser.error("--checkpoint and --train-run are required (or --reship)")
    config = json.loads((args.checkpoint / "config.json").read_text())
    settings, trained_with = inference_settings(args, parser, config, args.checkpoint)
    config.update(settings)
    metrics = json.loads((args.train_run / "metrics.json").read_text())
    recipe = json.loads((args.train_run / "train_config.json").read_text())
    target = ROOT / "policies" / args.name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(args.checkpoint, target)
    write_text_atomic(target / "config.json", json.dumps(config, indent=4) + "\n")
    size_mb = sum(p.stat().st_size for p in target.iterdir()) / 1e6
    card = [
        f"# `{args.name}`: {config['type']} policy",
        "",
        f"Checkpoint in LeRobot's pretrained format ({size_mb:.1f} MB): `config.json`, "
        "`model.safetensors`, pre/post-processor pipelines with the dataset's normalisation "
        "statistics. Load with `simroll eval policy=... policy.path=policies/" + args.name + "`.",
        "",
        "## Training",
        "",
        f"- data: `{metrics['dataset']}` ({metrics['dataset_episodes']} episodes, "
        f"{metrics['dataset_frames']} frames) made by `simroll collect`"
        + (" and the DAgger rounds below (base dataset: " if args.dagger_run else ": ")
        + data_source(ROOT / metrics["dataset"])
        + (")" if args.dagger_run else ""),
        f"- inputs: {', '.join(metrics['input_features'])}",
        f"- {metrics['parameters']:,} parameters; {metrics['steps']} steps at batch "
        f"{metrics['batch_size']}, seed {metrics['seed']}; loss {metrics['first_loss']:.3f} -> "
        f"{metrics['final_loss']:.3f}; {metrics['seconds'] / 60:.0f} minutes on CPU",
        f"- recipe overrides: `{json.dumps(recipe.get('policy_overrides', {}))}`",
        *lr_schedule_line(metrics.get("lr_schedule")),
        *(
            [
                f"- frames drawn with task_weights `{json.dumps(recipe['task_weights'])}` "
                "(sampling weight by instruction)"
            ]
            if recipe.get("task_weights")
            else []
        ),
        (
            f"- weights: exponential moving average, decay {metrics['ema_decay']} with warm-up"
            if metrics.get("ema_decay")
            else "- weights: the last optimizer step's (no moving average)"
        ),
        *(
            [
                f"- inference settings changed from training's {json.dumps(trained_with)}: "
                f"`{json.dumps(settings)}` (stored in `config.json`)"
            ]
            if settings
            else []
        ),
        "",
        *(["## Interactive imitation (DAgger)", ""] if args.dagger_run else []),
        *[dagger_section(run) for run in args.dagger_run],
        *results_section(args.eval_run, args.member_of),
        f"Training command: `{args.train_command}`\n" if args.train_command else "",
        f"Checkpoint selection: {args.selection}\n" if args.selection else "",
        "_Card written by `python scripts/ship_policy.py`; numbers from the runs named above._",
    ]
    write_text_atomic(target / "card.md", "\n".join(card) + "\n")
    print(f"shipped {target} ({size_mb:.1f} MB)")


if __name__ == "__main__":
    main()
