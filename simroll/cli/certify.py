"""``simroll certify``: CARE certification of accelerated candidates against a reference policy.

Validates the config before any episode runs (epsilon/delta outside (0, 1), no candidates,
duplicate or clashing names, unknown tasks, a calibration set too small to ever certify anything:
each fails naming the value), draws the i.i.d. calibration specs, checks every candidate acts in
the reference's action space, then runs paired rollouts (:mod:`simroll.certify.rollouts`) into
``<output_dir>/<policy name>/records.jsonl`` (resumable: rerun the same command after an
interruption; policy names must be plain folder names) and certifies with the fixed-n
(:mod:`simroll.certify.care`) or sequential (:mod:`simroll.certify.sequential`) form. Writes
``certificate.json``, ``certificate.md`` and ``certificate.png`` to ``output_dir`` and prints the
Markdown. The run manifest
(:mod:`simroll.rollout.manifest`) fixes the certification's design (epsilon, delta, risk, success,
method, design, n, candidates in order) when the run starts: a rerun on the same directory with
another design or another ``episodes`` is refused, since testing the same stored outcomes again
under a new design voids the guarantee.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.utils import instantiate  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from simroll.assets import list_objects  # noqa: E402
from simroll.certify.care import family_levels, min_trials_to_certify, run_fixed  # noqa: E402
from simroll.certify.certificate import (  # noqa: E402
    COST_MEASURES,
    Certificate,
    build_certificate,
    measure_cost,
)
from simroll.certify.rollouts import (  # noqa: E402
    PolicyRun,
    RolloutSource,
    calibration_specs,
    preflight,
)
from simroll.certify.sequential import EProcessTest, run_sequential  # noqa: E402
from simroll.certify.settings import CareSettings, CertifyError  # noqa: E402
from simroll.cli import schema  # noqa: E402, F401  (registers the config schemas)
from simroll.cli.common import ConfigError, env_config_from  # noqa: E402
from simroll.cli.rundir import (  # noqa: E402
    check_output_dir_override,
    check_path_name,
    hold_run_dir,
    job_output_dir,
    kept_on_interrupt,
    one_line_errors,
)
from simroll.envs.soft import TASKS  # noqa: E402
from simroll.envs.variations import VARIATIONS  # noqa: E402
from simroll.report import write_html_report_or_warn  # noqa: E402
from simroll.rollout.backends import BACKENDS, EpisodeJob  # noqa: E402
from simroll.rollout.episode import config_hash  # noqa: E402
from simroll.rollout.manifest import RunManifest, outcome_fingerprint, start_run  # noqa: E402
from simroll.rollout.records import EpisodeSpec  # noqa: E402

CONFIG_DIR = str(Path(__file__).resolve().parents[1] / "_data" / "configs")
DESIGNS = ("sequential", "fixed")


def _check_choice(key: str, values, valid) -> None:
    for value in values:
        if value not in valid:
            raise ConfigError(f"{key}: unknown value {value!r}; expected one of {sorted(valid)}")


def _positive_int(cfg: DictConfig, key: str, minimum: int = 1) -> int:
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{key} must be an integer >= {minimum}, got {value!r}")
    return value


def reference_name() -> str:
    """The reference's policy config name (``policy@reference=<name>``), else ``reference``."""
    try:
        return str(HydraConfig.get().runtime.choices.get("policy@reference") or "reference")
    except ValueError:
        return "reference"


def validate(cfg: DictConfig, reference: str) -> tuple[CareSettings, list[str]]:
    """Check the whole config; return the settings and the candidates in test order."""
    try:
        settings = CareSettings(cfg.epsilon, cfg.delta, cfg.risk, cfg.success, cfg.method)
    except CertifyError as exc:
        raise ConfigError(str(exc)) from None
    candidates = cfg.get("candidates")
    if not isinstance(candidates, Mapping) or not candidates:
        raise ConfigError(
            "no candidates: add accelerated policies under `candidates`, e.g. "
            "+policy@candidates.expert_replan2=expert_replan2"
        )
    names = [str(name) for name in candidates]
    check_path_name("reference", reference)  # each policy's records go to <output_dir>/<name>/
    for name in names:
        check_path_name("candidates", name)
        if not isinstance(candidates[name], Mapping) or "_target_" not in candidates[name]:
            raise ConfigError(f"candidates.{name} must be a policy config with a _target_")
    if reference in names or "reference" in names:
        raise ConfigError(
            f"candidate names must differ from the reference's {reference!r} and from "
            f"'reference', got {names}"
        )
    if cfg.reference is None or "_target_" not in cfg.reference:
        raise ConfigError("reference must be a policy config with a _target_")
    _check_choice("design", [cfg.design], DESIGNS)
    _check_choice("cost", [cfg.cost], COST_MEASURES)
    _check_choice("env.tasks", cfg.env.tasks, TASKS)
    _check_choice("env.objects", cfg.env.objects, list_objects())
    _check_choice("env.variations", cfg.env.variations, VARIATIONS)
    _check_choice("backend.name", [cfg.backend.name], BACKENDS)
    episodes = _positive_int(cfg, "episodes")
    _positive_int(cfg, "batch")
    _positive_int(cfg, "reference_cost_episodes", minimum=0)
    if not isinstance(cfg.backend.workers, int) or cfg.backend.workers < 1:
        raise ConfigError(f"backend.workers must be an integer >= 1, got {cfg.backend.workers!r}")
    level = family_levels(len(names), settings.delta, settings.method)
    if cfg.design == "fixed":
        needed = min_trials_to_certify(settings.epsilon, level)
    else:
        needed = EProcessTest(settings.epsilon, level, episodes).min_trials
    if episodes < needed:
        raise ConfigError(
            f"episodes={episodes} can never certify a candidate at epsilon={settings.epsilon:g}, "
            f"delta={settings.delta:g} with {len(names)} candidate(s) ({settings.method}, "
            f"{cfg.design} design): even with no failures it needs >= {needed} trials"
        )
    return settings, names


