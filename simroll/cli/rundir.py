"""Run directories on the command line: which one a Hydra job writes to, and the one-line errors
when it cannot be used. Holding a run directory and Ctrl-C's message are the library's
(:mod:`simroll.rollout.rundir`, re-exported here for the commands).

* :func:`job_output_dir`: ``output_dir`` in a single run; in a multirun (``-m``) each job's own
  directory, ``<output_dir>/<job number>`` (the ``hydra.sweep`` of every top-level config is
  ``dir: ${output_dir}``, ``subdir: ${hydra.job.num}``), so that two jobs never share a record
  store or a checkpoint, whether ``output_dir`` is the default or given on the command line.
* :func:`check_output_dir_override`: run before Hydra starts, so that an ``output_dir=`` naming a
  file or an unwritable place is one line, not the traceback of Hydra's own ``mkdir``.
* :func:`one_line_errors` maps :class:`RunDirError` and a refused resume
  (:class:`~simroll.rollout.manifest.ManifestError`) to one line and exit status 2, and Ctrl-C to
  one line (what was kept, how to resume; :class:`Interrupted`) and exit status 130.
* :func:`check_path_name`: a config string that becomes a file or folder name must be a plain
  name (letters, digits, ``_``, ``-``), never an absolute path or ``..``.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, open_dict

from simroll.rollout.manifest import ManifestError
from simroll.rollout.rundir import (  # noqa: F401  (re-exported for the commands)
    LOCK_FILENAME,
    Interrupted,
    RunDirError,
    hold_run_dir,
    kept_on_interrupt,
    prepare_run_dir,
)
from simroll.rollout.settings import ConfigError

EXIT_CONFIG = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
_PATH_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
_OVERRIDE = re.compile(r"\+{0,2}output_dir=(.*)")


def job_output_dir(cfg: DictConfig) -> Path:
    """This job's run directory (see the module docstring); sets ``cfg.output_dir`` to it."""
    try:
        hydra_config = HydraConfig.get()
    except ValueError:  # outside a Hydra run (tests, the library)
        return Path(cfg.output_dir)
    if hydra_config.mode != RunMode.MULTIRUN:
        return Path(cfg.output_dir)
    path = Path(hydra_config.runtime.output_dir)
    with open_dict(cfg):
        cfg.output_dir = str(path)
    return path


def check_output_dir_override(command: str, argv: Sequence[str]) -> None:
    """Exit with one line (status 2) if an ``output_dir=`` override cannot be a run directory.

    Only plain values are checked (no interpolation, no sweep list); the rest is checked by
    :func:`hold_run_dir` once the config is resolved.
    """
    for argument in argv:
        match = _OVERRIDE.fullmatch(argument)
        if match is None or "${" in match.group(1) or "," in match.group(1):
            continue
        try:
            _check_creatable(Path(match.group(1)))
        except RunDirError as exc:
            print(f"simroll {command}: {exc}", file=sys.stderr)
            sys.exit(EXIT_CONFIG)


def _check_creatable(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise RunDirError(
            f"output_dir {path} is a file; expected a directory (or a path that does not exist)"
        )
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise RunDirError(f"output_dir {path} cannot be created: {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RunDirError(f"output_dir {path} is not writable ({existing} is read-only)")


@contextmanager
def one_line_errors(command: str) -> Iterator[None]:
    """Turn config and run-directory errors and Ctrl-C inside the block into one line and an
    exit status."""
    try:
        yield
    except ConfigError as exc:
        print(f"simroll {command}: config error: {exc}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    except (RunDirError, ManifestError) as exc:
        print(f"simroll {command}: {exc}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    except Interrupted as exc:
        print(f"simroll {command}: {exc}", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        print(f"simroll {command}: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)


def check_path_name(key: str, name: str) -> str:
    """``name`` if it can be a file or folder name inside ``output_dir``; else a ConfigError."""
    if not isinstance(name, str) or not _PATH_NAME.fullmatch(name):
        raise ConfigError(
            f"{key}: {name!r} cannot name a folder in output_dir; expected letters, digits, "
            "'_' or '-' (no '/', '..' or leading '.'), e.g. expert_replan2"
        )
    return name
