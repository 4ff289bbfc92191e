"""The certification page: CARE's decision, its candidates, the policies' stores, every spec.

:func:`certify_context` turns a :class:`~simroll.report.runs.CertifyRun` into the data of
``templates/certify.html.j2``: the certificate (what to deploy and the guarantee), one row per
candidate with its bound and cost, the speedup-against-bound plot as inline SVG, each policy's
pooled rates and store health, and the outcome grid (each calibration spec against each policy,
with the losses, where a candidate fails what the reference solved, first).
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from simroll.report.render import (
    inline_figure,
    last_line,
    number,
    problem_views,
    provenance_view,
)
from simroll.report.runs import CertifyRun, Problem, breakdown
from simroll.rollout.records import EpisodeRecord, EpisodeSpec


def certify_context(run: CertifyRun) -> dict[str, Any]:
    problems = list(run.problems)
    certificate = run.certificate
    figure = None
    if certificate is not None:
        figure = _speedup_figure(certificate, problems)
    measure = (certificate or {}).get("settings", {}).get("success", "tsr")
    policies = []
    for policy in run.policies:
        pooled = breakdown(policy.records, lambda r: ()) if policy.records else []
        policies.append(
            {
                "name": policy.name,
                "role": policy.role,
                "records": len(policy.records),
                "claimed": policy.claimed_rollouts,
                "errored": sum(r.error is not None for r in policy.records),
                "pooled": pooled[0] if pooled else None,
                "store": _store_state(policy),
                "store_ok": policy.store is not None and policy.store.ok,
            }
        )
    return {
        "title": "certification"
        + (f": deploy {certificate['chosen']}" if certificate else " (no certificate)"),
        "run_dir": str(run.run_dir.resolve()),
        "problems": problem_views(problems),
        "certificate": certificate,
        "candidates": [_candidate_row(c) for c in (certificate or {}).get("candidates", [])],
        "figure": figure,
        "policies": policies,
        "measure": measure,
        "outcomes": _outcome_grid(run, measure),
        "provenance": provenance_view(run.provenance, run.config, []),
    }


def _store_state(policy) -> str:
    if policy.store is not None:
        return "ok" if policy.store.ok else "problems (see top)"
    return "not run" if not policy.claimed_rollouts else "missing"


def _candidate_row(candidate: dict[str, Any]) -> dict[str, Any]:
    cost = candidate.get("cost") or {}
    return {
        **candidate,
        "bound": candidate.get("upper_bound") if candidate.get("tested") else None,
        "model_calls_per_step": cost.get("model_calls_per_step"),
        "ms_per_step": None
        if cost.get("wall_s_per_step") is None
        else 1e3 * cost["wall_s_per_step"],
        "css": "ok"
        if candidate.get("certified")
        else ("fail" if candidate.get("tested") else "missing"),
    }


def _speedup_figure(certificate: dict[str, Any], problems: list[Problem]) -> Markup | None:
    # Imported here: only certification pages need the certify layer.
    from simroll.certify.certificate import Certificate, plot_speedup_vs_bound

    try:
        parsed = Certificate(**certificate)
    except TypeError as exc:
        problems.append(
            Problem(
                f"certificate.json has unexpected fields ({exc}); plot not drawn",
                severity="warning",
            )
        )
        return None
    return inline_figure(lambda path: plot_speedup_vs_bound(parsed, path), problems)


def _outcome_grid(run: CertifyRun, measure: str) -> dict[str, Any]:
    """Each calibration spec against each policy: success, failure, loss or not run."""
    names = [p.name for p in run.policies]
    by_policy = {p.name: {r.spec.key: r for r in p.records} for p in run.policies}
    reference = next((p.name for p in run.policies if p.role == "reference"), None)
    specs: list[dict[str, Any]] = []
    calibration = (run.certificate or {}).get("calibration") or {}
    if calibration.get("specs"):
        specs = [dict(s) for s in calibration["specs"] if isinstance(s, dict) and "key" in s]
    else:
        seen: dict[str, EpisodeSpec] = {}
        for policy in run.policies:
            for record in policy.records:
                seen.setdefault(record.spec.key, record.spec)
        specs = [{**s.to_dict(), "key": k} for k, s in sorted(seen.items())]
    rows = []
    for spec in specs:
        key = spec["key"]
        ref_record = by_policy.get(reference, {}).get(key) if reference else None
        ref_ok = _succeeded(ref_record, measure)
        cells, tags = [], set()
        for name in names:
            record = by_policy[name].get(key)
            ok = _succeeded(record, measure)
            if record is None:
                cells.append({"text": "–", "css": "missing", "title": "not run", "peak": None})
                continue
            loss = name != reference and ok is False and ref_ok is True
            if record.error is not None:
                cell = {"text": "!", "css": "error", "title": last_line(record.error)}
            elif ok:
                cell = {"text": "✓", "css": "ok", "title": "success"}
            else:
                cell = {"text": "✗", "css": "fail", "title": "failure"}
            if loss:
                cell = {
                    **cell,
                    "text": "✗ loss",
                    "css": "loss",
                    "title": "fails where the reference succeeds",
                }
                tags.add("loss")
            if not ok:
                tags.add("any-fail")
            cell["peak"] = number(record.peak_deformation)
            cells.append(cell)
        rows.append({"spec": spec, "cells": cells, "tags": " ".join(sorted(tags))})
    rows.sort(
        key=lambda row: (
            "loss" not in row["tags"],
            "any-fail" not in row["tags"],
            row["spec"].get("index", 0),
        )
    )
    return {"names": names, "reference": reference, "rows": rows}


def _succeeded(record: EpisodeRecord | None, measure: str) -> bool | None:
    if record is None or record.error is not None:
        return None
    return bool(record.dsr_success if measure == "dsr" else record.success)
