"""Scoring: success rates, deformation-aware success, confidence intervals, summary files."""
