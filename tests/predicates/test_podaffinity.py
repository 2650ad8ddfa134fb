from __future__ import annotations

from typing import Any

import pytest

from desched.model.labels import SelectorError
from desched.model.pod import PodAffinityTerm
from desched.predicates.podaffinity import (
    anti_affinity_terms,
    term_namespaces,
    violates_anti_affinity_on_node,
)
from oracles.anti_affinity import check_pods_with_anti_affinity_exist, pod_matches_term

WEB = {"matchLabels": {"app": "web"}}


def anti(topology_key: str = "zone", selector: dict[str, Any] | None = WEB,
         namespaces: list[str] | None = None) -> dict[str, Any]:
    term: dict[str, Any] = {"topologyKey": topology_key}
    if selector is not None:
        term["labelSelector"] = selector
    if namespaces:
        term["namespaces"] = namespaces
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def test_anti_affinity_terms_only_required(make_pod: Any) -> None:
    assert anti_affinity_terms(make_pod()) == ()
    preferred_only = make_pod(affinity={"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": WEB}}]}})
    assert anti_affinity_terms(preferred_only) == ()
    affinity_only = make_pod(affinity={"podAffinity": anti()["podAntiAffinity"]})
    assert anti_affinity_terms(affinity_only) == ()
    terms = anti_affinity_terms(make_pod(affinity=anti("kubernetes.io/hostname")))
    assert [t.topology_key for t in terms] == ["kubernetes.io/hostname"]


def test_term_namespaces(make: Any, make_pod: Any) -> None:
    pod = make_pod(namespace="team")
    assert term_namespaces(make({}, PodAffinityTerm), pod) == frozenset({"team"})
    term = make({"namespaces": ["a", "b"], "namespaceSelector": {}}, PodAffinityTerm)
    assert term_namespaces(term, pod) == frozenset({"a", "b"})


@pytest.mark.parametrize(
    ("term", "other_ns", "other_labels", "expected"),
    [
        ({"labelSelector": WEB}, "team", {"app": "web"}, True),
        ({"labelSelector": WEB}, "team", {"app": "db"}, False),
        ({"labelSelector": WEB}, "other", {"app": "web"}, False),
        ({"labelSelector": WEB, "namespaces": ["other"]}, "other", {"app": "web"}, True),
        ({"labelSelector": WEB, "namespaces": ["other"]}, "team", {"app": "web"}, False),
        ({}, "team", {"app": "web"}, False),  # nil selector: nothing
        ({"labelSelector": {}}, "team", {"app": "web"}, True),  # empty selector: everything
    ],
)
def test_pod_matches_term(make: Any, make_pod: Any, term: dict[str, Any], other_ns: str,
                          other_labels: dict[str, str], expected: bool) -> None:
    pod = make_pod("me", namespace="team")
    other = make_pod("other", namespace=other_ns, labels=other_labels)
    assert pod_matches_term(other, make(term, PodAffinityTerm), pod) is expected


# -- utils.CheckPodsWithAntiAffinityExist: the oracle the plugin's index is checked against --------

NODES = {
    "n1": {"zone": "a", "kubernetes.io/hostname": "n1"},
    "n2": {"zone": "a", "kubernetes.io/hostname": "n2"},
    "n3": {"zone": "b", "kubernetes.io/hostname": "n3"},
    "n4": {"kubernetes.io/hostname": "n4"},
    "n5": {"kubernetes.io/hostname": "n5"},
}


@pytest.mark.parametrize(
    ("pod_node", "affinity", "other", "expected"),
    [
        # Same zone on another node, or the same node.
        ("n1", anti(), {"node": "n2"}, True),
        ("n1", anti(), {"node": "n1"}, True),
        ("n1", anti(), {"node": "n3"}, False),
        # Same node counts even when neither node has the topology key.
        ("n4", anti(), {"node": "n4"}, True),
        # Two different nodes both without the key: no shared domain.
        ("n4", anti(), {"node": "n5"}, False),
        ("n1", anti(), {"node": "n4"}, False),
        ("n1", anti("kubernetes.io/hostname"), {"node": "n2"}, False),
        # Selector and namespace must match.
        ("n1", anti(), {"node": "n2", "labels": {"app": "db"}}, False),
        ("n1", anti(selector=None), {"node": "n2"}, False),
        ("n1", anti(), {"node": "n2", "namespace": "other"}, False),
        ("n1", anti(namespaces=["other"]), {"node": "n2", "namespace": "other"}, True),
        ("n1", anti(namespaces=["other"]), {"node": "n2"}, False),
        # The pod itself (same namespace and name) is skipped; a namesake elsewhere is not.
        ("n1", anti(), {"node": "n1", "name": "me"}, False),
        ("n1", anti(namespaces=["other"]), {"node": "n1", "name": "me", "namespace": "other"},
         True),
        # Unknown nodes are skipped.
        ("n1", anti(), {"node": "gone"}, False),
        ("gone", anti(), {"node": "n1"}, False),
        # No anti-affinity at all, or an invalid selector.
        ("n1", None, {"node": "n1"}, False),
        ("n1", anti(selector={"matchExpressions": [{"key": "app", "operator": "Bad"}]}),
         {"node": "n1"}, False),
    ],
)
def test_check_pods_with_anti_affinity_exist(
        make_pod: Any, make_node: Any, pod_node: str, affinity: dict[str, Any] | None,
        other: dict[str, Any], expected: bool) -> None:
    nodes = {name: make_node(name, labels=labels) for name, labels in NODES.items()}
    spec = {"affinity": affinity} if affinity is not None else {}
    pod = make_pod("me", namespace="team", node=pod_node, labels={"app": "web"}, **spec)
    peer = make_pod(other.get("name", "peer"), namespace=other.get("namespace", "team"),
                    node=other["node"], labels=other.get("labels", {"app": "web"}))
    by_ns: dict[str, list[Any]] = {}
    for p in (pod, peer):
        by_ns.setdefault(p.namespace, []).append(p)
    assert check_pods_with_anti_affinity_exist(pod, by_ns, nodes.get) is expected


