"""The checkpoint ensemble: the executed action is the members' (weighted) mean or their median,
every member is asked every step, counts add up, bad settings are refused, and the shipped
config instantiates."""

from __future__ import annotations

import numpy as np
import pytest

from simroll.policies.base import CountsNetworkEvaluations, NamesItself
from simroll.policies.ensemble import EnsemblePolicy, ensemble_policy


class Constant:
    def __init__(self, value: float, evaluations: int = 0):
        self.value, self.calls, self.resets, self.evaluations = value, 0, 0, evaluations

    @property
    def policy_id(self) -> str:
        return f"c{self.value:g}"

    @property
    def network_evaluations(self) -> int:
        return self.evaluations * self.calls

    def reset(self) -> None:
        self.resets += 1
        self.calls = 0

    def select_action(self, obs):
        self.calls += 1
        return np.full(5, self.value, np.float32)


def test_the_ensemble_executes_the_mean_and_asks_every_member_every_step():
    members = [Constant(0.1, 10), Constant(0.5, 10), Constant(-0.3, 4)]
    policy = EnsemblePolicy(members)
    policy.reset()
    for _ in range(3):
        action = policy.select_action(None)
    assert action.dtype == np.float32 and action.shape == (5,)
    np.testing.assert_allclose(action, np.full(5, 0.1), atol=1e-6)
    assert [m.calls for m in members] == [3, 3, 3] and [m.resets for m in members] == [1, 1, 1]
    assert isinstance(policy, CountsNetworkEvaluations) and policy.network_evaluations == 72
    assert isinstance(policy, NamesItself) and policy.policy_id == "ensemble(c0.1,c0.5,c-0.3)"


def test_weights_weigh_the_members():
    policy = ensemble_policy(None, [lambda env: Constant(1.0), lambda env: Constant(0.0)], [3, 1])
    np.testing.assert_allclose(policy.select_action(None), np.full(5, 0.75))


def test_the_median_ignores_one_outlying_member():
    members = [Constant(0.2), Constant(0.3), Constant(-1.0)]
    policy = ensemble_policy(None, [lambda env, m=m: m for m in members], combine="median")
    np.testing.assert_allclose(policy.select_action(None), np.full(5, 0.2))
    even = EnsemblePolicy([Constant(v) for v in (0.0, 0.2, 0.4, -1.0)], combine="median")
    np.testing.assert_allclose(even.select_action(None), np.full(5, 0.1), atol=1e-6)


def test_the_median_refuses_weights_and_unknown_combines_are_named():
    with pytest.raises(ValueError, match="median.*weights"):
        EnsemblePolicy([Constant(0.0), Constant(1.0)], [1.0, 2.0], combine="median")
    with pytest.raises(ValueError, match="combine must be one of.*'vote'"):
        EnsemblePolicy([Constant(0.0), Constant(1.0)], combine="vote")


@pytest.mark.parametrize(
    ("members", "weights", "message"),
    [
        (1, None, "at least 2 members"),
        (2, [1.0], "weights has 1 entries"),
        (2, [1.0, -1.0], "weights must be"),
        (2, [0.0, 0.0], "weights must be"),
        (2, [1.0, "x"], "weights must be"),
    ],
)
def test_bad_ensembles_are_refused_with_the_bad_value(members, weights, message):
    with pytest.raises(ValueError, match=message):
        EnsemblePolicy([Constant(0.0) for _ in range(members)], weights)


def test_the_shipped_config_names_three_loadable_members():
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from simroll.cli import schema  # noqa: F401 - the typed eval config
    from simroll.cli.eval import CONFIG_DIR

    with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
        config = compose(
            "eval",
            overrides=["policy=vla_ensemble", "policy.members.1.path=elsewhere/ckpt"],
        )
    members = config.policy.members
    assert [m.noise_seed for m in members] == [0, 1, 2] and members[2].path == "policies/vla_soft"
    assert members[1].path == "elsewhere/ckpt" and members[0].path == "policies/vla_soft"
    factory = instantiate(config.policy)
    assert factory.func is ensemble_policy and len(factory.keywords["members"]) == 3


def test_the_shipped_ensemble_config_loads_the_shipped_members_at_half_noise():
    """configs/policy/vla_soft_ensemble.yaml: three members shipped under
    policies/vla_soft_ensemble, distinct weights, each sampling at noise_scale 0.5 (stored in its
    config.json, as the card says)."""
    import json
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    from simroll.cli import schema  # noqa: F401 - the typed eval config
    from simroll.cli.eval import CONFIG_DIR

    with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
        config = compose("eval", overrides=["policy=vla_soft_ensemble"])
    root = Path(__file__).resolve().parents[2]
    members = config.policy.members
    paths = [root / m.path for m in members]
    assert [p.relative_to(root / "policies").as_posix() for p in paths] == [
        f"vla_soft_ensemble/member_{i}" for i in range(3)
    ]
    assert [m.noise_seed for m in members] == [0, 1, 2]
    assert all(json.loads((p / "config.json").read_text())["noise_scale"] == 0.5 for p in paths)
    weights = {(p / "model.safetensors").read_bytes() for p in paths}
    assert len(weights) == 3


def test_ensemble_overrides_reach_every_member_over_its_own():
    """An acceleration knob on an ensemble (``overrides``) is merged into each member's
    ``load_policy`` overrides; a member whose factory takes none is refused, naming it."""
    import functools

    from simroll.policies.ensemble import with_overrides

    def factory(env, path, overrides=None):
        return Constant(float(len(overrides or {})))

    member = functools.partial(factory, path="a", overrides={"noise_scale": 0.5, "x": 1})
    merged = with_overrides(member, {"num_flow_steps": 2, "x": 2})
    assert merged.keywords == {
        "path": "a",
        "overrides": {"noise_scale": 0.5, "x": 2, "num_flow_steps": 2},
    }
    assert member.keywords["overrides"] == {"noise_scale": 0.5, "x": 1}  # left as it was
    policy = ensemble_policy(None, [member, member], overrides={"num_flow_steps": 2})
    assert policy.select_action(None)[0] == 3.0
    with pytest.raises(ValueError, match="need members whose factory takes overrides"):
        ensemble_policy(None, [member, lambda env: Constant(0.0)], overrides={"n": 1})
