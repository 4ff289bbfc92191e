"""DAgger: the mixing policy labels with the expert, rounds grow the dataset, a run resumes."""

from __future__ import annotations

import dataclasses
import json
import shutil

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import yaml

import simroll.envs  # noqa: F401
from simroll.policies.mixing import ExpertMixing, mixing_policy
from simroll.rollout.dataset import load_episode_meta
from simroll.train.dagger import DaggerConfig, DaggerError, _train_once, run_dagger
from simroll.train.trainer import TrainConfig

from .test_trainer import INPUTS, TINY_DIFFUSION

LABEL = np.array([0.1, -0.2, 0.3, 0.0, -0.5], dtype=np.float32)


class ConstantLabeller:
    """A labeller whose action depends on no state at all (so on the current state only)."""

    labels_any_state = True

    def __init__(self, env, value=None):
        self.value = LABEL if value is None else np.asarray(value, dtype=np.float32)

    def reset(self) -> None:
        pass

    def select_action(self, obs) -> np.ndarray:
        return self.value.copy()


class Counter:
    """A learner whose action counts its calls (its queue advances every step)."""

    def __init__(self, env=None):
        self.calls = 0

    def reset(self) -> None:
        self.calls = 0

    def select_action(self, obs) -> np.ndarray:
        self.calls += 1
        return np.full(5, self.calls / 1000.0, dtype=np.float32)


class Remembers:
    """An expert that cannot label states it did not reach (no labels_any_state)."""

    def reset(self) -> None:
        pass

    def select_action(self, obs) -> np.ndarray:
        return np.zeros(5, dtype=np.float32)


@pytest.fixture
def env():
    env = gym.make("simroll/SoftLift-v0", object="sponge")
    env.reset(seed=3)
    yield env
    env.close()


def test_mixing_refuses_an_expert_that_cannot_label_any_state(env):
    with pytest.raises(ValueError, match="labels_any_state"):
        ExpertMixing(Counter(), Remembers(), env)
    with pytest.raises(ValueError, match="beta"):
        ExpertMixing(Counter(), ConstantLabeller(env), env, beta=1.5)


def test_learner_drives_and_the_expert_labels_every_step(env):
    policy = mixing_policy(env, Counter, ConstantLabeller, beta=0.0)
    policy.reset()
    for step in range(1, 6):
        action = policy.select_action(None)
        np.testing.assert_array_equal(action, np.full(5, step / 1000.0, dtype=np.float32))
        np.testing.assert_array_equal(policy.action_label, LABEL)
    assert policy.episode_extras() == {"expert_steps": 0} and "beta=0" in policy.policy_id


def test_beta_mixing_is_seeded_and_leaves_the_env_stream_alone(env):
    def coins(seed: int) -> list[bool]:
        env.reset(seed=seed)
        before = env.unwrapped.np_random.bit_generator.state
        policy = ExpertMixing(Counter(), ConstantLabeller(env), env, beta=0.5)
        policy.reset()
        taken = [bool(np.array_equal(policy.select_action(None), LABEL)) for _ in range(200)]
        assert env.unwrapped.np_random.bit_generator.state == before
        assert sum(taken) == policy.expert_steps
        assert policy.learner.calls == 200  # asked every step, even when the expert acts
        return taken

    first = coins(7)
    assert first == coins(7) and first != coins(8)
    assert 60 < sum(first) < 140


class PhasedLabeller(ConstantLabeller):
    """A constant labeller that reports phase ``lift`` from its fourth call on."""

    def __init__(self, env):
        super().__init__(env)
        self.reset()

    def reset(self) -> None:
        self.calls, self.phase = 0, None

    def select_action(self, obs) -> np.ndarray:
        self.calls += 1
        self.phase = "lift" if self.calls > 3 else "align"
        return super().select_action(obs)


DROP = {"action": [None, None, None, None, -1.0], "phases": ["lift"], "rate": 0.3, "steps": 4}


