"""RemoveDuplicates (balance): spreads pods of the same owner and images evenly over the nodes
they could run on, evicting the surplus on nodes above the ceiling of the average
."""

from __future__ import annotations

import math
from collections.abc import Mapping

import msgspec

from desched.framework.registry import PluginSpec, Scope
from desched.framework.types import Handle
from desched.framework.verdicts import RUN_ENDED, excluded_owner, listing_scope
from desched.model.meta import OwnerReference, json_encoder
from desched.model.node import Node
from desched.model.pod import Container, Pod
from desched.policy_files.args import (
    Namespaces,
    namespace_allowed,
    namespace_scope,
    validate_namespaces,
)
from desched.predicates.nodeaffinity import required_affinity_matcher
from desched.predicates.nodefit import affinity_space
from desched.predicates.taints import SCHEDULING_EFFECTS, first_untolerated
from desched.snapshot.cluster import ClusterSnapshot


class RemoveDuplicatesArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    namespaces: Namespaces | None = None
    exclude_owner_kinds: list[str] = []


def validate(args: RemoveDuplicatesArgs) -> list[str]:
    return validate_namespaces(args.namespaces)


OwnerKey = tuple[str, str, str, str]  # namespace, owner kind, owner name, images hash


def _keys(namespace: str, refs: tuple[OwnerReference, ...], containers: tuple[Container, ...]
          ) -> tuple[list[OwnerKey], tuple[str, ...]]:
    """A pod's owner keys (one per owner: namespace, kind, name and its sorted images joined),
    and its sorted "namespace/kind/name/image" key list, the duplicate test within a node."""
    images = sorted([c.image for c in containers]) if len(containers) > 1 \
        else [containers[0].image]
    images_hash = "#".join(images)
    owner_keys: list[OwnerKey] = [(namespace, ref.kind, ref.name, images_hash) for ref in refs]
    if len(refs) == 1:
        # One owner: the keys share a prefix, so they sort as the images do.
        prefix = f"{namespace}/{refs[0].kind}/{refs[0].name}/"
        return owner_keys, tuple([prefix + image for image in images])
    return owner_keys, tuple(sorted([f"{namespace}/{ref.kind}/{ref.name}/{image}"
                                     for ref in refs for image in images]))


class _PlacementClasses:
    """The nodes each placement class may run on, for one run over one node list: the nodes a
    nodeSelector and required affinity match are found once per affinity (through the node
    label index), and each distinct taint list among them is judged once per class."""

    def __init__(self, nodes: list[Node], snapshot: ClusterSnapshot) -> None:
        self.nodes = nodes
        self.snapshot = snapshot
        self.by_class: dict[bytes, list[str]] = {}
        self._matched: dict[bytes, list[Node]] = {}
        self._taint_kinds: dict[str, tuple[tuple[str, str, str], ...]] = {}
        # id() of a pod's tolerations, nodeSelector and affinity -> those objects and their
        # class's nodes: replicas share the objects (model.sharing), so most owners' classes
        # are found without encoding them. The objects are held, so their ids stay theirs.
        self._by_parts: dict[tuple[int, int, int], tuple[object, object, object, list[str]]] = {}

    def names(self, pod: Pod) -> list[str]:
        """upstream's placement class: tolerations, required node affinity, nodeSelector."""
        spec = pod.spec
        tolerations, node_selector, affinity = spec.tolerations, spec.node_selector, spec.affinity
        parts = (id(tolerations), id(node_selector), id(affinity))
        known = self._by_parts.get(parts)
        if known is not None and known[0] is tolerations and known[1] is node_selector \
                and known[2] is affinity:
            return known[3]
        node_affinity = affinity.node_affinity if affinity is not None else None
        required = (node_affinity.required_during_scheduling_ignored_during_execution
                    if node_affinity is not None else None)
        selector = sorted(node_selector.items())
        klass = json_encoder.encode((tolerations, selector, required))
        names = self.by_class.get(klass)
        if names is None:
            names = self.by_class[klass] = self._names(pod, json_encoder.encode(
                (selector, required)))
        self._by_parts[parts] = (tolerations, node_selector, affinity, names)
        return names

    def _names(self, pod: Pod, affinity_key: bytes) -> list[str]:
        matched = self._matched.get(affinity_key)
        if matched is None:
            matches = required_affinity_matcher(pod)
            matched = self._matched[affinity_key] = [
                n for n in affinity_space(pod, self.nodes, self.snapshot) if matches(n)]
        tolerations = pod.spec.tolerations
        kinds = self._taint_kinds
        verdicts: dict[tuple[tuple[str, str, str], ...], bool] = {}
        names = []
        for n in matched:
            name = n.metadata.name  # not Node.name: a call per node of each class
            taints = n.spec.taints
            if taints:
                kind = kinds.get(name)
                if kind is None:
                    kind = kinds[name] = tuple([(t.key, t.value, t.effect) for t in taints])
                tolerated = verdicts.get(kind)
                if tolerated is None:
                    tolerated = verdicts[kind] = first_untolerated(
                        taints, tolerations, SCHEDULING_EFFECTS) is None
                if not tolerated:
                    continue
            names.append(name)
        return names


