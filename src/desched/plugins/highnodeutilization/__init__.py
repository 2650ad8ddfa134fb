"""HighNodeUtilization: upstream's plugin (plugin.py) and desched's drainWhenAllUnderutilized
(drain.py)."""

from desched.plugins.highnodeutilization.plugin import (
    SPEC,
    HighNodeUtilization,
    HighNodeUtilizationArgs,
    validate,
)

__all__ = ["SPEC", "HighNodeUtilization", "HighNodeUtilizationArgs", "validate"]
