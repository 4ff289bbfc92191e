"""The world-action model (simroll/policies/wam): rollout and RIFT modes of one network."""

from __future__ import annotations

import pytest
import torch
from lerobot.configs import FeatureType, PolicyFeature

from simroll.features import FINGERS, TAXEL_GRID
from simroll.policies.wam import WAMConfig, WAMPolicy, make_wam_pre_post_processors
from simroll.policies.wam.modeling_wam import intervention

TAXELS = FINGERS * TAXEL_GRID[0] * TAXEL_GRID[1]
TINY = {
    "video_dim": 32,
    "action_dim_model": 16,
    "n_heads": 2,
    "head_dim": 8,
    "n_layers": 2,
    "num_video_steps": 3,
    "num_flow_steps": 4,
    "chunk_size": 6,
    "n_action_steps": 3,
    "future_offsets": [2, 4],
}


def make_config(**overrides) -> WAMConfig:
    return WAMConfig(
        **{**TINY, **overrides},
        input_features={
            "observation.images.scene": PolicyFeature(FeatureType.VISUAL, (3, 64, 64)),
            "observation.images.wrist": PolicyFeature(FeatureType.VISUAL, (3, 64, 64)),
            "observation.state": PolicyFeature(FeatureType.STATE, (12,)),
            "observation.tactile": PolicyFeature(FeatureType.STATE, (TAXELS,)),
        },
        output_features={"action": PolicyFeature(FeatureType.ACTION, (5,))},
    )


def training_batch(size: int = 4, seed: int = 0) -> dict:
    generator = torch.Generator().manual_seed(seed)
    frames = 1 + len(TINY["future_offsets"])
    return {
        "observation.images.scene": torch.rand(size, frames, 3, 64, 64, generator=generator),
        "observation.state": torch.randn(size, frames, 12, generator=generator),
        "observation.tactile": torch.rand(size, frames, TAXELS, generator=generator),
        "action": torch.randn(size, TINY["chunk_size"], 5, generator=generator),
        "task": ["lift the tofu gently"] * size,
    }


def current(batch: dict) -> dict:
    """An inference batch: the current step of every observation (no time axis)."""
    return {
        key: value[:, 0] if key.startswith("observation.") else value
        for key, value in batch.items()
        if key != "action"
    }


def count_backbone_passes(policy: WAMPolicy) -> list[int]:
    passes = [0]
    policy.model.video.register_forward_hook(lambda *_: passes.__setitem__(0, passes[0] + 1))
    return passes


def test_it_reads_one_camera_state_and_touch_and_names_what_is_missing():
    config = make_config()
    WAMPolicy(config)
    assert sorted(config.input_features) == [
        "observation.images.scene",
        "observation.state",
        "observation.tactile",
    ]  # the wrist camera is not read
    with pytest.raises(ValueError, match="observation.images.side"):
        WAMPolicy(make_config(camera="observation.images.side"))
    for field, value in [("mode", "dream"), ("future_offsets", [4, 2]), ("frame_size", 30)]:
        with pytest.raises(ValueError, match=field):
            make_config(**{field: value})


@pytest.mark.parametrize(
    ("mode", "cache", "passes"),
    [("rift", "evolving", 1), ("rollout", "evolving", 3), ("rollout", "final_clean", 4)],
)
def test_backbone_passes_per_chunk(mode, cache, passes):
    """RIFT builds the future cache in exactly one backbone pass; rollout mode pays one per
    future denoising step (and one more for the final clean cache)."""
    torch.manual_seed(0)
    policy = WAMPolicy(make_config(mode=mode, rollout_cache=cache))
    counted = count_backbone_passes(policy)
    chunk = policy.predict_action_chunk(current(training_batch()))
    assert chunk.shape == (4, TINY["chunk_size"], 5)
    assert counted[0] == passes


def test_rift_cache_has_the_rollout_cache_shapes_and_positions():
    torch.manual_seed(0)
    rollout = WAMPolicy(make_config(mode="rollout"))
    rift = WAMPolicy(make_config(mode="rift"))
    rift.load_state_dict(rollout.state_dict())
    caches = []
    for policy in (rollout, rift):
        keep: dict = {}
        policy.predict_action_chunk(current(training_batch()), keep=keep)
        caches.append(keep)
    assert caches[0]["prefix_rows"] == caches[1]["prefix_rows"]
    for (k0, v0), (k1, v1) in zip(caches[0]["cache"], caches[1]["cache"], strict=True):
        assert k0.shape == k1.shape and v0.shape == v1.shape
    # a future row's position embedding is the same whether it holds a latent or a token
    model = rift.model
    rows = model.anticipation_rows(1)[0] - model.anticipation
    assert torch.allclose(rows, model.frame_position[1:].flatten(0, 1), atol=1e-7)


