"""The plugins desched knows by name, and which of the two extension points it models (filter,
score) each implements: kube-scheduler's in-tree registry and koord-scheduler's plugins."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from desched.scheduler.config.types import LOAD_AWARE
from desched.scheduler.profile import DEFAULT_SCORE_WEIGHTS

FILTER, SCORE = "filter", "score"
NONE: frozenset[str] = frozenset()
_FS = frozenset({FILTER, SCORE})
_FO, _SO = frozenset({FILTER}), frozenset({SCORE})

# kube-scheduler's in-tree registry (framework/plugins/registry.go).
KUBE_PLUGINS: Mapping[str, frozenset[str]] = MappingProxyType({
    "SchedulingGates": NONE, "PrioritySort": NONE, "NodeUnschedulable": _FO, "NodeName": _FO,
    "TaintToleration": _FS, "NodeAffinity": _FS, "NodePorts": _FO, "NodeResourcesFit": _FS,
    "VolumeRestrictions": _FO, "NodeVolumeLimits": _FO, "VolumeBinding": _FS, "VolumeZone": _FO,
    "PodTopologySpread": _FS, "InterPodAffinity": _FS, "DefaultPreemption": NONE,
    "NodeResourcesBalancedAllocation": _SO, "ImageLocality": _SO, "DefaultBinder": NONE,
    "DynamicResources": _FS, "NodeDeclaredFeatures": _FO, "GangScheduling": NONE,
    "TopologyPlacementGenerator": NONE, "PodGroupPodsCount": NONE,
    # Removed since; the v1beta2 and v1beta3 configurations of older schedulers still name them.
    "EBSLimits": _FO, "GCEPDLimits": _FO, "AzureDiskLimits": _FO, "CinderLimits": _FO,
    "SelectorSpread": _SO,
})
# Plugins v1 rejects by name (validation.go invalidPluginsByVersion).
V1_INVALID = ("AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits")
# koord-scheduler's plugins (cmd/koord-scheduler/main.go).
KOORD_PLUGINS: Mapping[str, frozenset[str]] = MappingProxyType({
    LOAD_AWARE: _FS, "NodeNUMAResource": _FS, "Reservation": _FS, "Coscheduling": _SO,
    "DeviceShare": _FS, "ElasticQuota": NONE, "DefaultPreBind": NONE,
    "NodeResourcesFitPlus": _SO, "ScarceResourceAvoidance": _SO, "SchedulingHint": NONE,
})
KNOWN: Mapping[str, frozenset[str]] = MappingProxyType({**KUBE_PLUGINS, **KOORD_PLUGINS})
# Score plugins the models weigh.
MODELLED_SCORES = frozenset({*DEFAULT_SCORE_WEIGHTS, LOAD_AWARE})
# Known filters and scores left out without a word: volumes and host ports, which a snapshot
# does not hold.
SILENT = frozenset({"NodePorts", "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding",
                    "VolumeZone", "EBSLimits", "GCEPDLimits", "AzureDiskLimits",
                    "CinderLimits"})
