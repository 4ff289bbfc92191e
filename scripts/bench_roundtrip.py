"""Benchmarks round-trip consistency and writes benchmarks/results/roundtrip.json + README figures.

Runs ``simroll roundtrip`` (the small preset unless overridden) to collect trajectories from the
simulator (SoftLift and SoftSqueeze on the sponge, scripted expert with noise and squeeze-release
exploration), fit the PCA latent and train the bidirectional diffusion world model and a
forward-only specialist, then measures them (:func:`bench`) on held-out episodes and on shifted
regimes never seen in training (a 4x softer, a 2.5x stiffer and a 20x softer sponge, a 2.5x
heavier sponge, and an unseen object, tofu):

* Spearman correlation of C_i (the geometric mean of ``bench.roundtrip_samples`` backward walks
  of the one forward prediction) with the true error E_i at fixed depth and within trajectories,
  and of a single walk beside it;
* the calibrator's ratio error and 68% / 95% interval coverage (vs a depth-only calibrator);
* AUROC of C_i for flagging the shifted regimes (beside the true error's own AUROC, the ceiling
  of any faithful error proxy) and a sampling-dispersion baseline;
* error reduction at 80% coverage when abstaining on C_i, vs on depth alone;
* forward accuracy of the bidirectional model vs the forward-only specialist.

Into the run's ``output_dir`` it writes ``results.json``, ``windows/<split>.npz`` (per-window C_i,
E_i), ``trust_log.jsonl`` (the trust rows of the test rollouts, as every world-model rollout
carries them), ``figures/`` and ``models/calibrated/``: the measured bidirectional model with the
calibrator and the abstention threshold fitted here. The measured model, ``models/bidirectional/``,
is left as trained, so benching again measures the same model.

Why the calibrator is fitted on the calibration split (episodes the world model did not train on)
rather than on the training rollouts: on its own training transitions the model is more accurate
than anywhere else, so a calibrator fitted there predicts too-small errors; the results report
that variant too (``calibration.fit_on_train_instead``), and ``bench.calibrate_on=train`` selects
it.

Run: ``python scripts/bench_roundtrip.py [hydra overrides]``, e.g. ``stage=bench`` to re-bench
trained models, ``roundtrip=large`` for the larger run. The small preset takes ~12-15 minutes on
one core (``threads=1``); collected data and models stay under ``runs/roundtrip/<preset>/``, and
the calibrated small model is copied to ``benchmarks/models/roundtrip_small/`` (load it with
``RoundTripWorldModel.load``).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

from simroll.cli.roundtrip import CONFIG_DIR, run, study_config  # noqa: E402
from simroll.io import atomic_path, write_bytes_atomic, write_json_atomic  # noqa: E402
from simroll.worldmodel.calibrate import RoundTripCalibrator  # noqa: E402
from simroll.worldmodel.data import vertex_positions  # noqa: E402
from simroll.worldmodel.evaluate import (  # noqa: E402
    WindowResults,
    Windows,
    auroc,
    evaluate_windows,
    make_windows,
    selective_error,
    spearman,
    within_trajectory_spearman,
)
from simroll.worldmodel.latent import StateLatent  # noqa: E402
from simroll.worldmodel.model import DiffusionWorldModel  # noqa: E402
from simroll.worldmodel.pipeline import RoundTripConfig, load_split, split_summary  # noqa: E402
from simroll.worldmodel.plots import make_figures  # noqa: E402
from simroll.worldmodel.roundtrip import RoundTripWorldModel  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "roundtrip.json"
IMAGES = ROOT / "docs" / "images"
SHIPPED = ROOT / "benchmarks" / "models" / "roundtrip_small"
CALIBRATED_MODEL = Path("models") / "calibrated"  # in the run's output_dir
STAGES = ("all", "bench")  # all: simroll roundtrip (collect, train), then bench


def main(overrides: list[str]) -> None:
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(config_name="roundtrip", overrides=overrides)
    if cfg.stage not in STAGES:
        raise SystemExit(
            f"stage={cfg.stage}: this script runs stage=all (collect, train, bench) or "
            "stage=bench; collect or train alone is `simroll roundtrip stage=...`"
        )
    start = time.perf_counter()
    if cfg.stage == "all":
        run(cfg)
    config = study_config(cfg)
    torch.set_num_threads(cfg.threads)
    out = Path(cfg.output_dir)
    measured = bench(config, out)
    total_s = time.perf_counter() - start
    results = json.loads((out / "results.json").read_text())
    train = json.loads((out / "train.json").read_text()) if (out / "train.json").exists() else {}
    collect_s = sum(split["collect_s"] for split in results["data"].values())
    results["runtimes"].update(
        collect_s=collect_s,
        train_bidirectional_s=train.get("bidirectional", {}).get("train_s"),
        train_forward_only_s=train.get("forward", {}).get("train_s"),
        this_command_s=total_s,
        stages_run=cfg.stage,
    )
    results["machine"] = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "mujoco": mujoco.__version__,
    }
    results["command"] = " ".join(["python scripts/bench_roundtrip.py", *overrides]).strip()
    results["date"] = time.strftime("%Y-%m-%d %H:%M:%S")
    results["table"] = format_table(measured)
    figures = []
    for figure in sorted((out / "figures").glob("roundtrip_*.png")):
        figures.append(str(write_bytes_atomic(IMAGES / figure.name, figure.read_bytes())))
    results["figures"] = [str(Path(f).relative_to(ROOT)) for f in figures]
    if cfg.preset == "small":  # the calibrated small model ships (safetensors, < 1 MB)
        for name in ("model.safetensors", "latent.safetensors", "config.json"):
            write_bytes_atomic(SHIPPED / name, (out / CALIBRATED_MODEL / name).read_bytes())
        results["shipped_model"] = str(SHIPPED.relative_to(ROOT))
    write_json_atomic(OUT, results)
    print(results["table"])
    print(f"wrote {OUT.relative_to(ROOT)} and {len(figures)} figures in docs/images/")


@dataclass
class SplitEval:
    windows: Windows
    bidirectional: WindowResults
    forward: WindowResults | None = None


def bench(config: RoundTripConfig, out: Path, log: Callable[[str], None] = print) -> dict:
    """Measure C_i against E_i on held-out windows of the models ``simroll roundtrip`` trained in
    ``out``; write results.json, figures, the trust log and the calibrated model."""
    start_time = time.perf_counter()
    bidirectional = RoundTripWorldModel.load(out / "models" / "bidirectional")
    forward_only = DiffusionWorldModel.load(out / "models" / "forward")
    latent, model = bidirectional.latent, bidirectional.model
    b = config.bench
    evals: dict[str, SplitEval] = {}
    names = [config.bench.calibrate_on, "test", *config.ood_splits]
    for name in dict.fromkeys(names):
        split = load_split(out, name)
        windows = make_windows(split, latent, b.depth, b.stride)
        start = time.perf_counter()
        result = evaluate_windows(
            model,
            latent,
            windows,
            b.seed,
            dispersion_samples=b.dispersion_samples,
            roundtrip_samples=b.roundtrip_samples,
        )
        forward = None
        if name == "test":
            forward = evaluate_windows(forward_only, latent, windows, b.seed, with_roundtrip=False)
        evals[name] = SplitEval(windows, result, forward)
        _save_windows(out / "windows" / f"{name}.npz", evals[name])
        log(f"bench: {name}: {len(windows)} windows in {time.perf_counter() - start:.0f} s")
    eval_s = time.perf_counter() - start_time

    depths = np.arange(b.depth + 1)
    test = evals["test"]
    fit_on = evals[b.calibrate_on]
    calibrator = _fit(fit_on.bidirectional, depths, "roundtrip")
    depth_only = _fit(fit_on.bidirectional, depths, "depth")
    c_test, e_test = test.bidirectional.roundtrip[:, 1:], test.bidirectional.error[:, 1:]
    depth_grid = np.broadcast_to(depths[1:], c_test.shape)
    calibration = {
        "fit_on": b.calibrate_on,
        "fit_samples": calibrator.fitted_on,
        "coefficients": calibrator.coefficients.tolist(),
        "roundtrip": calibrator.evaluate(c_test, depth_grid, e_test),
        "depth_only": depth_only.evaluate(c_test, depth_grid, e_test),
        "depth_only_coefficients": depth_only.coefficients.tolist(),
    }
    calibration["nll_gain_nats"] = (
        calibration["depth_only"]["nll_nats"] - calibration["roundtrip"]["nll_nats"]
    )
    if b.calibrate_on != "train" and (out / "data" / "train.npz").exists():
        calibration["fit_on_train_instead"] = _train_fit_check(
            config, out, model, latent, c_test, depth_grid, e_test
        )

    # selective prediction: pooled over windows and depths 1..D
    predicted = calibrator.predict(c_test, depth_grid)
    selective = {
        "coverage": b.coverage,
        "roundtrip": selective_error(predicted, e_test, b.coverage, b.seed),
        "depth_only": selective_error(depth_grid.astype(float), e_test, b.coverage, b.seed),
        "oracle": selective_error(e_test, e_test, b.coverage, b.seed),
    }
    if test.bidirectional.dispersion is not None:
        selective["dispersion"] = selective_error(
            test.bidirectional.dispersion[:, 1:], e_test, b.coverage, b.seed
        )
    gain = selective["roundtrip"]["error_reduction"]
    base = selective["depth_only"]["error_reduction"]
    selective["ratio_to_depth_only"] = gain / base if base > 0 else float("inf")
    # the abstention threshold: the calibrated estimate that keeps `coverage` of calib windows
    c_fit = fit_on.bidirectional.roundtrip[:, 1:]
    fit_predicted = calibrator.predict(c_fit, np.broadcast_to(depths[1:], c_fit.shape))
    threshold = float(np.quantile(fit_predicted, b.coverage))
    selective["abstain_above"] = threshold
    selective["test_coverage_at_threshold"] = float((predicted <= threshold).mean())
    selective["fixed_depth"] = {
        "depth": b.depth,
        "roundtrip": selective_error(c_test[:, -1], e_test[:, -1], b.coverage, b.seed),
        "oracle": selective_error(e_test[:, -1], e_test[:, -1], b.coverage, b.seed),
    }

    correlation = {
        "fixed_depth_latent": {
            int(i): spearman(test.bidirectional.roundtrip[:, i], test.bidirectional.error[:, i])
            for i in depths[1:]
        },
        "fixed_depth_vertex_mm": {
            int(i): spearman(
                test.bidirectional.roundtrip[:, i], test.bidirectional.vertex_error_mm[:, i]
            )
            for i in depths[1:]
        },
        "within_trajectory": {
            int(i): within_trajectory_spearman(
                test.bidirectional.roundtrip[:, i],
                test.bidirectional.error[:, i],
                test.windows.episode,
            )
            for i in sorted({1, b.depth // 2, b.depth})
        },
    }
    if b.roundtrip_samples > 1:  # what averaging the backward walks buys
        correlation["fixed_depth_latent_single_walk"] = {
            int(i): spearman(
                test.bidirectional.roundtrip_single[:, i], test.bidirectional.error[:, i]
            )
            for i in depths[1:]
        }
    if test.bidirectional.dispersion is not None:
        correlation["fixed_depth_dispersion_baseline"] = {
            int(i): spearman(test.bidirectional.dispersion[:, i], test.bidirectional.error[:, i])
            for i in depths[1:]
        }
    ood = {name: _ood(test, evals[name], depths) for name in config.ood_splits}
    accuracy = _accuracy(test, depths)

    # persist the calibrated model (beside the measured one, which stays as trained), the trust
    # log of the test rollouts and the figures
    calibrated = RoundTripWorldModel(latent, model, calibrator, threshold, b.roundtrip_samples)
    calibrated.save(out / CALIBRATED_MODEL)
    log_start = time.perf_counter()
    trusted = calibrated.rollout(
        latent.decode(test.windows.start), test.windows.actions, seed=b.seed
    )
    trust_log_s = time.perf_counter() - log_start
    with (
        atomic_path(out / "trust_log.jsonl") as temporary,
        open(temporary, "w", encoding="utf-8") as file,
    ):
        for row, episode, step, error in zip(
            trusted.log_rows(),
            test.windows.episode,
            test.windows.step,
            test.bidirectional.error,
            strict=True,
        ):
            row.update(episode=int(episode), start_step=int(step))
            row["true_error"] = [round(float(e), 6) for e in error]
            file.write(json.dumps(row) + "\n")
    reconstruction_mm = _reconstruction_mm(latent, test.windows)

    results = {
        "config": _jsonable(asdict(config)),
        "data": {name: split_summary(load_split(out, name)) for name in _split_names(config)},
        "latent": {
            "kind": "pca",
            "dim": latent.dim,
            "shape_components": len(latent.components),
            "explained_variance_ratio": latent.explained_variance_ratio,
            "test_reconstruction_rms_mm": reconstruction_mm,
        },
        "windows": {name: len(e.windows) for name, e in evals.items()},
        "correlation": correlation,
        "calibration": calibration,
        "ood": ood,
        "selective": selective,
        "accuracy": accuracy,
        "runtimes": {
            "bench_eval_s": eval_s,
            "trusted_rollout_s_per_window": trust_log_s / len(test.windows),
            "bench_total_s": time.perf_counter() - start_time,
        },
    }
    results["headline"] = headline(results, config)
    write_json_atomic(out / "results.json", _jsonable(results))
    results["figures"] = [str(p) for p in make_figures(out / "figures", evals, calibrator, results)]
    write_json_atomic(out / "results.json", _jsonable(results))
    return results


def _save_windows(path: Path, evaluation: SplitEval) -> None:
    r = evaluation.bidirectional
    arrays = {
        "roundtrip": r.roundtrip,
        "error": r.error,
        "vertex_error_mm": r.vertex_error_mm,
        "episode": evaluation.windows.episode,
        "start_step": evaluation.windows.step,
    }
    if r.dispersion is not None:
        arrays["dispersion"] = r.dispersion
    if evaluation.forward is not None:
        arrays["forward_only_error"] = evaluation.forward.error
    with atomic_path(path) as temporary, open(temporary, "wb") as file:
        np.savez_compressed(file, **arrays)


def _split_names(config: RoundTripConfig) -> list[str]:
    return [s.name for s in config.splits]


def _fit(results: WindowResults, depths: np.ndarray, features: str) -> RoundTripCalibrator:
    c, e = results.roundtrip[:, 1:], results.error[:, 1:]
    return RoundTripCalibrator.fit(c, np.broadcast_to(depths[1:], c.shape), e, features)


def _train_fit_check(config, out, model, latent, c_test, depth_grid, e_test) -> dict:
    """Calibrator fitted on windows of the training split (what the model learned from)."""
    b = config.bench
    windows = make_windows(load_split(out, "train"), latent, b.depth, max(b.stride, 4))
    result = evaluate_windows(model, latent, windows, b.seed, roundtrip_samples=b.roundtrip_samples)
    calibrator = _fit(result, np.arange(b.depth + 1), "roundtrip")
    return calibrator.evaluate(c_test, depth_grid, e_test)


def _ood(test: SplitEval, shifted: SplitEval, depths: np.ndarray) -> dict:
    ours, theirs = test.bidirectional, shifted.bidirectional
    result: dict[str, Any] = {
        "windows": len(shifted.windows),
        "window_auroc": {
            int(i): auroc(ours.roundtrip[:, i], theirs.roundtrip[:, i]) for i in depths[1:]
        },
        "window_auroc_true_error": {
            int(i): auroc(ours.error[:, i], theirs.error[:, i]) for i in depths[1:]
        },
        "mean_true_error_ratio": {
            int(i): float(theirs.error[:, i].mean() / ours.error[:, i].mean()) for i in depths[1:]
        },
    }
    if ours.dispersion is not None:
        result["window_auroc_dispersion_baseline"] = {
            int(i): auroc(ours.dispersion[:, i], theirs.dispersion[:, i]) for i in depths[1:]
        }
    # an episode is flagged by the geometric mean of its windows' scores: C_i spans orders of
    # magnitude, and the quiet windows (object at rest) carry the signal of an unfamiliar
    # object as much as the busy ones
    per_episode: dict[str, dict[int, float]] = {}
    for key, values in (
        ("roundtrip", "roundtrip"),
        ("true_error", "error"),
        ("dispersion_baseline", "dispersion"),
    ):
        a, c = getattr(ours, values), getattr(theirs, values)
        if a is None:
            continue
        per_episode[key] = {
            int(i): auroc(
                _episode_log_means(a[:, i], test.windows.episode),
                _episode_log_means(c[:, i], shifted.windows.episode),
            )
            for i in depths[1:]
        }
    result["episode_auroc"] = per_episode
    result["episodes"] = int(len(np.unique(shifted.windows.episode)))
    return result


def _episode_log_means(values: np.ndarray, episode: np.ndarray) -> np.ndarray:
    logs = np.log(np.maximum(values, 1e-9))
    return np.array([logs[episode == e].mean() for e in np.unique(episode)])


def _accuracy(test: SplitEval, depths: np.ndarray) -> dict:
    bi, fo = test.bidirectional, test.forward
    result = {
        "bidirectional_error": {int(i): float(bi.error[:, i].mean()) for i in depths[1:]},
        "forward_only_error": {int(i): float(fo.error[:, i].mean()) for i in depths[1:]},
        "bidirectional_vertex_mm": {
            int(i): float(bi.vertex_error_mm[:, i].mean()) for i in depths[1:]
        },
        "forward_only_vertex_mm": {
            int(i): float(fo.vertex_error_mm[:, i].mean()) for i in depths[1:]
        },
    }
    result["forward_only_over_bidirectional"] = {
        int(i): result["forward_only_error"][int(i)] / result["bidirectional_error"][int(i)]
        for i in depths[1:]
    }
    return result


def _reconstruction_mm(latent: StateLatent, windows: Windows) -> float:
    states = windows.states[:, 0]
    vertices = len(latent.shape_mean) // 3
    a = vertex_positions(latent.decode(latent.encode(states)), vertices)
    t = vertex_positions(states, vertices)
    return float(1000 * np.sqrt(((a - t) ** 2).sum(-1).mean()))


def headline(results: dict, config: RoundTripConfig) -> dict:
    """The numbers the issue asks for, at the largest depth D."""
    depth = config.bench.depth
    corr = results["correlation"]
    fixed = list(corr["fixed_depth_latent"].values())
    within = corr["within_trajectory"][depth]
    cal = results["calibration"]
    sel = results["selective"]
    acc = results["accuracy"]
    row = {
        "depth": depth,
        "roundtrip_samples": config.bench.roundtrip_samples,
        "spearman_fixed_depth_D": corr["fixed_depth_latent"][depth],
        "spearman_ge_0.9_at_depths": [
            int(i) for i, v in corr["fixed_depth_latent"].items() if v >= 0.9
        ],
        "spearman_fixed_depth_range": [float(np.nanmin(fixed)), float(np.nanmax(fixed))],
        "spearman_within_trajectory_D": [within["mean"], within["std"]],
        "calibrator_ratio_error_68_95": [
            cal["roundtrip"]["ratio_error_68"],
            cal["roundtrip"]["ratio_error_95"],
        ],
        "calibrator_coverage_68_95": [
            cal["roundtrip"]["coverage_68"],
            cal["roundtrip"]["coverage_95"],
        ],
        "depth_only_ratio_error_68_95": [
            cal["depth_only"]["ratio_error_68"],
            cal["depth_only"]["ratio_error_95"],
        ],
        "nll_gain_over_depth_only_nats": cal["nll_gain_nats"],
        "error_reduction_at_coverage": sel["roundtrip"]["error_reduction"],
        "depth_only_error_reduction_at_coverage": sel["depth_only"]["error_reduction"],
        "forward_only_over_bidirectional_error_D": acc["forward_only_over_bidirectional"][depth],
    }
    if "fixed_depth_latent_single_walk" in corr:
        row["spearman_fixed_depth_D_single_walk"] = corr["fixed_depth_latent_single_walk"][depth]
    for name, ood in results["ood"].items():
        row[f"auroc_{name}_window_D"] = ood["window_auroc"][depth]
        row[f"auroc_{name}_episode_D"] = ood["episode_auroc"]["roundtrip"][depth]
        row[f"true_error_ratio_{name}_D"] = ood["mean_true_error_ratio"][depth]
    row["goals"] = {
        "spearman_fixed_depth_ge_0.9": bool(row["spearman_fixed_depth_D"] >= 0.9),
        "ood_auroc_ge_0.95": {
            name: bool(row[f"auroc_{name}_episode_D"] >= 0.95) for name in results["ood"]
        },
    }
    return row


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, slice):
        return [value.start, value.stop]
    return value


def _ranges(values: list[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``"1-3, 5"``."""
    parts: list[str] = []
    for v in sorted(values):
        if parts and parts[-1][1] == v - 1:
            parts[-1][1] = v
        else:
            parts.append([v, v])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in parts)


