"""Fixtures for the env tests: envs that close themselves, a private copy of the assets tree."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import gymnasium as gym
import pytest

import simroll.assets
import simroll.envs  # noqa: F401  (registers the envs)
from simroll.envs.scene import compile_model


@pytest.fixture
def make_env() -> Iterator[Callable[..., gym.Env]]:
    """``make_env(task="SoftLift", **kwargs)``: a registered env, state obs unless told, closed
    after the test."""
    envs: list[gym.Env] = []

    def make(task: str = "SoftLift", **kwargs) -> gym.Env:
        kwargs.setdefault("obs_mode", "state")
        env = gym.make(f"simroll/{task}-v0", **kwargs)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


def clear_asset_caches() -> None:
    simroll.assets._object_body_text.cache_clear()
    simroll.assets._asset_texts.cache_clear()
    compile_model.cache_clear()


@pytest.fixture
def temp_assets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A writable copy of ``assets/`` that the catalog and scene compiler read instead."""
    root = tmp_path / "assets"
    shutil.copytree(simroll.assets.assets_root(), root)
    monkeypatch.setattr(simroll.assets, "assets_root", lambda: root)
    clear_asset_caches()
    yield root
    clear_asset_caches()  # nothing compiled from the temp tree outlives the test
