"""Episode specs and records: the one record format every consumer reads.

An :class:`EpisodeSpec` fully determines an episode (task, object, variation, seed). Seeds come
from :func:`derive_seed`, a SHA-256 over (base seed, suite, task, index) that leaves the object
variation out, so that in- and out-of-distribution episodes and two policies evaluated on the same
spec list are paired. An :class:`EpisodeRecord` is what one finished episode leaves behind; its
JSON form (``to_json``/``from_json``, one line of the JSONL store) is the on-disk contract.

A record has two parts, and the row keeps them apart:

* The **outcome** (top-level keys): what happened in the episode, fixed by the spec and the
  policy. ``version``, ``spec``, ``policy_id``, ``policy_config_hash``, ``success``, ``steps``,
  ``sim_time``, ``termination_reason``, ``peak_deformation``, ``tolerance``, ``policy_calls``,
  ``control_delay_steps``, every ``extra`` entry that is not a measurement (e.g.
  ``network_evaluations``), and the derived columns ``dsr_success``, ``network_evaluations`` and
  ``errored`` (whether the episode raised).
* The **measurements** (the ``measurements`` object): what differs between two correct runs of
  the same episode. The wall times ``policy_compute_s``, ``episode_wall_s`` and the derived
  ``compute_per_call_s``; the ``error`` text (a traceback excerpt names the running machine's file
  paths and line numbers, and a dead worker's message names the backend); and ``extra`` entries
  that are bookkeeping or timing: ``attempt`` (which try of the spec this was) and any key ending
  in ``_s`` (seconds, by the repo's naming convention), see :func:`is_measurement_extra`.

``receipt`` is a SHA-256 over the canonical JSON of the outcome alone, so two runs of the same
spec with the same policy give the same receipt whatever their timings, retry count or backend
(local, vector, ray): equal receipts mean equal episodes. Floats are hashed exactly, so across
machines this holds where the simulation is bit-reproducible (same MuJoCo build and arithmetic).
``row_hash`` is a SHA-256 over the whole row but itself (receipt and measurements included), so an
edit to any field, outcome or measurement, is detected on load; both mismatches are reported as
"receipt mismatch".

Version-1 rows (written before this split; one ``receipt`` over the whole row, timings included)
are still read: ``from_json`` verifies them by their old rule, then upgrades them in memory to the
current version, so their ``receipt`` is the outcome receipt and compares equal to a new run's.
The old whole-row hash served only as an integrity check and is not kept. Rows of any other
version are refused with a message naming the versions this code reads.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

RECORD_VERSION = 2
READABLE_VERSIONS = (1, RECORD_VERSION)

# ``extra`` keys that are bookkeeping, not outcome; keys ending in ``_s`` are timings.
MEASUREMENT_EXTRA_KEYS = frozenset({"attempt"})

# Columns recomputed from the fields on load; they are written for readers of the raw rows.
_DERIVED_OUTCOME = ("dsr_success", "network_evaluations", "errored")
_NON_FINITE_OK = ("peak_deformation", "tolerance")


def derive_seed(suite: str, task: str, index: int, base_seed: int = 0) -> int:
    """Seed for episode ``index`` of ``task`` in ``suite``: stable across runs and backends."""
    if index < 0:
        raise ValueError(f"episode index must be >= 0, got {index}")
    digest = hashlib.sha256(f"{base_seed}|{suite}|{task}|{index}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def is_measurement_extra(key: str) -> bool:
    """Whether ``extra[key]`` is a measurement (bookkeeping or timing): not in the receipt."""
    return key in MEASUREMENT_EXTRA_KEYS or key.endswith("_s")


@dataclass(frozen=True)
class EpisodeSpec:
    """What to run: everything that determines an episode's initial conditions."""

    task: str
    object: str
    variation: str = "default"
    seed: int = 0
    index: int = 0
    suite: str = "soft"

    @property
    def key(self) -> str:
        """Unique, human-readable identity used for resume and pairing."""
        return f"{self.suite}/{self.task}/{self.object}/{self.variation}/{self.index}/{self.seed}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeSpec:
        return cls(**data)


