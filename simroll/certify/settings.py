"""What a certification is asked to guarantee, and the errors bad input raises.

:class:`CareSettings` holds the risk budget ``epsilon``, the miss probability ``delta`` (the
guarantee holds with probability at least ``1 - delta``), which risk is bounded (``joint`` or
``conditional``, see :mod:`simroll.certify.care`), which success counts (``tsr``: task success,
``dsr``: deformation-aware success) and the family-wise procedure. It validates itself, so a bad
value fails with a :class:`CertifyArgumentError` naming it before any rollout runs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from simroll.checks import is_number

RISKS = ("joint", "conditional")
SUCCESS_KINDS = ("tsr", "dsr")
METHODS = ("fixed_sequence", "bonferroni")


class CertifyError(ValueError):
    """Bad certification input: the message names the value and what was expected."""


class CertifyArgumentError(CertifyError):
    """A certification's arguments are invalid; raised before any rollout runs, so nothing was
    run or recorded. The message names the value and what was expected."""


class PairingError(CertifyError):
    """Reference and candidate rollouts are not on the same episode specs."""


def check_unit_interval(name: str, value: Any) -> float:
    """``value`` as a float strictly inside (0, 1), else :class:`CertifyArgumentError`."""
    if not is_number(value, finite=False):
        raise CertifyArgumentError(f"{name} must be a number in (0, 1), got {value!r}")
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise CertifyArgumentError(f"{name} must be in (0, 1), got {value!r}")
    return float(value)


@dataclass(frozen=True)
class CareSettings:
    """Risk budget ``epsilon`` at confidence ``1 - delta``, for which risk, success and method."""

    epsilon: float
    delta: float
    risk: str = "conditional"
    success: str = "tsr"
    method: str = "fixed_sequence"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_unit_interval("epsilon", self.epsilon))
        object.__setattr__(self, "delta", check_unit_interval("delta", self.delta))
        for key, valid in (("risk", RISKS), ("success", SUCCESS_KINDS), ("method", METHODS)):
            if getattr(self, key) not in valid:
                raise CertifyArgumentError(
                    f"{key} must be one of {list(valid)}, got {getattr(self, key)!r}"
                )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """The guarantee in words."""
        what = (
            "P(reference succeeds and candidate fails)"
            if self.risk == "joint"
            else "P(candidate fails | reference succeeds)"
        )
        return (
            f"with probability >= {1 - self.delta:g} over the calibration episodes, the deployed "
            f"policy's acceleration-induced risk {what} is <= {self.epsilon:g} "
            f"(success = {self.success.upper()})"
        )
