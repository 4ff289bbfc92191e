"""ClutterRetrieve: layouts meet their tier, scenes are settled and seeded, visibility comes from
the render, and a clear grasp really lifts the target."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simroll.envs.clutter import layout as layout_module
from simroll.envs.clutter.layout import (
    CLUTTER_BLOCKS,
    SHAPES,
    TIERS,
    WORKSPACE_HALF,
    InfeasibleSceneError,
    Tier,
    corridors_blocked,
    distance,
    footprint,
    generate_layout,
    grasp_clear,
    polygon_distance,
)
from simroll.envs.clutter.retrieve import BLOCKS, LIFT_HEIGHT, OBJECT_FIELDS
from tests.envs.helpers import assert_identical

VISIBLE = OBJECT_FIELDS.index("visible")
STALENESS = OBJECT_FIELDS.index("staleness")


# ------------------------------------------------------------------------- layouts
@pytest.mark.parametrize("tier", sorted(TIERS))
def test_layouts_keep_the_tier_gap_and_block_the_target(tier):
    spec = TIERS[tier]
    for seed in range(4):
        layout = generate_layout(np.random.default_rng(seed), "cuboid", tier)
        assert len(layout.shapes) == BLOCKS == CLUTTER_BLOCKS + 1
        assert layout.min_gap() >= spec.gap - 1e-9
        prints = layout.footprints
        centre = layout.poses[0, :2]
        assert sum(corridors_blocked(prints[0], centre, prints[1:])) >= spec.min_blocked
        assert grasp_clear(prints[0], centre, prints[1:]) == []
        assert max(np.abs(p).max() for block in prints for p in block) <= WORKSPACE_HALF


def test_the_family_has_at_least_six_shapes_and_layouts_mix_them():
    assert len(SHAPES) >= 6
    used = set()
    for seed in range(6):
        used |= {s.name for s in generate_layout(np.random.default_rng(seed)).shapes[1:]}
    assert len(used) >= 6


def test_slide_in_stops_where_1mm_steps_stop():
    """The jumps of ``_slide`` land on the step plain 1 mm stepping finds."""
    rng = np.random.default_rng(5)
    target = SHAPES["cuboid"]
    placed = [footprint(target, np.array([0.0, 0.0, 0.3]))]
    for name in ("bar", "l_shape", "cylinder", "triangular_prism"):
        shape = SHAPES[name]
        start = np.array([0.2, rng.uniform(-0.02, 0.02), rng.uniform(-np.pi, np.pi)])
        goal = np.zeros(2)
        fast = layout_module._slide(shape, start, goal, placed, 0.0015)
        direction = (goal - start[:2]) / np.linalg.norm(goal - start[:2])
        pose = start.copy()
        while True:
            nxt = pose.copy()
            nxt[:2] += direction * 0.001
            if min(distance(footprint(shape, nxt), o) for o in placed) < 0.0015:
                break
            pose = nxt
        np.testing.assert_allclose(fast, pose, atol=1e-9)


def test_polygon_distance_of_squares():
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], dtype=float)
    assert polygon_distance(square, square + [3, 0]) == pytest.approx(2.0)
    assert polygon_distance(square, square + [0.5, 0.5]) == 0.0
    assert polygon_distance(square, square + [2, 2]) == pytest.approx(math.sqrt(2))


def test_a_tier_no_layout_can_meet_is_reported(monkeypatch):
    monkeypatch.setitem(layout_module.TIERS, "hard", Tier("hard", 0.00075, 17))
    monkeypatch.setattr(layout_module, "MAX_ATTEMPTS", 3)
    with pytest.raises(InfeasibleSceneError, match="no hard layout .* in 3 draws"):
        generate_layout(np.random.default_rng(0), "cuboid", "hard")


def test_bad_target_and_tier_are_refused(make_env):
    with pytest.raises(ValueError, match="target shape"):
        generate_layout(np.random.default_rng(0), "l_shape")
    with pytest.raises(ValueError, match="'impossible'"):
        make_env("ClutterRetrieve", tier="impossible")
    with pytest.raises(ValueError, match="'dumpling'"):  # a soft object, but no box or cylinder
        make_env("ClutterRetrieve", object="dumpling")


# ------------------------------------------------------------------------- the env
def hold() -> np.ndarray:
    return np.array([0, 0, 0, 0, -1], dtype=np.float32)


def test_scenes_start_settled(make_env):
    env = make_env("ClutterRetrieve", tier="hard")
    for seed in (0, 1):
        obs, _ = env.reset(seed=seed)
        start = obs["environment_state"].copy()
        for _ in range(10):
            obs, *_ = env.step(hold())
        moved = np.linalg.norm(obs["environment_state"][:, :3] - start[:, :3], axis=1)
        assert moved.max() < 1e-3
        assert np.all(
            np.abs(start[:, 2] - [s.half_height for s in env.unwrapped.layout.shapes]) < 2e-3
        )


def test_same_seed_same_scene_and_observations(make_env):
    actions = np.random.default_rng(3).uniform(-1, 1, size=(6, 5)).astype(np.float32)
    runs = []
    for _ in range(2):
        env = make_env("ClutterRetrieve", obs_mode="full", image_size=48)
        obs, _ = env.reset(seed=11)
        frames = [obs]
        for action in actions:
            frames.append(env.step(action)[0])
        runs.append(frames)
    for a, b in zip(*runs, strict=True):
        assert_identical(a, b, "clutter observation")
    other, _ = env.reset(seed=12)
    assert not np.array_equal(other["objects"][:, :2], runs[0][0]["objects"][:, :2])


def test_the_hand_hides_what_it_covers(make_env):
    """Visibility comes from the segmentation render: the hand parked low over the target hides
    it (staleness counts up, the last detection is kept); moved away, it is seen again."""
    env = make_env("ClutterRetrieve", obs_mode="full", image_size=64)
    obs, _ = env.reset(seed=2)
    assert obs["objects"][:, VISIBLE].all()  # the first frame is unoccluded
    first = obs["objects"][0, :4].copy()
    truth = env.unwrapped.block_poses()
    assert np.linalg.norm(first[:2] - truth[0, :2]) < 0.01  # noisy but close
    raw = env.unwrapped
    raw._target[:3] = [truth[0, 0], truth[0, 1], 0.12 - raw.ids.hand_base_z]
    raw.data.qpos[raw.ids.hand_joints[:3]] = raw._target[:3]
    hidden = []
    for _ in range(3):
        obs, *_ = env.step(hold())
        hidden.append(obs["objects"][0].copy())
    assert [h[VISIBLE] for h in hidden] == [0, 0, 0]
    assert [h[STALENESS] for h in hidden] == [1, 2, 3]
    np.testing.assert_array_equal(hidden[-1][:4], first)
    raw._target[:3] = [-0.32, 0.0, 0.10 - raw.ids.hand_base_z]
    raw.data.qpos[raw.ids.hand_joints[:3]] = raw._target[:3]
    obs, *_ = env.step(hold())
    assert obs["objects"][0, VISIBLE] == 1 and obs["objects"][0, STALENESS] == 0


def test_a_clear_grasp_lifts_the_target_to_success(make_env):
    """With the clutter moved out of the way, a straight grasp lifts the target: success is
    reachable through the physics, not declared."""
    env = make_env("ClutterRetrieve", gripper_mode="continuous")
    env.reset(seed=4)
    raw = env.unwrapped
    for i in range(1, BLOCKS):  # park the clutter far away on the table
        q = raw._block_qpos[i]
        raw.data.qpos[q : q + 2] = [0.5, -0.5 + 0.1 * i]
    target = raw.block_poses()[0]
    hand = raw.hand_pose()

    def move(goal_xyz, yaw, grip, steps):
        info = None
        for _ in range(steps):
            pose = raw.hand_pose()
            delta = np.clip((np.r_[goal_xyz, yaw] - pose) / [0.012, 0.012, 0.012, 0.15], -1, 1)
            obs, _, terminated, _, info = env.step(np.r_[delta, grip].astype(np.float32))
            if terminated:
                break
        return info

    yaw = math.remainder(target[3], math.pi)  # close across the cuboid's short side
    move([target[0], target[1], hand[2]], yaw, -1.0, 40)
    move([target[0], target[1], 0.03], yaw, -1.0, 20)
    move([target[0], target[1], 0.03], yaw, 1.0, 10)
    info = move([target[0], target[1], 0.03 + LIFT_HEIGHT + 0.03], yaw, 1.0, 30)
    assert info["is_success"], info["eval"]
    assert info["eval"]["lift_height"] >= LIFT_HEIGHT
