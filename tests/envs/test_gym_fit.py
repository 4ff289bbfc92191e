"""How simroll's envs fit Gymnasium's tools: ids after ``import simroll``, vector envs after the
parent has rendered, ``FlattenObservation`` + ``check_env`` without the instruction text, and
``RecordVideo``.

Interpreter-level behaviour (registration on import, process start methods) runs in a fresh
subprocess with a timeout, so a hang fails the test instead of hanging pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.wrappers import FlattenObservation, RecordVideo

import simroll
from simroll.envs.core import AGENT_POS_DIM, ENV_STATE_DIM
from simroll.features import FOLLOWING_ERROR_NAMES


def run_python(code: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    script = cwd / "script.py"
    script.write_text(textwrap.dedent(code))
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    try:
        return subprocess.run(
            [sys.executable, str(script)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the script hung (no exit in {timeout} s); its output:\n{exc.stdout}")


def test_make_after_import_simroll_in_fresh_interpreter(tmp_path: Path) -> None:
    result = run_python(
        """
        import sys
        import gymnasium as gym
        import simroll

        # registration names entry points as strings: neither MuJoCo nor the env modules load
        assert "mujoco" not in sys.modules and "simroll.envs" not in sys.modules
        for task in simroll.ENV_TABLE:
            env = gym.make(f"simroll/{task}-v0", obs_mode="state")
            obs, _ = env.reset(seed=0)
            assert obs["agent_pos"].shape == (12,), obs["agent_pos"].shape
            env.close()
        print("OK", sorted(i for i in gym.registry if i.startswith("simroll/")))
        """,
        tmp_path,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    ids = [
        "ClutterRetrieve",
        "ClutterRetrieveEasy",
        "ClutterRetrieveHard",
        "ClutterRetrieveMedium",
        "SoftLift",
        "SoftPlace",
        "SoftSqueeze",
    ]
    assert f"OK {[f'simroll/{name}-v0' for name in ids]}" in result.stdout


def test_registry_table_matches_env_classes() -> None:
    from simroll.envs import MAX_EPISODE_STEPS, TASKS

    assert set(TASKS) == set(simroll.ENV_TABLE)
    for name, cls in TASKS.items():
        spec = gym.spec(f"simroll/{name}-v0")
        assert spec.entry_point == f"{cls.__module__}:{cls.__name__}"
        assert spec.max_episode_steps == MAX_EPISODE_STEPS[name]
        assert spec.vector_entry_point == f"simroll.envs:make_{name}_vector"


def test_vector_envs_after_the_parent_rendered(tmp_path: Path) -> None:
    """The parent initialises EGL (a render), then starts rendering workers three ways: the
    default ``make_vec`` (simroll's forkserver entry point), ``async`` with a forkserver context,
    and plain ``async`` (fork), which must fail fast with a clear error instead of hanging."""
    result = run_python(
        """
        import time
        import gymnasium as gym
        import simroll
        from simroll.envs.core import ForkedRenderingError

        ID = "simroll/SoftLift-v0"
        KW = dict(obs_mode="full", image_size=32, object="sponge")

        def exercise(vec):
            obs, _ = vec.reset(seed=0)
            assert obs["pixels"]["scene"].shape == (2, 32, 32, 3)
            assert obs["pixels"]["scene"].any(), "workers rendered black images"
            vec.step(vec.action_space.sample())
            vec.close()

        def main():
            env = gym.make(ID, obs_mode="state", render_mode="rgb_array", render_size=(48, 64))
            env.reset(seed=0)
            assert env.render().shape == (48, 64, 3)  # EGL is now initialised in this process

            vec = gym.make_vec(ID, 2, **KW)
            assert type(vec).__name__ == "AsyncVectorEnv", type(vec)
            assert vec.spec.kwargs["vectorization_mode"] == "vector_entry_point"
            exercise(vec)
            print("ENTRY_POINT_OK", flush=True)

            vec = gym.make_vec(
                ID, 2, vectorization_mode="async", vector_kwargs={"context": "forkserver"}, **KW
            )
            exercise(vec)
            print("ASYNC_FORKSERVER_OK", flush=True)

            vec = gym.make_vec(ID, 2, vectorization_mode="async", **KW)  # fork on Python < 3.14
            started = time.monotonic()
            try:
                vec.reset(seed=0)
            except ForkedRenderingError as exc:
                assert "forkserver" in str(exc)
                print("FORK_REFUSED", round(time.monotonic() - started, 1), flush=True)
            else:
                print("FORK_RENDERED", flush=True)  # a start method other than fork
            vec.close(terminate=True)
            env.close()

        if __name__ == "__main__":
            main()
        """,
        tmp_path,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ENTRY_POINT_OK" in result.stdout
    assert "ASYNC_FORKSERVER_OK" in result.stdout
    assert ("FORK_REFUSED" in result.stdout) or ("FORK_RENDERED" in result.stdout)


def test_make_vector_env_refuses_fork() -> None:
    from simroll.envs import make_vector_env

    with pytest.raises(ValueError, match="forkserver"):
        make_vector_env("SoftLift", 2, context="fork")
    with pytest.raises(ValueError, match="unknown simroll task"):
        make_vector_env("SoftJuggle", 2)


@pytest.mark.filterwarnings("ignore:.*(infinity|different from the unwrapped)")
@pytest.mark.parametrize("obs_mode", ["state", "full"])
def test_flatten_observation_without_task_description(obs_mode: str) -> None:
    env = gym.make(
        "simroll/SoftSqueeze-v0",
        obs_mode=obs_mode,
        image_size=16,
        object="sponge",
        with_task_description=False,
    )
    assert "task_description" not in env.observation_space.spaces
    flat = FlattenObservation(env)
    tactile = 2 * 16 * 12 + 2 * 99 * 2
    extra = ENV_STATE_DIM if obs_mode == "state" else 2 * 16 * 16 * 3
    following = len(FOLLOWING_ERROR_NAMES)
    assert flat.observation_space.shape == (AGENT_POS_DIM + following + tactile + extra,)
    obs, _ = flat.reset(seed=3)
    assert obs.shape == flat.observation_space.shape and np.all(np.isfinite(obs))
    if obs_mode == "state":
        check_env(flat.unwrapped)  # the env itself: reset/step determinism, spaces, seeding
        check_env(flat, skip_render_check=True)
    flat.close()


def test_with_task_description_is_a_bool() -> None:
    with pytest.raises(ValueError, match="with_task_description"):
        gym.make("simroll/SoftLift-v0", obs_mode="state", with_task_description="no")


def test_record_video_writes_an_mp4(tmp_path: Path) -> None:
    pytest.importorskip("moviepy", reason="RecordVideo needs moviepy (the [video] extra)")
    env = gym.make(
        "simroll/SoftLift-v0",
        obs_mode="state",
        render_mode="rgb_array",
        render_size=(64, 96),
        max_episode_steps=6,
    )
    folder = tmp_path / "videos"
    env = RecordVideo(env, str(folder), episode_trigger=lambda episode: True)
    env.reset(seed=0)
    done = False
    while not done:
        _, _, terminated, truncated, _ = env.step(np.zeros(5, dtype=np.float32))
        done = terminated or truncated
    env.close()
    videos = list(folder.glob("*.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 0
