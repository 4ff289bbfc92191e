"""simroll: closed-loop robot-policy rollouts in MuJoCo with deformation-aware scoring."""

__version__ = "0.1.0"