def test_training_lowers_every_loss_and_the_aux_weight_anneals():
    torch.manual_seed(0)
    config = make_config(mode="rift", scheduler_decay_steps=60, aux_anneal_start=0.5)
    policy = WAMPolicy(config)
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
    batch = training_batch(size=8)
    policy.train()
    history = []
    for _ in range(60):
        torch.manual_seed(1)  # the same noise and times every step: a fixed objective
        loss, info = policy(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append(info)
    for key, factor in [("action_loss", 0.6), ("future_head_loss", 0.6), ("video_loss", 0.85)]:
        assert history[-1][key] < factor * history[0][key], key  # random pixels: slowest
    assert history[0]["aux_weight"] == 1.0 and history[-1]["aux_weight"] < 0.25


def test_a_reload_gives_identical_actions(tmp_path):
    torch.manual_seed(0)
    policy = WAMPolicy(make_config(mode="rift"))
    stats = {
        "observation.state": {"mean": torch.zeros(12), "std": torch.ones(12)},
        "action": {"mean": torch.zeros(5), "std": torch.ones(5)},
    }
    pre, post = make_wam_pre_post_processors(policy.config, dataset_stats=stats)
    policy.save_pretrained(tmp_path)
    loaded = WAMPolicy.from_pretrained(tmp_path)
    batch = pre(current(training_batch(size=1)))
    noise = torch.randn(1, TINY["chunk_size"], 5)
    assert torch.equal(
        post(policy.predict_action_chunk(batch, noise=noise)),
        post(loaded.predict_action_chunk(batch, noise=noise)),
    )


@pytest.mark.parametrize("name", ["mask_future", "reassign_future"])
def test_interventions_change_only_the_future_values(name):
    """A cache intervention edits the values of the future rows and nothing else: keys, and
    the conditioning and current-frame rows, are those the backbone computed."""
    torch.manual_seed(0)
    policy = WAMPolicy(make_config(mode="rift"))
    with torch.no_grad():  # an untrained action head is zero: give it weights to read with
        policy.model.action_out.weight.normal_()
    batch, noise = current(training_batch()), torch.randn(4, TINY["chunk_size"], 5)
    plain = policy.predict_action_chunk(batch, noise=noise)
    seen: list = []
    edit = intervention(name)
    policy.cache_edit = lambda cache, rows: seen.append((cache, rows)) or edit(cache, rows)
    edited = policy.predict_action_chunk(batch, noise=noise)
    assert not torch.allclose(edited, plain)  # the actions read the future values
    (cache, rows), changed = seen[0], edit(*seen[0])
    for (k, v), (k2, v2) in zip(cache, changed, strict=True):
        assert torch.equal(k, k2) and torch.equal(v[:, :, :rows], v2[:, :, :rows])
        future, future2 = v[:, :, rows:], v2[:, :, rows:]
        if name == "mask_future":
            assert not future2.any()
        else:  # a permutation of the same rows
            assert torch.equal(future2, future.flip(2)) and not torch.equal(future2, future)
    policy.cache_edit = None
    policy.config.cache_intervention = name  # the config knob load_policy overrides set
    assert torch.equal(policy.predict_action_chunk(batch, noise=noise), edited)


def test_lerobot_resolves_the_wam_through_the_plugin():
    lerobot_policy_simvla = pytest.importorskip("lerobot_policy_simvla")
    from lerobot.policies.factory import get_policy_class

    assert get_policy_class("wam") is lerobot_policy_simvla.WAMPolicy


@pytest.mark.parametrize(
    ("name", "mode", "passes"), [("wam_soft", "rollout", 10), ("wam_rift_soft", "rift", 1)]
)
def test_shipped_checkpoints_plan_in_their_mode(name, mode, passes):
    """The shipped checkpoints act on a real SoftLift observation: the rollout one with its
    10 backbone passes per chunk, the RIFT one with exactly one."""
    from pathlib import Path

    from simroll.policies.lerobot import load_policy
    from simroll.rollout.episode import EnvConfig
    from simroll.rollout.records import EpisodeSpec

    path = Path(__file__).resolve().parents[2] / "policies" / name
    env = EnvConfig(obs_mode="full", image_size=64, gripper_mode="delta").make(
        EpisodeSpec("SoftLift", "sponge", "default", 0, 0)
    )
    try:
        policy = load_policy(env, path)
        assert policy.policy.config.mode == mode
        count = [0]
        policy.policy.model.video.register_forward_hook(
            lambda *_: count.__setitem__(0, count[0] + 1)
        )
        obs, _ = env.reset(seed=0)
        chunk = policy.predict_action_chunk(obs)
    finally:
        env.close()
    assert count[0] == passes
    assert chunk.shape[-1] == 5 and torch.isfinite(torch.as_tensor(chunk)).all()
