"""Fixed-n CARE: exact bounds, family-wise decisions, selection, rollout skipping, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from simroll.certify.care import (
    binomial_p_value,
    choose_cheapest,
    clopper_pearson_upper,
    decide_fixed,
    family_decisions,
    min_trials_to_certify,
    run_fixed,
)
from simroll.certify.paired import ArraySource
from simroll.certify.settings import CareSettings, CertifyError

COUNTS = [(0, 29), (0, 100), (1, 50), (3, 40), (7, 200), (12, 300), (40, 40), (5, 5), (0, 1)]


@pytest.mark.parametrize(("losses", "trials"), COUNTS)
@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.2])
def test_upper_bound_is_the_one_sided_clopper_pearson_bound(losses, trials, alpha):
    # statsmodels' two-sided interval at 2 * alpha has the one-sided alpha bound as its top end
    expected = proportion_confint(losses, trials, alpha=2 * alpha, method="beta")[1]
    assert clopper_pearson_upper(losses, trials, alpha) == pytest.approx(expected, abs=1e-12)


def test_upper_bound_known_values():
    # zero failures in n trials: the bound solves (1 - U)^n = alpha
    assert clopper_pearson_upper(0, 29, 0.05) == pytest.approx(1 - 0.05 ** (1 / 29), rel=1e-12)
    assert clopper_pearson_upper(0, 29, 0.05) == pytest.approx(0.0981446, abs=1e-7)
    assert clopper_pearson_upper(4, 4, 0.05) == 1.0
    assert clopper_pearson_upper(0, 0, 0.05) == 1.0


@pytest.mark.parametrize(("losses", "trials"), COUNTS)
@pytest.mark.parametrize("epsilon", [0.05, 0.1, 0.3])
def test_p_value_is_scipys_exact_binomial_test_and_dual_to_the_bound(losses, trials, epsilon):
    p = float(binomial_p_value(losses, trials, epsilon))
    assert p == pytest.approx(stats.binomtest(losses, trials, epsilon, "less").pvalue, rel=1e-9)
    for alpha in (0.01, 0.05, 0.2):
        certified_by_p = p <= alpha
        certified_by_bound = clopper_pearson_upper(losses, trials, alpha) <= epsilon
        assert certified_by_p == certified_by_bound


def test_p_value_without_trials_never_certifies():
    assert binomial_p_value(0, 0, 0.1) == 1.0


def test_min_trials_to_certify_is_the_first_n_where_zero_failures_certify():
    for epsilon, alpha in [(0.1, 0.05), (0.05, 0.01), (0.5, 0.2), (0.3, 0.05 / 7)]:
        n = min_trials_to_certify(epsilon, alpha)
        assert clopper_pearson_upper(0, n, alpha) <= epsilon
        assert clopper_pearson_upper(0, n - 1, alpha) > epsilon


def test_fixed_sequence_certifies_a_prefix_and_tests_one_past_it():
    certified, tested = family_decisions([True, True, False, True], "fixed_sequence")
    assert certified.tolist() == [True, True, False, False]
    assert tested.tolist() == [True, True, True, False]
    certified, tested = family_decisions([True, True, False, True], "bonferroni")
    assert certified.tolist() == [True, True, False, True] and tested.all()


def test_cheapest_certified_candidate_is_chosen_and_reference_is_the_fallback():
    costs = [0.5, 0.25, 0.1]
    assert choose_cheapest([True, True, False], costs, 1.0) == 1
    assert choose_cheapest([True, True, True], costs, 1.0) == 2
    assert choose_cheapest([False, False, False], costs, 1.0) == -1
    assert choose_cheapest([True, False, False], costs, 0.4) == -1  # reference is cheaper
    assert choose_cheapest([True, True], [0.5, 0.5], 1.0) == 0  # ties: earlier in test order


def _settings(**kwargs) -> CareSettings:
    return CareSettings(**{"epsilon": 0.1, "delta": 0.05, "risk": "joint", **kwargs})


def test_fallback_to_reference_when_every_candidate_is_bad():
    n = 200
    reference = np.ones(n, dtype=bool)
    rng = np.random.default_rng(0)
    candidates = {f"c{j}": rng.random(n) > 0.3 for j in range(3)}  # ~30% broken each
    for method in ("fixed_sequence", "bonferroni"):
        result = run_fixed(
            list(candidates), ArraySource(reference, candidates), _settings(method=method), n
        )
        assert not any(d.certified for d in result.decisions)
        assert result.choose([0.5, 0.3, 0.2], 1.0) == -1
    fixed = run_fixed(list(candidates), ArraySource(reference, candidates), _settings(), n)
    assert [d.tested for d in fixed.decisions] == [True, False, False]
    assert "not tested" in fixed.decisions[1].status


def test_fastest_certified_is_chosen_when_several_pass():
    n = 300
    reference = np.ones(n, dtype=bool)
    broken = np.zeros(n, dtype=bool)
    broken[:3] = True  # 1% failures: certified at epsilon = 0.1
    candidates = {"mild": ~np.zeros(n, bool), "medium": ~broken, "harsh": ~np.roll(broken, 5)}
    for method in ("fixed_sequence", "bonferroni"):
        result = run_fixed(
            list(candidates), ArraySource(reference, candidates), _settings(method=method), n
        )
        assert all(d.certified for d in result.decisions)
        assert result.choose([0.6, 0.4, 0.2], 1.0) == 2
        assert result.choose([0.6, 0.1, 0.2], 1.0) == 1


def test_joint_risk_runs_the_reference_only_where_a_candidate_failed():
    n = 50
    reference = np.ones(n, dtype=bool)
    reference[0] = False
    a = np.ones(n, dtype=bool)
    a[[0, 1]] = False  # spec 0: reference failed too, no loss
    result = run_fixed(["a"], ArraySource(reference, {"a": a}), _settings(epsilon=0.2), n)
    assert result.rollouts == {"reference": 2, "a": n}
    assert (result.decisions[0].losses, result.decisions[0].trials) == (1, n)


def test_conditional_risk_runs_candidates_only_on_reference_solved_specs():
    n = 60
    reference = np.arange(n) % 3 != 0  # 40 solved
    a = np.ones(n, dtype=bool)
    a[[0, 1, 2]] = False  # spec 0 unsolved by the reference: not a trial
    result = run_fixed(
        ["a"], ArraySource(reference, {"a": a}), _settings(epsilon=0.3, risk="conditional"), n
    )
    assert result.rollouts == {"reference": n, "a": 40}
    decision = result.decisions[0]
    assert (decision.losses, decision.trials) == (2, 40)
    assert decision.upper_bound == pytest.approx(clopper_pearson_upper(2, 40, 0.05))


def test_decisions_report_level_and_bound_per_candidate():
    decisions = decide_fixed(["a", "b"], [0, 30], [100, 100], _settings(method="bonferroni"))
    assert [d.level for d in decisions] == [0.025, 0.025]
    assert decisions[0].certified and not decisions[1].certified
    assert decisions[0].upper_bound == pytest.approx(clopper_pearson_upper(0, 100, 0.025))
    assert decisions[1].empirical_risk == pytest.approx(0.3)


@pytest.mark.parametrize("key", ["epsilon", "delta"])
@pytest.mark.parametrize("value", [0.0, 1.0, -0.1, 1.5, math.nan, "0.1", True])
def test_epsilon_and_delta_outside_the_unit_interval_are_refused(key, value):
    with pytest.raises(CertifyError, match=key):
        _settings(**{key: value})


def test_unknown_risk_success_or_method_is_refused():
    for kwargs in ({"risk": "marginal"}, {"success": "psr"}, {"method": "holm"}):
        with pytest.raises(CertifyError, match=next(iter(kwargs))):
            _settings(**kwargs)


def test_no_candidates_is_refused():
    with pytest.raises(CertifyError, match="no candidates"):
        run_fixed([], ArraySource(np.ones(5, bool), {}), _settings(), 5)
    with pytest.raises(CertifyError, match="no candidates"):
        decide_fixed([], [], [], _settings())
