"""Where a learned policy's successes go over the object's deformation tolerance.

A success over tolerance costs DSR, but the peak alone does not say what caused it. This script
runs ``--policy`` (a checkpoint) on seeded specs of one soft task; at every step the gentle expert
labels the same observation (DAgger's mixture at beta 0,
:class:`simroll.policies.mixing.ExpertMixing`: the policy acts, the expert only labels), so each
step has the expert's recovered phase (``SoftExpert.phase``: align, descend, close, squeeze, lift,
carry, lower, release, retreat, rise). Reported:

* per episode: success, how it ended, the steps per expert phase and the phase of the last step
  (where a timed-out policy stalled), peak deformation over tolerance and, where the normalized
  deformation first exceeded 1, the step, the expert's phase there and over the two steps
  before, and the mean grip force of the steps before; ``dropped`` when the object had left the
  grasp by then (the expert saw it held earlier and not held at the crossing): a fall, not the
  grip, crushed it;
* per phase: the steps, and the mean and mean absolute policy action minus the label per action
  dimension (x, y, z, yaw, gripper);
* the over-tolerance successes counted by the phase at the crossing and by drop / no drop, and
  the failures by the phase of their last step;
* lost grasps: the steps at which the expert, having seen the object held (squeeze, lift, carry,
  lower), sees it no longer held outside a release (dropped, or let go too early), per episode
  and summed per phase of the step before; and the mean grip force over the steps the expert
  calls "carry";
* the grasp: where the hand was when both pads first touched (each finger over the expert's
  contact force), as millimetres from the object's centre across and along the jaw (hand x and y)
  and from the expert's grasp height (which the expert closes within 6 mm of), with the medians of
  their magnitudes for successes within and over tolerance: whether an off-centre, low or high
  grasp goes with the crushing;
* on SoftPlace: where the object was relative to the target when the policy first commanded the
  jaw open (a gripper command below -0.5) after the expert had seen the object held: the step,
  the expert's phase there (``lift`` or ``carry`` when the expert would have carried on) and the
  object's horizontal distance to the target's centre, against the success radius (3 cm); the
  failures counted by that distance (``within_radius``, ``to_5cm``, ``beyond_5cm``,
  ``no_release``); each episode's target direction from the object's start, as a world
  quadrant (``+x+y``...); and, from pixels, how much of the target the scene camera saw
  (``target_pixels``: its green pixels) at the start and at that release, with the medians
  over successes and failures; and that release's offset in the camera's view (``beyond_m``
  along its horizontal line of sight past the target, ``aside_m`` across it), with the medians
  of both over the near misses (failures released 3-5 cm away).

The env settings come from the checkpoint's ``simroll_env.json``; ``--override KEY=VALUE``
changes a policy setting for the run (e.g. ``n_action_steps``). ``--hold-hand-in PHASE ...`` is
an intervention, not a deployable policy: in those expert phases the policy's hand motion (x, y,
z, yaw) is replaced by zero (the hand target stays where it is) and its gripper command kept, so
a run with and one without say whether the hand's motion there causes the crossings (the logged
errors are of the executed action). ``--expert-hand-in PHASE ...`` and ``--expert-grip-in PHASE
...`` are interventions of the same kind: in those phases the policy's hand motion (x, y, z, yaw),
or its gripper command, is replaced by the expert's label, the other channels kept; e.g. whether
a policy that drops objects on the way does so by its grip or by its carrying motion.
``--move-target-after-release METRES`` is another (SoftPlace only): the first time the object
rests off the target (beyond the success radius) after the expert saw it held, the target disc
moves to METRES from the object on its far side (inside the table's target range), so the
scene no longer shows the object next to its target; each episode then says at which step the
target moved and after how many steps the policy held the object again (``regrasp_steps``,
None when it did not), and the summary counts them: whether a policy that lets go beside the
target takes the object again once the target is elsewhere.
``--squeeze-hold-hand`` labels with the expert whose squeeze holds the hand still
(``SoftExpert(squeeze_hold_hand=True)``); the phases and so the crossings are the same, the
squeeze's z labels differ.

``--from-run DIR`` replays the episodes of an eval run (``records.jsonl``; its ``--task`` rows,
of ``--objects``; ``--failures-only`` keeps the failed ones) instead of ``seed + i`` specs; each
episode then carries the run's recorded success and the summary counts the replays that
reproduced it. The summary also gives, for every row of the task in the run (replayed or not,
read by resetting the env only), the run's successes per target quadrant on SoftPlace. Writes
``--out`` (JSON, atomically) and prints a
summary.

Run: ``python scripts/diagnose_deformation.py --policy policies/diffusion_soft_lift --task SoftLift
--episodes 10 --seed 900 --out benchmarks/results/lift_deformation_diagnosis.json`` (about 4
minutes on one core for 40 state-mode episodes); ``--policy CHECKPOINT --task SoftPlace
--from-run runs/test_x --failures-only`` for a run's SoftPlace failures. A run is replayed with
its own policy settings: the ``policy.overrides`` its manifest records (``--override`` changes
them), and a ``--policy`` whose weights are not the run's is refused. ``--from-run DIR
--run-policy`` replays with the whole policy config the run's manifest records instead of
``--policy`` (any policy ``simroll eval`` ran, e.g. ``policy=vla_ensemble``; its checkpoint paths
as the run gave them, relative to the working directory), and the env settings of the run's
fingerprint (``env.obs_mode``, ``env.image_size``, ``env.gripper_mode``); the weights are not
checked, and ``reproduced`` says whether the replays are the run's episodes.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

from simroll.experts.soft import PHASES  # noqa: E402  (after MUJOCO_GL)

OBJECTS = ("sponge", "tofu", "foam_cylinder", "dumpling")
TASKS = ("SoftLift", "SoftPlace", "SoftSqueeze")
AXES = ("x", "y", "z", "yaw", "gripper")
HELD_PHASES = frozenset({"squeeze", "lift", "carry", "lower"})  # the expert sees it grasped
LET_GO_PHASES = frozenset({"release", "retreat"})  # where leaving the grasp is the plan
OPEN_COMMAND = -0.5  # an executed gripper command below this moves the jaw towards open


def lost_grasps(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each step at which a held object stopped being held other than by a release: the step, the
    phase the expert saw before and the one it sees now."""
    lost = []
    for step in range(1, len(rows)):
        before, now = rows[step - 1]["phase"], rows[step]["phase"]
        if before in HELD_PHASES and now not in HELD_PHASES and now not in LET_GO_PHASES:
            lost.append({"step": step, "phase_before": before, "phase": now})
    return lost


