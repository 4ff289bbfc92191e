"""scripts/diagnose_deformation.py: the first crossing of the tolerance, and the phase log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simroll.rollout.records import EpisodeRecord, EpisodeSpec
from simroll.rollout.store import RecordStore
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parents[2]


def _module():
    return load_script("diagnose_deformation")


def _rows(*steps):
    return [{"phase": p, "deformation": d, "grip_force": f} for p, d, f in steps]


def test_the_first_crossing_and_whether_the_grasp_was_lost_first():
    crossing = _module().crossing
    assert crossing(_rows(("close", 0.2, 0.0), ("squeeze", 0.9, 1.0))) is None
    squeezed = crossing(
        _rows(("close", 0.2, 0.0), ("squeeze", 0.8, 1.0), ("squeeze", 1.3, 2.0), ("lift", 1.5, 2))
    )
    assert squeezed == {
        "step": 2,
        "phase": "squeeze",
        "phases_before": ["close", "squeeze"],
        "grip_force_before": [0.0, 1.0],
        "dropped": False,
    }
    fell = crossing(_rows(("lift", 0.7, 0.4), ("lift", 0.6, 0.0), ("align", 1.2, 0.0)))
    assert fell["phase"] == "align" and fell["dropped"] is True
    # never held: a crossing while closing is the grip's, not a fall's
    closing = crossing(_rows(("descend", 0.0, 0.0), ("close", 1.1, 0.3)))
    assert closing["dropped"] is False and closing["phases_before"] == ["descend"]


def test_a_run_logs_every_step_by_phase(tmp_path, monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "egl")
    out = tmp_path / "diagnosis.json"
    policy = str(ROOT / "policies" / "diffusion_soft_lift")
    args = ["--policy", policy, "--objects", "sponge", "--episodes", "1"]
    args += ["--override", "n_action_steps=2"]
    assert _module().main([*args, "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    (episode,) = payload["episodes"]
    assert payload["env"]["obs_mode"] == "state"  # from the checkpoint's simroll_env.json
    assert payload["overrides"] == {"n_action_steps": 2}
    assert sum(phase["steps"] for phase in payload["phases"].values()) == episode["steps"] > 20
    assert {"align", "close"} <= set(payload["phases"])
    assert set(payload["phases"]["close"]["error_abs_mean"]) == {"x", "y", "z", "yaw", "gripper"}
    summary = payload["summary"]
    assert summary["episodes"] == 1 and summary["successes"] == int(episode["success"])
    over = episode["success"] and not episode["dsr_success"]
    assert summary["successes_over_tolerance"] == int(over)
    assert (episode["crossing"] is None) == (episode["peak_over_tolerance"] <= 1.0)
    assert sum(episode["phase_steps"].values()) == episode["steps"]
    assert episode["final_phase"] in episode["phase_steps"]
    assert sum(summary["failures_by_final_phase"].values()) == 1 - int(episode["success"])
    # the grasp: where the hand was when both pads first touched, within the expert's closing
    # window for a policy that grasps (the expert closes within 10 mm across and 6 mm in height)
    grasp = episode["grasp"]
    assert grasp is not None and 0 < grasp["step"] < episode["steps"]
    assert abs(grasp["across_mm"]) < 10 and abs(grasp["height_mm"]) < 12
    group = "within_tolerance" if episode["dsr_success"] else "over_tolerance"
    if episode["success"]:
        assert summary["grasp_median_abs_mm"][group]["along_mm"] == abs(grasp["along_mm"])


def test_holding_the_hand_in_a_phase_zeroes_the_executed_hand_motion_there(tmp_path, monkeypatch):
    # the expert's squeeze labels keep the hand's x, y and yaw targets (only z goes to the grasp
    # height), so with the policy's hand held there the executed action has zero error on those
    monkeypatch.setenv("MUJOCO_GL", "egl")
    out = tmp_path / "held.json"
    policy = str(ROOT / "policies" / "diffusion_soft_lift")
    args = ["--policy", policy, "--task", "SoftSqueeze", "--objects", "sponge", "--episodes", "1"]
    assert _module().main([*args, "--hold-hand-in", "squeeze", "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert payload["hold_hand_in"] == ["squeeze"]
    assert len(payload["weights_sha256"]) == 64
    assert payload["labeller"] == "expert/gentle"
    errors = payload["phases"]["squeeze"]["error_abs_mean"]
    assert [errors[axis] for axis in ("x", "y", "yaw")] == [0.0, 0.0, 0.0]
    assert payload["phases"]["close"]["error_abs_mean"]["z"] > 0.0  # the policy's own elsewhere


def test_a_grasp_lost_outside_a_release_is_counted_where_it_was_lost():
    lost_grasps = _module().lost_grasps
    phases = ["close", "squeeze", "lift", "align", "close", "lift", "carry", "lower", "release"]
    rows = [{"phase": phase} for phase in [*phases, "retreat"]]
    assert lost_grasps(rows) == [{"step": 3, "phase_before": "lift", "phase": "align"}]
    assert lost_grasps([{"phase": "squeeze"}, {"phase": "close"}])[0]["phase_before"] == "squeeze"
    assert lost_grasps([{"phase": "align"}, {"phase": "descend"}, {"phase": "close"}]) == []


def test_the_expert_label_replaces_only_the_named_channels_in_the_named_phases(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("MUJOCO_GL", "egl")
    out = tmp_path / "expert_channels.json"
    policy = str(ROOT / "policies" / "diffusion_soft_lift")
    args = ["--policy", policy, "--objects", "sponge", "--episodes", "1"]
    args += ["--expert-hand-in", "align", "--expert-grip-in", "close"]
    assert _module().main([*args, "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert payload["expert_hand_in"] == ["align"] and payload["expert_grip_in"] == ["close"]
    align, close = (payload["phases"][p]["error_abs_mean"] for p in ("align", "close"))
    assert [align[axis] for axis in ("x", "y", "z", "yaw")] == [0.0] * 4
    assert close["gripper"] == 0.0
    # the other channels stay the policy's own
    assert align["gripper"] > 0.0 or sum(close[axis] for axis in ("x", "y", "z", "yaw")) > 0.0
    (episode,) = payload["episodes"]
    assert isinstance(episode["lost_grasps"], list)
    assert payload["summary"]["lost_grasps"] == len(episode["lost_grasps"])


def _steps(*steps):
    return [
        {"phase": p, "gripper": g, **({"goal_distance": d} if d is not None else {})}
        for p, g, d in steps
    ]


def test_the_first_release_after_a_grasp_and_its_distance_bin():
    module = _module()
    # opening before anything was held (pre-shaping the jaw) is not a release
    rows = _steps(("align", -1.0, 0.12), ("close", 0.8, 0.12), ("lift", 0.1, 0.08))
    rows += _steps(("carry", -0.2, 0.05), ("lift", -0.9, 0.041), ("release", -1.0, 0.02))
    assert module.first_release(rows) == {"step": 4, "phase": "lift", "goal_distance_m": 0.041}
    assert module.release_bin(module.first_release(rows), 0.03) == "to_5cm"
    assert module.release_bin({"step": 1, "phase": "lower", "goal_distance_m": 0.03}, 0.03) == (
        "within_radius"
    )
    assert module.release_bin({"step": 1, "phase": "lift", "goal_distance_m": 0.07}, 0.03) == (
        "beyond_5cm"
    )
    assert module.first_release(_steps(("align", -1.0, None), ("descend", 0.0, None))) is None
    assert module.release_bin(None, 0.03) == "no_release"
    # SoftLift rows carry no distance: the release is found, its bin is not a distance
    lifted = module.first_release(_steps(("lift", 0.0, None), ("lift", -0.6, None)))
    assert lifted == {"step": 1, "phase": "lift"}
    assert [module.quadrant(d) for d in ((1, 2), (-1, 2), (-1, -2), (3, -0.1))] == [
        "+x+y",
        "-x+y",
        "-x-y",
        "+x-y",
    ]


def _record(spec: EpisodeSpec, success: bool) -> EpisodeRecord:
    """A finished episode of a state-mode diffusion run, as the store holds it."""
    return EpisodeRecord(
        spec=spec,
        policy_id="diffusion",
        policy_config_hash="abc",
        success=success,
        steps=50,
        sim_time=2.5,
        termination_reason="success" if success else "time_limit",
        peak_deformation=0.1,
        tolerance=0.5,
    )


def test_from_run_replays_a_runs_failures_and_counts_its_targets(tmp_path, monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "egl")
    run = tmp_path / "run"
    store = RecordStore(run)
    cases = [("SoftPlace", "sponge", True), ("SoftPlace", "tofu", False)]
    cases += [("SoftPlace", "tofu", True), ("SoftLift", "tofu", False)]
    for index, (task, obj, success) in enumerate(cases):
        store.append(_record(EpisodeSpec(task, obj, seed=11 + index, index=index), success))
    out = tmp_path / "diagnosis.json"
    policy = str(ROOT / "policies" / "diffusion_soft_lift")
    args = ["--policy", policy, "--task", "SoftPlace", "--from-run", str(run), "--failures-only"]
    assert _module().main([*args, "--override", "n_action_steps=8", "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    (episode,) = payload["episodes"]  # the one SoftPlace failure; the SoftLift row is not read
    assert (episode["object"], episode["seed"], episode["recorded_success"]) == ("tofu", 12, False)
    assert episode["goal_quadrant"] in {"+x+y", "-x+y", "-x-y", "+x-y"}
    summary = payload["summary"]
    assert summary["reproduced"] == int(not episode["success"])
    counted = summary["run_successes_by_goal_quadrant"]
    assert sum(c["episodes"] for c in counted.values()) == 3
    assert sum(c["successes"] for c in counted.values()) == 2
    assert counted[episode["goal_quadrant"]]["episodes"] >= 1
    if not episode["success"]:
        assert sum(summary["failures_by_release"].values()) == 1
    with pytest.raises(SystemExit):
        _module().main(["--policy", policy, "--failures-only", "--out", str(out)])
    # no failures of the chosen objects: said so, nothing replayed
    with pytest.raises(SystemExit, match="none of its 1 SoftPlace episodes"):
        _module().main([*args, "--objects", "sponge", "--out", str(out)])


def test_target_pixels_counts_the_green_disc_not_the_table_or_a_yellow_object():
    import numpy as np

    count = _module().target_pixels
    image = np.full((8, 8, 3), 200, dtype=np.uint8)  # grey-white table
    image[:2, :3] = (0.35 * np.array([51, 204, 77]) + 0.65 * 200).astype(np.uint8)  # the disc
    image[4:6, 4:8] = (230, 210, 40)  # a yellow sponge
    image[7, :] = (20, 30, 25)  # a dark shadow
    assert count({"pixels": {"scene": image, "wrist": image}}) == 6
    assert count({"agent_pos": np.zeros(12)}) is None  # state mode: nothing to count


def test_the_release_offset_in_the_cameras_view():
    # a camera at the origin looking along +x at a target 1 m away: an object 4 cm past the
    # target is "beyond" it, one 4 cm to +y is to its left, one 3 cm toward the camera is short
    import numpy as np

    class Raw:
        _scene_camera = 0

        class data:
            cam_xpos = np.array([[0.0, 0.0, 0.5]])

        @staticmethod
        def goal_position():
            return np.array([1.0, 0.0, 0.0])

    view = _module().view_offset
    assert view(Raw, np.array([0.04, 0.0])) == pytest.approx((0.04, 0.0))
    assert view(Raw, np.array([0.0, 0.04])) == pytest.approx((0.0, 0.04))
    assert view(Raw, np.array([-0.03, -0.01])) == pytest.approx((-0.03, -0.01))
    rows = _steps(("lift", 0.5, 0.05), ("lift", -0.9, 0.04))
    rows[1]["goal_offset_view"] = (-0.03, 0.02)
    assert _module().first_release(rows) == {
        "step": 1,
        "phase": "lift",
        "goal_distance_m": 0.04,
        "beyond_m": -0.03,
        "aside_m": 0.02,
    }


def test_from_run_replays_with_the_runs_policy_settings_and_refuses_other_weights(
    tmp_path, monkeypatch
):
    # a run made with noise_scale 0.5 replayed at the checkpoint's own setting would not be the
    # run's episodes: the manifest's policy overrides are taken, and other weights are refused
    from simroll.policies.checkpoint import weights_digest
    from simroll.rollout.manifest import RunManifest, write_manifest

    monkeypatch.setenv("MUJOCO_GL", "egl")
    policy = str(ROOT / "policies" / "diffusion_soft_lift")
    spec = EpisodeSpec("SoftPlace", "tofu", seed=12, index=0)

    def run_with(weights: str) -> Path:
        run = tmp_path / weights[:4]
        fingerprint = {"policy.weights_sha256": weights, "policy.overrides.n_action_steps": 8}
        config = {"policy": {"path": policy, "overrides": {"n_action_steps": 8}}}
        manifest = RunManifest(command="eval", fingerprint=fingerprint, episodes=1, config=config)
        write_manifest(run, manifest, [spec])
        RecordStore(run).append(_record(spec, success=False))
        return run

    out = tmp_path / "diagnosis.json"
    args = ["--policy", policy, "--task", "SoftPlace", "--failures-only", "--out", str(out)]
    with pytest.raises(SystemExit, match="was run with weights 000000000000"):
        _module().main([*args, "--from-run", str(run_with("0" * 64))])
    assert not out.exists()
    assert _module().main([*args, "--from-run", str(run_with(weights_digest(policy)))]) == 0
    assert json.loads(out.read_text())["overrides"] == {"n_action_steps": 8}


def test_run_policy_replays_the_runs_own_policy_config_an_ensemble(tmp_path, monkeypatch):
    # an ensemble has no single checkpoint to pass as --policy: --run-policy instantiates the
    # config the run's manifest records, with the env settings of its fingerprint
    from simroll.rollout.manifest import RunManifest, write_manifest

    monkeypatch.setenv("MUJOCO_GL", "egl")
    path = str(ROOT / "policies" / "diffusion_soft_lift")
    member = {
        "_target_": "simroll.policies.lerobot.load_policy",
        "_partial_": True,
        "path": path,
        "device": "cpu",
        "overrides": {"n_action_steps": 8},
    }
    policy = {
        "_target_": "simroll.policies.ensemble.ensemble_policy",
        "_partial_": True,
        "members": [member, {**member, "noise_seed": 1}],
        "combine": "median",
    }
    spec = EpisodeSpec("SoftPlace", "tofu", seed=12, index=0)
    run = tmp_path / "run"
    fingerprint = {"env.obs_mode": "state", "env.image_size": 64, "env.gripper_mode": "delta"}
    manifest = RunManifest(
        command="eval", fingerprint=fingerprint, episodes=1, config={"policy": policy}
    )
    write_manifest(run, manifest, [spec])
    RecordStore(run).append(_record(spec, success=False))
    out = tmp_path / "diagnosis.json"
    args = ["--task", "SoftPlace", "--from-run", str(run), "--run-policy", "--out", str(out)]
    assert _module().main(args) == 0
    payload = json.loads(out.read_text())
    assert payload["policy_config"] == policy and payload["policy"] == f"run:{run}"
    assert payload["env"]["obs_mode"] == "state" and payload["weights_sha256"] is None
    (episode,) = payload["episodes"]
    assert episode["steps"] > 20 and sum(episode["phase_steps"].values()) == episode["steps"]
    assert payload["summary"]["reproduced"] == int(not episode["success"])
    # nothing to instantiate, or settings the config would not take: refused, naming why
    with pytest.raises(SystemExit, match="records no policy config"):
        _module().main([*args[:2], "--from-run", str(tmp_path), "--run-policy", "--out", str(out)])
    with pytest.raises(SystemExit):
        _module().main([*args, "--override", "n_action_steps=2"])
    with pytest.raises(SystemExit):
        _module().main(["--run-policy", "--out", str(out)])


def test_the_target_moves_away_only_once_the_object_rests_off_it(monkeypatch):
    import gymnasium as gym
    import mujoco
    import numpy as np

    import simroll  # noqa: F401 - registers the envs

    monkeypatch.setenv("MUJOCO_GL", "egl")
    module = _module()
    env = gym.make("simroll/SoftPlace-v0", object="tofu")
    env.reset(seed=5)
    raw = env.unwrapped
    center, goal = raw.object_center(), raw.goal_position()
    assert module.moved_target(raw, 0.12, step=7) == 7  # resting 10-14 cm from the target
    mujoco.mj_forward(raw.model, raw.data)
    moved = raw.goal_position()
    away = (center[:2] - goal[:2]) / np.linalg.norm(center[:2] - goal[:2])
    expected = np.clip(center[:2] + 0.12 * away, -0.18, 0.18)
    np.testing.assert_allclose(moved[:2], expected, atol=1e-9)
    # on the target (within the success radius), or lifted: left where it is
    raw.model.site_pos[raw.ids.target_site][:2] = center[:2] + [0.02, 0.0]
    mujoco.mj_forward(raw.model, raw.data)
    assert module.moved_target(raw, 0.12, step=8) is None
    raw.rest_center = raw.rest_center - [0.0, 0.0, 0.05]  # as if the object were 5 cm up
    raw.model.site_pos[raw.ids.target_site][:2] = center[:2] + [0.1, 0.0]
    mujoco.mj_forward(raw.model, raw.data)
    assert module.moved_target(raw, 0.12, step=9) is None
    env.close()
    rows = [{"phase": p} for p in ("lift", "align", "descend", "close", "squeeze", "lift")]
    assert module.regrasp_steps(rows, 1) == 3 and module.regrasp_steps(rows[:4], 1) is None
    assert module.regrasp_steps(rows, None) is None


def test_moving_the_target_is_refused_off_softplace_or_out_of_range(tmp_path):
    out = str(tmp_path / "x.json")
    for bad in (
        ["--task", "SoftLift"],
        ["--task", "SoftPlace", "--move-target-after-release", "0"],
    ):
        args = (
            bad
            if "--move-target-after-release" in bad
            else [*bad, "--move-target-after-release", "0.1"]
        )
        with pytest.raises(SystemExit):
            _module().main([*args, "--out", out])
