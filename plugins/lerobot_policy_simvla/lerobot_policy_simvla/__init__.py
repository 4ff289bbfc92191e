"""LeRobot policy plugin for simroll's learned policies: ``lerobot-train --policy.type=simvla``
(SimVLA), ``--policy.type=trace_student`` (the clutter family's TRACE student) and
``--policy.type=wam`` (the world-action model, rollout or RIFT mode).

LeRobot's CLIs import every installed distribution whose name starts with ``lerobot_policy_``
(``register_third_party_plugins``); importing this one imports :mod:`simroll.policies.vla`, which
registers ``SimVLAConfig`` under the policy type ``simvla``, and :mod:`simroll.policies.trace`,
which registers ``TraceStudentConfig`` under ``trace_student``, and :mod:`simroll.policies.wam`
(``WAMConfig``, ``wam``). LeRobot's factory then resolves the
policy class and its processors by naming convention from the config class's module
(``configuration_simvla`` -> ``modeling_simvla.SimVLAPolicy`` and
``processor_simvla.make_simvla_pre_post_processors``; the same for the others), so
nothing else needs registering.
"""

from __future__ import annotations

from simroll.policies.trace import (
    TraceStudentConfig,
    TraceStudentPolicy,
    make_trace_student_pre_post_processors,
)
from simroll.policies.vla import SimVLAConfig, SimVLAPolicy, make_simvla_pre_post_processors
from simroll.policies.wam import WAMConfig, WAMPolicy, make_wam_pre_post_processors

__all__ = [
    "SimVLAConfig",
    "SimVLAPolicy",
    "TraceStudentConfig",
    "TraceStudentPolicy",
    "WAMConfig",
    "WAMPolicy",
    "make_simvla_pre_post_processors",
    "make_trace_student_pre_post_processors",
    "make_wam_pre_post_processors",
]