def test_perturbation_overwrites_channels_in_its_phase_and_keeps_the_labels(env):
    def run(seed: int, beta: float = 0.0, perturb=DROP) -> tuple[list[int], list[bool]]:
        env.reset(seed=seed)
        before = env.unwrapped.np_random.bit_generator.state
        policy = ExpertMixing(Counter(), PhasedLabeller(env), env, beta=beta, perturb=perturb)
        policy.reset()
        perturbed, coins = [], []
        for step in range(1, 41):
            action = policy.select_action(None)
            np.testing.assert_array_equal(policy.action_label, LABEL)  # labels untouched
            driver = LABEL if np.allclose(action[:4], LABEL[:4]) else np.full(5, step / 1000.0)
            coins.append(driver is LABEL)
            np.testing.assert_allclose(action[:4], driver[:4])  # kept channels are the driver's
            if action[4] == -1.0:
                perturbed.append(step)
        assert env.unwrapped.np_random.bit_generator.state == before
        assert policy.episode_extras().get("perturbed_steps", 0) == len(perturbed)
        return perturbed, coins

    perturbed, _ = run(7)
    assert len(perturbed) == 4 and perturbed[0] >= 4  # once, in the lift phase, 4 steps
    assert perturbed == list(range(perturbed[0], perturbed[0] + 4))
    assert perturbed == run(7)[0]
    assert any(run(seed)[0] != perturbed for seed in (8, 9, 10))
    # the beta coins are the same with or without disturbances
    assert run(7, beta=0.5)[1] == run(7, beta=0.5, perturb=None)[1]


def test_the_expert_drives_for_expert_after_steps_after_a_disturbance(env):
    env.reset(seed=7)
    perturb = {**DROP, "expert_after": 6}
    policy = ExpertMixing(Counter(), PhasedLabeller(env), env, perturb=perturb)
    policy.reset()
    kinds = []
    for step in range(1, 41):
        action = policy.select_action(None)
        np.testing.assert_array_equal(policy.action_label, LABEL)
        if action[4] == -1.0:
            kinds.append("disturbed")
        elif np.array_equal(action, LABEL):
            kinds.append("expert")
        else:
            np.testing.assert_allclose(action, np.full(5, step / 1000.0))
            kinds.append("learner")
    start = kinds.index("disturbed")
    assert kinds[start : start + 10] == ["disturbed"] * 4 + ["expert"] * 6
    assert set(kinds[:start] + kinds[start + 10 :]) == {"learner"}
    assert policy.episode_extras() == {"expert_steps": 6, "perturbed_steps": 4}


def test_a_range_channel_is_drawn_once_per_disturbance_and_seeded(env):
    push = {**DROP, "action": [[-1.0, 1.0], [0.25, 0.5], None, None, -1.0], "per_episode": 3}
    push["rate"] = 1.0

    def run(seed: int, perturb=push) -> list[np.ndarray]:
        env.reset(seed=seed)
        policy = ExpertMixing(Counter(), PhasedLabeller(env), env, perturb=perturb)
        policy.reset()
        return [policy.select_action(None) for _ in range(16)]

    actions = run(7)
    disturbed = [a for a in actions if a[4] == -1.0]
    assert len(disturbed) == 12  # three disturbances of 4 steps, from the first lift step
    draws = [tuple(disturbed[k][:2]) for k in (0, 4, 8)]
    for k, draw in enumerate(draws):  # one draw held over each disturbance's steps
        assert all(tuple(a[:2]) == draw for a in disturbed[4 * k : 4 * k + 4])
        assert -1.0 <= draw[0] <= 1.0 and 0.25 <= draw[1] <= 0.5
    assert len(set(draws)) == 3  # drawn anew each time
    np.testing.assert_array_equal(np.stack(actions), np.stack(run(7)))  # seeded
    assert not np.array_equal(np.stack(actions), np.stack(run(8)))
    # the draw comes after the coin: the first disturbance starts where it would without ranges
    fixed = {**DROP, "per_episode": 3, "rate": 0.3}
    ranged = {**fixed, "action": [[0.0, 0.0], None, None, None, -1.0]}
    starts = [[k for k, a in enumerate(run(7, p)) if a[4] == -1.0][0] for p in (fixed, ranged)]
    assert starts[0] == starts[1]


