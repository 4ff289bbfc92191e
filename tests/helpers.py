"""Helpers shared by the test packages: running the ``simroll`` console script as a user would,
loading a script under ``scripts/`` as a module, and a LeRobot policy's action by LeRobot's own
loop."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` loaded as a module (scripts are not a package), without running its
    ``main``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def plain_lerobot_action(wrapper, obs):
    """The action of the LeRobot policy inside ``wrapper`` (a ``LeRobotPolicy``) driven the plain
    LeRobot way, without the wrapper's shortcuts: convert and normalize the observation,
    ``select_action`` (the policy's own queues), un-normalize, clip to [-1, 1]."""
    import numpy as np
    import torch

    with torch.no_grad():
        batch = wrapper.preprocessor(wrapper.batch(obs))
        action = wrapper.postprocessor(wrapper.policy.select_action(batch))
    return np.clip(action.squeeze(0).numpy().astype(np.float32), -1.0, 1.0)
