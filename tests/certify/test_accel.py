"""The stand-in accelerated policy: calls its model on a fraction of steps, countably."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simroll.certify.accel import ReplanEvery


class CountingPolicy:
    def __init__(self, env):
        self.calls = 0

    def reset(self):
        self.calls = 0

    def select_action(self, obs):
        self.calls += 1
        return np.array([0.5, -0.5, 0.25, 0.125, float(self.calls)], dtype=np.float32)


@pytest.mark.parametrize("every", [1, 1.5, 2, 2.5, 3, 7])
def test_network_evaluations_count_exactly_the_calls_made(every):
    policy = ReplanEvery(None, CountingPolicy, every=every)
    for steps in (1, 2, 10, 41, 100):
        policy.reset()
        for _ in range(steps):
            policy.select_action(None)
        expected = math.floor((steps - 1) / every) + 1
        assert policy.inner.calls == policy.network_evaluations == expected
    policy.reset()
    assert policy.network_evaluations == 0


def test_network_evaluations_are_the_wrapped_models_own_count_when_it_keeps_one():
    class Counted(CountingPolicy):
        @property
        def network_evaluations(self):
            return 10 * self.calls  # e.g. ten denoising steps per call

    policy = ReplanEvery(None, Counted, every=2)
    for _ in range(5):
        policy.select_action(None)
    assert policy.network_evaluations == 30


def test_hold_keeps_the_grip_and_stops_the_hand_and_repeat_repeats():
    hold = ReplanEvery(None, CountingPolicy, every=3, between="hold")
    actions = [hold.select_action(None) for _ in range(4)]
    assert actions[0].tolist() == [0.5, -0.5, 0.25, 0.125, 1.0]
    assert actions[1].tolist() == actions[2].tolist() == [0.0, 0.0, 0.0, 0.0, 1.0]
    assert actions[3][-1] == 2.0
    repeat = ReplanEvery(None, CountingPolicy, every=3, between="repeat")
    actions = [repeat.select_action(None) for _ in range(3)]
    assert actions[0].tolist() == actions[1].tolist() == actions[2].tolist()


def test_reset_starts_a_fresh_schedule():
    policy = ReplanEvery(None, CountingPolicy, every=2)
    for _ in range(5):
        policy.select_action(None)
    policy.reset()
    policy.select_action(None)
    assert policy.compute_calls == 1 and policy.inner.calls == 1


@pytest.mark.parametrize(
    ("every", "between"), [(0.5, "hold"), (float("nan"), "hold"), ("2", "hold"), (2, "skip")]
)
def test_bad_arguments_are_refused(every, between):
    with pytest.raises(ValueError, match="every|between"):
        ReplanEvery(None, CountingPolicy, every=every, between=between)
