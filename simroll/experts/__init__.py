"""Scripted, privileged experts: they read the simulator (a twin of the policy's world)."""

from simroll.experts.soft import CLOSURES, SoftExpert

__all__ = ["CLOSURES", "SoftExpert"]
