"""SoftSqueeze: squeeze a deformable object to a target grip force, read by touch.

**Task description.** The hand must close on the soft object where it lies and squeeze until each
finger's tactile normal force is within ``FORCE_BAND`` (1.5-4.0 N), then hold it there. The force
is what the policy's tactile images measure, so a policy can close the loop on touch; how much the
object deforms on the way is what DSR judges.

**Randomizations.** As SoftLift.

**Success conditions.** Both fingers' total normal force (sum of their taxels) lies in
``FORCE_BAND`` and the object's centre stays within 2 cm of its resting height, for 8 consecutive
control steps. The time limit is 100 control steps (5 s).
"""

from __future__ import annotations

from typing import Any

from simroll.envs.core import SoftTaskEnv

FORCE_BAND = (1.5, 4.0)


class SoftSqueezeEnv(SoftTaskEnv):
    task_name = "SoftSqueeze"
    instruction = "squeeze the {object} firmly but carefully"

    def evaluate(self) -> dict[str, Any]:
        forces = self._tactile_reading.normal_force
        in_band = bool(((forces >= FORCE_BAND[0]) & (forces <= FORCE_BAND[1])).all())
        on_table = abs(self.object_center()[2] - self.rest_center[2]) < 0.02
        return {"success": bool(in_band and on_table), "finger_force": forces.tolist()}
