"""RemovePodsViolatingInterPodAntiAffinity: validation, what a required anti-affinity term
violates (topology domains, namespaces, selectors), which pod goes (the term's carrier, lowest
priority first, partners released by an eviction), the filters and limits
."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import NOW, args, decode, handle_for, node, pod, snapshot
from desched.framework.evictor import Limits
from desched.plugins.catalog import PLUGINS
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.removepodsviolatinginterpodantiaffinity import (
    PLUGIN,
    AntiAffinityIndex,
    RemovePodsViolatingInterPodAntiAffinity,
    RemovePodsViolatingInterPodAntiAffinityArgs,
    validate,
)
from desched.policy_files.loader import policy_from_document
from desched.simulate.simulation import run_simulation
from oracles.anti_affinity import check_pods_with_anti_affinity_exist

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def term(app: str | None = None, key: str = HOST, namespaces: list[str] | None = None,
         selector: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A pod affinity term selecting `app=<app>` (or `selector`) over topology `key`."""
    out: dict[str, Any] = {"topologyKey": key, **extra}
    if selector is not None:
        out["labelSelector"] = selector
    elif app is not None:
        out["labelSelector"] = {"matchLabels": {"app": app}}
    if namespaces:
        out["namespaces"] = namespaces
    return out


def anti(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}}


def avoider(name: str, node_name: str = "n1", avoid: str = "b", label: str = "a",
            key: str = HOST, **kw: Any) -> Any:
    """A pod labelled app=<label> whose required anti-affinity avoids app=<avoid>."""
    return pod(name, node_name, labels={"app": label}, spec=anti(term(avoid, key)), **kw)


def app(name: str, node_name: str = "n1", label: str = "b", **kw: Any) -> Any:
    return pod(name, node_name, labels={"app": label}, **kw)


def zoned(name: str, zone: str | None, **kw: Any) -> Any:
    labels = {HOST: name}
    if zone is not None:
        labels[ZONE] = zone
    return node(name, labels=labels, **kw)


def run(raw: dict[str, Any], *objects: Any, limits: Limits | None = None,
        protections: dict[str, Any] | None = None) -> tuple[list[str], Any]:
    """Run the plugin over the Ready nodes among `objects` (n1 and n2 when none is given) with
    a DefaultEvictor as filter (default protections unless `protections` says otherwise)."""
    objs = list(objects)
    if not any(type(o).__name__ == "Node" for o in objs):
        objs = [node("n1"), node("n2"), *objs]
    snap = snapshot(*objs)
    setup, _ = handle_for(snap)
    evictor = DefaultEvictor(args(DefaultEvictorArgs, protections or {}), setup)
    handle, executor = handle_for(snap, plugin=PLUGIN, limits=limits, filters=[evictor])
    plugin = RemovePodsViolatingInterPodAntiAffinity(
        args(RemovePodsViolatingInterPodAntiAffinityArgs, raw), handle)
    plugin.deschedule(snap.ready_nodes())
    return executor.evicted, handle


# -- validation ---------------------------------------------------------------------------------

VALIDATION: list[tuple[str, dict[str, Any], list[str]]] = [
    ("no args", {}, []),
    ("namespaces and labelSelector", {"namespaces": {"exclude": ["kube-system"]},
                                      "labelSelector": {"matchLabels": {"a": "b"}}}, []),
    ("include and exclude", {"namespaces": {"include": ["a"], "exclude": ["b"]}},
     ["only one of Include/Exclude namespaces can be set"]),
    ("bad label selector", {"labelSelector": {"matchExpressions": [
        {"key": "app", "operator": "Near", "values": ["x"]}]}},
     ["failed to get label selectors from strategy's params: \"Near\" is not a valid label "
      "selector operator"]),
]


@pytest.mark.parametrize(("raw", "errors"), [c[1:] for c in VALIDATION],
                         ids=[c[0] for c in VALIDATION])
def test_validation(raw: dict[str, Any], errors: list[str]) -> None:
    assert validate(args(RemovePodsViolatingInterPodAntiAffinityArgs, raw)) == errors


