"""``simroll eval`` renders only the cameras a checkpoint reads (its ``input_features``), unless it
records a dataset; every other entry point keeps all cameras."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig

from simroll.cli.common import env_config_from

VLA = Path(__file__).resolve().parents[2] / "policies" / "vla_soft"


@pytest.fixture
def composed():
    from simroll.cli import schema  # noqa: F401 - the typed eval config
    from simroll.cli.eval import CONFIG_DIR

    def compose_eval(*overrides: str):
        with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
            cfg = compose("eval", list(overrides), return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        return cfg

    yield compose_eval
    HydraConfig.instance().cfg = None


def wrist_only_checkpoint(directory: Path) -> Path:
    """The shipped SimVLA's files with the scene camera removed from its inputs (config only)."""
    shutil.copytree(VLA, directory)
    config = json.loads((directory / "config.json").read_text())
    del config["input_features"]["observation.images.scene"]
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def test_eval_env_renders_only_the_cameras_the_checkpoint_reads(composed, tmp_path):
    checkpoint = wrist_only_checkpoint(tmp_path / "wrist_vla")
    cfg = composed("policy=lerobot", f"policy.path={checkpoint}")
    assert env_config_from(cfg.env, cfg.policy, restrict_cameras=True).kwargs == {
        "cameras": ("wrist",)
    }
    assert env_config_from(cfg.env, cfg.policy).kwargs == {}  # collect, certify: all cameras
    # the shipped SimVLA reads both cameras: nothing to restrict
    both = composed("policy=vla")
    assert env_config_from(both.env, both.policy, restrict_cameras=True).kwargs == {}
    # a state policy renders no camera at all
    state = composed("policy=act")
    assert env_config_from(state.env, state.policy, restrict_cameras=True).kwargs == {}
