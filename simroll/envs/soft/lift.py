"""SoftLift: grasp a deformable object and lift it above the table.

**Task description.** A floating parallel-jaw hand starts above a soft object (sponge, tofu, foam
cylinder, ball, or any rigid twin) lying on the table. It must grasp the object, lift its centre
at least ``LIFT_HEIGHT`` above its resting height and hold it there with both pads in contact.

**Randomizations.** Hand start: x, y in [-2, 2] cm, z in [-3, 0] cm from its home pose. Object:
x, y in [-3, 3] cm, yaw in [-0.35, 0.35] rad for block-shaped objects. Physics variations (see
``simroll.envs.variations``) come from the ``variation`` option.

**Success conditions.** The object's centre is at least ``LIFT_HEIGHT`` = 6 cm above its rest
height and both finger pads touch it, for 8 consecutive control steps (0.4 s). The episode ends on
success; the time limit is 120 control steps (6 s).
"""

from __future__ import annotations

from typing import Any

from simroll.envs.core import SoftTaskEnv

LIFT_HEIGHT = 0.06


class SoftLiftEnv(SoftTaskEnv):
    task_name = "SoftLift"
    instruction = "pick up the {object} and lift it gently"

    def evaluate(self) -> dict[str, Any]:
        lifted = float(self.object_center()[2] - self.rest_center[2])
        both_pads = bool((self._tactile_reading.normal_force > 0.05).all())
        return {"success": bool(lifted >= LIFT_HEIGHT and both_pads), "lift_height": lifted}
