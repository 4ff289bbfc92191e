"""LeRobot policy plugin for simroll's SimVLA: ``lerobot-train --policy.type=simvla``.

LeRobot's CLIs import every installed distribution whose name starts with ``lerobot_policy_``
(``register_third_party_plugins``); importing this one imports :mod:`simroll.policies.vla`, which
registers ``SimVLAConfig`` under the policy type ``simvla``. LeRobot's factory then resolves the
policy class and its processors by naming convention from the config class's module
(``configuration_simvla`` -> ``modeling_simvla.SimVLAPolicy`` and
``processor_simvla.make_simvla_pre_post_processors``), so nothing else needs registering.
"""

from __future__ import annotations

from simroll.policies.vla import SimVLAConfig, SimVLAPolicy, make_simvla_pre_post_processors

__all__ = ["SimVLAConfig", "SimVLAPolicy", "make_simvla_pre_post_processors"]
