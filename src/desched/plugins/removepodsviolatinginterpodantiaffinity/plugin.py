"""RemovePodsViolatingInterPodAntiAffinity (deschedule): evicts pods whose required pod
anti-affinity is violated by a pod running in the same topology domain
.

The pods considered — both as candidates and as the pods a term can select — are the non-terminal
pods on the input nodes that pass `namespaces` and `labelSelector`. Each node's candidates (pods
with required anti-affinity terms) are visited lowest priority first
(`ordering.sort_by_priority_low_to_high`). A pod is evicted when one of its own required
anti-affinity terms selects another listed pod on the same node, or on a node with the same value
of the term's topologyKey (utils.CheckPodsWithAntiAffinityExist; namespaceSelector and preferred
terms are ignored, and the pod merely selected by a term is not evicted for it), and it passes
the DefaultEvictor's Filter and PreEvictionFilter. An evicted pod is dropped from the index, so it
no longer counts against its partners; a pod whose eviction was refused (PDB) still counts. A
node limit moves on to the next node, the total limit ends the run.

The search answers what upstream's walk over every pod of the term's namespaces answers (a
property test holds it to that walk, tests/oracles/anti_affinity.py), indexed: terms are
compiled with `compile_anti_affinity` once per distinct affinity; the pods of a namespace are
indexed once per run, by node and by the label a term's selector requires; and only the nodes of
the candidate's topology domain are looked at.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from desched.framework.evictor import EvictionLimitError
from desched.framework.registry import PluginSpec, Scope
from desched.framework.types import Handle
from desched.framework.verdicts import RUN_ENDED, listing_scope
from desched.model.labels import matcher_unless_empty
from desched.model.meta import LabelSelector
from desched.model.node import Node
from desched.model.pod import Pod
from desched.plugins.ordering import sort_by_priority_low_to_high
from desched.plugins.removepodsviolatinginterpodantiaffinity.index import AntiAffinityIndex
from desched.plugins.removepodsviolatinginterpodantiaffinity.soft import (
    ARG,
    SoftPass,
    has_preferred,
    soft_verdict,
)
from desched.plugins.scheduler_config_arg import config_of, problems, warnings_of
from desched.policy_files.args import (
    Namespaces,
    namespace_allowed,
    namespace_scope,
    validate_label_selector,
    validate_namespaces,
)
from desched.predicates.podaffinity import AntiAffinityTerm, anti_affinity_terms
from desched.scheduler.by_name import model_reads, scheduler_model
from desched.scheduler.model import KUBE_DEFAULT

PLUGIN = "RemovePodsViolatingInterPodAntiAffinity"


class RemovePodsViolatingInterPodAntiAffinityArgs(msgspec.Struct, rename="camel",
                                                  forbid_unknown_fields=True):
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    # desched's own (soft.py; None: unset, so a converted policy does not grow them).
    include_soft_constraints: bool | None = None
    scheduler_config: str | None = None  # the model's KubeSchedulerConfiguration file


def validate(args: RemovePodsViolatingInterPodAntiAffinityArgs) -> list[str]:
    """Upstream returns the first problem only, in this order; then desched's own args."""
    upstream = (validate_namespaces(args.namespaces)
                or validate_label_selector(args.label_selector))[:1]
    if upstream:
        return upstream
    if args.scheduler_config is not None and not args.include_soft_constraints:
        return [f"schedulerConfig is only used when {ARG} is true"]
    return problems(args.scheduler_config)[:1]


def warnings(args: RemovePodsViolatingInterPodAntiAffinityArgs) -> list[str]:
    """The scheduler configuration's warnings, for the policy's."""
    return warnings_of(args.scheduler_config)


def _reason(pod: Pod, partner: Pod, term: AntiAffinityTerm) -> str:
    where = "on the same node" if partner.node_name == pod.node_name else \
        f"in the same {term.topology_key} domain (node {partner.node_name})"
    return (f"pod's required anti-affinity (topologyKey {term.topology_key}) selects pod "
            f"{partner.namespace}/{partner.name} {where}")


