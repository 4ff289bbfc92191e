"""The LeRobot workflow end to end, through the command-line tools a user runs, offline:
``simroll collect`` -> ``lerobot-train`` (ACT and SimVLA) -> ``lerobot-eval --env.type=simroll`` ->
``simroll eval policy=lerobot`` on the same checkpoint.

The dataset is two gentle-expert SoftLift episodes on the sponge at 64 px with simroll collect's
other defaults (camera and tactile images as videos, tactile forces and markers); the policies are
tiny and train for a few steps, so success is not expected, only that every tool accepts what the
previous one wrote without extra flags beyond the offline ones (``--policy.push_to_hub=false``,
``--wandb.enable=false`` and, for ACT, ``--policy.pretrained_backbone_weights=null``: no ImageNet
ResNet download) and the image size. ``HF_HUB_OFFLINE=1`` makes any hub access fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lerobot_env_simroll", reason="plugin not installed (make installs it)")
pytest.importorskip("lerobot_policy_simvla", reason="plugin not installed (make installs it)")

IMAGE_SIZE = 64
TRAIN_STEPS = 3
# Tiny architectures: the test checks the plumbing, not the learning.
POLICY_FLAGS = {
    "act": [
        "--policy.pretrained_backbone_weights=null",  # offline: no ImageNet ResNet download
        "--policy.dim_model=32",
        "--policy.n_heads=2",
        "--policy.dim_feedforward=64",
        "--policy.n_encoder_layers=1",
        "--policy.n_decoder_layers=1",
        "--policy.chunk_size=5",
        "--policy.n_action_steps=5",
    ],
    "simvla": [
        "--policy.dim_model=32",
        "--policy.n_heads=2",
        "--policy.stem_channels=8",
        "--policy.n_encoder_layers=1",
        "--policy.n_decoder_layers=1",
        "--policy.chunk_size=4",
        "--policy.n_action_steps=4",
        "--policy.num_flow_steps=2",
    ],
}


def tool(name: str) -> str:
    """The console script ``name`` of this interpreter's environment."""
    script = Path(sys.executable).with_name(name)
    if not script.exists():
        pytest.fail(f"{script} is missing: install the package with `make` (pip install -e)")
    return str(script)


def run_tool(args: list[str], home: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",  # nothing may come from a hub
        "HF_LEROBOT_HOME": str(home),  # nothing written to the user's LeRobot cache
        "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
        "OMP_NUM_THREADS": "1",  # tiny models gain nothing from threads on a shared CPU
        "WANDB_MODE": "disabled",
    }
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    command = " ".join(Path(args[0]).name if i == 0 else a for i, a in enumerate(args))
    assert result.returncode == 0, (
        f"{command} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    )
    return result


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("lerobot_home")


@pytest.fixture(scope="module")
def collected(tmp_path_factory, home) -> Path:
    root = tmp_path_factory.mktemp("workflow") / "soft_lift_expert"
    run_tool(
        [
            tool("simroll"),
            "collect",
            "env=soft_lift",
            "env.objects=[sponge]",
            f"env.image_size={IMAGE_SIZE}",
            "episodes=2",
            "progress=false",
            f"output_dir={root}",
        ],
        home,
    )
    return root


# A real collect (~20 s); tests/test_lerobot_plugin.py checks the same agreement from the configs.
@pytest.mark.slow
def test_a_collected_dataset_has_the_features_of_the_lerobot_env_plugin(collected):
    """What ``simroll collect`` wrote is what ``--env.type=simroll`` gives a policy at the same
    image size, with every other setting at its default."""
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata
    from lerobot.envs.configs import EnvConfig
    from lerobot.envs.utils import env_to_policy_features
    from lerobot.utils.feature_utils import dataset_to_policy_features

    meta = LeRobotDatasetMetadata("simroll/soft_lift_expert", root=collected)
    assert meta.total_episodes == 2
    dataset = dataset_to_policy_features(meta.features)
    env = env_to_policy_features(EnvConfig.get_choice_class("simroll")(image_size=IMAGE_SIZE))
    assert {key: (f.type, f.shape) for key, f in dataset.items()} == {
        key: (f.type, f.shape) for key, f in env.items()
    }
    assert "observation.tactile_markers" in dataset  # what SimVLA must ignore


def checkpoint_of(output: Path) -> Path:
    checkpoint = output / "checkpoints" / "last" / "pretrained_model"
    for name in ("config.json", "model.safetensors", "policy_preprocessor.json"):
        assert (checkpoint / name).is_file(), f"lerobot-train wrote no {checkpoint / name}"
    return checkpoint


@pytest.mark.parametrize(
    "policy",
    # ~1 min (SimVLA) and ~2.5 min (ACT's ResNet-18) on a 2-core machine: `make test-slow`.
    [pytest.param("act", marks=pytest.mark.slow), pytest.param("simvla", marks=pytest.mark.slow)],
)
def test_lerobot_train_then_lerobot_eval_then_simroll_eval(policy, collected, home, tmp_path):
    run_tool(
        [
            tool("lerobot-train"),
            "--dataset.repo_id=simroll/soft_lift_expert",
            f"--dataset.root={collected}",
            f"--policy.type={policy}",
            "--policy.device=cpu",
            "--policy.push_to_hub=false",
            *POLICY_FLAGS[policy],
            f"--steps={TRAIN_STEPS}",
            "--batch_size=4",
            "--num_workers=0",
            f"--save_freq={TRAIN_STEPS}",
            "--log_freq=1",
            "--wandb.enable=false",
            f"--output_dir={tmp_path / 'train'}",
        ],
        home,
    )
    checkpoint = checkpoint_of(tmp_path / "train")
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["type"] == policy
    inputs = set(config["input_features"])
    assert {"observation.state", "observation.images.scene", "observation.tactile"} <= inputs
    # ACT keeps (and ignores) every dataset feature; SimVLA drops those it does not read.
    assert ("observation.tactile_markers" in inputs) == (policy == "act")

    # lerobot-eval with the env plugin's defaults: only the image size differs from them.
    evaluation = tmp_path / "lerobot_eval"
    run_tool(
        [
            tool("lerobot-eval"),
            "--env.type=simroll",
            "--env.task=SoftLift-v0",
            f"--env.image_size={IMAGE_SIZE}",
            "--env.episode_length=10",
            "--env.render_height=64",
            "--env.render_width=64",
            f"--policy.path={checkpoint}",
            "--policy.device=cpu",
            "--eval.n_episodes=1",
            "--eval.batch_size=1",
            f"--output_dir={evaluation}",
        ],
        home,
    )
    info = json.loads((evaluation / "eval_info.json").read_text())
    assert info["overall"]["n_episodes"] == 1

    # simroll's own evaluator on the same checkpoint.
    run = tmp_path / "simroll_eval"
    run_tool(
        [
            tool("simroll"),
            "eval",
            "env=soft_lift",
            "env.objects=[sponge]",
            "env.obs_mode=full",
            f"env.image_size={IMAGE_SIZE}",
            "policy=lerobot",
            f"policy.path={checkpoint}",
            "episodes=1",
            "video.episodes=0",
            "progress=false",
            f"output_dir={run}",
        ],
        home,
    )
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert len(records) == 1
    record = records[0]
    assert not record["errored"] and record["steps"] > 0, record
    assert record["policy_id"] == "lerobot" and record["network_evaluations"] > 0
