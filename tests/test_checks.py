"""simroll.checks: a bool is neither an integer nor a number for a setting; NumPy's are both."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simroll.checks import is_int, is_number
from simroll.train.dagger import DaggerConfig, DaggerError


def test_is_int_takes_integers_above_the_minimum_and_never_a_bool():
    assert is_int(3) and is_int(np.int64(3), 1) and is_int(0, 0) and is_int(-2)
    assert not is_int(True) and not is_int(False, 0) and not is_int(np.bool_(True))
    assert not is_int(0, 1) and not is_int(2.0) and not is_int("2") and not is_int(None)


def test_is_number_takes_finite_reals_and_never_a_bool():
    assert is_number(0.5) and is_number(2) and is_number(np.float32(0.1)) and is_number(np.int8(1))
    assert not is_number(True) and not is_number("0.5") and not is_number(None)
    assert not is_number(math.inf) and not is_number(math.nan)
    assert is_number(math.inf, finite=False)


@pytest.mark.parametrize("field", ["beta", "beta_decay"])
def test_dagger_refuses_true_for_a_probability(field):
    config = DaggerConfig(labeller={"_target_": "simroll.experts.SoftExpert"}, **{field: True})
    with pytest.raises(DaggerError, match=f"dagger.{field} must be a number"):
        config.check()
