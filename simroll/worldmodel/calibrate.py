"""Calibrating the round-trip discrepancy C_i into an error estimate with intervals.

The calibrator is a linear regression in log space, ``log E = b0 + b1 log C + b2 log i``, fitted
by ordinary least squares (statsmodels) on rollouts whose true error is known; its intervals are
the empirical quantiles of the fit's residuals (68%: 16th-84th, 95%: 2.5th-97.5th percentile), so
they assume nothing about the residuals' shape, only that they do not change between the fitting
rollouts and deployment. The depth-only baseline drops ``log C`` (``log E = b0 + b2 log i``):
what one can say knowing only how far ahead the prediction is.

Quality on held-out rollouts (:meth:`RoundTripCalibrator.evaluate`): the ratio error
``max(E_hat / E, E / E_hat)`` at its 68th and 95th percentile, the coverage of the 68% and 95%
intervals, and the mean Gaussian negative log-likelihood of ``log E`` (in nats) under the fit's
residual spread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from statsmodels.regression.linear_model import OLS

FLOOR = 1e-6  # C_i and E_i are RMS distances in standardized latent units; log needs > 0
LEVELS = (0.68, 0.95)
FEATURES = ("roundtrip", "depth")


def _design(roundtrip: np.ndarray, depth: np.ndarray, features: str) -> np.ndarray:
    log_depth = np.log(np.maximum(depth, 1))
    columns = [np.ones_like(log_depth)]
    if features == "roundtrip":
        columns.append(np.log(np.maximum(roundtrip, FLOOR)))
    columns.append(log_depth)
    return np.stack(columns, axis=-1)


@dataclass
class RoundTripCalibrator:
    """``(C_i, i) -> E_i`` estimate and intervals; ``features="depth"`` ignores ``C_i``."""

    coefficients: np.ndarray
    residual_quantiles: dict[str, float]
    residual_std: float
    features: str = "roundtrip"
    fitted_on: int = 0

    @classmethod
    def fit(
        cls,
        roundtrip: np.ndarray,
        depth: np.ndarray,
        error: np.ndarray,
        features: str = "roundtrip",
    ) -> RoundTripCalibrator:
        if features not in FEATURES:
            raise ValueError(f"features must be one of {FEATURES}, got {features!r}")
        roundtrip, depth, error = (
            np.ravel(np.asarray(x, dtype=np.float64)) for x in (roundtrip, depth, error)
        )
        keep = np.isfinite(roundtrip) & np.isfinite(error) & (depth >= 1)
        if keep.sum() < 10:
            raise ValueError(
                f"need at least 10 finite (C_i, i >= 1, E_i) samples, got {keep.sum()}"
            )
        design = _design(roundtrip[keep], depth[keep], features)
        target = np.log(np.maximum(error[keep], FLOOR))
        fit = OLS(target, design).fit()
        residuals = target - design @ fit.params
        probabilities = sorted({p for level in LEVELS for p in _tails(level)})
        quantiles = {f"{p:.3f}": float(np.quantile(residuals, p)) for p in probabilities}
        return cls(
            np.asarray(fit.params, dtype=np.float64),
            quantiles,
            float(residuals.std(ddof=design.shape[1])),
            features,
            int(keep.sum()),
        )

    def predict_log(self, roundtrip: np.ndarray, depth: np.ndarray) -> np.ndarray:
        roundtrip = np.asarray(roundtrip, dtype=np.float64)
        depth = np.asarray(depth, dtype=np.float64)
        log_error = _design(roundtrip, depth, self.features) @ self.coefficients
        undefined = (
            np.isnan(roundtrip) if self.features == "roundtrip" else np.zeros_like(depth, bool)
        )
        return np.where(undefined, np.nan, np.where(depth < 1, -np.inf, log_error))

    def predict(self, roundtrip: np.ndarray, depth: np.ndarray) -> np.ndarray:
        """Median estimate of E_i (0 at depth 0, NaN where C_i is NaN)."""
        return np.exp(self.predict_log(roundtrip, depth))

    def interval(
        self, roundtrip: np.ndarray, depth: np.ndarray, level: float
    ) -> tuple[np.ndarray, np.ndarray]:
        low, high = _tails(level)
        if f"{low:.3f}" not in self.residual_quantiles:
            raise ValueError(f"interval level must be one of {LEVELS}, got {level}")
        center = self.predict_log(roundtrip, depth)
        return (
            np.exp(center + self.residual_quantiles[f"{low:.3f}"]),
            np.exp(center + self.residual_quantiles[f"{high:.3f}"]),
        )

    def evaluate(
        self, roundtrip: np.ndarray, depth: np.ndarray, error: np.ndarray
    ) -> dict[str, float]:
        """Ratio error, interval coverage and Gaussian NLL of ``log E`` on held-out samples."""
        roundtrip, depth, error = (
            np.ravel(np.asarray(x, dtype=np.float64)) for x in (roundtrip, depth, error)
        )
        keep = np.isfinite(roundtrip) & np.isfinite(error) & (depth >= 1)
        roundtrip, depth, error = roundtrip[keep], depth[keep], error[keep]
        log_error = np.log(np.maximum(error, FLOOR))
        residual = log_error - self.predict_log(roundtrip, depth)
        ratio = np.exp(np.abs(residual))
        result: dict[str, float] = {"samples": int(keep.sum())}
        for level in LEVELS:
            low, high = self.interval(roundtrip, depth, level)
            inside = (error >= low) & (error <= high)
            percent = round(level * 100)
            result[f"ratio_error_{percent}"] = float(np.quantile(ratio, level))
            result[f"coverage_{percent}"] = float(inside.mean())
        variance = self.residual_std**2
        nll = 0.5 * np.log(2 * np.pi * variance) + residual**2 / (2 * variance)
        result["nll_nats"] = float(nll.mean())
        return result

    # -------------------------------------------------------------- (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        return {
            "coefficients": self.coefficients.tolist(),
            "residual_quantiles": self.residual_quantiles,
            "residual_std": self.residual_std,
            "features": self.features,
            "fitted_on": self.fitted_on,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoundTripCalibrator:
        return cls(
            np.asarray(data["coefficients"], dtype=np.float64),
            {str(k): float(v) for k, v in data["residual_quantiles"].items()},
            float(data["residual_std"]),
            str(data["features"]),
            int(data.get("fitted_on", 0)),
        )


def _tails(level: float) -> tuple[float, float]:
    if not 0 < level < 1:
        raise ValueError(f"interval level must be in (0, 1), got {level}")
    return (1 - level) / 2, (1 + level) / 2
