"""Run directories: who holds one, and what Ctrl-C during a run leaves in it.

* :func:`hold_run_dir` creates the directory and holds an exclusive ``flock`` on its ``.lock``
  file for the whole run; a second run on the same directory fails at once, naming the pid.
* :func:`prepare_run_dir` creates it, or fails with one line saying why it cannot be one.
* :func:`kept_on_interrupt` turns Ctrl-C during a run into :class:`Interrupted`, whose message
  counts the episodes kept in the record store(s) and says how to resume.

Used by the library API (:mod:`simroll.evaluation`) and the commands alike; the command-line
parts (which directory a Hydra job writes to, one-line errors and exit statuses) are in
:mod:`simroll.cli.rundir`.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from simroll.rollout.records import EpisodeSpec
from simroll.rollout.store import RecordStore

LOCK_FILENAME = ".lock"


class RunDirError(ValueError):
    """``output_dir`` cannot be used: a file, not writable, or in use by another run."""


class Interrupted(Exception):
    """Ctrl-C during a run; the message says what was kept and how to resume."""


def prepare_run_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` as a directory, or fail with one line saying why it cannot be one."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise RunDirError(
            f"output_dir {path} is a file; expected a directory (or a path that does not exist)"
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirError(f"output_dir {path} cannot be created: {exc.strerror or exc}") from None
    return path


@contextmanager
def hold_run_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Create ``path`` and hold its ``.lock`` for the block; refuse a directory in use."""
    run_dir = prepare_run_dir(path)
    lock = run_dir / LOCK_FILENAME
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise RunDirError(f"output_dir {run_dir} is not writable: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise RunDirError(
                f"{run_dir} is in use by another simroll run (pid {holder}); wait for it to "
                "finish or choose another output_dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield run_dir
    finally:
        os.close(fd)  # also releases the lock


@contextmanager
def kept_on_interrupt(
    run_dir: Path, specs: Sequence[EpisodeSpec], stores: Sequence[Path] | None = None
) -> Iterator[None]:
    """Turn Ctrl-C in the block into :class:`Interrupted`, saying how many episodes were kept.

    ``stores`` are the record-store folders each expected to hold ``specs`` (default: the run
    directory itself; a certification has one per policy).
    """
    try:
        yield
    except KeyboardInterrupt:
        folders = [run_dir] if stores is None else list(stores)
        total = len(specs) * len(folders)
        kept = total - sum(len(RecordStore(folder).pending(specs)) for folder in folders)
        raise Interrupted(
            f"interrupted: {kept} of {total} episodes kept in {run_dir}; rerun the same "
            "command to resume"
        ) from None
