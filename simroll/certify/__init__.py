"""CARE: certify accelerated policies against a reference with paired rollouts.

``settings`` (what is guaranteed, input errors), ``paired`` (paired outcomes, failure-triggered
reference rollouts), ``care`` (fixed-n form: exact binomial tests, fixed-sequence / Bonferroni),
``sequential`` (anytime-valid e-process form), ``certificate`` (measured compute, the deployed
policy, JSON / Markdown / plot), ``rollouts`` (calibration specs and rollouts through the episode
engine), ``run`` (the whole certification as one call), ``synthetic`` (vectorised validation on
known risks) and ``accel`` (a stand-in accelerated policy). The command is ``simroll certify``.

The package is itself callable: ``simroll.certify(reference, candidates, ...)`` is
:func:`simroll.certify.run.certify`. It has to be the package, not a function of that name:
importing any submodule (``simroll.certify.care``) sets the attribute ``simroll.certify`` to the
package, which would shadow a function there.
"""

import sys
import types
from typing import Any

from simroll.certify.care import CandidateDecision, Certification, run_fixed
from simroll.certify.certificate import Certificate, PolicyCost, build_certificate, measure_cost
from simroll.certify.paired import ArraySource, pair_records
from simroll.certify.sequential import run_sequential
from simroll.certify.settings import CareSettings, CertifyArgumentError, CertifyError, PairingError

__all__ = [
    "ArraySource",
    "CandidateDecision",
    "CareSettings",
    "Certificate",
    "Certification",
    "CertifyArgumentError",
    "CertifyError",
    "PairingError",
    "PolicyCost",
    "build_certificate",
    "measure_cost",
    "pair_records",
    "run_fixed",
    "run_sequential",
]


class _CallablePackage(types.ModuleType):
    """This package, callable as :func:`simroll.certify.run.certify` (see the docstring)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Certificate:
        from simroll.certify.run import certify  # imported on call: it loads the episode engine

        return certify(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