def crossing(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first step whose normalized deformation exceeds 1, with what led to it; None if no
    step did. ``rows`` holds each step's ``phase``, ``deformation`` (over tolerance) and
    ``grip_force`` (mean of both fingers, N)."""
    over = next((k for k, row in enumerate(rows) if row["deformation"] > 1.0), None)
    if over is None:
        return None
    before = rows[max(0, over - 2) : over]
    held = any(row["phase"] in HELD_PHASES for row in rows[:over])
    # held earlier, not held at the crossing: it fell (or was pulled) out of the grasp first
    dropped = held and rows[over]["phase"] not in HELD_PHASES
    return {
        "step": over,
        "phase": rows[over]["phase"],
        "phases_before": [row["phase"] for row in before],
        "grip_force_before": [round(row["grip_force"], 3) for row in before],
        "dropped": dropped,
    }


def first_release(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first step, after the expert saw the object held, whose executed gripper command opens
    the jaw (below ``OPEN_COMMAND``): the step, the expert's phase and, where the rows carry it
    (SoftPlace), the object's horizontal distance to the target centre; None if none did."""
    held = False
    for step, row in enumerate(rows):
        held = held or row["phase"] in HELD_PHASES
        if held and row["gripper"] < OPEN_COMMAND:
            found = {"step": step, "phase": row["phase"]}
            if "goal_distance" in row:
                found["goal_distance_m"] = round(row["goal_distance"], 4)
            if "goal_offset_view" in row:  # (beyond the target seen from the camera, to its side)
                found["beyond_m"], found["aside_m"] = (round(v, 4) for v in row["goal_offset_view"])
            if row.get("target_pixels") is not None:
                found["target_pixels"] = row["target_pixels"]
            return found
    return None


def target_pixels(obs: dict[str, Any]) -> int | None:
    """Pixels of the scene camera image that show the green target disc (its translucent green
    over the grey-white table: green above 1.15x red and 1.1x blue, and above 40); None in state
    mode. Objects, table and hand are not green, so this counts what the camera sees of it."""
    pixels = obs.get("pixels") if isinstance(obs, dict) else None
    if not pixels or "scene" not in pixels:
        return None
    image = pixels["scene"].astype(float)
    red, green, blue = image[..., 0], image[..., 1], image[..., 2]
    return int(((green > 1.15 * red) & (green > 1.1 * blue) & (green > 40)).sum())


def moved_target(raw, distance: float, step: int) -> int | None:
    """If the object rests off the target (beyond the success radius), move the target disc to
    ``distance`` from the object on its side away from the target (clipped to the table's target
    range, as SoftPlace's reset draws it) and return ``step``; else leave it and return None."""
    import numpy as np

    from simroll.envs.soft.place import PLACE_RADIUS, TARGET_RANGE

    center, goal = raw.object_center(), raw.goal_position()
    away = center[:2] - goal[:2]
    off = float(np.linalg.norm(away))
    if abs(center[2] - raw.rest_center[2]) >= 0.015 or off <= PLACE_RADIUS:
        return None
    raw.model.site_pos[raw.ids.target_site][:2] = np.clip(
        center[:2] + distance * away / off, -TARGET_RANGE, TARGET_RANGE
    )
    return step


def regrasp_steps(rows: list[dict[str, Any]], moved_at: int | None) -> int | None:
    """Steps from the target's move to the first step the expert sees the object held again."""
    if moved_at is None:
        return None
    for step in range(moved_at + 1, len(rows)):
        if rows[step]["phase"] in HELD_PHASES:
            return step - moved_at
    return None


def view_offset(raw, offset) -> tuple[float, float]:
    """An object's horizontal offset from the target in the scene camera's view of the target:
    how far beyond the target along the camera's horizontal line of sight (negative: short of it,
    toward the camera) and how far to its side (positive: left as the camera sees it). A single
    camera judges the first from size and height cues only, the second from image position."""
    import numpy as np

    camera = raw.data.cam_xpos[raw._scene_camera][:2]
    sight = raw.goal_position()[:2] - camera
    sight = sight / np.linalg.norm(sight)
    left = np.array([-sight[1], sight[0]])
    return float(offset @ sight), float(offset @ left)


def release_bin(release: dict[str, Any] | None, radius: float) -> str:
    """A failure's first release by its distance to the target: within the success radius, up
    to 5 cm, beyond, or no release (never grasped, or never let go)."""
    if release is None or "goal_distance_m" not in release:
        return "no_release"
    distance = release["goal_distance_m"]
    return "within_radius" if distance <= radius else "to_5cm" if distance <= 0.05 else "beyond_5cm"


def quadrant(direction: Any) -> str:
    """A horizontal direction's world quadrant, e.g. ``+x-y``."""
    return f"{'+' if direction[0] >= 0 else '-'}x{'+' if direction[1] >= 0 else '-'}y"


def by_quadrant(outcomes: Any) -> dict[str, dict[str, int]]:
    """Successes and episodes per target quadrant from ``(quadrant, success)`` pairs."""
    tally: dict[str, dict[str, int]] = {}
    for where, success in outcomes:
        counts = tally.setdefault(where, {"successes": 0, "episodes": 0})
        counts["successes"] += int(success)
        counts["episodes"] += 1
    return dict(sorted(tally.items()))


def run_records(run_dir: Path, task: str, objects: list[str]) -> list[Any]:
    """An eval run's records of ``task`` on ``objects``, in file order, as the run reader
    (:func:`simroll.report.runs.load_eval_run`) gives them: a retried episode's last attempt,
    corrupted lines left out, a multirun sweep's root refused with its jobs named."""
    from simroll.report.runs import ReportError, load_eval_run
    from simroll.rollout.store import RECORDS_FILENAME

    try:
        run = load_eval_run(run_dir)
    except ReportError as error:
        raise SystemExit(f"--from-run: {error}") from None
    if not (run_dir / RECORDS_FILENAME).is_file():
        raise SystemExit(f"--from-run {run_dir}: no {RECORDS_FILENAME} there (an eval run?)")
    chosen = [r for r in run.records if r.spec.task == task and r.spec.object in objects]
    if not chosen:
        raise SystemExit(f"--from-run {run_dir}: no {task} episodes of {objects} in its records")
    return chosen


def run_policy_settings(run_dir: Path) -> tuple[dict[str, Any], str | None]:
    """The policy overrides an eval run ran with and the SHA-256 of its weights, from its
    manifest (empty and None where it records none)."""
    from simroll.rollout.manifest import ManifestError, read_manifest

    try:
        manifest = read_manifest(run_dir)
    except ManifestError as error:
        raise SystemExit(f"--from-run: {error}") from None
    if manifest is None:
        return {}, None
    policy = manifest.config.get("policy") or {}
    overrides = policy.get("overrides") or {}
    return dict(overrides), manifest.fingerprint.get("policy.weights_sha256")


def run_policy_config(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The policy config an eval run's manifest records (a ``_partial_`` Hydra config) and the
    env settings of its fingerprint, for replaying the run's policy whatever it was."""
    from simroll.rollout.manifest import ManifestError, read_manifest

    try:
        manifest = read_manifest(run_dir)
    except ManifestError as error:
        raise SystemExit(f"--from-run: {error}") from None
    policy = None if manifest is None else manifest.config.get("policy")
    if not (isinstance(policy, dict) and "_target_" in policy):
        raise SystemExit(
            f"--run-policy: {run_dir} records no policy config (a manifest whose config has a "
            "policy with a _target_, as simroll eval writes); pass --policy instead"
        )
    fingerprint = manifest.fingerprint
    env = {
        "obs_mode": fingerprint.get("env.obs_mode", "state"),
        "gripper_mode": fingerprint.get("env.gripper_mode", "delta"),
        "image_size": fingerprint.get("env.image_size", 96),
    }
    return policy, env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="policies/diffusion_soft_lift")
    parser.add_argument("--task", default="SoftLift", choices=TASKS)
    parser.add_argument("--objects", nargs="+", default=list(OBJECTS), choices=OBJECTS)
    parser.add_argument("--episodes", type=int, default=10, help="per object")
    parser.add_argument("--seed", type=int, default=900, help="spec i of an object has seed+i")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a policy config setting for this run (e.g. n_action_steps=2), as "
        "`simroll eval +policy.overrides.KEY=VALUE` sets it",
    )
    parser.add_argument(
        "--hold-hand-in",
        nargs="+",
        default=[],
        choices=PHASES,
        metavar="PHASE",
        help=f"expert phases in which the policy's hand motion is replaced by zero: {PHASES}",
    )
    for flag, channel in (("--expert-hand-in", "hand motion"), ("--expert-grip-in", "gripper")):
        parser.add_argument(
            flag,
            nargs="+",
            default=[],
            choices=PHASES,
            metavar="PHASE",
            help=f"expert phases in which the policy's {channel} is replaced by the expert's label",
        )
    parser.add_argument(
        "--move-target-after-release",
        type=float,
        default=None,
        metavar="METRES",
        help="SoftPlace: once the object rests off the target after a grasp, move the target "
        "this far to the object's far side",
    )
    parser.add_argument(
        "--squeeze-hold-hand",
        action="store_true",
        help="label with the expert whose squeeze holds the hand still (squeeze_hold_hand)",
    )
    parser.add_argument(
        "--from-run",
        type=Path,
        metavar="DIR",
        help="replay this eval run's episodes of --task (and --objects) instead of seed + i specs",
    )
    parser.add_argument(
        "--failures-only", action="store_true", help="with --from-run: only its failed episodes"
    )
    parser.add_argument(
        "--run-policy",
        action="store_true",
        help="with --from-run: replay with the policy config the run's manifest records "
        "(e.g. an ensemble) instead of --policy",
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.failures_only and args.from_run is None:
        parser.error("--failures-only needs --from-run")
    if args.run_policy and args.from_run is None:
        parser.error("--run-policy needs --from-run")
    if args.run_policy and args.override:
        parser.error("--run-policy replays the run's policy config as it ran; drop --override")
    if args.move_target_after_release is not None and (
        args.task != "SoftPlace" or not 0.0 < args.move_target_after_release <= 0.3
    ):
        parser.error(
            "--move-target-after-release takes metres in (0, 0.3] and --task SoftPlace, got "
            f"{args.move_target_after_release} on {args.task}"
        )
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")
    from simroll.policies.resolve import parse_setting

    try:
        overrides = dict(parse_setting(item) for item in args.override)
    except ValueError as error:
        parser.error(f"--override: {error}")

    import numpy as np

    from simroll.envs.soft.place import PLACE_RADIUS
    from simroll.experts import SoftExpert
    from simroll.experts.soft import CONTACT_FORCE
    from simroll.io import write_json_atomic
    from simroll.policies.checkpoint import read_env_record, resolve_checkpoint, weights_digest
    from simroll.policies.lerobot import load_policy
    from simroll.policies.mixing import ExpertMixing
    from simroll.rollout.episode import EnvConfig, EpisodeObserver, run_episode
    from simroll.rollout.records import EpisodeSpec

    run_policy: dict[str, Any] | None = None
    if args.run_policy:
        run_policy, recorded = run_policy_config(args.from_run)
    else:
        checkpoint = resolve_checkpoint(args.policy)
        recorded = read_env_record(checkpoint)
    env_config = EnvConfig(
        obs_mode=recorded.get("obs_mode", "state"),
        gripper_mode=recorded.get("gripper_mode", "delta"),
        image_size=int(recorded.get("image_size", 96)),
    )

    placing = args.task == "SoftPlace"

    def goal_quadrant(env) -> str:
        """The quadrant of the target's direction from the object, read after the reset."""
        raw = env.unwrapped
        return quadrant(raw.goal_position()[:2] - raw.object_center()[:2])

    # which weights the path holds (not checked for a run's own policy config)
    weights = None if args.run_policy else weights_digest(args.policy)
    if args.from_run is not None:
        run = run_records(args.from_run, args.task, list(args.objects))
        ran_with, run_weights = run_policy_settings(args.from_run)
        if args.run_policy:
            ran_with = {}  # the config's own settings (its overrides included) replay as they ran
        if run_weights is not None and weights is not None and weights != run_weights:
            raise SystemExit(
                f"--from-run {args.from_run} was run with weights {run_weights[:12]}, but "
                f"--policy {args.policy} holds {weights[:12]}: pass the run's checkpoint"
            )
        overrides = {**ran_with, **overrides}  # the run's settings, --override on top
        if ran_with:
            print(f"policy settings of {args.from_run}: {ran_with}; replayed with {overrides}")
        specs = [(r.spec, r.success) for r in run if not (args.failures_only and r.success)]
        if not specs:
            raise SystemExit(
                f"--from-run {args.from_run}: none of its {len(run)} {args.task} episodes of "
                f"{list(args.objects)} failed; nothing to replay with --failures-only"
            )
    else:
        specs = [
            (EpisodeSpec(args.task, obj, seed=args.seed + i, index=i), None)
            for obj in args.objects
            for i in range(args.episodes)
        ]

    class StepLog(EpisodeObserver):
        """Each step's expert phase, normalized deformation, grip force and the policy's action
        minus the expert's label, read from the mixture that drives."""

        def on_reset(self, env, obs, info, policy):
            self.mixture = policy
            self.rows: list[dict[str, Any]] = []
            self.grasp: dict[str, Any] | None = None
            self.quadrant = goal_quadrant(env) if placing else None
            self.start_pixels = target_pixels(obs) if placing else None

        def on_step(self, env, obs, info, action):
            measured = info["eval"]
            forces = self.mixture.expert.finger_forces(obs)
            if self.grasp is None and bool((forces > CONTACT_FORCE).all()):
                raw = env.unwrapped
                pose, center = raw.hand_pose(), raw.object_center()
                offset = pose[:2] - center[:2]
                cos, sin = np.cos(pose[3]), np.sin(pose[3])
                self.grasp = {
                    "step": len(self.rows),
                    "across_mm": round(1000 * float(cos * offset[0] + sin * offset[1]), 2),
                    "along_mm": round(1000 * float(-sin * offset[0] + cos * offset[1]), 2),
                    "height_mm": round(
                        1000 * float(pose[2] - self.mixture.expert.grasp_height()), 2
                    ),
                }
            self.rows.append(
                {
                    "phase": self.mixture.expert.phase,
                    "deformation": measured["deformation"] / measured["tolerance"],
                    "grip_force": float(np.asarray(obs["tactile"]["force"]).sum() / 2.0),
                    "error": np.asarray(action, dtype=float) - self.mixture.action_label,
                    "gripper": float(action[4]),
                }
            )
            if placing:
                raw = env.unwrapped
                offset = raw.object_center()[:2] - raw.goal_position()[:2]
                self.rows[-1]["goal_distance"] = float(np.linalg.norm(offset))
                self.rows[-1]["goal_offset_view"] = view_offset(raw, offset)
                self.rows[-1]["target_pixels"] = target_pixels(obs)

    held_phases = frozenset(args.hold_hand_in)
    move_to = args.move_target_after_release
    expert_hand, expert_grip = frozenset(args.expert_hand_in), frozenset(args.expert_grip_in)

    class Intervened(ExpertMixing):
        """The policy drives (the expert labels); in ``held_phases`` its hand motion is zeroed, in
        ``expert_hand`` / ``expert_grip`` its hand motion / gripper is the expert's label."""

        def reset(self):
            super().reset()
            self.held_seen, self.moved_at = False, None

        def select_action(self, obs):
            action = super().select_action(obs)
            phase = self.expert.phase
            if move_to is not None:
                self.held_seen = self.held_seen or phase in HELD_PHASES
                if self.held_seen and self.moved_at is None and phase not in HELD_PHASES:
                    self.moved_at = moved_target(self.env, move_to, self.steps - 1)
            if phase in held_phases | expert_hand | expert_grip:
                action = action.copy()
                if phase in held_phases:
                    action[:4] = 0.0
                if phase in expert_hand:
                    action[:4] = self.action_label[:4]
                if phase in expert_grip:
                    action[4] = self.action_label[4]
            return action

    def labelled(env):
        if run_policy is not None:
            from hydra.utils import instantiate

            policy = instantiate(run_policy)(env)
        else:
            policy = load_policy(env, checkpoint, overrides=overrides)
        expert = SoftExpert(env.unwrapped, squeeze_hold_hand=args.squeeze_hold_hand)
        return Intervened(policy, expert, env, 0.0)

    envs: dict[str, Any] = {}

    def reset_quadrant(spec: EpisodeSpec) -> str:
        """The target quadrant of a spec, from a reset alone (no policy, no steps)."""
        if spec.object not in envs:
            envs[spec.object] = env_config.make(spec)
        env = envs[spec.object]
        env.reset(seed=spec.seed, options={"variation": spec.variation})
        return goal_quadrant(env)

    episodes: list[dict[str, Any]] = []
    errors: dict[str, list[np.ndarray]] = collections.defaultdict(list)
    for spec, recorded_success in specs:
        log = StepLog()
        record = run_episode(spec, labelled, env_config=env_config, observers=[log])
        for row in log.rows:
            errors[row["phase"]].append(row["error"])
        carry_forces = [row["grip_force"] for row in log.rows if row["phase"] == "carry"]
        entry = {
            "object": spec.object,
            "seed": spec.seed,
            "success": bool(record.success),
            "dsr_success": bool(record.dsr_success),
            "error": record.error,
            "steps": len(log.rows),
            "termination": record.termination_reason,
            "phase_steps": dict(collections.Counter(row["phase"] for row in log.rows)),
            "final_phase": log.rows[-1]["phase"] if log.rows else None,
            "peak_over_tolerance": round(record.peak_deformation / record.tolerance, 3),
            "crossing": crossing(log.rows),
            "grasp": log.grasp,
            "lost_grasps": lost_grasps(log.rows),
            "carry_grip_force_mean": (
                round(float(np.mean(carry_forces)), 3) if carry_forces else None
            ),
            "release": first_release(log.rows),
        }
        if move_to is not None:
            entry["target_moved_at"] = log.mixture.moved_at
            entry["regrasp_steps"] = regrasp_steps(log.rows, log.mixture.moved_at)
        if placing:
            entry["goal_quadrant"] = log.quadrant
            entry["target_pixels_at_start"] = log.start_pixels
        if recorded_success is not None:
            entry["recorded_success"] = recorded_success
        episodes.append(entry)
        print(json.dumps(entry), flush=True)

    over = [e for e in episodes if e["success"] and not e["dsr_success"]]
    carry_means = [e["carry_grip_force_mean"] for e in episodes]
    carry_means = [mean for mean in carry_means if mean is not None]
    phases = {
        phase: {
            "steps": len(rows),
            "error_mean": dict(zip(AXES, np.mean(rows, axis=0).round(3).tolist(), strict=True)),
            "error_abs_mean": dict(
                zip(AXES, np.abs(rows).mean(axis=0).round(3).tolist(), strict=True)
            ),
        }
        for phase, rows in sorted(errors.items(), key=lambda item: str(item[0]))
    }
    summary = {
        "episodes": len(episodes),
        "successes": sum(e["success"] for e in episodes),
        "successes_over_tolerance": len(over),
        "over_tolerance_by_crossing_phase": dict(
            collections.Counter(e["crossing"]["phase"] for e in over if e["crossing"])
        ),
        "failures_by_final_phase": dict(
            collections.Counter(e["final_phase"] for e in episodes if not e["success"])
        ),
        "over_tolerance_after_a_drop": sum(
            bool(e["crossing"] and e["crossing"]["dropped"]) for e in over
        ),
        "lost_grasps": sum(len(e["lost_grasps"]) for e in episodes),
        "episodes_with_a_lost_grasp": sum(bool(e["lost_grasps"]) for e in episodes),
        "failures_with_a_lost_grasp": sum(
            bool(e["lost_grasps"]) for e in episodes if not e["success"]
        ),
        "lost_grasps_by_phase_before": dict(
            collections.Counter(lost["phase_before"] for e in episodes for lost in e["lost_grasps"])
        ),
        "carry_grip_force_median": (
            round(float(np.median(carry_means)), 3) if carry_means else None
        ),
        "grasp_median_abs_mm": {
            group: {
                axis: round(float(np.median([abs(e["grasp"][axis]) for e in chosen])), 2)
                for axis in ("across_mm", "along_mm", "height_mm")
            }
            for group, chosen in (
                ("within_tolerance", [e for e in episodes if e["dsr_success"] and e["grasp"]]),
                ("over_tolerance", [e for e in over if e["grasp"]]),
            )
            if chosen
        },
    }
    if placing:
        failures = [e for e in episodes if not e["success"]]
        summary["failures_by_release"] = dict(
            collections.Counter(release_bin(e["release"], PLACE_RADIUS) for e in failures)
        )
        summary["successes_by_goal_quadrant"] = by_quadrant(
            (e["goal_quadrant"], e["success"]) for e in episodes
        )
        # what the scene camera saw of the target at the start and at the first release
        seen: dict[str, Any] = {}
        for group, outcome in (("successes", True), ("failures", False)):
            chosen = [
                e
                for e in episodes
                if e["success"] == outcome and (e["release"] or {}).get("target_pixels") is not None
            ]
            if chosen:
                seen[group] = {
                    "episodes": len(chosen),
                    "at_start": float(np.median([e["target_pixels_at_start"] for e in chosen])),
                    "at_first_release": float(
                        np.median([e["release"]["target_pixels"] for e in chosen])
                    ),
                }
        if seen:
            summary["target_pixels_median"] = seen
        # near misses measured in the camera's view: along its line of sight or across it
        near = [
            e["release"]
            for e in failures
            if release_bin(e["release"], PLACE_RADIUS) == "to_5cm" and "beyond_m" in e["release"]
        ]
        if near:
            summary["near_miss_view_offset_m"] = {
                "episodes": len(near),
                "median_abs_beyond": round(float(np.median([abs(r["beyond_m"]) for r in near])), 4),
                "median_abs_aside": round(float(np.median([abs(r["aside_m"]) for r in near])), 4),
                "short_of_target": sum(r["beyond_m"] < 0 for r in near),
            }
    if move_to is not None:
        moved = [e for e in episodes if e["target_moved_at"] is not None]
        again = [e["regrasp_steps"] for e in moved if e["regrasp_steps"] is not None]
        summary["target_moved"] = len(moved)
        summary["regrasped_after_move"] = len(again)
        summary["regrasp_steps_median"] = float(np.median(again)) if again else None
        summary["successes_after_move"] = sum(e["success"] for e in moved)
    if args.from_run is not None:
        summary["reproduced"] = sum(e["success"] == e["recorded_success"] for e in episodes)
        if placing:
            summary["run_successes_by_goal_quadrant"] = by_quadrant(
                (reset_quadrant(record.spec), record.success) for record in run
            )
    for env in envs.values():
        env.close()
    payload = {
        "command": "python scripts/diagnose_deformation.py " + " ".join(argv or sys.argv[1:]),
        "policy": f"run:{args.from_run}" if args.run_policy else str(args.policy),
        "policy_config": run_policy,
        "weights_sha256": weights,
        "task": args.task,
        "objects": list(args.objects),
        "seed": args.seed,
        "from_run": str(args.from_run) if args.from_run else None,
        "failures_only": args.failures_only,
        "env": recorded,
        "overrides": overrides,
        "labeller": log.mixture.expert.policy_id,  # the last episode's labeller (all alike)
        "hold_hand_in": sorted(held_phases),
        "expert_hand_in": sorted(expert_hand),
        "expert_grip_in": sorted(expert_grip),
        "move_target_after_release": move_to,
        "summary": summary,
        "phases": phases,
        "episodes": episodes,
    }
    write_json_atomic(args.out, payload)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