class RemovePodsViolatingInterPodAntiAffinity:
    def __init__(self, args: RemovePodsViolatingInterPodAntiAffinityArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.labels = matcher_unless_empty(args.label_selector)
        # Under explain only: the last run's index, evicted pods removed, for `verdict`.
        self._index: AntiAffinityIndex | None = None
        self.soft = bool(args.include_soft_constraints)
        self.model = (scheduler_model(KUBE_DEFAULT, config_of(args.scheduler_config))
                      if self.soft else None)

    def _listed(self, pod: Pod) -> bool:
        """Upstream's listing: non-terminal, and passing namespaces and labelSelector. Fields
        read directly, not through Pod's properties: asked of every pod of the namespaces the
        terms name."""
        if pod.status.phase in ("Succeeded", "Failed"):
            return False
        namespaces = self.args.namespaces
        if namespaces is not None and not namespace_allowed(namespaces, pod.metadata.namespace):
            return False
        return self.labels is None or self.labels(pod.metadata.labels)

    def verdict(self, pod: Pod, nodes: list[Node]) -> str | None:
        """Why this run passed the pod over (explain only): its labels, no required
        anti-affinity, or no pod its terms select in their domains once the run ended."""
        scope = listing_scope(pod, self.labels, terminal=False)
        if scope is not None:
            return scope
        index = self._index
        if self.soft and index is not None and not anti_affinity_terms(pod):
            return soft_verdict(pod, index)
        terms = index.terms(pod) if index is not None else ()
        if not terms:
            return ("pod has no required pod anti-affinity (a pod that another pod's term "
                    "selects is not evicted for it)" if not anti_affinity_terms(pod) else None)
        if any(term.compiled.selector is None for term in terms):
            return "a term of its required pod anti-affinity has an invalid labelSelector"
        assert index is not None
        if index.partner(pod) is not None:
            return RUN_ENDED
        keys = ", ".join(dict.fromkeys(term.compiled.topology_key for term in terms))
        # Evicted pods no longer count against it (the pod it clashed with may be one).
        after = " once the pods this run evicted are gone" if index.removed else ""
        return (f"no other pod in its topology domain ({keys}) matches its required pod "
                f"anti-affinity{after}")

    def deschedule(self, nodes: list[Node]) -> None:
        handle = self.handle
        snapshot = handle.snapshot
        listed = self._listed

        def pods_of(namespace: str) -> Iterator[Pod]:
            for pod in (snapshot.pods_by_namespace.get(namespace) or {}).values():
                if listed(pod):
                    yield pod

        index = AntiAffinityIndex(nodes, pods_of)
        self._index = index if handle.log.explaining else None
        # Only listed pods carrying required anti-affinity terms can be evicted: find them first
        # (sorting them alone keeps their relative order among all the node's pods).
        candidates: dict[str, list[Pod]] = {}
        for node in nodes:
            for pod in (snapshot.pods_by_node.get(node.name) or {}).values():
                affinity = pod.spec.affinity  # inline anti_affinity_terms: this sees every pod
                anti = affinity.pod_anti_affinity if affinity is not None else None
                if (anti is not None and anti.required_during_scheduling_ignored_during_execution
                        and listed(pod)):
                    candidates.setdefault(node.name, []).append(pod)
        if not self._required(nodes, candidates, index) or self.model is None:
            return

        def everyone(namespace: str) -> Iterator[Pod]:
            for pod in (snapshot.pods_by_namespace.get(namespace) or {}).values():
                if pod.status.phase not in ("Succeeded", "Failed"):
                    yield pod

        soft = ((node, [p for p in (snapshot.pods_by_node.get(node.name) or {}).values()
                        if has_preferred(p) and listed(p)]) for node in nodes)
        SoftPass(handle, self.model, index, everyone).run(soft)

    def _required(self, nodes: list[Node], candidates: dict[str, list[Pod]],
                  index: AntiAffinityIndex) -> bool:
        """Upstream's pass over the required terms; False when the total limit ended the run."""
        handle = self.handle
        for node in nodes:
            pods = candidates.get(node.name)
            if not pods:
                continue
            for pod in sort_by_priority_low_to_high(pods):
                found = index.partner(pod)
                if found is None:
                    continue
                if not handle.filter(pod) or not handle.pre_eviction_filter(pod):
                    continue
                try:
                    if handle.evict(pod, _reason(pod, *found)):
                        index.remove(pod)
                except EvictionLimitError as err:
                    if err.scope == "total":
                        return False
                    if err.scope == "node":
                        break
        return True


def scope(args: RemovePodsViolatingInterPodAntiAffinityArgs) -> Scope:
    """`namespaces`, and with includeSoftConstraints what its scheduler model reads."""
    reads = (model_reads(KUBE_DEFAULT, config_of(args.scheduler_config), f"{PLUGIN} ({ARG})")
             if args.include_soft_constraints else ())
    return Scope(reads=reads, namespaces=namespace_scope("namespaces", args.namespaces))


SPEC = PluginSpec(
    name=PLUGIN,
    extension_points=frozenset({"deschedule"}),
    args_type=RemovePodsViolatingInterPodAntiAffinityArgs,
    factory=RemovePodsViolatingInterPodAntiAffinity,
    validate=validate,
    warnings=warnings,
    scope=scope,
)