@pytest.mark.parametrize(
    ("perturb", "match"),
    [
        ({**DROP, "expert_after": -1}, r"perturb.expert_after must be an integer >= 0"),
        ({"action": [[0.5, -0.5], None, None, None, None]}, "a range"),
        ({"action": [[-2.0, 0.5], None, None, None, None]}, r"perturb.action\[0\] = \[-2.0"),
        ({"action": [None] * 5}, "at least one not null"),
        ({"action": [0.0] * 4}, "list 5 channels"),
        ({"action": [None, None, None, None, -2.0]}, r"perturb.action\[4\] = -2.0"),
        ({**DROP, "rate": 0.0}, "perturb.rate"),
        ({**DROP, "steps": 0}, "perturb.steps"),
        ({**DROP, "phases": "lift"}, "perturb.phases"),
        ({**DROP, "when": "lift"}, "perturb must be a mapping"),
    ],
)
def test_perturbation_refuses_bad_settings(env, perturb, match):
    with pytest.raises(ValueError, match=match):
        ExpertMixing(Counter(), PhasedLabeller(env), env, perturb=perturb)


def test_perturbation_by_phase_needs_an_expert_that_reports_one(env):
    with pytest.raises(ValueError, match="reports its phase"):
        ExpertMixing(Counter(), ConstantLabeller(env), env, perturb=DROP)
    ExpertMixing(Counter(), ConstantLabeller(env), env, perturb={**DROP, "phases": []})


@pytest.fixture(scope="module")
def collected(lift_dataset, tmp_path_factory):
    """The session's state dataset with the env record ``simroll collect`` writes."""
    root = tmp_path_factory.mktemp("dagger_data") / "lift"
    shutil.copytree(lift_dataset, root)
    record = {
        "env": {"obs_mode": "state", "image_size": 96, "gripper_mode": "continuous"},
        "tactile_image": False,
    }
    (root / "meta" / "simroll_collect.yaml").write_text(yaml.safe_dump(record))
    return root


def _configs(dataset, out, rounds=2, steps_per_round=20):
    train_config = TrainConfig(
        str(dataset),
        str(out),
        "diffusion",
        INPUTS,
        TINY_DIFFUSION,
        steps=30,
        batch_size=16,
        log_every=10,
        checkpoint_every=1000,
    )
    dagger = DaggerConfig(
        rounds=rounds,
        episodes_per_round=1,
        steps_per_round=steps_per_round,
        beta=0.5,
        final_episodes=1,
        labeller={"_target_": f"{__name__}.ConstantLabeller", "_partial_": True},
        tasks=("SoftLift",),
        objects=("sponge",),
    )
    return train_config, dagger


def _labelled_actions(root, round_index):
    """The stored actions of the episodes round ``round_index`` added to the dataset at root."""
    rows = load_episode_meta(root)
    added = [index for index, row in rows.items() if row["dagger_round"] == round_index]
    frames = pd.concat(pd.read_parquet(path) for path in sorted(root.glob("data/*/*.parquet")))
    chosen = frames[frames["episode_index"].isin(added)]
    return np.stack(chosen["action"].to_numpy()), len(added)


