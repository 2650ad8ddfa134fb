"""The node-local filters' verdicts (NodeUnschedulable, NodeAffinity, TaintToleration,
NodeResourcesFit) per node, kept for the pods that ask the same question while the node's pods
stay the same.

A replacement no node takes is placed again each time an evicted pod leaves (kube-scheduler
retries it), and a workload's replacements are placed one after the other: the nodes of their
pool are asked the same question many times, and only a node that pods came to or left can
answer otherwise. A verdict is kept with the node's version (ClusterSnapshot.node_version,
bumped whenever a pod comes or goes) and asked again once that changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from desched.model.node import Node
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot

_encoder = msgspec.json.Encoder(enc_hook=str)

Refuse = Callable[[Node, ClusterSnapshot], "str | None"]


def local_key(pod: Pod) -> bytes:
    """What the node-local filters read from the pod: nodeSelector and required node affinity,
    tolerations, requests, and the node it is bound to (its own requests count there)."""
    spec = pod.spec
    node_affinity = spec.affinity.node_affinity if spec.affinity is not None else None
    required = (node_affinity.required_during_scheduling_ignored_during_execution
                if node_affinity is not None else None)
    return _encoder.encode((spec.node_selector, required, spec.tolerations, pod.requests,
                            spec.node_name))


_CACHE = "scheduler.verdicts"
# Kept per snapshot, the least recently used table going first past either: a table holds a
# verdict per candidate (5,000 for a pod pinned nowhere on the largest measured cluster).
MAX = 1024
MAX_VERDICTS = 500_000

# (a pod's key, id of the profile) -> (the profile, the node list, node name -> verdict): here
# the verdict is (the node's version when asked, why the filters refused it or None).
Tables = dict[tuple[bytes, int], tuple[object, list[Node], dict[str, Any]]]


def kept_table(snapshot: ClusterSnapshot, cache: str, key: tuple[bytes, int], profile: object,
               size: int) -> dict[str, Any]:
    """The table of node verdicts kept under `key` (a pod's key, the profile's id) in the
    snapshot's cache `cache`, made the most recently used; a new one when the profile or the
    node list changed. The least recently used tables go past MAX tables, or past MAX_VERDICTS
    verdicts with `size` more to come."""
    nodes = snapshot.all_nodes()
    tables: Tables = snapshot.caches.setdefault(cache, {})
    found = tables.pop(key, None)
    if found is None or found[0] is not profile or found[1] is not nodes:
        kept = sum(len(t[2]) for t in tables.values())
        while tables and (len(tables) >= MAX or kept + size > MAX_VERDICTS):
            kept -= len(tables.pop(next(iter(tables)))[2])
        found = (profile, nodes, {})
    tables[key] = found
    return found[2]


def refusals(pod: Pod, profile: object, candidates: Sequence[Node], snapshot: ClusterSnapshot,
             refuse: Callable[[], Refuse]) -> list[tuple[Node, str | None]]:
    """Each candidate with why the profile's node-local filters refuse the pod there (None: it
    passes), in order; `refuse` compiles the filters for the pod, called only when a node must
    be asked."""
    table = kept_table(snapshot, _CACHE, (local_key(pod), id(profile)), profile,
                       len(candidates))
    versions = snapshot.node_version
    check: Refuse | None = None
    out: list[tuple[Node, str | None]] = []
    for node in candidates:
        name = node.metadata.name
        version = versions.get(name, 0)
        known = table.get(name)
        if known is not None and known[0] == version:
            out.append((node, known[1]))
            continue
        if check is None:
            check = refuse()
        problem = check(node, snapshot)
        table[name] = (version, problem)
        out.append((node, problem))
    return out