def test_check_pods_second_term_violates(make_pod: Any, make_node: Any) -> None:
    nodes = {name: make_node(name, labels=labels) for name, labels in NODES.items()}
    terms = [{"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "db"}}},
             {"topologyKey": "zone", "labelSelector": WEB}]
    pod = make_pod("me", namespace="team", node="n1", affinity={
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}})
    peer = make_pod("peer", namespace="team", node="n2", labels={"app": "web"})
    assert check_pods_with_anti_affinity_exist(pod, {"team": [peer]}, nodes.get) is True
    assert check_pods_with_anti_affinity_exist(pod, {}, nodes.get) is False


# -- NodeFit's one-direction, one-node check ----------------------------------------------------

HOST = "kubernetes.io/hostname"


@pytest.mark.parametrize(
    ("topology_key", "existing", "expected"),
    [
        (HOST, {}, True),
        ("zone", {}, True),
        # The node lacks the topology key: no violation even with a matching pod on it.
        ("rack", {}, False),
        # A matching pod on another node of the same zone does not count: only the node is seen.
        ("zone", {"node": "n2"}, False),
        ("zone", {"phase": "Succeeded"}, False),
        ("zone", {"phase": "Failed"}, False),
        ("zone", {"phase": "Pending"}, True),
        ("zone", {"labels": {"app": "db"}}, False),
        ("zone", {"namespace": "other"}, False),
        # The candidate's own copy on the node is not a conflict.
        ("zone", {"name": "me"}, False),
        ("zone", {"name": "me", "namespace": "other", "term_namespaces": ["other"]}, True),
    ],
)
def test_violates_anti_affinity_on_node(make_pod: Any, make_node: Any, make_snapshot: Any,
                                        topology_key: str, existing: dict[str, Any],
                                        expected: bool) -> None:
    node = make_node("n1", labels=NODES["n1"])
    other_node = make_node("n2", labels=NODES["n2"])
    pod = make_pod("me", namespace="team", node="n3", labels={"app": "web"}, affinity=anti(
        topology_key, namespaces=existing.get("term_namespaces")))
    peer = make_pod(existing.get("name", "peer"), namespace=existing.get("namespace", "team"),
                    node=existing.get("node", "n1"), labels=existing.get("labels", {"app": "web"}),
                    phase=existing.get("phase", "Running"))
    snap = make_snapshot(node, other_node, pod, peer)
    assert violates_anti_affinity_on_node(pod, node, snap) is expected


def test_violates_without_anti_affinity_or_pods(make_pod: Any, make_node: Any,
                                                make_snapshot: Any) -> None:
    node = make_node("n1", labels=NODES["n1"])
    plain = make_pod("me", namespace="team", node="n3", labels={"app": "web"})
    peer = make_pod("peer", namespace="team", node="n1", labels={"app": "web"})
    assert violates_anti_affinity_on_node(plain, node, make_snapshot(node, plain, peer)) is False
    lonely = make_pod("me", namespace="team", node="n3", affinity=anti())
    assert violates_anti_affinity_on_node(lonely, node, make_snapshot(node, lonely)) is False


def test_violates_invalid_selector_raises(make_pod: Any, make_node: Any,
                                          make_snapshot: Any) -> None:
    node = make_node("n1", labels=NODES["n1"])
    pod = make_pod("me", namespace="team", node="n3", affinity=anti(
        selector={"matchExpressions": [{"key": "app", "operator": "In"}]}))
    peer = make_pod("peer", namespace="team", node="n1", labels={"app": "web"})
    with pytest.raises(SelectorError):
        violates_anti_affinity_on_node(pod, node, make_snapshot(node, pod, peer))
