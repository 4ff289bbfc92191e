"""Plan-conditioned clutter retrieval: the plan joins the observation and sets the budgets, one
grasp per episode, the stressors do what they say, and the episode engine records the costs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from simroll.envs.clutter.planned import BUDGET_PRIMITIVES, BUDGET_TRAVEL, MAX_PLAN
from simroll.envs.clutter.primitives import GRASP, PUSH_LENGTH
from simroll.envs.clutter.retrieve import OBJECT_FIELDS
from simroll.policies.clutter import NominalReplay
from simroll.rollout.episode import EnvConfig, run_episode
from simroll.rollout.records import EpisodeSpec

SEED = 3  # a medium scene whose plan is short (fast to make)


@pytest.fixture
def planned():
    envs = []

    def make(tier="Medium", **kwargs):
        env = gym.make(f"simroll/ClutterRetrieve{tier}-v0", image_size=64, **kwargs)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


def test_the_plan_joins_every_observation_and_sets_the_budgets(planned):
    env = planned()
    obs, info = env.reset(seed=SEED)
    length = int(obs["plan_length"])
    assert 1 <= length <= MAX_PLAN and info["plan_length"] == length
    plan = obs["plan_primitives"]
    assert plan[length - 1] == GRASP and (plan[length:] == -1).all()
    assert obs["plan_poses"].shape == (MAX_PLAN, 11, 4)
    assert env.get_wrapper_attr("max_primitives") == length + BUDGET_PRIMITIVES
    travel = env.get_wrapper_attr("max_travel")
    assert travel == pytest.approx(length * PUSH_LENGTH + BUDGET_TRAVEL)
    assert int(obs["plan_step"]) == 0
    next_obs, *_ = env.step(int(plan[0]))
    np.testing.assert_array_equal(next_obs["plan_primitives"], plan)  # fixed for the episode
    assert int(next_obs["plan_step"]) == 1


def test_replay_runs_the_plan_and_one_grasp_ends_the_episode(planned):
    env = planned()
    obs, _ = env.reset(seed=SEED)
    policy = NominalReplay()
    policy.reset()
    steps = 0
    while True:
        obs, reward, terminated, truncated, info = env.step(policy.select_action(obs))
        steps += 1
        if terminated or truncated:
            break
    assert steps == int(obs["plan_length"])  # the grasp ended it, success or not
    assert info["termination_reason"] in ("success", "grasp_failed")
    metrics = info["episode_metrics"]
    assert metrics["primitives"] == steps and metrics["withdrawals"] == 1
    assert metrics["execution_time"] > 0 and metrics["plan_length"] == steps


def test_pose_noise_moves_the_blocks_the_plan_was_made_from(planned):
    clean, noisy = planned(), planned()
    clean.reset(seed=SEED)
    noisy.reset(seed=SEED, options={"variation": "pose_noise"})
    a, b = clean.unwrapped.block_poses(), noisy.unwrapped.block_poses()
    shift = np.linalg.norm(a[:, :2] - b[:, :2], axis=1)
    assert shift.max() > 5e-4  # the blocks moved...
    assert shift.max() < 0.012  # ...by the noise and the settling it caused, not more
    # the plan is the same: it was made from the first frame, before the noise
    np.testing.assert_array_equal(
        clean.reset(seed=SEED)[0]["plan_primitives"],
        noisy.reset(seed=SEED, options={"variation": "pose_noise"})[0]["plan_primitives"],
    )


def test_detection_dropout_loses_detections():
    env = gym.make("simroll/ClutterRetrieve-v0", obs_mode="full", image_size=48)
    visible = OBJECT_FIELDS.index("visible")
    rates = {}
    for variation in ("default", "detection_dropout"):
        seen = []
        env.reset(seed=0, options={"variation": variation})
        for _ in range(30):
            obs, *_ = env.step(np.array([0, 0, 0, 0, -1], dtype=np.float32))
            seen.append(obs["objects"][:, visible])
        rates[variation] = float(np.mean(seen))
    env.close()
    assert rates["default"] == 1.0  # the hand is out of view: everything is seen
    assert 0.8 < rates["detection_dropout"] < 0.97  # about 10% lost


def test_the_engine_records_the_primitive_costs():
    spec = EpisodeSpec(task="ClutterRetrieveMedium", object="cuboid", seed=SEED, suite="clutter")
    config = EnvConfig(obs_mode="full", gripper_mode="delta", image_size=64)
    record = run_episode(spec, lambda env: NominalReplay(env), env_config=config)
    assert record.error is None, record.error
    assert record.steps == record.extra["primitives"] == record.extra["plan_length"]
    assert record.sim_time == record.extra["execution_time"] > record.steps / 20
    assert record.extra["withdrawals"] == 1 and record.extra["travel_m"] >= 0


def test_a_video_films_every_control_step_of_the_primitives(tmp_path):
    import av

    from simroll.rollout.video import VideoObserver

    spec = EpisodeSpec(task="ClutterRetrieveMedium", object="cuboid", seed=SEED, suite="clutter")
    config = EnvConfig(obs_mode="full", gripper_mode="delta", image_size=64)
    video = VideoObserver(tmp_path / "episode.mp4", (64, 48), 20)
    record = run_episode(spec, lambda env: NominalReplay(env), env_config=config, observers=[video])
    assert record.error is None, record.error
    with av.open(str(tmp_path / "episode.mp4")) as container:
        frames = sum(1 for _ in container.decode(video=0))
    assert frames > 10 * record.steps  # one per control step: a primitive takes tens of them


@pytest.mark.parametrize("target", ["cuboid", pytest.param("sponge", marks=pytest.mark.slow)])
def test_the_same_seed_gives_the_same_episode_on_every_backend(tmp_path, target):
    """Scene, twin, plan, pose noise and detections all come from the spec's seed: the local
    and the vector backend record the same episode (equal receipts), with a rigid target and
    with a soft one."""
    import simroll

    receipts = {}
    for backend in ("local", "vector"):
        result = simroll.evaluate(
            "clutter_replay",
            tasks=["ClutterRetrieveMedium"],
            objects=[target],
            variations=["pose_noise"],
            episodes=1,
            seed=SEED,
            suite="clutter",
            obs_mode="full",
            image_size=64,
            gripper_mode="delta",
            backend=backend,
            workers=1,
            output_dir=tmp_path / backend,
            progress=False,
        )
        assert result.errors == 0
        receipts[backend] = [record.receipt for record in result.records]
    assert receipts["local"] == receipts["vector"]


def test_clutter_episodes_record_as_a_lerobot_dataset(tmp_path):
    """The plan, the partial observation and the primitive actions reach a LeRobotDataset that
    LeRobot loads (depth and segmentation are not stored)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from simroll.features import OBJECTS_KEY, PLAN_KEYS
    from simroll.rollout.dataset import DatasetRecorder

    spec = EpisodeSpec(task="ClutterRetrieveMedium", object="cuboid", seed=SEED, suite="clutter")
    env = gym.make("simroll/ClutterRetrieveMedium-v0", image_size=48)
    with DatasetRecorder(
        tmp_path / "ds", env.observation_space, action_space=env.action_space
    ) as recorder:
        record, kept = recorder.record(spec, lambda e: NominalReplay(e), env=env)
    assert kept and record.error is None
    obs, _ = env.reset(seed=SEED)
    env.close()
    dataset = LeRobotDataset("simroll/test", root=tmp_path / "ds")
    assert dataset.num_frames == record.steps == int(obs["plan_length"])
    assert {OBJECTS_KEY, *PLAN_KEYS.values()} <= set(dataset.features)
    assert not any("depth" in key or "segmentation" in key for key in dataset.features)
    actions = [int(dataset[i]["action"]) for i in range(dataset.num_frames)]
    assert actions == [int(a) for a in obs["plan_primitives"][: dataset.num_frames]]
    np.testing.assert_array_equal(
        dataset[0][PLAN_KEYS["plan_primitives"]].numpy(), obs["plan_primitives"]
    )


