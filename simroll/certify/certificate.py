"""The Certificate: what CARE decided, why, at what cost, and how to reproduce it.

:func:`build_certificate` joins a :class:`~simroll.certify.care.Certification` (decisions and
rollouts used) with each policy's *measured* compute (:class:`PolicyCost`, from its episode
records) and picks the deployed policy: the cheapest of the reference and the certified
candidates under the chosen cost measure (``model_calls``: wrapped-model calls per control step,
deterministic; ``wall``: ``select_action`` seconds per control step, as timed by the episode
engine). :meth:`Certificate.write` puts ``certificate.json``, ``certificate.md`` and
``certificate.png`` (speedup against certified risk bound, one point per candidate) in a
directory, atomically for the JSON.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from simroll.certify.care import Certification
from simroll.certify.settings import CertifyError
from simroll.io import atomic_path, write_json_atomic, write_text_atomic
from simroll.rollout.records import EpisodeRecord, EpisodeSpec

COST_MEASURES = ("model_calls", "wall")


@dataclass(frozen=True)
class PolicyCost:
    """A policy's measured compute per control step over the episodes it ran."""

    episodes: int
    steps: int
    wall_s_per_step: float  # select_action seconds per control step
    model_calls_per_step: float  # calls of the underlying model per control step

    def per_step(self, measure: str) -> float:
        if measure == "model_calls":
            return self.model_calls_per_step
        if measure == "wall":
            return self.wall_s_per_step
        raise CertifyError(f"cost must be one of {list(COST_MEASURES)}, got {measure!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure_cost(records: Sequence[EpisodeRecord]) -> PolicyCost:
    """Compute per control step from ``records``.

    Model calls per episode are the network evaluations the episode engine recorded
    (``record.extra["network_evaluations"]``: for LeRobot policies chunks x denoising steps, for
    :class:`~simroll.certify.accel.ReplanEvery` the wrapped model's calls) when the policy
    counts them, else one per ``select_action``.
    """
    records = [r for r in records if r.error is None]
    steps = sum(r.steps for r in records)
    if not records or steps == 0:
        nan = math.nan
        return PolicyCost(len(records), steps, nan, nan)
    calls = sum(record.network_evaluations for record in records)
    wall = sum(r.policy_compute_s for r in records)
    return PolicyCost(len(records), steps, wall / steps, calls / steps)


@dataclass
class Certificate:
    """CARE's verdict with everything needed to audit and reproduce it (see the module)."""

    chosen: str
    chosen_is_reference: bool
    guarantee: str
    settings: dict[str, Any]
    design: str
    cost_measure: str
    reference: dict[str, Any]
    candidates: list[dict[str, Any]]
    rollouts: dict[str, Any]
    calibration: dict[str, Any]
    provenance: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, directory: str | Path) -> dict[str, Path]:
        directory = Path(directory)
        paths = {
            "json": write_json_atomic(directory / "certificate.json", self.to_dict()),
            "markdown": directory / "certificate.md",
            "plot": directory / "certificate.png",
        }
        write_text_atomic(paths["markdown"], self.to_markdown())
        plot_speedup_vs_bound(self, paths["plot"])
        return paths

    def to_markdown(self) -> str:
        s = self.settings
        level = "delta" if s["method"] == "fixed_sequence" else "delta / m"
        lines = [
            f"# CARE certificate: deploy `{self.chosen}`"
            + (" (the reference: no candidate certified)" if self.chosen_is_reference else ""),
            "",
            f"Guarantee: {self.guarantee}.",
            "",
            f"Risk `{s['risk']}`, epsilon = {s['epsilon']:g}, delta = {s['delta']:g}, "
            f"success = {s['success'].upper()}, family-wise `{s['method']}` (each test at "
            f"{level}), design `{self.design}`, cost = {self.cost_measure} per control step.",
            "",
            "| # | candidate | decision | failures / trials | bound | speedup | wall speedup "
            "| rollouts |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for c in self.candidates:
            marker = " **(deployed)**" if c["name"] == self.chosen else ""
            bound = "n/a" if not c["tested"] else f"{c['upper_bound']:.3f}"
            lines.append(
                f"| {c['position']} | `{c['name']}`{marker} | {c['status']} "
                f"| {c['losses']} / {c['trials']} | {bound} | {_times(c['speedup'])} "
                f"| {_times(c['speedup_wall'])} | {c['episodes']} |"
            )
        r = self.rollouts
        lines += [
            "",
            f"Reference `{self.reference['name']}`: {self.reference['episodes_used']} rollouts; "
            f"{_fmt(self.reference['cost']['model_calls_per_step'], 3)} model calls and "
            f"{_fmt(1000 * self.reference['cost']['wall_s_per_step'], 3)} ms per control step.",
            "",
            f"Rollouts used: {r['used']} of the exhaustive design's {r['exhaustive']} "
            f"({_fmt(100 * r['fraction'], 1)}%; every candidate and the reference on all "
            f"{self.calibration['n_specs']} calibration specs).",
            "",
            f"Calibration specs: suite `{self.calibration['suite']}`, base seed "
            f"{self.calibration['base_seed']}, tasks {self.calibration['tasks']}, objects "
            f"{self.calibration['objects']}, variations {self.calibration['variations']}; the "
            "seeds of the specs used are in `certificate.json`.",
        ]
        if self.notes:
            lines += ["", *[f"Note: {note}" for note in self.notes]]
        prov = self.provenance
        if prov:
            lines += [
                "",
                f"Provenance: git {prov.get('git_sha')} (dirty: {prov.get('git_dirty')}), "
                f"created {prov.get('created')}.",
            ]
            codes = prov.get("code_versions") or []
            if len(codes) > 1:  # resumed with other code
                shown = " -> ".join(f"{code.get('git_sha')}" for code in codes)
                lines[-1] += f" Its rollouts were made by {len(codes)} code versions: {shown}."
        return "\n".join(lines) + "\n"


def _times(value: float | None) -> str:
    text = _fmt(value)
    return text if text == "n/a" else f"{text}x"


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.{digits}f}"


