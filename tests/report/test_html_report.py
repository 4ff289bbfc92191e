"""report.html for eval, certification and compared runs: content, bad input, the command."""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from statsmodels.stats.contingency_tables import mcnemar

from simroll.cli.main import main as simroll_main
from simroll.report import ReportError, write_comparison_report, write_html_report
from simroll.report.html import write_html_report_or_warn
from simroll.report.runs import load_eval_run, video_name
from simroll.rollout.store import RecordStore
from simroll.scoring.dsr import aggregate

from .conftest import (
    CERTIFY_SPECS,
    CONFIG,
    FAST_FAILURES,
    SPECS,
    default_records,
    make_record,
    write_certify_run,
    write_eval_run,
)


def files_under(directory: Path) -> set[str]:
    return {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()}


def test_eval_page_shows_scores_breakdowns_episodes_and_playable_videos(eval_run, parse):
    page = parse(write_html_report(eval_run))
    records = default_records()
    assert len(page.tables["scores-table"]) == len(aggregate(records))
    assert page.tables["scores-table"][-1]["cells"][:3] == ["SoftLift", "all", "all"]
    # per-object (2 objects) and per-variation (2 variations) breakdowns
    assert page.column("by-object-table", "object") == ["sponge", "tofu"]
    assert page.column("by-variation-table", "variation") == ["default", "stiff_x2"]
    episodes = page.tables["episodes-table"]
    assert len(episodes) == len(SPECS)
    outcomes = page.column("episodes-table", "outcome")
    assert outcomes[:3] == ["raised", "task failure", "over tolerance"]  # failures first
    assert page.column("episodes-table", "seed")[0] == str(SPECS[7].seed)
    assert "RuntimeError: simulated crash" in page.column("episodes-table", "error")[0]
    assert page.svgs >= 2  # tolerance sweep and peak deformation plots, inline
    [video] = page.videos
    assert video["src"] == f"videos/{video_name(SPECS[4])}"  # the task failure
    assert (eval_run / video["src"]).exists()
    assert "preload" in video and "controls" in video
    assert "Incomplete" not in page.all_text  # a clean run has no problem box
    assert "expert (config abc123)" in page.all_text and "sponge, tofu" in page.all_text


def test_page_is_self_contained(eval_run, parse):
    page = parse(write_html_report(eval_run))
    assert page.scripts_with_src == [] and page.stylesheets == []
    for url in page.urls:
        assert not url.startswith(("http:", "https:", "//")), url
        assert url.startswith("#") or (eval_run / url).exists(), url


def test_corrupt_duplicate_truncated_and_missing_records_are_named_on_the_page(eval_run, parse):
    path = eval_run / "records.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    dropped = json.loads(lines[2])["spec"]
    lines[5] = lines[5].replace('"success":true', '"success":false')  # receipt now wrong
    corrupted = json.loads(lines[5])["spec"]
    del lines[2]  # an expected episode with no record at all
    lines.append(lines[0])  # a duplicate
    lines.append('{"spec": {"task": "SoftLi')  # a write cut short
    path.write_text("".join(lines))
    page = parse(write_html_report(eval_run))
    text = page.all_text
    assert "Incomplete" in text
    assert "1 corrupted line(s) not counted" in text and "line 5: receipt mismatch" in text
    assert "1 duplicate line(s) not counted" in text and "line 12 repeats" in text
    assert "truncated last line 13" in text
    assert "2 of 12 expected episodes have no valid record" in text
    episodes = page.tables["episodes-table"]
    assert len(episodes) == len(SPECS)  # 10 valid records + 2 'no record' rows, none silently gone
    tags = [(row["attrs"]["data-key"], row["attrs"]["data-tags"]) for row in episodes]
    missing = [key for key, row_tags in tags if "missing" in row_tags]
    assert len(missing) == 2
    assert {key.split("/")[2] + str(key.split("/")[4]) for key in missing} == {
        dropped["object"] + str(dropped["index"]),
        corrupted["object"] + str(corrupted["index"]),
    }
    assert "the 2 expected episodes without a record are not counted" in text
    assert "from 13 lines in records.jsonl" in text


