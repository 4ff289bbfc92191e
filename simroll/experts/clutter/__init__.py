"""Privileged experts of the clutter family: the search teacher (and its digital twin)."""

from simroll.experts.clutter.teacher import ClutterTeacher, Plan

__all__ = ["ClutterTeacher", "Plan"]
