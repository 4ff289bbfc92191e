"""Run manifests: what a run directory was made with, so that a resume cannot mix settings.

Every ``simroll eval``, ``certify`` and ``collect`` run starts by writing ``manifest.json`` into
its run directory (atomically, with :func:`~simroll.io.write_json_atomic`) and the
full list of specs it expects as ``specs.jsonl`` (one ``EpisodeSpec`` per line, also replaced
atomically). The manifest holds the resolved config, the *outcome fingerprint* (a flat mapping of
dotted keys to every setting that determines an episode's outcome: env config, policy names and
configs, control delay, base seed, tasks, objects, variations; never the episode count, progress,
videos, backend or workers) and, for a certification, its *design* (epsilon, delta, risk, success,
method, design, n and the candidates in test order). :func:`start_run` is how a run claims its
directory: a directory made with another fingerprint is refused before any episode runs, naming
the differing keys; a changed episode count is allowed only where the caller says so (eval:
growing a run is fine), and a changed certification design is refused, since testing stored
outcomes again under a new design voids the guarantee. The manifest also keeps ``code``, the
simroll code of each invocation that wrote into the directory (:func:`simroll.provenance.
code_version`, oldest first; a new entry only when the code changed): a resume with other code is
allowed, with a note, and the summary's provenance lists every version. :func:`read_expected_specs`
is how ``simroll report`` learns which episodes a run expected.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from simroll.io import write_json_atomic, write_text_atomic
from simroll.provenance import code_version
from simroll.rollout.records import EpisodeSpec
from simroll.rollout.store import RECORDS_FILENAME

MANIFEST_FILENAME = "manifest.json"
SPECS_FILENAME = "specs.jsonl"
MANIFEST_VERSION = 1
WEIGHTS_KEY = "weights_sha256"  # beside a policy config's checkpoint ``path``: its weights' digest
# The env config keys that determine an episode's outcome.
ENV_OUTCOME_KEYS = (
    "suite",
    "tasks",
    "objects",
    "variations",
    "obs_mode",
    "gripper_mode",
    "image_size",
    "rigid_twin",
)
# How many differing keys a refusal names before it says "and N more".
_MAX_CHANGES = 8
_MAX_VALUE_CHARS = 60
_UNSET = object()


class ManifestError(ValueError):
    """A run directory cannot be resumed with these settings, or its manifest is unreadable."""


@dataclass(frozen=True)
class RunManifest:
    """What a run directory was made with (see the module docstring)."""

    command: str
    fingerprint: dict[str, Any]
    episodes: int
    config: dict[str, Any] = field(default_factory=dict)
    design: dict[str, Any] | None = None
    spec_count: int = 0
    specs_sha256: str = ""
    created: str = ""
    version: int = MANIFEST_VERSION
    code: list[dict[str, Any]] = field(default_factory=list)

    @property
    def fingerprint_sha256(self) -> str:
        return _sha256(_canonical(self.fingerprint))

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "command": self.command,
            "created": self.created,
            "episodes": self.episodes,
            "spec_count": self.spec_count,
            "specs_file": SPECS_FILENAME,
            "specs_sha256": self.specs_sha256,
            "fingerprint_sha256": self.fingerprint_sha256,
            "fingerprint": self.fingerprint,
            "design": self.design,
            "config": self.config,
            "code": self.code,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunManifest:
        try:
            return cls(
                command=str(data["command"]),
                fingerprint=dict(data["fingerprint"]),
                episodes=int(data["episodes"]),
                config=dict(data.get("config") or {}),
                design=None if data.get("design") is None else dict(data["design"]),
                spec_count=int(data.get("spec_count", 0)),
                specs_sha256=str(data.get("specs_sha256", "")),
                created=str(data.get("created", "")),
                version=int(data.get("version", MANIFEST_VERSION)),
                code=[dict(entry) for entry in data.get("code") or []],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"not a run manifest: {exc!r}") from None


def outcome_fingerprint(
    env: Mapping[str, Any],
    policies: Mapping[str, tuple[str, Mapping[str, Any]]],
    **settings: Any,
) -> dict[str, Any]:
    """The flat fingerprint of what determines an episode's outcome.

    ``env`` is the env config (only :data:`ENV_OUTCOME_KEYS` count), ``policies`` maps a role
    (``policy``, ``reference``, ``candidates.<name>``) to the policy's (name, resolved config),
    and ``settings`` are further outcome settings (``seed``, ``control_delay_steps``). A policy
    loaded from a checkpoint directory (a ``path``, at any depth of its config, holding
    ``model.safetensors``) adds its weights' SHA-256 beside that path (``<role>.weights_sha256``,
    ``<role>.learner.weights_sha256``): the same path retrained is another policy.
    """
    from simroll.policies.checkpoint import weights_digest

    fingerprint: dict[str, Any] = {f"env.{key}": env[key] for key in ENV_OUTCOME_KEYS if key in env}
    for role, (name, config) in policies.items():
        fingerprint[role] = name
        flat = _flatten(config, f"{role}.")
        fingerprint.update(flat)
        for key, value in flat.items():  # a checkpoint's path, at any depth (a DAgger learner's)
            if key.endswith(".path") and isinstance(value, str):
                digest = weights_digest(value)
                if digest is not None:
                    fingerprint[key[: -len("path")] + WEIGHTS_KEY] = digest
    fingerprint.update(settings)
    return _canonical_value(fingerprint)


def start_run(
    run_dir: str | os.PathLike[str],
    manifest: RunManifest,
    specs: Sequence[EpisodeSpec],
    *,
    episodes_may_change: bool,
) -> str | None:
    """Claim ``run_dir`` for a run described by ``manifest`` expecting ``specs``.

    Refuses (:class:`ManifestError`, before any episode runs) a directory whose manifest has
    another command, fingerprint or design, or another episode count unless
    ``episodes_may_change``; then writes ``specs.jsonl`` and ``manifest.json``. Returns a note for
    the user (a run that grows or shrinks, a directory from before manifests) or None.
    """
    run_dir = Path(run_dir)
    existing = read_manifest(run_dir)
    note = None
    code = code_version()
    if existing is None:
        if _holds_records(run_dir):
            note = (
                f"{run_dir} holds records but no {MANIFEST_FILENAME} (made before run manifests): "
                "its settings cannot be checked; recording the current ones"
            )
        codes = [code]
    else:
        note = _check_resume(run_dir, existing, manifest, episodes_may_change)
        codes = list(existing.code)
        if codes[-1:] != [code]:  # a new entry only when the code changed (or none was kept)
            if codes:
                code_note = (
                    f"resuming {run_dir} with other code ({_code_change(codes[-1], code)}): its "
                    f"records will come from {len(codes) + 1} code versions, listed in "
                    f"{MANIFEST_FILENAME} and the summary's provenance; use a new output_dir for "
                    "results from one version"
                )
                note = code_note if note is None else f"{note}; {code_note}"
            codes.append(code)
        manifest = RunManifest(**{**vars(manifest), "created": existing.created})
    write_manifest(run_dir, RunManifest(**{**vars(manifest), "code": codes}), specs)
    return note


def _code_change(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """``"git_sha a -> b, ..."`` for the code fields that differ."""
    return ", ".join(
        f"{key} {_show(before.get(key))} -> {_show(after.get(key))}"
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    )


def _check_resume(
    run_dir: Path, existing: RunManifest, manifest: RunManifest, episodes_may_change: bool
) -> str | None:
    if existing.command != manifest.command:
        raise ManifestError(
            f"output_dir {run_dir} was made by `simroll {existing.command}`, not "
            f"`simroll {manifest.command}`; use a new output_dir"
        )
    if existing.design is not None or manifest.design is not None:
        changes = describe_changes(existing.design or {}, manifest.design or {})
        if changes:
            raise ManifestError(
                f"output_dir {run_dir} holds a certification with another design: {changes}; "
                "testing its stored outcomes again under a new design voids the guarantee (the "
                "design must be fixed before any outcome is seen); use a new output_dir"
            )
    new = dict(manifest.fingerprint)
    unchecked = [
        key for key in new if key.endswith("." + WEIGHTS_KEY) and key not in existing.fingerprint
    ]
    for key in unchecked:  # a run from before weight digests: its weights cannot be checked
        del new[key]
    changes = describe_changes(existing.fingerprint, new)
    if changes:
        raise ManifestError(
            f"output_dir {run_dir} was made with other settings: {changes}; use a new output_dir"
        )
    weights_note = (
        f"{run_dir} predates weight digests: the weights of {', '.join(sorted(unchecked))} "
        "cannot be checked against its records; recording them now"
        if unchecked
        else None
    )
    if existing.episodes == manifest.episodes:
        return weights_note
    if not episodes_may_change:
        raise ManifestError(
            f"output_dir {run_dir} was made with other settings: episodes {existing.episodes} -> "
            f"{manifest.episodes}; use a new output_dir"
        )
    verb = "grows" if manifest.episodes > existing.episodes else "shrinks"
    note = f"resuming {run_dir}: the run {verb} from {existing.episodes} to {manifest.episodes} "
    note += "episodes per (task, object, variation)"
    if verb == "shrinks":
        note += "; records beyond them are kept but not reported"
    return note if weights_note is None else f"{note}; {weights_note}"


def describe_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """``"key old -> new, ..."`` for every key whose value differs; "" when none does.

    A key set on one side only is named once, without the keys below it (``candidates.x``, not
    every ``candidates.x.<field>``).
    """
    old, new = _canonical_value(dict(old)), _canonical_value(dict(new))
    changes: list[str] = []
    one_sided: list[str] = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key, _UNSET), new.get(key, _UNSET)
        if before == after or any(key.startswith(prefix + ".") for prefix in one_sided):
            continue
        if before is _UNSET or after is _UNSET:
            one_sided.append(key)
        changes.append(f"{key} {_show(before)} -> {_show(after)}")
    if len(changes) > _MAX_CHANGES:
        changes = [*changes[:_MAX_CHANGES], f"and {len(changes) - _MAX_CHANGES} more"]
    return ", ".join(changes)


def write_manifest(
    run_dir: str | os.PathLike[str], manifest: RunManifest, specs: Sequence[EpisodeSpec]
) -> Path:
    """Write ``specs.jsonl`` and then ``manifest.json`` (which names its hash), each atomically."""
    run_dir = Path(run_dir)
    text = "".join(json.dumps(spec.to_dict(), sort_keys=True) + "\n" for spec in specs)
    write_text_atomic(run_dir / SPECS_FILENAME, text)
    created = manifest.created or datetime.now(UTC).isoformat(timespec="seconds")
    manifest = RunManifest(
        **{
            **vars(manifest),
            "created": created,
            "spec_count": len(specs),
            "specs_sha256": _sha256(text),
        }
    )
    return write_json_atomic(run_dir / MANIFEST_FILENAME, manifest.to_dict())


def read_manifest(run_dir: str | os.PathLike[str]) -> RunManifest | None:
    """The manifest of ``run_dir``; None when it has none; :class:`ManifestError` if unreadable."""
    path = Path(run_dir) / MANIFEST_FILENAME
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path} cannot be read ({exc}); use a new output_dir") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path} is not a run manifest (not a JSON object)")
    try:
        return RunManifest.from_dict(data)
    except ManifestError as exc:
        raise ManifestError(f"{path}: {exc}") from None


def read_expected_specs(run_dir: str | os.PathLike[str]) -> list[EpisodeSpec] | None:
    """The specs ``run_dir``'s manifest expects, from ``specs.jsonl``; None without a manifest.

    Raises :class:`ManifestError` when the manifest or ``specs.jsonl`` is unreadable, or when
    ``specs.jsonl`` is not the file the manifest was written with.
    """
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    if manifest is None:
        return None
    path = run_dir / SPECS_FILENAME
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path} cannot be read: {exc}") from None
    if manifest.specs_sha256 and _sha256(text) != manifest.specs_sha256:
        raise ManifestError(f"{path} does not match the sha256 that {MANIFEST_FILENAME} names")
    specs = []
    for line_number, line in enumerate(text.splitlines(), start=1):
        try:
            specs.append(EpisodeSpec.from_dict(json.loads(line)))
        except (json.JSONDecodeError, TypeError) as exc:
            raise ManifestError(
                f"{path} line {line_number} is not an episode spec: {exc}"
            ) from None
    return specs


def _holds_records(run_dir: Path) -> bool:
    if (run_dir / RECORDS_FILENAME).exists():
        return True
    return run_dir.is_dir() and any(run_dir.glob(f"*/{RECORDS_FILENAME}"))


def _flatten(mapping: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _canonical_value(value: Any) -> Any:
    """``value`` as JSON would give it back (tuples become lists), so comparisons are stable."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _show(value: Any) -> str:
    if value is _UNSET:
        return "(unset)"
    if isinstance(value, list):
        text = "[" + ", ".join(str(item) for item in value) + "]"
    elif value is None:
        text = "null"
    else:
        text = str(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 3] + "..."
