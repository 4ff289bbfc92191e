"""``simroll.policies.resolve.parse_setting``: the scripts' ``KEY=VALUE`` policy settings."""

from __future__ import annotations

import pytest

from simroll.policies.resolve import parse_setting


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("n_action_steps=2", ("n_action_steps", 2)),
        ("noise_scale=0.5", ("noise_scale", 0.5)),
        ("quantize_int8=true", ("quantize_int8", True)),
        ('ignored_state=["hand_vz"]', ("ignored_state", ["hand_vz"])),
        ("keep_visual_tokens=null", ("keep_visual_tokens", None)),
        ("rollout_cache=final_clean", ("rollout_cache", "final_clean")),  # not JSON: the string
        ("note=a=b", ("note", "a=b")),  # the first "=" splits
    ],
)
def test_a_setting_reads_its_value_as_json_or_else_as_a_string(item, expected):
    assert parse_setting(item) == expected


@pytest.mark.parametrize("item", ["n_action_steps", "=2", ""])
def test_a_setting_without_key_or_equals_sign_is_refused_by_name(item):
    with pytest.raises(ValueError, match="KEY=VALUE") as error:
        parse_setting(item)
    assert repr(item) in str(error.value)
