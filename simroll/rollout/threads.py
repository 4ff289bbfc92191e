"""Thread limits for episode worker processes (vector workers, Ray actors).

Each worker runs one episode at a time, and the backends start about one worker per core, so a
library that starts a thread per core in every worker oversubscribes the machine: Mesa's
llvmpipe rasterizer (``LP_NUM_THREADS``, one thread per core by default, in every process that
renders), OpenMP/MKL/OpenBLAS pools (torch, numpy) and torch's intra-op pool. With 2 workers on 2
cores each would run 3+ busy threads and they thrash; one thread each keeps one worker per core.

:func:`limit_worker_threads` is called once at the start of a worker, before it builds an env
or loads a policy: it sets the environment variables those libraries read when they start (Mesa
creates its rasterizer threads with the first GL context, torch reads ``OMP_NUM_THREADS`` when
imported) and caps torch's pool if torch is already imported. Values the user has set in the
environment are kept. ``SIMROLL_FAST_PATHS=0`` (``simroll._speedups``) leaves everything as it is.
The process that runs ``local`` episodes is not touched: there llvmpipe may use the idle cores.
"""

from __future__ import annotations

import os
import sys

from simroll import _speedups

# environment variable -> threads each library may use in a worker
WORKER_THREAD_ENV = (
    "LP_NUM_THREADS",  # Mesa llvmpipe rasterizer threads (0 would rasterize on the caller)
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def limit_worker_threads(threads: int = 1) -> dict[str, str]:
    """Limit this worker process's libraries to ``threads`` threads each; returns the
    environment settings in effect for :data:`WORKER_THREAD_ENV` (empty when the fast paths are
    off)."""
    if not _speedups.enabled():
        return {}
    for name in WORKER_THREAD_ENV:
        os.environ.setdefault(name, str(threads))
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            torch.set_num_threads(max(1, int(os.environ["OMP_NUM_THREADS"])))
        except ValueError:  # a malformed user setting: torch ignores it too
            torch.set_num_threads(threads)
    return {name: os.environ[name] for name in WORKER_THREAD_ENV}


def thread_report() -> dict[str, object]:
    """The thread settings and OS thread count of this process (for benchmarks and tests)."""
    torch = sys.modules.get("torch")
    try:
        os_threads: int | None = len(os.listdir("/proc/self/task"))
    except OSError:  # not Linux
        os_threads = None
    return {
        "env": {name: os.environ.get(name) for name in WORKER_THREAD_ENV},
        "torch_threads": torch.get_num_threads() if torch is not None else None,
        "os_threads": os_threads,
    }
