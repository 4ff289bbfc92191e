"""scripts/bench_clutter.py: a small replay run writes per-tier rows that agree with its records."""

from __future__ import annotations

import json

import pytest

from scripts import bench_clutter as script
from simroll.report.runs import load_eval_run


@pytest.mark.slow
def test_replay_rows_agree_with_the_records(tmp_path):
    out = tmp_path / "clutter.json"
    payload = script.main(
        [
            "--scenes", "4", "--tiers", "easy", "--methods", "nominal_replay",
            "--runs", str(tmp_path / "runs"), "--out", str(out),
        ]
    )  # fmt: skip
    assert json.loads(out.read_text()) == json.loads(json.dumps(payload))
    row = payload["methods"]["nominal_replay"]["tiers"]["easy"]
    run = load_eval_run(tmp_path / "runs" / "nominal_replay")
    records = run.records
    assert row["episodes"] == len(records) == 4 and row["errors"] == 0
    assert row["success"]["successes"] == sum(r.success for r in records)
    assert row["withdrawals"] == 1.0  # replay withdraws once: for its one grasp
    assert row["primitives"] == row["plan_length"]  # it executes exactly its plan
    assert row["execution_time_s"] > 0 and row["travel_m"] >= 0
    assert sum(row["termination_reasons"].values()) == 4
    assert set(row["termination_reasons"]) <= {"success", "grasp_failed"}
    # a method against itself: every scene paired, none discordant
    (pair,) = script.paired({"a": run, "b": run})
    assert pair["scenes"] == 4 and pair["a_only"] == pair["b_only"] == 0
    assert pair["mcnemar_p"] == 1.0 and pair["rate_a"] == pair["rate_b"] == row["success"]["rate"]
    assert pair["dsr"]["rate_a"] == row["dsr"]["rate"] == row["success"]["rate"]  # rigid target


def test_student_settings_reach_the_loaded_checkpoint(tmp_path, monkeypatch):
    import gymnasium as gym
    import pytest

    from simroll.policies.resolve import resolve_policy

    seen = {}

    def fake_run(args, name, policy):
        seen[name] = policy
        return {"tiers": {}}, None

    monkeypatch.setattr(script, "run_method", fake_run)
    monkeypatch.setattr(script, "paired", lambda runs: [])
    argv = [
        "--scenes", "4", "--tiers", "easy", "--methods",
        "--student", "bc=policies/trace_clutter_plan",
        "--student", "bc_gated=policies/trace_clutter_plan",
        "--setting", "bc_gated:grasp_gate=true",
        "--out", str(tmp_path / "clutter.json"),
    ]  # fmt: skip
    script.main(argv)
    assert seen["bc"] == "policies/trace_clutter_plan"
    assert seen["bc_gated"]["overrides"] == {"grasp_gate": True}
    env = gym.make("simroll/ClutterRetrieveEasy-v0", obs_mode="full", gripper_mode="delta")
    try:
        gated = resolve_policy(seen["bc_gated"]).factory(env)
        assert gated.policy.config.grasp_gate is True
        assert resolve_policy(seen["bc"]).factory(env).policy.config.grasp_gate is False
    finally:
        env.close()
    for bad in ("nobody:grasp_gate=true", "bc_gated:grasp_gate"):
        with pytest.raises(SystemExit):
            script.main([*argv[:-2], "--setting", bad, "--out", str(tmp_path / "x.json")])
