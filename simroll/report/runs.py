"""Reads a run directory for the HTML report: what is there, and everything that is not.

:func:`load_eval_run` reads an eval run (``records.jsonl``, ``summary.json``, ``.hydra/``,
``videos/``; the expected episodes from the run manifest's ``specs.jsonl``, or re-derived from the
config, with a warning, for a run made before manifests) and :func:`load_certify_run` a
certification run (``certificate.json`` and one record store per policy in a subfolder). Neither
raises on bad contents, only on a directory that does not exist (:class:`ReportError`): a missing
or unreadable file, corrupted, duplicate or truncated record lines, expected episodes without a
record, a stale summary or mixed policies each become a :class:`Problem` with the file, line
numbers and keys involved, and the page puts them at the top. Numbers on the page are always
recomputed from the valid records, so the problems say exactly what those numbers leave out.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simroll.rollout.manifest import (
    MANIFEST_FILENAME,
    ManifestError,
    read_expected_specs,
    read_manifest,
)
from simroll.rollout.records import EpisodeRecord, EpisodeSpec
from simroll.rollout.runner import make_specs
from simroll.rollout.store import RECORDS_FILENAME, RecordStore, StoreContents
from simroll.rollout.video import video_name
from simroll.scoring.dsr import GroupSummary, summarise

CERTIFICATE_FILENAME = "certificate.json"
SUMMARY_FILENAME = "summary.json"
MULTIRUN_FILENAME = "multirun.yaml"  # what Hydra leaves in a sweep's root
VIDEOS_DIRNAME = "videos"
# Lists of keys in a problem are cut here; the count is always given in full.
MAX_DETAILS = 50


class ReportError(ValueError):
    """The report cannot be written at all (e.g. the run directory does not exist)."""


@dataclass(frozen=True)
class Problem:
    """Something the page cannot show in full, said once at the top of the page.

    ``severity`` is ``"error"`` when numbers on the page leave episodes out (missing, corrupted
    or unscorable records) and ``"warning"`` when only context is missing (provenance, videos).
    """

    what: str
    details: tuple[str, ...] = ()
    severity: str = "error"


@dataclass(frozen=True)
class Breakdown(GroupSummary):
    """Scores of the records sharing one label (e.g. one task and object, variations pooled);
    the label replaces the summary's task/object/variation, which are left empty."""

    label: tuple[str, ...] = ()


@dataclass
class EvalRun:
    """One eval run directory as the report sees it."""

    run_dir: Path
    records: list[EpisodeRecord] = field(default_factory=list)
    store: StoreContents | None = None
    summary: dict[str, Any] | None = None
    provenance: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    expected: list[EpisodeSpec] | None = None
    videos: dict[str, Path] = field(default_factory=dict)  # spec key -> mp4
    orphan_videos: list[Path] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def missing(self) -> list[EpisodeSpec]:
        """Expected specs with no valid record (empty when the expected specs are unknown)."""
        if self.expected is None:
            return []
        have = {record.spec.key for record in self.records}
        return [spec for spec in self.expected if spec.key not in have]

    @property
    def policy_ids(self) -> list[str]:
        return sorted({record.policy_id for record in self.records})

    @property
    def line_numbers(self) -> dict[str, int]:
        return {} if self.store is None else self.store.line_numbers


@dataclass
class PolicyStore:
    """One policy's record store inside a certification run."""

    name: str
    role: str  # "reference" or "candidate"
    run_dir: Path
    records: list[EpisodeRecord] = field(default_factory=list)
    store: StoreContents | None = None
    claimed_rollouts: int | None = None  # what certificate.json says this policy ran


@dataclass
class CertifyRun:
    """One certification run directory as the report sees it."""

    run_dir: Path
    certificate: dict[str, Any] | None = None
    policies: list[PolicyStore] = field(default_factory=list)
    config: dict[str, Any] | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def provenance(self) -> dict[str, Any] | None:
        if self.certificate is None:
            return None if self.config is None else {"config": self.config}
        return self.certificate.get("provenance") or None


def run_kind(run_dir: str | Path) -> str:
    """``"certify"`` when ``run_dir`` holds a certificate or per-policy stores, else ``"eval"``."""
    run_dir = Path(run_dir)
    if (run_dir / CERTIFICATE_FILENAME).exists():
        return "certify"
    if not (run_dir / RECORDS_FILENAME).exists() and _policy_folders(run_dir):
        return "certify"
    return "eval"


def _policy_folders(run_dir: Path) -> list[Path]:
    if not run_dir.is_dir():
        return []
    return sorted(p for p in run_dir.iterdir() if p.is_dir() and (p / RECORDS_FILENAME).exists())


