"""RemovePodsViolatingInterPodAntiAffinity: upstream's plugin on required terms (plugin.py), the
index of the pods terms select (index.py), and desched's includeSoftConstraints for preferred
ones (soft.py)."""

from desched.plugins.removepodsviolatinginterpodantiaffinity.index import AntiAffinityIndex
from desched.plugins.removepodsviolatinginterpodantiaffinity.plugin import (
    PLUGIN,
    SPEC,
    RemovePodsViolatingInterPodAntiAffinity,
    RemovePodsViolatingInterPodAntiAffinityArgs,
    validate,
)

__all__ = ["PLUGIN", "SPEC", "AntiAffinityIndex", "RemovePodsViolatingInterPodAntiAffinity",
           "RemovePodsViolatingInterPodAntiAffinityArgs", "validate"]
