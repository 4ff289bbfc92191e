"""The TRACE student, the clutter family's plan-conditioned recurrent policy, in LeRobot's layout.

Importing this package registers the LeRobot policy type ``trace_student``; LeRobot finds
``TraceStudentPolicy`` and ``make_trace_student_pre_post_processors`` in the sibling
``modeling_trace``/``processor_trace`` modules by its naming convention.
"""

from simroll.policies.trace.configuration_trace import TraceStudentConfig
from simroll.policies.trace.modeling_trace import TraceStudentPolicy
from simroll.policies.trace.processor_trace import make_trace_student_pre_post_processors

__all__ = ["TraceStudentConfig", "TraceStudentPolicy", "make_trace_student_pre_post_processors"]