@dataclass(frozen=True)
class EpisodeRecord:
    """One finished episode. Frozen; serialised to one JSON line per episode.

    The fields are flat; which of them are outcome and which measurements is the module's rule
    (:attr:`outcome`, :attr:`measurements`). ``version`` is always :data:`RECORD_VERSION`: older
    rows are upgraded by :meth:`from_json`.
    """

    spec: EpisodeSpec
    policy_id: str
    policy_config_hash: str
    success: bool
    steps: int
    sim_time: float
    termination_reason: str
    peak_deformation: float
    tolerance: float
    policy_calls: int = 0
    policy_compute_s: float = 0.0
    episode_wall_s: float = 0.0
    control_delay_steps: int = 0
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    version: int = RECORD_VERSION

    def __post_init__(self) -> None:
        if self.version != RECORD_VERSION:
            raise ValueError(
                f"EpisodeRecord holds format version {RECORD_VERSION}, got version={self.version!r}"
                "; rows of older versions are upgraded by EpisodeRecord.from_json"
            )

    @property
    def dsr_success(self) -> bool:
        """Deformation-aware success: task success AND peak deformation within tolerance."""
        return bool(self.success and self.peak_deformation <= self.tolerance)

    @property
    def compute_per_call_s(self) -> float:
        return self.policy_compute_s / self.policy_calls if self.policy_calls else 0.0

    @property
    def network_evaluations(self) -> int:
        """Forward passes of the policy's network in this episode: what the episode engine
        recorded from a policy that counts them (``extra["network_evaluations"]``), else one per
        ``select_action`` call."""
        return int(self.extra.get("network_evaluations", self.policy_calls))

    @property
    def outcome(self) -> dict[str, Any]:
        """What happened in the episode, as the JSON-ready dict the receipt hashes."""
        data: dict[str, Any] = {
            "version": self.version,
            "spec": self.spec.to_dict(),
            "policy_id": self.policy_id,
            "policy_config_hash": self.policy_config_hash,
            "success": self.success,
            "steps": self.steps,
            "sim_time": self.sim_time,
            "termination_reason": self.termination_reason,
            "peak_deformation": self.peak_deformation,
            "tolerance": self.tolerance,
            "policy_calls": self.policy_calls,
            "control_delay_steps": self.control_delay_steps,
            "extra": {k: v for k, v in self.extra.items() if not is_measurement_extra(k)},
            "dsr_success": self.dsr_success,
            "network_evaluations": self.network_evaluations,
            "errored": self.error is not None,
        }
        for key in _NON_FINITE_OK:
            if isinstance(data[key], float) and not math.isfinite(data[key]):
                data[key] = repr(data[key])  # JSON has no inf/nan; keep them explicit
        return data

    @property
    def measurements(self) -> dict[str, Any]:
        """What differs between correct runs of the same episode: wall times, error text,
        bookkeeping ``extra`` entries. Not covered by the receipt."""
        return {
            "policy_compute_s": self.policy_compute_s,
            "episode_wall_s": self.episode_wall_s,
            "compute_per_call_s": self.compute_per_call_s,
            "error": self.error,
            "extra": {k: v for k, v in self.extra.items() if is_measurement_extra(k)},
        }

    @property
    def receipt(self) -> str:
        """SHA-256 of the outcome: equal receipts mean equal episodes."""
        return _sha256(self.outcome)

    def to_json(self) -> str:
        data = self.outcome
        data["measurements"] = self.measurements
        data["receipt"] = self.receipt
        data["row_hash"] = _sha256(data)
        return _canonical(data)

    @classmethod
    def from_json(cls, line: str) -> EpisodeRecord:
        """Parse one line; raise ``ValueError`` if it is malformed, of a version this code does not
        read, or altered (its receipt or row hash does not match). Version-1 rows are upgraded."""
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"record is not valid JSON: {exc}") from exc
        if not isinstance(data, dict) or "receipt" not in data:
            raise ValueError("record has no receipt")
        version = data.get("version", 1)
        if version == 1 and not isinstance(version, bool):
            return cls._from_v1(data)
        if version != RECORD_VERSION or isinstance(version, bool):
            raise ValueError(
                f"record {_row_label(data)} has version {version!r}; this simroll reads versions "
                f"{', '.join(map(str, READABLE_VERSIONS))} (a newer simroll wrote it?)"
            )
        if "row_hash" not in data:
            raise ValueError(f"record {_row_label(data)} has no row_hash")
        row_hash = data.pop("row_hash")
        # The row hash covers the row exactly as stored, derived columns and measurements
        # included, so that an edit to any of them (recomputed or not hashed on load) is caught.
        if _sha256(data) != row_hash:
            raise ValueError(
                f"receipt mismatch for {_row_label(data)}: row was altered or corrupted "
                "(row_hash does not match)"
            )
        receipt = data.pop("receipt")
        record = cls._build(data, _split_measurements(data))
        if record.receipt != receipt:
            raise ValueError(
                f"receipt mismatch for {record.spec.key}: the outcome was altered or corrupted"
            )
        return record

    @classmethod
    def _from_v1(cls, data: dict[str, Any]) -> EpisodeRecord:
        """A version-1 row: one receipt over the whole flat row. Verified, then upgraded."""
        receipt = data.pop("receipt")
        if _sha256(data) != receipt:
            raise ValueError(
                f"receipt mismatch for {_row_label(data)}: row was altered or corrupted "
                "(version-1 row)"
            )
        data.pop("compute_per_call_s", None)
        data["version"] = RECORD_VERSION
        return cls._build(data, {})

    @classmethod
    def _build(cls, data: dict[str, Any], measured: dict[str, Any]) -> EpisodeRecord:
        """The record from a verified row's fields (``measured``: those from its measurements)."""
        for key in _DERIVED_OUTCOME:
            data.pop(key, None)
        for key in _NON_FINITE_OK:
            if isinstance(data.get(key), str):
                data[key] = float(data[key])
        try:
            data["spec"] = EpisodeSpec.from_dict(data["spec"])
            if measured:
                data["extra"] = {**data["extra"], **measured.pop("extra")}
                data.update(measured)
            return cls(**data)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"record has missing or unknown fields: {exc}") from exc


