"""Run manifests: the fingerprint of what decides outcomes, and which resumes are refused."""

from __future__ import annotations

import json

import pytest

from simroll.rollout.manifest import (
    MANIFEST_FILENAME,
    SPECS_FILENAME,
    ManifestError,
    RunManifest,
    describe_changes,
    outcome_fingerprint,
    read_expected_specs,
    read_manifest,
    start_run,
)
from simroll.rollout.runner import make_specs
from simroll.rollout.store import RecordStore
from tests.report.conftest import make_record

ENV = {
    "suite": "soft",
    "tasks": ["SoftLift"],
    "objects": ["sponge"],
    "variations": ["default"],
    "obs_mode": "state",
    "gripper_mode": "delta",
    "image_size": 96,
    "rigid_twin": False,
}
EXPERT = ("expert", {"_target_": "simroll.experts.soft.make", "closure": "gentle"})


def eval_manifest(episodes: int = 2, delay: int = 0, seed: int = 0, **env) -> RunManifest:
    return RunManifest(
        command="eval",
        fingerprint=outcome_fingerprint(
            {**ENV, **env}, {"policy": EXPERT}, seed=seed, control_delay_steps=delay
        ),
        episodes=episodes,
        config={"episodes": episodes, "progress": True},
    )


def specs(episodes: int = 2):
    return make_specs("soft", ["SoftLift"], ["sponge"], ["default"], episodes)


def test_fingerprint_covers_env_policy_seed_and_delay_but_not_run_settings():
    fingerprint = outcome_fingerprint(
        {**ENV, "max_workers": 4}, {"policy": EXPERT}, seed=3, control_delay_steps=2
    )
    assert fingerprint["env.gripper_mode"] == "delta" and fingerprint["env.tasks"] == ["SoftLift"]
    assert fingerprint["policy"] == "expert" and fingerprint["policy.closure"] == "gentle"
    assert fingerprint["seed"] == 3 and fingerprint["control_delay_steps"] == 2
    assert "env.max_workers" not in fingerprint and "episodes" not in fingerprint


def test_first_run_writes_the_manifest_and_every_expected_spec(tmp_path):
    assert start_run(tmp_path, eval_manifest(), specs(), episodes_may_change=True) is None
    manifest = read_manifest(tmp_path)
    assert manifest.command == "eval" and manifest.episodes == 2 and manifest.spec_count == 2
    assert manifest.created and manifest.config == {"episodes": 2, "progress": True}
    assert read_expected_specs(tmp_path) == specs()
    lines = (tmp_path / SPECS_FILENAME).read_text().splitlines()
    assert [json.loads(line)["seed"] for line in lines] == [s.seed for s in specs()]
    on_disk = json.loads((tmp_path / MANIFEST_FILENAME).read_text())
    assert on_disk["fingerprint_sha256"] == manifest.fingerprint_sha256
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary behind


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        (eval_manifest(delay=3), "control_delay_steps 0 -> 3"),
        (eval_manifest(seed=1), "seed 0 -> 1"),
        (eval_manifest(gripper_mode="binary"), "env.gripper_mode delta -> binary"),
        (eval_manifest(objects=["sponge", "tofu"]), "env.objects [sponge] -> [sponge, tofu]"),
    ],
)
def test_a_resume_with_other_settings_is_refused_naming_the_keys(tmp_path, changed, named):
    start_run(tmp_path, eval_manifest(), specs(), episodes_may_change=True)
    with pytest.raises(ManifestError) as error:
        start_run(tmp_path, changed, specs(), episodes_may_change=True)
    assert str(error.value) == (
        f"output_dir {tmp_path} was made with other settings: {named}; use a new output_dir"
    )
    assert read_manifest(tmp_path).fingerprint == eval_manifest().fingerprint  # untouched


def test_a_different_policy_is_named_once_per_changed_key(tmp_path):
    start_run(tmp_path, eval_manifest(), specs(), episodes_may_change=True)
    other = RunManifest(
        "eval",
        outcome_fingerprint(
            ENV, {"policy": ("act", {"path": "ckpt"})}, seed=0, control_delay_steps=0
        ),
        2,
    )
    with pytest.raises(ManifestError, match="policy expert -> act") as error:
        start_run(tmp_path, other, specs(), episodes_may_change=True)
    assert "policy.path (unset) -> ckpt" in str(error.value)


