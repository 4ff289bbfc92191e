"""Type predicates for validating settings: an integer, or a real number, that is not a bool.

Python's ``bool`` is a subclass of ``int``, so ``isinstance(True, int)`` holds and a bare
``isinstance`` check would take ``true`` from a config for 1. Every setting check that wants a
count or a number asks these instead; each caller still raises its own error naming the setting.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def is_int(value: Any, minimum: int | None = None) -> bool:
    """Whether ``value`` is an integer (Python's or NumPy's, not a bool) >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        return False
    return minimum is None or value >= minimum


def is_number(value: Any, *, finite: bool = True) -> bool:
    """Whether ``value`` is a real number (an int or float, Python's or NumPy's, not a bool),
    and finite unless ``finite=False``."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return False
    return not finite or math.isfinite(value)
