"""Packaging: the wheel carries configs, assets, report templates and ``py.typed`` (built from
the source tree and from an sdist, which keeps no symlinks), and a non-editable install of it runs
``simroll eval`` from a directory outside the repository.

The wheel is built from a copy of the source tree (a build writes ``build/`` and ``*.egg-info``
next to ``pyproject.toml``), without build isolation so no network is needed. The fresh venv gets
the heavy dependencies through a ``.pth`` line naming this interpreter's site-packages; the
editable install's finder there is not activated (``.pth`` files in a directory that another
``.pth`` adds are not processed), which the test checks through ``simroll.__file__``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# top-level entries a wheel build does not read: kept out of the copy to keep it small and fast
NOT_COPIED = {
    ".git",
    ".venv",
    "build",
    "dist",
    "policies",
    "benchmarks",
    "docs",
    "tests",
    "outputs",
    "runs",
    "multirun",
    "data",
    "logs",
    "tmp",
}
CACHES = shutil.ignore_patterns("__pycache__", "*.egg-info", ".pytest_cache", ".ruff_cache")


def _copy_source(target: Path) -> Path:
    target.mkdir()
    for entry in REPO.iterdir():
        if entry.name in NOT_COPIED or entry.name.endswith(".egg-info"):
            continue
        if entry.is_dir() and not entry.is_symlink():
            # symlinks=True keeps simroll/_data/* as the relative links they are in a checkout
            shutil.copytree(entry, target / entry.name, symlinks=True, ignore=CACHES)
        else:
            shutil.copy2(entry, target / entry.name, follow_symlinks=False)
    return target


def _build_wheel(source: Path, out: Path) -> Path:
    """``pip wheel`` of a source folder or sdist, without isolation (no network needed)."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"pip wheel failed:\n{result.stdout}\n{result.stderr}"
    (built,) = out.glob("simroll-*.whl")
    return built


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _copy_source(tmp_path_factory.mktemp("packaging") / "source")


@pytest.fixture(scope="module")
def wheel(source: Path) -> Path:
    return _build_wheel(source, source.parent / "wheels")


def assert_complete(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = [
        "simroll/py.typed",
        "simroll/_data/configs/eval.yaml",
        "simroll/_data/configs/collect.yaml",
        "simroll/_data/configs/env/soft_lift.yaml",
        "simroll/_data/configs/policy/expert.yaml",
        "simroll/_data/assets/scenes/soft_table.xml",
        "simroll/_data/assets/objects/sponge/soft.xml",
        "simroll/_data/assets/objects/sponge/calibration.yaml",
        "simroll/report/templates/eval.html.j2",
        "simroll/report/templates/report.css",
    ]
    missing = [name for name in expected if name not in names]
    assert not missing, f"{wheel.name} lacks {missing}"
    # every shipped config and asset file is in the wheel, not only the ones named above
    for top in ("configs", "assets"):
        for path in (REPO / top).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                name = f"simroll/_data/{top}/{path.relative_to(REPO / top).as_posix()}"
                assert name in names, f"{wheel.name} lacks {name}"


def test_wheel_contains_data_and_py_typed(wheel: Path) -> None:
    assert_complete(wheel)


def test_wheel_built_from_the_sdist_is_complete(source: Path, tmp_path: Path) -> None:
    sdist_dir = tmp_path / "sdist"
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from setuptools import build_meta; build_meta.build_sdist({str(sdist_dir)!r})",
        ],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"build_sdist failed:\n{result.stdout}\n{result.stderr}"
    (sdist,) = sdist_dir.glob("simroll-*.tar.gz")
    assert_complete(_build_wheel(sdist, tmp_path / "wheels"))


def test_non_editable_install_runs_eval_outside_repo(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # the heavy dependencies (torch, lerobot, mujoco) come from this interpreter's environment
    (site / "_simroll_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q"]
        + [str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, f"pip install failed:\n{install.stdout}\n{install.stderr}"

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    env.pop("PYTHONPATH", None)
    where = subprocess.run(
        [str(python), "-c", "import simroll, simroll.assets; print(simroll.__file__)"],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(site), (
        f"simroll imported from {where.stdout.strip()}, not from the fresh venv {site}"
    )

    run_dir = tmp_path / "run"
    result = subprocess.run(
        [str(venv / "bin" / "simroll"), "eval", "env=soft_lift", "env.objects=[sponge]"]
        + ["episodes=1", "video.episodes=0", f"output_dir={run_dir}"],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"simroll eval failed:\n{result.stdout}\n{result.stderr}"
    records = (run_dir / "records.jsonl").read_text().splitlines()
    assert len(records) == 1
