"""World models that estimate their own rollout error (round-trip consistency).

One conditional latent diffusion model steps the soft-object dynamics forward or backward in time
by a direction flag; rolling forward ``i`` steps and back again gives ``C_i``, a measurement-free
signal that tracks the unobservable forward error ``E_i``. Modules: ``data`` (trajectories from
the simulator through the episode engine), ``latent`` (PCA latent), ``model`` (the diffusion
model and its training), ``roundtrip`` (rollouts carrying the trust signal, selective
prediction), ``calibrate`` (C_i -> error estimate with intervals), ``pipeline`` (the collect
and train stages behind ``simroll roundtrip``), ``evaluate`` and ``plots`` (the measures and
figures of the benchmark, ``scripts/bench_roundtrip.py``).
"""

from simroll.worldmodel.calibrate import RoundTripCalibrator
from simroll.worldmodel.latent import StateLatent
from simroll.worldmodel.model import DiffusionWorldModel, WorldModelConfig
from simroll.worldmodel.roundtrip import RoundTripWorldModel, TrustedRollout

__all__ = [
    "DiffusionWorldModel",
    "RoundTripCalibrator",
    "RoundTripWorldModel",
    "StateLatent",
    "TrustedRollout",
    "WorldModelConfig",
]
