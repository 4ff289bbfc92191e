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


@pytest.mark.parametrize("rigid_twin", [False, True])
def test_tactile_totals_match_a_contact_by_contact_recomputation(make_env, rigid_twin):
    """Each finger's net force and pressure-image total against a plain loop over ``d.contact``
    with ``mj_contactForce``: the reader's batched classification (which contacts are pad-object,
    which finger) and force signs are what a per-contact reading gives."""
    import mujoco

    env = make_env("SoftSqueeze", rigid_twin=rigid_twin)
    raw = env.unwrapped
    sensor = raw.tactile
    checked = 0

    def recompute(data) -> tuple[np.ndarray, np.ndarray]:
        net, normal = np.zeros((2, 3)), np.zeros(2)
        force6 = np.zeros(6)
        for i in range(data.ncon):
            contact = data.contact[i]
            if sensor.flex >= 0:
                on_object = sensor.flex in (contact.flex[0], contact.flex[1])
            else:
                on_object = sensor.object_geom in (contact.geom[0], contact.geom[1])
            for finger, pad in enumerate(sensor.pad_geoms):
                if on_object and pad in (contact.geom[0], contact.geom[1]):
                    mujoco.mj_contactForce(raw.model, data, i, force6)
                    world = contact.frame.reshape(3, 3).T @ force6[:3]
                    net[finger] += -world if contact.geom[0] == pad else world
                    normal[finger] += abs(force6[0])
        return net, normal

    def check(expert, obs, info):
        nonlocal checked
        reading = sensor.read(raw.data)
        net, normal = recompute(raw.data)
        np.testing.assert_allclose(reading.net_force, net, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(reading.normal_force, normal, rtol=1e-4, atol=1e-6)
        checked += bool(reading.contacts)

    info, _ = run_expert_episode(env, "gentle", seed=0, on_step=check)
    assert info["is_success"]
    assert checked >= 5  # steps with pad-object contacts were compared
