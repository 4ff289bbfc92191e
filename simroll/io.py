"""Atomic file writes: the one way simroll puts a finished file where a reader may look for it.

A reader (a resume, ``simroll report``, a benchmark comparison, a person) must see the old file
or the new one, never half of one, even after a crash. Every writer therefore writes into a
temporary file in the target's directory, fsyncs it and moves it over the target with
``os.replace``, then fsyncs the directory so that the rename survives a crash too.
:func:`write_text_atomic`, :func:`write_json_atomic` and :func:`write_bytes_atomic` do this for
content in memory; :func:`atomic_path` does it for writers that want a path of their own
(matplotlib's ``savefig``, safetensors, numpy, a video encoder): its temporary path ends with the
target's suffix, so a writer that picks its format by the file name still picks the right one.
Files are made readable by everyone (0644): they are results, meant to be read.

Append-only logs (``records.jsonl``, a dataset's ``simroll_episodes.jsonl``) are not replaced but
appended to: :func:`locked_append` opens one for appending under an exclusive ``flock`` (so two
processes never interleave lines) and :func:`append_durably` writes a line with a single
``O_APPEND`` write and fsyncs it before returning.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_MODE = 0o644  # mkstemp makes 0600; results are meant to be read by others


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block ends without an exception, the file
    written there replaces ``path`` atomically. On an exception it is removed and ``path`` is left
    as it was.

    The temporary name is ``.<name>.<random>.tmp<suffix>`` (``.curve.png.k2j9.tmp.png``): hidden,
    recognisably unfinished, and with the suffix of ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{path.suffix}"
    )
    os.close(fd)
    temporary = Path(name)
    try:
        yield temporary
        os.chmod(temporary, _MODE)
        fsync_path(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_path(path.parent)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` so that readers see the old file or the new, never half."""
    with atomic_path(path) as temporary:
        temporary.write_bytes(data)
    return Path(path)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`write_bytes_atomic`)."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike[str], obj: Any, indent: int | None = 2) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically (see :func:`write_text_atomic`). Non-finite
    floats are written as ``NaN``/``Infinity`` (Python's JSON), which ``json.load`` reads back.
    Nothing is written when ``obj`` cannot be serialised."""
    return write_text_atomic(path, json.dumps(obj, indent=indent) + "\n")


def fsync_path(path: str | os.PathLike[str]) -> None:
    """fsync a file or a directory by name (a directory: so that a rename in it is durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def locked_append(path: str | os.PathLike[str]) -> Iterator[int]:
    """Yield a descriptor of ``path`` (created if missing) opened for reading and appending,
    holding an exclusive ``flock`` on it until the block ends."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, _MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def append_durably(fd: int, data: bytes, path: str | os.PathLike[str]) -> int:
    """Append ``data`` to the file ``fd`` (from :func:`locked_append` on ``path``) in one write
    and fsync it; a short write raises ``OSError`` naming ``path``. Returns the bytes written."""
    written = os.write(fd, data)
    os.fsync(fd)
    if written != len(data):
        raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
    return written
