"""What the library API accepts as "a policy", turned into a factory, a name and a config.

``simroll.evaluate`` and ``simroll.certify`` take a policy in any of these forms:

* a shipped policy config name (``"expert"``, ``"vla"``, ``"expert_replan2"``): the file
  ``configs/policy/<name>.yaml``, as ``policy=<name>`` on the command line;
* a checkpoint directory (``"policies/vla_soft"`` or a ``Path``): loaded by
  :func:`simroll.policies.lerobot.load_policy`, as ``policy=lerobot policy.path=<dir>``;
* a policy config mapping with a ``_target_`` (what a Hydra policy config holds);
* a factory: any callable ``factory(env) -> policy`` (it must pickle for the vector and Ray
  backends, e.g. a module-level function or a ``functools.partial`` of one).

:func:`policy_config` builds the mapping of a named config with overrides (an acceleration
knob: ``policy_config("vla", overrides={"num_flow_steps": 2})``); :func:`parse_setting` reads one
such override written ``KEY=VALUE`` (the scripts' ``--override`` / ``--inference``). The config
(JSON-able) is what a run's manifest records and hashes, so two runs of the same policy compare
equal.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POLICY_CONFIG_DIR = Path(__file__).resolve().parents[1] / "_data" / "configs" / "policy"
CHECKPOINT_LOADER = "simroll.policies.lerobot.load_policy"


@dataclass(frozen=True)
class ResolvedPolicy:
    """A policy argument resolved: its factory, the name it runs under and its JSON-able config."""

    factory: Callable[[Any], Any]
    name: str
    config: dict[str, Any]


def policy_names() -> list[str]:
    """The shipped policy config names (``configs/policy/*.yaml``)."""
    return sorted(path.stem for path in POLICY_CONFIG_DIR.glob("*.yaml"))


def policy_config(name: str, **fields: Any) -> dict[str, Any]:
    """The mapping of shipped config ``name`` with ``fields`` merged in (nested mappings merge:
    ``policy_config("vla", overrides={"num_flow_steps": 2})`` keeps the other overrides)."""
    from omegaconf import OmegaConf

    path = POLICY_CONFIG_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"unknown policy config {name!r}; expected one of {policy_names()}")
    config = OmegaConf.merge(_compose(name), OmegaConf.create(fields))
    return OmegaConf.to_container(config, resolve=True)


def checkpoint_config(path: str | Path, **fields: Any) -> dict[str, Any]:
    """The policy config that loads the checkpoint at ``path`` with
    :func:`simroll.policies.lerobot.load_policy`; ``fields`` are its other arguments
    (``device="cpu"``, ``overrides={"grasp_gate": True}``)."""
    return {"_target_": CHECKPOINT_LOADER, "_partial_": True, "path": str(path), **fields}


def parse_setting(item: str) -> tuple[str, Any]:
    """``"KEY=VALUE"`` as ``(key, value)``, the value read as JSON (``n_action_steps=2``,
    ``noise_scale=0.5``, ``ignored_state=["hand_vz"]``), or as the bare string when it is not JSON
    (``quantize=int8``); ``ValueError`` naming the item when there is no ``=`` or no key."""
    import json

    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ValueError(f"expected a setting KEY=VALUE, got {item!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


@functools.cache  # composing takes a few tenths of a second; the result is never mutated
def _compose(name: str) -> dict[str, Any]:
    """``configs/policy/<name>.yaml`` composed by Hydra, as ``policy=<name>`` gives it: its
    defaults list applied (``expert_replan3`` is ``expert_replan2`` with ``every: 3``). A Hydra
    app running in this process is set aside meanwhile and restored."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    running = GlobalHydra.instance().hydra
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(POLICY_CONFIG_DIR.parent), version_base="1.3"):
            return OmegaConf.to_container(compose(f"policy/{name}").policy, resolve=True)
    finally:
        GlobalHydra.instance().clear()
        if running is not None:
            GlobalHydra.instance().initialize(running)


def _describe(factory: Callable) -> dict[str, Any]:
    """A JSON-able description of a factory callable, for the manifest and the config hash."""
    if isinstance(factory, functools.partial):
        return {
            "callable": _describe(factory.func)["callable"],
            "args": [repr(arg) for arg in factory.args],
            "kwargs": {key: repr(value) for key, value in sorted(factory.keywords.items())},
        }
    module = getattr(factory, "__module__", None) or type(factory).__module__
    qualname = getattr(factory, "__qualname__", None) or type(factory).__qualname__
    return {"callable": f"{module}.{qualname}"}


def resolve_policy(policy: Any, name: str | None = None) -> ResolvedPolicy:
    """Resolve a policy argument (see the module docstring); ``name`` overrides the name it
    runs under (default: the config name, the checkpoint directory's name, or the callable's)."""
    from hydra.utils import instantiate

    if isinstance(policy, Path) or (isinstance(policy, str) and ("/" in policy or policy == ".")):
        from simroll.policies.checkpoint import resolve_checkpoint

        path = resolve_checkpoint(policy)
        if not path.is_dir():
            raise ValueError(f"policy checkpoint {str(policy)!r} is not a directory")
        config = checkpoint_config(policy)
        return ResolvedPolicy(instantiate(config), name or path.name, config)
    if isinstance(policy, str):
        config = policy_config(policy)
        return ResolvedPolicy(instantiate(config), name or policy, config)
    if isinstance(policy, Mapping):
        if "_target_" not in policy:
            raise ValueError(
                f"a policy config mapping needs a '_target_', got keys {sorted(policy)}"
            )
        config = copy.deepcopy(dict(policy))
        return ResolvedPolicy(instantiate(config), name or str(config["_target_"]), config)
    if callable(policy):
        config = _describe(policy)
        return ResolvedPolicy(policy, name or config["callable"].rsplit(".", 1)[-1], config)
    raise TypeError(
        "policy must be a policy config name, a checkpoint directory, a config mapping with "
        f"'_target_' or a callable factory(env) -> policy, got {type(policy).__name__}"
    )