def _checked_dir(run_dir: str | Path) -> Path:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ReportError(f"run directory {str(run_dir)!r} does not exist or is not a directory")
    if (run_dir / MULTIRUN_FILENAME).exists() and not (run_dir / MANIFEST_FILENAME).exists():
        jobs = sorted(p.name for p in run_dir.iterdir() if (p / MANIFEST_FILENAME).exists())
        raise ReportError(
            f"{run_dir} holds a multirun (-m) sweep, one run directory per job "
            f"({', '.join(jobs) or 'none finished'}); report each job, e.g. "
            f"`simroll report {run_dir / (jobs[0] if jobs else '0')}`"
        )
    return run_dir


def load_eval_run(run_dir: str | Path) -> EvalRun:
    """Read an eval run directory; every gap becomes a :class:`Problem` (see the module)."""
    run = EvalRun(run_dir=_checked_dir(run_dir))
    _read_summary(run)
    _read_store(run)
    _read_expected(run)
    _read_videos(run)
    errored = [record for record in run.records if record.error is not None]
    if errored:
        run.problems.append(
            Problem(
                f"{len(errored)} episode(s) raised an exception; they count as failures",
                _cut([f"{r.spec.key}: {_first_line(r.error)}" for r in errored]),
                severity="warning",
            )
        )
    if len(run.policy_ids) > 1:
        run.problems.append(
            Problem(
                f"{RECORDS_FILENAME} mixes {len(run.policy_ids)} policies "
                f"({', '.join(run.policy_ids)}): rates are not computed, since they would blend "
                "policies; the episode table shows every record"
            )
        )
    return run


def _read_summary(run: EvalRun) -> None:
    path = run.run_dir / SUMMARY_FILENAME
    summary = _read_json(path, run.problems)
    hydra_config = run.run_dir / ".hydra" / "config.yaml"
    if isinstance(summary, dict):
        run.summary = summary
        provenance = summary.get("provenance")
        run.provenance = provenance if isinstance(provenance, dict) else None
        if run.provenance is not None and isinstance(run.provenance.get("config"), dict):
            run.config = run.provenance["config"]
    elif summary is not None:
        run.problems.append(Problem(f"{path} is not a JSON object; ignored", severity="warning"))
    config_source = hydra_config
    if run.config is None:
        # The manifest's config before Hydra's: a refused resume still rewrites .hydra/.
        try:
            manifest = read_manifest(run.run_dir)
        except ManifestError:
            manifest = None  # reported with the expected episodes
        if manifest is not None and manifest.config:
            run.config, config_source = manifest.config, run.run_dir / MANIFEST_FILENAME
    if run.config is None and hydra_config.exists():
        try:
            config = yaml.safe_load(hydra_config.read_text())
        except (OSError, yaml.YAMLError) as exc:
            run.problems.append(
                Problem(
                    f"{hydra_config} cannot be read: {_first_line(str(exc))}", severity="warning"
                )
            )
        else:
            if isinstance(config, dict):
                run.config = config
    if run.summary is None and not path.exists():
        source = f"the config comes from {config_source}" if run.config else "provenance unknown"
        run.problems.append(
            Problem(
                f"{path.name} not found: the run did not finish writing its summary ({source})",
                severity="warning",
            )
        )


def _read_store(run: EvalRun) -> None:
    path = run.run_dir / RECORDS_FILENAME
    if not path.exists():
        claimed = (run.summary or {}).get("episodes")
        suffix = f" (summary.json reports {claimed} episodes)" if claimed else ""
        run.problems.append(
            Problem(f"{path.name} not found: no episode of this run can be shown{suffix}")
        )
        return
    run.store = RecordStore(run.run_dir).load()
    run.records = sorted(
        run.store.records.values(), key=lambda r: run.store.line_numbers[r.spec.key]
    )
    run.problems.extend(store_problems(run.store))
    claimed = (run.summary or {}).get("episodes")
    if isinstance(claimed, int) and claimed != len(run.records):
        run.problems.append(
            Problem(
                f"summary.json was written for {claimed} episodes but {path.name} now holds "
                f"{len(run.records)} valid records; this page is recomputed from the records",
                severity="warning",
            )
        )