def certification_design(cfg: DictConfig, names: list[str]) -> dict:
    """What the certificate's guarantee is computed for; fixed in the run manifest, so that the
    stored outcomes are never tested again under another design (that voids the guarantee)."""
    keys = ("epsilon", "delta", "risk", "success", "method", "design", "episodes")
    return {**{key: cfg[key] for key in keys}, "candidates": list(names)}  # in test order


def run(cfg: DictConfig) -> Certificate:
    reference = reference_name()
    settings, names = validate(cfg, reference)
    output_dir = job_output_dir(cfg)
    env_config = env_config_from(cfg.env, cfg.reference)
    specs = calibration_specs(
        cfg.env.suite, cfg.env.tasks, cfg.env.objects, cfg.env.variations, cfg.episodes, cfg.seed
    )
    configs = {reference: cfg.reference, **{name: cfg.candidates[name] for name in names}}
    factories = {name: instantiate(config) for name, config in configs.items()}
    hashes = {
        name: config_hash(OmegaConf.to_container(config, resolve=True))
        for name, config in configs.items()
    }
    try:
        preflight(specs[0], factories, env_config)
    except CertifyError as exc:
        raise ConfigError(str(exc)) from None
    runs = {
        name: PolicyRun(
            name,
            EpisodeJob(factories[name], env_config, name, hashes[name]),
            output_dir / name,
        )
        for name in configs
    }
    manifest = RunManifest(
        command="certify",
        fingerprint=outcome_fingerprint(
            OmegaConf.to_container(cfg.env, resolve=True),
            {
                ("reference" if name == reference else f"candidates.{name}"): (
                    name,
                    OmegaConf.to_container(config, resolve=True),
                )
                for name, config in configs.items()
            },
            seed=cfg.seed,
        ),
        episodes=cfg.episodes,
        config=OmegaConf.to_container(cfg, resolve=True),
        design=certification_design(cfg, names),
    )
    stores = [output_dir / name for name in configs]
    with hold_run_dir(output_dir), kept_on_interrupt(output_dir, specs, stores):
        start_run(output_dir, manifest, specs, episodes_may_change=False)
        return _certify(cfg, reference, names, settings, specs, runs, hashes, output_dir)


def _certify(
    cfg: DictConfig,
    reference: str,
    names: list[str],
    settings: CareSettings,
    specs: list[EpisodeSpec],
    runs: dict[str, PolicyRun],
    hashes: dict[str, str],
    output_dir: Path,
) -> Certificate:
    """The rollouts and the certificate, once the run directory is held and its manifest fits."""
    log = print if cfg.progress else None
    try:
        source = RolloutSource(
            specs,
            runs[reference],
            [runs[name] for name in names],
            settings.success,
            cfg.backend.name,
            cfg.backend.workers,
            log=log,
        )
    except CertifyError as exc:
        raise ConfigError(str(exc)) from None
    print(
        f"simroll certify: {len(names)} candidate(s) against {reference!r}, {cfg.design} design, "
        f"up to {len(specs)} calibration specs -> {output_dir}"
    )
    if cfg.design == "fixed":
        certification = run_fixed(names, source, settings, len(specs))
    else:
        certification = run_sequential(names, source, settings, len(specs), batch=cfg.batch)
    measured = source.rollouts["reference"]
    if measured < min(cfg.reference_cost_episodes, len(specs)):
        source.reference(range(min(cfg.reference_cost_episodes, len(specs))))
    costs = {
        name: measure_cost(list(source.records[name].values()))
        for name in runs
        if source.records[name]
    }
    used = [spec for i, spec in enumerate(specs) if any(i in r for r in source.records.values())]
    # Imported here: the report module pulls in statsmodels (seconds), not needed to validate.
    from simroll.scoring.summary import provenance

    certificate = build_certificate(
        certification,
        reference,
        costs,
        cfg.cost,
        used,
        calibration={
            "suite": cfg.env.suite,
            "tasks": list(cfg.env.tasks),
            "objects": list(cfg.env.objects),
            "variations": list(cfg.env.variations),
            "base_seed": cfg.seed,
            "draw": "i.i.d.: see simroll.certify.rollouts.calibration_specs",
        },
        rollouts=source.rollouts,
        config_hashes=hashes,
        provenance=provenance(OmegaConf.to_container(cfg, resolve=True)),
    )
    paths = certificate.write(output_dir)
    print(certificate.to_markdown())
    print(f"certificate: {paths['json']}, {paths['markdown']}, plot: {paths['plot']}")
    write_html_report_or_warn(output_dir)  # never raises: a page failure is only a warning
    return certificate


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
