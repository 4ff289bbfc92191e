"""Normalized deformation of an object, from its simulated points against its rest shape.

Definition (after SoftVTBench's ``fem_rms_rigid_aligned_bbox_pct_v1``): centre the current and
the reference point sets, remove the best rotation with a proper Kabsch/SVD alignment (no
reflection), and report ``100 * RMS(aligned residual) / reference bounding-box diagonal``, in
percent. Rigid motion gives exactly the numerical noise floor; for the soft objects the points are
the flex vertices, for rigid twins the eight corners of the body's bounding box moved with the body
(so a twin's deformation is zero up to rounding). The reference is the shape right after reset.
"""

from __future__ import annotations

import numpy as np


class RestShape:
    """A reference point set prepared once (centred, its bounding-box diagonal), so the
    per-step deformation costs one 3x3 SVD."""

    def __init__(self, reference: np.ndarray):
        reference = np.asarray(reference, dtype=float)
        if reference.ndim != 2 or reference.shape[1] != 3:
            raise ValueError(f"expected an (n, 3) reference, got {reference.shape}")
        self.shape = reference.shape
        self.centred = reference - reference.mean(axis=0)
        self.diagonal = float(np.linalg.norm(reference.max(axis=0) - reference.min(axis=0)))

    def deformation(self, points: np.ndarray) -> float:
        """Percent RMS residual after optimal rigid alignment of ``points`` onto the rest shape."""
        if points.shape != self.shape:
            raise ValueError(
                f"expected two (n, 3) arrays of equal shape, got {points.shape}, {self.shape}"
            )
        current = points - points.mean(axis=0)
        u, _, vt = np.linalg.svd(self.centred.T @ current)
        sign = np.sign(np.linalg.det(vt.T @ u.T)) or 1.0
        rotation = vt.T @ np.diag([1.0, 1.0, sign]) @ u.T
        residual = current - self.centred @ rotation.T
        return float(100.0 * np.sqrt((residual**2).sum(axis=1).mean()) / self.diagonal)


def aligned_rms_deformation(points: np.ndarray, reference: np.ndarray) -> float:
    """Percent RMS residual after optimal rigid alignment of ``points`` onto ``reference``."""
    if points.shape != reference.shape or points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(
            f"expected two (n, 3) arrays of equal shape, got {points.shape}, {reference.shape}"
        )
    return RestShape(reference).deformation(points)