def test_run_without_records_file_says_so_instead_of_crashing(tmp_path, parse):
    run = write_eval_run(tmp_path / "run")
    (run / "records.jsonl").unlink()
    page = parse(write_html_report(run))
    text = page.all_text
    assert "records.jsonl not found: no episode of this run can be shown" in text
    assert "summary.json reports 12 episodes" in text
    assert "12 of 12 expected episodes have no valid record" in text
    assert "No rates" in text
    assert len(page.tables["episodes-table"]) == 12  # every expected episode, as 'no record'


def test_empty_directory_gives_a_page_that_says_what_is_missing(tmp_path, parse):
    page = parse(write_html_report(tmp_path))
    text = page.all_text
    assert "records.jsonl not found" in text
    assert "summary.json not found" in text and "provenance unknown" in text
    assert "which episodes were expected is unknown" in text


def test_unfinished_run_reads_its_config_from_hydra_and_lists_what_is_missing(tmp_path, parse):
    run = write_eval_run(tmp_path / "run", default_records()[:8], summary=False)
    (run / ".hydra").mkdir()
    (run / ".hydra" / "config.yaml").write_text(json.dumps(CONFIG))  # JSON is YAML
    page = parse(write_html_report(run))
    text = page.all_text
    assert "summary.json not found" in text and ".hydra/config.yaml" in text
    assert "4 of 12 expected episodes have no valid record" in text
    assert len(page.tables["episodes-table"]) == 12
    assert "SoftLift" in page.column("scores-table", "task")  # the 8 records are still scored


def test_unreadable_or_stale_summary_is_reported(eval_run, parse):
    (eval_run / "summary.json").write_text("{not json")
    assert "summary.json cannot be read" in parse(write_html_report(eval_run)).all_text
    write_eval_run(eval_run.parent / "stale", default_records()[:5], summary=False)
    stale = eval_run.parent / "stale"
    (stale / "summary.json").write_text(json.dumps({"episodes": 12, "provenance": None}))
    text = parse(write_html_report(stale)).all_text
    assert "summary.json was written for 12 episodes but records.jsonl now holds 5" in text


def test_mixed_policies_are_not_blended_into_one_rate(tmp_path, parse):
    records = default_records()[:6] + default_records("other")[6:]
    run = write_eval_run(tmp_path / "run", records, summary=False)
    page = parse(write_html_report(run))
    assert "mixes 2 policies (expert, other)" in page.all_text
    assert "scores-table" not in page.tables
    assert len(page.tables["episodes-table"]) == 12


def test_macro_step_costs_get_their_own_table_and_columns(tmp_path, parse):
    """Clutter records carry execution time, primitives, withdrawals and travel in ``extra``: the
    page gives their means per task (all episodes, successes) and shows them per episode."""
    records = [
        dataclasses.replace(
            record,
            extra={**record.extra, "execution_time": 4.0 + i, "primitives": i, "withdrawals": 1},
        )
        for i, record in enumerate(default_records())
    ]
    page = parse(write_html_report(write_eval_run(tmp_path / "run", records)))
    costs = page.tables["costs-table"]
    assert [row["cells"][0] for row in costs] == sorted({r.spec.task for r in records})
    expected = statistics.fmean(4.0 + i for i in range(len(records)))
    assert float(page.column("costs-table", "execution time (s)")[0]) == pytest.approx(expected)
    assert page.column("costs-table", "withdrawals")[0] == "1.00"
    assert page.column("costs-table", "push travel (m)")[0] == "n/a"  # not recorded
    assert len(page.column("episodes-table", "primitives")) == len(records)
    plain = parse(write_html_report(write_eval_run(tmp_path / "soft", default_records())))
    assert "costs-table" not in plain.tables  # the soft tasks record no such costs


