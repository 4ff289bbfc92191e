"""``simroll.certify(...)``, the library form of ``simroll certify``: the same certificate and
stored receipts as the command on the same settings (and each resumes the other's run directory),
defaults equal to configs/certify.yaml, the reference checkpoint's env record applied, and bad
arguments refused before any episode runs."""

from __future__ import annotations

import dataclasses
import inspect
import json
import shutil

import pytest
from hydra import compose, initialize_config_dir

import simroll
from simroll.certify import run as certify_run
from simroll.certify.run import certify
from simroll.certify.settings import CertifyArgumentError
from simroll.cli import certify as certify_cli
from simroll.cli.certify import CONFIG_DIR
from simroll.policies.resolve import policy_config
from simroll.rollout.store import RecordStore
from tests.certify.test_certify_cli import certify_in_process

POLICIES = ("expert", "expert_replan2", "expert_replan3")
# The smallest loose certification with two candidates: fixed n = 2 at epsilon 0.6, delta 0.2
# (0.4^2 <= 0.2), so 6 episodes; the same settings on the command line:
COMMAND_LINE = [
    "design=fixed",
    "episodes=2",
    "epsilon=0.6",
    "delta=0.2",
    "~policy@candidates.expert_replan1_5",
    "~policy@candidates.expert_replan2_5",
    "progress=false",
]
LIBRARY = {"design": "fixed", "episodes": 2, "epsilon": 0.6, "delta": 0.2, "progress": False}
CANDIDATES = {"expert_replan2": "expert_replan2", "expert_replan3": "expert_replan3"}


def receipts(run_dir) -> dict[str, dict[str, str]]:
    """Per policy store: spec key -> the record's outcome receipt."""
    stores = {name: RecordStore(run_dir / name).load().records for name in POLICIES}
    return {
        name: {key: record.receipt for key, record in records.items()}
        for name, records in stores.items()
    }


def decisions(certificate: dict) -> list[tuple]:
    keys = ("name", "certified", "status", "losses", "trials", "speedup_model_calls")
    return [tuple(candidate[key] for key in keys) for candidate in certificate["candidates"]]


@pytest.fixture
def planned(monkeypatch):
    """The plans certify and simroll certify would run; nothing runs."""
    plans = []

    def capture(plan, summary=True):
        plans.append(plan)

    monkeypatch.setattr(certify_run, "run_certification", capture)
    monkeypatch.setattr(certify_cli, "run_certification", capture)
    return plans


def test_the_library_and_the_command_line_plan_the_same_certification(planned, tmp_path):
    certify("expert", CANDIDATES, output_dir=tmp_path, **LIBRARY)
    certify_in_process(f"output_dir={tmp_path}", *COMMAND_LINE)
    library, command = planned
    # fingerprint, design and recorded config, so each form resumes the other's run directory
    assert library.manifest() == command.manifest()
    assert settings(library) == settings(command)


def settings(plan: certify_run.CertificationPlan) -> dict:
    """Everything in a plan but the policy factories, which are built from the configs."""
    fields = {field.name: getattr(plan, field.name) for field in dataclasses.fields(plan)}
    fields["reference"], fields["candidates"] = [
        [(policy.name, policy.config) for policy in policies]
        for policies in ([plan.reference], plan.candidates)
    ]
    return fields


@pytest.fixture(scope="module")  # ~25 s of CPU: 6 episodes per form, so its tests are slow
def both_forms(tmp_path_factory):
    root = tmp_path_factory.mktemp("certify_api")
    library = certify("expert", CANDIDATES, output_dir=root / "library", **LIBRARY)
    command = certify_in_process(f"output_dir={root / 'command'}", *COMMAND_LINE)
    return root, library, command


@pytest.mark.slow
def test_the_library_form_gives_the_command_lines_certificate_and_receipts(both_forms):
    root, library, command = both_forms
    assert library.chosen == command.chosen == "expert_replan2"
    on_disk = {
        form: json.loads((root / form / "certificate.json").read_text())
        for form in ("library", "command")
    }
    assert decisions(on_disk["library"]) == decisions(on_disk["command"])
    assert [c["certified"] for c in on_disk["library"]["candidates"]] == [True, False]
    for key in ("rollouts", "calibration", "settings", "design", "cost_measure"):
        assert on_disk["library"][key] == on_disk["command"][key], key
    assert receipts(root / "library") == receipts(root / "command")
    assert all(len(store) == 2 for store in receipts(root / "library").values())
    assert (root / "library" / "report.html").is_file()


