"""train -> bench end to end on tiny synthetic trajectories (no simulator): every output appears."""

from __future__ import annotations

import json

import numpy as np

from simroll.worldmodel.bench import bench, format_table
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


def test_train_and_bench_write_models_results_trust_log_and_figures(tmp_path):
    for name, episodes, seed, gain in (
        ("train", 12, 0, 1.0),
        ("calib", 4, 1, 1.0),
        ("test", 4, 2, 1.0),
        ("ood_fast", 4, 3, 3.0),
    ):
        synthetic_split(name, episodes, seed, gain).save(tmp_path / "data" / f"{name}.npz")
    config = RoundTripConfig.from_dict(
        {
            "splits": {n: {"episodes": 1} for n in ("train", "calib", "test", "ood_fast")},
            "shape_components": 3,
            "model": {"hidden": 32, "blocks": 1, "time_embed": 8, "inference_steps": 4},
            "train": {"steps": 150, "batch_size": 64},
            "bench": {"depth": 3, "stride": 3, "dispersion_samples": 2, "roundtrip_samples": 2},
        }
    )
    summary = train(config, tmp_path, log=lambda _: None)
    assert summary["latent"]["dim"] == 3 + LOW_DIM
    results = bench(config, tmp_path, log=lambda _: None)
    for name in ("results.json", "trust_log.jsonl", "windows/test.npz"):
        assert (tmp_path / name).exists(), name
    assert len(list((tmp_path / "figures").glob("roundtrip_*.png"))) == 4
    stored = json.loads((tmp_path / "results.json").read_text())
    assert set(stored["ood"]) == {"ood_fast"}
    assert 0 <= stored["calibration"]["roundtrip"]["coverage_95"] <= 1
    table = format_table(results)
    assert "| measure | value | goal |" in table and "geometric mean of 2 backward walks" in table
    assert "ood_fast (mean true error x" in table
    assert set(stored["correlation"]["fixed_depth_latent_single_walk"]) == {"1", "2", "3"}
    calibrated = RoundTripWorldModel.load(tmp_path / "models" / "bidirectional")
    assert calibrated.calibrator is not None and calibrated.abstain_above is not None
    assert calibrated.roundtrip_samples == 2  # C_i is computed as the calibrator was fitted
    row = json.loads((tmp_path / "trust_log.jsonl").read_text().splitlines()[0])
    assert len(row["roundtrip_error"]) == 4 and len(row["interval_95"]) == 2