class RemoveDuplicates:
    def __init__(self, args: RemoveDuplicatesArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.excluded_kinds = frozenset(args.exclude_owner_kinds)

    def _target_count(self, pods_by_node: Mapping[str, list[Pod]],
                      classes: _PlacementClasses) -> int:
        """How many nodes any of the duplicates could run on (taints and node affinity); a
        placement class that fits only one node contributes nothing, as upstream's
        getTargetNodes. `classes` memoizes the nodes per placement class for the run: owners
        share a handful of them."""
        # The node lists of the classes that contribute, by identity (classes are memoized).
        contributing: dict[int, list[str]] = {}
        tolerations: object = None
        node_selector: object = None
        affinity: object = None
        for pods in pods_by_node.values():
            for pod in pods:
                spec = pod.spec
                # A run of replicas shares the objects of its class (model.sharing): asked
                # once. Identity is finer than upstream's classes; each gives the same nodes.
                if spec.tolerations is tolerations and spec.node_selector is node_selector \
                        and spec.affinity is affinity:
                    continue
                tolerations, node_selector, affinity = (spec.tolerations, spec.node_selector,
                                                        spec.affinity)
                names = classes.names(pod)
                if len(names) > 1:
                    contributing[id(names)] = names
        if len(contributing) == 1:  # the usual case: a workload's pods share one class
            return len(next(iter(contributing.values())))
        return len(set().union(*contributing.values()))

    def balance(self, nodes: list[Node]) -> None:
        handle = self.handle
        snapshot = handle.snapshot
        occurrences: dict[OwnerKey, int] = {}
        duplicates: dict[OwnerKey, dict[str, list[Pod]]] = {}
        excluded, namespaces = self.excluded_kinds, self.args.namespaces
        # The profile evictor's checks, bound once (Handle.filter and pre_eviction_filter, minus
        # a call per pod each).
        evictor, plugin = handle.evictor, handle.plugin
        evictor_filter, pre_eviction_filter = evictor.filter, evictor.pre_eviction_filter
        explaining = handle.log.explaining
        # id(owner references) -> (them, the containers, the namespace, owner keys, key list);
        # every pod stays alive through the loop, so an id is not reused within it.
        keys_by_parts: dict[int, tuple[tuple[OwnerReference, ...], tuple[Container, ...], str,
                                       list[OwnerKey], tuple[str, ...]]] = {}
        for node in nodes:
            node_name = node.name
            # The sorted "namespace/kind/name/image" keys of the pods seen so far on the node.
            seen: set[tuple[str, ...]] = set()
            for pod in snapshot.pods_on_node(node_name):
                refs = pod.metadata.owner_references
                if not refs or (excluded and any(ref.kind in excluded for ref in refs)):
                    continue
                namespace = pod.metadata.namespace
                if namespaces is not None and not namespace_allowed(namespaces, namespace):
                    continue
                if not evictor_filter(pod, plugin) or not pre_eviction_filter(pod, plugin):
                    continue
                containers = pod.spec.containers
                if not containers:
                    continue
                # Replicas share their owner references and containers (model.sharing): their
                # keys are built once.
                known = keys_by_parts.get(id(refs))
                if known is not None and known[0] is refs and known[1] is containers \
                        and known[2] == namespace:
                    owner_keys, keys = known[3], known[4]
                else:
                    owner_keys, keys = _keys(namespace, refs, containers)
                    keys_by_parts[id(refs)] = (refs, containers, namespace, owner_keys, keys)
                for owner_key in owner_keys:
                    occurrences[owner_key] = occurrences.get(owner_key, 0) + 1
                if keys in seen:
                    for owner_key in owner_keys:
                        duplicates.setdefault(owner_key, {}).setdefault(node_name, []).append(pod)
                else:
                    seen.add(keys)
                    if explaining:
                        handle.considered(pod, f"not a duplicate: the first pod of "
                                               f"{refs[0].kind}/{refs[0].name} with its images "
                                               f"on node {node_name}")

        classes = _PlacementClasses(nodes, snapshot)
        for owner_key, pods_by_node in duplicates.items():
            targets = self._target_count(pods_by_node, classes)
            if targets < 2:
                for pods in pods_by_node.values():
                    for pod in pods:
                        handle.skip(pod, f"duplicate of {owner_key[1]}/{owner_key[2]} but fewer "
                                         f"than 2 nodes could take it")
                continue
            upper_avg = math.ceil(occurrences[owner_key] / targets)
            for node_name, pods in pods_by_node.items():
                if explaining:
                    self._explain_kept(owner_key, node_name, pods, upper_avg, targets)
                if len(pods) + 1 <= upper_avg:
                    continue
                reason = (f"duplicate of {owner_key[1]}/{owner_key[2]}: node {node_name} runs "
                          f"{len(pods) + 1}, above the ceiling of the average {upper_avg} over "
                          f"{targets} feasible nodes")
                # Checked lazily, just before each eviction: a pod with several owners may
                # already have gone under another of them.
                surplus = ((pod, reason) for pod in pods[upper_avg - 1:]
                           if snapshot.pods.get(pod.cached_key or pod.key) is pod)
                if not handle.evict_node_pods(surplus):
                    return


    def verdict(self, pod: Pod, nodes: list[Node]) -> str | None:
        """Why this run passed over a pod it recorded nothing about (explain only): the listing
        left it out, or the run ended before its turn."""
        if not pod.metadata.owner_references:
            return "pod has no owner: not a duplicate of anything"
        scope = (excluded_owner(pod, self.excluded_kinds)
                 or listing_scope(pod, None, terminal=False))
        if scope is not None:
            return scope
        if not pod.spec.containers:
            return "pod has no containers"
        return RUN_ENDED

    def _explain_kept(self, owner_key: OwnerKey, node_name: str, pods: list[Pod], upper_avg: int,
                      targets: int) -> None:
        """The duplicates a node may keep: up to the ceiling of the average, counting the
        first of them."""
        owner = f"{owner_key[1]}/{owner_key[2]}"
        for pod in pods[:max(0, upper_avg - 1)]:
            self.handle.considered(pod, f"duplicate of {owner}: node {node_name} runs "
                                        f"{len(pods) + 1}, the ceiling of the average is "
                                        f"{upper_avg} over {targets} feasible nodes, and this "
                                        f"one is within it")


SPEC = PluginSpec(
    name="RemoveDuplicates",
    extension_points=frozenset({"balance"}),
    args_type=RemoveDuplicatesArgs,
    factory=RemoveDuplicates,
    validate=validate,
    scope=lambda args: Scope(namespaces=namespace_scope("namespaces", args.namespaces)),
)
