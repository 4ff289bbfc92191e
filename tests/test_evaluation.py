"""``simroll.evaluate``, the library API: one pass per episode (videos and the dataset come from
the scored episodes, on every backend, at no extra episode), the stored records of a stochastic
policy's dataset and videos equal the scored ones, a resume records what it lacks, and the
library gives the receipts ``simroll eval`` gives."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simroll.evaluation import choose_video_specs, evaluate
from simroll.rollout.dataset import episode_record, load_episode_meta
from simroll.rollout.episode import EnvConfig
from simroll.rollout.manifest import ManifestError
from simroll.rollout.runner import make_specs
from simroll.rollout.settings import CHECKPOINT_LOADER, ConfigError, apply_checkpoint_env
from simroll.rollout.store import RecordStore
from simroll.rollout.video import video_name, video_receipt
from tests.cli.test_run_dir import eval_in_process

STEPS = 6  # short, time-limited episodes: recording is what these tests are about
SHORT = EnvConfig(gripper_mode="delta", kwargs={"max_episode_steps": STEPS})


class RandomPolicy:
    """Random actions. ``repeatable``: drawn from torch's global generator, which
    ``run_episode`` seeds per spec (as diffusion and flow policies sample); otherwise from the
    OS's entropy, so that no two runs of an episode agree. Its ``network_evaluations`` count
    (a sum of draws) puts the draws into the record's receipt."""

    def __init__(self, env, repeatable: bool = False):
        import torch

        self.torch = torch
        self.repeatable = repeatable
        self.rng = np.random.default_rng()
        self.network_evaluations = 0

    def reset(self):
        pass

    def select_action(self, obs):
        if self.repeatable:
            draw = self.torch.rand(6).numpy()
        else:
            draw = self.rng.random(6)
        self.network_evaluations += int(draw[5] * 1000)
        return (2 * draw[:5] - 1).astype(np.float32)


def run(tmp_path, policy, **kwargs):
    settings = {
        "tasks": ["SoftLift"],
        "objects": ["sponge", "tofu"],
        "episodes": 1,
        "env": SHORT,
        "output_dir": tmp_path,
        "progress": False,
        **kwargs,
    }
    return evaluate(policy, **settings)


def assert_recorded_records_are_the_scored_ones(result, videos: int) -> None:
    stored = RecordStore(result.run_dir).load().records
    stored = {key: record.receipt for key, record in stored.items()}
    assert result.receipts == stored
    rows = load_episode_meta(result.dataset)
    assert [row["spec_key"] for _, row in sorted(rows.items())] == [
        record.spec.key for record in result.records
    ]
    for index, record in enumerate(result.records):
        assert episode_record(rows[index]).receipt == record.receipt
        assert rows[index]["frames"] == record.steps == STEPS
    assert len(result.videos) == videos
    by_name = {video_name(record.spec): record for record in result.records}
    for path in result.videos:
        assert video_receipt(path) == by_name[path.name].receipt


@pytest.mark.parametrize("backend", ["local", "vector"])
def test_videos_and_dataset_come_from_the_scored_episodes_at_no_extra_episode(tmp_path, backend):
    unrepeatable = functools.partial(RandomPolicy, repeatable=False)
    result = run(tmp_path, unrepeatable, backend=backend, workers=2, videos=1, record=True)
    assert result.episodes_run == len(result.records) == 2 and result.errors == 0
    assert json.loads((tmp_path / "summary.json").read_text())["episodes_run"] == 2
    # a re-run would have drawn other actions: equal receipts mean the scored episode itself
    assert_recorded_records_are_the_scored_ones(result, videos=1)
    assert result.videos[0].name.startswith("soft_SoftLift_sponge_default_0_")


@pytest.mark.slow  # Ray's start-up costs ~20 s
def test_ray_records_videos_and_dataset_at_no_extra_episode(tmp_path):
    pytest.importorskip("ray", reason="the ray extra is not installed")
    unrepeatable = functools.partial(RandomPolicy, repeatable=False)
    result = run(tmp_path, unrepeatable, backend="ray", workers=2, videos=2, record=True)
    assert result.episodes_run == 2 and result.errors == 0
    assert_recorded_records_are_the_scored_ones(result, videos=2)


def test_a_resume_records_the_finished_episodes_it_lacks_once(tmp_path, capsys):
    policy = functools.partial(RandomPolicy, repeatable=True)
    first = run(tmp_path, policy)
    assert first.episodes_run == 2 and first.dataset is None and not first.videos
    resumed = run(tmp_path, policy, record=True, videos=1, progress=True)
    assert "2 finished episode(s) have no video or dataset shard yet" in capsys.readouterr().out
    assert resumed.episodes_run == 2  # the re-runs to record them, counted
    assert resumed.receipts == first.receipts  # seeded per spec: the re-run is the same episode
    assert_recorded_records_are_the_scored_ones(resumed, videos=1)
    again = run(tmp_path, policy, record=True, videos=1)
    assert again.episodes_run == 0 and again.receipts == first.receipts
    assert len(RecordStore(tmp_path).path.read_text().splitlines()) == 2  # nothing stored twice


def test_recording_into_a_run_of_another_frame_layout_is_refused(tmp_path):
    policy = functools.partial(RandomPolicy, repeatable=True)
    layout = ["observation.state"]
    first = run(tmp_path, policy, record=True, record_features=layout)
    assert (
        "observation.environment_state"
        not in json.loads((first.dataset / "meta" / "info.json").read_text())["features"]
    )
    with pytest.raises(ManifestError, match=r"record_features \['observation.state'\] -> None"):
        run(tmp_path, policy, record=True)  # its finished episodes would keep the old frames
    again = run(tmp_path, policy, record=True, record_features=layout)
    assert again.episodes_run == 0 and again.receipts == first.receipts
    assert run(tmp_path, policy).episodes_run == 0  # scoring alone records nothing: allowed


