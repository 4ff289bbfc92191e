"""RecordStore: durable appends, duplicate refusal, problems reported on load, resume."""

from __future__ import annotations

import json
import time

import pytest

from simroll.rollout.records import EpisodeRecord, EpisodeSpec
from simroll.rollout.store import (
    MAX_ATTEMPTS,
    DuplicateRecordError,
    RecordStore,
    attempt_of,
)


def make_spec(index: int, task: str = "SoftLift") -> EpisodeSpec:
    return EpisodeSpec(task=task, object="sponge", seed=1000 + index, index=index)


def make_record(index: int, error: str | None = None, attempt: int | None = None) -> EpisodeRecord:
    return EpisodeRecord(
        spec=make_spec(index),
        policy_id="expert",
        policy_config_hash="abc",
        success=error is None,
        steps=10,
        sim_time=0.2,
        termination_reason="error" if error else "success",
        peak_deformation=0.01 * index,
        tolerance=0.05,
        error=error,
        extra={} if attempt is None else {"attempt": attempt},
    )


def test_append_then_load_returns_the_records(tmp_path):
    store = RecordStore(tmp_path / "run")
    records = [make_record(index) for index in range(3)]
    for record in records:
        store.append(record)
    contents = store.load()
    assert contents.ok
    assert contents.line_count == 3
    assert list(contents.records.values()) == records
    assert contents.line_numbers == {record.spec.key: i + 1 for i, record in enumerate(records)}
    lines = store.path.read_text().splitlines()
    assert lines == [record.to_json() for record in records]
    assert "3 valid records from 3 lines" in contents.summary()


def test_load_of_missing_store_is_empty(tmp_path):
    contents = RecordStore(tmp_path / "nothing").load()
    assert contents.records == {} and contents.ok and contents.line_count == 0


def test_duplicate_append_is_refused_and_leaves_file_unchanged(tmp_path):
    store = RecordStore(tmp_path)
    store.append(make_record(0))
    before = store.path.read_bytes()
    with pytest.raises(DuplicateRecordError, match="already holds"):
        store.append(make_record(0))
    assert store.path.read_bytes() == before


def test_duplicate_append_is_refused_across_store_instances(tmp_path):
    RecordStore(tmp_path).append(make_record(0))
    other = RecordStore(tmp_path)
    with pytest.raises(DuplicateRecordError):
        other.append(make_record(0))
    # Another writer appending after this instance's first look is seen too.
    first, second = RecordStore(tmp_path), RecordStore(tmp_path)
    first.append(make_record(1))
    second.append(make_record(2))
    with pytest.raises(DuplicateRecordError):
        first.append(make_record(2))


def test_corrupted_middle_line_is_reported_and_not_counted(tmp_path):
    store = RecordStore(tmp_path)
    for index in range(3):
        store.append(make_record(index))
    lines = store.path.read_text().splitlines()
    tampered = json.loads(lines[1])
    tampered["success"] = False
    lines[1] = json.dumps(tampered, sort_keys=True, separators=(",", ":"))
    lines.insert(2, "{not json")
    store.path.write_text("\n".join(lines) + "\n")

    contents = store.load()
    assert not contents.ok
    assert set(contents.records) == {make_spec(0).key, make_spec(2).key}
    assert [(c.line_number, "receipt mismatch" in c.reason) for c in contents.corrupted] == [
        (2, True),
        (3, False),
    ]
    assert "not valid JSON" in contents.corrupted[1].reason
    assert contents.truncated is None
    assert "2 corrupted lines not counted: line 2" in contents.summary()


def test_duplicate_line_keeps_first_and_is_reported(tmp_path):
    store = RecordStore(tmp_path)
    store.append(make_record(0))
    store.append(make_record(1))
    first_line = store.path.read_text().splitlines()[0]
    with store.path.open("a") as file:
        file.write(first_line + "\n")
    contents = store.load()
    assert len(contents.records) == 2
    assert contents.line_numbers[make_spec(0).key] == 1
    assert [(d.line_number, d.first_line_number) for d in contents.duplicates] == [(3, 1)]
    assert "line 3 repeats line 1" in contents.summary()


def test_truncated_trailing_line_is_reported_and_not_counted(tmp_path):
    store = RecordStore(tmp_path)
    store.append(make_record(0))
    partial = make_record(1).to_json()[:50]
    with store.path.open("a") as file:
        file.write(partial)  # a crash mid-write leaves no newline
    contents = store.load()
    assert list(contents.records) == [make_spec(0).key]
    assert contents.truncated is not None
    assert contents.truncated.line_number == 2
    assert contents.truncated.byte_count == 50
    assert "truncated trailing line 2 (50 bytes) not counted" in contents.summary()
    assert make_spec(1) in store.pending([make_spec(0), make_spec(1)])