@pytest.mark.slow
def test_rounds_label_grow_the_dataset_and_resume(collected, tmp_path):
    out = tmp_path / "dagger"
    train_config, dagger = _configs(collected, out)
    metrics = run_dagger(train_config, dagger, progress=False, echo=lambda *a: None)

    base_episodes = json.loads((collected / "meta" / "info.json").read_text())["total_episodes"]
    assert [entry["round"] for entry in metrics["rounds"]] == [0, 1, 2]
    for index in (1, 2):
        entry = metrics["rounds"][index]
        assert entry["rollouts"]["beta"] == pytest.approx(0.5 * 0.5 ** (index - 1))
        share = entry["rollouts"]["expert_steps"] / entry["rollouts"]["frames"]
        assert abs(share - entry["rollouts"]["beta"]) < 0.25  # the coin's share, roughly
        assert entry["dataset"]["episodes"] == base_episodes + index
        assert entry["train"]["steps"] == 20 and entry["train"]["dataset_episodes"] == (
            base_episodes + index
        )
        actions, added = _labelled_actions(out / f"round_{index:02d}" / "dataset", index)
        assert added == 1
        assert len(actions) == entry["dataset"]["labelled_frames"] > 0
        # every visited state carries the labeller's action, whoever acted
        np.testing.assert_allclose(actions, np.tile(LABEL, (len(actions), 1)), atol=1e-6)
    rows = load_episode_meta(out / "round_02" / "dataset")
    assert sorted(row["dagger_round"] for row in rows.values()) == [0] * base_episodes + [1, 2]
    assert 0.0 <= metrics["final"]["tsr"]["rate"] <= 1.0 and metrics["final"]["episodes"] == 1
    stored = json.loads((out / "dagger.json").read_text())
    assert stored["rounds"] == json.loads(json.dumps(metrics["rounds"]))
    assert (out / "dagger.png").stat().st_size > 1000

    # rerun: every stage is found finished, nothing trains again
    stamp = (out / "round_02" / "train" / "metrics.json").stat().st_mtime_ns
    again = run_dagger(train_config, dagger, progress=False, echo=lambda *a: None)
    assert (out / "round_02" / "train" / "metrics.json").stat().st_mtime_ns == stamp
    assert again["rounds"] == json.loads(json.dumps(metrics["rounds"]))
    assert again["seconds"] > metrics["seconds"]  # the invocations' wall times add up

    # other settings are refused; more rounds continue the run
    other = _configs(collected, out, steps_per_round=21)
    with pytest.raises(DaggerError, match="dagger.steps_per_round"):
        run_dagger(*other, progress=False, echo=lambda *a: None)
    longer = _configs(collected, out, rounds=3)
    extended = run_dagger(*longer, progress=False, echo=lambda *a: None)
    assert [entry["round"] for entry in extended["rounds"]] == [0, 1, 2, 3]
    assert (out / "round_02" / "train" / "metrics.json").stat().st_mtime_ns == stamp


def test_a_dataset_without_its_env_record_is_refused(lift_dataset, tmp_path):
    train_config, dagger = _configs(lift_dataset, tmp_path / "d")
    with pytest.raises(DaggerError, match="simroll_collect.yaml"):
        run_dagger(train_config, dagger, progress=False, echo=lambda *a: None)


@pytest.fixture(scope="module")
def old_collected(tmp_path_factory):
    """A state dataset as simroll wrote it before observation.following_error existed."""
    from simroll.experts import SoftExpert
    from simroll.features import dataset_features
    from simroll.rollout.dataset import DatasetRecorder
    from simroll.rollout.episode import EnvConfig, EnvPool
    from simroll.rollout.runner import make_specs

    root = tmp_path_factory.mktemp("dagger_old") / "lift"
    specs = make_specs("soft", ["SoftLift"], ["sponge"], ["default"], 2, base_seed=1000)
    pool = EnvPool(EnvConfig(obs_mode="state"))
    space = pool.get(specs[0]).observation_space
    offered = dataset_features(space, with_tactile_image=False)
    keep = [key for key in offered if key != "observation.following_error"]
    with DatasetRecorder(root, space, repo_id="simroll/lift_old", keep_features=keep) as recorder:
        for spec in specs:
            recorder.record(spec, lambda env: SoftExpert(env, "gentle"), env=pool.get(spec))
    pool.close()
    record = {
        "env": {"obs_mode": "state", "image_size": 96, "gripper_mode": "continuous"},
        "tactile_image": False,
    }
    (root / "meta" / "simroll_collect.yaml").write_text(yaml.safe_dump(record))
    return root


def test_rounds_on_a_dataset_from_an_older_simroll_record_only_its_features(
    old_collected, tmp_path
):
    """LeRobot joins only datasets of equal features: rounds on a dataset collected before
    observation.following_error leave that observation out, and the run goes through."""
    base = json.loads((old_collected / "meta" / "info.json").read_text())["features"]
    assert "observation.following_error" not in base
    train_config, dagger = _configs(old_collected, tmp_path / "d", rounds=1)
    dagger = dataclasses.replace(dagger, final_episodes=0)
    metrics = run_dagger(train_config, dagger, progress=False, echo=lambda *a: None)
    joined = tmp_path / "d" / "round_01" / "dataset"
    assert json.loads((joined / "meta" / "info.json").read_text())["features"] == base
    assert metrics["rounds"][1]["dataset"]["episodes"] == 3
    assert metrics["rounds"][1]["dataset"]["labelled_episodes"] == 1