def test_certification_page_shows_decision_candidates_plot_and_losses(certify_run, parse):
    certificate = json.loads((certify_run / "certificate.json").read_text())
    page = parse(write_html_report(certify_run))
    text = page.all_text
    assert f"Deploy {certificate['chosen']}" in text and "Guarantee: with probability" in text
    assert page.column("candidates-table", "candidate") == [
        c["name"] + (" deployed" if c["deployed"] else "") for c in certificate["candidates"]
    ]
    assert page.svgs == 1  # speedup against certified bound
    assert page.column("policies-table", "policy") == ["ref", "slow", "fast"]
    assert page.column("policies-table", "valid records") == ["30", "30", "30"]
    outcomes = page.tables["outcomes-table"]
    assert len(outcomes) == len(CERTIFY_SPECS)
    losses = [row for row in outcomes if "loss" in row["attrs"]["data-tags"]]
    assert sorted(int(row["cells"][0]) for row in losses) == list(FAST_FAILURES)
    assert outcomes[0] in losses  # losses first


def test_a_certificate_of_the_wrong_shape_is_ignored_with_a_reason(certify_run, parse):
    (certify_run / "certificate.json").write_text(json.dumps({"chosen": "x", "settings": {}}))
    text = parse(write_html_report(certify_run)).all_text
    assert "certificate.json is not a certificate (lacks ['reference', 'candidates'])" in text
    assert "No decision" in text


def test_an_unforeseen_failure_still_writes_a_page_that_says_so(eval_run, monkeypatch, capsys):
    def broken(*args):
        raise KeyError("surprise")

    monkeypatch.setattr("simroll.report.html.eval_context", broken)
    path = write_html_report(eval_run)
    text = path.read_text()
    assert "the report could not be built" in text and "KeyError: &#39;surprise&#39;" in text
    assert "is only an error page" in capsys.readouterr().err


def test_certification_run_without_certificate_shows_the_stores(tmp_path, parse):
    run = write_certify_run(tmp_path / "certify", certificate=False)
    page = parse(write_html_report(run))
    text = page.all_text
    assert "certificate.json not found: the certification did not finish" in text
    assert "No decision" in text
    assert sorted(page.column("policies-table", "policy")) == ["fast", "ref", "slow"]
    assert len(page.tables["outcomes-table"]) == len(CERTIFY_SPECS)


def test_corrupt_certificate_and_store_are_reported(certify_run, parse):
    (certify_run / "certificate.json").write_text('{"chosen": ')
    with open(certify_run / "fast" / "records.jsonl", "a") as file:
        file.write("garbage\n")
    text = parse(write_html_report(certify_run)).all_text
    assert "certificate.json cannot be read" in text
    assert "fast/records.jsonl: 1 corrupted line(s) not counted" in text and "line 31" in text


def test_comparison_pairs_shared_episodes_with_mcnemar_p_values(tmp_path, parse):
    gentle = write_eval_run(tmp_path / "gentle")
    firm_records = default_records("firm", firm=True)[:-1]  # one episode only in A
    firm = write_eval_run(tmp_path / "firm", firm_records)
    output = write_comparison_report(gentle, firm)
    assert output == gentle / "compare_firm.html"
    page = parse(output)
    text = page.all_text
    assert "11 shared episodes" in text and "1 only in A" in text
    assert "1 episode(s) of run A have no partner" in text
    pooled = page.tables["differences-table"][-1]["cells"]
    head = page.heads["differences-table"]
    assert pooled[:4] == ["SoftLift", "all", "all", "11"]
    # DSR: A (gentle) succeeds on 8 of the 11 shared, B (firm) on none -> 8 discordant pairs
    assert pooled[head.index("DSR only A / only B")] == "8 / 0"
    expected_p = mcnemar([[0, 8], [0, 3]], exact=True).pvalue
    assert pooled[head.index("DSR p")] == format(expected_p, ".3g")
    assert pooled[head.index("Δ DSR")] == f"{-8 / 11:+.2f}"
    pairs = page.tables["pairs-table"]
    assert len(pairs) == 11
    assert "dsr-differs" in pairs[0]["attrs"]["data-tags"]  # differing pairs first
    assert page.svgs == 1 and len(page.videos) == 2  # each run's one video, side by side
    for video in page.videos:
        assert (gentle / video["src"]).resolve().exists()


