"""Writes a run's summary files: ``summary.json``, ``summary.md`` and ``tolerance_curve.png``.

The JSON holds the per-group scores with intervals, the tolerance sweep, how many episodes the
run's backend ran (``episodes_run``: retries and re-runs to record included; absent when the
caller did not count them), the episodes that ended in error (``errors``, counted as failures in
the scores and listed in ``errored_episodes``; the Markdown says so in bold), the store's health
and the run's provenance (git SHA and dirty flag, package versions, machine, the resolved
config), so every number a user sees can be traced to the command and code that produced it.
Files are written atomically.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simroll.io import write_json_atomic, write_text_atomic
from simroll.provenance import code_version, machine
from simroll.rollout.manifest import ManifestError, read_manifest
from simroll.rollout.records import EpisodeRecord
from simroll.rollout.store import RecordStore
from simroll.scoring.dsr import aggregate, plot_tolerance_sweep, to_markdown, tolerance_sweep

SWEEP_MULTIPLIERS = tuple(float(k) for k in np.round(np.linspace(0.0, 3.0, 31), 2))
_ERRORS_LISTED = 10  # errored episodes named in summary.md; summary.json lists all
PACKAGES = ("simroll", "mujoco", "gymnasium", "lerobot", "torch", "numpy", "scipy", "statsmodels")


def import_report_modules() -> None:
    """Import what writing the report needs (statsmodels for the intervals, matplotlib for the
    plot: 1-2 s of CPU) now. A parallel run calls this while its workers are still starting, so
    the imports do not wait until after the last episode."""
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.figure  # noqa: F401
    import statsmodels.stats.proportion  # noqa: F401


def provenance(
    config: dict[str, Any] | None = None, run_dir: str | Path | None = None
) -> dict[str, Any]:
    """What made a result: this process's code (:func:`simroll.provenance.code_version`),
    package versions, machine, time, command and ``config``. With ``run_dir``, ``code_versions``
    lists the code of every invocation that wrote into it (its manifest's, oldest first): more
    than one entry means its records were made by different code."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    code = code_version()
    result = {
        "git_sha": code["git_sha"],
        "git_dirty": code["git_dirty"],
        "git_diff_sha256": code["git_diff_sha256"],
        "packages": versions,
        "python": platform.python_version(),
        "machine": machine(),
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else None,
        "config": config,
    }
    if run_dir is not None:
        try:
            manifest = read_manifest(run_dir)
        except ManifestError:
            manifest = None
        if manifest is not None and manifest.code:
            result["code_versions"] = manifest.code
    return result


def write_report(
    run_dir: str | Path,
    records: Sequence[EpisodeRecord],
    config: dict[str, Any] | None = None,
    expected: int | None = None,
    episodes_run: int | None = None,
) -> str:
    """Write the report files into ``run_dir`` and return the Markdown table; ``episodes_run``
    is how many episodes this run executed (see the module docstring)."""
    run_dir = Path(run_dir)
    summaries = aggregate(records)
    sweep = tolerance_sweep(records, SWEEP_MULTIPLIERS)
    store = RecordStore(run_dir).load() if (run_dir / "records.jsonl").exists() else None
    missing = None if expected is None else expected - len(records)
    table = to_markdown(summaries)
    if missing:
        table += f"\n\n**Incomplete run:** {missing} of {expected} episodes have no record."
    errored = [record for record in records if record.error is not None]
    if errored:
        shown = ", ".join(f"`{record.spec.key}`" for record in errored[:_ERRORS_LISTED])
        more = f" and {len(errored) - _ERRORS_LISTED} more" if len(errored) > _ERRORS_LISTED else ""
        table += (
            f"\n\n**Episodes in error:** {len(errored)} of {len(records)} episodes ended in error "
            f"(the policy raised or its worker died) and count as failures: {shown}{more}."
        )
    if store is not None and not store.ok:
        table += f"\n\n**Record store problems:** {store.summary()}"
    write_json_atomic(
        run_dir / "summary.json",
        {
            "groups": [summary.to_dict() for summary in summaries],
            "tolerance_sweep": sweep,
            "episodes": len(records),
            "expected_episodes": expected,
            **({} if episodes_run is None else {"episodes_run": episodes_run}),
            "errors": len(errored),
            "errored_episodes": [
                {
                    "key": record.spec.key,
                    "attempt": record.extra.get("attempt", 1),
                    "error": record.error.strip().splitlines()[0] if record.error.strip() else "",
                }
                for record in errored
            ],
            "store": None if store is None else store.summary(),
            "provenance": provenance(config, run_dir),
        },
    )
    write_text_atomic(run_dir / "summary.md", table + "\n")
    plot_tolerance_sweep(sweep, run_dir / "tolerance_curve.png")
    return table
