"""CARE keeps its guarantee on a fixed synthetic grid (fixed seed); naive selection does not."""

from __future__ import annotations

import numpy as np
import pytest

from simroll.certify.synthetic import (
    SyntheticSetting,
    fixed_selection,
    naive_selection,
    sample_outcomes,
    sequential_selection,
    summarize,
)

GRID = [
    SyntheticSetting("near_budget", 0.1, 0.05, 200, (0.02, 0.09, 0.11), (1.5, 3.0, 4.0)),
    SyntheticSetting(
        "near_budget_conditional",
        0.15,
        0.1,
        150,
        (0.05, 0.14, 0.16),
        (2.0, 3.0, 4.0),
        risk="conditional",
        p_reference=0.7,
    ),
    SyntheticSetting(
        "all_just_above",
        0.1,
        0.1,
        300,
        (0.105,) * 4,
        (2.0, 3.0, 4.0, 5.0),
        method="bonferroni",
        coupling="independent",
    ),
    SyntheticSetting("small_n", 0.3, 0.2, 30, (0.1, 0.28, 0.32), (2.0, 3.0, 5.0)),
]
REPS = 1500


@pytest.fixture(scope="module")
def outcomes():
    return {
        s.name: sample_outcomes(s, REPS, np.random.default_rng([7, i])) for i, s in enumerate(GRID)
    }


@pytest.mark.parametrize("setting", GRID, ids=lambda s: s.name)
@pytest.mark.parametrize(
    "selector", [fixed_selection, sequential_selection], ids=["fixed", "sequential"]
)
def test_care_deploys_a_budget_breaking_candidate_at_most_delta_of_the_time(
    outcomes, setting, selector
):
    summary = summarize(selector(*outcomes[setting.name], setting.settings), setting)
    assert summary["violations"] / REPS <= setting.delta
    assert summary["family_errors"] / REPS <= setting.delta


@pytest.mark.parametrize("setting", GRID[:3], ids=lambda s: s.name)
def test_naive_selection_breaks_the_budget_far_more_often_than_delta(outcomes, setting):
    summary = summarize(naive_selection(*outcomes[setting.name], setting.settings), setting)
    assert summary["violations"] / REPS > 3 * setting.delta


def test_sequential_form_uses_at_most_40_percent_of_the_exhaustive_rollouts():
    setting = SyntheticSetting(
        "ladder",
        0.15,
        0.05,
        400,
        (0.0, 0.01, 0.03, 0.06, 0.35, 0.7),
        (1.5, 2.0, 3.0, 5.0, 8.0, 12.0),
        risk="conditional",
    )
    reference, candidates = sample_outcomes(setting, 300, np.random.default_rng(3))
    sequential = summarize(sequential_selection(reference, candidates, setting.settings), setting)
    fixed = summarize(fixed_selection(reference, candidates, setting.settings), setting)
    exhaustive = (setting.m + 1) * setting.n
    assert sequential["mean_rollouts"] / exhaustive <= 0.4
    assert sequential["violations"] == 0
    # at a comparable deployed speedup
    assert sequential["mean_speedup"] >= 0.9 * fixed["mean_speedup"]