def _split_measurements(data: dict[str, Any]) -> dict[str, Any]:
    """Take the ``measurements`` object out of a current-version row and check that outcome and
    measurements each hold only their own keys."""
    measured = data.pop("measurements", None)
    label = _row_label(data)
    if not isinstance(measured, dict) or not isinstance(measured.get("extra"), dict):
        raise ValueError(f"record {label} has missing or unknown fields: no measurements object")
    measured = dict(measured)
    measured.pop("compute_per_call_s", None)
    unknown = set(measured) - {"policy_compute_s", "episode_wall_s", "error", "extra"}
    misplaced = [k for k in measured["extra"] if not is_measurement_extra(k)]
    if isinstance(data.get("extra"), dict):
        misplaced += [k for k in data["extra"] if is_measurement_extra(k)]
    if unknown or misplaced:
        raise ValueError(
            f"record {label} has missing or unknown fields: unknown measurements "
            f"{sorted(unknown)}, misplaced extra keys {sorted(misplaced)}"
        )
    return measured


def _row_label(data: dict[str, Any]) -> str:
    """The spec key of a raw row if it can be read, for error messages about that row."""
    spec = data.get("spec")
    if not isinstance(spec, dict):
        return "row"
    try:
        return EpisodeSpec.from_dict(spec).key
    except TypeError:
        return "row"


def _canonical(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _sha256(data: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical(data).encode()).hexdigest()
