"""Where certification meets the episode engine: calibration specs, preflight, paired rollouts.

* :func:`calibration_specs` draws the calibration stream: spec ``i`` gets a (task, object,
  variation) drawn uniformly from the configured lists by a generator seeded from
  ``derive_seed(suite, "calibration", i, base_seed)`` and the seed ``derive_seed(suite, task, i,
  base_seed)`` (the same seed ``make_specs`` gives episode ``i`` of that task). The specs are thus
  i.i.d., which both CARE forms assume; for a single combination it equals ``make_specs``.
* :func:`preflight` builds every policy once on the first spec's env and checks that each one's
  action has the env's action shape, before any rollout runs.
* :class:`RolloutSource` is the :class:`~simroll.certify.paired.PairedSource` that runs the
  rollouts a certification asks for through :func:`simroll.rollout.runner.evaluate`, one record
  store per policy under ``<output_dir>/<policy name>/``: an interrupted certification resumes
  from those records, and a store written by a different config of the same name is refused.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simroll.certify.paired import record_success
from simroll.certify.settings import CertifyArgumentError, CertifyError
from simroll.policies.base import DeclaresActionSpace
from simroll.rollout.backends import EpisodeJob
from simroll.rollout.episode import EnvConfig
from simroll.rollout.records import EpisodeRecord, EpisodeSpec, derive_seed
from simroll.rollout.runner import evaluate
from simroll.rollout.store import RecordStore


class ActionSpaceError(CertifyArgumentError):
    """A policy's actions do not fit the env's (or the reference's) action space."""


def calibration_specs(
    suite: str,
    tasks: Sequence[str],
    objects: Sequence[str],
    variations: Sequence[str],
    episodes: int,
    base_seed: int = 0,
) -> list[EpisodeSpec]:
    """``episodes`` i.i.d. calibration specs (see the module docstring)."""
    if not isinstance(episodes, int) or episodes < 1:
        raise CertifyArgumentError(f"episodes must be an integer >= 1, got {episodes!r}")
    combos = list(itertools.product(tasks, objects, variations))
    if not combos:
        raise CertifyArgumentError(
            "the calibration set needs at least one task, object and variation"
        )
    specs = []
    for index in range(episodes):
        if len(combos) == 1:
            task, obj, variation = combos[0]
        else:
            draw = np.random.default_rng(derive_seed(suite, "calibration", index, base_seed))
            task, obj, variation = combos[int(draw.integers(len(combos)))]
        seed = derive_seed(suite, task, index, base_seed)
        specs.append(EpisodeSpec(task, obj, variation, seed, index, suite))
    return specs


@dataclass(frozen=True)
class PolicyRun:
    """One policy in a certification: its name, how to run it, and where its records live."""

    name: str
    job: EpisodeJob
    run_dir: Path


def preflight(
    spec: EpisodeSpec, policies: Mapping[str, Callable[[Any], Any]], env_config: EnvConfig
) -> None:
    """Build each policy on ``spec``'s env and check its first action's shape.

    The first entry of ``policies`` is the reference. Raises :class:`ActionSpaceError` naming
    the policy, its action shape and the expected one.
    """
    env = env_config.make(spec)
    try:
        expected = tuple(env.action_space.shape)
        reference_shape = None
        for name, factory in policies.items():
            obs, _ = env.reset(seed=spec.seed, options={"variation": spec.variation})
            policy = factory(env)
            policy.reset()
            declared = policy.action_space if isinstance(policy, DeclaresActionSpace) else None
            if declared is not None and tuple(getattr(declared, "shape", ())) != expected:
                raise ActionSpaceError(
                    f"policy {name!r} declares action space {declared}, but {spec.task} acts in "
                    f"{env.action_space}; a candidate must act in the reference's action space"
                )
            shape = np.asarray(policy.select_action(obs)).shape
            if reference_shape is None:
                reference_shape = shape
            if shape != expected or shape != reference_shape:
                raise ActionSpaceError(
                    f"policy {name!r} returned an action of shape {shape}, but {spec.task}'s "
                    f"action space is {env.action_space} and the reference's actions have shape "
                    f"{reference_shape}; a candidate must act in the reference's action space"
                )
    finally:
        env.close()


class RolloutSource:
    """Runs requested (policy, spec) rollouts with :func:`evaluate`; resumable per policy store."""

    def __init__(
        self,
        specs: Sequence[EpisodeSpec],
        reference: PolicyRun,
        candidates: Sequence[PolicyRun],
        success: str = "tsr",
        backend: str = "local",
        workers: int = 1,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.specs = list(specs)
        self.reference_run = reference
        self.candidate_runs = {run.name: run for run in candidates}
        self.success = success
        self.backend, self.workers, self.log = backend, workers, log
        self.records: dict[str, dict[int, EpisodeRecord]] = {reference.name: {}}
        self.records.update({name: {} for name in self.candidate_runs})
        for run in (reference, *candidates):
            check_store(run)

    def reference(self, indices: Sequence[int]) -> dict[int, bool]:
        return self._run(self.reference_run, indices)

    def candidate(self, name: str, indices: Sequence[int]) -> dict[int, bool]:
        if name not in self.candidate_runs:
            raise CertifyError(
                f"unknown candidate {name!r}; expected one of {list(self.candidate_runs)}"
            )
        return self._run(self.candidate_runs[name], indices)

    def _run(self, run: PolicyRun, indices: Sequence[int]) -> dict[int, bool]:
        specs = [self.specs[i] for i in indices]
        records = evaluate(run.run_dir, specs, run.job, self.backend, self.workers, progress=False)
        by_key = {record.spec.key: record for record in records}
        outcomes = {}
        for i, spec in zip(indices, specs, strict=True):
            record = by_key.get(spec.key)
            if record is None:
                raise CertifyError(
                    f"policy {run.name!r} has no record for {spec.key} after running it; "
                    f"see {run.run_dir / 'records.jsonl'}"
                )
            outcomes[int(i)] = record_success(record, self.success)
            self.records[run.name][int(i)] = record
        if self.log is not None:
            self.log(
                f"  {run.name}: specs {_span(indices)} -> {sum(outcomes.values())}/{len(outcomes)} "
                f"{self.success.upper()} successes; {sum(self.rollouts.values())} rollouts so far"
            )
        return outcomes

    @property
    def rollouts(self) -> dict[str, int]:
        """Rollouts used per policy, the reference under ``"reference"``."""
        counts = {"reference": len(self.records[self.reference_run.name])}
        counts.update({name: len(self.records[name]) for name in self.candidate_runs})
        return {name: n for name, n in counts.items() if n or name == "reference"}


def check_store(run: PolicyRun) -> None:
    """Refuse a store holding records of a different config under the same policy name."""
    contents = RecordStore(run.run_dir).load()
    for record in contents.records.values():
        if record.policy_config_hash != run.job.policy_config_hash:
            raise CertifyArgumentError(
                f"{run.run_dir} holds records of policy {run.name!r} with config hash "
                f"{record.policy_config_hash}, but this certification's {run.name!r} has "
                f"{run.job.policy_config_hash}; use a new output_dir (or the original config) "
                "so that outcomes of different policies are never mixed"
            )


def _span(indices: Sequence[int]) -> str:
    indices = sorted(int(i) for i in indices)
    if len(indices) > 2 and indices == list(range(indices[0], indices[-1] + 1)):
        return f"{indices[0]}-{indices[-1]}"
    return ",".join(map(str, indices))
