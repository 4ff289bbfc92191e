"""``simroll certify`` end to end on SoftSqueeze / foam_cylinder with the stand-in accelerated
expert: certificate contents, resume after an interruption, the sequential form reusing stored
rollouts, and config errors before any episode."""

from __future__ import annotations

import json
import shutil

import gymnasium as gym
import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

from simroll.certify.certificate import Certificate
from simroll.certify.rollouts import ActionSpaceError, calibration_specs, preflight
from simroll.cli.certify import CONFIG_DIR, ConfigError, run, validate
from simroll.experts import SoftExpert
from simroll.rollout.episode import EnvConfig
from simroll.rollout.manifest import ManifestError
from simroll.rollout.runner import make_specs
from tests.helpers import simroll

# A tiny, loose certification so that 3 calibration specs can certify (epsilon 0.6, delta 0.2).
TINY = [
    "episodes=3",
    "epsilon=0.6",
    "delta=0.2",
    "~policy@candidates.expert_replan1_5",
    "~policy@candidates.expert_replan2_5",
    "progress=false",
]


def certify_in_process(*overrides: str) -> Certificate:
    """What ``simroll certify <overrides>`` runs, without a new interpreter (saves the imports)."""
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("certify", overrides=list(overrides), return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)  # policy names come from Hydra's choices
        with open_dict(cfg):
            del cfg["hydra"]  # as under @hydra.main
        try:
            return run(cfg)
        finally:
            HydraConfig.instance().cfg = None


def lines(path) -> list[str]:
    return path.read_text().splitlines()


@pytest.fixture(scope="module")
def fixed_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("certify") / "fixed"
    result = simroll("certify", f"output_dir={out}", "design=fixed", *TINY)
    assert result.returncode == 0, result.stdout + result.stderr
    return out, result


def test_fixed_design_certifies_the_safe_acceleration_and_rejects_the_broken_one(fixed_run):
    out, result = fixed_run
    certificate = json.loads((out / "certificate.json").read_text())
    assert certificate["chosen"] == "expert_replan2"
    replan2, replan3 = certificate["candidates"]
    assert replan2["certified"] and (replan2["losses"], replan2["trials"]) == (0, 3)
    assert not replan3["certified"] and replan3["losses"] == 3
    # measured compute: half the expert calls per control step (deterministic); wall time is
    # measured too but not asserted on (timing on a shared machine is noisy)
    assert replan2["speedup_model_calls"] == pytest.approx(2.0, rel=0.03)
    assert replan2["speedup_wall"] > 0
    assert certificate["rollouts"]["used"] == certificate["rollouts"]["exhaustive"] == 9
    assert [s["seed"] for s in certificate["calibration"]["specs"]] == [
        s.seed for s in make_specs("soft", ["SoftSqueeze"], ["foam_cylinder"], ["default"], 3)
    ]
    for name in ("expert", "expert_replan2", "expert_replan3"):
        assert len(lines(out / name / "records.jsonl")) == 3
    assert (out / "certificate.png").stat().st_size > 5000
    assert "deploy `expert_replan2`" in (out / "certificate.md").read_text()
    assert "deploy `expert_replan2`" in result.stdout


def test_interrupted_certification_resumes_from_its_records(fixed_run, tmp_path):
    source, _ = fixed_run
    out = tmp_path / "resumed"
    shutil.copytree(source, out)
    # interrupted while the last candidate ran: its last episode and the certificate are missing
    store = out / "expert_replan3" / "records.jsonl"
    kept = lines(store)[:-1]
    store.write_text("\n".join(kept) + "\n")
    (out / "certificate.json").unlink()
    untouched = (out / "expert" / "records.jsonl").read_bytes()
    certify_in_process(f"output_dir={out}", "design=fixed", *TINY)
    assert lines(store)[:2] == kept and len(lines(store)) == 3  # one episode re-run, appended
    assert (out / "expert" / "records.jsonl").read_bytes() == untouched
    before = json.loads((source / "certificate.json").read_text())
    after = json.loads((out / "certificate.json").read_text())
    assert after["chosen"] == before["chosen"]
    for a, b in zip(after["candidates"], before["candidates"], strict=True):
        assert (a["certified"], a["losses"], a["trials"]) == (
            b["certified"],
            b["losses"],
            b["trials"],
        )


def test_sequential_design_stops_early_and_a_rerun_reuses_its_stored_rollouts(tmp_path):
    out = tmp_path / "sequential"
    certify_in_process(f"output_dir={out}", "design=sequential", *TINY[1:], "episodes=4")
    certificate = json.loads((out / "certificate.json").read_text())
    assert certificate["design"] == "sequential" and certificate["chosen"] == "expert_replan2"
    replan2, replan3 = certificate["candidates"]
    assert replan2["status"] == "certified" and replan2["trials"] == 3
    assert replan3["status"] in ("futile", "clearly fails") and replan3["trials"] == 1
    assert certificate["rollouts"]["per_policy"] == {
        "reference": 3,
        "expert_replan2": 3,
        "expert_replan3": 1,
    }
    assert certificate["rollouts"]["exhaustive"] == 12
    (out / "certificate.json").unlink()  # interrupted before the certificate was written
    sizes = {p: p.stat().st_size for p in out.glob("*/records.jsonl")}
    again = certify_in_process(f"output_dir={out}", "design=sequential", *TINY[1:], "episodes=4")
    assert {p: p.stat().st_size for p in out.glob("*/records.jsonl")} == sizes  # nothing re-run
    assert again.chosen == "expert_replan2"


