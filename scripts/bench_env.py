"""Benchmarks the envs' ``step`` against raw ``mujoco.mj_step``; writes
benchmarks/results/env.json.

For each soft task (sponge, default physics) one gentle-expert episode (seed 0) is recorded: its
actions, the actuator controls the env applied at each control step and the physics state right
after reset; for the low-level clutter env (``ClutterRetrieve``, medium tier, cuboid target) one
episode of the teacher's plan executed by the primitive wrapper, every low-level action of it.
Clutter layout generation is timed too (50 seeds per tier, goal: under 1 s each). Then, in
repeated interleaved rounds, the same episode is timed three ways:
* ``env``: the recorded actions replayed through the env's ``step`` (``obs_mode="state"``);
* ``raw``: ``mujoco.mj_step`` on a copy of the env's compiled model from the same initial state,
  with the recorded controls, 25 physics steps per control step: the floor the env can reach;
* ``full``: the actions replayed through an env with ``obs_mode="full"`` (two 96 px cameras).
The ratio ``env / raw`` of physics steps per second (median over rounds of the per-round ratio)
is the env's efficiency (goal >= 0.9); the real-time factor is simulated seconds per wall second.
The raw run must end in the env's final state bit for bit, which the JSON records. Rates are
from wall time; the same ratio from this thread's CPU time (``time.thread_time``, blind to time
the process waits for a core) is recorded too, as a check on a loaded machine.

Single-threaded: BLAS pools are capped at one thread and Mesa's llvmpipe renders in the calling
thread. Run: ``python scripts/bench_env.py [--rounds 5]`` (about 1-2 minutes on 2 cores); other
load on the machine lowers all numbers, the interleaving keeps the ratio fair.
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
os.environ.setdefault("LP_NUM_THREADS", "0")  # llvmpipe: no rasterizer threads
os.environ.setdefault("MUJOCO_GL", "egl")

import argparse  # noqa: E402
import copy  # noqa: E402
import datetime  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import gymnasium as gym  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import simroll.envs  # noqa: E402, F401  (registers the envs)
from simroll.envs.core import SUBSTEPS  # noqa: E402
from simroll.envs.soft import TASKS  # noqa: E402
from simroll.experts import SoftExpert  # noqa: E402
from simroll.io import write_json_atomic  # noqa: E402
from simroll.rollout.episode import EpisodeObserver, run_episode  # noqa: E402
from simroll.rollout.records import EpisodeSpec  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "env.json"
OBJECT = "sponge"
SEED = 0
FULL_IMAGE_SIZE = 96
STATE_SPEC = mujoco.mjtState.mjSTATE_INTEGRATION
CLUTTER_TASK = "ClutterRetrieve"  # the low-level clutter env (medium tier), teacher-driven
CLUTTER_TARGET = "cuboid"
LAYOUT_SEEDS = 50


@dataclass
class Recording:
    """One expert episode, as the env ran it: enough to replay it through env or raw MuJoCo."""

    actions: list[np.ndarray]
    controls: list[np.ndarray]
    initial_state: np.ndarray
    model: mujoco.MjModel  # a private copy of the env's model after reset
    final_qpos: np.ndarray
    success: bool


class RecordingExpert(SoftExpert):
    """The gentle expert, keeping every action it returns."""

    def __init__(self, env):
        super().__init__(env, "gentle")
        self.actions: list[np.ndarray] = []

    def select_action(self, obs) -> np.ndarray:
        action = super().select_action(obs)
        self.actions.append(action.copy())
        return action


def record_episode(env: gym.Env, task: str) -> Recording:
    experts: list[RecordingExpert] = []
    controls: list[np.ndarray] = []
    start: dict[str, object] = {}

    def make_expert(env):
        experts.append(RecordingExpert(env))
        return experts[-1]

    class Controls(EpisodeObserver):
        def on_reset(self, env, obs, info, policy):
            inner = env.unwrapped
            state = np.empty(mujoco.mj_stateSize(inner.model, STATE_SPEC))
            mujoco.mj_getState(inner.model, inner.data, state, STATE_SPEC)
            start["state"], start["model"] = state, copy.deepcopy(inner.model)

        def on_step(self, env, obs, info, action):
            controls.append(env.unwrapped.data.ctrl.copy())

    spec = EpisodeSpec(task, OBJECT, "default", SEED)
    record = run_episode(spec, make_expert, env=env, observers=[Controls()])
    if record.error is not None:
        raise RuntimeError(f"recording {task} failed: {record.error}")
    return Recording(
        experts[-1].actions,
        controls,
        start["state"],
        start["model"],
        env.unwrapped.data.qpos.copy(),
        record.success,
    )


def record_clutter_episode(env: gym.Env) -> Recording:
    """A ClutterRetrieve episode (medium tier, seed 0) driven by the teacher's plan through the
    primitive wrapper: every low-level action and control it applied, from the reset on."""
    from simroll.envs.clutter.primitives import PrimitiveActions
    from simroll.experts.clutter import ClutterTeacher

    raw = env.unwrapped
    actions: list[np.ndarray] = []
    controls: list[np.ndarray] = []
    inner_step = env.step

    def step(action):
        actions.append(np.array(action, dtype=np.float32))
        result = inner_step(action)
        controls.append(raw.data.ctrl.copy())
        return result

    wrapper = PrimitiveActions(env)
    env.step = step  # the wrapper steps ``env``: see every low-level action
    try:
        env.reset(seed=SEED)  # through the wrapper below; first record the start state
        state = np.empty(mujoco.mj_stateSize(raw.model, STATE_SPEC))
        mujoco.mj_getState(raw.model, raw.data, state, STATE_SPEC)
        model = copy.deepcopy(raw.model)
        actions.clear()
        controls.clear()
        wrapper.reset(seed=SEED)
        teacher = ClutterTeacher()
        plan = teacher.plan(raw.get_sim_state())
        teacher.close()
        info = {}
        for primitive in plan.primitives:
            *_, terminated, truncated, info = wrapper.step(primitive)
            if terminated or truncated:
                break
    finally:
        del env.step
    return Recording(actions, controls, state, model, raw.data.qpos.copy(), info["is_success"])


def time_env(env: gym.Env, actions: list[np.ndarray]) -> tuple[float, float, np.ndarray]:
    """Wall and CPU (this thread) seconds of replaying ``actions``, and the final qpos."""
    env.reset(seed=SEED)
    start, start_cpu = time.perf_counter(), time.thread_time()
    for action in actions:
        obs, *_ = env.step(action)
        if "pixels" in obs:
            dict(obs["pixels"])  # camera images render when read (LazyImages): read them all
    elapsed, elapsed_cpu = time.perf_counter() - start, time.thread_time() - start_cpu
    return elapsed, elapsed_cpu, env.unwrapped.data.qpos.copy()


def time_raw(recording: Recording, data: mujoco.MjData) -> tuple[float, float, np.ndarray]:
    model = recording.model
    mujoco.mj_resetData(model, data)
    mujoco.mj_setState(model, data, recording.initial_state, STATE_SPEC)
    start, start_cpu = time.perf_counter(), time.thread_time()
    for control in recording.controls:
        data.ctrl[:] = control
        for _ in range(SUBSTEPS):
            mujoco.mj_step(model, data)
    elapsed, elapsed_cpu = time.perf_counter() - start, time.thread_time() - start_cpu
    return elapsed, elapsed_cpu, data.qpos.copy()


def bench_task(task: str, rounds: int) -> dict:
    make = gym.make
    target = CLUTTER_TARGET if task == CLUTTER_TASK else OBJECT
    state_env = make(f"simroll/{task}-v0", object=target, obs_mode="state")
    full_env = make(
        f"simroll/{task}-v0", object=target, obs_mode="full", image_size=FULL_IMAGE_SIZE
    )
    if task == CLUTTER_TASK:
        recording = record_clutter_episode(state_env)
    else:
        recording = record_episode(state_env, task)
    raw_data = mujoco.MjData(recording.model)
    timestep = float(recording.model.opt.timestep)
    physics_steps = len(recording.actions) * SUBSTEPS

    time_env(full_env, recording.actions)  # warm-up: GL context, caches
    per_round = []
    replay_matches = True
    for index in range(rounds):
        # alternate the order so neither variant always runs right after the other
        order = ("env", "raw", "full") if index % 2 == 0 else ("full", "raw", "env")
        rates = {}
        for variant in order:
            if variant == "raw":
                wall, cpu, qpos = time_raw(recording, raw_data)
            else:
                env = state_env if variant == "env" else full_env
                wall, cpu, qpos = time_env(env, recording.actions)
            rates[variant] = physics_steps / wall
            rates[f"{variant}_cpu"] = physics_steps / cpu
            replay_matches &= bool(np.array_equal(qpos, recording.final_qpos))
        per_round.append(rates)
    state_env.close()
    full_env.close()

    def median(variant: str) -> float:
        return statistics.median(r[variant] for r in per_round)

    ratios = [r["env"] / r["raw"] for r in per_round]
    cpu_ratios = [r["env_cpu"] / r["raw_cpu"] for r in per_round]
    return {
        "task": task,
        "object": target,
        "seed": SEED,
        "expert_success": recording.success,
        "control_steps": len(recording.actions),
        "physics_steps": physics_steps,
        "substeps": SUBSTEPS,
        "timestep_s": timestep,
        "env_steps_per_s": median("env"),
        "raw_steps_per_s": median("raw"),
        "env_over_raw": statistics.median(ratios),
        "env_over_raw_per_round": ratios,
        "env_over_raw_cpu_time": statistics.median(cpu_ratios),
        "real_time_factor_state": median("env") * timestep,
        "real_time_factor_full": median("full") * timestep,
        "full_steps_per_s": median("full"),
        "full_image_size": FULL_IMAGE_SIZE,
        "replay_matches_recording": replay_matches,
        "rounds": per_round,
    }


def bench_layouts() -> dict:
    """Wall seconds of drawing a clutter layout (the slide-in and its checks), per tier."""
    from simroll.envs.clutter.layout import TIERS, generate_layout

    out = {}
    for tier in TIERS:
        seconds, attempts = [], []
        for seed in range(LAYOUT_SEEDS):
            start = time.perf_counter()
            layout = generate_layout(np.random.default_rng(seed), CLUTTER_TARGET, tier)
            seconds.append(time.perf_counter() - start)
            attempts.append(layout.attempts)
        out[tier] = {
            "seeds": LAYOUT_SEEDS,
            "median_s": statistics.median(seconds),
            "max_s": max(seconds),
            "mean_attempts": statistics.mean(attempts),
        }
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine_info() -> dict:
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_available": len(os.sched_getaffinity(0)),
        "load_average_at_start": list(os.getloadavg()),
        "python": sys.version.split()[0],
        "mujoco": mujoco.__version__,
        "numpy": np.__version__,
        "gymnasium": gym.__version__,
        "mujoco_gl": os.environ.get("MUJOCO_GL"),
        "threads": {
            key: os.environ.get(key)
            for key in (
                "OMP_NUM_THREADS",
                "OPENBLAS_NUM_THREADS",
                "MKL_NUM_THREADS",
                "LP_NUM_THREADS",
            )
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    machine = machine_info()
    results = [bench_task(task, args.rounds) for task in (*TASKS, CLUTTER_TASK)]
    layouts = bench_layouts()
    machine["load_average_at_end"] = list(os.getloadavg())
    write_json_atomic(
        args.out,
        {"machine": machine, "rounds": args.rounds, "tasks": results, "clutter_layouts": layouts},
    )

    print(
        f"{'task':<12} {'ctrl steps':>10} {'env st/s':>9} {'raw st/s':>9} {'env/raw':>8} "
        f"{'RTF state':>9} {'RTF full':>9}"
    )
    for row in results:
        print(
            f"{row['task']:<12} {row['control_steps']:>10} {row['env_steps_per_s']:>9.0f} "
            f"{row['raw_steps_per_s']:>9.0f} {row['env_over_raw']:>8.3f} "
            f"{row['real_time_factor_state']:>9.2f} {row['real_time_factor_full']:>9.2f}"
        )
    for tier, row in layouts.items():
        print(
            f"clutter {tier} layouts: median {row['median_s']:.3f} s, max {row['max_s']:.3f} s "
            f"over {row['seeds']} seeds (mean draws {row['mean_attempts']:.2f})"
        )
    mismatched = [row["task"] for row in results if not row["replay_matches_recording"]]
    if mismatched:
        print(f"replays did not reproduce the recorded episode: {mismatched}")
    print(f"wrote {args.out}")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
