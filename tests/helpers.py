"""Helpers shared by the test packages: running the ``simroll`` console script as a user would,
loading a script under ``scripts/`` as a module, a LeRobot policy's action by LeRobot's own
loop, a small dataset of gentle-expert episodes, and a SimVLA recipe small enough for tests."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
# what the shipped SimVLA reads (a collect dataset's other features are dropped)
VLA_INPUTS = [
    "observation.images.scene",
    "observation.images.wrist",
    "observation.tactile",
    "observation.state",
]
# a SimVLA that trains in seconds (overrides of the recipe; a test adds what it varies)
TINY_VLA = {
    "chunk_size": 4,
    "n_action_steps": 2,
    "patch_size": 16,
    "stem_channels": 8,
    "dim_model": 32,
    "n_heads": 2,
    "n_encoder_layers": 1,
    "n_decoder_layers": 1,
    "num_flow_steps": 4,
    "optimizer_lr": 3e-3,
    "scheduler_warmup_steps": 0,
    "scheduler_decay_steps": 100,
}


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


def record_expert_dataset(root: Path, specs, env_config, **recorder_kwargs) -> Path:
    """A LeRobotDataset at ``root`` (repo id ``simroll/<root name>``) of the gentle expert's
    episodes of ``specs``, in envs built by ``env_config`` (an ``EnvConfig``)."""
    from simroll.experts import SoftExpert
    from simroll.rollout.dataset import DatasetRecorder
    from simroll.rollout.episode import EnvPool

    pool = EnvPool(env_config)
    try:
        space = pool.get(specs[0]).observation_space
        with DatasetRecorder(
            root, space, repo_id=f"simroll/{root.name}", **recorder_kwargs
        ) as recorder:
            for spec in specs:
                recorder.record(spec, lambda env: SoftExpert(env, "gentle"), env=pool.get(spec))
    finally:
        pool.close()
    return root