def test_growing_episodes_is_allowed_and_said(tmp_path):
    start_run(tmp_path, eval_manifest(episodes=1), specs(1), episodes_may_change=True)
    note = start_run(tmp_path, eval_manifest(episodes=3), specs(3), episodes_may_change=True)
    assert note == (
        f"resuming {tmp_path}: the run grows from 1 to 3 episodes per (task, object, variation)"
    )
    assert read_manifest(tmp_path).episodes == 3 and read_expected_specs(tmp_path) == specs(3)


def test_changed_episodes_are_refused_where_they_may_not_change(tmp_path):
    start_run(tmp_path, eval_manifest(episodes=1), specs(1), episodes_may_change=False)
    with pytest.raises(ManifestError, match="episodes 1 -> 3; use a new output_dir"):
        start_run(tmp_path, eval_manifest(episodes=3), specs(3), episodes_may_change=False)


def test_a_changed_certification_design_is_refused_as_voiding_the_guarantee(tmp_path):
    design = {"epsilon": 0.1, "design": "sequential", "episodes": 100, "candidates": ["a", "b"]}
    first = RunManifest("certify", {"seed": 0}, 100, design=design)
    start_run(tmp_path, first, specs(), episodes_may_change=False)
    redesigned = RunManifest(
        "certify", {"seed": 0}, 100, design={**design, "design": "fixed", "candidates": ["b", "a"]}
    )
    with pytest.raises(ManifestError) as error:
        start_run(tmp_path, redesigned, specs(), episodes_may_change=False)
    message = str(error.value)
    assert "candidates [a, b] -> [b, a], design sequential -> fixed" in message
    assert "voids the guarantee" in message
    assert start_run(tmp_path, first, specs(), episodes_may_change=False) is None  # same: resumes


def test_another_command_in_the_same_directory_is_refused(tmp_path):
    start_run(tmp_path, eval_manifest(), specs(), episodes_may_change=True)
    with pytest.raises(ManifestError, match="made by `simroll eval`, not `simroll certify`"):
        start_run(tmp_path, RunManifest("certify", {}, 2), specs(), episodes_may_change=False)


def test_a_directory_from_before_manifests_is_adopted_with_a_note(tmp_path):
    RecordStore(tmp_path).append(make_record(specs()[0]))
    note = start_run(tmp_path, eval_manifest(), specs(), episodes_may_change=True)
    assert "holds records but no manifest.json" in note and "cannot be checked" in note
    assert read_manifest(tmp_path) is not None


def test_unreadable_manifest_or_specs_are_errors_not_guesses(tmp_path):
    assert read_expected_specs(tmp_path) is None  # no manifest: nothing to read
    start_run(tmp_path, eval_manifest(), specs(), episodes_may_change=True)
    (tmp_path / SPECS_FILENAME).write_text("{}\n")
    with pytest.raises(ManifestError, match="does not match the sha256"):
        read_expected_specs(tmp_path)
    (tmp_path / MANIFEST_FILENAME).write_text("{not json")
    with pytest.raises(ManifestError, match="cannot be read"):
        start_run(tmp_path, eval_manifest(), specs(), episodes_may_change=True)


def test_describe_changes_names_a_removed_group_once_and_cuts_long_lists():
    old = {"candidates.a": "a", "candidates.a.every": 2, "seed": 0}
    assert describe_changes(old, {"seed": 0}) == "candidates.a a -> (unset)"
    many_old = {f"k{i}": 0 for i in range(12)}
    many_new = {f"k{i}": 1 for i in range(12)}
    assert describe_changes(many_old, many_new).endswith("and 4 more")
    assert describe_changes({"x": (1, 2)}, {"x": [1, 2]}) == ""


def _checkpoint_manifest(path, episodes: int = 2) -> RunManifest:
    learner = {"_target_": "mixing", "learner": {"path": str(path)}}
    return RunManifest(
        "eval",
        outcome_fingerprint(
            ENV,
            {"policy": ("act", {"path": str(path)}), "candidates.dagger": ("mix", learner)},
            seed=0,
            control_delay_steps=0,
        ),
        episodes,
    )


