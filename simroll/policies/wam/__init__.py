"""The world-action model (LeRobot type ``wam``) in rollout and RIFT modes, in LeRobot's layout.

Importing this package registers the policy type ``wam``; LeRobot finds ``WAMPolicy`` and
``make_wam_pre_post_processors`` in the sibling ``modeling_wam``/``processor_wam`` modules by its
naming convention.
"""

from simroll.policies.wam.configuration_wam import WAMConfig
from simroll.policies.wam.modeling_wam import WAMPolicy
from simroll.policies.wam.processor_wam import make_wam_pre_post_processors

__all__ = ["WAMConfig", "WAMPolicy", "make_wam_pre_post_processors"]