def build_certificate(
    certification: Certification,
    reference_name: str,
    costs: Mapping[str, PolicyCost],
    cost_measure: str,
    specs: Sequence[EpisodeSpec],
    calibration: Mapping[str, Any],
    rollouts: Mapping[str, int] | None = None,
    config_hashes: Mapping[str, str] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> Certificate:
    """Pick the deployed policy and assemble the certificate.

    ``costs`` maps policy names (the reference's included) to their measured costs; a candidate
    that never ran has none and cannot be deployed. ``rollouts`` (default: the certification's)
    counts the rollouts actually run per policy, e.g. with extra reference episodes for cost.
    """
    if cost_measure not in COST_MEASURES:
        raise CertifyError(f"cost must be one of {list(COST_MEASURES)}, got {cost_measure!r}")
    if reference_name not in costs:
        raise CertifyError(f"no measured cost for the reference {reference_name!r}")
    config_hashes = dict(config_hashes or {})
    rollouts = dict(rollouts if rollouts is not None else certification.rollouts)
    reference_cost = costs[reference_name]
    reference_per_step = reference_cost.per_step(cost_measure)
    if not (math.isfinite(reference_per_step) and reference_per_step > 0):
        raise CertifyError(
            f"the reference's measured {cost_measure} cost per step is {reference_per_step}; "
            "it needs at least one finished episode with nonzero compute"
        )
    per_step = []
    for decision in certification.decisions:
        cost = costs.get(decision.name)
        value = cost.per_step(cost_measure) if cost is not None else math.inf
        per_step.append(value if math.isfinite(value) else math.inf)
    chosen_index = certification.choose(per_step, reference_per_step)
    chosen = reference_name if chosen_index < 0 else certification.decisions[chosen_index].name
    candidates = []
    for decision in certification.decisions:
        cost = costs.get(decision.name)
        entry = decision.to_dict()
        entry["config_hash"] = config_hashes.get(decision.name)
        entry["cost"] = cost.to_dict() if cost is not None else None
        entry["speedup"] = _speedup(reference_cost, cost, cost_measure)
        entry["speedup_wall"] = _speedup(reference_cost, cost, "wall")
        entry["speedup_model_calls"] = _speedup(reference_cost, cost, "model_calls")
        entry["deployed"] = decision.name == chosen
        candidates.append(entry)
    used = sum(rollouts.values())
    exhaustive = certification.exhaustive_rollouts
    notes = []
    if chosen_index < 0 and any(d.certified for d in certification.decisions):
        notes.append("certified candidates were not cheaper than the reference; kept it")
    return Certificate(
        chosen=chosen,
        chosen_is_reference=chosen_index < 0,
        guarantee=certification.settings.describe(),
        settings=certification.settings.to_dict(),
        design=certification.design,
        cost_measure=cost_measure,
        reference={
            "name": reference_name,
            "config_hash": config_hashes.get(reference_name),
            "cost": reference_cost.to_dict(),
            "episodes_used": rollouts.get("reference", 0),
        },
        candidates=candidates,
        rollouts={
            "used": used,
            "per_policy": rollouts,
            "exhaustive": exhaustive,
            "fraction": used / exhaustive,
        },
        calibration={
            **dict(calibration),
            "n_specs": certification.n_specs,
            "specs": [
                {
                    "index": s.index,
                    "task": s.task,
                    "object": s.object,
                    "variation": s.variation,
                    "seed": s.seed,
                    "key": s.key,
                }
                for s in specs
            ],
        },
        provenance=dict(provenance or {}),
        notes=notes,
    )


def _speedup(reference: PolicyCost, cost: PolicyCost | None, measure: str) -> float | None:
    if cost is None:
        return None
    mine = cost.per_step(measure)
    theirs = reference.per_step(measure)
    if not (math.isfinite(mine) and math.isfinite(theirs)) or mine <= 0:
        return None
    return theirs / mine


def plot_speedup_vs_bound(certificate: Certificate, path: str | Path) -> Path:
    """Speedup (y) against the certified risk bound (x) per tested candidate; epsilon marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epsilon = certificate.settings["epsilon"]
    fig, ax = plt.subplots(figsize=(6.0, 4.2), dpi=120)
    ax.axvline(epsilon, color="0.4", linestyle="--", linewidth=1, label=f"budget ε = {epsilon:g}")
    ax.scatter([0.0], [1.0], marker="*", s=160, color="tab:blue", label="reference", zorder=3)
    for c in certificate.candidates:
        if not c["tested"] or c["speedup"] is None:
            continue
        color = "tab:green" if c["certified"] else "tab:red"
        marker = "o" if c["certified"] else "x"
        ax.scatter([c["upper_bound"]], [c["speedup"]], color=color, marker=marker, s=60, zorder=3)
        if c["deployed"]:
            ax.scatter(
                [c["upper_bound"]],
                [c["speedup"]],
                s=260,
                facecolors="none",
                edgecolors="black",
                zorder=2,
            )
        ax.annotate(
            c["name"],
            (c["upper_bound"], c["speedup"]),
            textcoords="offset points",
            xytext=(-6, 4) if c["upper_bound"] > 0.7 else (6, 4),
            ha="right" if c["upper_bound"] > 0.7 else "left",
            fontsize=8,
        )
    ax.scatter([], [], color="tab:green", marker="o", label="certified")
    ax.scatter([], [], color="tab:red", marker="x", label="not certified")
    ax.set_xlim(-0.02, 1.02)
    level = certificate.candidates[0]["level"] if certificate.candidates else math.nan
    ax.set_xlabel(
        f"upper confidence bound on {certificate.settings['risk']} risk "
        f"(each at confidence {1 - level:.4g})"
    )
    ax.set_ylabel(f"speedup ({certificate.cost_measure} per step)")
    ax.set_title(f"CARE: deploy {certificate.chosen}", fontsize=10)
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_path(path) as temporary:
        fig.savefig(temporary)
    plt.close(fig)
    return Path(path)