def test_a_blackout_hides_every_block_for_its_primitives(planned):
    env = planned()
    obs, _ = env.reset(seed=SEED, options={"variation": "blackout"})
    window = env.get_wrapper_attr("_blackout")
    assert len(window) == 5 and window.start < int(obs["plan_length"])
    visible = OBJECT_FIELDS.index("visible")
    seen = []
    for _ in range(window.stop + 1):
        obs, _, terminated, truncated, _ = env.step(17)  # look: unoccluded, unless blacked out
        seen.append(obs["objects"][:, visible].copy())
        assert not (terminated or truncated)
    for step, flags in enumerate(seen):
        if step in window:
            assert not flags.any(), step
        else:
            assert flags.any(), step


def test_the_grasp_check_is_the_grasp_primitives_own_on_the_detections(planned):
    """``grasp_check`` is what the grasp primitive would find in the observation's detections:
    blocked at reset (scenes start with no clear grasp), clear once the plan's pushes ran in a
    world that matches the twin (true poses, no noise)."""
    from simroll.envs.clutter.primitives import (
        choose_grasp_yaw,
        detected_footprints,
        detections,
        grasp_check,
    )

    env = planned(obs_mode="state")
    obs, _ = env.reset(seed=SEED)
    shapes = env.unwrapped.layout.shapes
    check = obs["grasp_check"]
    assert env.observation_space["grasp_check"].contains(check)
    assert check[0] == 0.0 and check[2] > 0.0  # blocked: the pads would overlap clutter
    length = int(obs["plan_length"])
    for push in obs["plan_primitives"][: length - 1]:
        obs, *_ = env.step(int(push))
    check = obs["grasp_check"]
    rows = detections(obs)
    np.testing.assert_array_equal(check, grasp_check(rows, shapes))
    assert check[0] == 1.0 and check[2] == 0.0 and check[1] > 0.0
    assert choose_grasp_yaw(detected_footprints(rows, shapes))[1]
