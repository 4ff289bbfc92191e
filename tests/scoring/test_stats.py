"""binomial_rate: intervals against scipy's Beta quantiles and input validation."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy.stats import beta as beta_distribution

from simroll.scoring.stats import Rate, binomial_rate


def clopper_pearson(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    """Reference from the definition: quantiles of Beta(x, n - x + 1) and Beta(x + 1, n - x)."""
    low = (
        0.0
        if successes == 0
        else beta_distribution.ppf(alpha / 2, successes, trials - successes + 1)
    )
    high = (
        1.0
        if successes == trials
        else beta_distribution.ppf(1 - alpha / 2, successes + 1, trials - successes)
    )
    return low, high


@pytest.mark.parametrize(("successes", "trials"), [(7, 20), (0, 10), (10, 10), (1, 1), (50, 97)])
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_beta_interval_matches_clopper_pearson_from_scipy(successes, trials, alpha):
    rate = binomial_rate(successes, trials, method="beta", alpha=alpha)
    low, high = clopper_pearson(successes, trials, alpha)
    assert rate.low == pytest.approx(low, abs=1e-12)
    assert rate.high == pytest.approx(high, abs=1e-12)
    assert rate.rate == successes / trials
    assert (rate.successes, rate.trials, rate.method, rate.alpha) == (
        successes,
        trials,
        "beta",
        alpha,
    )


def test_known_clopper_pearson_values():
    # 7/20 at 95%: the textbook interval.
    rate = binomial_rate(7, 20)
    assert (round(rate.low, 4), round(rate.high, 4)) == (0.1539, 0.5922)
    assert binomial_rate(0, 10).low == 0.0 and binomial_rate(10, 10).high == 1.0


def test_wilson_interval_matches_formula_and_is_narrower_than_exact():
    successes, trials, z = 7, 20, 1.959963984540054
    p = successes / trials
    centre = (p + z**2 / (2 * trials)) / (1 + z**2 / trials)
    half = z / (1 + z**2 / trials) * math.sqrt(p * (1 - p) / trials + z**2 / (4 * trials**2))
    wilson = binomial_rate(successes, trials, method="wilson")
    assert wilson.low == pytest.approx(centre - half, abs=1e-9)
    assert wilson.high == pytest.approx(centre + half, abs=1e-9)
    exact = binomial_rate(successes, trials, method="beta")
    assert exact.high - exact.low > wilson.high - wilson.low


def test_zero_trials_give_nan_rate_and_full_interval():
    rate = binomial_rate(0, 0)
    assert math.isnan(rate.rate)
    assert (rate.low, rate.high) == (0.0, 1.0)
    assert rate.format() == "n/a"


def test_intervals_contain_the_rate_and_lie_in_unit_interval():
    for method in ("beta", "wilson"):
        for trials in (1, 5, 33):
            for successes in range(trials + 1):
                rate = binomial_rate(successes, trials, method=method)
                assert 0.0 <= rate.low <= rate.rate <= rate.high <= 1.0


def test_format_shows_rate_and_interval():
    rate = Rate(successes=41, trials=50, rate=0.82, low=0.686, high=0.914, method="beta")
    assert rate.format() == "0.82 [0.69, 0.91]"
    assert str(rate) == "0.82 [0.69, 0.91]"
    assert rate.format(3) == "0.820 [0.686, 0.914]"


def test_numpy_integer_counts_are_accepted():
    assert binomial_rate(np.int64(3), np.int64(4)).rate == 0.75


@pytest.mark.parametrize(
    ("successes", "trials", "method", "alpha", "message"),
    [
        (0, -1, "beta", 0.05, "trials must be >= 0, got -1"),
        (11, 10, "beta", 0.05, "between 0 and trials=10, got 11"),
        (-1, 10, "beta", 0.05, "between 0 and trials=10, got -1"),
        (3, 10, "normal", 0.05, "unknown interval method 'normal'"),
        (3, 10, "beta", 1.5, "alpha must be in"),
        (2.5, 10, "beta", 0.05, "integer count"),
        (True, 10, "beta", 0.05, "integer count"),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_value(successes, trials, method, alpha, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        binomial_rate(successes, trials, method=method, alpha=alpha)
