"""A per-process cache of loaded policy checkpoints.

The episode engine builds a fresh policy for every episode (``policy_factory(env)``), and reading a
LeRobot checkpoint (config parsing through draccus, model construction, safetensors, processor
pipelines) took 0.1-0.25 s on 2 CPU cores: 5-15 % of a SimVLA episode. :func:`cached_build`
builds a checkpoint's objects once per process and hands each caller a deep copy (~0.07 s): its own
modules, queues and processors, with weights bit-identical to a fresh load, so an episode is the
same with and without the cache. A checkpoint whose files change (name, size or mtime) is built
anew; objects that cannot be deep-copied are built every time. ``SIMROLL_FAST_PATHS=0``
(``simroll._speedups``) turns the cache off.
"""

from __future__ import annotations

import copy
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from simroll import _speedups

MAX_ENTRIES = 4  # checkpoints kept per process (a certification holds two)

_cache: OrderedDict[Hashable, Any] = OrderedDict()
_lock = threading.Lock()


def checkpoint_signature(path: Path) -> tuple:
    """Name, size and modification time of every file in checkpoint directory ``path``."""
    return tuple(
        sorted(
            (item.name, item.stat().st_size, item.stat().st_mtime_ns)
            for item in Path(path).iterdir()
            if item.is_file()
        )
    )


def cache_key(path: Path, **settings: Any) -> Hashable:
    """Key of checkpoint ``path`` loaded with ``settings`` (JSON-able: device, overrides, ...)."""
    resolved = Path(path).resolve()
    text = json.dumps(settings, sort_keys=True, default=repr)
    return (str(resolved), checkpoint_signature(resolved), text)


def cached_build[T](key: Hashable, build: Callable[[], T]) -> T:
    """A deep copy of what ``build()`` returned for ``key`` (built on the first call)."""
    if not _speedups.enabled():
        return build()
    with _lock:
        template = _cache.get(key)
        if template is not None:
            _cache.move_to_end(key)
    if template is None:
        template = build()
        try:
            copied = copy.deepcopy(template)
        except Exception:  # noqa: BLE001 - an object that cannot be copied is built each time
            return template
        with _lock:
            _cache[key] = template
            while len(_cache) > MAX_ENTRIES:
                _cache.popitem(last=False)
        return copied
    return copy.deepcopy(template)


def clear() -> None:
    with _lock:
        _cache.clear()
