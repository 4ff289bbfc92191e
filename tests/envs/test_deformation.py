"""The normalized deformation metric: zero for rigid motion, positive and scale-free otherwise."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from simroll.envs.deformation import aligned_rms_deformation


@pytest.fixture
def cloud() -> np.ndarray:
    return np.random.default_rng(0).uniform(-0.04, 0.04, size=(48, 3))


@pytest.mark.parametrize("seed", range(5))
def test_rigid_motion_of_a_point_cloud_has_zero_deformation(cloud, seed):
    rng = np.random.default_rng(seed)
    rotation = Rotation.random(random_state=seed).as_matrix()
    moved = cloud @ rotation.T + rng.uniform(-1.0, 1.0, size=3)
    assert aligned_rms_deformation(moved, cloud) < 1e-9


def test_identical_shapes_have_zero_deformation(cloud):
    assert aligned_rms_deformation(cloud, cloud) < 1e-12


def test_non_rigid_change_is_positive_and_grows_with_the_change(cloud):
    rng = np.random.default_rng(1)
    noise = rng.normal(size=cloud.shape)
    small = aligned_rms_deformation(cloud + 0.001 * noise, cloud)
    large = aligned_rms_deformation(cloud + 0.004 * noise, cloud)
    assert 0 < small < large
    squashed = aligned_rms_deformation(cloud * np.array([1.0, 1.0, 0.8]), cloud)
    assert squashed > 0.5  # percent of the bounding-box diagonal


@pytest.mark.parametrize("scale", [0.01, 3.0, 250.0])
def test_deformation_is_invariant_to_the_object_scale(cloud, scale):
    deformed = cloud * np.array([1.1, 0.95, 0.85]) + 0.002 * np.sin(40 * cloud)
    reference_value = aligned_rms_deformation(deformed, cloud)
    assert reference_value > 0
    assert aligned_rms_deformation(deformed * scale, cloud * scale) == pytest.approx(
        reference_value, rel=1e-9
    )


def test_a_mirror_image_is_not_a_rigid_motion(cloud):
    mirrored = cloud * np.array([-1.0, 1.0, 1.0])
    assert aligned_rms_deformation(mirrored, cloud) > 1.0


def test_value_is_percent_of_the_bounding_box_diagonal():
    reference = np.array(
        [[x, y, z] for x in (0.0, 1.0) for y in (0.0, 1.0) for z in (0.0, 1.0)], dtype=float
    )
    # uniform expansion by 2 %: every centred point moves by 2 % of its distance to the centre,
    # which is half the diagonal for a cube's corners, so the RMS residual is 1 % of the diagonal
    expanded = (reference - 0.5) * 1.02 + 0.5
    assert aligned_rms_deformation(expanded, reference) == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize(
    ("points", "reference"), [((8, 3), (9, 3)), ((8, 2), (8, 2)), ((8,), (8,))]
)
def test_mismatched_or_non_3d_point_sets_raise_value_error(points, reference):
    with pytest.raises(ValueError, match="expected two \\(n, 3\\) arrays"):
        aligned_rms_deformation(np.zeros(points), np.zeros(reference))