def test_a_dataset_with_features_this_simroll_does_not_record_is_refused(collected, tmp_path):
    odd = tmp_path / "odd"
    shutil.copytree(collected, odd)
    info_path = odd / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    info["features"]["observation.gripper_temperature"] = {"dtype": "float32", "shape": [1]}
    info_path.write_text(json.dumps(info))
    train_config, dagger = _configs(odd, tmp_path / "d")
    with pytest.raises(DaggerError, match=r"has \['observation.gripper_temperature'\]"):
        run_dagger(train_config, dagger, progress=False, echo=lambda *a: None)
    assert not (tmp_path / "d").exists()  # nothing trained or rolled out


def test_bad_settings_name_the_key():
    with pytest.raises(DaggerError, match="dagger.rounds"):
        DaggerConfig(rounds=0).check()
    with pytest.raises(DaggerError, match="dagger.beta_decay"):
        DaggerConfig(beta_decay=2.0).check()


@pytest.mark.slow
def test_a_round_on_the_vector_backend_gives_the_same_labelled_episodes(collected, tmp_path):
    from simroll.rollout.store import RecordStore

    outcomes, labels = {}, {}
    for backend in ("local", "vector"):
        train_config, dagger = _configs(collected, tmp_path / backend, rounds=1)
        dagger.backend, dagger.episodes_per_round, dagger.final_episodes = backend, 2, 0
        run_dagger(train_config, dagger, progress=False, echo=lambda *a: None)
        stored = RecordStore(tmp_path / backend / "round_01" / "rollouts").load().records
        # receipts hash the policy config, which names each run's own checkpoint path
        outcomes[backend] = sorted(
            (r.spec.key, r.success, r.steps, r.peak_deformation, r.termination_reason)
            for r in stored.values()
        )
        labels[backend], added = _labelled_actions(tmp_path / backend / "round_01/dataset", 1)
        assert added == 2
    assert len(outcomes["local"]) == 2 and outcomes["local"] == outcomes["vector"]
    np.testing.assert_array_equal(labels["local"], labels["vector"])


def test_a_resume_refuses_other_weights_at_init_from(tmp_path):
    """The fingerprint carries init_from's weights digest beside its path: weights retrained at
    the same path are refused; a run stored before the digest was recorded is adopted."""
    from simroll.train.dagger import INIT_DIGEST, _check_resume

    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "model.safetensors").write_bytes(b"weights one")
    out = tmp_path / "run"
    out.mkdir()
    train_config, dagger = _configs(tmp_path / "data", out)
    train_config.init_from = str(checkpoint)
    first = dagger.fingerprint(train_config)
    assert len(first["train"][INIT_DIGEST]) == 64
    _check_resume(out, first, echo=lambda *a: None)
    _check_resume(out, dagger.fingerprint(train_config), echo=lambda *a: None)  # same: fine

    (checkpoint / "model.safetensors").write_bytes(b"weights two")
    with pytest.raises(DaggerError, match=f"train.{INIT_DIGEST}"):
        _check_resume(out, dagger.fingerprint(train_config), echo=lambda *a: None)

    older = {**first, "train": {k: v for k, v in first["train"].items() if k != INIT_DIGEST}}
    (out / "dagger_config.json").write_text(json.dumps(older))
    (checkpoint / "model.safetensors").write_bytes(b"weights one")
    notes = []
    _check_resume(out, dagger.fingerprint(train_config), echo=notes.append)
    assert notes and "predates" in notes[0]
    assert json.loads((out / "dagger_config.json").read_text()) == first


def test_a_resume_refuses_other_task_weights(tmp_path):
    """task_weights change what a round trains on: a resume with other weights is refused, and a
    run without them keeps the fingerprint it had before the setting existed."""
    from simroll.train.dagger import _check_resume

    out = tmp_path / "run"
    out.mkdir()
    train_config, dagger = _configs(tmp_path / "data", out)
    assert "task_weights" not in dagger.fingerprint(train_config)["train"]
    train_config.task_weights = {"squeeze": 3.0}
    _check_resume(out, dagger.fingerprint(train_config), echo=lambda *a: None)
    _check_resume(out, dagger.fingerprint(train_config), echo=lambda *a: None)  # same: fine
    train_config.task_weights = {"squeeze": 2.0}
    with pytest.raises(DaggerError, match="task_weights"):
        _check_resume(out, dagger.fingerprint(train_config), echo=lambda *a: None)


