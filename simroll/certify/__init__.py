"""CARE: certify accelerated policies against a reference with paired rollouts.

``settings`` (what is guaranteed, input errors), ``paired`` (paired outcomes, failure-triggered
reference rollouts), ``care`` (fixed-n form: exact binomial tests, fixed-sequence / Bonferroni),
``sequential`` (anytime-valid e-process form), ``certificate`` (measured compute, the deployed
policy, JSON / Markdown / plot), ``rollouts`` (calibration specs and rollouts through the episode
engine), ``synthetic`` (vectorised validation on known risks) and ``accel`` (a stand-in
accelerated policy). The command is ``simroll certify``.
"""

from simroll.certify.care import CandidateDecision, Certification, run_fixed
from simroll.certify.certificate import Certificate, PolicyCost, build_certificate, measure_cost
from simroll.certify.paired import ArraySource, pair_records
from simroll.certify.sequential import run_sequential
from simroll.certify.settings import CareSettings, CertifyError, PairingError

__all__ = [
    "ArraySource",
    "CandidateDecision",
    "CareSettings",
    "Certificate",
    "Certification",
    "CertifyError",
    "PairingError",
    "PolicyCost",
    "build_certificate",
    "measure_cost",
    "pair_records",
    "run_fixed",
    "run_sequential",
]