def test_comparing_runs_that_share_nothing_says_so(tmp_path, parse):
    a = write_eval_run(tmp_path / "a", default_records()[:6], summary=False)
    b = write_eval_run(tmp_path / "b", default_records()[6:], summary=False)
    page = parse(write_comparison_report(a, b, tmp_path / "out.html"))
    assert "the runs share no episode" in page.all_text
    assert "No shared episodes" in page.all_text


def test_report_command_writes_only_report_html(eval_run, capsys):
    before = files_under(eval_run)
    assert simroll_main(["report", str(eval_run)]) == 0
    assert files_under(eval_run) - before == {"report.html"}
    assert str(eval_run / "report.html") in capsys.readouterr().out
    assert not (eval_run / ".hydra").exists()


def test_report_command_compares_two_runs_and_rejects_a_missing_directory(tmp_path, capsys):
    a = write_eval_run(tmp_path / "a", videos=0)
    b = write_eval_run(tmp_path / "b", default_records("firm", firm=True), videos=0)
    assert simroll_main(["report", str(a), str(b), "-o", str(tmp_path / "ab.html")]) == 0
    assert (tmp_path / "ab.html").exists()
    with pytest.raises(SystemExit) as exit_info:
        simroll_main(["report", str(tmp_path / "nope")])
    assert exit_info.value.code == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(ReportError, match="certification run"):
        write_comparison_report(a, write_certify_run(tmp_path / "c"))


def test_a_failing_report_is_a_warning_for_eval_and_certify(tmp_path, monkeypatch, capsys):
    def broken(run_dir):
        raise RuntimeError("template bug")

    monkeypatch.setattr("simroll.report.html.write_html_report", broken)
    assert write_html_report_or_warn(tmp_path) is None
    assert "warning: could not write report.html: RuntimeError('template bug')" in (
        capsys.readouterr().err
    )


def test_errored_and_orphan_videos_and_retries_are_reported(tmp_path, parse):
    run = write_eval_run(tmp_path / "run", videos=0)
    (run / "videos").mkdir()
    (run / "videos" / "soft_SoftLift_sponge_default_99_1.mp4").write_bytes(b"")
    (run / "videos" / "x.tmp.mp4").write_bytes(b"")
    retry = make_record(SPECS[7])
    RecordStore(run).append(dataclasses.replace(retry, extra={"attempt": 2}))  # crash retried
    page = parse(write_html_report(run))
    text = page.all_text
    assert "1 video(s) in videos/ match no valid record" in text
    assert "1 unfinished video(s)" in text
    assert "raised" not in page.column("episodes-table", "outcome")  # the retry replaced it
    assert load_eval_run(run).store.retried


@pytest.mark.timeout(120)
def test_simroll_eval_ends_with_report_html(tmp_path, parse):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "simroll.cli.main",
            "eval",
            f"output_dir={tmp_path}",
            "env=soft_squeeze",
            "env.objects=[foam_cylinder]",
            "episodes=1",
            "video.episodes=1",
            "video.size=[96,128]",
            "progress=false",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MUJOCO_GL": "egl"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"html report: {tmp_path / 'report.html'}" in result.stdout
    page = parse(tmp_path / "report.html")
    assert len(page.tables["episodes-table"]) == 1 and len(page.videos) == 1


def test_a_checkpoint_run_does_not_show_the_policy_groups_training_recipe_as_its_own():
    from simroll.report.render import provenance_view

    config = {
        "episodes": 2,
        "policy": {"path": "policies/vla_soft", "overrides": {}, "train": {"steps": 15000}},
    }
    view = provenance_view(None, config, [])
    assert "train" not in view["config_yaml"] and "policies/vla_soft" in view["config_yaml"]
    assert dict(view["rows"])["policy checkpoint"].startswith("policies/vla_soft (")
    # a policy without a checkpoint (an expert) keeps its whole config, and nothing is mutated
    expert = {"policy": {"closure": "gentle", "train": {"note": "kept"}}}
    assert "kept" in provenance_view(None, expert, [])["config_yaml"]
    assert config["policy"]["train"] == {"steps": 15000}