def test_policy_without_args_is_valid() -> None:
    doc = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
           "profiles": [{"name": "p", "pluginConfig": [{"name": PLUGIN}],
                         "plugins": {"deschedule": {"enabled": [PLUGIN]}}}]}
    policy = policy_from_document("policy.yaml", doc, PLUGINS)
    assert policy.profiles[0].enabled["deschedule"] == [PLUGIN]


# -- which pods are evicted ---------------------------------------------------------------------

ZONES = [zoned("n1", "a"), zoned("n2", "a"), zoned("n3", "b")]

# (id, args, objects, evicted pods)
CASES: list[tuple[str, dict[str, Any], list[Any], list[str]]] = [
    ("only the pod carrying the violated term is evicted", {},
     [avoider("carrier"), app("selected")], ["carrier"]),
    ("no pod matches the term", {}, [avoider("carrier"), app("other", label="c")], []),
    ("mutual anti-affinity: the lower priority pod goes, the other is released", {},
     [avoider("high", avoid="a", priority=100), avoider("low", avoid="a", priority=1)], ["low"]),
    ("three mutual pods: all but the highest priority", {},
     [avoider("p3", avoid="a", priority=3), avoider("p1", avoid="a", priority=1),
      avoider("p2", avoid="a", priority=2)], ["p1", "p2"]),
    ("no priority sorts before any priority", {},
     [avoider("set", avoid="a", priority=0), avoider("unset", avoid="a")], ["unset"]),
    ("equal priority: BestEffort before Guaranteed", {},
     [pod("guaranteed", "n1", labels={"app": "a"}, spec={
         "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                    "limits": {"cpu": "1", "memory": "1Gi"}}}],
         **anti(term("a"))}),
      avoider("besteffort", avoid="a", cpu=None, memory=None)], ["besteffort"]),
    ("hostname topology: partner on another node", {},
     [avoider("carrier", "n1"), app("selected", "n2")], []),
    ("zone topology: partner on another node of the zone", {},
     [*ZONES, avoider("carrier", "n1", key=ZONE), app("selected", "n2")], ["carrier"]),
    ("zone topology: partner in another zone", {},
     [*ZONES, avoider("carrier", "n1", key=ZONE), app("selected", "n3")], []),
    ("partner's node lacks the topology key", {},
     [zoned("n1", "a"), zoned("n2", None), avoider("carrier", "n1", key=ZONE),
      app("selected", "n2")], []),
    ("own node lacks the topology key: the same node still counts", {},
     [zoned("n1", None), zoned("n2", None), avoider("carrier", "n1", key=ZONE),
      app("selected", "n1")], ["carrier"]),
    ("term namespaces default to the pod's own", {},
     [avoider("carrier"), app("selected", namespace="other")], []),
    ("term namespaces name the partner's namespace", {},
     [pod("carrier", "n1", spec=anti(term("b", namespaces=["other"]))),
      app("selected", namespace="other")], ["carrier"]),
    ("namespaceSelector is ignored", {},
     [pod("carrier", "n1", spec=anti(term("b", namespaceSelector={}))),
      app("selected", namespace="other")], []),
    ("preferred terms are ignored", {},
     [pod("carrier", "n1", spec={"affinity": {"podAntiAffinity": {
         "preferredDuringSchedulingIgnoredDuringExecution": [
             {"weight": 100, "podAffinityTerm": term("b")}]}}}), app("selected")], []),
    ("pod affinity is not anti-affinity", {},
     [pod("carrier", "n1", spec={"affinity": {"podAffinity": {
         "requiredDuringSchedulingIgnoredDuringExecution": [term("b")]}}}), app("selected")],
     []),
    ("a pod selected only by its own term", {}, [avoider("alone", avoid="a")], []),
    ("a term without a labelSelector selects nothing", {},
     [pod("carrier", "n1", spec=anti(term())), app("selected")], []),
    ("an invalid term selector makes the check false", {},
     [pod("carrier", "n1", spec=anti(
         term(selector={"matchExpressions": [{"key": "app", "operator": "In", "values": []}]}),
         term("b"))), app("selected")], []),
    ("a matching term before an invalid one still counts", {},
     [pod("carrier", "n1", spec=anti(
         term("b"),
         term(selector={"matchExpressions": [{"key": "app", "operator": "In", "values": []}]}))),
      app("selected")], ["carrier"]),
    ("a partner on a node that is not Ready does not count", {},
     [zoned("n1", "a"), zoned("n2", "a", ready=False), zoned("n3", "b"),
      avoider("carrier", "n1", key=ZONE), app("selected", "n2")], []),
    ("terminal partners do not count", {},
     [avoider("carrier"), app("done", phase="Succeeded"), app("failed", phase="Failed")], []),
    ("args namespaces: a partner in an excluded namespace does not count",
     {"namespaces": {"exclude": ["other"]}},
     [pod("carrier", "n1", spec=anti(term("b", namespaces=["default", "other"]))),
      app("selected", namespace="other")], []),
    ("args namespaces: a carrier in an excluded namespace is not evicted",
     {"namespaces": {"exclude": ["default"]}}, [avoider("carrier"), app("selected")], []),
    ("args labelSelector: a partner outside it does not count",
     {"labelSelector": {"matchLabels": {"app": "a"}}},
     [avoider("carrier"), app("selected")], []),
    ("args labelSelector: a carrier outside it is not evicted",
     {"labelSelector": {"matchLabels": {"app": "b"}}},
     [avoider("carrier"), app("selected"), app("selected-2")], []),
    ("DefaultEvictor keeps a DaemonSet carrier", {},
     [avoider("carrier", owner=("DaemonSet", "ds")), app("selected")], []),
    ("a protected pod still counts as a partner", {},
     [avoider("ds", avoid="a", owner=("DaemonSet", "ds"), priority=0),
      avoider("carrier", avoid="a", priority=5)], ["carrier"]),
]


