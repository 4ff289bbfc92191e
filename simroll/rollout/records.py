"""Episode specs and records: the one record format every consumer reads.

An :class:`EpisodeSpec` fully determines an episode (task, object, variation, seed). Seeds come
from :func:`derive_seed`, a SHA-256 over (base seed, suite, task, index) that leaves the object
variation out, so that in- and out-of-distribution episodes and two policies evaluated on the same
spec list are paired. An :class:`EpisodeRecord` is what one finished episode leaves behind; its
JSON form (``to_json``/``from_json``) is the on-disk contract, and ``receipt`` is a SHA-256 over
that JSON (without the receipt) so that tampered or corrupted rows are detected.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

RECORD_VERSION = 1


def derive_seed(suite: str, task: str, index: int, base_seed: int = 0) -> int:
    """Seed for episode ``index`` of ``task`` in ``suite``: stable across runs and backends."""
    if index < 0:
        raise ValueError(f"episode index must be >= 0, got {index}")
    digest = hashlib.sha256(f"{base_seed}|{suite}|{task}|{index}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


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
    """One finished episode. Frozen; serialised to one JSON line per episode."""

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

    def _payload(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["dsr_success"] = self.dsr_success
        data["compute_per_call_s"] = self.compute_per_call_s
        for key in ("peak_deformation", "tolerance"):
            if isinstance(data[key], float) and not math.isfinite(data[key]):
                data[key] = repr(data[key])  # JSON has no inf/nan; keep them explicit
        return data

    @property
    def receipt(self) -> str:
        return hashlib.sha256(_canonical(self._payload()).encode()).hexdigest()

    def to_json(self) -> str:
        data = self._payload()
        data["receipt"] = self.receipt
        return _canonical(data)

    @classmethod
    def from_json(cls, line: str) -> EpisodeRecord:
        """Parse one line; raise ``ValueError`` if it is malformed or its receipt does not match."""
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"record is not valid JSON: {exc}") from exc
        if not isinstance(data, dict) or "receipt" not in data:
            raise ValueError("record has no receipt")
        receipt = data.pop("receipt")
        # The receipt covers the row exactly as stored, derived columns included, so that an edit
        # to e.g. ``dsr_success`` (recomputed on load, so otherwise ignored) is caught.
        if hashlib.sha256(_canonical(data).encode()).hexdigest() != receipt:
            raise ValueError(
                f"receipt mismatch for {_row_label(data)}: row was altered or corrupted"
            )
        data.pop("dsr_success", None)
        data.pop("compute_per_call_s", None)
        for key in ("peak_deformation", "tolerance"):
            if isinstance(data.get(key), str):
                data[key] = float(data[key])
        try:
            data["spec"] = EpisodeSpec.from_dict(data["spec"])
            record = cls(**data)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"record has missing or unknown fields: {exc}") from exc
        if record.receipt != receipt:
            raise ValueError(
                f"receipt mismatch for {record.spec.key}: row was altered or corrupted"
            )
        return record


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
