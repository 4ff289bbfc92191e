"""scripts/bench_roundtrip.py: train -> bench end to end on tiny synthetic trajectories (no
simulator): every output appears, and the measured model is left as trained."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scripts import bench_roundtrip as script
from simroll.worldmodel.data import STATE_LAYOUT, SplitData, Trajectory
from simroll.worldmodel.pipeline import RoundTripConfig, train
from simroll.worldmodel.roundtrip import RoundTripWorldModel

VERTICES = 4
LOW_DIM = sum(width for name, width in STATE_LAYOUT.items() if name != "shape")


def synthetic_split(name: str, episodes: int, seed: int, gain: float = 1.0) -> SplitData:
    """States drift with the actions (times ``gain``) plus a little noise."""
    rng = np.random.default_rng(seed)
    mixing = np.random.default_rng(0).normal(size=(5, 3 * VERTICES + LOW_DIM)) * 0.02
    split = SplitData(name, "synthetic")
    for episode in range(episodes):
        actions = rng.uniform(-1, 1, size=(30, 5))
        steps = gain * actions @ mixing + rng.normal(0, 0.002, size=(30, mixing.shape[1]))
        states = np.cumsum(np.vstack([rng.normal(size=(1, mixing.shape[1])) * 0.1, steps]), 0)
        split.trajectories.append(Trajectory(states, actions, f"{name}/{episode}", "random", "ok"))
    return split


CONFIG = RoundTripConfig.from_dict(
    {
        "splits": {n: {"episodes": 1} for n in ("train", "calib", "test", "ood_fast")},
        "shape_components": 3,
        "model": {"hidden": 32, "blocks": 1, "time_embed": 8, "inference_steps": 4},
        "train": {"steps": 150, "batch_size": 64},
        "bench": {"depth": 3, "stride": 3, "dispersion_samples": 2, "roundtrip_samples": 2},
    }
)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    """A run directory with synthetic splits and the two trained models (``simroll roundtrip``)."""
    out = tmp_path_factory.mktemp("roundtrip")
    for name, episodes, seed, gain in (
        ("train", 12, 0, 1.0),
        ("calib", 4, 1, 1.0),
        ("test", 4, 2, 1.0),
        ("ood_fast", 4, 3, 3.0),
    ):
        synthetic_split(name, episodes, seed, gain).save(out / "data" / f"{name}.npz")
    summary = train(CONFIG, out, log=lambda _: None)
    assert summary["latent"]["dim"] == 3 + LOW_DIM
    return out


def test_train_and_bench_write_models_results_trust_log_and_figures(trained_run):
    tmp_path = trained_run
    measured = (tmp_path / "models" / "bidirectional" / "model.safetensors").read_bytes()
    results = script.bench(CONFIG, tmp_path, log=lambda _: None)
    for name in ("results.json", "trust_log.jsonl", "windows/test.npz"):
        assert (tmp_path / name).exists(), name
    assert len(list((tmp_path / "figures").glob("roundtrip_*.png"))) == 4
    stored = json.loads((tmp_path / "results.json").read_text())
    assert set(stored["ood"]) == {"ood_fast"}
    assert 0 <= stored["calibration"]["roundtrip"]["coverage_95"] <= 1
    table = script.format_table(results)
    assert "| measure | value | goal |" in table and "geometric mean of 2 backward walks" in table
    assert "ood_fast (mean true error x" in table
    assert set(stored["correlation"]["fixed_depth_latent_single_walk"]) == {"1", "2", "3"}
    calibrated = RoundTripWorldModel.load(tmp_path / script.CALIBRATED_MODEL)
    assert calibrated.calibrator is not None and calibrated.abstain_above is not None
    assert calibrated.roundtrip_samples == 2  # C_i is computed as the calibrator was fitted
    assert (tmp_path / "models" / "bidirectional" / "model.safetensors").read_bytes() == measured
    assert RoundTripWorldModel.load(tmp_path / "models" / "bidirectional").calibrator is None
    row = json.loads((tmp_path / "trust_log.jsonl").read_text().splitlines()[0])
    assert len(row["roundtrip_error"]) == 4 and len(row["interval_95"]) == 2


def test_depth_ranges_are_written_compactly():
    assert script._ranges([1, 2, 3, 5, 7, 8]) == "1-3, 5, 7-8"
    assert script._ranges([]) == ""


def test_main_benches_trained_models_and_ships_the_calibrated_one(
    trained_run, tmp_path, monkeypatch
):
    monkeypatch.setattr(script, "study_config", lambda cfg: CONFIG)
    monkeypatch.setattr(script, "ROOT", tmp_path)
    monkeypatch.setattr(script, "OUT", tmp_path / "results" / "roundtrip.json")
    monkeypatch.setattr(script, "IMAGES", tmp_path / "images")
    monkeypatch.setattr(script, "SHIPPED", tmp_path / "shipped")
    script.main(["stage=bench", f"output_dir={trained_run}", "roundtrip=small"])
    stored = json.loads((tmp_path / "results" / "roundtrip.json").read_text())
    assert stored["runtimes"]["stages_run"] == "bench" and stored["machine"]["cpus"]
    assert "| measure | value | goal |" in stored["table"]
    assert len(stored["figures"]) == 4 and stored["shipped_model"] == "shipped"
    for name in ("model.safetensors", "latent.safetensors", "config.json"):
        assert (tmp_path / "shipped" / name).read_bytes() == (
            trained_run / script.CALIBRATED_MODEL / name
        ).read_bytes()
    assert RoundTripWorldModel.load(tmp_path / "shipped").calibrator is not None
    with pytest.raises(SystemExit, match="simroll roundtrip stage="):
        script.main(["stage=train", f"output_dir={trained_run}"])
