"""desched's public plugin API: what a plugin from another package imports
(docs/writing-plugins.md).

A package provides a plugin by declaring its PluginSpec in the entry-point group
`desched.plugins` (desched.plugins.catalog loads it); everything the spec, the plugin class and
its args need is here, typed. The rest of desched is private: a plugin importing it elsewhere
may break with any release. The built-in plugins are written against the same types.

- The spec: PluginSpec (name, extension points, args type, factory, validate, default,
  warnings, purpose, scope, annotations), and Scope with its parts (Reads, NamespaceScope,
  NodeScope), RoleThreshold for utilization plugins.
- What a plugin is handed and implements: Handle (the snapshot, the clock, the profile's
  filters, evictions, notes for `explain`), EvictionLimitError; the extension-point protocols
  (DeschedulePlugin, BalancePlugin, FilterPlugin) and the optional ones (ExplainsPods,
  Protects, ClassifiesNodes, ChecksThresholds, CarriesState, PersistsState).
- What it reads: ClusterSnapshot, Pod, Node, ObjectMeta, LabelSelector, and the shared args
  types and checks (Namespaces, validate_namespaces, validate_label_selector, namespace_scope,
  namespace_allowed), label selectors (compile_selector, parse_selector_string, Matcher), Go
  durations (parse_duration, format_duration, human_duration, DurationError) and nodeFit
  (pod_fits_any_other_node).
"""

from __future__ import annotations

from desched.framework.evictor import EvictionLimitError
from desched.framework.registry import (
    NamespaceScope,
    NodeScope,
    PluginSpec,
    Purpose,
    Reads,
    RoleThreshold,
    Scope,
    no_scope,
)
from desched.framework.types import (
    EXTENSION_POINTS,
    BalancePlugin,
    CarriesState,
    ChecksThresholds,
    ClassifiesNodes,
    DeschedulePlugin,
    ExplainsPods,
    FilterPlugin,
    Handle,
    PersistsState,
    Protects,
)
from desched.model.labels import (
    Matcher,
    SelectorError,
    compile_selector,
    format_selector,
    label_key_problem,
    parse_selector_string,
    selector_is_empty,
)
from desched.model.meta import LabelSelector, ObjectMeta
from desched.model.node import Node
from desched.model.pod import Pod
from desched.policy_files.args import (
    Namespaces,
    namespace_allowed,
    namespace_scope,
    validate_label_selector,
    validate_namespaces,
)
from desched.predicates.nodefit import pod_fits_any_other_node
from desched.snapshot.cluster import ClusterSnapshot
from desched.util.duration import DurationError, format_duration, human_duration, parse_duration

__all__ = [
    "EXTENSION_POINTS",
    "BalancePlugin",
    "CarriesState",
    "ChecksThresholds",
    "ClassifiesNodes",
    "ClusterSnapshot",
    "DeschedulePlugin",
    "DurationError",
    "EvictionLimitError",
    "ExplainsPods",
    "FilterPlugin",
    "Handle",
    "LabelSelector",
    "Matcher",
    "NamespaceScope",
    "Namespaces",
    "Node",
    "NodeScope",
    "ObjectMeta",
    "PersistsState",
    "PluginSpec",
    "Pod",
    "Protects",
    "Purpose",
    "Reads",
    "RoleThreshold",
    "Scope",
    "SelectorError",
    "compile_selector",
    "format_duration",
    "format_selector",
    "human_duration",
    "label_key_problem",
    "namespace_allowed",
    "namespace_scope",
    "no_scope",
    "parse_duration",
    "parse_selector_string",
    "pod_fits_any_other_node",
    "selector_is_empty",
    "validate_label_selector",
    "validate_namespaces",
]
