"""The clutter primitives: each push moves the hand as listed and pushes what is in its way, the
grasp lifts a clear target, looks withdraw and come back, budgets truncate."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from simroll.envs.clutter.primitives import GRASP, LOOK, NAMES, PUSHES, PrimitiveActions
from simroll.envs.clutter.retrieve import BLOCKS
from simroll.envs.wrappers import ControlDelay


@pytest.fixture
def make_wrapped():
    envs = []

    def make(**kwargs):
        env = gym.make(
            "simroll/ClutterRetrieve-v0", obs_mode="full", image_size=48, gripper_mode="delta"
        )
        wrapped = PrimitiveActions(env, **kwargs)
        envs.append(wrapped)
        return wrapped

    yield make
    for env in envs:
        env.close()


def park_clutter(raw, keep=()):
    """Move the clutter blocks (all but ``keep``) far out on the table."""
    for i in range(1, BLOCKS):
        if i in keep:
            continue
        q = raw._block_qpos[i]
        raw.data.qpos[q : q + 2] = [0.45, -0.5 + 0.09 * i]
        raw.data.qvel[raw.model.jnt_dofadr[raw.model.body_jntadr[raw._block_bodies[i]]] :][:6] = 0


def test_sixteen_pushes_and_their_names():
    assert len(PUSHES) == 16 and GRASP == 16 and LOOK == 17 and len(NAMES) == 18
    lengths = [np.linalg.norm(np.diff([(0, 0), *w], axis=0), axis=1).sum() for w in PUSHES]
    np.testing.assert_allclose(lengths, 0.04)  # every push moves the hand 4 cm
    ends = {tuple(np.round(w[-1], 6)) for w in PUSHES}
    assert len(ends) == 12  # 4 axial, 4 straight diagonals, 4 corners the L-pairs share


@pytest.mark.parametrize("index", [0, 3, 4, 5, 6, 15])
def test_a_push_in_free_space_moves_the_hand_by_its_offset(make_wrapped, index):
    env = make_wrapped()
    env.reset(seed=1)
    raw = env.unwrapped
    park_clutter(raw)
    park_clutter(raw, keep=())  # the target stays; the hand's start spot is beside it
    q0 = raw._block_qpos[0]
    raw.data.qpos[q0 : q0 + 2] = [0.3, 0.3]  # and the target too: nothing in the way
    start = raw.hand_pose()
    _, _, terminated, truncated, info = env.step(index)
    assert not (terminated or truncated)
    moved = raw.hand_pose()[:2] - start[:2]
    np.testing.assert_allclose(moved, PUSHES[index][-1], atol=0.003)
    assert info["primitive"] == NAMES[index]
    assert info["travel"] == pytest.approx(
        sum(np.linalg.norm(np.diff([(0, 0), *PUSHES[index]], axis=0), axis=1)), abs=0.006
    )


def test_a_push_moves_the_block_in_its_way(make_wrapped):
    env = make_wrapped()
    env.reset(seed=2)
    raw = env.unwrapped
    park_clutter(raw, keep=(1,))
    q0 = raw._block_qpos[0]
    raw.data.qpos[q0 : q0 + 2] = [0.3, 0.3]
    hand = raw.hand_pose()
    q1 = raw._block_qpos[1]
    reach = raw.layout.shapes[1].reach
    raw.data.qpos[q1 : q1 + 2] = [hand[0] + 0.015 + reach + 0.005, hand[1]]
    before = raw.block_poses()[1]
    env.step(0)  # push +x
    env.step(0)
    after = raw.block_poses()[1]
    assert after[0] - before[0] > 0.03  # two 4 cm pushes that start 5 mm short of it
    assert abs(after[2] - before[2]) < 0.005  # pushed along the table, not over it


def test_the_grasp_lifts_a_clear_target(make_wrapped):
    env = make_wrapped()
    env.reset(seed=3)
    park_clutter(env.unwrapped)
    _, reward, terminated, truncated, info = env.step(GRASP)
    assert terminated and not truncated and info["is_success"] and reward == 1.0
    assert info["withdrawals"] == 1 and info["primitives"] == 1
    assert info["execution_time_s"] == pytest.approx(info["low_level_steps"] / 20, abs=5)


def test_look_withdraws_and_comes_back(make_wrapped):
    env = make_wrapped()
    _, info = env.reset(seed=4)
    raw = env.unwrapped
    start = raw.hand_pose()
    obs, _, _, _, info = env.step(LOOK)
    assert info["withdrawals"] == 1 and info["travel"] == 0.0
    assert np.linalg.norm(raw.hand_pose()[:3] - start[:3]) < 0.005
    assert info["low_level_steps"] > 20


def test_a_blocked_grasp_fails_and_returns_to_pushing(make_wrapped):
    env = make_wrapped()
    env.reset(seed=5)  # the layout leaves no clear grasp
    raw = env.unwrapped
    start = raw.hand_pose()
    _, reward, terminated, truncated, info = env.step(GRASP)
    assert not (terminated or truncated) and reward == 0.0
    assert np.linalg.norm(raw.hand_pose()[:2] - start[:2]) < 0.01


def test_budgets_truncate(make_wrapped):
    env = make_wrapped(max_primitives=2)
    env.reset(seed=6)
    assert env.step(1)[3] is False
    *_, truncated, info = env.step(1)
    assert truncated and info["termination_reason"] == "budget"
    env = make_wrapped(max_travel=0.05)
    env.reset(seed=6)
    park_clutter(env.unwrapped)
    *_, truncated, info = env.step(1)
    assert not truncated
    *_, truncated, info = env.step(1)
    assert truncated and info["termination_reason"] == "budget" and info["travel"] > 0.05


def test_bad_primitives_and_modes_are_refused(make_wrapped):
    env = make_wrapped()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"int in \[0, 17\], got 18"):
        env.step(18)
    with pytest.raises(ValueError, match="max_primitives"):
        make_wrapped(max_primitives=0)
    with pytest.raises(ValueError, match="clutter primitives"):
        ControlDelay(env, 1)  # a held 5-D action means nothing to a primitive env
    ControlDelay(env, 0)
