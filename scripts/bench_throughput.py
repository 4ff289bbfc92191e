"""Evaluation throughput of the shipped SimVLA with rendering on, and where its time goes.

Writes ``benchmarks/results/throughput.json`` (atomically) and ``throughput_profile.txt``.

Throughput (``--only throughput``): the same work run as users run it, interleaved in one run so
that machine load hits every variant alike (``--rounds`` repeats the whole set, alternating its
order): policy ``vla`` (``policies/vla_soft``: two 64 px cameras + touch, ``obs_mode=full`` from
its ``simroll_env.json``, rendering on) on SoftLift/sponge, ``--episodes`` episodes (24):

* ``simroll eval`` with ``backend=local`` and with ``backend=vector backend.workers=2``
  (``video.episodes=0``: no video re-runs after the evaluation);
* LeRobot's ``lerobot-eval --env.type=simroll`` (our plugin ``lerobot_env_simroll``) on the same
  task, object, image size, gripper mode and observations (``--env.tactile_image=false``: the
  policy does not read the tactile image), ``--eval.batch_size=2``; LeRobot's own defaults
  otherwise (async envs, videos of its first 10 episodes);
* the two ``simroll eval`` runs again with ``SIMROLL_FAST_PATHS=0`` (the optimizations off:
  eager rendering, full-size framebuffers, a policy load per episode, no worker thread limits),
  unless ``--no-reference``.

Each figure is episodes per minute of the command's wall time (start-up included). The records of
every ``simroll eval`` run must have equal receipts spec by spec (``receipts_equal``): the
optimizations must not change any episode. LeRobot's episodes use LeRobot's seeds, so only its
rate is compared.

Profile (``--only profile``): per-step CPU and wall milliseconds of each part of an episode
(``mj_step`` physics, scene capture, rendering per camera, tactile, evaluation, observation
building, the policy's network and the rest of ``select_action``, the engine), measured by
wrapping those functions in-process: ``--profile-episodes`` local episodes after a warm-up
one, and a ``vector`` run with 2 workers (each worker's own breakdown, its first episode left
out), with the fast paths on and off. CPU time (``process_time``: all threads of the process) is
the robust figure on a shared machine; wall time includes waiting for a core.

Run: ``python scripts/bench_throughput.py`` on a quiet machine (about 10 minutes on 2 cores with
24 episodes), or ``--episodes 4`` for a quick check. Needs ``MUJOCO_GL=egl`` (set if unset) and,
for the LeRobot figure, ``lerobot-eval`` beside this Python (``--no-lerobot`` skips it).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OUT = RESULTS / "throughput.json"
PROFILE_TXT = RESULTS / "throughput_profile.txt"
CHECKPOINT = "policies/vla_soft"
TASK, OBJECT, IMAGE_SIZE, GRIPPER = "SoftLift", "sponge", 64, "delta"
FAST_VAR = "SIMROLL_FAST_PATHS"


def child_env(fast: bool = True) -> dict[str, str]:
    """The environment of a measured command: this one, with the repository and its plugins on
    the path, offline, and the fast paths on or off."""
    env = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "plugins/lerobot_env_simroll")]
    paths.append(str(ROOT / "plugins/lerobot_policy_simvla"))
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["HF_HUB_OFFLINE"] = "1"
    env.setdefault("MUJOCO_GL", "egl")
    env[FAST_VAR] = "1" if fast else "0"
    return env


# ============================================================================ profile
class Sections:
    """Exclusive wall and CPU time per named section (a child's time is not its parent's)."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list[float]] = []
        self.camera = "?"

    def wrap(self, name, function):
        """``function`` timed under ``name`` (a string, or a callable of its arguments)."""

        @functools.wraps(function)
        def timed(*args, **kwargs):
            label = name(*args, **kwargs) if callable(name) else name
            self._stack.append([0.0, 0.0])
            wall0, cpu0 = time.perf_counter(), time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
                child_wall, child_cpu = self._stack.pop()
                self.wall[label] += wall - child_wall
                self.cpu[label] += cpu - child_cpu
                self.calls[label] += 1
                if self._stack:
                    self._stack[-1][0] += wall
                    self._stack[-1][1] += cpu

        return timed

    def snapshot(self) -> dict[str, dict[str, float]]:
        return {
            name: {"wall_s": self.wall[name], "cpu_s": self.cpu[name], "calls": self.calls[name]}
            for name in self.wall
        }