def format_table(results: dict) -> str:
    """The headline numbers as a Markdown table (what the README shows)."""
    h = results["headline"]
    d = h["depth"]
    low, high = h["spearman_fixed_depth_range"]
    within_mean, within_std = h["spearman_within_trajectory_D"]
    ratio, ratio_depth = h["calibrator_ratio_error_68_95"], h["depth_only_ratio_error_68_95"]
    coverage = h["calibrator_coverage_68_95"]
    samples = h.get("roundtrip_samples", 1)
    met = h.get("spearman_ge_0.9_at_depths", [])
    single = h.get("spearman_fixed_depth_D_single_walk")
    value = f"{h['spearman_fixed_depth_D']:.3f} at i={d} (i=1..{d}: {low:.3f}-{high:.3f}; "
    value += f">= 0.9 at i={_ranges(met)})" if met else "none >= 0.9)"
    if single is not None:
        value += f"; one backward walk: {single:.3f} at i={d}"
    what = f"geometric mean of {samples} backward walks" if samples > 1 else "one backward walk"
    rows = [
        (
            f"Spearman(C_i, E_i) at fixed depth, held-out windows (C_i: {what})",
            value,
            ">= 0.9",
        ),
        (
            f"Spearman within trajectories (across start times, i={d})",
            f"{within_mean:.3f} +- {within_std:.3f}",
            "",
        ),
        (
            "calibrator ratio error, 68th / 95th percentile",
            f"{ratio[0]:.2f}x / {ratio[1]:.2f}x (depth only: "
            f"{ratio_depth[0]:.2f}x / {ratio_depth[1]:.2f}x)",
            "",
        ),
        (
            "calibrator coverage, 68% / 95% intervals",
            f"{coverage[0]:.3f} / {coverage[1]:.3f}",
            "near 0.68 / 0.95",
        ),
        (
            "log-likelihood gain over depth-only",
            f"{h['nll_gain_over_depth_only_nats']:.2f} nats",
            "",
        ),
    ]
    for name, ood in results["ood"].items():
        rows.append(
            (
                f"AUROC {name} (mean true error x{h[f'true_error_ratio_{name}_D']:.2f} of "
                f"held-out): per episode / per window, i={d} (true error E alike)",
                f"{h[f'auroc_{name}_episode_D']:.3f} / {h[f'auroc_{name}_window_D']:.3f} "
                f"(E: {ood['episode_auroc']['true_error'][d]:.3f} / "
                f"{ood['window_auroc_true_error'][d]:.3f})",
                ">= 0.95",
            )
        )
    sel = results["selective"]
    reduction = {k: sel[k]["error_reduction"] for k in ("roundtrip", "depth_only", "oracle")}
    rows.append(
        (
            f"error reduction at {sel['coverage']:.0%} coverage (pooled i=1..{d})",
            f"{reduction['roundtrip']:.1%} vs depth-only {reduction['depth_only']:.1%} "
            f"(oracle {reduction['oracle']:.1%})",
            "",
        )
    )
    ratio_fwd = results["accuracy"]["forward_only_over_bidirectional"]
    rows.append(
        (
            f"forward error, forward-only / bidirectional (i=1 / {d // 2} / {d})",
            f"{ratio_fwd[1]:.3f} / {ratio_fwd[d // 2]:.3f} / {ratio_fwd[d]:.3f}",
            "> 1: bidirectional better",
        )
    )
    lines = ["| measure | value | goal |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1:])
