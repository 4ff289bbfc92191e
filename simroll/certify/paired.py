"""Paired outcomes: where certification gets reference and candidate successes, and only those.

Both certification designs read outcomes through a :class:`PairedSource` (``reference(indices)``
and ``candidate(name, indices)`` return success per calibration-spec index): the CLI's source
runs the missing rollouts through :func:`simroll.rollout.runner.evaluate`, :class:`ArraySource`
serves synthetic outcomes, and :func:`pair_records` checks finished records for pairing. An
:class:`OutcomeLedger` sits in front of the source: it asks for each (policy, spec) at most once,
shares reference outcomes between candidates, and is the account of rollouts used.

A :class:`LossStream` turns one candidate's outcomes into its acceleration-induced failures
(reference succeeds, candidate fails) in spec order, asking only for the rollouts the risk needs:

* ``joint`` risk: the candidate runs on every spec, the reference only where the candidate failed
  (failure-triggered reference rollouts: a candidate success is never a loss);
* ``conditional`` risk: the reference runs first, in spec order, and the candidate only on the
  specs the reference solved (the others are not trials of ``P(C fails | R succeeds)``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike

from simroll.certify.settings import RISKS, CertifyError, PairingError
from simroll.rollout.records import EpisodeRecord, EpisodeSpec


class PairedSource(Protocol):
    """Success of the reference / a candidate on calibration specs, by spec index."""

    def reference(self, indices: Sequence[int]) -> Mapping[int, bool]: ...

    def candidate(self, name: str, indices: Sequence[int]) -> Mapping[int, bool]: ...


def record_success(record: EpisodeRecord, success: str) -> bool:
    """The success a certification counts: task success (``tsr``) or DSR success (``dsr``)."""
    if record.error is not None:
        raise CertifyError(
            f"episode {record.spec.key} of policy {record.policy_id!r} raised and has no outcome "
            f"({record.error.splitlines()[0]}); fix the cause and resume the run"
        )
    if success == "tsr":
        return bool(record.success)
    if success == "dsr":
        return bool(record.dsr_success)
    raise CertifyError(f"success must be 'tsr' or 'dsr', got {success!r}")


class ArraySource:
    """Outcomes held in arrays: ``reference[i]`` and ``candidates[name][i]`` for spec ``i``."""

    def __init__(self, reference: ArrayLike, candidates: Mapping[str, ArrayLike]) -> None:
        self._reference = np.asarray(reference, dtype=bool)
        self._candidates = {name: np.asarray(c, dtype=bool) for name, c in candidates.items()}
        for name, outcomes in self._candidates.items():
            if outcomes.shape != self._reference.shape:
                raise PairingError(
                    f"candidate {name!r} has outcomes for {outcomes.shape} specs, the reference "
                    f"for {self._reference.shape}; paired outcomes need the same specs"
                )

    @property
    def n_specs(self) -> int:
        return int(self._reference.shape[0])

    def reference(self, indices: Sequence[int]) -> dict[int, bool]:
        return {int(i): bool(self._reference[i]) for i in indices}

    def candidate(self, name: str, indices: Sequence[int]) -> dict[int, bool]:
        outcomes = self._candidates[name]
        return {int(i): bool(outcomes[i]) for i in indices}


def pair_records(
    reference: Sequence[EpisodeRecord],
    candidates: Mapping[str, Sequence[EpisodeRecord]],
    success: str = "tsr",
) -> tuple[list[EpisodeSpec], ArraySource]:
    """Check that every candidate ran exactly the reference's specs; return them and outcomes.

    Raises :class:`PairingError` naming the first spec (task, object, variation, seed) one side
    ran and the other did not, :class:`CertifyError` for an errored episode or no candidates.
    """
    if not candidates:
        raise CertifyError("no candidates to certify: give at least one accelerated policy")
    specs = _unique_specs("the reference", reference)
    index = {spec.key: i for i, spec in enumerate(specs)}
    reference_outcomes = np.array([record_success(r, success) for r in reference], dtype=bool)
    outcomes: dict[str, np.ndarray] = {}
    for name, records in candidates.items():
        _unique_specs(f"candidate {name!r}", records)
        for record in records:
            if record.spec.key not in index:
                raise PairingError(_unpaired_message(name, record.spec, specs))
        if len(records) != len(specs):
            ran = {r.spec.key for r in records}
            missing = next(spec for spec in specs if spec.key not in ran)
            raise PairingError(
                f"candidate {name!r} is not paired with the reference: it has no rollout of "
                f"{missing.key} (task {missing.task}, seed {missing.seed}), which the reference ran"
            )
        row = np.zeros(len(specs), dtype=bool)
        for record in records:
            row[index[record.spec.key]] = record_success(record, success)
        outcomes[name] = row
    return specs, ArraySource(reference_outcomes, outcomes)


def _unique_specs(who: str, records: Sequence[EpisodeRecord]) -> list[EpisodeSpec]:
    seen: set[str] = set()
    for record in records:
        if record.spec.key in seen:
            raise PairingError(f"{who} has two rollouts of {record.spec.key}")
        seen.add(record.spec.key)
    return [record.spec for record in records]


def _unpaired_message(name: str, spec: EpisodeSpec, specs: Sequence[EpisodeSpec]) -> str:
    message = (
        f"candidate {name!r} is not paired with the reference: it ran {spec.key} "
        f"(task {spec.task}, seed {spec.seed}), which the reference did not"
    )
    twin = next((s for s in specs if s.index == spec.index and s.suite == spec.suite), None)
    if twin is not None:
        differs = [
            f"{field} {getattr(twin, field)!r} vs {getattr(spec, field)!r}"
            for field in ("task", "object", "variation", "seed")
            if getattr(twin, field) != getattr(spec, field)
        ]
        message += f"; the reference's episode {spec.index} differs in " + ", ".join(differs)
    return message + ". Paired rollouts need identical EpisodeSpecs (same task and seed)."


class OutcomeLedger:
    """Caches outcomes per (policy, spec) and accounts for every rollout asked of the source."""

    def __init__(self, source: PairedSource) -> None:
        self.source = source
        self.reference_outcomes: dict[int, bool] = {}
        self.candidate_outcomes: dict[str, dict[int, bool]] = {}

    def reference(self, indices: Iterable[int]) -> dict[int, bool]:
        indices = [int(i) for i in indices]
        self._fetch(self.reference_outcomes, indices, self.source.reference)
        return {i: self.reference_outcomes[i] for i in indices}

    def candidate(self, name: str, indices: Iterable[int]) -> dict[int, bool]:
        indices = [int(i) for i in indices]
        cache = self.candidate_outcomes.setdefault(name, {})
        self._fetch(cache, indices, lambda todo: self.source.candidate(name, todo))
        return {i: cache[i] for i in indices}

    @staticmethod
    def _fetch(cache: dict[int, bool], indices: list[int], fetch) -> None:
        todo = [i for i in dict.fromkeys(indices) if i not in cache]
        if not todo:
            return
        got = fetch(todo)
        missing = [i for i in todo if i not in got]
        if missing:
            raise CertifyError(f"the outcome source returned no outcome for spec indices {missing}")
        cache.update({i: bool(got[i]) for i in todo})

    @property
    def rollouts(self) -> dict[str, int]:
        """Rollouts used per policy (``"reference"`` and each candidate name)."""
        counts = {"reference": len(self.reference_outcomes)}
        counts.update({name: len(c) for name, c in self.candidate_outcomes.items()})
        return counts

    @property
    def total_rollouts(self) -> int:
        return sum(self.rollouts.values())


class LossStream:
    """One candidate's acceleration-induced failures, in spec order, ``batch`` rollouts at a time.

    :meth:`take` returns the next losses (``True``: the reference succeeded and the candidate
    failed) for up to ``batch`` trials, and ``[]`` once the ``n_specs`` calibration specs are used
    up. For the conditional risk a trial is a reference-solved spec, so the reference is scanned
    ahead, in batches of ``batch`` specs, until enough solved specs are found.
    """

    def __init__(
        self, ledger: OutcomeLedger, name: str, risk: str, n_specs: int, batch: int = 1
    ) -> None:
        if risk not in RISKS:
            raise CertifyError(f"risk must be one of {list(RISKS)}, got {risk!r}")
        if batch < 1:
            raise CertifyError(f"batch must be >= 1, got {batch}")
        self.ledger, self.name, self.risk = ledger, name, risk
        self.n_specs, self.batch = n_specs, batch
        self.next_spec = 0  # first spec index not yet looked at
        self.trial_specs: list[int] = []  # the spec index of every trial taken so far

    def take(self) -> list[bool]:
        if self.risk == "joint":
            indices = list(range(self.next_spec, min(self.next_spec + self.batch, self.n_specs)))
            self.next_spec += len(indices)
            candidate = self.ledger.candidate(self.name, indices)
            failed = [i for i in indices if not candidate[i]]
            reference = self.ledger.reference(failed)
            self.trial_specs.extend(indices)
            return [(not candidate[i]) and reference.get(i, False) for i in indices]
        solved: list[int] = []
        while len(solved) < self.batch and self.next_spec < self.n_specs:
            stop = min(self.next_spec + self.batch, self.n_specs)
            reference = self.ledger.reference(range(self.next_spec, stop))
            for i in range(self.next_spec, stop):
                self.next_spec = i + 1
                if reference[i]:
                    solved.append(i)
                    if len(solved) == self.batch:
                        break
        candidate = self.ledger.candidate(self.name, solved)
        self.trial_specs.extend(solved)
        return [not candidate[i] for i in solved]
