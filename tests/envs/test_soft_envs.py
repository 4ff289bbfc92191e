"""The soft-suite envs: Gymnasium API, determinism, deformation-aware outcomes, bad input,
divergence and the binary gripper."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import simroll.envs
from simroll.assets import list_objects
from simroll.envs.core import GRIPPER_STEP, InvalidActionError
from simroll.envs.scene import FINGER_TRAVEL, OPEN_HALF_WIDTH
from simroll.envs.soft import SoftLiftEnv
from simroll.experts import SoftExpert
from tests.envs.helpers import all_finite, assert_identical, run_expert_episode

# Gymnasium warns about every unbounded Box; the tactile marker field and agent state are
# unbounded by design.
UNBOUNDED_BOX_WARNING = "A Box observation space m"


# ------------------------------------------------------------------------- Gymnasium API
# A clutter env's full observation renders the scene with segmentation for its visibility, about
# 8 s of check_env each on a 2-core machine: those 4 cases run in `make test-slow`; the clutter
# ids' state-mode checks and every soft id's full check stay in the fast suite.
CHECK_ENV_CASES = [
    pytest.param(env_id, obs_mode, marks=pytest.mark.slow)
    if obs_mode == "full" and "Clutter" in env_id
    else pytest.param(env_id, obs_mode)
    for env_id in simroll.envs.env_ids()
    for obs_mode in ("full", "state")
]


@pytest.mark.parametrize(("env_id", "obs_mode"), CHECK_ENV_CASES)
def test_every_registered_env_passes_gymnasium_check_env(make_env, env_id, obs_mode):
    task = env_id.removeprefix("simroll/").removesuffix("-v0")
    env = make_env(
        task, obs_mode=obs_mode, image_size=32, render_mode="rgb_array", render_size=(48, 64)
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=False)
    unexpected = [str(w.message) for w in caught if UNBOUNDED_BOX_WARNING not in str(w.message)]
    assert unexpected == []
    assert env.unwrapped.metadata["render_fps"] == 20
    assert env.unwrapped.render().shape == (48, 64, 3)


def test_registered_ids_are_the_three_soft_tasks_and_clutter_retrieval():
    assert simroll.envs.env_ids() == [
        "simroll/SoftLift-v0",
        "simroll/SoftPlace-v0",
        "simroll/SoftSqueeze-v0",
        "simroll/ClutterRetrieve-v0",
        "simroll/ClutterRetrieveEasy-v0",
        "simroll/ClutterRetrieveMedium-v0",
        "simroll/ClutterRetrieveHard-v0",
    ]


# ------------------------------------------------------------------------- determinism
def rollout(env, seed: int, actions: np.ndarray) -> list:
    obs, info = env.reset(seed=seed)
    frames = [(obs, info["eval"])]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        frames.append((obs, info["eval"], reward, terminated, truncated))
    return frames


def test_same_seed_and_actions_give_bit_identical_observations_and_eval(make_env):
    actions = np.random.default_rng(1234).uniform(-1, 1, size=(15, 5)).astype(np.float32)
    first = rollout(make_env("SoftPlace", obs_mode="full", image_size=32), 7, actions)
    second = rollout(make_env("SoftPlace", obs_mode="full", image_size=32), 7, actions)
    assert len(first) == len(second) == 16
    for step, (a, b) in enumerate(zip(first, second, strict=True)):
        assert_identical(a[0], b[0], f"step {step} obs")
        assert_identical(a[1], b[1], f"step {step} eval")
        assert a[2:] == b[2:]
    # the pixels actually changed over the rollout, so the comparison above was not vacuous
    assert not np.array_equal(first[0][0]["pixels"]["wrist"], first[-1][0]["pixels"]["wrist"])


def test_different_seed_gives_a_different_initial_state(make_env):
    env = make_env("SoftPlace")
    obs_a, _ = env.reset(seed=0)
    obs_b, _ = env.reset(seed=1)
    assert not np.array_equal(obs_a["environment_state"], obs_b["environment_state"])
    assert not np.array_equal(obs_a["agent_pos"], obs_b["agent_pos"])
    obs_again, _ = env.reset(seed=0)
    assert_identical(obs_a, obs_again)


# ------------------------------------------------------------------------- expert outcomes
@pytest.mark.parametrize("object_name", ["sponge", "tofu", "foam_cylinder", "dumpling"])
def test_firm_lift_exceeds_the_calibrated_tolerance_and_gentle_lift_does_not(make_env, object_name):
    env = make_env("SoftLift", object=object_name)
    gentle, _ = run_expert_episode(env, "gentle", seed=0)
    firm, _ = run_expert_episode(env, "firm", seed=0)
    tolerance = env.unwrapped.tolerance
    assert gentle["is_success"] and firm["is_success"]
    assert gentle["termination_reason"] == firm["termination_reason"] == "success"
    assert gentle["eval"]["tolerance"] == firm["eval"]["tolerance"] == tolerance
    assert 0 < gentle["eval"]["peak_deformation"] < tolerance
    assert firm["eval"]["peak_deformation"] > tolerance


@pytest.mark.parametrize("object_name", list_objects())
def test_rigid_twin_never_deforms_and_is_lifted(make_env, object_name):
    env = make_env("SoftLift", object=object_name, rigid_twin=True)
    deformations: list[float] = []
    info, _ = run_expert_episode(
        env, "gentle", on_step=lambda _e, _o, i: deformations.append(i["eval"]["deformation"])
    )
    assert info["is_success"]
    assert info["eval"]["peak_deformation"] < 1e-9
    assert max(deformations) < 1e-9
    assert env.unwrapped.model.nflex == 0


def test_tolerance_override_replaces_the_calibrated_one(make_env):
    env = make_env("SoftLift", tolerance=3.5)
    _, info = env.reset(seed=0)
    assert info["eval"]["tolerance"] == 3.5


# ------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("action", "shown"),
    [
        ([np.nan, 0, 0, 0, 0], "nan"),
        ([0, 0, np.inf, 0, 0], "inf"),
        ([0, 0, 0, -np.inf, 0], "-inf"),
        ([0, 0, 0, 0], "(4,)"),
        (np.zeros((1, 5)), "(1, 5)"),
        ([1.5, 0, 0, 0, 0], "1.5"),
        ([0, 0, 0, 0, -1.01], "-1.01"),
    ],
)
def test_invalid_action_raises_with_the_bad_value(make_env, action, shown):
    env = make_env()
    env.reset(seed=0)
    with pytest.raises(InvalidActionError) as raised:
        env.step(np.asarray(action, dtype=np.float32))
    assert shown in str(raised.value)
    # the rejected action left the env untouched: a valid step still works
    env.step(np.zeros(5, dtype=np.float32))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"variation": "icy_x0.1"}, "unknown variation 'icy_x0.1'"),
        ({"variation": {"gravity_scale": 2.0}}, "unknown variation fields ['gravity_scale']"),
        ({"variation": {"mass_scale": -1.0}}, "mass_scale must be a finite number > 0"),
        ({"obs_mode": "pixels"}, "obs_mode must be one of ('full', 'state'), got 'pixels'"),
        ({"gripper_mode": "suction"}, "gripper_mode must be one of"),
        ({"image_size": 8}, "image_size must be an int in [16, 1024], got 8"),
        ({"tolerance": -0.5}, "tolerance must be a number > 0 or None, got -0.5"),
        ({"render_mode": "ansi"}, "render_mode must be None or 'rgb_array', got 'ansi'"),
    ],
)
def test_bad_constructor_arguments_raise_value_error(kwargs, message):
    with pytest.raises(ValueError) as raised:
        SoftLiftEnv(**kwargs)
    assert message in str(raised.value)


def test_unknown_variation_or_option_at_reset_raises_value_error(make_env):
    env = make_env()
    with pytest.raises(ValueError, match="unknown variation 'nope'"):
        env.reset(seed=0, options={"variation": "nope"})
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(seed=0, options={"difficulty": 3})


# ------------------------------------------------------------------------- divergence
def blow_up_velocity(env) -> None:
    env.unwrapped.data.qvel[:] = 1e9


def blow_up_timestep(env) -> None:
    env.unwrapped.model.opt.timestep = 10.0


@pytest.mark.parametrize(
    ("blow_up", "rigid_twin"),
    [
        (blow_up_velocity, False),
        (blow_up_velocity, True),
        # a soft object under a 10 s step raises MuJoCo's inertia warning; a rigid twin only
        # sinks through the table without any warning (that ends as "object_off_table")
        (blow_up_timestep, False),
    ],
)
def test_diverging_simulation_ends_the_episode_without_raising(
    make_env, tmp_path, monkeypatch, blow_up, rigid_twin
):
    monkeypatch.chdir(tmp_path)  # MuJoCo appends its warnings to ./MUJOCO_LOG.TXT
    env = make_env("SoftLift", rigid_twin=rigid_twin, obs_mode="full", image_size=32)
    env.reset(seed=0)
    blow_up(env)
    obs, reward, terminated, truncated, info = env.step(np.zeros(5, dtype=np.float32))
    assert terminated and not truncated and reward == 0.0
    assert info["termination_reason"].startswith("diverged")
    assert not info["is_success"]
    assert all_finite(obs)
    assert env.observation_space.contains(obs)


def test_env_recovers_on_reset_after_divergence(make_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = make_env("SoftLift")
    expected, _ = env.reset(seed=3)
    blow_up_velocity(env)
    *_, info = env.step(np.zeros(5, dtype=np.float32))
    assert info["termination_reason"].startswith("diverged")
    obs, info = env.reset(seed=3)
    assert_identical(obs, expected)
    assert info["eval"]["peak_deformation"] < 1.0
    *_, info = env.step(np.zeros(5, dtype=np.float32))
    assert info["termination_reason"] is None
    assert np.isfinite(info["eval"]["peak_deformation"])


# ------------------------------------------------------------------------- gripper modes
@pytest.mark.parametrize(("command", "travel"), [(0.2, FINGER_TRAVEL), (-0.2, 0.0), (0.0, 0.0)])
def test_binary_gripper_closes_fully_on_positive_commands(make_env, command, travel):
    env = make_env(gripper_mode="binary")
    env.reset(seed=0)
    env.step(np.array([0, 0, 0, 0, command], dtype=np.float32))
    assert env.unwrapped.data.ctrl[4] == travel


def test_continuous_gripper_maps_commands_linearly(make_env):
    env = make_env()
    env.reset(seed=0)
    env.step(np.array([0, 0, 0, 0, 0.0], dtype=np.float32))
    assert env.unwrapped.data.ctrl[4] == pytest.approx(FINGER_TRAVEL / 2)


def test_delta_gripper_moves_the_jaw_target_by_steps_and_saturates(make_env):
    env = make_env(gripper_mode="delta")
    env.reset(seed=0)
    env.step(np.array([0, 0, 0, 0, 1.0], dtype=np.float32))
    env.step(np.array([0, 0, 0, 0, 0.5], dtype=np.float32))
    assert env.unwrapped.data.ctrl[4] == pytest.approx(1.5 * GRIPPER_STEP)
    for _ in range(30):
        env.step(np.array([0, 0, 0, 0, 1.0], dtype=np.float32))
    assert env.unwrapped.gripper_target == pytest.approx(FINGER_TRAVEL)
    env.step(np.array([0, 0, 0, 0, -1.0], dtype=np.float32))
    assert env.unwrapped.data.ctrl[4] == pytest.approx(FINGER_TRAVEL - GRIPPER_STEP)


def test_following_error_is_the_commands_lead_over_the_measured_hand_and_jaw(make_env):
    env = make_env("SoftSqueeze", object="tofu", gripper_mode="delta")
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs["following_error"], np.zeros(5, np.float32))
    raw = env.unwrapped
    expert = SoftExpert(env)
    squeezing = []
    for _ in range(60):
        obs, *_ = env.step(expert.select_action(obs))
        measured = obs["agent_pos"][:4].astype(np.float64)
        measured[2] -= raw.ids.hand_base_z
        commanded_jaw = 2 * (OPEN_HALF_WIDTH - raw.gripper_target)
        expected = np.append(raw.hand_target() - measured, commanded_jaw - obs["agent_pos"][8])
        np.testing.assert_allclose(obs["following_error"], expected, atol=1e-6)
        if expert.phase == "squeeze":
            squeezing.append(obs["following_error"][4])
    # the squeezed tofu holds the pads centimetres wider than the jaw target commands
    assert squeezing and max(squeezing) < -0.01


def test_gentle_expert_succeeds_in_delta_gripper_mode(make_env):
    env = make_env("SoftLift", gripper_mode="delta")
    info, steps = run_expert_episode(env, "gentle", seed=0)
    assert info["termination_reason"] == "success" and steps <= 70
    assert info["eval"]["peak_deformation"] <= info["eval"]["tolerance"]


def test_gentle_expert_runs_an_episode_in_binary_gripper_mode(make_env):
    env = make_env("SoftLift", gripper_mode="binary")
    info, steps = run_expert_episode(env, "gentle", seed=0)
    assert 0 < steps <= 120
    assert info["termination_reason"] in (None, "success", "object_off_table")
    assert np.isfinite(info["eval"]["peak_deformation"])


def test_hand_never_passes_through_its_control_limits(make_env):
    env = make_env()
    env.reset(seed=0)
    for _ in range(40):
        env.step(np.array([1, -1, 1, 1, 1], dtype=np.float32))
    model = env.unwrapped.model
    target = env.unwrapped.hand_target()
    assert np.all(target <= model.actuator_ctrlrange[:4, 1])
    assert np.all(target >= model.actuator_ctrlrange[:4, 0])


# ------------------------------------------------------------------------- task measurements
TASK_MEASUREMENTS = {
    "SoftLift": "lift_height",
    "SoftPlace": "distance_to_goal",
    "SoftSqueeze": "finger_force",
}


@pytest.mark.parametrize("task", sorted(TASK_MEASUREMENTS))
def test_info_carries_everything_the_tasks_evaluate_measures(make_env, task):
    env = make_env(task)
    _, info = env.reset(seed=3)
    infos = [info]
    for _ in range(3):
        infos.append(env.step(np.zeros(5, dtype=np.float32))[-1])
    evaluation = env.unwrapped.evaluate()  # of the state the last info describes
    assert TASK_MEASUREMENTS[task] in evaluation
    assert all(TASK_MEASUREMENTS[task] in step["eval"] for step in infos)
    last = infos[-1]["eval"]
    assert last["task_success_now"] == evaluation["success"]
    for key, value in evaluation.items():
        if key != "success":
            np.testing.assert_array_equal(last[key], value, err_msg=key)


def test_a_task_measurement_named_like_an_info_entry_is_refused():
    class Clashing(SoftLiftEnv):
        def evaluate(self):
            return {"success": False, "tolerance": 1.0}

    env = Clashing(obs_mode="state")
    try:
        with pytest.raises(RuntimeError, match=r"Clashing.evaluate\(\) returns \['tolerance'\]"):
            env.reset(seed=0)
    finally:
        env.close()
