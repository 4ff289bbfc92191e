"""The commands' config schemas (simroll/cli/schema.py): an unknown key or a wrong type fails before
anything runs, naming the key, while every shipped config and every documented override composes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from simroll.cli.schema import SCHEMAS, RejectUnknownKeys, unknown_keys
from tests.helpers import simroll

CONFIG_DIR = Path(__file__).resolve().parents[2] / "simroll" / "_data" / "configs"
# config name -> the command whose schema it uses
CONFIGS = {
    "eval": "eval",
    "collect": "collect",
    "certify": "certify",
    "certify_diffusion": "certify",
    "certify_diffusion_noise": "certify",
    "certify_vla": "certify",
    "certify_vla_ensemble": "certify",
    "certify_wam": "certify",
    "train": "train",
    "roundtrip": "roundtrip",
}
UNKNOWN_KEYS = ["typo_key", "env.foo", "backend.x"]


@pytest.fixture(scope="module", autouse=True)
def hydra_configs():
    """Hydra initialized once on the shipped configs, for every compose of this module."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        yield


def compose_config(name: str, *overrides: str):
    return compose(name, overrides=list(overrides))


def choices(group: str) -> list[str]:
    return sorted(path.stem for path in (CONFIG_DIR / group).glob("*.yaml"))


def reported_key(command: str, key: str) -> str:
    """The key an unknown-key message names: the first part of ``key`` the schema lacks."""
    first = key.split(".")[0]
    fields = {f.name for f in dataclasses.fields(SCHEMAS[command])}
    return key if first in fields else first


def missing_keys(config: dict, prefix: str = "") -> set[str]:
    """The dotted keys of the ``???`` values of a config container (without resolving any)."""
    missing = set()
    for key, value in config.items():
        if isinstance(value, dict):
            missing |= missing_keys(value, f"{prefix}{key}.")
        elif value == "???":
            missing.add(f"{prefix}{key}")
    return missing


@pytest.mark.parametrize("key", UNKNOWN_KEYS)
@pytest.mark.parametrize("name", CONFIGS)
def test_overriding_an_unknown_key_fails_at_composition_naming_it(name, key):
    with pytest.raises(ConfigCompositionException, match=f"'{key}'"):
        compose_config(name, f"{key}=1")


@pytest.mark.parametrize("prefix", ["+", "++"])
@pytest.mark.parametrize("key", UNKNOWN_KEYS)
@pytest.mark.parametrize("name", CONFIGS)
def test_appending_an_unknown_key_is_caught_against_the_schema(name, key, prefix):
    # Hydra inserts `+`-appended keys whatever a structured config says; the schema check does not.
    command = CONFIGS[name]
    cfg = compose_config(name, f"{prefix}{key}=1")
    problems = unknown_keys(cfg, SCHEMAS[command])
    assert len(problems) == 1
    assert problems[0].startswith(f"unknown key {reported_key(command, key)!r}")
    assert "; expected one of [" in problems[0]


def test_an_unknown_key_close_to_a_known_one_is_named_as_the_likely_typo():
    cfg = compose_config("eval", "+episdoes=3", "+env.obs_mod=full")
    assert unknown_keys(cfg, SCHEMAS["eval"]) == [
        "unknown key 'env.obs_mod' (did you mean 'env.obs_mode'?); expected one of "
        "['env.gripper_mode', 'env.image_size', 'env.objects', 'env.obs_mode', 'env.rigid_twin', "
        "'env.suite', 'env.tasks', 'env.variations']",
        "unknown key 'episdoes' (did you mean 'episodes'?); expected one of ['backend', "
        "'control_delay_steps', 'env', 'episodes', 'output_dir', 'policy', 'policy_latency_s', "
        "'progress', 'record', 'seed', 'video']",
    ]


def test_the_callback_exits_2_naming_the_key(capsys):
    cfg = compose_config("eval", "+typo_key=3", "+env.foo=1")
    with pytest.raises(SystemExit) as exit_:
        RejectUnknownKeys("eval").on_run_start(cfg)
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("simroll eval: config error: ")
    assert "unknown key 'typo_key'" in error and "unknown key 'env.foo'" in error
    assert "'env.obs_mode'" in error  # the keys expected beside it