@pytest.mark.parametrize(
    ("overrides", "changed"),
    [
        (["design=sequential", *TINY], "design fixed -> sequential"),
        (["design=fixed", *TINY, "episodes=4"], "episodes 3 -> 4"),
        (["design=fixed", *TINY, "epsilon=0.7"], "epsilon 0.6 -> 0.7"),
        (
            ["design=fixed", *TINY, "~policy@candidates.expert_replan3"],
            "candidates [expert_replan2, expert_replan3] -> [expert_replan2]",
        ),
    ],
)
def test_a_changed_design_on_the_same_stored_outcomes_is_refused(
    fixed_run, tmp_path, overrides, changed
):
    source, _ = fixed_run
    out = tmp_path / "redesigned"
    shutil.copytree(source, out)
    (out / "certificate.json").unlink()
    stores = {p: p.read_bytes() for p in out.glob("*/records.jsonl")}
    with pytest.raises(ManifestError) as error:
        certify_in_process(f"output_dir={out}", *overrides)
    message = str(error.value)
    assert changed in message and "voids the guarantee" in message, message
    assert {p: p.read_bytes() for p in out.glob("*/records.jsonl")} == stores
    assert not (out / "certificate.json").exists()


def test_a_changed_design_exits_2_with_one_line(fixed_run, tmp_path):
    source, _ = fixed_run
    out = tmp_path / "redesigned"
    shutil.copytree(source, out)
    result = simroll("certify", f"output_dir={out}", "design=sequential", *TINY)
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "design fixed -> sequential" in line and "use a new output_dir" in line


@pytest.fixture(scope="module")
def compose_certify():
    def make(*overrides: str):
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            return compose("certify", overrides=list(overrides))

    return make


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["epsilon=1.5"], "epsilon must be in (0, 1), got 1.5"),
        (["epsilon=0"], "epsilon must be in (0, 1), got 0"),
        (["delta=1.0"], "delta must be in (0, 1), got 1.0"),
        (["delta=-0.1"], "delta must be in (0, 1), got -0.1"),
        (["risk=marginal"], "risk must be one of"),
        (["design=greedy"], "design: unknown value 'greedy'"),
        (["cost=flops"], "cost: unknown value 'flops'"),
        (["env.tasks=[SoftFly]"], "env.tasks: unknown value 'SoftFly'"),
        (["episodes=0"], "episodes must be an integer >= 1"),
        (["episodes=10"], "episodes=10 can never certify a candidate"),
        (
            [
                "~policy@candidates.expert_replan1_5",
                "~policy@candidates.expert_replan2",
                "~policy@candidates.expert_replan2_5",
                "~policy@candidates.expert_replan3",
            ],
            "no candidates",
        ),
        (["+policy@candidates.expert=expert"], "candidate names must differ from the reference"),
    ],
)
def test_bad_config_is_refused_before_any_episode(compose_certify, overrides, message):
    cfg = compose_certify(*overrides)
    with pytest.raises(ConfigError) as error:
        validate(cfg, "expert")
    assert message in str(error.value)


@pytest.mark.parametrize("name", ["../outside", "/tmp/abs", ".hidden", "a/b", ""])
def test_candidate_names_that_are_not_plain_folder_names_are_refused(compose_certify, name):
    cfg = compose_certify()
    with open_dict(cfg):
        cfg.candidates[name] = cfg.candidates.expert_replan2
    with pytest.raises(ConfigError) as error:
        validate(cfg, "expert")
    assert f"candidates: {name!r} cannot name a folder in output_dir" in str(error.value)


def test_a_reference_name_that_is_not_a_plain_folder_name_is_refused(compose_certify):
    with pytest.raises(ConfigError, match="reference: '../up' cannot name a folder"):
        validate(compose_certify(), "../up")


def test_bad_config_exits_2_from_the_command_line_without_records(tmp_path):
    result = simroll("certify", f"output_dir={tmp_path}", "delta=0")
    assert result.returncode == 2
    assert "delta must be in (0, 1), got 0" in result.stderr
    assert not any(tmp_path.glob("*/records.jsonl"))


class ThreeDimensionalPolicy:
    def __init__(self, env):
        pass

    def reset(self):
        pass

    def select_action(self, obs):
        return np.zeros(3, dtype=np.float32)


def test_candidate_with_a_different_action_space_is_refused():
    spec = calibration_specs("soft", ["SoftSqueeze"], ["foam_cylinder"], ["default"], 1)[0]
    policies = {"expert": SoftExpert, "tiny": ThreeDimensionalPolicy}
    with pytest.raises(ActionSpaceError, match=r"policy 'tiny' returned an action of shape \(3,\)"):
        preflight(spec, policies, EnvConfig())


class DeclaresThreeDimensions(SoftExpert):
    action_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


def test_candidate_declaring_a_different_action_space_is_refused_before_it_acts():
    spec = calibration_specs("soft", ["SoftSqueeze"], ["foam_cylinder"], ["default"], 1)[0]
    policies = {"expert": SoftExpert, "declared": DeclaresThreeDimensions}
    with pytest.raises(ActionSpaceError, match=r"policy 'declared' declares action space Box"):
        preflight(spec, policies, EnvConfig())


def test_calibration_specs_are_iid_draws_and_match_make_specs_for_one_combination():
    one = calibration_specs("soft", ["SoftLift"], ["foam_cylinder"], ["default"], 5, 3)
    assert one == make_specs("soft", ["SoftLift"], ["foam_cylinder"], ["default"], 5, 3)
    mixed = calibration_specs(
        "soft", ["SoftLift", "SoftSqueeze"], ["foam_cylinder"], ["default"], 200
    )
    tasks = [s.task for s in mixed]
    assert 70 < tasks.count("SoftLift") < 130  # drawn, not stratified
    assert tasks[:10] != sorted(tasks[:10]) or tasks[10:20] != sorted(tasks[10:20])
    assert len({s.key for s in mixed}) == 200
