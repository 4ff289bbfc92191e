"""The clutter teacher and digital twin: plans that clear a grasp and predict execution, a
closed-loop teacher that looks when its view is stale, a twin within the detection noise."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from simroll.envs.clutter.primitives import GRASP, LOOK, PrimitiveActions
from simroll.experts.clutter import ClutterTeacher
from simroll.experts.clutter.teacher import blockage
from simroll.experts.clutter.twin import SYMMETRY, build_twin, estimate_poses


@pytest.fixture
def teacher():
    teacher = ClutterTeacher(beam=2, max_pushes=10)
    yield teacher
    teacher.close()


def make(obs_mode="state", **kwargs):
    env = gym.make("simroll/ClutterRetrieve-v0", obs_mode=obs_mode, gripper_mode="delta", **kwargs)
    return PrimitiveActions(env)


@pytest.mark.parametrize("seed", [0, pytest.param(4, marks=pytest.mark.slow)])
def test_a_plan_from_the_true_state_predicts_execution_and_retrieves(teacher, seed):
    env = make()
    env.reset(seed=seed)
    raw = env.unwrapped
    assert not blockage(raw)[1]  # scenes start with no clear grasp
    plan = teacher.plan(raw.get_sim_state())
    assert plan.graspable and plan.primitives[-1] == GRASP and len(plan.poses) == len(plan) - 1
    for push, predicted in zip(plan.primitives[:-1], plan.poses, strict=True):
        env.step(push)
        np.testing.assert_allclose(raw.block_poses(), predicted, atol=1e-9)
    *_, terminated, truncated, info = env.step(GRASP)
    assert terminated and info["is_success"]
    env.close()


def test_the_closed_loop_teacher_looks_when_its_view_is_stale(teacher):
    env = make(obs_mode="full", image_size=48)
    obs, _ = env.reset(seed=2)
    raw = env.unwrapped
    seen = obs["objects"].copy()
    seen[:, 4] = 1.0
    assert teacher.label(raw, {**obs, "objects": seen}) != LOOK  # a fresh view: it acts
    hidden = seen.copy()
    hidden[0, 4] = 0.0  # the target went out of view
    assert teacher.label(raw, {**obs, "objects": hidden}) == LOOK
    assert teacher.label(raw, {**obs, "objects": hidden}) != LOOK  # never twice in a row
    env.close()


def test_twin_poses_are_within_the_detection_noise():
    env = gym.make("simroll/ClutterRetrieve-v0", obs_mode="full", image_size=96)
    position, heading = [], []
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        raw = env.unwrapped
        estimate = estimate_poses(raw, obs["depth"], obs["segmentation"])
        truth = raw.block_poses()
        assert estimate.found.all()  # the first frame is unoccluded
        for i, shape in enumerate(raw.layout.shapes):
            position.append(np.linalg.norm(estimate.poses[i, :2] - truth[i, :2]))
            if shape.kind != "cylinder":
                period = SYMMETRY[shape.name]
                off = (estimate.poses[i, 2] - truth[i, 3]) % period
                heading.append(math.degrees(min(off, period - off)))
        twin = build_twin(raw, estimate)
        moved = np.linalg.norm(twin.block_poses()[:, :2] - estimate.poses[:, :2], axis=1)
        assert moved.max() < 0.003  # the estimated scene is nearly settled as it stands
        twin.close()
    noise_m, noise_rad = raw.detection_noise
    assert np.mean(position) <= noise_m  # within the 2 mm a detection is told to carry
    assert np.max(position) <= 2.5 * noise_m
    assert np.median(heading) <= 3 * math.degrees(noise_rad)
    env.close()


def test_the_labeller_never_looks():
    """As a labeller (looks=False) the teacher acts on the true state even when its view is
    stale, so a student imitating it learns to act without withdrawing."""
    from simroll.policies.clutter import ClosedLoopTeacher

    env = gym.make("simroll/ClutterRetrieveMedium-v0", image_size=48)
    obs, _ = env.reset(seed=3)
    hidden = obs["objects"].copy()
    hidden[:, 4] = 0.0
    stale = {**obs, "objects": hidden}
    assert int(ClosedLoopTeacher(env).select_action(stale)[0]) == LOOK
    labeller = ClosedLoopTeacher(env, looks=False)
    assert int(labeller.select_action(stale)[0]) != LOOK
    env.close()


@pytest.mark.slow
def test_the_plan_following_labeller_keeps_to_a_plan_that_still_works():
    """With ``follow_plan`` the labeller returns the nominal plan's pushes while they still end
    in a clear grasp from the true state (or, with ``repair_pushes``, in a state the search
    clears within that many more), and the teacher's own re-planned primitive once they do not,
    or once the plan's pushes are spent."""
    from simroll.policies.clutter import ClosedLoopTeacher

    env = gym.make("simroll/ClutterRetrieveMedium-v0", image_size=48)
    obs, _ = env.reset(seed=3)
    raw = env.unwrapped
    labeller = ClosedLoopTeacher(env, looks=False, follow_plan=True)
    mending = ClosedLoopTeacher(env, looks=False, follow_plan=True, repair_pushes=2)
    teacher = labeller.teacher
    length = int(obs["plan_length"])
    plan = [int(p) for p in obs["plan_primitives"][:length]]
    assert plan[-1] == GRASP and length >= 2
    state = raw.get_sim_state()
    assert teacher.plan_holds(state, plan[:-1])  # no pose noise: the twin's plan works
    assert not teacher.plan_holds(state, [])  # the scene starts with no clear grasp
    assert int(labeller.select_action(obs)[0]) == plan[0]

    spent = {**obs, "plan_step": np.array(length - 1)}  # only the grasp is left: re-plans
    assert int(labeller.select_action(spent)[0]) == teacher.label(raw)

    replanned = teacher.label(raw)
    failing = [p for p in range(16) if p != replanned and not teacher.plan_holds(state, [p])]
    mendable = [p for p in failing if teacher.plan_holds(state, [p], repair=2)]
    assert failing and mendable
    for bad, expected in ((failing[0], None), (mendable[0], mendable[0])):
        primitives = np.full_like(obs["plan_primitives"], -1)
        primitives[:2] = [bad, GRASP]
        wrong = {**obs, "plan_primitives": primitives, "plan_length": np.array(2)}
        assert int(labeller.select_action(wrong)[0]) == replanned  # a failing plan is left
        if expected is not None:  # ... unless two more pushes mend it at its end
            assert int(mending.select_action(wrong)[0]) == expected
    with pytest.raises(ValueError, match="plan_primitives"):
        labeller.select_action({"objects": obs["objects"]})
    with pytest.raises(ValueError, match="repair_pushes"):
        ClosedLoopTeacher(env, follow_plan=True, repair_pushes=-1)
    env.close()


