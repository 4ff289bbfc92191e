"""Goal labels for SimVLA's auxiliary target loss: recomputed from each episode's spec, they
equal the target the dataset recorded; the head learns them, ignores unlabelled frames, and a
fine-tune may add the head to a checkpoint trained without one. With ``goal_conditioning`` the
decoder reads the head's estimate: neutral at first, then steering, never training the head."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from simroll.features import ENVIRONMENT_STATE_KEY, ENVIRONMENT_STATE_NAMES
from simroll.rollout.episode import EnvConfig
from simroll.rollout.lerobot_io import open_dataset
from simroll.rollout.runner import make_specs
from simroll.train.goal_labels import GoalLabelError, GoalTable, episode_goals
from simroll.train.trainer import TrainConfig, TrainingDataError, train
from tests.helpers import TINY_VLA, record_expert_dataset

INPUTS = ["observation.state", "observation.tactile"]


@pytest.fixture(scope="module")
def place_dataset(tmp_path_factory):
    """State-mode expert episodes: 3 of SoftPlace, then 1 of SoftLift (no visible target)."""
    root = tmp_path_factory.mktemp("datasets") / "place_state"
    specs = make_specs("soft", ["SoftPlace"], ["sponge"], ["default"], 3, base_seed=40)
    specs += make_specs("soft", ["SoftLift"], ["sponge"], ["default"], 1, base_seed=41)
    return record_expert_dataset(root, specs, EnvConfig(obs_mode="state"))


def test_goal_labels_equal_the_target_each_episode_recorded(place_dataset):
    goals = episode_goals(place_dataset)
    assert sorted(goals) == [0, 1, 2]  # the SoftLift episode has no label
    dataset = open_dataset("simroll/place_state", root=place_dataset)
    goal = [ENVIRONMENT_STATE_NAMES.index("goal_x"), ENVIRONMENT_STATE_NAMES.index("goal_y")]
    for index, label in goals.items():
        start = int(dataset.meta.episodes[index]["dataset_from_index"])
        recorded = dataset[start][ENVIRONMENT_STATE_KEY].numpy()[goal]
        np.testing.assert_allclose(label, recorded, atol=1e-6)
    assert len({goals[i] for i in goals}) == 3  # each seed draws its own target

    table = GoalTable(goals, 4)
    labels, mask = table(torch.tensor([2, 3, 0]))
    assert mask.tolist() == [1.0, 0.0, 1.0]
    np.testing.assert_allclose(labels[0].numpy(), goals[2], atol=1e-6)
    # label_offset: the target minus each frame's hand (x, y); an unlabelled frame stays zero
    state = torch.rand(3, 12)
    offsets, _ = table(torch.tensor([2, 3, 0]), state)
    np.testing.assert_allclose(offsets[0].numpy(), goals[2] - state[0, :2].numpy(), atol=1e-6)
    assert offsets[1].tolist() == [0.0, 0.0]


def test_a_dataset_without_specs_is_refused_naming_the_file(tmp_path):
    (tmp_path / "meta").mkdir()
    with pytest.raises(GoalLabelError, match="simroll_episodes.jsonl is missing"):
        episode_goals(tmp_path)


def _config(root, out, **kwargs) -> TrainConfig:
    return TrainConfig(
        str(root),
        str(out),
        "simvla",
        INPUTS,
        {**TINY_VLA, "goal_loss_weight": 1.0},
        steps=60,
        batch_size=16,
        log_every=20,
        checkpoint_every=60,
        threads=1,
        **kwargs,
    )


def test_the_goal_head_learns_and_can_be_added_to_a_checkpoint_without_one(place_dataset, tmp_path):
    plain = _config(place_dataset, tmp_path / "plain")
    plain.policy_overrides = dict(TINY_VLA)
    assert "first_goal_loss" not in train(plain, progress=False)

    added = _config(
        place_dataset, tmp_path / "added", init_from=str(tmp_path / "plain/checkpoints/last")
    )
    summary = train(added, progress=False)
    assert summary["final_goal_loss"] < 0.75 * summary["first_goal_loss"]
    config = json.loads((tmp_path / "added/checkpoints/last/config.json").read_text())
    assert config["goal_loss_weight"] == 1.0

    wider = _config(place_dataset, tmp_path / "wider", init_from=added.init_from)
    wider.policy_overrides = {**wider.policy_overrides, "dim_model": 64}
    with pytest.raises(TrainingDataError, match="does not fit the simvla recipe"):
        train(wider, progress=False)


def _tiny_model(**overrides):
    from lerobot.configs import FeatureType, PolicyFeature

    from simroll.policies.vla.configuration_simvla import SimVLAConfig
    from simroll.policies.vla.modeling_simvla import SimVLAModel

    config = SimVLAConfig(**{**TINY_VLA, "goal_loss_weight": 1.0, **overrides})
    config.input_features = {"observation.state": PolicyFeature(FeatureType.STATE, (12,))}
    config.output_features = {"action": PolicyFeature(FeatureType.ACTION, (5,))}
    return SimVLAModel(config)


def test_goal_conditioning_starts_neutral_and_then_steers_the_actions():
    from lerobot.utils.constants import ACTION

    from simroll.features import GOAL_LABEL_KEY, GOAL_MASK_KEY

    torch.manual_seed(0)
    plain = _tiny_model()
    with torch.no_grad():  # a trained output layer (a fresh one is zero: no gradient reaches in)
        plain.action_out.weight.normal_()
    conditioned = _tiny_model(goal_conditioning=True)
    missing = conditioned.load_state_dict(plain.state_dict(), strict=False).missing_keys
    assert sorted(missing) == ["goal_in.bias", "goal_in.weight"]
    batch = {"observation.state": torch.randn(3, 12), "task": ["put it on the green disc"] * 3}
    noise = torch.randn(3, TINY_VLA["chunk_size"], 5)
    plain.eval(), conditioned.eval()
    # a zero map: the added decoder input changes nothing until it is trained
    assert torch.equal(conditioned.sample(batch, noise), plain.sample(batch, noise))

    # the action loss does not reach the head (its estimate is detached), but it trains the map
    batch.update({ACTION: torch.randn(3, TINY_VLA["chunk_size"], 5)})
    batch.update({GOAL_LABEL_KEY: torch.zeros(3, 2), GOAL_MASK_KEY: torch.ones(3)})
    errors, _ = conditioned.loss(batch)
    errors.mean().backward()
    assert all(p.grad is None or not p.grad.any() for p in conditioned.goal_head.parameters())
    assert conditioned.goal_in.weight.grad.abs().sum() > 0

    with torch.no_grad():  # once the map is non-zero, the head's estimate moves the actions
        conditioned.goal_in.weight.normal_()
        before = conditioned.sample(batch, noise)
        conditioned.goal_head[-1].bias.add_(1.0)
        assert not torch.allclose(conditioned.sample(batch, noise), before)


def test_goal_conditioning_without_the_head_is_refused():
    from simroll.policies.vla.configuration_simvla import SimVLAConfig

    with pytest.raises(ValueError, match="goal_conditioning needs the goal head"):
        SimVLAConfig(goal_conditioning=True)
    with pytest.raises(ValueError, match="goal_conditioning must be true or false, got 'yes'"):
        SimVLAConfig(goal_loss_weight=1.0, goal_conditioning="yes")


def test_unlabelled_samples_do_not_move_the_goal_loss():
    from simroll.features import GOAL_LABEL_KEY, GOAL_MASK_KEY

    torch.manual_seed(0)
    model = _tiny_model()
    context, mask = (
        torch.randn(4, 3, TINY_VLA["dim_model"]),
        torch.ones(4, 1, 1, 3, dtype=torch.bool),
    )
    batch = {GOAL_LABEL_KEY: torch.randn(4, 2) * 0.1, GOAL_MASK_KEY: torch.tensor([1.0, 0, 1, 0])}
    predicted = model.predict_goal(context, mask)
    first = model.goal_error(predicted, batch)
    batch[GOAL_LABEL_KEY][1] = 100.0  # an unlabelled sample's label is never read
    assert torch.equal(model.goal_error(predicted, batch), first)
    batch[GOAL_LABEL_KEY][0] = 100.0
    assert model.goal_error(predicted, batch) > first


def test_goal_loss_on_a_dataset_without_targets_is_refused(lift_dataset, tmp_path):
    with pytest.raises(TrainingDataError, match=r"needs episodes of \['SoftPlace'\]"):
        train(_config(lift_dataset, tmp_path / "out"), progress=False)


@pytest.mark.parametrize("value", [-1.0, True])
def test_bad_goal_loss_weights_are_refused(value):
    from simroll.policies.vla.configuration_simvla import SimVLAConfig

    with pytest.raises(ValueError, match="goal_loss_weight must be a number >= 0"):
        SimVLAConfig(goal_loss_weight=value)


def test_the_label_source_reads_the_true_target_not_the_estimate():
    from simroll.features import GOAL_LABEL_KEY, GOAL_MASK_KEY

    torch.manual_seed(0)
    model = _tiny_model(goal_conditioning=True, goal_source="label")
    with torch.no_grad():
        model.action_out.weight.normal_()
        model.goal_in.weight.normal_()
    model.eval()
    batch = {
        "observation.state": torch.randn(2, 12),
        "task": ["put it on the green disc"] * 2,
        GOAL_LABEL_KEY: torch.tensor([[0.1, -0.05], [0.0, 0.12]]),
        GOAL_MASK_KEY: torch.tensor([1.0, 0.0]),
    }
    noise = torch.randn(2, TINY_VLA["chunk_size"], 5)
    before = model.sample(batch, noise)
    with torch.no_grad():  # the head's estimate is not what the decoder reads
        model.goal_head[-1].bias.add_(1.0)
    assert torch.equal(model.sample(batch, noise), before)
    moved = {**batch, GOAL_LABEL_KEY: batch[GOAL_LABEL_KEY] + 0.05}
    after = model.sample(moved, noise)
    assert not torch.allclose(after[0], before[0])  # the labelled sample's target steers it
    assert torch.equal(after[1], before[1])  # an unlabelled sample's target is never read

    with pytest.raises(ValueError, match=r"goal_source='label' needs the target in the batch"):
        model.sample({"observation.state": batch["observation.state"], "task": batch["task"]})


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"goal_conditioning": True, "goal_source": "oracle"}, "goal_source must be one of"),
        ({"goal_source": "label"}, "goal_source='label' feeds the target to the decoder"),
    ],
)
def test_bad_goal_sources_are_refused(fields, message):
    from simroll.policies.vla.configuration_simvla import SimVLAConfig

    with pytest.raises(ValueError, match=message):
        SimVLAConfig(goal_loss_weight=1.0, **fields)


@pytest.mark.parametrize("source", ["label", "label_offset"])
def test_a_label_reading_checkpoint_is_given_each_episodes_target(place_dataset, tmp_path, source):
    from simroll.features import GOAL_LABEL_KEY, GOAL_MASK_KEY
    from simroll.policies.lerobot import PolicyLoadError, env_goal, load_policy

    config = _config(place_dataset, tmp_path / source)
    config.policy_overrides = {
        **config.policy_overrides,
        "goal_conditioning": True,
        "goal_source": source,
    }
    config.steps, config.checkpoint_every = 20, 20
    train(config, progress=False)
    checkpoint = tmp_path / source / "checkpoints/last"
    for task, labelled in (("SoftPlace", 1.0), ("SoftLift", 0.0)):
        (spec,) = make_specs("soft", [task], ["sponge"], ["default"], 1, base_seed=7)
        env = EnvConfig(obs_mode="state").make(spec)
        try:
            policy = load_policy(env, checkpoint)
            seen = []
            plan = policy.policy.predict_action_chunk

            def recorded(batch, plan=plan, seen=seen, **kwargs):
                seen.append((batch[GOAL_LABEL_KEY].clone(), batch[GOAL_MASK_KEY].clone()))
                return plan(batch, **kwargs)

            policy.policy.predict_action_chunk = recorded
            for seed in (spec.seed, spec.seed + 1):  # a new episode's target is the one used
                obs, _ = env.reset(seed=seed)
                policy.reset()
                policy.select_action(obs)
                target, mask = seen[-1]
                expected = env.unwrapped.goal_position()[:2]
                if source == "label_offset":  # from the hand the observation shows
                    expected = expected - obs["agent_pos"][:2]
                np.testing.assert_allclose(target[0].numpy(), expected, atol=1e-6)
                assert mask.tolist() == [labelled]
            if labelled:
                assert not torch.equal(seen[0][0], seen[1][0])
        finally:
            env.close()

    other = gym.make("CartPole-v1")  # an env without a task target
    with pytest.raises(PolicyLoadError, match=r"only simroll's task envs give.*CartPoleEnv"):
        env_goal(other, checkpoint)
