"""Validate CARE on synthetic paired outcomes with known risks; writes benchmarks/results/care.json.

For each setting (epsilon, delta, n, candidates' true risks, family-wise method, risk kind) the
script draws ``--reps`` independent calibration sets (:mod:`simroll.certify.synthetic`) and runs
four selectors on each: fixed-n CARE, sequential CARE, the naive selector (fastest candidate whose
empirical risk is at most epsilon) and per-candidate exact tests without multiplicity correction.
It reports, per selector, the fraction of runs that deploy a candidate whose true risk exceeds
epsilon, with a two-sided 95% Clopper-Pearson interval (CARE's guarantee: at most delta), the
mean deployed speedup, and for the CARE designs the rollouts used as a fraction of the exhaustive
design ((m + 1) n). Everything is vectorised numpy on one core; the default run takes a few minutes.

    python scripts/validate_care.py               # full run, writes benchmarks/results/care.json
    python scripts/validate_care.py --reps 500 --out /tmp/care.json   # quick look
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from simroll.certify.synthetic import (
    SyntheticSetting,
    fixed_selection,
    naive_selection,
    sample_outcomes,
    sequential_selection,
    summarize,
    uncorrected_selection,
)
from simroll.io import write_json_atomic
from simroll.scoring.stats import binomial_rate

ROOT = Path(__file__).resolve().parents[1]
SAVINGS_GOAL = 0.4  # sequential rollouts / exhaustive rollouts

SETTINGS = [
    # Just below and just above the budget; the fastest candidate is just above.
    SyntheticSetting(
        "boundary_joint", 0.10, 0.05, 300, (0.02, 0.06, 0.09, 0.11), (1.5, 2.0, 3.0, 4.0)
    ),
    SyntheticSetting(
        "boundary_conditional",
        0.15,
        0.10,
        200,
        (0.03, 0.10, 0.14, 0.16, 0.25),
        (1.5, 2.0, 3.0, 4.0, 6.0),
        risk="conditional",
        p_reference=0.7,
    ),
    # Worst case for the family-wise error: every candidate sits just above the budget.
    SyntheticSetting(
        "all_just_above_bonferroni",
        0.10,
        0.10,
        400,
        (0.105,) * 5,
        (2.0, 3.0, 4.0, 5.0, 6.0),
        method="bonferroni",
        coupling="independent",
    ),
    SyntheticSetting(
        "all_just_above_fixed_sequence",
        0.10,
        0.10,
        400,
        (0.105,) * 5,
        (2.0, 3.0, 4.0, 5.0, 6.0),
        coupling="independent",
    ),
    SyntheticSetting(
        "small_n", 0.30, 0.20, 30, (0.10, 0.28, 0.32), (2.0, 3.0, 5.0), risk="conditional"
    ),
    SyntheticSetting(
        "many_candidates_bonferroni",
        0.05,
        0.05,
        1000,
        (0.0, 0.005, 0.01, 0.02, 0.03, 0.045, 0.055, 0.08),
        (1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0, 10.0),
        method="bonferroni",
        coupling="independent",
    ),
    # Paper-like: conditional risk (>= 85% of reference-solved episodes preserved), a ladder of
    # accelerations of which the aggressive ones clearly break the task.
    SyntheticSetting(
        "paper_like_conditional",
        0.15,
        0.05,
        400,
        (0.0, 0.01, 0.03, 0.06, 0.35, 0.7),
        (1.5, 2.0, 3.0, 5.0, 8.0, 12.0),
        risk="conditional",
    ),
    SyntheticSetting(
        "paper_like_joint",
        0.10,
        0.05,
        400,
        (0.0, 0.01, 0.03, 0.05, 0.3, 0.6),
        (1.5, 2.0, 3.0, 5.0, 8.0, 12.0),
    ),
    # Tightness: one candidate a hair above the budget, large n; CARE should sit just under delta.
    SyntheticSetting("single_just_above", 0.20, 0.10, 2000, (0.201,), (2.0,)),
]
HEADLINE = "paper_like_conditional"

SELECTORS = {
    "care_fixed": fixed_selection,
    "care_sequential": sequential_selection,
    "naive": naive_selection,
    "uncorrected": uncorrected_selection,
}


def run_setting(setting: SyntheticSetting, reps: int, seed: int, chunk: int) -> dict:
    """Every selector on ``reps`` synthetic calibration sets of ``setting``."""
    rng = np.random.default_rng([seed, SETTINGS.index(setting)])
    parts: dict[str, list[dict[str, np.ndarray]]] = {name: [] for name in SELECTORS}
    for start in range(0, reps, chunk):
        reference, candidates = sample_outcomes(setting, min(chunk, reps - start), rng)
        for name, selector in SELECTORS.items():
            parts[name].append(selector(reference, candidates, setting.settings))
    exhaustive = (setting.m + 1) * setting.n
    result = {"setting": setting.to_dict(), "exhaustive_rollouts": exhaustive}
    for name, chunks in parts.items():
        selection = {key: np.concatenate([c[key] for c in chunks]) for key in chunks[0]}
        summary = summarize(selection, setting)
        rate = binomial_rate(summary["violations"], summary["reps"], method="beta", alpha=0.05)
        summary["violation_rate"] = rate.rate
        summary["violation_ci95"] = [rate.low, rate.high]
        family = binomial_rate(summary["family_errors"], summary["reps"], method="beta")
        summary["family_error_rate"] = family.rate
        summary["family_error_ci95"] = [family.low, family.high]
        summary["within_delta"] = bool(rate.rate <= setting.delta)
        if "mean_rollouts" in summary:
            summary["rollout_fraction"] = summary["mean_rollouts"] / exhaustive
        result[name] = summary
    return result


def _git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def table(results: list[dict]) -> str:
    lines = [
        "| setting | eps | delta | n | m | risk | method | CARE fixed: violations [95% CI] "
        "| CARE seq: violations [95% CI] | naive | uncorrected | speedup fixed / seq "
        "| rollouts fixed / seq (of exhaustive) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        s = r["setting"]
        fixed, seq = r["care_fixed"], r["care_sequential"]

        def cell(x):
            low, high = x["violation_ci95"]
            return f"{x['violation_rate']:.4f} [{low:.4f}, {high:.4f}]"

        lines.append(
            f"| {s['name']} | {s['epsilon']} | {s['delta']} | {s['n']} | {len(s['risks'])} "
            f"| {s['risk']} | {s['method']} | {cell(fixed)} | {cell(seq)} "
            f"| {r['naive']['violation_rate']:.3f} | {r['uncorrected']['violation_rate']:.3f} "
            f"| {fixed['mean_speedup']:.2f} / {seq['mean_speedup']:.2f} "
            f"| {fixed['rollout_fraction']:.3f} / {seq['rollout_fraction']:.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20000, help="calibration runs per setting")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk", type=int, default=1000, help="repetitions per numpy batch")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "care.json")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    results = []
    for setting in SETTINGS:
        tick = time.perf_counter()
        results.append(run_setting(setting, args.reps, args.seed, args.chunk))
        print(f"{setting.name}: {time.perf_counter() - tick:.1f} s", file=sys.stderr, flush=True)
    headline = next(r for r in results if r["setting"]["name"] == HEADLINE)
    fractions = [r["care_sequential"]["rollout_fraction"] for r in results]
    report = {
        "what": "CARE validity on synthetic paired Bernoulli outcomes with known true risks",
        "violation": "deployed candidate's true risk > epsilon (CARE guarantees rate <= delta)",
        "reps_per_setting": args.reps,
        "seed": args.seed,
        "all_care_within_delta": all(
            r[k]["within_delta"] for r in results for k in ("care_fixed", "care_sequential")
        ),
        "naive_max_violation_rate": max(r["naive"]["violation_rate"] for r in results),
        "sequential_savings": {
            "headline_setting": HEADLINE,
            "headline_rollout_fraction": headline["care_sequential"]["rollout_fraction"],
            "headline_fewer_rollouts": 1 - headline["care_sequential"]["rollout_fraction"],
            "goal_fraction": SAVINGS_GOAL,
            "meets_goal": headline["care_sequential"]["rollout_fraction"] <= SAVINGS_GOAL,
            "per_setting": {
                r["setting"]["name"]: r["care_sequential"]["rollout_fraction"] for r in results
            },
            "median_fraction": float(np.median(fractions)),
        },
        "results": results,
        "runtime_s": round(time.perf_counter() - start, 1),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "cpus": os.cpu_count(),
        },
        "git_sha": _git_sha(),
        "command": "python scripts/validate_care.py " + " ".join(argv or sys.argv[1:]),
    }
    write_json_atomic(args.out, report)
    print(table(results))
    print(
        f"\nsequential rollouts / exhaustive, {HEADLINE}: "
        f"{headline['care_sequential']['rollout_fraction']:.3f} (goal <= {SAVINGS_GOAL}); "
        f"all CARE runs within delta: {report['all_care_within_delta']}; "
        f"{report['runtime_s']} s -> {args.out}"
    )
    print(json.dumps(report["sequential_savings"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