SECTIONS = Sections()
_INSTALLED = False


def install_profiler() -> Sections:
    """Wrap the functions an episode spends its time in (once per process)."""
    global _INSTALLED
    if _INSTALLED:
        return SECTIONS
    _INSTALLED = True
    import mujoco

    from simroll.envs import core, sensing
    from simroll.envs.deformation import RestShape
    from simroll.policies import lerobot as lerobot_policy
    from simroll.policies.vla.modeling_simvla import SimVLAPolicy
    from simroll.rollout import backends, episode

    s = SECTIONS
    in_reset = {"active": False}
    mujoco_step = mujoco.mj_step
    mujoco.mj_step = s.wrap(
        lambda *a: "physics: mj_step (reset settle)" if in_reset["active"] else "physics: mj_step",
        mujoco_step,
    )
    reset = core.SoftTaskEnv.reset

    def reset_marked(self, *args, **kwargs):
        in_reset["active"] = True
        try:
            return reset(self, *args, **kwargs)
        finally:
            in_reset["active"] = False

    core.SoftTaskEnv.reset = s.wrap("env: reset (placing, mj_forward)", reset_marked)
    core.SoftTaskEnv.step = s.wrap("env: step (control, checks, info)", core.SoftTaskEnv.step)
    core.SoftTaskEnv._observation = s.wrap(
        "env: observation building", core.SoftTaskEnv._observation
    )
    core.SoftTaskEnv._step_eval = s.wrap(
        "env: evaluation (success, bookkeeping)", core.SoftTaskEnv._step_eval
    )
    RestShape.deformation = s.wrap("env: deformation measure", RestShape.deformation)
    sensing.TactileSensor.read = s.wrap(
        "tactile: contacts -> taxels, markers", sensing.TactileSensor.read
    )
    sensing.CameraRig.capture = s.wrap(
        "render: scene capture (mjv_updateScene)", sensing.CameraRig.capture
    )

    update_scene = sensing._SceneRenderer.update_scene

    def update_named(self, data, camera=-1, scene_option=None):
        s.camera = str(camera)
        return update_scene(self, data, camera=camera, scene_option=scene_option)

    sensing._SceneRenderer.update_scene = s.wrap(
        "render: scene capture (mjv_updateScene)", update_named
    )
    sensing._SceneRenderer.render = s.wrap(
        lambda *a, **k: f"render: camera {s.camera} (mjr_render + readPixels)",
        sensing._SceneRenderer.render,
    )
    render_captured = sensing.CameraRig._render_captured

    def render_captured_named(self, images, camera):
        s.camera = camera
        return render_captured(self, images, camera)

    sensing.CameraRig._render_captured = render_captured_named
    SimVLAPolicy.predict_action_chunk = s.wrap(
        "policy: network (predict_action_chunk)", SimVLAPolicy.predict_action_chunk
    )
    lerobot_policy.LeRobotPolicy.select_action = s.wrap(
        "policy: select_action other (obs -> batch, pre/post)",
        lerobot_policy.LeRobotPolicy.select_action,
    )
    lerobot_policy.load_policy = s.wrap("policy: load (per episode)", lerobot_policy.load_policy)
    episode.run_episode = s.wrap("engine: run_episode other", episode.run_episode)
    backends.run_episode = episode.run_episode
    return s


