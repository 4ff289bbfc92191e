"""Tactile sensing from contacts: zero without touch, both fingers read a grasp, markers shear."""

from __future__ import annotations

import numpy as np
import pytest

from simroll.envs.sensing import MARKER_GRID
from tests.envs.helpers import run_expert_episode


def test_tactile_reads_all_zero_without_contact(make_env):
    env = make_env("SoftLift")
    obs, info = env.reset(seed=0)
    obs, *_, info = env.step(np.zeros(5, dtype=np.float32))  # hand hovers above the object
    assert not np.any(obs["tactile"]["force"])
    assert not np.any(obs["tactile"]["markers"])
    assert not np.any(info["eval"]["contact_force"])


@pytest.mark.parametrize("rigid_twin", [False, True])
def test_gentle_grasp_loads_both_fingers_and_moves_their_markers(make_env, rigid_twin):
    env = make_env("SoftLift", rigid_twin=rigid_twin)
    lifting: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def record(expert, obs, info):
        if expert.phase == "lift":
            tactile = obs["tactile"]
            lifting.append(
                (
                    tactile["force"].reshape(2, -1).sum(axis=1),
                    np.abs(tactile["markers"]).reshape(2, -1).max(axis=1),
                    info["eval"]["contact_force"],
                )
            )

    info, _ = run_expert_episode(env, "gentle", seed=0, on_step=record)
    assert info["is_success"]
    assert len(lifting) >= 5
    for normal_force, marker_motion, net_force in lifting:
        assert np.all(normal_force > 0.1)
        assert np.all(normal_force < 3.0)  # gentle: about 1 N per finger
        assert np.all(marker_motion > 0)
        # the object pushes the left pad (+y side) outwards to +y and the right pad to -y
        assert net_force[0, 1] > 0 > net_force[1, 1]


def test_tactile_images_follow_the_requested_taxel_grid(make_env):
    env = make_env("SoftSqueeze", tactile_shape=(8, 6))
    obs, _ = env.reset(seed=0)
    assert obs["tactile"]["force"].shape == (2, 8, 6)
    assert obs["tactile"]["markers"].shape == (2, MARKER_GRID[0] * MARKER_GRID[1], 2)
    assert env.observation_space.contains(obs)
