"""Synthetic run directories for the report tests: written by the same code that writes real runs
(RecordStore, write_report, write_mp4, Certificate.write), only with made-up episodes."""

from __future__ import annotations

from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from simroll.certify.care import run_fixed
from simroll.certify.certificate import PolicyCost, build_certificate
from simroll.certify.paired import ArraySource
from simroll.certify.settings import CareSettings
from simroll.report.runs import video_name
from simroll.rollout.records import EpisodeRecord, EpisodeSpec
from simroll.rollout.runner import make_specs
from simroll.rollout.store import RecordStore
from simroll.rollout.video import write_mp4
from simroll.scoring.summary import write_report

CONFIG = {
    "env": {
        "suite": "soft",
        "tasks": ["SoftLift"],
        "objects": ["sponge", "tofu"],
        "variations": ["default", "stiff_x2"],
    },
    "episodes": 3,
    "seed": 0,
    "backend": {"name": "local", "workers": 1},
}
SPECS = make_specs("soft", ["SoftLift"], ["sponge", "tofu"], ["default", "stiff_x2"], 3)


def make_record(
    spec: EpisodeSpec,
    success: bool = True,
    peak: float = 0.3,
    tolerance: float = 0.5,
    policy: str = "expert",
    error: str | None = None,
) -> EpisodeRecord:
    return EpisodeRecord(
        spec=spec,
        policy_id=policy,
        policy_config_hash="abc123",
        success=success,
        steps=40,
        sim_time=2.0,
        termination_reason="success" if success else ("error" if error else "time_limit"),
        peak_deformation=peak,
        tolerance=tolerance,
        policy_calls=40,
        policy_compute_s=0.02,
        episode_wall_s=1.5,
        error=error,
        extra={"attempt": 1},
    )


def default_records(policy: str = "expert", firm: bool = False) -> list[EpisodeRecord]:
    """12 episodes: mostly DSR successes, one over tolerance, one task failure, one raised.

    ``firm=True`` is a second policy on the same specs that goes over tolerance everywhere."""
    records = []
    for i, spec in enumerate(SPECS):
        if firm:
            records.append(make_record(spec, peak=0.9, policy=policy))
        elif i == 1:
            records.append(make_record(spec, peak=0.8, policy=policy))
        elif i == 4:
            records.append(make_record(spec, success=False, peak=0.2, policy=policy))
        elif i == 7:
            error = "Traceback (most recent call last):\nRuntimeError: simulated crash"
            records.append(make_record(spec, success=False, peak=0.1, policy=policy, error=error))
        else:
            records.append(make_record(spec, peak=0.2 + 0.01 * i, policy=policy))
    return records


def write_eval_run(
    run_dir: Path,
    records: list[EpisodeRecord] | None = None,
    videos: int = 1,
    summary: bool = True,
) -> Path:
    """An eval run directory as ``simroll eval`` leaves it (without the Hydra folder)."""
    records = default_records() if records is None else records
    store = RecordStore(run_dir)
    for record in records:
        store.append(record)
    if summary:
        write_report(run_dir, records, CONFIG, expected=len(SPECS))
    chosen = sorted(records, key=lambda r: (r.dsr_success, r.success, r.spec.key))[:videos]
    for index, record in enumerate(chosen):
        frames = [np.full((48, 64, 3), 40 * index + 5 * t, dtype=np.uint8) for t in range(20)]
        write_mp4(frames, run_dir / "videos" / video_name(record.spec))
    return run_dir


@pytest.fixture
def eval_run(tmp_path) -> Path:
    return write_eval_run(tmp_path / "run")


CERTIFY_SPECS = make_specs("soft", ["SoftSqueeze"], ["foam_cylinder"], ["default"], 30)
# The reference solves everything; "slow" never fails, "fast" fails on specs 0, 5 and 9.
FAST_FAILURES = (0, 5, 9)


def write_certify_run(run_dir: Path, certificate: bool = True) -> Path:
    """A certification run as ``simroll certify`` leaves it: stores per policy + certificate."""
    n = len(CERTIFY_SPECS)
    reference = np.ones(n, dtype=bool)
    fast = np.ones(n, dtype=bool)
    fast[list(FAST_FAILURES)] = False
    outcomes = {"ref": reference, "slow": np.ones(n, dtype=bool), "fast": fast}
    for name, success in outcomes.items():
        store = RecordStore(run_dir / name)
        for spec, ok in zip(CERTIFY_SPECS, success, strict=True):
            store.append(make_record(spec, success=bool(ok), policy=name))
    if certificate:
        settings = CareSettings(0.3, 0.1, "joint", method="bonferroni")
        candidates = {"slow": outcomes["slow"], "fast": outcomes["fast"]}
        certification = run_fixed(list(candidates), ArraySource(reference, candidates), settings, n)
        costs = {
            "ref": PolicyCost(n, 40 * n, 2e-3, 1.0),
            "slow": PolicyCost(n, 40 * n, 1e-3, 0.5),
            "fast": PolicyCost(n, 40 * n, 0.5e-3, 0.25),
        }
        built = build_certificate(
            certification,
            "ref",
            costs,
            "model_calls",
            CERTIFY_SPECS,
            {
                "suite": "soft",
                "base_seed": 0,
                "tasks": ["SoftSqueeze"],
                "objects": ["foam_cylinder"],
                "variations": ["default"],
            },
            provenance={"git_sha": "abc", "created": "2026-01-01T00:00:00+00:00"},
        )
        built.write(run_dir)
    return run_dir


@pytest.fixture
def certify_run(tmp_path) -> Path:
    return write_certify_run(tmp_path / "certify")


class PageParser(HTMLParser):
    """Tables by id (rows of cell texts and row attributes), videos, inline SVGs, links."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[dict]] = {}
        self.heads: dict[str, list[str]] = {}
        self.videos: list[dict[str, str]] = []
        self.svgs = 0
        self.urls: list[str] = []
        self.scripts_with_src: list[str] = []
        self.stylesheets: list[str] = []
        self.text: list[str] = []
        self._table: str | None = None
        self._section: str | None = None
        self._row: dict | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        if tag == "table":
            self._table = attributes.get("id", f"table-{len(self.tables)}")
            self.tables[self._table] = []
            self.heads[self._table] = []
        elif tag in ("thead", "tbody"):
            self._section = tag
        elif tag == "tr" and self._table is not None:
            self._row = {"attrs": attributes, "cells": []}
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "video":
            self.videos.append(attributes)
        elif tag == "svg":
            self.svgs += 1
        elif tag == "script" and attributes.get("src"):
            self.scripts_with_src.append(attributes["src"])
        elif tag == "link" and attributes.get("rel") == "stylesheet":
            self.stylesheets.append(attributes.get("href", ""))
        for name in ("src", "href"):
            if name in attributes and tag not in ("use",):
                self.urls.append(attributes[name])

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row["cells"].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            if self._section == "thead":
                self.heads[self._table] = self._row["cells"]
            else:
                self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        self.text.append(data)

    def column(self, table: str, name: str) -> list[str]:
        index = self.heads[table].index(name)
        return [row["cells"][index] for row in self.tables[table]]

    @property
    def all_text(self) -> str:
        return " ".join(" ".join(self.text).split())


@pytest.fixture
def parse() -> Callable[[Path], PageParser]:
    def parse_page(path: Path) -> PageParser:
        parser = PageParser()
        parser.feed(Path(path).read_text())
        return parser

    return parse_page
