"""Which code made a result: the git commit of the simroll checkout (and whether it had
uncommitted changes) and the installed package versions. Run manifests keep the code of every
invocation that wrote into a run directory (:mod:`simroll.rollout.manifest`); summaries and
certificates carry it in their provenance (:func:`simroll.scoring.summary.provenance`)."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def git(*args: str) -> str | None:
    """``git <args>``'s output in simroll's checkout; None outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def code_version() -> dict[str, Any]:
    """This process's simroll code: ``git_sha``, ``git_dirty`` (None outside a checkout), where
    dirty the SHA-256 of the uncommitted changes to tracked files (``git_diff_sha256``, so two
    different edits of one commit differ), and the installed ``simroll`` version. Read once per
    process, when a run starts: the code it imported then is what it runs, whatever is committed
    or edited before it ends."""
    return dict(_code_version())


@functools.cache
def _code_version() -> dict[str, Any]:
    status = git("status", "--porcelain")
    dirty = bool(status) if status is not None else None
    diff = git("diff", "HEAD") if dirty else None
    try:
        version = importlib.metadata.version("simroll")
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {
        "git_sha": git("rev-parse", "HEAD"),
        "git_dirty": dirty,
        "git_diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if diff else None,
        "simroll": version,
    }