def test_a_checkpoint_retrained_at_the_same_path_is_another_policy(tmp_path):
    """The fingerprint holds the weights' digest beside every checkpoint path (at any depth),
    so a resume after the weights at that path changed is refused instead of mixing them."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"weights one")
    run = tmp_path / "run"
    first = _checkpoint_manifest(ckpt)
    digests = {k: v for k, v in first.fingerprint.items() if k.endswith("weights_sha256")}
    assert set(digests) == {"policy.weights_sha256", "candidates.dagger.learner.weights_sha256"}
    start_run(run, first, specs(), episodes_may_change=True)
    assert start_run(run, _checkpoint_manifest(ckpt), specs(), episodes_may_change=True) is None
    (ckpt / "model.safetensors").write_bytes(b"weights two")
    with pytest.raises(ManifestError, match="policy.weights_sha256"):
        start_run(run, _checkpoint_manifest(ckpt), specs(), episodes_may_change=True)
    no_weights = outcome_fingerprint(
        ENV, {"policy": ("act", {"path": str(tmp_path / "none")})}, seed=0, control_delay_steps=0
    )
    assert not any(key.endswith("weights_sha256") for key in no_weights)


def test_a_run_from_before_weight_digests_resumes_with_a_note(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"weights")
    run = tmp_path / "run"
    current = _checkpoint_manifest(ckpt)
    old = RunManifest(
        "eval",
        {k: v for k, v in current.fingerprint.items() if not k.endswith("weights_sha256")},
        2,
    )
    start_run(run, old, specs(), episodes_may_change=True)
    note = start_run(run, current, specs(), episodes_may_change=True)
    assert "predates weight digests" in note and "policy.weights_sha256" in note
    assert read_manifest(run).fingerprint == current.fingerprint  # recorded from now on
    (ckpt / "model.safetensors").write_bytes(b"other weights")
    with pytest.raises(ManifestError, match="weights_sha256"):
        start_run(run, _checkpoint_manifest(ckpt), specs(), episodes_may_change=True)


def test_a_resume_with_other_code_is_recorded_and_said(tmp_path, monkeypatch):
    """Records made by two code versions are allowed together, but never silently: the manifest
    keeps each version, the resume says so, and the summary and report show both."""
    from simroll.provenance import code_version
    from simroll.report.render import provenance_view
    from simroll.scoring.summary import write_report

    here = code_version()
    assert start_run(tmp_path, eval_manifest(), specs(), episodes_may_change=True) is None
    assert read_manifest(tmp_path).code == [here]
    # the same code again: one entry, nothing to say
    assert start_run(tmp_path, eval_manifest(), specs(), episodes_may_change=True) is None
    assert read_manifest(tmp_path).code == [here]

    other = {**here, "git_sha": "0" * 40, "git_dirty": False}
    monkeypatch.setattr("simroll.rollout.manifest.code_version", lambda: other)
    note = start_run(tmp_path, eval_manifest(), specs(), episodes_may_change=True)
    assert note is not None and "other code" in note and f"-> {'0' * 40}" in note
    assert "2 code versions" in note
    assert read_manifest(tmp_path).code == [here, other]

    write_report(tmp_path, [make_record(spec) for spec in specs()])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["provenance"]["code_versions"] == [here, other]
    rows = dict(provenance_view(summary["provenance"], None, [])["rows"])
    assert rows["records made by 2 code versions"].endswith("0" * 40)


def test_a_manifest_from_before_code_versions_starts_its_list(tmp_path):
    start_run(tmp_path, eval_manifest(), specs(), episodes_may_change=True)
    data = json.loads((tmp_path / MANIFEST_FILENAME).read_text())
    del data["code"]
    (tmp_path / MANIFEST_FILENAME).write_text(json.dumps(data))
    assert read_manifest(tmp_path).code == []
    assert start_run(tmp_path, eval_manifest(), specs(), episodes_may_change=True) is None
    assert len(read_manifest(tmp_path).code) == 1
