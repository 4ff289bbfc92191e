"""Sequential CARE: the e-process, its bound, its stopping rules and the episode driver."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate

from simroll.certify.paired import ArraySource
from simroll.certify.sequential import (
    EProcessTest,
    e_value_upper_bound,
    log_e_value,
    run_sequential,
)
from simroll.certify.settings import CareSettings
from simroll.certify.synthetic import SyntheticSetting, sample_outcomes, sequential_selection


@pytest.mark.parametrize(
    ("losses", "trials", "epsilon"), [(0, 0, 0.1), (0, 43, 0.1), (3, 50, 0.2), (10, 20, 0.3)]
)
def test_e_value_closed_form_matches_the_mixture_integral(losses, trials, epsilon):
    def integrand(u):
        return u**losses * ((1 - u * epsilon) / (1 - epsilon)) ** (trials - losses)

    expected = integrate.quad(integrand, 0, 1, epsabs=0, epsrel=1e-12)[0]
    assert math.exp(log_e_value(losses, trials, epsilon)) == pytest.approx(expected, rel=1e-9)


def test_e_value_grows_with_trials_and_epsilon_and_falls_with_losses():
    t = np.arange(1, 200)
    assert np.all(np.diff(log_e_value(2, t[2:], 0.1)) > 0)
    k = np.arange(0, 50)
    assert np.all(np.diff(log_e_value(k, 100, 0.1)) < 0)
    e = np.linspace(0.01, 0.9, 50)
    assert np.all(np.diff([float(log_e_value(3, 80, x)) for x in e]) > 0)
    assert log_e_value(5, 3, 0.1) == -np.inf  # impossible counts never certify


@pytest.mark.parametrize(
    ("losses", "trials", "alpha"), [(0, 60, 0.05), (2, 100, 0.05), (5, 40, 0.2)]
)
def test_upper_bound_is_where_the_e_value_reaches_one_over_alpha(losses, trials, alpha):
    bound = e_value_upper_bound(losses, trials, alpha)
    assert float(log_e_value(losses, trials, bound)) == pytest.approx(math.log(1 / alpha), abs=1e-6)
    assert e_value_upper_bound(trials, trials, alpha) == 1.0
    for epsilon in (0.05, 0.1, 0.2, 0.4):
        test = EProcessTest(epsilon, alpha, trials)
        assert (test.status(losses, trials) == "certified") == (bound <= epsilon + 1e-9)


def test_stopping_rules_are_consistent():
    test = EProcessTest(0.1, 0.05, 200)
    assert test.status(0, test.min_trials) == "certified"
    assert test.status(0, test.min_trials - 1) == "continue"
    k = test.max_certifiable_losses
    assert log_e_value(k, 200, 0.1) >= test.threshold > log_e_value(k + 1, 200, 0.1)
    assert test.status(k + 1, 200) == "futile"  # within budget empirically, but too many losses
    assert test.status(k + 1, k + 1) == "clearly fails"
    assert test.status(1, 3) == "continue"
    assert EProcessTest(0.1, 0.05, 10).status(0, 0) == "futile"  # 10 specs can never certify
    assert test.status(k, 200) == "certified"


def test_e_process_keeps_its_level_at_the_null_boundary():
    # A single candidate whose risk is exactly epsilon: P(ever certified within n) <= alpha.
    setting = SyntheticSetting("boundary", 0.2, 0.1, 400, (0.2,), (2.0,), coupling="independent")
    reference, candidates = sample_outcomes(setting, 4000, np.random.default_rng(1))
    rate = sequential_selection(reference, candidates, setting.settings)["certified"].mean()
    assert rate <= 0.1


def _source(setting, seed):
    reference, candidates = sample_outcomes(setting, 1, np.random.default_rng(seed))
    names = [f"c{j}" for j in range(setting.m)]
    source = ArraySource(reference[0], {n: candidates[0, j] for j, n in enumerate(names)})
    return names, source, reference, candidates


@pytest.mark.parametrize("risk", ["joint", "conditional"])
@pytest.mark.parametrize("method", ["fixed_sequence", "bonferroni"])
def test_episode_driver_matches_the_vectorised_simulation(risk, method):
    setting = SyntheticSetting(
        "driver",
        0.2,
        0.1,
        120,
        (0.0, 0.05, 0.15, 0.4),
        (1.5, 2, 3, 5),
        risk=risk,
        method=method,
        p_reference=0.7,
    )
    for seed in range(12):
        names, source, reference, candidates = _source(setting, seed)
        result = run_sequential(names, source, setting.settings, setting.n)
        vectorised = sequential_selection(reference, candidates, setting.settings)
        assert [d.certified for d in result.decisions] == vectorised["certified"][0].tolist()
        assert [d.tested for d in result.decisions] == vectorised["tested"][0].tolist()
        trials = [d.trials for d in result.decisions]
        assert trials == (vectorised["trials"][0] * vectorised["tested"][0]).tolist()
        assert result.total_rollouts == vectorised["rollouts"][0]


def test_batches_change_rollouts_not_decisions():
    setting = SyntheticSetting(
        "batch", 0.2, 0.1, 150, (0.0, 0.1, 0.5), (2, 3, 4), risk="conditional"
    )
    for seed in range(5):
        names, source, *_ = _source(setting, seed)
        one = run_sequential(names, source, setting.settings, setting.n, batch=1)
        eight = run_sequential(names, source, setting.settings, setting.n, batch=8)
        assert [d.certified for d in one.decisions] == [d.certified for d in eight.decisions]
        assert [d.trials for d in one.decisions] == [d.trials for d in eight.decisions]
        assert eight.total_rollouts >= one.total_rollouts


def test_clearly_bad_candidate_stops_early_and_later_ones_are_never_run():
    n = 300
    reference = np.ones(n, dtype=bool)
    good = np.ones(n, dtype=bool)
    bad = np.arange(n) % 2 == 0  # breaks half the episodes
    source = ArraySource(reference, {"good": good, "bad": bad, "after": good})
    settings = CareSettings(0.1, 0.05, "joint")
    result = run_sequential(["good", "bad", "after"], source, settings, n)
    first, second, third = result.decisions
    assert first.certified and first.trials == EProcessTest(0.1, 0.05, n).min_trials
    assert second.status == "clearly fails" and second.trials < 15
    assert not third.tested and "after" not in result.rollouts
    # failure-triggered: the reference ran only where "bad" failed
    assert result.rollouts["reference"] == second.trials - sum(bad[: second.trials])
    assert result.total_rollouts < 0.25 * result.exhaustive_rollouts
