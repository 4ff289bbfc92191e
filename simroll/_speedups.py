"""One switch for the throughput fast paths, so a run can be repeated without them.

The fast paths change how work is done, never what an episode computes (the records' receipts
are the same with and without them; ``scripts/bench_throughput.py`` checks it):

* lazy camera images (``simroll.envs.sensing.LazyImages``): an observation captures each
  camera's scene when it is made and renders it only when its pixels are read, so a policy
  that skips the observations between re-plans (SimVLA, ACT, diffusion in ``LeRobotPolicy``)
  renders one step in ``n_action_steps``;
* right-sized offscreen buffers: a camera rig's GL framebuffer has the rig's image size
  instead of the scene's ``offwidth x offheight`` (MuJoCo renders into a corner of it);
* a per-process cache of loaded policy checkpoints (``simroll.policies.cache``): each episode
  gets a deep copy instead of reading and parsing the checkpoint again;
* one thread per vector worker for Mesa's llvmpipe, OpenMP, MKL, OpenBLAS and torch
  (``simroll.rollout.threads``), so two workers on two cores do not thrash.

Set ``SIMROLL_FAST_PATHS=0`` in the environment to turn all of them off (read each time it
matters, and inherited by worker processes).
"""

from __future__ import annotations

import os

ENV_VAR = "SIMROLL_FAST_PATHS"


def enabled() -> bool:
    """Whether the fast paths are on (unless ``SIMROLL_FAST_PATHS`` is 0, false, no or off)."""
    return os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "false", "no", "off")
