"""The certification as a library call: ``simroll.certify(reference, candidates, ...)``.

:func:`certify` takes a reference policy and a mapping of named accelerated candidates (in test
order), each in any form :func:`~simroll.policies.resolve.resolve_policy` accepts (a config name
such as ``"expert_replan2"``, a checkpoint directory, a config mapping, a factory), and returns the
:class:`~simroll.certify.certificate.Certificate`. Bad arguments (epsilon or delta outside (0, 1),
no candidates, a candidate named like the reference, an unknown task, object, variation, design,
cost or backend, a calibration set too small to ever certify anything, a candidate acting outside
the reference's action space) raise :class:`~simroll.certify.settings.CertifyArgumentError` before
any rollout runs. The env settings a reference checkpoint records (``simroll_env.json``) apply
unless given explicitly.

The run itself (:func:`run_certification`) is what ``simroll certify`` runs too: draw the i.i.d.
calibration specs, build every policy once on the first spec's env (:func:`preflight`), claim
``output_dir`` (its ``.lock`` and its run manifest, which fixes the certification's design, so a
rerun with another design on the same stored outcomes is refused), run paired rollouts into
``<output_dir>/<policy name>/records.jsonl`` (resumable: call again with the same arguments after
an interruption), certify with the fixed-n (:func:`~simroll.certify.care.run_fixed`) or
sequential (:func:`~simroll.certify.sequential.run_sequential`) form, measure each policy's cost,
and write ``certificate.json``, ``certificate.md``, ``certificate.png`` and ``report.html``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from simroll.certify.care import family_levels, min_trials_to_certify, run_fixed
from simroll.certify.certificate import COST_MEASURES, Certificate, build_certificate, measure_cost
from simroll.certify.rollouts import PolicyRun, RolloutSource, calibration_specs, preflight
from simroll.certify.sequential import EProcessTest, run_sequential
from simroll.certify.settings import CareSettings, CertifyArgumentError
from simroll.checks import is_int

# Importable without the cli package once another change moves them; Hydra-free to call.
from simroll.cli.rundir import check_path_name
from simroll.envs import TASKS, task_objects
from simroll.envs.variations import VARIATIONS
from simroll.evaluation import check_choice
from simroll.policies.resolve import ResolvedPolicy, resolve_policy
from simroll.report import write_html_report_or_warn
from simroll.rollout.backends import BACKENDS, EpisodeJob
from simroll.rollout.episode import EnvConfig, config_hash
from simroll.rollout.manifest import RunManifest, outcome_fingerprint, start_run
from simroll.rollout.records import EpisodeSpec
from simroll.rollout.rundir import hold_run_dir, kept_on_interrupt
from simroll.rollout.settings import RECORDED_ENV_KEYS, ConfigError, apply_checkpoint_env

DESIGNS = ("sequential", "fixed")
SUITE = "soft"  # the suite of simroll.envs.soft.TASKS (configs/env/soft_suite.yaml)
# The env settings a run may leave to the reference checkpoint's record, and their values when
# it has none: EnvConfig's defaults, which configs/certify.yaml also uses.
_ENV_DEFAULTS = {
    field.name: field.default
    for field in dataclasses.fields(EnvConfig)
    if field.name in RECORDED_ENV_KEYS
}


@dataclass(frozen=True)
class CertificationPlan:
    """A validated certification: what :func:`certify` builds from its arguments and
    ``simroll certify`` from its config, and :func:`run_certification` runs."""

    reference: ResolvedPolicy
    candidates: tuple[ResolvedPolicy, ...]  # in test order
    settings: CareSettings
    # suite, tasks, objects, variations, obs_mode, gripper_mode, image_size, rigid_twin, with the
    # reference checkpoint's env record applied
    env: dict[str, Any]
    design: str
    episodes: int
    batch: int
    cost: str
    reference_cost_episodes: int
    seed: int
    backend: str
    workers: int
    output_dir: Path
    progress: bool
    config: dict[str, Any]  # the resolved run config the manifest and the provenance record

    @property
    def policies(self) -> tuple[ResolvedPolicy, ...]:
        """The reference, then the candidates."""
        return (self.reference, *self.candidates)

    def manifest(self) -> RunManifest:
        """The run manifest: a run directory made with another fingerprint or design is refused
        (see :mod:`simroll.rollout.manifest`)."""
        roles = {"reference": self.reference} | {f"candidates.{c.name}": c for c in self.candidates}
        return RunManifest(
            command="certify",
            fingerprint=outcome_fingerprint(
                self.env,
                {role: (policy.name, policy.config) for role, policy in roles.items()},
                seed=self.seed,
            ),
            episodes=self.episodes,
            config=self.config,
            design=self.design_record(),
        )

    def design_record(self) -> dict[str, Any]:
        """What the certificate's guarantee is computed for; fixed in the run manifest, so that
        the stored outcomes are never tested again under another design (that voids it)."""
        return {
            "epsilon": self.settings.epsilon,
            "delta": self.settings.delta,
            "risk": self.settings.risk,
            "success": self.settings.success,
            "method": self.settings.method,
            "design": self.design,
            "episodes": self.episodes,
            "candidates": [candidate.name for candidate in self.candidates],  # in test order
        }


def _choice(key: str, values: Sequence[Any], valid: Collection[str]) -> None:
    check_choice(key, values, valid, error=CertifyArgumentError)


def _check_int(key: str, value: Any, minimum: int) -> int:
    if not is_int(value, minimum):
        raise CertifyArgumentError(f"{key} must be an integer >= {minimum}, got {value!r}")
    return value


def validate_arguments(
    reference: str,
    candidates: Sequence[str],
    *,
    tasks: Sequence[str],
    objects: Sequence[str],
    variations: Sequence[str],
    epsilon: float,
    delta: float,
    risk: str,
    success: str,
    method: str,
    design: str,
    episodes: int,
    batch: int,
    cost: str,
    reference_cost_episodes: int,
    backend: str,
    workers: int,
    keys: Mapping[str, str] | None = None,
) -> CareSettings:
    """Check a certification's settings and policy names; return its :class:`CareSettings`.

    ``reference`` and ``candidates`` are the policies' names (each one's records go to
    ``<output_dir>/<name>/``). ``keys`` spells an argument in the messages the way the caller's
    user wrote it (``{"tasks": "env.tasks"}`` for the command line). Raises
    :class:`CertifyArgumentError` naming the first bad value.
    """
    keys = keys or {}
    settings = CareSettings(epsilon, delta, risk, success, method)
    if not candidates:
        raise CertifyArgumentError(
            "no candidates: give at least one accelerated policy, e.g. "
            "candidates={'expert_replan2': 'expert_replan2'}"
        )
    try:
        check_path_name("reference", reference)
        for name in candidates:
            check_path_name("candidates", name)
    except ConfigError as exc:
        raise CertifyArgumentError(str(exc)) from None
    names = list(candidates)
    if reference in names or "reference" in names:
        raise CertifyArgumentError(
            f"candidate names must differ from the reference's {reference!r} and from "
            f"'reference', got {names}"
        )
    if len(set(names)) != len(names):
        raise CertifyArgumentError(f"candidate names must be unique, got {names}")
    _choice("design", [design], DESIGNS)
    _choice("cost", [cost], COST_MEASURES)
    _choice(keys.get("tasks", "tasks"), tasks, TASKS)
    for task in tasks:
        _choice(keys.get("objects", "objects"), objects, task_objects(task))
    _choice(keys.get("variations", "variations"), variations, VARIATIONS)
    _choice(keys.get("backend", "backend"), [backend], BACKENDS)
    _check_int("episodes", episodes, 1)
    _check_int("batch", batch, 1)
    _check_int("reference_cost_episodes", reference_cost_episodes, 0)
    _check_int(keys.get("workers", "workers"), workers, 1)
    level = family_levels(len(names), settings.delta, settings.method)
    if design == "fixed":
        needed = min_trials_to_certify(settings.epsilon, level)
    else:
        needed = EProcessTest(settings.epsilon, level, episodes).min_trials
    if episodes < needed:
        raise CertifyArgumentError(
            f"episodes={episodes} can never certify a candidate at epsilon={settings.epsilon:g}, "
            f"delta={settings.delta:g} with {len(names)} candidate(s) ({settings.method}, "
            f"{design} design): even with no failures it needs >= {needed} trials"
        )
    return settings


def _names(key: str, values: str | Sequence[str]) -> list[str]:
    """A list of names; a single name counts as a list of one."""
    if isinstance(values, str):
        return [values]
    if not isinstance(values, Sequence) or not values:
        raise CertifyArgumentError(f"{key} must be a non-empty list of names, got {values!r}")
    return list(values)


def _resolve(key: str, policy: Any, name: str | None) -> ResolvedPolicy:
    try:
        return resolve_policy(policy, name)
    except ValueError as exc:  # an unknown config name, a missing checkpoint
        raise CertifyArgumentError(f"{key}: {exc}") from None


def certify(
    reference: Any,
    candidates: Mapping[str, Any],
    *,
    reference_name: str | None = None,
    tasks: str | Sequence[str] = ("SoftSqueeze",),
    objects: str | Sequence[str] = ("foam_cylinder",),
    variations: str | Sequence[str] = ("default",),
    obs_mode: str | None = None,
    gripper_mode: str | None = None,
    image_size: int | None = None,
    rigid_twin: bool = False,
    episodes: int = 100,
    seed: int = 0,
    epsilon: float = 0.1,
    delta: float = 0.05,
    risk: str = "conditional",
    success: str = "tsr",
    method: str = "fixed_sequence",
    design: str = "sequential",
    batch: int = 1,
    cost: str = "model_calls",
    reference_cost_episodes: int = 2,
    backend: str = "local",
    workers: int = 1,
    output_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
) -> Certificate:
    """Certify ``candidates`` (name -> policy, tested in this order: mildest acceleration first)
    against ``reference`` with CARE; return the certificate (also written to ``output_dir``).

    Policies are anything :func:`~simroll.policies.resolve.resolve_policy` takes:
    ``certify("expert", {"expert_replan2": "expert_replan2"})``, or accelerated variants of a
    learned policy, ``{"flow_2": policy_config("vla", overrides={"num_flow_steps": 2})}``.
    ``reference_name`` names the reference's record folder (default: its config name, checkpoint
    folder or factory name; ``"reference"`` for a config mapping). The settings are those of
    ``simroll certify`` (configs/certify.yaml, with the same defaults); ``obs_mode``,
    ``gripper_mode`` and ``image_size`` left at None take the reference checkpoint's recorded
    values, else EnvConfig's defaults, and a value given that contradicts the record is refused.
    ``output_dir`` defaults to ``runs/certify/<date>_<time>``; calling again with the same
    arguments and ``output_dir`` resumes an interrupted run. ``progress=False`` leaves out the
    progress lines and the certificate's text.

    Raises :class:`~simroll.certify.settings.CertifyArgumentError` for a bad argument, and
    :class:`~simroll.rollout.manifest.ManifestError` or ``RunDirError`` (both ``ValueError``)
    for an ``output_dir`` made with other settings or in use; all before any rollout runs.
    """
    if not isinstance(candidates, Mapping) or not candidates:
        raise CertifyArgumentError(
            "candidates must be a non-empty mapping name -> policy, e.g. "
            f"{{'expert_replan2': 'expert_replan2'}}, got {candidates!r}"
        )
    if reference_name is None and isinstance(reference, Mapping):
        reference_name = "reference"
    resolved_reference = _resolve("reference", reference, reference_name)
    resolved_candidates = tuple(
        _resolve(f"candidates[{name!r}]", policy, name) for name, policy in candidates.items()
    )
    tasks, objects, variations = (
        _names(key, values)
        for key, values in (("tasks", tasks), ("objects", objects), ("variations", variations))
    )
    settings = validate_arguments(
        resolved_reference.name,
        [candidate.name for candidate in resolved_candidates],
        tasks=tasks,
        objects=objects,
        variations=variations,
        epsilon=epsilon,
        delta=delta,
        risk=risk,
        success=success,
        method=method,
        design=design,
        episodes=episodes,
        batch=batch,
        cost=cost,
        reference_cost_episodes=reference_cost_episodes,
        backend=backend,
        workers=workers,
    )
    if not is_int(seed):
        raise CertifyArgumentError(f"seed must be an integer, got {seed!r}")
    given = {"obs_mode": obs_mode, "gripper_mode": gripper_mode, "image_size": image_size}
    env = {
        "suite": SUITE,
        "tasks": tasks,
        "objects": objects,
        "variations": variations,
        **{key: _ENV_DEFAULTS[key] if value is None else value for key, value in given.items()},
        "rigid_twin": rigid_twin,
    }
    explicit = [key for key, value in given.items() if value is not None]
    try:
        chosen, notes = apply_checkpoint_env(
            {key: env[key] for key in RECORDED_ENV_KEYS}, resolved_reference.config, explicit
        )
    except ConfigError as exc:  # a given value contradicts the checkpoint's env record
        raise CertifyArgumentError(str(exc)) from None
    env.update(chosen)
    for note in notes:
        print(note)
    if output_dir is None:
        output_dir = Path("runs", "certify", f"{datetime.now():%Y-%m-%d_%H-%M-%S}")
    plan = CertificationPlan(
        reference=resolved_reference,
        candidates=resolved_candidates,
        settings=settings,
        env=env,
        design=design,
        episodes=episodes,
        batch=batch,
        cost=cost,
        reference_cost_episodes=reference_cost_episodes,
        seed=seed,
        backend=backend,
        workers=workers,
        output_dir=Path(output_dir),
        progress=progress,
        config={
            "env": env,
            "backend": {"name": backend, "workers": workers},
            "reference": resolved_reference.config,
            "candidates": {c.name: c.config for c in resolved_candidates},
            **settings.to_dict(),
            "design": design,
            "episodes": episodes,
            "batch": batch,
            "cost": cost,
            "reference_cost_episodes": reference_cost_episodes,
            "seed": seed,
            "output_dir": str(output_dir),
            "progress": progress,
        },
    )
    return run_certification(plan, summary=progress)


def run_certification(plan: CertificationPlan, *, summary: bool = True) -> Certificate:
    """Run a validated certification (see the module docstring); ``summary`` prints what runs,
    the certificate and where it was written, ``plan.progress`` each batch of rollouts."""
    env = plan.env
    env_config = EnvConfig(**{key: env[key] for key in (*RECORDED_ENV_KEYS, "rigid_twin")})
    specs = calibration_specs(
        env["suite"], env["tasks"], env["objects"], env["variations"], plan.episodes, plan.seed
    )
    preflight(specs[0], {policy.name: policy.factory for policy in plan.policies}, env_config)
    hashes = {policy.name: config_hash(policy.config) for policy in plan.policies}
    runs = {
        policy.name: PolicyRun(
            policy.name,
            EpisodeJob(policy.factory, env_config, policy.name, hashes[policy.name]),
            plan.output_dir / policy.name,
        )
        for policy in plan.policies
    }
    stores = [run.run_dir for run in runs.values()]
    with hold_run_dir(plan.output_dir), kept_on_interrupt(plan.output_dir, specs, stores):
        note = start_run(plan.output_dir, plan.manifest(), specs, episodes_may_change=False)
        if note and summary:
            print(note)
        return _certify(plan, specs, runs, hashes, print if summary else lambda *_: None)


def _certify(
    plan: CertificationPlan,
    specs: list[EpisodeSpec],
    runs: dict[str, PolicyRun],
    hashes: dict[str, str],
    say: Callable[..., None],
) -> Certificate:
    """The rollouts and the certificate, once the run directory is held and its manifest fits."""
    names = [candidate.name for candidate in plan.candidates]
    reference = plan.reference.name
    source = RolloutSource(
        specs,
        runs[reference],
        [runs[name] for name in names],
        plan.settings.success,
        plan.backend,
        plan.workers,
        log=print if plan.progress else None,
    )
    say(
        f"simroll certify: {len(names)} candidate(s) against {reference!r}, {plan.design} design, "
        f"up to {len(specs)} calibration specs -> {plan.output_dir}"
    )
    if plan.design == "fixed":
        certification = run_fixed(names, source, plan.settings, len(specs))
    else:
        certification = run_sequential(names, source, plan.settings, len(specs), batch=plan.batch)
    cost_episodes = min(plan.reference_cost_episodes, len(specs))
    if source.rollouts["reference"] < cost_episodes:
        source.reference(range(cost_episodes))
    costs = {
        name: measure_cost(list(source.records[name].values()))
        for name in runs
        if source.records[name]
    }
    used = [spec for i, spec in enumerate(specs) if any(i in r for r in source.records.values())]
    # Imported here: the report module pulls in statsmodels (seconds), not needed to validate.
    from simroll.scoring.summary import provenance

    env = plan.env
    certificate = build_certificate(
        certification,
        reference,
        costs,
        plan.cost,
        used,
        calibration={
            "suite": env["suite"],
            "tasks": list(env["tasks"]),
            "objects": list(env["objects"]),
            "variations": list(env["variations"]),
            "base_seed": plan.seed,
            "draw": "i.i.d.: see simroll.certify.rollouts.calibration_specs",
        },
        rollouts=source.rollouts,
        config_hashes=hashes,
        provenance=provenance(plan.config, plan.output_dir),
    )
    paths = certificate.write(plan.output_dir)
    say(certificate.to_markdown())
    say(f"certificate: {paths['json']}, {paths['markdown']}, plot: {paths['plot']}")
    write_html_report_or_warn(plan.output_dir)  # never raises: a page failure is only a warning
    return certificate
