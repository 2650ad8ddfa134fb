"""What a pod no node takes waits on: the nodes whose pods its answer depends on, and which pods
coming or going there may let it in (scheduler/waiting.py's `Wait`).

kube-scheduler tries a pending pod again each time a pod leaves, and so does `--reschedule` (a
replacement waits while the evicted pods terminate: scheduler/placement.py); most tries find
nothing new. A search that found no node for a pod without required pod affinity of its own
depended only on the pods of some nodes: the candidates (the node-local filters), the nodes
whose pods its DoNotSchedule spread constraints count, and the nodes that share a topology
domain with a candidate for the keys of the required anti-affinity terms that select it or that
it carries. Then only these let it in:
- a pod leaving a candidate, when the candidate's node-local filters now pass the pod (a pod
  coming only takes room);
- a pod leaving whose required anti-affinity selected the pod, or which the pod's own selected
  (a pod coming can only block more);
- a pod coming or leaving that a spread constraint of the pod counts (kube-scheduler does not
  count a terminating pod).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence

import msgspec

from desched.model.labels import Matcher, lenient_matcher, selector_is_empty
from desched.model.meta import LabelSelector
from desched.model.node import Node
from desched.model.pod import Pod
from desched.scheduler.affinity_index import AffinityIndex
from desched.scheduler.interpod import required_anti_affinity, term_selects
from desched.snapshot.cluster import ClusterSnapshot

_CACHE = "scheduler.nowhere"
_encoder = msgspec.json.Encoder(enc_hook=str)

Refuse = Callable[[Node, ClusterSnapshot], "str | None"]


def rememberable(pod: Pod) -> bool:
    """An unbound pod without required pod affinity terms of its own (a pod coming anywhere
    may satisfy those)."""
    a = pod.spec.affinity
    return not pod.spec.node_name and (
        a is None or a.pod_affinity is None
        or not a.pod_affinity.required_during_scheduling_ignored_during_execution)


class Domains:
    """The nodes in the domains (values of one topology key) of some nodes."""

    __slots__ = ("_members", "_of", "_values")

    def __init__(self, of: dict[str, str], members: dict[str, list[str]],
                 around: Iterable[str]) -> None:
        self._of = of
        self._members = members
        self._values = {of[name] for name in around if name in of}

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._of.get(name) in self._values

    def __iter__(self) -> Iterator[str]:
        for value in self._values:
            yield from self._members.get(value, ())

    def __len__(self) -> int:
        return sum(len(self._members.get(value, ())) for value in self._values)


class Counted:
    """A DoNotSchedule spread constraint's counted nodes, and whether it counts a pod there."""

    __slots__ = ("match", "nodes")

    def __init__(self, nodes: dict[str, str], selector: LabelSelector | None) -> None:
        self.nodes = nodes
        self.match: Matcher | None = (None if selector_is_empty(selector)
                                      else lenient_matcher(selector))

    def counts(self, pod: Pod, node: str, placing: Pod) -> bool:
        return (self.match is not None and node in self.nodes
                and pod.namespace == placing.namespace and not pod.terminal
                and pod.metadata.deletion_timestamp is None and self.match(pod.metadata.labels))


class Failed:
    """A search that found no node for `pod`, and what it depended on."""

    __slots__ = ("_refuse", "candidates", "compile", "counted", "interpod", "model", "pod",
                 "watched")

    def __init__(self, model: object, pod: Pod, candidates: Collection[str], counted: list[Counted],
                 domains: list[Domains], interpod: bool, compile: Callable[[], Refuse]) -> None:
        self.model = model
        self.pod = pod
        self.candidates = candidates
        self.counted = counted
        self.watched: list[Collection[str]] = [candidates, *(c.nodes for c in counted),
                                               *domains]
        self.interpod = interpod  # InterPodAffinity filters
        self.compile = compile  # the pod's node-local filters, compiled when first needed
        self._refuse: Refuse | None = None

    def refuse(self, node: Node, snapshot: ClusterSnapshot) -> str | None:
        if self._refuse is None:
            self._refuse = self.compile()
        return self._refuse(node, snapshot)


def remember(snapshot: ClusterSnapshot, failed: Failed) -> None:
    """Keep the last search that found no node for a pod."""
    found: dict[str, Failed] = snapshot.caches.setdefault(_CACHE, {})
    found[failed.pod.key] = failed


def last_failed(model: object, pod: Pod, snapshot: ClusterSnapshot) -> Failed | None:
    """The search that last found no node for this very pod."""
    found: Failed | None = snapshot.caches.get(_CACHE, {}).get(pod.key)
    if found is None or found.pod is not pod or found.model is not model:
        return None
    return found


class FailedWait:
    """scheduler/waiting.py's Wait, from the pod's last search (see the module's doc)."""

    __slots__ = ("_failed", "_snapshot", "key")

    def __init__(self, failed: Failed, snapshot: ClusterSnapshot, key: Hashable) -> None:
        self._failed = failed
        self._snapshot = snapshot
        self.key = key

    def watched(self) -> list[Collection[str]]:
        return self._failed.watched

    def wakes(self, pod: Pod, node: str, came: bool) -> bool:
        failed, snapshot = self._failed, self._snapshot
        placing = failed.pod
        if not came:
            if node in failed.candidates:
                target = snapshot.nodes.get(node)
                if target is not None and failed.refuse(target, snapshot) is None:
                    return True
            if failed.interpod and (
                    any(term_selects(t, pod, placing, snapshot)
                        for t in required_anti_affinity(pod))
                    or any(term_selects(t, placing, pod, snapshot)
                           for t in required_anti_affinity(placing))):
                return True
        return any(c.counts(pod, node, placing) for c in failed.counted)


def wait_key(pod: Pod, local: bytes, profile: object) -> bytes:
    """What the filters read from a pod besides its name: replacements of one workload share
    it, and a search gives them the same answer."""
    meta, spec = pod.metadata, pod.spec
    return _encoder.encode((local, id(profile), meta.namespace, meta.labels,
                            meta.owner_references, spec.affinity,
                            spec.topology_spread_constraints))



def names_of(candidates: Sequence[Node], snapshot: ClusterSnapshot) -> frozenset[str]:
    """The candidates' names, one set per candidate list (a signature's affinity space)."""
    known: dict[int, tuple[Sequence[Node], frozenset[str]]] = snapshot.caches.setdefault(
        "nowhere.names", {})
    found = known.get(id(candidates))
    if found is None or found[0] is not candidates:
        found = known[id(candidates)] = (candidates,
                                         frozenset(n.metadata.name for n in candidates))
    return found[1]


def domains_around(key: str, names: frozenset[str], index: AffinityIndex,
                   snapshot: ClusterSnapshot) -> Domains:
    """The nodes sharing a domain of `key` with one of `names`, one object per both."""
    known: dict[tuple[str, int], tuple[frozenset[str], Domains]] = snapshot.caches.setdefault(
        "nowhere.domains", {})
    found = known.get((key, id(names)))
    if found is None or found[0] is not names:
        found = known[(key, id(names))] = (names, Domains(*index.node_domains(key), names))
    return found[1]
