"""What vector workers have imported before they start, and starting their fork server early.

``vector`` workers are forked from a ``forkserver`` process (never from a process with a GL
context). Whatever that server imported, every worker inherits: the episode engine always, and
with the fast paths on (``simroll._speedups``) the module of the job's policy factory, plus
LeRobot's policy stack when the factory loads LeRobot checkpoints
(``simroll.rollout.preload_lerobot``: 8-10 s of CPU per process on 2 cores, paid once instead of
once per worker).

:func:`start_worker_server` starts that server now, so that its imports run while this process
is still busy (parsing configs, loading the policy once to check it) instead of after it, when
the workers are needed. :func:`preload_modules` is the list both use; the server reads it when it
starts, once per process.
"""

from __future__ import annotations

import functools
import multiprocessing
from collections.abc import Sequence
from typing import Any

from simroll import _speedups

ENGINE = "simroll.rollout.backends"
# policy factory module -> modules to import with it in the fork server
WITH_MODULE = {"simroll.policies.lerobot": ("simroll.rollout.preload_lerobot",)}


def _factory_module(policy_factory: Any) -> str | None:
    """The module of a factory, or of a ``"module.name"`` target string (Hydra's ``_target_``)."""
    if isinstance(policy_factory, str):
        return policy_factory.rpartition(".")[0] or None
    target = policy_factory
    while isinstance(target, functools.partial):
        target = target.func
    module = getattr(target, "__module__", None)
    if not isinstance(module, str):
        module = type(target).__module__
    return module


def preload_modules(policy_factory: Any = None) -> list[str]:
    """Modules the fork server imports before forking workers for ``policy_factory`` (a factory
    or its ``"module.name"`` target): the engine, and (fast paths on) the factory's own simroll
    module with what it needs."""
    modules = [ENGINE]
    module = _factory_module(policy_factory) if policy_factory is not None else None
    # only simroll's own modules: the server must never run code a third-party import might
    if _speedups.enabled() and module and module.startswith("simroll."):
        modules += [module, *WITH_MODULE.get(module, ())]
    return list(dict.fromkeys(modules))


def start_worker_server(policy_factory: Any = None, observer_modules: Sequence[str] = ()) -> bool:
    """Start the ``forkserver`` that vector workers fork from, importing
    :func:`preload_modules` in the background, and ``observer_modules`` (what the job's observer
    factories name in ``worker_modules``: once the server runs, the backend cannot add them);
    no-op (False) with the fast paths off. Call it as soon as a vector run's policy is known (its
    factory, or the config's ``_target_``)."""
    if not _speedups.enabled():
        return False
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(
        list(dict.fromkeys([*preload_modules(policy_factory), *observer_modules]))
    )
    forkserver.ensure_running()
    return True