@pytest.mark.parametrize(("raw", "objects", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_cases(raw: dict[str, Any], objects: list[Any], expected: list[str]) -> None:
    evicted, _ = run(raw, *objects)
    assert evicted == expected


def test_an_eviction_releases_partners_on_other_nodes() -> None:
    objs = [*ZONES, avoider("first", "n1", avoid="a", key=ZONE),
            avoider("second", "n2", avoid="a", key=ZONE)]
    evicted, _ = run({}, *objs)
    assert evicted == ["first"]


def test_a_refused_eviction_keeps_the_pod_as_a_partner() -> None:
    budget = decode("PodDisruptionBudget", {
        "metadata": {"name": "b", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"guarded": "yes"}}}})
    objs = [budget,
            pod("guarded", "n1", labels={"app": "a", "guarded": "yes"}, priority=1,
                spec=anti(term("a"))),
            avoider("other", avoid="a", priority=2)]
    evicted, handle = run({}, *objs)
    assert evicted == ["other"]
    assert [d.pod for d in handle.log.decisions if d.outcome == "pdb-blocked"] == ["guarded"]


def test_node_fit_keeps_pods_with_nowhere_to_go() -> None:
    objs = [node("n1"), node("n2", unschedulable=True), avoider("carrier"), app("selected")]
    evicted, _ = run({}, *objs, protections={"nodeFit": True})
    assert evicted == []
    objs = [node("n1"), node("n2"), avoider("carrier"), app("selected")]
    evicted, _ = run({}, *objs, protections={"nodeFit": True})
    assert evicted == ["carrier"]


def _crowded(node_name: str, count: int, prefix: str) -> list[Any]:
    return [app(f"{prefix}-anchor", node_name),
            *(avoider(f"{prefix}{i}", node_name, priority=i) for i in range(count))]


def test_node_limit_moves_on_to_the_next_node() -> None:
    objs = [node("n1"), node("n2"), *_crowded("n1", 3, "a"), *_crowded("n2", 3, "b")]
    evicted, handle = run({}, *objs, limits=Limits(per_node=2))
    assert evicted == ["a0", "a1", "b0", "b1"]
    assert [d.pod for d in handle.log.decisions if d.outcome == "limited"] == ["a2", "b2"]