class ProfiledFactory:
    """A picklable SimVLA factory that installs the profiler in whatever process builds it and
    writes that process's sections to ``out_dir`` when the process exits."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir

    def __call__(self, env):
        global _WORKER_STATE
        sections = install_profiler()
        from simroll.policies import lerobot as lerobot_policy

        if _WORKER_STATE is None:
            from multiprocessing import util

            from simroll.rollout.threads import thread_report

            _WORKER_STATE = {"episodes": 0, "after_first": None}
            path = Path(self.out_dir) / f"worker-{os.getpid()}.json"

            def dump() -> None:
                path.write_text(
                    json.dumps(
                        {
                            "total": sections.snapshot(),
                            "after_first": _WORKER_STATE["after_first"],
                            "episodes": _WORKER_STATE["episodes"],
                            "threads": thread_report(),
                        }
                    )
                )

            util.Finalize(None, dump, exitpriority=10)
        elif _WORKER_STATE["after_first"] is None:
            _WORKER_STATE["after_first"] = sections.snapshot()
        _WORKER_STATE["episodes"] += 1
        return lerobot_policy.load_policy(env, CHECKPOINT)


_WORKER_STATE: dict[str, Any] | None = None


def _difference(total: dict, before: dict | None) -> dict:
    before = before or {}
    out = {}
    for name, value in total.items():
        prior = before.get(name, {"wall_s": 0.0, "cpu_s": 0.0, "calls": 0})
        out[name] = {key: value[key] - prior[key] for key in ("wall_s", "cpu_s", "calls")}
    return out


def profile_run(mode: str, episodes: int) -> dict:
    """Run in a child process (``_profile`` sub-command): profile ``episodes`` episodes."""
    from simroll.envs.core import SoftTaskEnv  # noqa: F401 - imported before the profiler
    from simroll.rollout import episode
    from simroll.rollout.backends import EpisodeJob, run_backend
    from simroll.rollout.episode import EnvConfig, EnvPool
    from simroll.rollout.runner import make_specs
    from simroll.rollout.threads import thread_report

    env_config = EnvConfig(obs_mode="full", image_size=IMAGE_SIZE, gripper_mode=GRIPPER)
    with tempfile.TemporaryDirectory() as scratch:
        factory = ProfiledFactory(scratch)
        job = EpisodeJob(factory, env_config, "vla", "bench")
        if mode == "local":
            # as the local backend runs them, in one env; a warm-up episode first (GL context,
            # policy load, imports), left out
            warm, *specs = make_specs("soft", [TASK], [OBJECT], ["default"], episodes + 1)
            sections = install_profiler()
            pool = EnvPool(env_config)
            try:
                episode.run_episode(warm, factory, env=pool.get(warm))
                before = sections.snapshot()
                wall0 = time.perf_counter()
                records = [episode.run_episode(s, factory, env=pool.get(s)) for s in specs]
            finally:
                pool.close()
            measured = {
                "workers": [
                    {
                        "sections": _difference(sections.snapshot(), before),
                        "threads": thread_report(),
                    }
                ],
                "wall_s": time.perf_counter() - wall0,
            }
        else:
            # two workers, each its first episode left out: 2 + 2 * episodes specs
            specs = make_specs("soft", [TASK], [OBJECT], ["default"], 2 * episodes + 2)
            wall0 = time.perf_counter()
            records = list(run_backend("vector", job, specs, workers=2))
            wall = time.perf_counter() - wall0
            workers = []
            for path in sorted(Path(scratch).glob("worker-*.json")):
                data = json.loads(path.read_text())
                workers.append(
                    {
                        "sections": _difference(data["total"], data["after_first"]),
                        "episodes": data["episodes"] - 1,
                        "threads": data["threads"],
                    }
                )
            measured = {"workers": workers, "wall_s": wall}
    measured["steps"] = sum(r.steps for r in records)
    measured["episodes"] = len(records)
    measured["errors"] = [r.error for r in records if r.error]
    return measured


def steps_of(sections: dict) -> int:
    return int(sections.get("env: step (control, checks, info)", {}).get("calls", 0))


GROUPS = (
    ("physics", ("physics: mj_step",)),
    ("rendering", ("render:",)),
    ("tactile", ("tactile:",)),
    ("policy", ("policy: network", "policy: select_action")),
)


def summarize(sections: dict) -> dict:
    """Per-step ms of every section and of the groups (physics, rendering, tactile, policy)."""
    steps = max(1, steps_of(sections))
    total_cpu = sum(v["cpu_s"] for v in sections.values()) or 1.0
    rows = {
        name: {
            "cpu_ms_per_step": 1000 * v["cpu_s"] / steps,
            "wall_ms_per_step": 1000 * v["wall_s"] / steps,
            "calls_per_step": v["calls"] / steps,
            "cpu_share": v["cpu_s"] / total_cpu,
        }
        for name, v in sorted(sections.items(), key=lambda item: -item[1]["cpu_s"])
    }
    groups = {}
    for group, prefixes in GROUPS:
        chosen = [v for n, v in sections.items() if n.startswith(prefixes)]
        groups[group] = {
            "cpu_ms_per_step": 1000 * sum(v["cpu_s"] for v in chosen) / steps,
            "wall_ms_per_step": 1000 * sum(v["wall_s"] for v in chosen) / steps,
            "cpu_share": sum(v["cpu_s"] for v in chosen) / total_cpu,
        }
    bound = max(groups, key=lambda g: groups[g]["cpu_ms_per_step"])
    return {
        "steps": steps,
        "cpu_ms_per_step": 1000 * total_cpu / steps,
        "sections": rows,
        "groups": groups,
        "largest_part": bound,
    }


def run_profiles(episodes: int) -> dict:
    profiles = {}
    for fast in (True, False):
        for mode in ("local", "vector"):
            label = f"{mode}, fast paths {'on' if fast else 'off'}"
            print(f"profile: {label} ...", flush=True)
            result = subprocess.run(
                [sys.executable, __file__, "_profile", mode, str(episodes)],
                env=child_env(fast),
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            if result.returncode != 0:
                raise RuntimeError(f"profile {label} failed:\n{result.stderr[-3000:]}")
            data = json.loads(result.stdout.strip().splitlines()[-1])
            data["workers"] = [
                {**worker, "summary": summarize(worker["sections"])} for worker in data["workers"]
            ]
            profiles[label] = data
    return profiles


def profile_text(profiles: dict, meta: dict) -> str:
    lines = [
        "SimVLA (policies/vla_soft, 64 px scene + wrist cameras, touch) on SoftLift/sponge:",
        "exclusive time per control step (25 x 2 ms physics steps), by part.",
        "cpu = process CPU time (all threads), wall = elapsed; shares are of the CPU total.",
        f"machine: {meta['cpus']} cores, load average {meta['load_average_1min']:.2f} at start; "
        f"{meta['date']}; scripts/bench_throughput.py --only profile",
        "",
    ]
    for label, data in profiles.items():
        for index, worker in enumerate(data["workers"]):
            summary = worker["summary"]
            who = "local process" if label.startswith("local") else f"vector worker {index + 1}/2"
            lines.append(
                f"== {label}: {who}, {summary['steps']} steps, "
                f"{summary['cpu_ms_per_step']:.1f} ms CPU per step; threads {worker['threads']}"
            )
            lines.append(f"{'part':58s} {'cpu ms':>8s} {'wall ms':>8s} {'calls':>6s} {'share':>6s}")
            for name, row in summary["sections"].items():
                lines.append(
                    f"{name:58s} {row['cpu_ms_per_step']:8.2f} {row['wall_ms_per_step']:8.2f} "
                    f"{row['calls_per_step']:6.2f} {100 * row['cpu_share']:5.1f}%"
                )
            groups = ", ".join(
                f"{g} {v['cpu_ms_per_step']:.1f} ms ({100 * v['cpu_share']:.0f}%)"
                for g, v in summary["groups"].items()
            )
            lines.append(f"groups (cpu per step): {groups}; largest: {summary['largest_part']}")
            lines.append("")
    return "\n".join(lines)


# ============================================================================ throughput
def read_records(run_dir: Path) -> tuple[dict[str, str], dict[str, float]]:
    """Receipt per spec key, and the run's step and episode-wall totals."""
    out, steps, episode_wall = {}, 0, 0.0
    for line in (run_dir / "records.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            spec = row["spec"]
            key = f"{spec['task']}/{spec['object']}/{spec['variation']}/{spec['index']}"
            out[key] = row["receipt"]
            steps += row["steps"]
            episode_wall += row["measurements"]["episode_wall_s"]
    return out, {"steps": steps, "sum_episode_wall_s": episode_wall}


def run_command(name: str, command: list[str], env: dict[str, str], log: Path) -> float:
    print(f"run: {name} ...", flush=True)
    start = time.perf_counter()
    with log.open("w") as handle:
        result = subprocess.run(command, env=env, stdout=handle, stderr=subprocess.STDOUT, cwd=ROOT)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(
            f"{name} exited {result.returncode}; see {log}:\n{log.read_text()[-3000:]}"
        )
    print(f"     {wall:.1f} s", flush=True)
    return wall


def simroll_command(output: Path, episodes: int, backend: str) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "simroll.cli.main",
        "eval",
        "policy=vla",
        "env=soft_lift",
        f"env.objects=[{OBJECT}]",
        f"episodes={episodes}",
        "video.episodes=0",
        "progress=false",
        f"output_dir={output}",
    ]
    if backend == "vector":
        command += ["backend=vector", "backend.workers=2"]
    return command


