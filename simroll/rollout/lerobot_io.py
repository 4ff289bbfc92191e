"""Quiet LeRobotDataset I/O: the one place simroll picks the video decoder and hushes encoders.

Every simroll path that creates or opens a LeRobotDataset goes through :func:`create_dataset` or
:func:`open_dataset` (dataset recording, ``simroll train``), so:

* the decoder is chosen here, once per process (:func:`video_backend`): torchcodec where its
  FFmpeg libraries load, else PyAV, which bundles its own FFmpeg and decodes the same frames.
  LeRobot's own default makes the same choice but logs torchcodec's whole loading traceback
  (about a hundred lines) on every dataset it opens on a machine without system FFmpeg;
* :func:`quiet_media_logs` silences what video encoding prints: SVT-AV1's banner and config lines
  (it writes to stderr itself; its ``SVT_LOG`` variable sets the level, 1 = errors only, unless
  the user set one), FFmpeg's (libav) messages below errors (the mp4 muxer's ``moov atom``
  lines), and LeRobot's
  ``Using video codec: ...`` info lines;
* :func:`quiet_progress` hides the ``datasets`` library's per-episode ``Map:`` progress bars,
  which break simroll's own bar, for the duration of a ``with`` block.

Code of your own that opens simroll datasets with LeRobot directly stays quiet by passing
``video_backend=video_backend()``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Iterator
from functools import cache
from typing import Any

SVT_LOG_ERRORS = "1"  # SVT-AV1 log levels: 0 fatal, 1 error, 2 warn, 3 info (its default), 4 debug
ENCODER_LOGGERS = ("lerobot.configs.video", "libav")
# What a process writing LeRobotDatasets imports (seconds of CPU): vector workers that record
# dataset shards get it from their fork server's preload instead of importing it each.
WRITER_MODULES = ("lerobot.datasets.lerobot_dataset",)


@cache
def video_backend() -> str:
    """``"torchcodec"`` where its FFmpeg libraries load, else ``"pyav"``; decided once, quietly."""
    try:
        importlib.import_module("torchcodec.decoders")
    except (ImportError, OSError, RuntimeError):
        return "pyav"
    return "torchcodec"


def quiet_media_logs() -> None:
    """Silence SVT-AV1, libav and LeRobot's codec info lines (idempotent, process-wide)."""
    os.environ.setdefault("SVT_LOG", SVT_LOG_ERRORS)  # read by SVT-AV1 whenever an encoder opens
    for name in ENCODER_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level < logging.WARNING:
            logger.setLevel(logging.WARNING)
    try:
        import av.logging
    except ImportError:  # pragma: no cover - av is a dependency; nothing to quiet without it
        return
    av.logging.set_level(av.logging.ERROR)  # PyAV's callback, into Python logging ("libav")
    # LeRobot restores FFmpeg's own callback after each encode; that one obeys libav's level
    # (INFO by default: the mp4 muxer's "Starting second pass: moving the moov atom" lines)
    av.logging.set_libav_level(av.logging.ERROR)


@contextlib.contextmanager
def quiet_progress() -> Iterator[None]:
    """Hide the ``datasets`` library's progress bars inside the block, then restore them."""
    import datasets

    was_disabled = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            datasets.enable_progress_bars()


def create_dataset(**kwargs: Any):
    """``LeRobotDataset.create(**kwargs)`` with simroll's decoder and quiet encoders."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    quiet_media_logs()
    kwargs.setdefault("video_backend", video_backend())
    return LeRobotDataset.create(**kwargs)


def open_dataset(repo_id: str, **kwargs: Any):
    """``LeRobotDataset(repo_id, **kwargs)`` with simroll's decoder, without LeRobot's
    torchcodec traceback; ``kwargs`` as LeRobot's (``root``, ``delta_timestamps``, ...)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    quiet_media_logs()
    kwargs.setdefault("video_backend", video_backend())
    with quiet_progress():
        return LeRobotDataset(repo_id, **kwargs)
