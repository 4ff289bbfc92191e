"""SoftPlace: carry a deformable object to a target zone on the table and release it.

**Task description.** The hand must grasp the soft object, carry it to the green target disc and
let go, leaving the object resting inside the zone with the gripper no longer touching it.

**Randomizations.** As SoftLift for hand and object; the target centre is drawn at a distance of
10-14 cm from the object in a random direction (kept on the table).

**Success conditions.** The object's centre lies within ``PLACE_RADIUS`` = 3 cm of the target
centre (horizontally), within 1.5 cm of its resting height, with no pad contact, for 8 consecutive
control steps. The time limit is 200 control steps (10 s).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simroll.envs.core import SoftTaskEnv

PLACE_RADIUS = 0.03
TARGET_RANGE = 0.18  # the reset keeps the target centre's x and y within +-this


class SoftPlaceEnv(SoftTaskEnv):
    task_name = "SoftPlace"
    instruction = "put the {object} on the green target"

    def _randomize_task(self, rng: np.random.Generator) -> None:
        center = self.object_center()
        angle = rng.uniform(-math.pi, math.pi)
        distance = rng.uniform(0.10, 0.14)
        target = center[:2] + distance * np.array([math.cos(angle), math.sin(angle)])
        target = np.clip(target, -TARGET_RANGE, TARGET_RANGE)
        self.model.site_pos[self.ids.target_site][:2] = target

    def evaluate(self) -> dict[str, Any]:
        center = self.object_center()
        offset = float(np.linalg.norm(center[:2] - self.goal_position()[:2]))
        resting = abs(center[2] - self.rest_center[2]) < 0.015
        released = bool((self._tactile_reading.normal_force <= 0.01).all())
        return {
            "success": bool(offset <= PLACE_RADIUS and resting and released),
            "distance_to_goal": offset,
        }
