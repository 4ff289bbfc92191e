"""A checkpoint is data: whatever it names that is not a registered LeRobot policy type or
processor step, a safetensors file, or a known env setting is refused before LeRobot reads it.

The attack these tests pin: LeRobot imports and calls the class a processor JSON step names
(``{"class": "subprocess.Popen", "config": {"args": [...]}}`` runs a command). ``load_policy``,
the trainer's ``init_from`` and ``save_checkpoint`` refuse such a checkpoint, naming the file, the
value and what was expected, and the command never runs. The shipped checkpoints pass.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import gymnasium as gym
import pytest

import simroll.envs  # noqa: F401 - registers the envs
from simroll.policies.checkpoint import (
    ENV_RECORD,
    PolicyLoadError,
    UntrustedCheckpointError,
    read_env_record,
    validate_checkpoint,
)
from simroll.policies.lerobot import load_policy

POLICIES = Path(__file__).resolve().parents[2] / "policies"
SHIPPED = (
    "act_soft_lift",
    "diffusion_soft_lift",
    "vla_soft",
    "wam_soft",
    "wam_rift_soft",
    *(f"vla_soft_ensemble/member_{index}" for index in range(3)),
)
PREPROCESSOR = "policy_preprocessor.json"


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    """A writable copy of the shipped ACT checkpoint (a state policy: cheap envs)."""
    return Path(shutil.copytree(POLICIES / "act_soft_lift", tmp_path / "act"))


@pytest.fixture(scope="module")
def state_env():
    env = gym.make("simroll/SoftLift-v0", object="sponge", obs_mode="state", gripper_mode="delta")
    yield env
    env.close()


def edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def popen_step(marker: Path) -> dict:
    return {"class": "subprocess.Popen", "config": {"args": ["touch", str(marker)]}}


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_checkpoints_pass_and_record_their_env(name):
    contents = validate_checkpoint(POLICIES / name)
    assert contents.config["type"] in ("act", "diffusion", "simvla", "wam")
    assert set(contents.env_record) == {"gripper_mode", "obs_mode", "image_size", "tactile_image"}


def test_a_shipped_checkpoint_still_loads_and_acts(state_env):
    policy = load_policy(state_env, POLICIES / "act_soft_lift")
    obs, _ = state_env.reset(seed=0)
    assert policy.select_action(obs).shape == (5,)


def test_the_attack_is_real_lerobot_alone_runs_a_named_class(checkpoint, tmp_path):
    """Without simroll's check, LeRobot's loader runs the command: what the next test stops."""
    from lerobot.processor import PolicyProcessorPipeline

    marker = tmp_path / "pwned_by_lerobot"
    edit_json(checkpoint / PREPROCESSOR, lambda p: p["steps"].insert(0, popen_step(marker)))
    with pytest.raises(TypeError, match="must inherit from ProcessorStep"):  # after it ran
        PolicyProcessorPipeline.from_pretrained(checkpoint, config_filename=PREPROCESSOR)
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists()


def test_a_processor_step_naming_an_arbitrary_class_is_refused_and_never_runs(
    checkpoint, tmp_path, state_env
):
    marker = tmp_path / "pwned"
    edit_json(checkpoint / PREPROCESSOR, lambda p: p["steps"].insert(0, popen_step(marker)))
    with pytest.raises(UntrustedCheckpointError) as error:
        load_policy(state_env, checkpoint)
    message = str(error.value)
    assert "policy_preprocessor.json step 0" in message and "'subprocess.Popen'" in message
    assert "not a registered processor step" in message
    time.sleep(0.5)
    assert not marker.exists()


def test_a_registered_steps_exact_class_path_is_accepted(checkpoint):
    def by_class(pipeline):
        step = pipeline["steps"][1]
        assert step.pop("registry_name") == "to_batch_processor"
        step["class"] = "lerobot.processor.batch_processor.AddBatchDimensionProcessorStep"

    edit_json(checkpoint / PREPROCESSOR, by_class)
    assert validate_checkpoint(checkpoint).config["type"] == "act"


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"registry_name": "shell_processor"}, "registry_name 'shell_processor', which is not"),
        ({"registry_name": "to_batch_processor", "code": "x"}, "unknown key(s) ['code']"),
        ({"config": {}}, "names no step"),
        ({"registry_name": "to_batch_processor", "config": [1]}, "config must be a JSON object"),
        (
            {"registry_name": "to_batch_processor", "state_file": "../stats.safetensors"},
            "state_file '../stats.safetensors' must be the name of a .safetensors file",
        ),
        (
            {"registry_name": "to_batch_processor", "state_file": "stats.pkl"},
            "state_file 'stats.pkl' must be the name of a .safetensors file",
        ),
        (
            {"registry_name": "rename_observations_processor", "config": {"rename_map": "s.pt"}},
            "'s.pt', a pickle-format file",
        ),
        (
            {"registry_name": "action_tokenizer_processor", "config": {}},
            "trust_remote_code to false",
        ),
    ],
)
def test_bad_processor_steps_are_refused_naming_them(checkpoint, step, message):
    edit_json(checkpoint / PREPROCESSOR, lambda p: p["steps"].append(step))
    with pytest.raises(PolicyLoadError) as error:
        validate_checkpoint(checkpoint)
    assert message in str(error.value) and "step 4" in str(error.value)


def test_an_unregistered_policy_type_is_refused(checkpoint, state_env):
    edit_json(checkpoint / "config.json", lambda c: c.update(type="evil_policy"))
    with pytest.raises(UntrustedCheckpointError) as error:
        load_policy(state_env, checkpoint)
    message = str(error.value)
    assert "policy type 'evil_policy' is not a registered LeRobot policy type" in message
    assert "'act'" in message and "'simvla'" in message


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c.pop("type"), "policy type None is not a registered"),
        (
            lambda c: c.update(pretrained_backbone_weights="evil/repo"),
            "pretrained_backbone_weights='evil/repo' would make the act policy load",
        ),
    ],
)
def test_config_json_without_a_type_or_redirecting_a_fetch_is_refused(checkpoint, edit, message):
    edit_json(checkpoint / "config.json", edit)
    with pytest.raises(UntrustedCheckpointError, match=message):
        validate_checkpoint(checkpoint)


def test_a_config_json_that_is_not_an_object_is_refused(checkpoint):
    (checkpoint / "config.json").write_text("[1, 2]")
    with pytest.raises(UntrustedCheckpointError, match="must hold a JSON object, got list"):
        validate_checkpoint(checkpoint)


def test_pickle_weights_beside_the_safetensors_are_refused(checkpoint):
    (checkpoint / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(UntrustedCheckpointError, match=r"\['pytorch_model.bin'\]"):
        validate_checkpoint(checkpoint)
    (checkpoint / "pytorch_model.bin").unlink()
    (checkpoint / "model.safetensors").unlink()
    with pytest.raises(PolicyLoadError, match="has no model.safetensors"):
        validate_checkpoint(checkpoint)


def test_a_normalizer_shape_that_contradicts_config_json_is_refused(checkpoint):
    def widen(pipeline):
        pipeline["steps"][3]["config"]["features"]["observation.state"]["shape"] = [13]

    edit_json(checkpoint / PREPROCESSOR, widen)
    with pytest.raises(PolicyLoadError, match=r"observation.state has shape \[13\] but .*\[12\]"):
        validate_checkpoint(checkpoint)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"gripper_mode": "magnetic"}, "gripper_mode='magnetic'; expected one of"),
        ({"image_size": "64"}, "image_size='64'; expected an integer in"),
        ({"image_size": 8}, "image_size=8; expected an integer in"),
        ({"tactile_image": 1}, "tactile_image=1; expected one of"),
        ({"render_hook": "os.system"}, "unknown key 'render_hook'"),
    ],
)
def test_a_bad_env_record_is_refused(checkpoint, record, message):
    (checkpoint / ENV_RECORD).write_text(json.dumps(record))
    with pytest.raises(PolicyLoadError, match=message):
        read_env_record(checkpoint)


def test_init_from_refuses_an_untrusted_checkpoint(checkpoint, tmp_path):
    from simroll.train.trainer import TrainingDataError, _pretrained_policy

    marker = tmp_path / "pwned"
    edit_json(checkpoint / PREPROCESSOR, lambda p: p["steps"].insert(0, popen_step(marker)))
    with pytest.raises(TrainingDataError, match=r"init_from=.*subprocess.Popen"):
        _pretrained_policy(None, checkpoint)
    assert not marker.exists()


def test_the_trainer_records_the_datasets_env_with_its_tactile_image(tmp_path):
    from simroll.train.trainer import dataset_env

    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "simroll_collect.yaml").write_text(
        "env:\n  gripper_mode: delta\n  obs_mode: full\n  image_size: 64\n  tasks: [SoftLift]\n"
        "tactile_image: false\nepisodes: 3\n"
    )
    assert dataset_env(tmp_path) == {
        "gripper_mode": "delta",
        "obs_mode": "full",
        "image_size": 64,
        "tactile_image": False,
    }
