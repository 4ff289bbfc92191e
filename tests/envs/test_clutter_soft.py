"""The soft-target clutter variant: a flexcomp target that the camera segments, the twin fits,
the teacher plans with as its rigid twin, pose noise moves without deforming, the grasp holds
gently, and DSR scores."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from simroll.assets import get_object
from simroll.envs.clutter.layout import SOFT_TARGETS, block_shape
from simroll.envs.clutter.primitives import GRASP_FORCE, PrimitiveActions
from simroll.experts.clutter.twin import estimate_poses

SEED = 1  # a medium sponge scene whose replayed plan lifts the sponge within its tolerance


def yaw_gap(a: float, b: float, period: float = math.pi / 2) -> float:
    off = (a - b) % period
    return min(off, period - off)


def test_a_soft_target_is_a_flexcomp_body_the_camera_sees(make_env):
    env = make_env("ClutterRetrieve", object="sponge", obs_mode="full", image_size=96)
    obs, info = env.reset(seed=SEED)
    raw = env.unwrapped
    assert raw.soft_target and raw.model.nflex == 1 and raw.ids.object_geom == -1
    assert info["eval"]["tolerance"] == get_object("sponge").calibration().tolerance
    assert obs["objects"][0, 4] == 1.0  # visible: the flex is segmented as block 0
    assert (obs["segmentation"] == 0).sum() > 100
    placed = raw.layout.poses[0]
    truth = raw.block_poses()[0]
    assert np.linalg.norm(truth[:2] - placed[:2]) < 0.002  # settled where the layout put it
    assert yaw_gap(truth[3], placed[2]) < math.radians(1)
    assert abs(truth[2] - block_shape("sponge").half_height) < 0.003
    # the twin fits the flex's top face with the same footprint as a rigid block's
    estimate = estimate_poses(raw, obs["depth"], obs["segmentation"])
    assert estimate.found[0]
    assert np.linalg.norm(estimate.poses[0, :2] - truth[:2]) < 2.5 * raw.detection_noise[0]
    assert yaw_gap(estimate.poses[0, 2], truth[3]) < math.radians(3)


def test_check_env_passes_with_a_soft_target(make_env):
    env = make_env("ClutterRetrieve", object="sponge", obs_mode="state")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unbounded Box warnings, as for every simroll env
        check_env(env.unwrapped)


def test_the_rigid_twin_stands_in_the_same_scene(make_env):
    soft = make_env("ClutterRetrieve", object="tofu")
    twin = make_env("ClutterRetrieve", object="tofu", rigid_twin=True)
    soft.reset(seed=2)
    twin.reset(seed=2)
    assert not twin.unwrapped.soft_target and twin.unwrapped.model.nflex == 0
    np.testing.assert_array_equal(soft.unwrapped.layout.poses, twin.unwrapped.layout.poses)
    gap = soft.unwrapped.block_poses() - twin.unwrapped.block_poses()
    assert np.abs(gap[:, :2]).max() < 0.002


def test_a_soft_state_carries_into_its_rigid_twin(make_env):
    """What the teacher plans from: the soft env's hand, fingers and block poses, in a model whose
    target is the rigid twin."""
    soft = make_env("ClutterRetrieve", object="sponge").unwrapped
    soft.reset(seed=SEED)
    for _ in range(5):
        soft.step(np.array([0.5, 0.2, 0.0, 0.1, 0.3], dtype=np.float32))
    twin = make_env("ClutterRetrieve", rigid_twin=True).unwrapped  # loads the layout it is given
    twin.set_sim_state(soft.get_sim_state())
    assert not twin.soft_target
    assert [s.name for s in twin.layout.shapes] == [s.name for s in soft.layout.shapes]
    gap = twin.block_poses() - soft.block_poses()
    assert np.abs(gap[:, :2]).max() < 1e-6
    assert (
        max(
            yaw_gap(a, b, 2 * math.pi)
            for a, b in zip(twin.block_poses()[:, 3], soft.block_poses()[:, 3], strict=True)
        )
        < 1e-6
    )
    np.testing.assert_allclose(twin.hand_pose(), soft.hand_pose(), atol=1e-9)
    assert twin.gripper_target == soft.gripper_target
    # and a soft state still continues bit-identically in a soft env
    copy = make_env("ClutterRetrieve", object="sponge").unwrapped
    copy.set_sim_state(soft.get_sim_state())
    np.testing.assert_array_equal(copy.data.qpos, soft.data.qpos)


def test_stiffness_variations_need_a_soft_target(make_env):
    env = make_env("ClutterRetrieve", object="sponge", variation="soft_x0.5")
    env.reset(seed=0)
    raw = env.unwrapped
    scaled = raw.model.flex_stiffness.copy()  # elasticity baked into the compiled flex
    env.reset(seed=0, options={"variation": "default"})
    np.testing.assert_allclose(scaled, 0.5 * raw.model.flex_stiffness, rtol=1e-6)
    assert np.abs(scaled).max() > 0
    for name, kwargs in (("cuboid", {}), ("sponge", {"rigid_twin": True})):
        rigid = make_env("ClutterRetrieve", object=name, variation="stiff_x2", **kwargs)
        with pytest.raises(ValueError, match="stiffness"):
            rigid.reset(seed=0)


def test_pose_noise_moves_a_soft_target_without_deforming_it(make_env):
    env = make_env("ClutterRetrieve", object="sponge", variation="pose_noise")
    env.reset(seed=SEED)
    raw = env.unwrapped
    rest = raw._rest_shape
    before = raw.block_poses()[0]
    raw.perturb_blocks(np.array([0]))
    after = raw.block_poses()[0]
    limit_m, limit_rad = raw.variation.block_pose_noise
    shift = np.linalg.norm(after[:2] - before[:2])
    assert 0 < shift <= math.sqrt(2) * limit_m + 0.002
    assert yaw_gap(after[3], before[3], 2 * math.pi) <= limit_rad + math.radians(1)
    assert raw._rest_shape is rest  # the deformation reference is kept
    assert rest.deformation(raw.object_points()) < 0.1 * raw.tolerance


def test_replay_grasps_a_soft_target_gently_and_dsr_scores_it():
    """The grasp regulates the grip to GRASP_FORCE per finger instead of squeezing shut: the
    replayed plan lifts the sponge with its peak deformation within tolerance, the grip force
    settles near the setpoint, and the record carries the deformation DSR is judged on."""
    from simroll.policies.clutter import NominalReplay
    from simroll.rollout.episode import EnvConfig, run_episode
    from simroll.rollout.records import EpisodeSpec

    spec = EpisodeSpec("ClutterRetrieveMedium", "sponge", seed=SEED, suite="clutter")
    env = EnvConfig(obs_mode="full", image_size=64, gripper_mode="delta").make(spec)
    wrapper = env
    while not isinstance(wrapper, PrimitiveActions):
        wrapper = wrapper.env
    forces = []
    wrapper.low_level_observers.append(
        lambda obs, info: forces.append(np.asarray(obs["tactile"]["force"]).sum(axis=(1, 2)))
    )
    record = run_episode(spec, lambda env: NominalReplay(env), env=env)
    env.close()
    assert record.error is None, record.error
    assert record.success and record.dsr_success
    assert 0.0 < record.peak_deformation <= record.tolerance
    assert record.tolerance == get_object("sponge").calibration().tolerance
    # the pushes' share: the peak when the grasp began, recorded for the report
    assert 0.0 < record.extra["peak_deformation_before_grasp"] <= record.peak_deformation + 1e-6
    assert abs(np.mean(forces[-1]) - GRASP_FORCE) < 0.3  # held at the setpoint, not squeezed


def test_soft_targets_are_box_or_cylinder_soft_objects():
    for name in SOFT_TARGETS:
        shape = block_shape(name)
        assert shape.kind in ("box", "cylinder") and shape.half_height > 0
    with pytest.raises(ValueError, match="unknown block shape"):
        block_shape("dumpling")
