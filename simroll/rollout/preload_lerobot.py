"""Imports LeRobot's policy stack once, for processes that fork episode workers.

The first ``load_policy`` in a fresh process imports LeRobot's policy registry: every policy type
it ships, diffusers, ``torch._dynamo``, its processors (8-10 s of CPU on this project's 2-core
machines, 0.2 s for the load itself). Vector workers are forked from a fork server that imports
this module first (``simroll.rollout.worker_start``), so each inherits the imports instead of
paying them. Importing it never fails: anything missing is left to ``load_policy`` to report.
"""

from __future__ import annotations

try:  # noqa: SIM105 - an optional warm-up
    import lerobot.processor  # noqa: F401
    from lerobot.configs.policies import PreTrainedConfig  # noqa: F401
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors  # noqa: F401

    import simroll.policies.lerobot  # noqa: F401
    from simroll.policies.checkpoint import register_policy_types

    register_policy_types()
except Exception:  # noqa: BLE001, S110 - the worker's own load reports any real problem
    pass