def test_videos_are_chosen_from_the_specs_one_group_at_a_time():
    specs = make_specs("soft", ["SoftLift", "SoftSqueeze"], ["sponge", "tofu"], ["default"], 3)
    chosen = choose_video_specs(specs, 5)
    assert [(s.task, s.object, s.index) for s in chosen] == [
        ("SoftLift", "sponge", 0),
        ("SoftLift", "tofu", 0),
        ("SoftSqueeze", "sponge", 0),
        ("SoftSqueeze", "tofu", 0),
        ("SoftLift", "sponge", 1),
    ]
    assert choose_video_specs(specs, 0) == []
    everything = choose_video_specs(specs, 100)
    assert len(everything) == len(specs) and set(everything) == set(specs)


def test_library_and_cli_give_the_same_receipts_and_import_simroll_stays_light(tmp_path):
    eval_in_process(
        "env=soft_lift",
        "env.objects=[sponge]",
        "episodes=1",
        "video.episodes=0",
        "progress=false",
        f"output_dir={tmp_path / 'cli'}",
    )
    code = (
        "import sys, simroll\n"
        "assert 'simroll.evaluation' not in sys.modules and 'mujoco' not in sys.modules\n"
        "r = simroll.evaluate('expert', tasks=['SoftLift'], objects=['sponge'], episodes=1, "
        f"output_dir={str(tmp_path / 'lib')!r}, progress=False)\n"
        "print(repr(r))\n"
        "print('RECEIPTS', *(rec.receipt for rec in r.records))\n"
    )
    lib = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert lib.returncode == 0, lib.stdout[-3000:] + lib.stderr[-3000:]
    printed = lib.stdout.split("RECEIPTS", 1)[1].split()
    cli_records = RecordStore(tmp_path / "cli").load().records.values()
    assert printed == [record.receipt for record in cli_records]
    assert "RunResult(run_dir=" in lib.stdout and "SoftLift: TSR 1.00" in lib.stdout
    groups = [
        [
            {key: value for key, value in group.items() if key != "compute_per_call_s"}
            for group in json.loads((tmp_path / run / "summary.json").read_text())["groups"]
        ]
        for run in ("cli", "lib")
    ]
    assert groups[0] == groups[1]
    manifests = [json.loads((tmp_path / d / "manifest.json").read_text()) for d in ("cli", "lib")]
    assert manifests[0]["fingerprint"] == manifests[1]["fingerprint"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"tasks": ["SoftFly"]}, "tasks: unknown value 'SoftFly'"),
        ({"objects": ["brick"]}, "objects: unknown value 'brick'"),
        ({"episodes": 0}, "episodes must be an integer >= 1, got 0"),
        ({"backend": "cloud"}, "backend: unknown value 'cloud'"),
        ({"videos": -1}, "videos must be an integer >= 0, got -1"),
        ({"obs_mode": "pixels"}, "obs_mode: unknown value 'pixels'"),
        ({"policy_latency_s": "fast"}, "policy_latency_s must be null, 'measured' or seconds"),
        (
            {"tasks": ["ClutterRetrieveEasy"], "objects": ["cube"], "control_delay_steps": 1},
            "take one primitive per step",
        ),
        (
            {"tasks": ["ClutterRetrieveHard"], "objects": ["cube"], "policy_latency_s": "measured"},
            "set control_delay_steps=0 and policy_latency_s=null",
        ),
    ],
)
def test_bad_arguments_are_refused_naming_them_before_any_episode(tmp_path, arguments, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        evaluate("expert", output_dir=tmp_path / "run", **arguments)
    assert not (tmp_path / "run").exists()


def test_a_checkpoints_env_settings_apply_unless_passed_and_a_contradiction_is_refused(tmp_path):
    vla = {"_target_": CHECKPOINT_LOADER, "_partial_": True, "path": "policies/vla_soft"}
    defaults = {"obs_mode": "state", "image_size": 96, "gripper_mode": "delta"}
    settings, notes = apply_checkpoint_env(defaults, vla, explicit=set())
    assert (settings["obs_mode"], settings["image_size"]) == ("full", 64)
    assert "simroll_env.json" in notes[0]
    with pytest.raises(ConfigError, match=r"image_size=96 contradicts .*simroll_env.json"):
        evaluate("policies/vla_soft", image_size=96, output_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_an_ensembles_members_env_settings_apply_and_must_agree(tmp_path):
    """A checkpoint ensemble takes its members' recorded env settings; members trained with
    different settings are refused, naming both records."""
    import shutil

    member = {"_target_": CHECKPOINT_LOADER, "_partial_": True, "path": "policies/vla_soft"}
    ensemble = {
        "_target_": "simroll.policies.ensemble.ensemble_policy",
        "members": [member, {"_target_": "simroll.experts.SoftExpert"}, member],
    }
    defaults = {"obs_mode": "state", "image_size": 96, "gripper_mode": "delta"}
    settings, notes = apply_checkpoint_env(defaults, ensemble, explicit=set())
    assert (settings["obs_mode"], settings["image_size"]) == ("full", 64)
    assert "vla_soft/simroll_env.json" in notes[0]

    shipped = Path(__file__).resolve().parents[1] / "policies" / "vla_soft"
    other = Path(shutil.copytree(shipped, tmp_path / "other"))
    record = json.loads((other / "simroll_env.json").read_text())
    (other / "simroll_env.json").write_text(json.dumps({**record, "image_size": 96}))
    ensemble["members"][2] = {**member, "path": str(other)}
    with pytest.raises(ConfigError, match=r"different env settings: .*vla_soft.* .*other"):
        apply_checkpoint_env(defaults, ensemble, explicit=set())
