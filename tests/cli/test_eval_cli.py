"""``simroll eval`` from the command line: outputs, videos, and config errors before any episode."""

from __future__ import annotations

import json

import av
import pytest

from tests.helpers import simroll


def test_eval_writes_records_report_plot_and_a_playable_video(tmp_path):
    result = simroll(
        "eval",
        f"output_dir={tmp_path}",
        "env=soft_squeeze",
        "env.objects=[foam_cylinder]",
        "episodes=1",
        "video.episodes=1",
        "progress=false",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "| SoftSqueeze | foam_cylinder | default | 1 |" in result.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["episodes"] == 1 and summary["provenance"]["git_sha"]
    assert (tmp_path / "tolerance_curve.png").stat().st_size > 1000
    videos = list((tmp_path / "videos").glob("*.mp4"))
    assert len(videos) == 1
    with av.open(str(videos[0])) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264"
        frames = sum(1 for _ in container.decode(video=0))
    assert frames > 10


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("env.tasks=[SoftFly]", "env.tasks: unknown value 'SoftFly'"),
        ("env.objects=[brick]", "env.objects: unknown value 'brick'"),
        ("env.variations=[lava]", "env.variations: unknown value 'lava'"),
        ("episodes=0", "episodes must be an integer >= 1"),
        ("backend.name=cloud", "backend.name: unknown value 'cloud'"),
        ("policy_latency_s=fast", "policy_latency_s must be null, 'measured' or seconds"),
        ("policy=lerobot", "policy=lerobot needs a value for policy.path"),
    ],
)
def test_bad_config_values_fail_before_any_episode(tmp_path, override, message):
    result = simroll("eval", f"output_dir={tmp_path}", override)
    assert result.returncode == 2
    assert message in result.stderr
    assert not (tmp_path / "records.jsonl").exists()


def test_unknown_config_key_and_group_fail_naming_them(tmp_path):
    result = simroll("eval", f"output_dir={tmp_path}", "episdoes=3")
    assert result.returncode != 0 and "episdoes" in result.stderr
    result = simroll("eval", f"output_dir={tmp_path}", "policy=telepathy")
    assert result.returncode != 0 and "telepathy" in result.stderr and "expert" in result.stderr


@pytest.mark.slow
def test_missing_checkpoint_fails_before_any_episode(tmp_path):
    result = simroll(
        "eval",
        f"output_dir={tmp_path}",
        "policy=diffusion",
        f"policy.path={tmp_path / 'no_such_checkpoint'}",
    )
    assert result.returncode == 2
    assert "no_such_checkpoint" in result.stderr and "is not a directory" in result.stderr
    assert not (tmp_path / "records.jsonl").exists()


def test_unknown_command_lists_the_commands():
    result = simroll("fly")
    assert result.returncode == 2 and "eval" in result.stderr
