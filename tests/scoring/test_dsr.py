"""aggregate / tolerance_sweep / to_markdown / plot_tolerance_sweep over synthetic records."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.stats import beta as beta_distribution

from simroll.rollout.records import EpisodeRecord, EpisodeSpec
from simroll.scoring.dsr import aggregate, plot_tolerance_sweep, to_markdown, tolerance_sweep


def make_record(
    index: int,
    success: bool,
    peak: float,
    tolerance: float = 0.1,
    task: str = "SoftLift",
    object_name: str = "sponge",
    variation: str = "default",
    error: str | None = None,
    calls: int = 10,
    compute_s: float = 0.1,
) -> EpisodeRecord:
    return EpisodeRecord(
        spec=EpisodeSpec(
            task=task, object=object_name, variation=variation, index=index, seed=index
        ),
        policy_id="expert",
        policy_config_hash="abc",
        success=success,
        steps=50,
        sim_time=1.0,
        termination_reason="success" if success else "timeout",
        peak_deformation=peak,
        tolerance=tolerance,
        policy_calls=calls,
        policy_compute_s=compute_s,
        error=error,
    )


def random_records(seed: int, count: int = 60) -> list[EpisodeRecord]:
    rng = np.random.default_rng(seed)
    objects = ["sponge", "tofu"]
    variations = ["default", "heavy"]
    return [
        make_record(
            index,
            success=bool(rng.random() < 0.7),
            peak=float(rng.exponential(0.1)),
            tolerance=float(rng.choice([0.05, 0.1, math.inf])),
            task=["SoftLift", "SoftPush"][index % 2],
            object_name=objects[int(rng.integers(2))],
            variation=variations[int(rng.integers(2))],
        )
        for index in range(count)
    ]


def test_group_counts_rates_and_violations():
    records = [
        make_record(0, success=True, peak=0.05),  # DSR success
        make_record(1, success=True, peak=0.10),  # at tolerance: still DSR success
        make_record(2, success=True, peak=0.30),  # violation
        make_record(3, success=False, peak=0.01),
        make_record(
            4, success=False, peak=0.50, error="RuntimeError: diverged", calls=0, compute_s=0.0
        ),
    ]
    group, task_row = aggregate(records)
    assert (group.task, group.object, group.variation) == ("SoftLift", "sponge", "default")
    assert (task_row.object, task_row.variation) == ("all", "all")
    assert group.episodes == 5
    assert (group.tsr.successes, group.tsr.trials) == (3, 5)
    assert (group.dsr.successes, group.dsr.trials) == (2, 5)
    assert (group.violation.successes, group.violation.trials) == (1, 3)
    assert group.errors == 1
    assert group.peak_deformation_mean == pytest.approx(0.192)
    assert group.peak_deformation_median == pytest.approx(0.10)
    assert group.peak_deformation_p95 == pytest.approx(
        np.percentile([0.05, 0.1, 0.3, 0.01, 0.5], 95)
    )
    assert group.compute_per_call_s == pytest.approx(0.4 / 40)


def test_groups_sorted_with_all_row_per_task_last():
    records = [
        make_record(0, True, 0.0, task="B", object_name="x"),
        make_record(1, True, 0.0, task="A", object_name="y", variation="heavy"),
        make_record(2, False, 0.0, task="A", object_name="y"),
        make_record(3, True, 0.0, task="A", object_name="x"),
    ]
    rows = [(s.task, s.object, s.variation, s.episodes) for s in aggregate(records)]
    assert rows == [
        ("A", "x", "default", 1),
        ("A", "y", "default", 1),
        ("A", "y", "heavy", 1),
        ("A", "all", "all", 3),
        ("B", "x", "default", 1),
        ("B", "all", "all", 1),
    ]


@pytest.mark.parametrize("seed", range(5))
def test_dsr_never_exceeds_tsr(seed):
    for summary in aggregate(random_records(seed)):
        assert summary.dsr.successes <= summary.tsr.successes
        assert summary.dsr.rate <= summary.tsr.rate
        assert summary.tsr.successes - summary.dsr.successes == summary.violation.successes
    sweep = tolerance_sweep(random_records(seed), [0.0, 0.5, 1.0, 2.0, math.inf])
    for group in sweep["groups"].values():
        assert all(dsr <= group["tsr"] for dsr in group["dsr"])
        assert group["dsr"] == sorted(group["dsr"])  # more tolerance never lowers DSR


def test_dsr_equals_tsr_when_tolerance_is_infinite():
    records = [
        dataclasses.replace(record, tolerance=math.inf) for record in random_records(seed=11)
    ]
    for summary in aggregate(records):
        assert summary.dsr == summary.tsr
        assert summary.violation.successes == 0
    sweep = tolerance_sweep(random_records(seed=11), [math.inf])
    for group in sweep["groups"].values():
        assert group["dsr"] == [group["tsr"]]


@pytest.mark.parametrize(("successes", "trials"), [(7, 20), (0, 10), (10, 10)])
def test_aggregate_intervals_are_clopper_pearson(successes, trials):
    records = [make_record(i, success=i < successes, peak=0.0) for i in range(trials)]
    tsr = aggregate(records, method="beta", alpha=0.05)[0].tsr
    expected_low = beta_distribution.ppf(0.025, successes, trials - successes + 1)
    expected_high = beta_distribution.ppf(0.975, successes + 1, trials - successes)
    assert tsr.low == pytest.approx(0.0 if successes == 0 else expected_low, abs=1e-12)
    assert tsr.high == pytest.approx(1.0 if successes == trials else expected_high, abs=1e-12)


def test_wilson_method_is_passed_through():
    records = [make_record(i, success=i < 7, peak=0.0) for i in range(20)]
    assert aggregate(records, method="wilson")[0].tsr.method == "wilson"
    with pytest.raises(ValueError, match="unknown interval method"):
        aggregate(records, method="agresti")


def test_no_successes_give_undefined_violation_rate():
    summary = aggregate([make_record(0, success=False, peak=0.0)])[0]
    assert summary.violation.trials == 0 and math.isnan(summary.violation.rate)


def test_mixed_policies_and_repeated_episodes_are_refused():
    record = make_record(0, True, 0.0)
    other_policy = dataclasses.replace(make_record(1, True, 0.0), policy_id="diffusion")
    with pytest.raises(ValueError, match="2 policies"):
        aggregate([record, other_policy])
    with pytest.raises(ValueError, match="more than once"):
        aggregate([record, record])


def test_tolerance_sweep_counts_success_within_k_times_tolerance():
    records = [
        make_record(0, True, 0.05),
        make_record(1, True, 0.15),
        make_record(2, True, 0.25),
        make_record(3, False, 0.0),
        make_record(4, True, 0.0, object_name="tofu", tolerance=math.inf),
    ]
    sweep = tolerance_sweep(records, [0, 1, 2, 3])
    assert sweep["multipliers"] == [0.0, 1.0, 2.0, 3.0]
    sponge = sweep["groups"]["SoftLift/sponge"]
    assert sponge["episodes"] == 4 and sponge["tsr"] == 0.75
    assert sponge["dsr"] == [0.0, 0.25, 0.5, 0.75]
    # k = 0 on an infinite tolerance means no deformation allowed, not nan.
    assert sweep["groups"]["SoftLift/tofu"]["dsr"] == [1.0, 1.0, 1.0, 1.0]


def test_tolerance_sweep_at_one_matches_aggregate_per_object():
    records = random_records(seed=3)
    sweep = tolerance_sweep(records, [1.0])
    single = [r for r in records if (r.spec.task, r.spec.object) == ("SoftLift", "tofu")]
    expected = sum(r.dsr_success for r in single) / len(single)
    assert sweep["groups"]["SoftLift/tofu"]["dsr"] == [expected]


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_tolerance_sweep_rejects_bad_multipliers(bad):
    with pytest.raises(ValueError, match="multipliers must be >= 0"):
        tolerance_sweep([make_record(0, True, 0.0)], [1.0, bad])


def test_markdown_table_has_intervals_and_one_row_per_summary():
    records = [make_record(i, success=i < 7, peak=0.01 * i) for i in range(20)]
    summaries = aggregate(records)
    table = to_markdown(summaries)
    lines = table.splitlines()
    assert lines[0].startswith("| task | object | variation | episodes | TSR | DSR |")
    assert lines[2].startswith("| SoftLift | sponge | default | 20 | 0.35 [0.15, 0.59] |")
    assert lines[3].startswith("| SoftLift | all | all | 20 |")
    assert "95% Clopper-Pearson (exact)" in table
    assert len([line for line in lines if line.startswith("| SoftLift")]) == len(summaries)


def test_markdown_shows_na_for_undefined_values():
    summary = aggregate([make_record(0, success=False, peak=math.nan, calls=0, compute_s=0.0)])[0]
    row = to_markdown([summary]).splitlines()[2]
    assert row.split(" | ")[6] == "n/a"  # violation over zero successes
    assert row.count("n/a") == 5  # violation, three peak statistics, compute per call


def test_plot_tolerance_sweep_writes_png(tmp_path):
    sweep = tolerance_sweep(random_records(seed=1), [0.0, 0.5, 1.0, 2.0, math.inf])
    path = plot_tolerance_sweep(sweep, tmp_path / "plots" / "sweep.png")
    assert path.exists()
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 5000
