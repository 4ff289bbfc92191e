"""Binomial success rates with confidence intervals, the one way every report states a rate.

:func:`binomial_rate` turns a count of successes out of trials into a :class:`Rate`: the point
estimate and a two-sided ``1 - alpha`` interval from statsmodels' ``proportion_confint``, either
``"beta"`` (Clopper-Pearson, exact: never below nominal coverage, the default for certification)
or ``"wilson"`` (score interval: shorter, close to nominal on average). Bad counts and unknown
methods raise ``ValueError`` naming the value and what was expected; zero trials give a rate of
``nan`` and the uninformative interval ``(0, 1)``.
"""

from __future__ import annotations

import math
import operator
from dataclasses import asdict, dataclass
from typing import Any

INTERVAL_METHODS: dict[str, str] = {
    "beta": "Clopper-Pearson (exact)",
    "wilson": "Wilson score",
}


@dataclass(frozen=True)
class Rate:
    """``successes`` out of ``trials``, with a two-sided ``1 - alpha`` interval ``[low, high]``."""

    successes: int
    trials: int
    rate: float
    low: float
    high: float
    method: str
    alpha: float = 0.05

    def format(self, digits: int = 2) -> str:
        """``0.82 [0.69, 0.91]``; ``n/a`` when there were no trials."""
        if self.trials == 0:
            return "n/a"
        return f"{self.rate:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"

    def __str__(self) -> str:
        return self.format()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def binomial_rate(successes: int, trials: int, method: str = "beta", alpha: float = 0.05) -> Rate:
    """The rate ``successes / trials`` with its ``1 - alpha`` confidence interval by ``method``."""
    successes = _count("successes", successes)
    trials = _count("trials", trials)
    if trials < 0:
        raise ValueError(f"trials must be >= 0, got {trials}")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be between 0 and trials={trials}, got {successes}")
    if method not in INTERVAL_METHODS:
        raise ValueError(
            f"unknown interval method {method!r}; expected one of {list(INTERVAL_METHODS)}"
        )
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if trials == 0:
        return Rate(successes, trials, math.nan, 0.0, 1.0, method, alpha)
    # imported here: statsmodels takes 1-2 s to import, and importing this module is on the
    # start-up path of every command (the parallel workers wait for it)
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(successes, trials, alpha=alpha, method=method)
    # Clip float round-off so that intervals are always inside [0, 1].
    low, high = max(0.0, float(low)), min(1.0, float(high))
    return Rate(successes, trials, successes / trials, low, high, method, alpha)


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer count, got the bool {value}")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(
            f"{name} must be an integer count, got {value!r} ({type(value).__name__})"
        ) from None
