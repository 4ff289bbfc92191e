"""``simroll certify``: CARE certification of accelerated candidates against a reference policy.

The Hydra front end of :mod:`simroll.certify.run` (``simroll.certify(...)`` in Python): maps the
config (configs/certify.yaml: ``reference`` and ``candidates`` policy configs, the ``env`` and
``backend`` groups, the CARE settings) onto a :class:`~simroll.certify.run.CertificationPlan` and
runs it. Everything wrong with the config fails before any episode runs with one line and exit
status 2 (epsilon/delta outside (0, 1), no candidates, duplicate or clashing names, unknown
tasks, a calibration set too small to ever certify anything, a candidate outside the reference's
action space, an ``output_dir`` in use or made with another design or another ``episodes``:
testing the same stored outcomes again under a new design voids the guarantee); an error during
the rollouts exits 1. Records go to ``<output_dir>/<policy name>/records.jsonl`` (resumable:
rerun the same command after an interruption); ``certificate.json``, ``certificate.md``,
``certificate.png`` and ``report.html`` to ``output_dir``, and the Markdown is printed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from simroll.certify.certificate import Certificate  # noqa: E402
from simroll.certify.run import (  # noqa: E402
    CertificationPlan,
    run_certification,
    validate_arguments,
)
from simroll.certify.settings import CareSettings, CertifyArgumentError, CertifyError  # noqa: E402
from simroll.cli import schema  # noqa: E402, F401  (registers the config schemas)
from simroll.cli.common import ConfigError, env_config_from  # noqa: E402
from simroll.cli.rundir import (  # noqa: E402
    check_output_dir_override,
    job_output_dir,
    one_line_errors,
)
from simroll.evaluation import CONFIG_KEYS  # noqa: E402  (the command line's names of arguments)
from simroll.policies.resolve import resolve_policy  # noqa: E402

CONFIG_DIR = str(Path(__file__).resolve().parents[1] / "_data" / "configs")


def reference_name() -> str:
    """The reference's policy config name (``policy@reference=<name>``), else ``reference``."""
    try:
        return str(HydraConfig.get().runtime.choices.get("policy@reference") or "reference")
    except ValueError:
        return "reference"


def validate(cfg: DictConfig, reference: str) -> tuple[CareSettings, list[str]]:
    """Check the whole config; return the settings and the candidates in test order."""
    candidates = cfg.get("candidates")
    if not isinstance(candidates, Mapping) or not candidates:
        raise ConfigError(
            "no candidates: add accelerated policies under `candidates`, e.g. "
            "+policy@candidates.expert_replan2=expert_replan2"
        )
    names = [str(name) for name in candidates]
    try:
        settings = validate_arguments(
            reference,
            names,
            tasks=cfg.env.tasks,
            objects=cfg.env.objects,
            variations=cfg.env.variations,
            epsilon=cfg.epsilon,
            delta=cfg.delta,
            risk=cfg.risk,
            success=cfg.success,
            method=cfg.method,
            design=cfg.design,
            episodes=cfg.get("episodes"),
            batch=cfg.get("batch"),
            cost=cfg.cost,
            reference_cost_episodes=cfg.get("reference_cost_episodes"),
            backend=cfg.backend.name,
            workers=cfg.backend.workers,
            keys=CONFIG_KEYS,
        )
    except CertifyArgumentError as exc:
        raise ConfigError(str(exc)) from None
    for name in names:
        if not isinstance(candidates[name], Mapping) or "_target_" not in candidates[name]:
            raise ConfigError(f"candidates.{name} must be a policy config with a _target_")
    if cfg.reference is None or "_target_" not in cfg.reference:
        raise ConfigError("reference must be a policy config with a _target_")
    return settings, names


def run(cfg: DictConfig) -> Certificate:
    reference = reference_name()
    settings, names = validate(cfg, reference)
    output_dir = job_output_dir(cfg)
    env_config_from(cfg.env, cfg.reference)  # writes the checkpoint's env record into cfg.env
    config = OmegaConf.to_container(cfg, resolve=True)
    plan = CertificationPlan(
        reference=resolve_policy(config["reference"], reference),
        candidates=tuple(resolve_policy(config["candidates"][name], name) for name in names),
        settings=settings,
        env=config["env"],
        design=cfg.design,
        episodes=cfg.episodes,
        batch=cfg.batch,
        cost=cfg.cost,
        reference_cost_episodes=cfg.reference_cost_episodes,
        seed=cfg.seed,
        backend=cfg.backend.name,
        workers=cfg.backend.workers,
        output_dir=output_dir,
        progress=cfg.progress,
        config=config,
    )
    try:
        return run_certification(plan)
    except CertifyArgumentError as exc:  # a policy outside the action space, a foreign store
        raise ConfigError(str(exc)) from None


@hydra.main(config_path=CONFIG_DIR, config_name="certify", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    with one_line_errors("certify"):
        try:
            run(cfg)
        except CertifyError as exc:
            print(f"simroll certify: {exc}", file=sys.stderr)
            sys.exit(1)


def main() -> None:
    check_output_dir_override("certify", sys.argv[1:])
    _hydra_main()