def lerobot_command(output: Path, episodes: int) -> list[str]:
    script = Path(sys.executable).with_name("lerobot-eval")
    tool = (
        [str(script)] if script.exists() else [sys.executable, "-m", "lerobot.scripts.lerobot_eval"]
    )
    return tool + [
        "--env.type=simroll",
        f"--env.task={TASK}-v0",
        f"--env.object={OBJECT}",
        f"--env.image_size={IMAGE_SIZE}",
        f"--env.gripper_mode={GRIPPER}",
        "--env.obs_type=pixels_agent_pos",
        "--env.tactile_image=false",
        f"--policy.path={CHECKPOINT}",
        "--policy.device=cpu",
        "--eval.batch_size=2",
        f"--eval.n_episodes={episodes}",
        f"--output_dir={output}",
    ]


def run_throughput(
    episodes: int, rounds: int, lerobot: bool, reference: bool, scratch: Path
) -> dict:
    variants = [("simroll_local", "local", True), ("simroll_vector_2", "vector", True)]
    if lerobot:
        variants.append(("lerobot_eval_batch_2", None, True))
    if reference:
        variants += [("reference_local", "local", False), ("reference_vector_2", "vector", False)]
    walls: dict[str, list[float]] = defaultdict(list)
    totals: dict[str, list[dict[str, float]]] = defaultdict(list)
    outcome_receipts: dict[str, dict[str, str]] = {}
    lerobot_info: dict[str, Any] = {}
    for round_index in range(rounds):
        order = variants if round_index % 2 == 0 else variants[::-1]
        for name, backend, fast in order:
            output = scratch / f"{name}_{round_index}"
            log = scratch / f"{name}_{round_index}.log"
            if backend is None:
                command = lerobot_command(output, episodes)
            else:
                command = simroll_command(output, episodes, backend)
            walls[name].append(run_command(name, command, child_env(fast), log))
            if backend is not None:
                run_receipts, run_totals = read_records(output)
                outcome_receipts.setdefault(name, run_receipts)
                totals[name].append(run_totals)
            else:
                overall = json.loads((output / "eval_info.json").read_text()).get("overall", {})
                lerobot_info = {
                    "pc_success": overall.get("pc_success"),
                    "n_episodes": overall.get("n_episodes"),
                    # LeRobot's own rollout time (its episodes, no start-up)
                    "eval_s": overall.get("eval_s"),
                }
    figures = {}
    for name, values in walls.items():
        best = min(values)
        figures[name] = {
            "wall_s": values,
            "episodes_per_min": [60 * episodes / value for value in values],
            "episodes_per_min_best": 60 * episodes / best,
            "episodes_per_min_median": 60 * episodes / statistics.median(values),
        }
        if totals.get(name):
            # sum of the episodes' own wall times (run_episode, one worker's view): with the
            # command's wall, how much was start-up and reporting (exactly so for local)
            figures[name]["steps"] = totals[name][0]["steps"]
            figures[name]["sum_episode_wall_s"] = [t["sum_episode_wall_s"] for t in totals[name]]
    rate = {name: value["episodes_per_min_best"] for name, value in figures.items()}
    ratios = {"vector_over_local": rate["simroll_vector_2"] / rate["simroll_local"]}
    best_simroll = max(rate["simroll_local"], rate["simroll_vector_2"])
    if "lerobot_eval_batch_2" in rate:
        ratios["simroll_best_over_lerobot_eval"] = best_simroll / rate["lerobot_eval_batch_2"]
    if reference:
        ratios["reference_vector_over_local"] = rate["reference_vector_2"] / rate["reference_local"]
        ratios["local_speedup_over_reference"] = rate["simroll_local"] / rate["reference_local"]
        ratios["vector_speedup_over_reference"] = (
            rate["simroll_vector_2"] / rate["reference_vector_2"]
        )
    first = next(iter(outcome_receipts.values()))
    equal = {name: values == first for name, values in outcome_receipts.items()}
    return {
        "episodes": episodes,
        "rounds": rounds,
        "figures": figures,
        "ratios": ratios,
        "receipts_equal": all(equal.values()) and len(first) == episodes,
        "receipts_equal_per_run": equal,
        "receipts_compared": len(first),
        "lerobot_eval": lerobot_info,
        "goals": {
            "simroll_best_episodes_per_min": 40,
            "vector_over_local": 1.8,
            "simroll_best_over_lerobot_eval": 2.0,
        },
        "commands": {
            "simroll_local": " ".join(simroll_command(Path("<dir>"), episodes, "local")[1:]),
            "simroll_vector_2": " ".join(simroll_command(Path("<dir>"), episodes, "vector")[1:]),
            "lerobot_eval_batch_2": " ".join(lerobot_command(Path("<dir>"), episodes)[1:]),
            "reference": f"the simroll commands with {FAST_VAR}=0",
        },
    }


