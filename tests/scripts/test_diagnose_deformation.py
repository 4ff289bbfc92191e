"""scripts/diagnose_deformation.py: the first crossing of the tolerance, and the phase log."""

from __future__ import annotations

import json
from pathlib import Path

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
