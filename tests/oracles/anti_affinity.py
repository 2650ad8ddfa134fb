"""utils.CheckPodsWithAntiAffinityExist, upstream's walk over every pod of the term's namespaces,
on desched's public predicates: the reference that the index of
RemovePodsViolatingInterPodAntiAffinity (plugins/removepodsviolatinginterpodantiaffinity/) is
checked against."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from desched.model.labels import SelectorError, compile_selector
from desched.model.node import Node
from desched.model.pod import Pod, PodAffinityTerm
from desched.predicates.podaffinity import anti_affinity_terms, term_namespaces


def pod_matches_term(other_pod: Pod, term: PodAffinityTerm, pod: Pod) -> bool:
    """Whether `other_pod` is selected by `pod`'s term: it is in the term's namespaces and its
    labels match term.labelSelector (a nil selector matches nothing). An invalid selector raises
    labels.SelectorError."""
    return (other_pod.namespace in term_namespaces(term, pod)
            and compile_selector(term.label_selector)(other_pod.metadata.labels))


def check_pods_with_anti_affinity_exist(
    pod: Pod,
    pods_by_namespace: Mapping[str, Iterable[Pod]],
    node_of: Callable[[str], Node | None],
) -> bool:
    """Whether a pod selected by one of `pod`'s required anti-affinity terms runs on the same
    node as `pod`, or on a node with the same value of the term's topologyKey. Pods whose node
    `node_of` does not know are ignored; an invalid selector makes the whole check false, as
    upstream. A namesake in another namespace is another pod (upstream compares names only)."""
    terms = anti_affinity_terms(pod)
    if not terms:
        return False
    node = node_of(pod.spec.node_name)
    if node is None:
        return False  # upstream skips every candidate when the pod's own node is unknown
    for term in terms:
        try:
            compile_selector(term.label_selector)
        except SelectorError:
            return False
        key = term.topology_key
        value = node.metadata.labels.get(key)
        for namespace in term_namespaces(term, pod):
            for other in pods_by_namespace.get(namespace, ()):
                if (other.metadata.name, other.namespace) == (pod.metadata.name, pod.namespace):
                    continue
                if not pod_matches_term(other, term, pod):
                    continue
                other_node = node_of(other.spec.node_name)
                if other_node is None:
                    continue
                if other_node.metadata.name == node.metadata.name:
                    return True
                if value is not None and other_node.metadata.labels.get(key) == value:
                    return True
    return False