def test_the_budget_aware_labeller_keeps_within_the_budgets():
    """With ``budget_aware`` the labeller counts the pushes the episode's travel and primitive
    budgets still pay for before the grasp: it grasps when none is left and re-plans with at most
    those left, leaving a nominal plan that needs more."""
    from simroll.envs.clutter.primitives import PUSH_LENGTH
    from simroll.policies.clutter import ClosedLoopTeacher

    env = gym.make("simroll/ClutterRetrieveMedium-v0", image_size=48)
    obs, _ = env.reset(seed=4)  # a plan of 3 pushes
    raw = env.unwrapped
    labeller = ClosedLoopTeacher(env, looks=False, follow_plan=True, budget_aware=True)
    teacher = labeller.teacher
    length = int(obs["plan_length"])
    # TRACE's budgets: plan length x 4 cm + 15 cm of travel pays for 3 pushes past the plan's
    assert labeller.pushes_left() == length - 1 + 4
    max_travel = env.get_wrapper_attr("max_travel")
    plan = [int(p) for p in obs["plan_primitives"][:length]]
    assert plan[0] != GRASP and int(labeller.select_action(obs)[0]) == plan[0]

    env.set_wrapper_attr("_travel", max_travel - 0.5 * PUSH_LENGTH)  # not one more push
    assert labeller.pushes_left() == 0
    assert int(labeller.select_action(obs)[0]) == GRASP
    env.set_wrapper_attr("_travel", max_travel - 1.5 * PUSH_LENGTH)  # one push left
    assert labeller.pushes_left() == 1
    one = teacher.plan(raw.get_sim_state(), max_pushes=1).primitives[0]
    assert length - 1 > 1  # the plan needs more than is left: re-planned within the budget
    assert int(labeller.select_action(obs)[0]) == one
    env.set_wrapper_attr("_travel", 0.0)
    env.set_wrapper_attr("_primitives", env.get_wrapper_attr("max_primitives") - 1)
    assert labeller.pushes_left() == 0  # the last primitive is the grasp's
    env.close()
