"""simroll.io: every atomic write leaves the old file or the new one and no temporary beside it."""

from __future__ import annotations

import json
import math
import os
import stat

import numpy as np
import pytest

from simroll import io
from simroll.io import atomic_path, write_bytes_atomic, write_json_atomic, write_text_atomic
from simroll.rollout import store


def test_write_json_atomic_replaces_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "reports" / "eval_info.json"
    write_json_atomic(target, {"tsr": 0.5})
    write_json_atomic(target, {"tsr": 0.75, "low": math.nan})
    loaded = json.loads(target.read_text())
    assert loaded["tsr"] == 0.75 and math.isnan(loaded["low"])
    assert os.listdir(target.parent) == ["eval_info.json"]


def test_write_json_atomic_keeps_old_file_when_serialisation_fails(tmp_path):
    target = tmp_path / "eval_info.json"
    write_json_atomic(target, {"tsr": 0.5})
    with pytest.raises(TypeError):
        write_json_atomic(target, {"tsr": object()})
    assert json.loads(target.read_text()) == {"tsr": 0.5}
    assert os.listdir(tmp_path) == ["eval_info.json"]


def test_atomic_path_keeps_the_suffix_so_writers_choose_their_format_by_name(tmp_path):
    target = tmp_path / "figures" / "curve.png"
    with atomic_path(target) as temporary:
        assert temporary.parent == target.parent and temporary.name.endswith(".tmp.png")
        assert temporary.name.startswith(".curve.png.")
        temporary.write_bytes(b"png")
    assert target.read_bytes() == b"png"
    assert os.listdir(target.parent) == ["curve.png"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_atomic_path_leaves_the_old_file_when_the_writer_raises(tmp_path):
    target = write_text_atomic(tmp_path / "summary.md", "old\n")
    with pytest.raises(RuntimeError), atomic_path(target) as temporary:
        temporary.write_text("half")
        raise RuntimeError("writer died")
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["summary.md"]


def test_bytes_and_numpy_writers_go_through_the_same_replace(tmp_path):
    assert write_bytes_atomic(tmp_path / "w.bin", b"\x00\x01").read_bytes() == b"\x00\x01"
    with atomic_path(tmp_path / "a.npz") as temporary, open(temporary, "wb") as file:
        np.savez_compressed(file, x=np.arange(3))
    with np.load(tmp_path / "a.npz") as archive:
        assert archive["x"].tolist() == [0, 1, 2]
    assert sorted(os.listdir(tmp_path)) == ["a.npz", "w.bin"]


def test_the_store_re_exports_the_one_writer():
    assert store.write_json_atomic is io.write_json_atomic
    assert store.write_text_atomic is io.write_text_atomic


def test_append_durably_appends_whole_lines_under_the_lock(tmp_path):
    import fcntl

    from simroll.io import append_durably, locked_append

    path = tmp_path / "sub" / "log.jsonl"
    for index in range(3):
        with locked_append(path) as fd:
            # the lock is held: another descriptor cannot take it without blocking
            other = os.open(path, os.O_RDONLY)
            try:
                with pytest.raises(BlockingIOError):
                    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(other)
            assert append_durably(fd, f'{{"i": {index}}}\n'.encode(), path) == 9
    assert path.read_text().splitlines() == ['{"i": 0}', '{"i": 1}', '{"i": 2}']