def test_a_perturbed_round_records_its_disturbances_and_keeps_the_labels(collected, tmp_path):
    train_config, dagger = _configs(collected, tmp_path / "dagger", rounds=1)
    dagger.final_episodes = 0
    dagger.perturb = {"action": [None, None, None, None, -1.0], "rate": 1.0, "steps": 3}
    metrics = run_dagger(train_config, dagger, progress=False, echo=lambda *a: None)
    rollouts = metrics["rounds"][1]["rollouts"]
    assert rollouts["perturbed_steps"] == 3  # one episode, disturbed from its first step
    actions, _ = _labelled_actions(tmp_path / "dagger" / "round_01" / "dataset", 1)
    np.testing.assert_allclose(actions, np.tile(LABEL, (len(actions), 1)), atol=1e-6)
    assert metrics["config"]["dagger"]["perturb"]["steps"] == 3


def test_a_resume_refuses_another_perturbation(tmp_path):
    """perturb changes what a round visits: a resume with another is refused, and a run without
    one keeps the fingerprint it had before the setting existed."""
    from simroll.train.dagger import _check_resume

    out = tmp_path / "run"
    out.mkdir()
    train_config, dagger = _configs(tmp_path / "data", out)
    assert "perturb" not in dagger.fingerprint(train_config)["dagger"]
    dagger.perturb = {"action": [None, None, None, None, -1.0], "rate": 0.05}
    _check_resume(out, dagger.fingerprint(train_config), echo=lambda *a: None)
    _check_resume(out, dagger.fingerprint(train_config), echo=lambda *a: None)  # same: fine
    dagger.perturb = {"action": [None, None, None, None, -1.0], "rate": 0.1}
    with pytest.raises(DaggerError, match="perturb"):
        _check_resume(out, dagger.fingerprint(train_config), echo=lambda *a: None)
    with pytest.raises(DaggerError, match="dagger.perturb must be a mapping"):
        DaggerConfig(perturb="drop").check()


def test_a_bad_perturbation_is_refused_before_round_0_trains(collected, tmp_path):
    train_config, dagger = _configs(collected, tmp_path / "dagger", rounds=1)
    dagger.perturb = {"action": [None, None, None, None, -1.0], "phases": ["lift"]}
    with pytest.raises(DaggerError, match="dagger.perturb.phases needs an expert"):
        run_dagger(train_config, dagger, progress=False, echo=lambda *a: None)
    assert not (tmp_path / "dagger" / "round_00").exists()


def test_perturbation_phases_must_be_the_experts_own(env):
    from simroll.experts import SoftExpert

    ExpertMixing(Counter(), SoftExpert(env), env, perturb=DROP)
    with pytest.raises(ValueError, match=r"\['carr'\] are not phases of 'expert/gentle'"):
        ExpertMixing(Counter(), SoftExpert(env), env, perturb={**DROP, "phases": ["lift", "carr"]})


@pytest.mark.parametrize("goal_loss", [None, 0.25])
def test_a_round_summary_keeps_the_goal_heads_loss_when_the_trainer_wrote_one(tmp_path, goal_loss):
    out = tmp_path / "train"
    (out / "checkpoints" / "last").mkdir(parents=True)
    (out / "checkpoints" / "last" / "model.safetensors").write_bytes(b"")
    metrics = {"steps": 30, "first_loss": 1.0, "final_loss": 0.5, "seconds": 2.0}
    metrics |= {"dataset_episodes": 3, "dataset_frames": 90, "checkpoint": "last"}
    if goal_loss is not None:
        metrics["final_goal_loss"] = goal_loss
    (out / "metrics.json").write_text(json.dumps(metrics))
    config = _configs("unused", out)[0]  # its output_dir is out
    summary = _train_once(config, progress=False, echo=lambda *_: None)  # finished: not re-run
    assert summary.get("final_goal_loss") == goal_loss
    assert summary["final_loss"] == 0.5