def store_problems(store: StoreContents, label: str = "") -> list[Problem]:
    """The problems of one record store, with line numbers, reasons and excerpts."""
    name = label or store.path.name
    problems = []
    if store.corrupted:
        problems.append(
            Problem(
                f"{name}: {len(store.corrupted)} corrupted line(s) not counted",
                _cut(
                    [
                        f"line {c.line_number}: {c.reason}"
                        + (f" | {c.excerpt}" if c.excerpt else "")
                        for c in store.corrupted
                    ]
                ),
            )
        )
    if store.duplicates:
        problems.append(
            Problem(
                f"{name}: {len(store.duplicates)} duplicate line(s) not counted",
                _cut(
                    [
                        f"line {d.line_number} repeats {d.key} (line {d.first_line_number} kept)"
                        for d in store.duplicates
                    ]
                ),
            )
        )
    if store.truncated is not None:
        t = store.truncated
        problems.append(
            Problem(
                f"{name}: truncated last line {t.line_number} ({t.byte_count} bytes, a write cut "
                "short) not counted",
                (t.excerpt,) if t.excerpt else (),
            )
        )
    return problems


def _read_expected(run: EvalRun) -> None:
    try:
        run.expected = read_expected_specs(run.run_dir)
    except ManifestError as exc:
        run.problems.append(
            Problem(
                f"the run manifest cannot be used ({exc}); the expected episodes are re-derived "
                "from the run's config",
                severity="warning",
            )
        )
    if run.expected is None and not _expected_from_config(run):
        return
    missing = run.missing
    if missing:
        run.problems.append(
            Problem(
                f"{len(missing)} of {len(run.expected)} expected episodes have no valid record; "
                "they are not counted in any rate and appear as 'no record' rows",
                _cut([spec.key for spec in missing]),
            )
        )
    expected_keys = {spec.key for spec in run.expected}
    extra = [r.spec.key for r in run.records if r.spec.key not in expected_keys]
    if extra:
        run.problems.append(
            Problem(
                f"{len(extra)} record(s) are not among the configured episodes (was the config "
                "changed on a resumed run?); they are counted",
                _cut(extra),
                severity="warning",
            )
        )