def test_total_limit_ends_the_run() -> None:
    objs = [node("n1"), node("n2"), *_crowded("n1", 2, "a"), *_crowded("n2", 2, "b")]
    evicted, handle = run({}, *objs, limits=Limits(total=3))
    assert evicted == ["a0", "a1", "b0"]
    assert [d.pod for d in handle.log.decisions if d.outcome == "limited"] == ["b1"]


def test_eviction_reason_names_the_partner() -> None:
    _, handle = run({}, *ZONES, avoider("carrier", "n1", key=ZONE), app("selected", "n2"))
    [decision] = handle.log.evictions()
    assert decision.plugin == PLUGIN
    assert decision.reason == (f"pod's required anti-affinity (topologyKey {ZONE}) selects pod "
                               f"default/selected in the same {ZONE} domain (node n2)")


# -- the index answers what the shared predicate answers ----------------------------------------

_selectors = st.one_of(
    st.sampled_from(["a", "b", "c"]).map(lambda v: {"matchLabels": {"app": v}}),
    st.just({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]}),
    st.just({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "c"]}]}),
    st.just({"matchLabels": {"app": "b"},
             "matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
    st.just({"matchExpressions": [{"key": "app", "operator": "In", "values": []}]}),  # invalid
    st.just({}),
)
_terms = st.builds(
    lambda sel, key, nss: term(selector=sel, key=key, namespaces=nss),
    _selectors, st.sampled_from([HOST, ZONE, "missing"]),
    st.one_of(st.none(), st.lists(st.sampled_from(["x", "y"]), min_size=1, max_size=2)))
_pods = st.lists(st.tuples(st.sampled_from(["x", "y"]), st.sampled_from(["a", "b", "c"]),
                           st.booleans(), st.integers(0, 3), st.lists(_terms, max_size=2)),
                 min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(zones=st.lists(st.sampled_from(["z1", "z2", None]), min_size=4, max_size=4),
       specs=_pods, removed=st.sets(st.integers(0, 7)))
def test_index_matches_check_pods_with_anti_affinity_exist(
        zones: list[str | None], specs: list[tuple[str, str, bool, int, list[dict[str, Any]]]],
        removed: set[int]) -> None:
    """Before and after evictions (pods removed from the index, as the plugin does)."""
    nodes = [zoned(f"n{i}", zone) for i, zone in enumerate(zones)]
    listed = nodes[:3]  # pods on n3 are outside the run
    pods = [pod(f"p{i}", f"n{n}", namespace=ns,
                labels={"app": label, **({"tier": "t"} if tier else {})},
                spec=anti(*terms) if terms else None)
            for i, (ns, label, tier, n, terms) in enumerate(specs)]
    snapshot(*nodes, *pods)  # defaults the pods as the loader would
    # The index is given every pod (those on n3 and evicted ones too) and keeps the right ones.
    index = AntiAffinityIndex(listed, lambda ns: [p for p in pods if p.namespace == ns])

    def agree(present: list[Any]) -> None:
        by_namespace: dict[str, list[Any]] = {}
        for p in present:
            by_namespace.setdefault(p.namespace, []).append(p)
        for p in present:
            expected = check_pods_with_anti_affinity_exist(p, by_namespace, index.nodes.get)
            found = index.partner(p)
            assert (found is not None) == expected
            if found is not None:
                assert found[0] in present and found[0] is not p

    present = [p for p in pods if p.node_name in index.nodes]
    agree(present)
    for i in sorted(removed):
        if i < len(pods) and pods[i] in present:
            index.remove(pods[i])
            present.remove(pods[i])
    agree(present)


# -- the example ---------------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / PLUGIN


def test_example_simulation() -> None:
    result = run_simulation(str(EXAMPLE / "policy.yaml"), [str(EXAMPLE / "cluster.yaml")], NOW,
                            1, False)
    assert [(d.namespace, d.pod, d.plugin) for d in result.evictions] == [
        ("shop", "web-5d8f9-1", PLUGIN), ("shop", "search-3c1d2-0", PLUGIN)]
