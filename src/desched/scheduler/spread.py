"""PodTopologySpread as kube-scheduler runs it for one incoming pod: its constraints (its own,
or the profile's defaults with the selector the pod's Services and controller give), the
ScheduleAnyway score before normalization, and the DoNotSchedule filter."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import msgspec

from desched.model.labels import lenient_matcher
from desched.model.meta import LabelSelector, LabelSelectorRequirement
from desched.model.node import Node
from desched.model.pod import Pod, TopologySpreadConstraint
from desched.predicates.nodeaffinity import (
    required_affinity_matcher,
)
from desched.predicates.nodefit import affinity_space
from desched.predicates.taints import SCHEDULING_EFFECTS, first_untolerated
from desched.scheduler import scores as sc
from desched.scheduler.default_spread import default_selector
from desched.scheduler.profile import Profile
from desched.snapshot.cluster import ClusterSnapshot

_HOSTNAME = "kubernetes.io/hostname"
_encoder = msgspec.json.Encoder(enc_hook=str)


def _with_match_label_keys(c: TopologySpreadConstraint, pod: Pod) -> LabelSelector | None:
    """The constraint's selector with matchLabelKeys folded in (the pod's values of them)."""
    selector = c.label_selector
    if not c.match_label_keys or selector is None:
        return selector  # no selector selects nothing, whatever the keys add
    extra = {k: pod.metadata.labels[k] for k in c.match_label_keys if k in pod.metadata.labels}
    if not extra:
        return selector
    own = selector.match_labels or {}
    # A key the selector already names with another value: both requirements hold.
    clash = [LabelSelectorRequirement(key=k, operator="In", values=(v,))
             for k, v in extra.items() if k in own and own[k] != v]
    merged = {**extra, **own}
    return LabelSelector(match_labels=merged,
                         match_expressions=[*(selector.match_expressions or []), *clash] or None)


Spread = tuple[TopologySpreadConstraint, LabelSelector | None]


def spread_constraints(pod: Pod, snapshot: ClusterSnapshot, profile: Profile, action: str
                       ) -> tuple[list[Spread], bool]:
    """The pod's constraints with `action` (whenUnsatisfiable) and their selectors, and
    whether every node must carry all their topology keys (not so for the system defaults)."""
    own = pod.spec.topology_spread_constraints
    if own:
        return [(c, _with_match_label_keys(c, pod)) for c in own
                if (c.when_unsatisfiable or "DoNotSchedule") == action], True
    defaults = [c for c in profile.spread.effective
                if (c.when_unsatisfiable or "DoNotSchedule") == action]
    if not defaults:
        return [], False
    selector = default_selector(pod, snapshot)
    if selector is None:
        return [], False
    return [(c, selector) for c in defaults], not profile.spread.system


def _counted_domains(pod: Pod, c: TopologySpreadConstraint, nodes: Sequence[Node],
                     keys: Sequence[str], require_all: bool, snapshot: ClusterSnapshot
                     ) -> tuple[dict[str, str], frozenset[str]]:
    """The nodes whose pods count toward a constraint -> their value of its topology key ("" for
    none), and those values. A node counts by nodeAffinityPolicy (Honor by default: the pod's
    nodeSelector and required affinity match it), nodeTaintsPolicy (Ignore by default), and
    carrying every topology key when that is required. Kept per node list for each set of what
    decides it (the replicas of a workload, the workloads of a pool share one)."""
    honor_affinity = c.node_affinity_policy != "Ignore"
    honor_taints = c.node_taints_policy == "Honor"
    spec = pod.spec
    node_affinity = spec.affinity.node_affinity if spec.affinity is not None else None
    required = (node_affinity.required_during_scheduling_ignored_during_execution
                if node_affinity is not None else None)
    key = _encoder.encode((
        (spec.node_selector, required) if honor_affinity else None,
        spec.tolerations if honor_taints else None, c.topology_key, keys, require_all))
    cached = snapshot.caches.get("spread.counted")
    if cached is None or cached[0] is not nodes:
        cached = snapshot.caches["spread.counted"] = (nodes, {})
    known: dict[bytes, tuple[dict[str, str], frozenset[str]]] = cached[1]
    found = known.get(key)
    if found is not None:
        return found
    match = required_affinity_matcher(pod) if honor_affinity else None
    counted: dict[str, str] = {}
    for node in affinity_space(pod, nodes, snapshot) if honor_affinity else nodes:
        labels = node.metadata.labels
        if require_all and any(k not in labels for k in keys):
            continue
        if match is not None and not match(node):
            continue
        if honor_taints and node.spec.taints and first_untolerated(
                node.spec.taints, spec.tolerations, SCHEDULING_EFFECTS) is not None:
            continue
        counted[node.metadata.name] = labels.get(c.topology_key, "")
    found = known[key] = (counted, frozenset(counted.values()))
    return found


def matching_per_node(pod: Pod, selector: LabelSelector | None,
                      snapshot: ClusterSnapshot) -> Counter[str]:
    """Pods of the pod's namespace that `selector` matches, per node (not the pod itself, which
    is leaving; not terminal or deleted ones)."""
    match = lenient_matcher(selector)
    per_node: Counter[str] = Counter()
    if match is None or selector is None or (
            not selector.match_labels and not selector.match_expressions):
        return per_node  # an empty selector counts nothing
    key = pod.key
    for _, other in snapshot.candidates(pod.namespace, selector):
        node = other.spec.node_name
        if (node and not other.terminal and other.metadata.deletion_timestamp is None
                and match(other.metadata.labels) and other.key != key):
            per_node[node] += 1
    return per_node


def spread_raw(pod: Pod, feasible: Sequence[Node], nodes: Sequence[Node],
               snapshot: ClusterSnapshot, profile: Profile
               ) -> tuple[dict[str, int], frozenset[str]] | None:
    """PodTopologySpread's raw scores over the feasible nodes and the nodes it ignores, or
    None when the plugin skips (no soft constraints, an empty default selector)."""
    constraints, require_all = spread_constraints(pod, snapshot, profile, "ScheduleAnyway")
    if not constraints:
        return None
    keys = [c.topology_key for c, _ in constraints]
    ignored = frozenset(n.metadata.name for n in feasible if require_all and any(
        k not in n.metadata.labels for k in keys))
    scored = [n for n in feasible if n.metadata.name not in ignored]
    raw = {n.metadata.name: 0.0 for n in feasible}
    for c, selector in constraints:
        per_node = matching_per_node(pod, selector, snapshot)
        key = c.topology_key
        if key == _HOSTNAME:
            weight = sc.topology_weight(len(scored))
            for n in scored:
                if key in n.metadata.labels:
                    raw[n.metadata.name] += sc.spread_part(
                        per_node.get(n.metadata.name, 0), c.max_skew, weight)
            continue
        domains = {n.metadata.labels.get(key, "") for n in scored}
        counts = dict.fromkeys(domains, 0)
        counted = _counted_domains(pod, c, nodes, keys, require_all, snapshot)[0]
        for name, matching in per_node.items():
            value = counted.get(name)
            if value is not None and value in counts:
                counts[value] += matching
        weight = sc.topology_weight(len(domains))
        for n in scored:
            domain = n.metadata.labels.get(key)
            if domain is not None:
                raw[n.metadata.name] += sc.spread_part(counts[domain], c.max_skew, weight)
    return {name: sc.go_round(v) for name, v in raw.items()}, ignored


def spread_misses(pod: Pod, fits: Sequence[Node], nodes: Sequence[Node],
                  snapshot: ClusterSnapshot, profile: Profile) -> set[str]:
    """The nodes PodTopologySpread's filter refuses: a node without a constraint's topology
    key, or whose domain would exceed maxSkew over the least populated eligible domain (0 while
    fewer than minDomains domains exist)."""
    constraints, _ = spread_constraints(pod, snapshot, profile, "DoNotSchedule")
    misses: set[str] = set()
    keys = [c.topology_key for c, _ in constraints]
    for c, selector in constraints:
        key = c.topology_key
        per_node = matching_per_node(pod, selector, snapshot)
        counted, domains = _counted_domains(pod, c, nodes, keys, True, snapshot)
        counts: Counter[str] = Counter()
        for name, matching in per_node.items():
            value = counted.get(name)
            if value is not None:
                counts[value] += matching
        # The least populated domain: one without a matching pod when some has none.
        lowest = min(counts.values()) if len(counts) == len(domains) and counts else 0
        if c.min_domains is not None and len(domains) < c.min_domains:
            lowest = 0
        match = lenient_matcher(selector)
        own = 1 if match is not None and match(pod.metadata.labels) else 0
        for n in fits:
            domain = n.metadata.labels.get(key)
            if domain is None or counts.get(domain, 0) + own - lowest > c.max_skew:
                misses.add(n.metadata.name)
    return misses



def counted_nodes(pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot, profile: Profile
                  ) -> list[tuple[dict[str, str], LabelSelector | None]]:
    """For each DoNotSchedule constraint of the pod, the nodes whose pods it counts (-> their
    domain) and the selector it counts them by, as spread_misses counts over `nodes`."""
    constraints, _ = spread_constraints(pod, snapshot, profile, "DoNotSchedule")
    keys = [c.topology_key for c, _ in constraints]
    return [(_counted_domains(pod, c, nodes, keys, True, snapshot)[0], selector)
            for c, selector in constraints]
