"""Helpers shared by the test packages: running the ``simroll`` console script as a user would."""

from __future__ import annotations

import subprocess
import sys


def simroll(*args: str, timeout: int = 300, cwd=None) -> subprocess.CompletedProcess:
    """``simroll <args>`` in a new interpreter (this venv's), run in ``cwd`` (default: here),
    output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "simroll.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
