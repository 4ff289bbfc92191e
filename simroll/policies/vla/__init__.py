"""SimVLA, simroll's small vision-language-action policy, in LeRobot's policy layout.

Importing this package registers the LeRobot policy type ``simvla`` (``SimVLAConfig``); LeRobot
then finds ``SimVLAPolicy`` and ``make_simvla_pre_post_processors`` in the sibling
``modeling_simvla``/``processor_simvla`` modules by its naming convention.
"""

from simroll.policies.vla.configuration_simvla import SimVLAConfig
from simroll.policies.vla.modeling_simvla import SimVLAPolicy, quantize_int8
from simroll.policies.vla.processor_simvla import make_simvla_pre_post_processors

__all__ = ["SimVLAConfig", "SimVLAPolicy", "make_simvla_pre_post_processors", "quantize_int8"]
