"""An evaluation renders only the cameras a checkpoint reads (its ``input_features``), unless it
records a dataset (``simroll.rollout.settings.only_cameras_read``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from simroll.rollout.episode import EnvConfig
from simroll.rollout.settings import CHECKPOINT_LOADER, only_cameras_read

VLA = Path(__file__).resolve().parents[2] / "policies" / "vla_soft"


def wrist_only_checkpoint(directory: Path) -> Path:
    """The shipped SimVLA's files with the scene camera removed from its inputs (config only)."""
    shutil.copytree(VLA, directory)
    config = json.loads((directory / "config.json").read_text())
    del config["input_features"]["observation.images.scene"]
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def loader(path) -> dict:
    return {"_target_": CHECKPOINT_LOADER, "_partial_": True, "path": str(path)}


def test_only_the_cameras_the_checkpoint_reads_are_rendered(tmp_path):
    full = EnvConfig(obs_mode="full", image_size=64)
    checkpoint = wrist_only_checkpoint(tmp_path / "wrist_vla")
    assert only_cameras_read(full, loader(checkpoint)).kwargs == {"cameras": ("wrist",)}
    # the shipped SimVLA reads both cameras: nothing to restrict
    assert only_cameras_read(full, loader(VLA)) == full
    # not a checkpoint, or a state-mode env: unchanged
    assert only_cameras_read(full, {"_target_": "simroll.experts.SoftExpert"}) == full
    state = EnvConfig(obs_mode="state")
    assert only_cameras_read(state, loader(checkpoint)) == state


def test_an_ensemble_renders_the_cameras_any_member_reads(tmp_path):
    full = EnvConfig(obs_mode="full", image_size=64)
    wrist = loader(wrist_only_checkpoint(tmp_path / "wrist_vla"))
    ensemble = {"_target_": "simroll.policies.ensemble.ensemble_policy"}
    assert only_cameras_read(full, {**ensemble, "members": [wrist, wrist]}).kwargs == {
        "cameras": ("wrist",)
    }
    assert only_cameras_read(full, {**ensemble, "members": [wrist, loader(VLA)]}) == full
    # a member whose cameras are unknown (no checkpoint): every camera
    expert = {"_target_": "simroll.experts.SoftExpert"}
    assert only_cameras_read(full, {**ensemble, "members": [wrist, expert]}) == full