@pytest.mark.parametrize("name", CONFIGS)
def test_command_line_refuses_an_appended_key_before_anything_runs(tmp_path, name):
    command = CONFIGS[name]
    out = tmp_path / "out"
    result = simroll(command, "--config-name", name, "+typo_key=3", f"output_dir={out}")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(f"simroll {command}: config error: unknown key 'typo_key'")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not out.exists()


def test_command_line_refuses_an_unknown_nested_key_without_a_traceback(tmp_path):
    result = simroll("eval", "+backend.x=1", f"output_dir={tmp_path / 'out'}")
    assert result.returncode == 2 and "unknown key 'backend.x'" in result.stderr
    result = simroll("eval", "env.foo=1", f"output_dir={tmp_path / 'out'}")
    assert result.returncode != 0 and "'env.foo'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_multirun_refuses_a_swept_unknown_key(tmp_path):
    result = simroll("eval", "-m", "+typo_key=1,2", "episodes=1", f"output_dir={tmp_path}")
    assert result.returncode == 2 and "unknown key 'typo_key'" in result.stderr
    assert not list(tmp_path.rglob("records.jsonl"))


@pytest.mark.parametrize(
    ("name", "override"),
    [
        ("eval", "episodes=abc"),
        ("eval", "env.image_size=big"),
        ("eval", "progress=maybe"),
        ("eval", "video.size=[wide,tall]"),
        ("eval", "backend.workers=many"),
        ("eval", "++episodes=abc"),
        ("collect", "episodes=abc"),
        ("certify", "epsilon=small"),
        ("certify_diffusion", "batch=1.5"),
        ("train", "steps=many"),
        ("roundtrip", "threads=two"),
        ("roundtrip", "bench.coverage=most"),
        ("roundtrip", "model.hidden=wide"),
    ],
)
def test_a_wrong_type_fails_at_composition(name, override):
    key = override.lstrip("+").split("=")[0]
    with pytest.raises(ConfigCompositionException) as error:
        compose_config(name, override)
    message = f"{error.value}\n{error.value.__cause__}"
    assert f"full_key: {key}" in message and ("converted" in message or "valid" in message)


def shipped_configs() -> list[tuple[str, list[str]]]:
    """Each top-level config with each choice of each of its groups (one group at a time)."""
    cases = [(name, []) for name in CONFIGS]
    for name, groups in [
        ("eval", {"env": "env", "policy": "policy", "backend": "backend"}),
        ("collect", {"env": "env", "policy": "policy", "backend": "backend"}),
        ("certify", {"env": "env", "backend": "backend", "policy@reference": "policy"}),
        ("train", {"env": "env", "policy": "policy"}),
        ("roundtrip", {"roundtrip": "roundtrip"}),
    ]:
        for override, group in groups.items():
            cases += [(name, [f"{override}={choice}"]) for choice in choices(group)]
    cases += [
        ("eval", ["policy=diffusion", f"+accel@policy={accel}"]) for accel in choices("accel")
    ]
    return cases


@pytest.mark.parametrize(("name", "overrides"), shipped_configs(), ids=str)
def test_every_shipped_config_composes_with_every_key_set(name, overrides):
    cfg = compose_config(name, *overrides)
    assert unknown_keys(cfg, SCHEMAS[CONFIGS[name]]) == []
    missing = missing_keys(OmegaConf.to_container(cfg, resolve=False))
    # a schema field its yaml does not set would be missing; only lerobot asks for its path
    chosen = [o.split("=")[0].split("@")[-1] for o in overrides if o.endswith("=lerobot")]
    assert missing == {f"{package}.path" for package in chosen}