def test_append_after_truncated_line_keeps_new_record_intact(tmp_path):
    store = RecordStore(tmp_path)
    store.append(make_record(0))
    with store.path.open("a") as file:
        file.write(make_record(1).to_json()[:50])
    store.append(make_record(1))  # the rerun of the episode whose write was cut short
    contents = store.load()
    assert set(contents.records) == {make_spec(0).key, make_spec(1).key}
    assert contents.records[make_spec(1).key] == make_record(1)
    assert contents.truncated is None
    assert [c.line_number for c in contents.corrupted] == [2]


def test_blank_and_non_utf8_lines_are_reported(tmp_path):
    store = RecordStore(tmp_path)
    store.append(make_record(0))
    with store.path.open("ab") as file:
        file.write(b"\n\xff\xfe\n")
    contents = store.load()
    assert [c.line_number for c in contents.corrupted] == [2, 3]
    assert contents.corrupted[0].reason == "blank line"
    assert contents.corrupted[1].reason.startswith("not UTF-8")


def test_pending_returns_unfinished_specs_in_order(tmp_path):
    store = RecordStore(tmp_path)
    specs = [make_spec(index) for index in range(5)]
    assert store.pending(specs) == specs
    store.append(make_record(3))
    store.append(make_record(0))
    assert store.pending(specs) == [specs[1], specs[2], specs[4]]


def test_errored_spec_is_retried_once_then_counts_as_finished(tmp_path):
    store = RecordStore(tmp_path)
    spec = make_spec(0)
    store.append(make_record(0, error="RuntimeError: boom"))
    assert store.pending([spec]) == [spec]
    assert store.pending([spec], retry_errors=False) == []
    assert store.next_attempt(spec) == 2

    # A retry without the next attempt number is a duplicate.
    with pytest.raises(DuplicateRecordError, match=r"extra\['attempt'\] = 2"):
        store.append(make_record(0, error="RuntimeError: boom again"))
    store.append(make_record(0, error="RuntimeError: boom again", attempt=2))
    assert MAX_ATTEMPTS == 2
    assert store.pending([spec]) == []
    contents = store.load()
    kept = contents.records[spec.key]
    assert attempt_of(kept) == 2 and kept.error == "RuntimeError: boom again"
    assert [(r.line_number, r.attempt) for r in contents.retried] == [(1, 1)]
    assert contents.ok and contents.errored == {spec.key: kept}


def test_successful_retry_replaces_errored_record_and_blocks_more(tmp_path):
    store = RecordStore(tmp_path)
    store.append(make_record(0, error="boom"))
    retry = make_record(0, attempt=2)
    store.append(retry)
    assert store.load().records[make_spec(0).key] == retry
    with pytest.raises(DuplicateRecordError):
        store.append(make_record(0, attempt=3))


def test_attempt_of_defaults_to_one_for_missing_or_invalid_values():
    assert attempt_of(make_record(0)) == 1
    assert attempt_of(make_record(0, attempt=3)) == 3
    bad = [EpisodeRecord(**{**make_record(0).__dict__, "extra": {"attempt": v}}) for v in ("2", 0)]
    assert [attempt_of(record) for record in bad] == [1, 1]


def test_resume_bookkeeping_on_a_2000_record_store_takes_well_under_a_second(tmp_path):
    store = RecordStore(tmp_path)
    stored = [make_record(i, error="boom" if i % 100 == 0 else None) for i in range(2000)]
    store.path.write_text("".join(record.to_json() + "\n" for record in stored))
    specs = [make_spec(index) for index in range(2500)]  # 500 never run, 20 errored once
    start = time.perf_counter()
    contents = store.load()
    todo = store.pending(specs, contents=contents)
    attempts = store.next_attempts(todo, contents)
    elapsed = time.perf_counter() - start
    assert len(todo) == 520
    assert attempts[make_spec(0).key] == 2 and attempts[make_spec(2100).key] == 1
    assert elapsed < 1.0, f"{elapsed:.2f} s"


def test_next_attempts_agrees_with_next_attempt(tmp_path):
    store = RecordStore(tmp_path)
    store.append(make_record(0, error="boom"))
    store.append(make_record(1))
    specs = [make_spec(index) for index in range(3)]
    assert store.next_attempts(specs) == {spec.key: store.next_attempt(spec) for spec in specs}
    assert [store.next_attempt(spec) for spec in specs] == [2, 2, 1]
