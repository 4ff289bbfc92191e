"""Test-wide set-up: headless rendering before anything imports MuJoCo."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")
