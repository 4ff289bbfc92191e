"""The TRACE student (LeRobot type ``trace_student``): it learns the labelled primitives of a
recorded clutter dataset, runs in the episode engine as an ordinary simroll policy, and reloads
to the same actions."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from simroll.envs.clutter.primitives import NAMES
from simroll.policies.clutter import NominalReplay
from simroll.policies.lerobot import load_policy
from simroll.policies.trace import TraceStudentConfig
from simroll.rollout.dataset import DatasetRecorder
from simroll.rollout.episode import EnvConfig, run_episode
from simroll.rollout.records import EpisodeSpec
from simroll.train.trainer import TrainConfig, train

INPUTS = [
    "observation.objects",
    "observation.plan_primitives",
    "observation.plan_poses",
    "observation.plan_length",
    "observation.plan_step",
    "observation.grasp_check",
    "observation.state",
]
SEEDS = (3, 5, 8)
ENV = EnvConfig(obs_mode="full", gripper_mode="delta", image_size=48)


def spec(seed: int) -> EpisodeSpec:
    return EpisodeSpec(task="ClutterRetrieveMedium", object="cuboid", seed=seed, suite="clutter")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A student trained on replayed plans of three scenes (labels: the plans' primitives)."""
    root = tmp_path_factory.mktemp("trace")
    env = ENV.make(spec(SEEDS[0]))
    with DatasetRecorder(
        root / "data", env.observation_space, action_space=env.action_space
    ) as recorder:
        for seed in SEEDS:
            record, kept = recorder.record(spec(seed), lambda e: NominalReplay(e), env=env)
            assert kept and record.error is None
    env.close()
    torch.set_num_threads(1)
    summary = train(
        TrainConfig(
            dataset_root=str(root / "data"),
            output_dir=str(root / "run"),
            policy_type="trace_student",
            input_features=INPUTS,
            steps=120,
            batch_size=8,
            log_every=20,
            checkpoint_every=120,
        ),
        progress=False,
    )
    return root / "run" / "checkpoints" / "last", summary


def test_it_learns_the_labelled_primitives(trained):
    _, summary = trained
    assert summary["final_loss"] < 0.2 * summary["first_loss"]


def test_it_runs_in_the_engine_and_reloads_to_the_same_actions(trained):
    checkpoint, _ = trained
    records, actions = [], []
    for _ in range(2):
        taken = []

        def factory(env, taken=taken):
            policy = load_policy(env, path=str(checkpoint))
            select = policy.select_action

            def recording(obs):
                action = select(obs)
                taken.append(action.copy())
                return action

            policy.select_action = recording
            return policy

        records.append(run_episode(spec(SEEDS[0]), factory, env_config=ENV))
        actions.append(taken)
    assert records[0].error is None, records[0].error
    flat = np.concatenate(actions[0])
    assert flat.shape == (records[0].steps,)
    assert np.all(flat == np.round(flat)) and 0 <= flat.min() and flat.max() < len(NAMES)
    np.testing.assert_array_equal(np.concatenate(actions[1]), flat)  # a reload acts the same
    assert records[0].success == records[1].success


def test_it_names_the_features_it_misses():
    from lerobot.configs import FeatureType, PolicyFeature

    config = TraceStudentConfig()
    config.input_features = {"observation.state": PolicyFeature(FeatureType.STATE, (12,))}
    with pytest.raises(ValueError, match="observation.objects"):
        config.validate_features()


def test_the_environment_refuses_a_5d_policy_for_primitives(trained):
    """The shape check knows a Discrete env takes one primitive, not the 5-D hand action."""
    from simroll.policies.lerobot import PolicyLoadError, check_compatible

    env = gym.make("simroll/ClutterRetrieveMedium-v0", image_size=48)
    config = {"input_features": {}, "output_features": {"action": {"shape": [5]}}}
    with pytest.raises(PolicyLoadError, match=r"this env takes \(1,\)"):
        check_compatible(config, env.observation_space, trained[0], env.action_space)
    env.close()


def test_lerobot_resolves_the_student_through_the_plugin():
    """``lerobot-train --policy.type=trace_student``: the installed policy plugin registers the
    type and LeRobot's factory finds the policy class and its processors by naming convention."""
    lerobot_policy_simvla = pytest.importorskip("lerobot_policy_simvla")
    from lerobot.policies.factory import get_policy_class, make_policy_config

    assert get_policy_class("trace_student") is lerobot_policy_simvla.TraceStudentPolicy
    config = make_policy_config("trace_student", device="cpu")
    assert isinstance(config, TraceStudentConfig)
    with pytest.raises(ValueError, match="observation.objects"):
        config.validate_features()  # no dataset features yet: it names what it reads


def test_the_grasp_gate_holds_a_grasp_the_check_does_not_clear(trained):
    """With ``grasp_gate`` a most-likely grasp becomes the most likely other primitive unless
    the observation's grasp_check is clear or the travel budget pays for no more push."""
    from simroll.features import GRASP_PRIMITIVE as GRASP
    from simroll.policies.trace.modeling_trace import TraceStudentPolicy

    path, _ = trained
    config = TraceStudentConfig.from_pretrained(path)
    config.grasp_gate = True
    policy = TraceStudentPolicy(config)
    logits = torch.zeros(4, config.n_primitives)
    logits[:, GRASP], logits[:, 5] = 2.0, 1.0  # grasp first, push 5 second
    batch = {
        "observation.grasp_check": [[1, 0.01, 0], [0, 0, 0.01], [0, 0, 0.01], [0, 0, 0.01]],
        "observation.plan_length": [3, 3, 3, 3],
        # spare pushes: the plan's 2 pushes + 4 the budget pays for beyond them
        "observation.plan_step": [2, 2, 6, 5],
    }
    batch = {key: torch.tensor(value).float()[:, None] for key, value in batch.items()}
    chosen = policy.choose(logits, batch).tolist()
    assert chosen == [GRASP, 5, GRASP, 5]  # clear / held / budget spent / one push left
    config.grasp_gate = False
    assert TraceStudentPolicy(config).choose(logits, batch).tolist() == [GRASP] * 4

    blind = TraceStudentConfig.from_pretrained(path)
    blind.grasp_gate = True
    blind.input_features.pop("observation.grasp_check")
    with pytest.raises(ValueError, match="grasp_gate needs observation.grasp_check"):
        TraceStudentPolicy(blind)


def test_the_shipped_student_loads_gated_and_runs_an_episode():
    """policies/trace_clutter_dagger (policy=trace_student's checkpoint) loads with its grasp
    gate on and plays a scene to its end without error."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "policies" / "trace_clutter_dagger"
    assert TraceStudentConfig.from_pretrained(path).grasp_gate is True
    config = EnvConfig(obs_mode="full", gripper_mode="delta", image_size=96)
    record = run_episode(spec(11), lambda env: load_policy(env, path), env_config=config)
    assert record.error is None and record.steps >= 1
    assert record.termination_reason in ("success", "grasp_failed", "budget")