def _expected_from_config(run: EvalRun) -> bool:
    """The fallback for a run directory without a manifest (made before run manifests): the
    expected specs re-derived from its config. False (and a problem) when they cannot be."""
    unusable_manifest = (run.run_dir / MANIFEST_FILENAME).exists()  # already reported
    if not unusable_manifest and (run.records or run.config is not None):
        run.problems.append(
            Problem(
                f"no {MANIFEST_FILENAME} (a run made before run manifests): the expected "
                "episodes are re-derived from the run's config",
                severity="warning",
            )
        )
    if run.config is None:
        run.problems.append(
            Problem(
                "no config found (summary.json or .hydra/config.yaml): which episodes were "
                "expected is unknown, so missing ones cannot be listed",
                severity="warning",
            )
        )
        return False
    try:
        env = run.config["env"]
        run.expected = make_specs(
            env["suite"],
            list(env["tasks"]),
            list(env["objects"]),
            list(env["variations"]),
            int(run.config["episodes"]),
            int(run.config.get("seed", 0)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        run.problems.append(
            Problem(
                f"the run's config does not say which episodes were expected ({exc!r}), so "
                "missing ones cannot be listed",
                severity="warning",
            )
        )
        return False
    return True


def _read_videos(run: EvalRun) -> None:
    directory = run.run_dir / VIDEOS_DIRNAME
    if not directory.is_dir():
        return
    files = {p.name: p for p in directory.glob("*.mp4") if not p.name.endswith(".tmp.mp4")}
    for record in run.records:
        path = files.pop(video_name(record.spec), None)
        if path is not None:
            run.videos[record.spec.key] = path
    run.orphan_videos = sorted(files.values())
    partial = sorted(directory.glob("*.tmp.mp4"))
    if run.orphan_videos:
        run.problems.append(
            Problem(
                f"{len(run.orphan_videos)} video(s) in videos/ match no valid record; shown last",
                _cut([p.name for p in run.orphan_videos]),
                severity="warning",
            )
        )
    if partial:
        run.problems.append(
            Problem(
                f"{len(partial)} unfinished video(s) in videos/ (a write was cut short); not shown",
                _cut([p.name for p in partial]),
                severity="warning",
            )
        )


def load_certify_run(run_dir: str | Path) -> CertifyRun:
    """Read a certification run directory; every gap becomes a :class:`Problem`."""
    run = CertifyRun(run_dir=_checked_dir(run_dir))
    path = run.run_dir / CERTIFICATE_FILENAME
    certificate = _read_json(path, run.problems)
    if isinstance(certificate, dict):
        reason = _certificate_shape(certificate)
        if reason:
            run.problems.append(Problem(f"{path.name} is not a certificate ({reason}); ignored"))
        else:
            run.certificate = certificate
    elif certificate is None and not path.exists():
        run.problems.append(
            Problem(
                f"{path.name} not found: the certification did not finish (rerun the same "
                "simroll certify command to resume); only the record stores are shown"
            )
        )
    hydra_config = run.run_dir / ".hydra" / "config.yaml"
    if run.certificate is not None:
        config = (run.certificate.get("provenance") or {}).get("config")
        run.config = config if isinstance(config, dict) else None
    if run.config is None and hydra_config.exists():
        try:
            config = yaml.safe_load(hydra_config.read_text())
            run.config = config if isinstance(config, dict) else None
        except (OSError, yaml.YAMLError):
            pass
    _read_policy_stores(run)
    return run


def _certificate_shape(certificate: dict[str, Any]) -> str | None:
    """What is wrong with the shape of a parsed certificate.json, or None."""
    missing = [k for k in ("chosen", "settings", "reference", "candidates") if k not in certificate]
    if missing:
        return f"lacks {missing}"
    if not isinstance(certificate["reference"], dict) or "name" not in certificate["reference"]:
        return "reference has no name"
    candidates = certificate["candidates"]
    if not isinstance(candidates, list) or not all(
        isinstance(c, dict) and "name" in c for c in candidates
    ):
        return "candidates is not a list of named entries"
    if not isinstance(certificate["settings"], dict):
        return "settings is not an object"
    return None


def _read_policy_stores(run: CertifyRun) -> None:
    roles: dict[str, str] = {}
    claimed: dict[str, int] = {}
    if run.certificate is not None:
        reference = run.certificate["reference"].get("name", "reference")
        roles[reference] = "reference"
        per_policy = (run.certificate.get("rollouts") or {}).get("per_policy") or {}
        claimed[reference] = int(per_policy.get("reference", 0))
        for candidate in run.certificate["candidates"]:
            roles[candidate["name"]] = "candidate"
            claimed[candidate["name"]] = int(per_policy.get(candidate["name"], 0))
    folders = {p.name: p for p in _policy_folders(run.run_dir)}
    for name in [*roles, *sorted(n for n in folders if n not in roles)]:
        policy = PolicyStore(
            name=name,
            role=roles.get(name, "unknown"),
            run_dir=run.run_dir / name,
            claimed_rollouts=claimed.get(name),
        )
        if name in folders:
            policy.store = RecordStore(folders[name]).load()
            policy.records = sorted(
                policy.store.records.values(), key=lambda r: policy.store.line_numbers[r.spec.key]
            )
            run.problems.extend(store_problems(policy.store, f"{name}/{RECORDS_FILENAME}"))
        elif claimed.get(name):
            run.problems.append(
                Problem(
                    f"no record store for {name!r} ({name}/{RECORDS_FILENAME}), though the "
                    f"certificate counts {claimed[name]} of its rollouts"
                )
            )
        if policy.claimed_rollouts and len(policy.records) < policy.claimed_rollouts:
            run.problems.append(
                Problem(
                    f"the certificate counts {policy.claimed_rollouts} rollouts of {name!r} but "
                    f"its store holds {len(policy.records)} valid records",
                    severity="warning",
                )
            )
        if policy.role == "unknown":
            run.problems.append(
                Problem(
                    f"folder {name}/ holds records but the certificate names no such policy",
                    severity="warning",
                )
            )
        run.policies.append(policy)
    if not run.policies:
        run.problems.append(Problem("no per-policy record stores (<policy>/records.jsonl) found"))


def breakdown(
    records: Iterable[EpisodeRecord],
    label: Callable[[EpisodeRecord], tuple[str, ...]],
    method: str = "beta",
    alpha: float = 0.05,
) -> list[Breakdown]:
    """TSR, DSR and violation rate (:func:`simroll.scoring.dsr.summarise`) per label."""
    groups: dict[tuple[str, ...], list[EpisodeRecord]] = defaultdict(list)
    for record in records:
        groups[label(record)].append(record)
    rows = []
    for key in sorted(groups):
        scores = summarise("", "", "", groups[key], method, alpha)
        rows.append(Breakdown(**vars(scores), label=key))
    return rows


def _read_json(path: Path, problems: list[Problem]) -> Any:
    """The parsed JSON at ``path``; ``None`` (and a problem) when it is unreadable."""
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.append(Problem(f"{path.name} cannot be read: {_first_line(str(exc))}"))
        return None


def _first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else ""


def _cut(items: Sequence[str]) -> tuple[str, ...]:
    if len(items) <= MAX_DETAILS:
        return tuple(items)
    return (*items[:MAX_DETAILS], f"... and {len(items) - MAX_DETAILS} more")
