"""Which code made a result, and on what: the git commit of the simroll checkout (and whether it
had uncommitted changes), the installed package versions, and the machine (:func:`machine`: its
CPU model and the vector instructions torch's kernels use, since the same seed can give other
floats, and so other episodes, on another CPU). Run manifests keep the code of every
invocation that wrote into a run directory (:mod:`simroll.rollout.manifest`); summaries and
certificates carry it in their provenance (:func:`simroll.scoring.summary.provenance`)."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import platform
import subprocess
import sys
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


def machine() -> dict[str, Any]:
    """The machine of this process: ``platform``, ``processor`` (the architecture), ``cpu`` (the
    CPU model, from ``/proc/cpuinfo`` where there is one) and ``torch_cpu_capability`` (the
    widest vector instruction set torch's CPU kernels dispatch to, e.g. ``AVX512``; None when
    torch was not imported). MuJoCo's and torch's kernels pick their vector paths by CPU, so an
    episode's floats, and through contact and sampling its outcome, can differ between CPUs with
    the same code and packages: compare results measured on one machine."""
    torch = sys.modules.get("torch")
    capability = None
    if torch is not None:
        try:
            capability = str(torch.backends.cpu.get_cpu_capability())
        except (AttributeError, RuntimeError):
            capability = None
    return {**_machine(), "torch_cpu_capability": capability}


@functools.cache
def _machine() -> dict[str, Any]:
    cpu = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "processor": platform.machine(),
        "cpu": cpu or platform.processor() or None,
    }
