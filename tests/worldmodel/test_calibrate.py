"""The calibrator on synthetic data whose noise is known: coefficients, coverage, ratio error."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from simroll.worldmodel.calibrate import RoundTripCalibrator

SIGMA = 0.25


def synthetic(n: int, seed: int, sigma: float = SIGMA):
    """log E = 0.3 + 1.0 log C + 0.2 log i + N(0, sigma^2)."""
    rng = np.random.default_rng(seed)
    depth = rng.integers(1, 13, n)
    roundtrip = rng.lognormal(-2.0, 0.8, n) * depth**0.5
    log_error = 0.3 + np.log(roundtrip) + 0.2 * np.log(depth) + rng.normal(0, sigma, n)
    return roundtrip, depth, np.exp(log_error)


def test_calibrator_recovers_the_law_and_covers_at_nominal_rates():
    calibrator = RoundTripCalibrator.fit(*synthetic(4000, 0))
    assert np.allclose(calibrator.coefficients, [0.3, 1.0, 0.2], atol=0.05)
    assert calibrator.residual_std == pytest.approx(SIGMA, rel=0.05)
    quality = calibrator.evaluate(*synthetic(4000, 1))
    assert quality["coverage_68"] == pytest.approx(0.68, abs=0.03)
    assert quality["coverage_95"] == pytest.approx(0.95, abs=0.015)
    # |residual| ~ half-normal: its 68th / 95th percentiles are sigma * 0.994 / 1.960
    expected = np.exp(SIGMA * stats.halfnorm.ppf([0.68, 0.95]))
    assert quality["ratio_error_68"] == pytest.approx(expected[0], rel=0.03)
    assert quality["ratio_error_95"] == pytest.approx(expected[1], rel=0.03)


def test_depth_only_baseline_ignores_the_roundtrip_error_and_does_worse():
    train, test = synthetic(3000, 2), synthetic(3000, 3)
    with_c = RoundTripCalibrator.fit(*train)
    depth_only = RoundTripCalibrator.fit(*train, features="depth")
    roundtrip, depth, _ = test
    assert np.allclose(
        depth_only.predict(roundtrip, depth), depth_only.predict(roundtrip * 9, depth)
    )
    assert depth_only.evaluate(*test)["nll_nats"] > with_c.evaluate(*test)["nll_nats"] + 0.3
    assert depth_only.evaluate(*test)["coverage_68"] == pytest.approx(0.68, abs=0.04)


def test_intervals_bracket_the_estimate_and_widen_with_the_level():
    calibrator = RoundTripCalibrator.fit(*synthetic(1000, 4))
    c, i = np.array([0.05, 0.2]), np.array([1, 10])
    low68, high68 = calibrator.interval(c, i, 0.68)
    low95, high95 = calibrator.interval(c, i, 0.95)
    estimate = calibrator.predict(c, i)
    assert np.all((low95 < low68) & (low68 < estimate) & (estimate < high68) & (high68 < high95))
    assert calibrator.predict(np.array([0.0]), np.array([0]))[0] == 0.0  # depth 0: no error
    with pytest.raises(ValueError, match="level"):
        calibrator.interval(c, i, 0.5)


def test_calibrator_survives_a_json_round_trip():
    calibrator = RoundTripCalibrator.fit(*synthetic(500, 5))
    again = RoundTripCalibrator.from_dict(calibrator.to_dict())
    c, i, _ = synthetic(20, 6)
    assert np.allclose(again.predict(c, i), calibrator.predict(c, i))
    assert np.allclose(again.interval(c, i, 0.95), calibrator.interval(c, i, 0.95))


def test_calibrator_rejects_too_few_samples_and_unknown_features():
    with pytest.raises(ValueError, match="at least 10"):
        RoundTripCalibrator.fit(np.ones(3), np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="features"):
        RoundTripCalibrator.fit(*synthetic(50, 7), features="magic")