# ============================================================================ main
def machine_info() -> dict:
    import mujoco
    import torch

    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "mujoco": mujoco.__version__,
        "torch": torch.__version__,
        "torch_threads_default": torch.get_num_threads(),
        "torch_threads_in_workers": 1,
        "env": {
            name: os.environ.get(name)
            for name in ("MUJOCO_GL", "LP_NUM_THREADS", "OMP_NUM_THREADS", FAST_VAR)
        },
        "load_average_1min": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_profile":  # child process of run_profiles
        print(json.dumps(profile_run(sys.argv[2], int(sys.argv[3]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--profile-episodes", type=int, default=2)
    parser.add_argument("--only", choices=("throughput", "profile"), default=None)
    parser.add_argument("--no-lerobot", action="store_true", help="skip lerobot-eval")
    parser.add_argument("--no-reference", action="store_true", help="skip the fast-paths-off runs")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    result = json.loads(args.out.read_text()) if args.only and args.out.exists() else {}
    meta = machine_info()
    result["machine"] = meta
    if args.only in (None, "profile"):
        profiles = run_profiles(args.profile_episodes)
        text = profile_text(profiles, meta)
        RESULTS.mkdir(parents=True, exist_ok=True)
        from simroll.rollout.store import write_text_atomic

        write_text_atomic(args.out.with_name(PROFILE_TXT.name), text + "\n")
        result["profile"] = {
            label: {
                "wall_s": data["wall_s"],
                "steps": data["steps"],
                "episodes": data["episodes"],
                "workers": [{"threads": w["threads"], **w["summary"]} for w in data["workers"]],
            }
            for label, data in profiles.items()
        }
        result["profile"]["date"] = meta["date"]
        print(text)
    if args.only in (None, "throughput"):
        with tempfile.TemporaryDirectory(prefix="bench_throughput_") as scratch:
            result["throughput"] = run_throughput(
                args.episodes,
                args.rounds,
                lerobot=not args.no_lerobot,
                reference=not args.no_reference,
                scratch=Path(scratch),
            )
        result["throughput"]["date"] = meta["date"]
        result["throughput"]["load_average_1min_end"] = os.getloadavg()[0]
        result["throughput"]["command"] = "python " + " ".join(
            [Path(__file__).relative_to(ROOT).as_posix(), *sys.argv[1:]]
        )
    from simroll.rollout.store import write_json_atomic

    write_json_atomic(args.out, result)
    summary = result.get("throughput", {})
    print(
        json.dumps({k: summary.get(k) for k in ("figures", "ratios", "receipts_equal")}, indent=2)
    )


if __name__ == "__main__":
    main()