DOCUMENTED = [  # README.md, simroll/certify/README.md, policy cards and config comments
    ("eval", "env=soft_lift policy=expert episodes=50 backend=vector"),
    ("eval", "env=soft_suite policy=expert_firm episodes=20 output_dir=runs/firm"),
    ("eval", "env.variations=[default,stiff_x2,actuation_bias] control_delay_steps=2"),
    ("eval", "env=soft_lift env.objects=[sponge] episodes=1 video.episodes=0 output_dir=/tmp/x"),
    ("eval", "record=true policy_latency_s=measured"),
    ("eval", "policy_latency_s=0.05"),
    ("eval", "env=soft_lift env.obs_mode=state policy=diffusion +accel@policy=denoise_2"),
    ("eval", "policy=lerobot policy.path=/some/checkpoint env.obs_mode=full"),
    ("eval", "env=soft_lift env.obs_mode=full env.image_size=64 policy=vla episodes=13"),
    ("eval", "env.obs_mode=state policy=diffusion +policy.overrides.n_action_steps=2 seed=500"),
    ("eval", "policy=act policy.path=runs/train/act/checkpoints/last progress=false"),
    ("eval", "policy=vla +policy.overrides.noise_scale=0.5 seed=900"),
    ("eval", "policy=vla +policy.overrides.temporal_ensemble_coeff=0.01"),
    ("collect", "env=soft_lift episodes=200"),
    ("collect", "env=soft_lift env.obs_mode=state policy=expert_noisy episodes=100"),
    ("collect", "env=soft_suite env.image_size=64 policy=expert_noisy output_dir=data/x"),
    ("collect", "env=soft_suite policy=expert_noisy episodes=35 backend=vector backend.workers=2"),
    ("collect", "env=soft_suite policy=expert_noisy +policy.squeeze_hold_hand=true seed=1000"),
    ("train", "policy=diffusion dataset=data/soft_lift_noisy steps=30000"),
    ("train", "policy=act dataset=data/soft_lift_state batch_size=64 threads=1"),
    ("train", "policy=vla checkpoint_every=5000 policy.train.overrides.scheduler_decay_steps=9"),
    (
        "train",
        "policy=vla steps=15000 policy.train.overrides.scheduler_decay_steps=30000 "
        "fit_lr_schedule=false",
    ),
    ("train", "policy=diffusion policy.train.overrides.optimizer_lr=3e-4 init_from=runs/x"),
    ("train", "policy=vla task_weights={squeeze:3.0,put:2.0} dagger.rounds=3 env=soft_suite"),
    ("train", "policy=vla +task_weights={squeeze:3.0} dagger.beta=0.2"),
    ("train", "policy=vla dagger.rounds=4 dagger.labeller=expert_hold env=soft_suite"),
    ("train", "policy=vla dagger.rounds=2 dagger.labeller=expert_steer env=soft_suite"),
    ("certify", "design=fixed episodes=100 epsilon=0.1 delta=0.05 risk=joint success=dsr"),
    ("certify", "+policy@candidates.expert_repeat2=expert_repeat2"),
    ("certify", "~policy@candidates.expert_replan3 output_dir=runs/certify/x"),
    ("certify", "+policy@candidates.denoise_5=diffusion +accel@candidates.denoise_5=denoise_5"),
    ("certify_diffusion", "episodes=60 design=fixed"),
    ("certify_diffusion", "success=dsr backend=vector batch=4 seed=30000 episodes=300"),
    ("certify_diffusion_noise", "success=dsr backend=vector batch=4 seed=30000 episodes=300"),
    ("roundtrip", "stage=bench output_dir=runs/roundtrip/small"),
    ("roundtrip", "roundtrip=large drop_blocks=[hand]"),
    ("roundtrip", "+splits.ood_x.episodes=3 +splits.ood_x.variation.young_scale=0.5"),
]


@pytest.mark.parametrize(("name", "overrides"), DOCUMENTED)
def test_documented_overrides_compose(name, overrides):
    cfg = compose_config(name, *overrides.split())
    assert unknown_keys(cfg, SCHEMAS[CONFIGS[name]]) == []


def test_policy_sections_stay_open_for_their_targets_arguments():
    cfg = compose_config("certify", "+reference.anything=1", "+candidates.expert_replan2.x=2")
    assert unknown_keys(cfg, SCHEMAS["certify"]) == []
    cfg = compose_config("roundtrip", "+splits.ood_x.episodes=3")
    assert unknown_keys(cfg, SCHEMAS["roundtrip"]) == []
