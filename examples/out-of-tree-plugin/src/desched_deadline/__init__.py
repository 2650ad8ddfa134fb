"""desched-deadline: the RemovePodsPastDeadline plugin for desched. The package's entry point
(`desched.plugins`: `RemovePodsPastDeadline = "desched_deadline:SPEC"`) names SPEC."""

from desched_deadline.plugin import (
    ANNOTATION,
    SPEC,
    RemovePodsPastDeadline,
    RemovePodsPastDeadlineArgs,
    validate,
)

__all__ = ["ANNOTATION", "SPEC", "RemovePodsPastDeadline", "RemovePodsPastDeadlineArgs",
           "validate"]