@pytest.mark.slow
def test_the_command_line_resumes_a_library_run_without_rerunning_an_episode(both_forms, tmp_path):
    root, library, _ = both_forms
    out = tmp_path / "resumed"
    shutil.copytree(root / "library", out)
    stores = {path: path.read_bytes() for path in out.glob("*/records.jsonl")}
    again = certify_in_process(f"output_dir={out}", *COMMAND_LINE)
    assert {path: path.read_bytes() for path in out.glob("*/records.jsonl")} == stores
    assert again.chosen == library.chosen
    assert again.candidates == library.candidates


def test_the_package_is_callable_as_simroll_certify(planned):
    # importing a submodule makes `simroll.certify` the package, so the package is the function
    assert callable(simroll.certify)
    with pytest.raises(CertifyArgumentError, match="epsilon must be in"):
        simroll.certify("expert", CANDIDATES, epsilon=2.0)


def test_the_defaults_are_those_of_configs_certify_yaml():
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("certify")
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(certify).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }
    for key in (
        "epsilon",
        "delta",
        "risk",
        "success",
        "method",
        "design",
        "episodes",
        "batch",
        "cost",
        "reference_cost_episodes",
        "seed",
        "progress",
    ):
        assert defaults[key] == cfg[key], key
    for key in ("tasks", "objects", "variations"):
        assert list(defaults[key]) == list(cfg.env[key]), key
    assert defaults["rigid_twin"] == cfg.env.rigid_twin
    assert (defaults["backend"], defaults["workers"]) == (cfg.backend.name, cfg.backend.workers)
    assert list(cfg.candidates) == [
        "expert_replan1_5",
        "expert_replan2",
        "expert_replan2_5",
        "expert_replan3",
    ]
    # obs_mode, gripper_mode, image_size default to None: the checkpoint's record, else these
    assert certify_run._ENV_DEFAULTS == {
        key: cfg.env[key] for key in ("obs_mode", "gripper_mode", "image_size")
    }


def test_the_reference_checkpoints_env_record_applies(planned, tmp_path):
    accelerated = policy_config("vla", overrides={"num_flow_steps": 2})
    certify("policies/vla_soft", {"flow_2": accelerated}, output_dir=tmp_path)
    [plan] = planned
    assert plan.reference.name == "vla_soft"
    env = {key: plan.env[key] for key in ("obs_mode", "image_size", "gripper_mode")}
    assert env == {"obs_mode": "full", "image_size": 64, "gripper_mode": "delta"}
    with pytest.raises(CertifyArgumentError, match="gripper_mode='binary' contradicts"):
        certify("policies/vla_soft", {"flow_2": accelerated}, gripper_mode="binary")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"epsilon": 1.5}, "epsilon must be in (0, 1), got 1.5"),
        ({"epsilon": 0}, "epsilon must be in (0, 1), got 0"),
        ({"delta": -0.1}, "delta must be in (0, 1), got -0.1"),
        ({"candidates": {}}, "candidates must be a non-empty mapping name -> policy"),
        ({"candidates": ["expert_replan2"]}, "candidates must be a non-empty mapping"),
        (
            {"candidates": {"expert": "expert_replan2"}},
            "candidate names must differ from the reference's 'expert'",
        ),
        ({"candidates": {"reference": "expert_replan2"}}, "candidate names must differ"),
        ({"candidates": {"../up": "expert_replan2"}}, "candidates: '../up' cannot name a folder"),
        (
            {"candidates": {"fast": "expert_replan9"}},
            "candidates['fast']: unknown policy config 'expert_replan9'",
        ),
        ({"tasks": ["SoftFly"]}, "tasks: unknown value 'SoftFly'; expected one of"),
        ({"tasks": []}, "tasks must be a non-empty list of names"),
        ({"objects": "brick"}, "objects: unknown value 'brick'"),
        ({"design": "greedy"}, "design: unknown value 'greedy'"),
        ({"backend": "slurm"}, "backend: unknown value 'slurm'"),
        ({"workers": 0}, "workers must be an integer >= 1, got 0"),
        ({"episodes": 10}, "episodes=10 can never certify a candidate"),
        ({"seed": 1.5}, "seed must be an integer, got 1.5"),
    ],
)
def test_bad_arguments_are_refused_before_any_episode(planned, tmp_path, arguments, message):
    arguments = {"candidates": CANDIDATES, **arguments}
    with pytest.raises(CertifyArgumentError) as error:
        certify("expert", arguments.pop("candidates"), output_dir=tmp_path / "out", **arguments)
    assert message in str(error.value)
    assert isinstance(error.value, ValueError)
    assert not planned and not (tmp_path / "out").exists()
