"""SimVLA: trains through simroll's trainer, reloads exactly, listens to the instruction, and its
acceleration knobs (fewer flow steps, token pruning, int8, longer action runs) still act."""

from __future__ import annotations

import importlib.metadata
from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest
import torch

import simroll.envs  # noqa: F401
from simroll.envs.core import AGENT_POS_DIM
from simroll.features import FOLLOWING_ERROR_KEY, dataset_features, observation_frame
from simroll.policies.lerobot import PolicyLoadError, load_policy
from simroll.train.trainer import TrainConfig, train
from tests.helpers import TINY_VLA, plain_lerobot_action
from tests.helpers import VLA_INPUTS as INPUTS

IMAGE_SIZE = 32
TASKS = ("pick up the sponge and lift it gently", "squeeze the sponge firmly but carefully")


@pytest.fixture(scope="module")
def env():
    env = gym.make("simroll/SoftLift-v0", object="sponge", obs_mode="full", image_size=IMAGE_SIZE)
    yield env
    env.close()


def synthetic_observation(rng: np.random.Generator, state: np.ndarray, task: str) -> dict:
    """A simroll observation with random pixels and touch (what the recorder turns into frames)."""
    return {
        "pixels": {
            camera: rng.integers(0, 256, (IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
            for camera in ("scene", "wrist")
        },
        "tactile": {
            "force": (rng.random((2, 16, 12)) * 0.02).astype(np.float32),
            "markers": np.zeros((2, 99, 2), np.float32),
        },
        "agent_pos": state.astype(np.float32),
        "following_error": (rng.normal(size=5) * 0.002).astype(np.float32),
        "task_description": task,
    }


@pytest.fixture(scope="module")
def vla_dataset(env, tmp_path_factory):
    """Two instructions whose actions differ for the same kind of observation: the dz and grip
    commands follow the instruction, dx follows the hand's x (a smooth drift per episode)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    root = tmp_path_factory.mktemp("datasets") / "vla_synthetic"
    features = dataset_features(env.observation_space, use_videos=False, with_tactile_image=False)
    dataset = LeRobotDataset.create(
        "simroll/vla_synthetic", fps=20, features=features, root=root, use_videos=False
    )
    rng = np.random.default_rng(0)
    for episode in range(6):
        task = TASKS[episode % 2]
        sign = 1.0 if episode % 2 == 0 else -1.0
        start = rng.uniform(-0.5, 0.5, AGENT_POS_DIM)
        for step in range(16):
            state = start + 0.02 * step
            frame = observation_frame(synthetic_observation(rng, state, task), None)
            frame["action"] = np.array(
                [np.tanh(state[0]), 0.0, 0.6 * sign, 0.0, -0.8 * sign], dtype=np.float32
            )
            frame["eval.deformation"] = np.zeros(1, np.float32)
            frame["task"] = task
            dataset.add_frame(frame)
        dataset.save_episode(parallel_encoding=False)
    dataset.finalize()
    return root


@pytest.fixture(scope="module")
def trained(vla_dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("train_vla")
    summary = train(
        TrainConfig(
            str(vla_dataset),
            str(out),
            "simvla",
            INPUTS,
            TINY_VLA,
            steps=40,
            batch_size=16,
            log_every=10,
            checkpoint_every=40,
            threads=1,
        ),
        progress=False,
    )
    return out / "checkpoints" / "last", summary


@pytest.fixture(scope="module")
def observation(env):
    obs, _ = env.reset(seed=3)
    return obs


def test_training_through_the_simroll_trainer_reduces_the_flow_loss(trained):
    checkpoint, summary = trained
    assert summary["policy_type"] == "simvla" and summary["parameters"] > 0
    assert summary["final_loss"] < 0.7 * summary["first_loss"]
    for name in ("config.json", "model.safetensors", "policy_preprocessor.json"):
        assert (checkpoint / name).is_file()


def test_checkpoint_reloads_to_identical_action_chunks(trained, env, observation):
    checkpoint, _ = trained
    chunks = []
    for _ in range(2):
        policy = load_policy(env, checkpoint)
        torch.manual_seed(0)  # the flow's starting noise
        chunks.append(policy.predict_action_chunk(observation))
    assert chunks[0].shape == (TINY_VLA["chunk_size"], 5)
    np.testing.assert_array_equal(chunks[0], chunks[1])
    torch.manual_seed(1)
    assert not np.array_equal(chunks[0], policy.predict_action_chunk(observation))


def test_zero_noise_scale_makes_the_chunk_a_function_of_the_observation(trained, env, observation):
    policy = load_policy(env, trained[0], overrides={"noise_scale": 0.0})
    chunks = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        chunks.append(policy.predict_action_chunk(observation))
    np.testing.assert_array_equal(chunks[0], chunks[1])
    # Half the noise: seed-dependent still, but nearer the deterministic chunk than full noise.
    spread = {}
    for scale in (0.5, 1.0):
        policy = load_policy(env, trained[0], overrides={"noise_scale": scale})
        torch.manual_seed(1)
        spread[scale] = np.abs(policy.predict_action_chunk(observation) - chunks[0]).mean()
    assert 0 < spread[0.5] < spread[1.0], spread


def test_several_action_samples_act_on_the_mean_of_their_chunks(trained, env, observation):
    policy = load_policy(env, trained[0], overrides={"num_action_samples": 3})
    batch = policy.preprocessor(policy.batch(observation))
    model = policy.policy.model
    shape = (3, TINY_VLA["chunk_size"], 5)
    noise = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    mean = policy.policy.predict_action_chunk(batch, noise=noise)
    model.config.num_action_samples = 1  # each row's own chunk, one flow at a time
    singles = [policy.policy.predict_action_chunk(batch, noise=row[None]) for row in noise]
    assert mean.shape == (1, *shape[1:])
    torch.testing.assert_close(mean, torch.stack(singles).mean(dim=0), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(singles[0], singles[1])  # the samples differ; the mean is not one
    model.config.num_action_samples = 3
    with pytest.raises(ValueError, match="num_action_samples"):
        policy.policy.predict_action_chunk(batch, noise=noise[:2])
    policy.reset()  # the compute proxy counts each sample's flow steps, though they run batched
    policy.predict_action_chunk(observation)
    assert policy.network_evaluations == 3 * model.config.num_flow_steps


def test_an_ensemble_of_checkpoints_replays_under_one_seed_and_averages_its_members(trained, env):
    from simroll.policies.ensemble import ensemble_policy

    member = lambda env: load_policy(env, trained[0])  # noqa: E731 - a policy factory
    runs = []
    for _ in range(2):
        policy = ensemble_policy(env, [member, member])
        obs, _ = env.reset(seed=3)
        policy.reset()
        torch.manual_seed(0)  # what the episode engine does at each episode's start
        actions = []
        for _ in range(3):
            actions.append(policy.select_action(obs))
            obs, *_ = env.step(actions[-1])
        runs.append(np.stack(actions))
    np.testing.assert_array_equal(runs[0], runs[1])
    # the members drew different noise, one after the other, from the same seeded stream
    single = load_policy(env, trained[0])
    obs, _ = env.reset(seed=3)
    single.reset()
    torch.manual_seed(0)
    first = single.select_action(obs)
    single.reset()
    second = single.select_action(obs)
    np.testing.assert_allclose(runs[0][0], (first + second) / 2, atol=1e-5)
    # 3 steps at 2 actions per chunk: 2 chunks per member, each a flow of num_flow_steps passes
    assert policy.network_evaluations == 2 * 2 * single.policy.config.num_flow_steps


def test_temporal_ensembling_averages_the_chunks_covering_each_step(trained, env):
    # uniform weights (coefficient 0); zero noise makes each chunk a function of its observation
    settings = {"temporal_ensemble_coeff": 0.0, "n_action_steps": 1, "noise_scale": 0.0}
    policy = load_policy(env, trained[0], overrides=settings)
    assert not policy.owns_queue  # LeRobot's select_action (the ensembler) is called every step
    obs, _ = env.reset(seed=3)
    policy.reset()
    batches, actions = [], []
    for _ in range(3):
        batches.append(policy.preprocessor(policy.batch(obs)))
        actions.append(policy.select_action(obs))
        obs, *_ = env.step(actions[-1])
    chunks = [policy.policy.predict_action_chunk(batch)[0] for batch in batches]
    for step, action in enumerate(actions):  # chunk k predicted step k + i at its index i
        mean = torch.stack([chunks[k][step - k] for k in range(step + 1)]).mean(dim=0)
        expected = np.clip(policy.postprocessor(mean[None])[0].numpy(), -1.0, 1.0)
        np.testing.assert_allclose(action, expected, atol=1e-5)
    assert (
        np.abs(actions[2] - np.clip(policy.postprocessor(chunks[2][:1])[0].numpy(), -1, 1)).max()
        > 1e-4
    )


def test_the_instruction_changes_the_action_chunk(trained, env, observation):
    policy = load_policy(env, checkpoint := trained[0])
    chunks = {}
    for task in TASKS:
        torch.manual_seed(0)
        chunks[task] = policy.predict_action_chunk({**observation, "task_description": task})
    lift, squeeze = chunks[TASKS[0]], chunks[TASKS[1]]
    assert np.abs(lift - squeeze).max() > 1e-3
    # Trained on instruction-dependent demonstrations, the grip follows the instruction.
    assert lift[:, 4].mean() < squeeze[:, 4].mean(), (checkpoint, lift, squeeze)


@pytest.mark.parametrize(
    "overrides",
    [
        {"num_flow_steps": 1},
        {"keep_visual_tokens": 2},
        {"quantize_int8": True},
        {"n_action_steps": 4},
        {"num_flow_steps": 2, "keep_visual_tokens": 1, "quantize_int8": True},
    ],
    ids=["1-flow-step", "prune-visual", "int8", "long-runs", "all"],
)
def test_acceleration_knobs_give_finite_actions_in_the_env(trained, env, overrides):
    policy = load_policy(env, trained[0], overrides=overrides)
    for key, value in overrides.items():
        assert getattr(policy.policy.config, key) == value
    calls = 0
    predict = policy.policy.predict_action_chunk

    def counting(*args, **kwargs):
        nonlocal calls
        calls += 1
        return predict(*args, **kwargs)

    policy.policy.predict_action_chunk = counting
    obs, _ = env.reset(seed=5)
    policy.reset()
    for _ in range(4):
        action = policy.select_action(obs)
        assert action.shape == (5,) and np.all(np.isfinite(action)) and np.all(np.abs(action) <= 1)
        obs, *_ = env.step(action)
    assert calls == 4 // policy.policy.config.n_action_steps


def test_int8_quantization_replaces_the_linear_layers_and_refuses_to_save(trained, env, tmp_path):
    from simroll.policies.vla.modeling_simvla import QuantizedPolicyError

    policy = load_policy(env, trained[0], overrides={"quantize_int8": True}).policy
    quantized = torch.ao.nn.quantized.dynamic.Linear
    assert any(isinstance(module, quantized) for module in policy.modules())
    assert not any(type(module) is torch.nn.Linear for module in policy.modules())
    with pytest.raises(QuantizedPolicyError):
        policy.save_pretrained(tmp_path / "int8")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"n_action_steps": 5}, "n_action_steps"),
        ({"num_flow_steps": 0}, "num_flow_steps"),
        ({"keep_visual_tokens": 5}, "keep_visual_tokens"),
        ({"noise_scale": -0.5}, "noise_scale"),
        ({"temporal_ensemble_coeff": 0.01, "n_action_steps": 2}, "temporal_ensemble_coeff"),
        ({"noise_scale": "low"}, "noise_scale"),
        ({"num_action_samples": 0}, "num_action_samples"),
    ],
)
def test_impossible_knob_settings_are_refused_at_load(trained, env, overrides, message):
    with pytest.raises(PolicyLoadError, match=message):
        load_policy(env, trained[0], overrides=overrides)


def test_lerobot_resolves_simvla_through_the_plugin():
    import lerobot_policy_simvla
    from lerobot.configs import FeatureType, PolicyFeature
    from lerobot.policies.factory import (
        get_policy_class,
        make_policy_config,
        make_pre_post_processors,
    )

    assert (
        importlib.metadata.distribution("lerobot_policy_simvla")
        .metadata["Name"]
        .startswith("lerobot_policy_")
    )  # the prefix LeRobot's register_third_party_plugins imports
    assert get_policy_class("simvla") is lerobot_policy_simvla.SimVLAPolicy
    config = make_policy_config(
        "simvla",
        device="cpu",
        input_features={"observation.state": PolicyFeature(FeatureType.STATE, (12,))},
        output_features={"action": PolicyFeature(FeatureType.ACTION, (5,))},
    )
    stats = {
        "observation.state": {"mean": torch.zeros(12), "std": torch.ones(12)},
        "action": {"mean": torch.zeros(5), "std": 2 * torch.ones(5)},
    }
    preprocessor, postprocessor = make_pre_post_processors(config, dataset_stats=stats)
    policy = get_policy_class("simvla")(config)
    batch = preprocessor({"observation.state": torch.zeros(12), "task": "lift the tofu"})
    assert batch["task"] == ["lift the tofu"]
    assert postprocessor(policy.select_action(batch)).shape == (1, 5)


def test_lerobot_make_policy_ignores_dataset_features_simvla_does_not_read(vla_dataset):
    """``lerobot-train``'s path: ``make_policy`` hands a new policy every feature of a simroll
    dataset, tactile markers included; SimVLA drops what it does not read, and its processors and
    training step run on the dataset's batches (which still carry those features)."""
    from lerobot.datasets.factory import resolve_delta_timestamps
    from lerobot.datasets.lerobot_dataset import LeRobotDataset, LeRobotDatasetMetadata
    from lerobot.policies.factory import make_policy, make_policy_config, make_pre_post_processors
    from lerobot.utils.collate import lerobot_collate_fn

    import simroll.policies.vla  # noqa: F401 - registers the policy type "simvla"

    meta = LeRobotDatasetMetadata("simroll/vla_synthetic", root=vla_dataset)
    assert "observation.tactile_markers" in meta.features
    config = make_policy_config("simvla", device="cpu", **TINY_VLA)
    policy = make_policy(config, ds_meta=meta)
    # the following error is read too (simroll's trainer passes only the recipe's inputs)
    assert sorted(policy.config.input_features) == sorted([*INPUTS, FOLLOWING_ERROR_KEY])
    preprocessor, postprocessor = make_pre_post_processors(policy.config, dataset_stats=meta.stats)
    dataset = LeRobotDataset(
        "simroll/vla_synthetic",
        root=vla_dataset,
        delta_timestamps=resolve_delta_timestamps(policy.config, meta),
    )
    batch = lerobot_collate_fn([dataset[0], dataset[20]])
    assert "observation.tactile_markers" in batch
    loss, _ = policy.forward(preprocessor(batch))
    assert torch.isfinite(loss)
    policy.reset()
    action = postprocessor(policy.select_action(preprocessor(batch)))
    assert action.shape == (2, 5)


def test_simvla_keeps_only_the_features_it_reads_and_says_what_it_needs():
    from lerobot.configs import FeatureType, PolicyFeature

    from simroll.policies.vla import SimVLAConfig, SimVLAPolicy

    action = {"action": PolicyFeature(FeatureType.ACTION, (5,))}
    state = PolicyFeature(FeatureType.STATE, (12,))
    unread = {
        "observation.tactile_markers": PolicyFeature(FeatureType.STATE, (396,)),
        "observation.environment_state": PolicyFeature(FeatureType.ENV, (11,)),
    }
    config = SimVLAConfig(
        input_features={"observation.state": state, **unread},
        output_features=action,
        **TINY_VLA,
    )
    policy = SimVLAPolicy(config)
    assert list(policy.config.input_features) == ["observation.state"]
    saved = policy.config.input_features
    assert config.drop_unread_features() == [] and config.input_features == saved
    with pytest.raises(ValueError, match="at least one camera image or observation.state"):
        SimVLAPolicy(SimVLAConfig(input_features=dict(unread), output_features=action))


def test_word_tokenizer_maps_unknown_words_and_trims_padding():
    from simroll.policies.vla.modeling_simvla import PAD_ID, UNK_ID, WordTokenizer

    tokenizer = WordTokenizer(["pick", "up", "the", "sponge"], max_tokens=4)
    tokens = tokenizer(["Pick up the SPONGE, gently!", "the"])
    assert tokens.tolist() == [[2, 3, 4, 5], [4, PAD_ID, PAD_ID, PAD_ID]]
    assert tokenizer(["wibble"]).tolist() == [[UNK_ID]]
    assert tokenizer([""]).tolist() == [[PAD_ID]]


def test_ignored_state_entries_cannot_change_the_action_chunk():
    """A vision-only ablation leaves the grip forces out of observation.state: changing them must
    change nothing, while changing a read entry (the jaw opening) does."""
    from lerobot.configs import FeatureType, PolicyFeature

    from simroll.features import STATE_NAMES
    from simroll.policies.vla import SimVLAConfig, SimVLAPolicy

    forces = ["grip_force_left", "grip_force_right"]
    config = SimVLAConfig(
        input_features={"observation.state": PolicyFeature(FeatureType.STATE, (12,))},
        output_features={"action": PolicyFeature(FeatureType.ACTION, (5,))},
        ignored_state=forces,
        **TINY_VLA,
    )
    torch.manual_seed(0)
    policy = SimVLAPolicy(config)
    torch.nn.init.normal_(policy.model.action_out.weight)  # zero-initialised: make it speak
    assert policy.model.state_in.in_features == 10
    state = torch.randn(1, 12)
    noise = torch.randn(1, 4, 5)

    def chunk(values):
        return policy.predict_action_chunk({"observation.state": values, "task": ["lift"]}, noise)

    pushed = state.clone()
    pushed[0, [STATE_NAMES.index(name) for name in forces]] += 5.0
    assert torch.equal(chunk(state), chunk(pushed))
    moved = state.clone()
    moved[0, STATE_NAMES.index("jaw_opening")] += 5.0
    assert not torch.allclose(chunk(state), chunk(moved))
    with pytest.raises(ValueError, match="ignored_state must name distinct entries"):
        SimVLAConfig(ignored_state=["grip_force"], **TINY_VLA)


def test_images_of_another_size_than_trained_are_refused_naming_both_sizes():
    """lerobot-eval's default 96 px env against a 64 px checkpoint: a clear error, not a
    reshape failure deep in the patch stem."""
    from lerobot.configs import FeatureType, PolicyFeature

    from simroll.policies.vla import SimVLAConfig, SimVLAPolicy

    config = SimVLAConfig(
        input_features={
            "observation.images.scene": PolicyFeature(FeatureType.VISUAL, (3, 64, 64)),
            "observation.state": PolicyFeature(FeatureType.STATE, (12,)),
        },
        output_features={"action": PolicyFeature(FeatureType.ACTION, (5,))},
        **TINY_VLA,
    )
    policy = SimVLAPolicy(config)
    noise = torch.randn(1, config.chunk_size, 5)

    def chunk(side):
        batch = {
            "observation.images.scene": torch.rand(1, 3, side, side),
            "observation.state": torch.randn(1, 12),
            "task": ["lift"],
        }
        return policy.predict_action_chunk(batch, noise)

    assert chunk(64).shape == (1, config.chunk_size, 5)
    with pytest.raises(ValueError, match=r"96x96 pixels.*reads 64x64.*env.image_size=64"):
        chunk(96)


def test_the_following_error_is_one_token_that_changes_the_chunk():
    """A dataset's ``observation.following_error`` (the commands' lead over the measured pose) is
    one context token, scaled by fixed per-entry scales rather than dataset statistics (the
    processors leave it raw); a wrong shape or scale is refused."""
    from lerobot.configs import FeatureType, PolicyFeature

    from simroll.policies.vla import SimVLAConfig, SimVLAPolicy
    from simroll.policies.vla.processor_simvla import make_simvla_pre_post_processors

    inputs = {
        "observation.state": PolicyFeature(FeatureType.STATE, (12,)),
        FOLLOWING_ERROR_KEY: PolicyFeature(FeatureType.STATE, (5,)),
    }
    action = {"action": PolicyFeature(FeatureType.ACTION, (5,))}
    config = SimVLAConfig(input_features=inputs, output_features=action, **TINY_VLA)
    torch.manual_seed(0)
    policy = SimVLAPolicy(config)
    torch.nn.init.normal_(policy.model.action_out.weight)
    assert policy.model.following_error_in.in_features == 5
    stats = {
        "observation.state": {"mean": torch.zeros(12), "std": torch.ones(12)},
        FOLLOWING_ERROR_KEY: {"mean": torch.ones(5), "std": torch.full((5,), 1e-6)},
        "action": {"mean": torch.zeros(5), "std": torch.ones(5)},
    }
    preprocessor, _ = make_simvla_pre_post_processors(config, dataset_stats=stats)
    error = torch.tensor([0.001, -0.002, -0.003, 0.01, -0.02])
    batch = preprocessor({"observation.state": torch.zeros(12), FOLLOWING_ERROR_KEY: error})
    assert torch.equal(batch[FOLLOWING_ERROR_KEY].reshape(-1), error)  # not normalized
    noise = torch.randn(1, 4, 5)

    def chunk(values):
        inputs = {"observation.state": torch.zeros(1, 12), FOLLOWING_ERROR_KEY: values}
        return policy.predict_action_chunk({**inputs, "task": ["squeeze"]}, noise)

    pressed = error.clone()
    pressed[2] -= 0.004  # the hand target 4 mm further below the measured hand
    assert not torch.allclose(chunk(error[None]), chunk(pressed[None]))
    wrong = {**inputs, FOLLOWING_ERROR_KEY: PolicyFeature(FeatureType.STATE, (4,))}
    with pytest.raises(ValueError, match="following_error must have shape"):
        SimVLAPolicy(SimVLAConfig(input_features=wrong, output_features=action, **TINY_VLA))
    with pytest.raises(ValueError, match="following_error_scale must be 5 numbers > 0"):
        SimVLAPolicy(
            SimVLAConfig(
                input_features=inputs,
                output_features=action,
                following_error_scale=(0.005, 0.0, 0.005, 0.05, 0.01),
                **TINY_VLA,
            )
        )


def _last_lr(run_dir) -> float:
    rows = (run_dir / "metrics.csv").read_text().strip().splitlines()
    return float(rows[-1].split(",")[2])


def test_a_cosine_decay_longer_than_the_run_is_fitted_and_recorded_unless_kept(
    trained, vla_dataset, tmp_path
):
    checkpoint, summary = trained  # 40 steps of a schedule configured to decay over 100
    schedule = summary["lr_schedule"]
    assert schedule["fitted_to_steps"] and schedule["configured_decay_steps"] == 100
    assert (schedule["decay_steps"], schedule["warmup_steps"]) == (40, 0)
    assert _last_lr(checkpoint.parents[1]) == pytest.approx(schedule["decay_lr"], rel=1e-6)

    kept = train(
        TrainConfig(
            str(vla_dataset),
            str(tmp_path / "kept"),
            "simvla",
            INPUTS,
            TINY_VLA,
            steps=20,
            batch_size=16,
            log_every=20,
            checkpoint_every=20,
            fit_lr_schedule=False,
        ),
        progress=False,
    )["lr_schedule"]
    assert not kept["fitted_to_steps"] and kept["decay_steps"] == 100
    peak, low = kept["peak_lr"], kept["decay_lr"]  # a fifth of the way along the cosine
    expected = low + (peak - low) * 0.5 * (1 + np.cos(np.pi * 20 / 100))
    assert _last_lr(tmp_path / "kept") == pytest.approx(expected, rel=1e-6)


def test_keeping_the_schedule_is_refused_for_a_policy_whose_schedule_spans_the_run(vla_dataset):
    from simroll.train.trainer import check_lr_schedule

    config = TrainConfig(str(vla_dataset), "unused", "diffusion", fit_lr_schedule=False)
    with pytest.raises(ValueError, match="cosine_decay_with_warmup"):
        check_lr_schedule(config)
    check_lr_schedule(replace(config, policy_type="simvla", policy_overrides=TINY_VLA))


def test_two_observation_steps_read_the_previous_frame():
    """With ``n_obs_steps`` 2 a training sample holds the last two frames, the chunk depends on
    the earlier one too, and ``select_action`` keeps that history (the first frame repeated at
    an episode's start, dropped by ``reset``); one step keeps the one-step state dict."""
    from lerobot.configs import FeatureType, PolicyFeature

    from simroll.policies.vla import SimVLAConfig, SimVLAPolicy

    features = {
        "input_features": {
            "observation.images.scene": PolicyFeature(FeatureType.VISUAL, (3, 32, 32)),
            "observation.state": PolicyFeature(FeatureType.STATE, (12,)),
        },
        "output_features": {"action": PolicyFeature(FeatureType.ACTION, (5,))},
    }
    config = SimVLAConfig(**{**TINY_VLA, "n_action_steps": 1}, n_obs_steps=2, **features)
    assert config.observation_delta_indices == [-1, 0]
    assert SimVLAConfig(**features, **TINY_VLA).observation_delta_indices is None
    torch.manual_seed(0)
    policy = SimVLAPolicy(config)
    torch.nn.init.normal_(policy.model.action_out.weight)  # zero-initialised: make it speak
    one_step = SimVLAPolicy(SimVLAConfig(**features, **TINY_VLA))
    assert set(policy.state_dict()) - set(one_step.state_dict()) == {"model.step_position"}
    frames = [
        {
            "observation.images.scene": torch.rand(1, 3, 32, 32),
            "observation.state": torch.randn(1, 12),
        }
        for _ in range(3)
    ]

    def steps(*chosen):
        stacked = {key: torch.stack([f[key] for f in chosen], dim=1) for key in chosen[0]}
        return {**stacked, "task": ["lift"]}

    noise = torch.randn(1, 4, 5)
    chunk = policy.predict_action_chunk
    assert not torch.allclose(
        chunk(steps(frames[0], frames[2]), noise), chunk(steps(frames[1], frames[2]), noise)
    )
    loss, _ = policy.forward({**steps(frames[0], frames[1]), "action": torch.randn(1, 4, 5)})
    loss.backward()
    assert policy.model.step_position.grad is not None

    policy.reset()
    acted = [policy.select_action({**f, "task": ["lift"]}, noise=noise) for f in frames[:2]]
    assert torch.equal(acted[0], chunk(steps(frames[0], frames[0]), noise)[:, 0])
    assert torch.equal(acted[1], chunk(steps(frames[0], frames[1]), noise)[:, 0])
    policy.reset()  # a new episode starts its own history
    again = policy.select_action({**frames[1], "task": ["lift"]}, noise=noise)
    assert torch.equal(again, chunk(steps(frames[1], frames[1]), noise)[:, 0])
    with pytest.raises(ValueError, match="n_obs_steps must be an integer >= 1, got 0"):
        SimVLAConfig(n_obs_steps=0, **TINY_VLA)


def test_a_trained_two_step_checkpoint_acts_as_the_plain_lerobot_loop(vla_dataset, env, tmp_path):
    """A two-step SimVLA trained through simroll's trainer (which loads each sample's earlier
    frame) and driven by ``LeRobotPolicy`` acts exactly as the same weights driven the plain
    LeRobot way (convert, normalize, ``select_action`` with its own history, un-normalize)."""
    overrides = {**TINY_VLA, "n_obs_steps": 2, "n_action_steps": 1}
    config = TrainConfig(
        str(vla_dataset),
        str(tmp_path),
        "simvla",
        INPUTS,
        overrides,
        steps=10,
        batch_size=8,
        log_every=10,
        checkpoint_every=10,
        threads=1,
    )
    train(config, progress=False)
    checkpoint = tmp_path / "checkpoints" / "last"
    fast, plain = load_policy(env, checkpoint), load_policy(env, checkpoint)
    assert fast.policy.config.n_obs_steps == 2
    obs, _ = env.reset(seed=5)
    fast.reset()
    plain.policy.reset()
    actions = []
    for step in range(6):
        torch.manual_seed(step)
        action = fast.select_action(obs)
        torch.manual_seed(step)
        expected = plain_lerobot_action(plain, obs)
        np.testing.assert_array_equal(action, expected, err_msg=f"step {step}")
        actions.append(action)
        obs, *_ = env.step(action)
    assert len({a.tobytes() for a in actions}) > 1
