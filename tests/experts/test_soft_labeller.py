"""The scripted soft expert as a state-to-action labeller (what DAgger asks of its expert).

(a) On the expert's own trajectories a fresh expert (a new instance, never reset-driven, built on
the same env at that step) and a stale one (carried over from another episode, asked only now
and then) return the rolling expert's action at every step, and asking changes no simulator
state. (b) It labels states other policies reached: after random actions, or a burst of noise in
the middle of its own episode, it completes the task from where it is. (c) The gentle expert
succeeds carefully (TSR and DSR 1.0) and the firm one succeeds carelessly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import gymnasium as gym
import numpy as np
import pytest

import simroll.envs  # noqa: F401  (registers the envs)
from simroll.experts import SoftExpert
from simroll.experts.noise import ActionNoise
from simroll.experts.soft import PHASES
from simroll.policies.base import LabelsStates

APPROACH_PHASES = {"rise", "align", "descend", "close"}


@pytest.fixture
def make_env() -> Iterator[Callable[..., gym.Env]]:
    envs: list[gym.Env] = []

    def make(task: str, object_name: str = "sponge", **kwargs) -> gym.Env:
        kwargs.setdefault("obs_mode", "state")
        kwargs.setdefault("gripper_mode", "delta")  # what `simroll collect` records in
        env = gym.make(f"simroll/{task}-v0", object=object_name, **kwargs)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


def sim_state(env: gym.Env) -> tuple:
    u = env.unwrapped
    return (
        u.data.qpos.copy(),
        u.data.qvel.copy(),
        u.data.ctrl.copy(),
        u.hand_target(),
        u.gripper_target,
        u.data.time,
    )


def assert_same_state(before: tuple, after: tuple) -> None:
    for a, b in zip(before, after, strict=True):
        assert np.array_equal(a, b)


def finish(env: gym.Env, policy, obs) -> dict:
    """Step ``policy`` until the episode ends; the last info."""
    while True:
        obs, _, terminated, truncated, info = env.step(policy.select_action(obs))
        if terminated or truncated:
            return info


# ------------------------------------------------------------------------- the protocol
def test_the_expert_declares_it_labels_any_state(make_env):
    expert = SoftExpert(make_env("SoftLift"))
    assert SoftExpert.labels_any_state is True
    assert isinstance(expert, LabelsStates)


# ------------------------------------------------------------------------- (a) own trajectories
@pytest.mark.parametrize(
    ("task", "object_name", "seed", "closure", "gripper_mode"),
    [
        ("SoftLift", "sponge", 0, "gentle", "delta"),
        ("SoftLift", "dumpling", 1, "firm", "delta"),
        ("SoftLift", "tofu", 2, "gentle", "continuous"),
        ("SoftPlace", "tofu", 0, "gentle", "delta"),
        ("SoftPlace", "foam_cylinder", 1, "firm", "delta"),
        ("SoftPlace", "sponge", 2, "gentle", "continuous"),
        ("SoftSqueeze", "foam_cylinder", 0, "gentle", "delta"),
        ("SoftSqueeze", "sponge", 1, "firm", "delta"),
        ("SoftSqueeze", "dumpling", 2, "gentle", "continuous"),
    ],
)
def test_a_fresh_expert_labels_every_state_of_the_experts_own_trajectory_with_its_action(
    make_env, task, object_name, seed, closure, gripper_mode
):
    env = make_env(task, object_name, gripper_mode=gripper_mode)
    stale = SoftExpert(env, closure)  # carried over: it has labelled another episode, no reset
    obs, _ = env.reset(seed=seed + 100)
    for _ in range(12):
        obs, *_ = env.step(stale.select_action(obs))

    rolling = SoftExpert(env, closure)
    obs, _ = env.reset(seed=seed)
    rolling.reset()
    steps = matches = 0
    phases: list[str] = []
    while True:
        action = rolling.select_action(obs)
        phases.append(rolling.phase)
        before = sim_state(env)
        fresh = SoftExpert(env, closure).select_action(obs)
        assert_same_state(before, sim_state(env))  # labelling reads, never writes
        matches += bool(np.allclose(fresh, action, rtol=0, atol=1e-7))
        if steps % 3 == 0:  # the stale expert skips steps: nothing it saw before may matter
            assert np.allclose(stale.select_action(obs), action, rtol=0, atol=1e-7)
        steps += 1
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert matches == steps  # 100 % of the steps
    assert info["is_success"], (task, object_name, seed, closure, info["termination_reason"])
    # the trajectory went through the grasp, so the comparison covered every kind of phase
    assert {"align", "descend", "close"} <= set(phases)
    assert "lift" in phases if task != "SoftSqueeze" else "squeeze" in phases
    if task == "SoftPlace":
        assert {"carry", "lower", "release", "retreat"} <= set(phases)


def test_a_fresh_expert_labels_the_states_a_noisy_expert_visits_as_the_rolling_expert_does(
    make_env,
):
    # DART-style noise: the env executes a perturbed action, so the states are off the clean path
    env = make_env("SoftPlace", "dumpling")
    rolling = SoftExpert(env, "gentle", approach_gain=0.3)
    policy = ActionNoise(rolling, env, arm_std=0.3, gripper_std=0.1)
    obs, _ = env.reset(seed=3)
    policy.reset()
    steps = 0
    while True:
        action = policy.select_action(obs)
        fresh = SoftExpert(env, "gentle", approach_gain=0.3).select_action(obs)
        assert np.allclose(fresh, policy.action_label, rtol=0, atol=1e-7), steps
        steps += 1
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert steps > 30


def test_reset_changes_no_label(make_env):
    env = make_env("SoftLift")
    expert = SoftExpert(env)
    obs, _ = env.reset(seed=4)
    for _ in range(25):
        obs, *_ = env.step(expert.select_action(obs))
    label = expert.select_action(obs)
    expert.reset()
    assert expert.phase is None
    assert np.array_equal(expert.select_action(obs), label)
    assert np.array_equal(expert.predict_action_chunk(obs), label[None])


# ------------------------------------------------------------------------- (b) others' states
@pytest.mark.parametrize("task", ["SoftLift", "SoftPlace", "SoftSqueeze"])
@pytest.mark.parametrize(
    ("object_name", "seed", "random_steps"), [("tofu", 0, 15), ("sponge", 1, 30)]
)
def test_the_expert_completes_the_task_after_a_random_policy_drove(
    make_env, task, object_name, seed, random_steps
):
    env = make_env(task, object_name)
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    for _ in range(random_steps):  # a learner that flails: hand and jaw anywhere
        obs, _, terminated, truncated, _ = env.step(rng.uniform(-1, 1, 5).astype(np.float32))
        assert not (terminated or truncated)
    expert = SoftExpert(env, "gentle")
    expert.select_action(obs)
    assert expert.phase in APPROACH_PHASES  # nothing is held: it goes to grasp
    info = finish(env, expert, obs)
    assert info["is_success"], info["termination_reason"]
    assert info["eval"]["peak_deformation"] <= info["eval"]["tolerance"]


@pytest.mark.parametrize(
    ("task", "object_name", "phase", "after"),
    [
        ("SoftLift", "dumpling", "lift", 3),
        ("SoftPlace", "foam_cylinder", "lift", 2),
        ("SoftPlace", "tofu", "carry", 8),
    ],
)
def test_the_expert_takes_over_again_after_a_noisy_learner_held_the_object(
    make_env, task, object_name, phase, after
):
    # DAgger's mix: the expert drives, a learner acts (here: the expert's action plus heavy noise)
    # for 10 steps while the object is in the hand, then a new expert labels and drives again
    env = make_env(task, object_name)
    expert = SoftExpert(env, "gentle")
    rng = np.random.default_rng(after)
    obs, _ = env.reset(seed=2)
    steps_in_phase = 0
    while steps_in_phase < after:
        obs, *_ = env.step(expert.select_action(obs))
        steps_in_phase += expert.phase == phase
    for _ in range(10):
        noisy = expert.select_action(obs) + rng.normal(0.0, 1.0, 5)
        obs, *_ = env.step(np.clip(noisy, -1, 1).astype(np.float32))
    info = finish(env, SoftExpert(env, "gentle"), obs)
    assert info["is_success"], info["termination_reason"]


@pytest.mark.parametrize("object_name", ["tofu", "foam_cylinder"])
@pytest.mark.parametrize("hold", [True, False])
def test_the_squeeze_label_holds_the_hand_where_a_learner_left_it(make_env, object_name, hold):
    # a hand moving while the pads grip drags the object's surface (a learner's jitter there
    # crushed tofu below the expert's own grip force); with squeeze_hold_hand the squeeze label
    # never moves the hand, even where a learner left it above the grasp height, and only
    # regulates the grip; without, it brings the hand back down to the grasp height
    env = make_env("SoftSqueeze", object_name)
    expert = SoftExpert(env, "gentle", squeeze_hold_hand=hold)
    obs, _ = env.reset(seed=3)
    while True:
        action = expert.select_action(obs)
        if expert.phase == "squeeze":
            break
        obs, *_ = env.step(action)
    assert not action[:4].any()
    lifted = np.array([0.0, 0.0, 0.4, 0.0, 0.0], dtype=np.float32)  # a learner raises the hand
    obs, *_ = env.step(lifted)
    raw = env.unwrapped
    raised = raw.hand_target()[2] + raw.ids.hand_base_z - expert.grasp_height()
    assert raised > 0.002  # the hand's target is now above the grasp height
    action = expert.select_action(obs)
    assert expert.phase == "squeeze"
    if hold:
        assert not action[:4].any(), action
    else:
        assert action[2] < 0.0 and not action[[0, 1, 3]].any(), action
    assert action[4] != 0.0  # the grip is still being regulated
    info = finish(env, SoftExpert(env, "gentle", squeeze_hold_hand=hold), obs)
    assert info["is_success"], info["termination_reason"]


def test_the_phase_is_read_from_the_state_not_from_the_episode(make_env):
    env = make_env("SoftPlace", "sponge")
    expert = SoftExpert(env, "gentle")
    obs, _ = env.reset(seed=5)
    phases = []
    while True:
        obs, _, terminated, truncated, _ = env.step(expert.select_action(obs))
        phases.append(expert.phase)
        if terminated or truncated:
            break
    # the phases come in the order of the task, each one a single stretch (no re-approach)
    order = [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p]
    expected = [phase for phase in PHASES if phase != "rise"]
    assert order == expected or order == [phase for phase in expected if phase != "squeeze"]


# ------------------------------------------------------------------------- (c) clean success
@pytest.mark.parametrize("task", ["SoftLift", "SoftPlace", "SoftSqueeze"])
def test_the_gentle_expert_succeeds_without_exceeding_the_tolerance(make_env, task):
    outcomes = []
    for seed, object_name in enumerate(["sponge", "tofu", "foam_cylinder", "dumpling"]):
        env = make_env(task, object_name)
        expert = SoftExpert(env, "gentle")
        obs, _ = env.reset(seed=seed + 10)
        info = finish(env, expert, obs)
        within = info["eval"]["peak_deformation"] <= info["eval"]["tolerance"]
        outcomes.append((info["is_success"], info["is_success"] and within))
    tsr = np.mean([success for success, _ in outcomes])
    dsr = np.mean([careful for _, careful in outcomes])
    assert tsr == 1.0 and dsr == 1.0, outcomes


@pytest.mark.parametrize("task", ["SoftLift", "SoftPlace"])
def test_the_firm_expert_succeeds_but_exceeds_the_tolerance(make_env, task):
    for seed, object_name in enumerate(["sponge", "tofu"]):
        env = make_env(task, object_name)
        obs, _ = env.reset(seed=seed + 20)
        info = finish(env, SoftExpert(env, "firm"), obs)
        assert info["is_success"]
        assert info["eval"]["peak_deformation"] > info["eval"]["tolerance"]


def test_steer_to_goal_carries_toward_the_goal_on_the_way_up(make_env):
    # the default SoftPlace label lifts a held object straight up to the carry height before
    # carrying it; steer_to_goal carries it toward the goal as soon as it is off the table, so a
    # learner that lowered it short of the goal is told to move toward it, not to rise in place
    env = make_env("SoftPlace", "sponge")
    expert = SoftExpert(env, "gentle")
    steer = SoftExpert(env, "gentle", steer_to_goal=True)
    assert steer.policy_id == "expert/gentle/steer"
    obs, _ = env.reset(seed=5)
    raw = env.unwrapped
    while True:
        action = expert.select_action(obs)
        lifted = raw.object_center()[2] - raw.rest_center[2]
        if expert.phase == "lift" and lifted > 0.015:
            break
        obs, _, terminated, truncated, _ = env.step(action)
        assert not (terminated or truncated), "the expert never lifted the object"
    assert not action[:2].any(), action  # straight up
    steered = steer.select_action(obs)
    assert steer.phase == "carry"
    hand_goal = raw.goal_position()[:2] - (raw.object_center()[:2] - raw.hand_pose()[:2])
    toward = hand_goal - raw.hand_pose()[:2]
    assert float(np.dot(steered[:2], toward)) > 0.0, (steered, toward)
    assert steered[2] > 0.0  # still rising to the carry height
    assert steered[4] == pytest.approx(action[4])  # the same grip
    info = finish(env, steer, obs)
    assert info["is_success"], info["termination_reason"]
    with pytest.raises(ValueError, match="steer_to_goal"):
        SoftExpert(env, "gentle", steer_to_goal="yes")
