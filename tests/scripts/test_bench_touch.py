"""scripts/bench_touch.py: the verdict follows the paired test, and (slow) a two-condition run
with the shipped SimVLA as both policies writes the JSON and figure with identical rates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts import bench_touch as script
from simroll.report.compare import paired_outcome

ROOT = Path(__file__).resolve().parents[2]


def test_verdict_needs_a_significant_paired_difference():
    # 12 pairs where only touch succeeded, none the other way: exact McNemar p = 2 * 0.5^12
    touch_wins = paired_outcome([(False, True)] * 12 + [(True, True)] * 8)
    assert touch_wins.p_value < 0.001 and script.verdict(touch_wins) == "touch better"
    vision_wins = paired_outcome([(True, False)] * 12 + [(False, False)] * 8)
    assert script.verdict(vision_wins) == "vision better"
    close = paired_outcome([(False, True)] * 3 + [(True, False)] * 1 + [(True, True)] * 16)
    assert close.p_value > 0.05 and script.verdict(close) == "no significant difference"


@pytest.mark.slow  # 4 SimVLA episodes with 64 px cameras
def test_one_policy_against_itself_differs_nowhere(tmp_path):
    checkpoint = str(ROOT / "policies" / "vla_soft")
    out = tmp_path / "touch.json"
    result = script.main(
        [
            "--touch", checkpoint, "--vision", checkpoint, "--episodes", "1",
            "--tasks", "SoftLift", "--objects", "sponge", "--conditions", "default", "dim_x0.5",
            "--backend", "local", "--runs", str(tmp_path / "runs"), "--out", str(out),
        ]
    )  # fmt: skip
    stored = json.loads(out.read_text())
    assert set(stored["conditions"]) == {"default", "dim_x0.5"}
    for condition in stored["conditions"].values():
        assert condition["touch"] == condition["vision"]  # same checkpoint, same seeds
        assert condition["paired"]["tsr"]["verdict"] == "no significant difference"
    assert result["summary"]["tsr"]["in_distribution"] == "no significant difference"
    assert out.with_suffix(".png").stat().st_size > 1000
