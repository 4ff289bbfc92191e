"""scripts/outcome_agreement.py: per-spec agreement of eval runs on their shared specs."""

from __future__ import annotations

import json

import pytest

from tests.helpers import load_script
from tests.report.conftest import SPECS, make_record, write_eval_run

script = load_script("outcome_agreement")


def _run(path, failures):
    records = [make_record(spec, success=i not in failures) for i, spec in enumerate(SPECS)]
    return write_eval_run(path, records, videos=0)


def test_agreement_counts_shared_outcomes_against_the_independent_level(tmp_path):
    a = _run(tmp_path / "a", failures={0, 1, 2})
    b = _run(tmp_path / "b", failures={0, 1, 3, 4, 5, 6})
    report = script.main([str(a), str(b), "--output", str(tmp_path / "out.json")])
    assert report["specs"] == len(SPECS) == 12
    (pair,) = report["pairs"]
    assert pair["agree"] == 12 - 5  # both fail 0 and 1; one of them fails 2, 3, 4, 5 or 6
    assert pair["independent"] == pytest.approx(12 * (0.75 * 0.5 + 0.25 * 0.5), abs=0.05)
    assert report["specs_by_runs_succeeding"] == {0: 2, 1: 5, 2: 5}
    assert json.loads((tmp_path / "out.json").read_text())["pairs"] == report["pairs"]
    # a task filter that keeps no spec is refused, not reported as empty agreement
    with pytest.raises(SystemExit, match="share no spec"):
        script.main([str(a), str(b), "--task", "SoftPlace"])


def test_one_run_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        script.main([str(_run(tmp_path / "a", failures=set()))])
