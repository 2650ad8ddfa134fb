"""NodeFit: the subset of scheduler predicates the descheduler checks before evicting a pod.

Mirrors pkg/descheduler/node NodeFit. Each check returns upstream's error text, so callers can
explain why a pod fits nowhere. Nodes are tried in order and the search stops at the first fit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

import msgspec

from desched.model.labels import SelectorError
from desched.model.node import Node
from desched.model.pod import Pod
from desched.predicates.nodeaffinity import NodeMatcher, required_affinity_matcher
from desched.predicates.nodeindex import node_index
from desched.predicates.podaffinity import (
    AntiAffinityTerm,
    anti_affinity_conflict,
    compile_anti_affinity,
)
from desched.predicates.taints import SCHEDULING_EFFECTS, first_untolerated
from desched.snapshot.cluster import ClusterSnapshot
from desched.util.memo import remember

NOT_SCHEDULABLE = "node is not schedulable"
SELECTOR_MISMATCH = "pod node selector does not match the node label"
UNTOLERATED_TAINT = "pod does not tolerate taints on the node"
ANTI_AFFINITY = "pod matches inter-pod anti-affinity rule of other pod on node"

# Upstream computes these from allocatable even when the node does not list them; any other
# resource the node lacks has nothing available, whatever its pods request.
_BASIC = frozenset({"cpu", "memory", "pods"})


def insufficient_resource(pod: Pod, node: Node, snapshot: ClusterSnapshot,
                          scheduler: bool = False, sent: Mapping[str, int] | None = None,
                          sent_pods: int = 0) -> str | None:
    """The first resource the node cannot give the pod ("insufficient <name>"), or None.
    `scheduler`: as kube-scheduler's NodeResourcesFit, which checks only what the pod requests
    (a zero request fits an overcommitted node; the descheduler's NodeFit refuses it).
    `sent`, `sent_pods`: the requests and the number of pods a plugin has already sent to the
    node in its run, which the snapshot does not hold yet (their replacements are not placed)."""
    allocatable = node.allocatable
    used = snapshot.node_requested(node.metadata.name)
    for name, request in pod.requests.items():
        if scheduler and request <= 0:
            continue
        if name in _BASIC or name in allocatable:
            available = allocatable.get(name, 0) - used.get(name, 0)
            if sent:
                available -= sent.get(name, 0)
        else:
            available = 0
        if request > available:
            return f"insufficient {name}"
    if allocatable.get("pods", 0) - used.get("pods", 0) - sent_pods <= 0:
        return "insufficient pods"
    return None


def scheduler_fit(pod: Pod) -> Callable[[Node, ClusterSnapshot], bool]:
    """Whether kube-scheduler's NodeResourcesFit passes the pod on a node: the verdict of
    insufficient_resource(pod, node, snapshot, scheduler=True) is None, with what it reads of
    the pod read once (a Ranking asks it of every node of a pool)."""
    wanted = [(name, amount, name in _BASIC) for name, amount in pod.requests.items()
              if amount > 0]

    def fits(node: Node, snapshot: ClusterSnapshot) -> bool:
        allocatable = node.allocatable
        used = snapshot.node_requested(node.metadata.name)
        for name, amount, basic in wanted:
            if not basic and name not in allocatable:
                return False  # nothing of it to give
            if amount > allocatable.get(name, 0) - used.get(name, 0):
                return False
        return allocatable.get("pods", 0) - used.get("pods", 0) > 0
    return fits


class _Prepared(NamedTuple):
    """What NodeFit compiles from the pod once, to check it against many nodes."""

    affinity: NodeMatcher
    anti_affinity: tuple[AntiAffinityTerm, ...]


def _prepare(pod: Pod) -> _Prepared:
    return _Prepared(required_affinity_matcher(pod), compile_anti_affinity(pod))


def fit_prepared(pod: Pod, node: Node, snapshot: ClusterSnapshot,
                 prepared: _Prepared) -> str | None:
    """node_fit with the pod's compiled parts from `prepare_fit`: the one check of a node every
    NodeFit search makes."""
    if node.spec.unschedulable:
        return NOT_SCHEDULABLE
    if not prepared.affinity(node):
        return SELECTOR_MISMATCH
    if node.spec.taints and first_untolerated(
            node.spec.taints, pod.spec.tolerations, SCHEDULING_EFFECTS) is not None:
        return UNTOLERATED_TAINT
    try:
        if anti_affinity_conflict(pod, prepared.anti_affinity, node, snapshot):
            return ANTI_AFFINITY
    except SelectorError as err:
        return str(err)
    # A pod already on the node is counted in its usage: it fits there resource-wise.
    if pod.spec.node_name != node.metadata.name:
        return insufficient_resource(pod, node, snapshot)
    return None


def prepare_fit(pod: Pod) -> _Prepared:
    """What node_fit compiles from the pod, for many `fit_prepared` calls."""
    return _prepare(pod)


def node_fit(pod: Pod, node: Node, snapshot: ClusterSnapshot) -> str | None:
    """Why `pod` cannot be placed on `node`, or None when it fits. Checks, in order:
    schedulable, nodeSelector + required node affinity, NoSchedule/NoExecute taints, the pod's
    required anti-affinity against pods on the node, then resources (skipped on the pod's own
    node)."""
    return fit_prepared(pod, node, snapshot, _prepare(pod))


def affinity_space(pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot
                   ) -> Sequence[Node]:
    """The nodes of `nodes` the pod's nodeSelector and required node affinity may match, in
    their order: a superset found through the label index (callers still match each node)."""
    return _spaces(nodes, snapshot).space(pod, snapshot).nodes


def pod_fits_any_node(pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot) -> bool:
    """Whether the pod fits some node, its current one included (upstream PodFitsAnyNode).
    Only the nodes its node affinity may match are tried."""
    prepared = _prepare(pod)
    return any(fit_prepared(pod, node, snapshot, prepared) is None
               for node in affinity_space(pod, nodes, snapshot))


# Only model values reach it, and Shared (a str subclass) is their only non-native type.
_signature_encoder = msgspec.json.Encoder(enc_hook=str)
_ENCODED_LIMIT = 100_000  # entries of each table below
# Owner UID -> some scheduling fields of the last of its pods encoded, and their encoding.
# Encoding is most of a signature's cost, and a workload's pods almost always share these
# fields; equal fields give the same verdicts whatever pod they belong to.
_placement_by_owner: dict[str, tuple[tuple[object, ...], bytes]] = {}
_tolerations_by_owner: dict[str, tuple[tuple[object, ...], bytes]] = {}
# id(requests dict) -> (that dict, its JSON).
_requests_texts: dict[int, tuple[dict[str, int], bytes]] = {}
# The ids of the texts a signature is made of -> those texts and the signature: the pods of a
# workload get the same texts from the tables above, and so one signature object, whose hash
# is computed once and which dict lookups find by identity. The texts are held, so their ids
# stay theirs.
_taint_free_signatures: dict[tuple[int, int], tuple[bytes, bytes, tuple[bytes, bytes]]] = {}
_placement_signatures: dict[tuple[int, int, int], tuple[bytes, bytes, bytes, bytes]] = {}
# Owner UID -> the objects its last pod's signature was made from and the signature: replicas
# share their nodeSelector, affinity, tolerations and requests objects (model.sharing), so most
# pods get their signature by four identity checks, nothing compared or encoded.
_taint_free_by_owner: dict[str, tuple[object, object, object, str, tuple[bytes, bytes]]] = {}
_placement_by_owner_objects: dict[str, tuple[object, object, bytes]] = {}


def _encoded(memo: dict[str, tuple[tuple[object, ...], bytes]], pod: Pod,
             fields: tuple[object, ...]) -> bytes:
    refs = pod.metadata.owner_references
    owner = refs[0].uid if refs else ""
    last = memo.get(owner)
    if last is not None and last[0] == fields:
        return last[1]
    entry = (fields, _signature_encoder.encode(fields))
    return remember(memo, owner, entry, limit=_ENCODED_LIMIT)[1]


def _requests_text(requests: dict[str, int]) -> bytes:
    """The JSON of a requests dict (shared by the pods with the same resource spec). It keeps
    the dict's order (the first insufficient resource names the failure): finer than needed,
    never coarser."""
    entry = _requests_texts.get(id(requests))
    if entry is None or entry[0] is not requests:
        entry = remember(_requests_texts, id(requests),
                         (requests, _signature_encoder.encode(requests)), limit=_ENCODED_LIMIT)
    return entry[1]


def taint_free_signature(pod: Pod) -> tuple[bytes, bytes]:
    """What NodeFit's verdict on a node without NoSchedule/NoExecute taints depends on besides
    the node and the pod's own name: nodeSelector, required node affinity and required pod
    anti-affinity with the namespace its terms default to; and requests. A pair
    of texts most pods share with others, so hashing it is cheap."""
    signature = pod.cached_taint_free_signature
    if signature is None:
        spec = pod.spec
        requests_dict = pod.requests
        refs = pod.metadata.owner_references
        owner = refs[0].uid if refs else ""
        last = _taint_free_by_owner.get(owner)
        if (last is not None and last[0] is spec.node_selector and last[1] is spec.affinity
                and last[2] is requests_dict and last[3] == pod.metadata.namespace):
            signature = pod.cached_taint_free_signature = last[4]
            return signature
        affinity = spec.affinity
        required = anti = None
        if affinity is not None:
            node_affinity, pod_anti_affinity = affinity.node_affinity, affinity.pod_anti_affinity
            if node_affinity is not None:
                required = node_affinity.required_during_scheduling_ignored_during_execution
            if pod_anti_affinity is not None:
                anti = pod_anti_affinity.required_during_scheduling_ignored_during_execution
        # The namespace is read only as the default of anti-affinity terms: without them,
        # pods of every namespace share a signature (and its memoized searches).
        fields: tuple[object, ...] = ((spec.node_selector, required) if anti is None
                                      else (pod.metadata.namespace, spec.node_selector, required,
                                            anti))
        encoded = _encoded(_placement_by_owner, pod, fields)
        requests = _requests_text(requests_dict)
        ids = (id(encoded), id(requests))
        known = _taint_free_signatures.get(ids)
        if known is None or known[0] is not encoded or known[1] is not requests:
            known = remember(_taint_free_signatures, ids, (encoded, requests,
                                                           (encoded, requests)),
                             limit=_ENCODED_LIMIT)
        signature = pod.cached_taint_free_signature = known[2]
        remember(_taint_free_by_owner, owner, (spec.node_selector, affinity, requests_dict,
                                               pod.metadata.namespace, signature),
                 limit=_ENCODED_LIMIT)
    return signature


def placement_signature(pod: Pod) -> bytes:
    """Everything NodeFit's verdict for a pod depends on besides the node and the pod's own
    name: the taint-free signature plus tolerations. Pods of one workload usually share it."""
    signature = pod.cached_signature
    if signature is None:
        taint_free = taint_free_signature(pod)
        refs = pod.metadata.owner_references
        owner = refs[0].uid if refs else ""
        last = _placement_by_owner_objects.get(owner)
        if last is not None and last[0] is taint_free and last[1] is pod.spec.tolerations:
            signature = pod.cached_signature = last[2]
            return signature
        fields, requests = taint_free
        tolerations = _encoded(_tolerations_by_owner, pod, (pod.spec.tolerations,))
        ids = (id(fields), id(requests), id(tolerations))
        known = _placement_signatures.get(ids)
        if known is None or known[0] is not fields or known[1] is not requests \
                or known[2] is not tolerations:
            # JSON texts back to back still read one way.
            known = remember(_placement_signatures, ids, (
                fields, requests, tolerations, fields + requests + tolerations),
                limit=_ENCODED_LIMIT)
        signature = pod.cached_signature = known[3]
        remember(_placement_by_owner_objects, owner, (taint_free, pod.spec.tolerations, signature),
                 limit=_ENCODED_LIMIT)
    return signature


def _taint_free(node: Node) -> bool:
    return all(taint.effect not in SCHEDULING_EFFECTS for taint in node.spec.taints)


class _Space:
    """The nodes of a list a node affinity may match (`names` None: the whole list), and the
    removal-log position of the last pod that left one of them."""

    __slots__ = ("changed", "names", "nodes")

    def __init__(self, nodes: Sequence[Node], names: frozenset[str] | None) -> None:
        self.nodes = nodes
        self.names = names
        self.changed = -1


class _Spaces:
    """Per node list: the nodes of it each node affinity may match (through the snapshot's
    label index), and which of them lost pods when (read off the snapshot's removal log).
    Depends on the list alone, so it outlives pod additions."""

    __slots__ = ("_members", "by_node", "cursor", "last_removed", "log", "nodes", "spaces",
                 "whole")

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = nodes
        self.whole = _Space(nodes, None)
        # Affinity key -> its space.
        self.spaces: dict[bytes, _Space] = {}
        self._members: frozenset[str] | None = None
        self.by_node: dict[str, list[_Space]] = {}  # node name -> the narrowed spaces with it
        self.log: list[str] | None = None  # the removal log read, and how far
        self.cursor = 0
        self.last_removed: dict[str, int] = {}  # node name -> its last removal-log position

    def members(self) -> frozenset[str]:
        if self._members is None:
            self._members = frozenset(n.metadata.name for n in self.nodes)
        return self._members

    def space(self, pod: Pod, snapshot: ClusterSnapshot) -> _Space:
        key = taint_free_signature(pod)[0]
        found = self.spaces.get(key)
        if found is None:
            # The key of a pod with required pod anti-affinity is its workload's own, but the
            # space depends on nodeSelector and required node affinity alone, which many
            # workloads share (a pool's): looked up under those (the key itself without
            # anti-affinity, as taint_free_signature encodes it).
            spec = pod.spec
            affinity = spec.affinity
            node_affinity = affinity.node_affinity if affinity is not None else None
            required = (node_affinity.required_during_scheduling_ignored_during_execution
                        if node_affinity is not None else None)
            placement = _signature_encoder.encode((spec.node_selector, required))
            found = self.spaces.get(placement)
            if found is None:
                found = self.spaces[placement] = self._narrowed(pod, placement, snapshot)
            self.spaces[key] = found
        return found

    def _narrowed(self, pod: Pod, key: bytes, snapshot: ClusterSnapshot) -> _Space:
        narrowed = node_index(snapshot).candidates(pod, key)
        if narrowed is None:
            return self.whole
        members = self.members()
        nodes = [n for n in narrowed.nodes if n.metadata.name in members]
        found = _Space(nodes, frozenset(n.metadata.name for n in nodes))
        for node in nodes:
            self.by_node.setdefault(node.metadata.name, []).append(found)
        return found

    def sync(self, snapshot: ClusterSnapshot) -> None:
        """Read the removals logged since the last call (each entry once per list)."""
        log = snapshot.removed_from
        if log is not self.log:  # a new log: what was derived from the old one is void
            self.log, self.cursor, self.last_removed = log, 0, {}
        members, by_node, last_removed = self.members(), self.by_node, self.last_removed
        for position in range(self.cursor, len(log)):
            name = log[position]
            if name in members:
                last_removed[name] = position
                self.whole.changed = position
                for space in by_node.get(name, ()):
                    space.changed = position
        self.cursor = len(log)

    def changed_since(self, space: _Space, seen: int) -> Iterable[str]:
        """The nodes of `space` that lost pods at or after log position `seen`."""
        if space.changed < seen:
            return ()
        log = self.log
        assert log is not None
        if space.names is not None and len(space.nodes) <= len(log) - seen:
            last = self.last_removed
            return [n.metadata.name for n in space.nodes if last.get(n.metadata.name, -1) >= seen]
        members = self.members() if space.names is None else space.names
        return dict.fromkeys(name for name in log[seen:] if name in members)


def _spaces(nodes: Sequence[Node], snapshot: ClusterSnapshot) -> _Spaces:
    by_list: dict[int, _Spaces] = snapshot.caches.setdefault("nodefit.spaces", {})
    found = by_list.get(id(nodes))
    if found is None or found.nodes is not nodes:
        found = by_list[id(nodes)] = _Spaces(nodes)
    return found


class _OtherNodeMemo:
    """NodeFit's "fits a node other than its own" answers over one node list, for one
    generation of the snapshot (pods only leave until `additions` changes).

    A node that fit a placement signature keeps fitting it, so the first fitting node found is
    remembered (`fits`) and re-checked alone next time; one without NoSchedule/NoExecute taints
    also under the taint-free signature, which most pods are then answered by. A signature that
    fit no node is remembered too (`none`), with how far the snapshot's removal log had got: a
    node can only start to fit when pods leave it, so the next question re-checks just the nodes
    that lost pods since, plus the node the first search skipped (the asking pod's own).
    """

    __slots__ = ("additions", "fits", "none", "spaces")

    def __init__(self, spaces: _Spaces, additions: int) -> None:
        self.spaces = spaces
        self.additions = additions
        self.fits: dict[object, Node] = {}
        # Signature -> (removal-log length when last answered, the node left unlooked at, the
        # signature's node space).
        self.none: dict[bytes, tuple[int, str, _Space]] = {}

    def found(self, pod: Pod, key: bytes, node: Node) -> bool:
        self.fits[key] = node
        if _taint_free(node):
            self.fits[taint_free_signature(pod)] = node
        self.none.pop(key, None)
        return True


def _other_node_memo(nodes: Sequence[Node], snapshot: ClusterSnapshot) -> _OtherNodeMemo:
    memos: dict[int, _OtherNodeMemo] = snapshot.caches.setdefault("nodefit.other", {})
    memo = memos.get(id(nodes))
    if memo is None or memo.spaces.nodes is not nodes or memo.additions != snapshot.additions:
        memo = memos[id(nodes)] = _OtherNodeMemo(_spaces(nodes, snapshot), snapshot.additions)
    return memo


def pod_fits_any_other_node(pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot) -> bool:
    """Whether the pod fits some node other than the one it is on (PodFitsAnyOtherNode).

    Nodes are searched only among those the pod's node affinity may match (a label index), and
    answers are remembered per placement signature (see _OtherNodeMemo), so the work grows with
    the workloads and the evictions, not with pods times nodes.
    """
    current = pod.spec.node_name
    memo = _other_node_memo(nodes, snapshot)
    fits = memo.fits
    # The signatures kept on the pod are read without a call (DefaultEvictor asks this of
    # nearly every pod a plugin lists); never empty, so `or` computes only missing ones.
    hit = fits.get(pod.cached_taint_free_signature or taint_free_signature(pod))  # a pair:
    if hit is not None and hit.metadata.name != current:  # never equal to a full signature
        return True
    key = pod.cached_signature or placement_signature(pod)
    hit = fits.get(key)
    if hit is not None and hit.metadata.name != current:
        return True
    removals = snapshot.removed_from
    known = memo.none.get(key)
    if known is None:
        prepared = _prepare(pod)
        space = memo.spaces.space(pod, snapshot)
        for node in space.nodes:
            if (node.metadata.name != current
                    and fit_prepared(pod, node, snapshot, prepared) is None):
                return memo.found(pod, key, node)
        memo.none[key] = (len(removals), current, space)
        return False
    seen, skipped, space = known
    if seen == len(removals) and (skipped == current or not skipped):
        return False  # nothing left since, and no node this pod may try unlooked at
    spaces = memo.spaces
    spaces.sync(snapshot)
    compiled: _Prepared | None = None
    # Only nodes that lost pods can fit now. The asking pod's own node is not its to try: left
    # for the next asker (at most one node is ever left so).
    left = ""
    for name in spaces.changed_since(space, seen):
        if name == current:
            left = current
            continue
        node = snapshot.nodes[name]
        compiled = compiled or _prepare(pod)
        if fit_prepared(pod, node, snapshot, compiled) is None:
            return memo.found(pod, key, node)
    if skipped == current:
        left = current
    elif skipped:
        members = spaces.members() if space.names is None else space.names
        if skipped in members and spaces.last_removed.get(skipped, -1) < seen:
            node = snapshot.nodes[skipped]  # not among the changed ones just tried
            if fit_prepared(pod, node, snapshot, compiled or _prepare(pod)) is None:
                return memo.found(pod, key, node)
    memo.none[key] = (len(removals), left, space)
    return False


def fit_failures(pod: Pod, nodes: Iterable[Node], snapshot: ClusterSnapshot,
                 skip_current: bool = False) -> dict[str, str]:
    """Node name -> reason for every node in `nodes` the pod does not fit (nodes that fit are
    left out). With skip_current, the pod's own node is not looked at."""
    prepared = _prepare(pod)
    current = pod.spec.node_name
    failures: dict[str, str] = {}
    for node in nodes:
        name = node.metadata.name
        if skip_current and name == current:
            continue
        reason = fit_prepared(pod, node, snapshot, prepared)
        if reason is not None:
            failures[name] = reason
    return failures
