"""RemovePodsViolatingNodeTaints: validation, which taints count (effects, excluded and included
taints), tolerations, the filters and limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from builders import NOW, args, handle_for, node, pod, snapshot
from desched.framework.evictor import Limits
from desched.plugins.catalog import PLUGINS
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.removepodsviolatingnodetaints import (
    PLUGIN,
    RemovePodsViolatingNodeTaints,
    RemovePodsViolatingNodeTaintsArgs,
    validate,
)
from desched.policy_files.loader import policy_from_document
from desched.simulate.simulation import run_simulation


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, str]:
    out = {"key": key, "effect": effect}
    if value:
        out["value"] = value
    return out


def tol(key: str = "", value: str = "", effect: str = "", operator: str = "Equal"
        ) -> dict[str, str]:
    out = {"key": key, "operator": operator}
    if value:
        out["value"] = value
    if effect:
        out["effect"] = effect
    return out


def tolerating(name: str, *tolerations: dict[str, str], node_name: str = "n1",
               **kw: Any) -> Any:
    return pod(name, node_name, spec={"tolerations": list(tolerations)}, **kw)


def run(raw: dict[str, Any], *objects: Any, taints: list[dict[str, str]] | None = None,
        limits: Limits | None = None, protections: dict[str, Any] | None = None
        ) -> tuple[list[str], Any]:
    """Run the plugin; unless `objects` holds nodes, n1 carries `taints` and n2 none. A
    DefaultEvictor (default protections unless `protections` says otherwise) is the filter."""
    objs = list(objects)
    if not any(type(o).__name__ == "Node" for o in objs):
        objs = [node("n1", taints=taints), node("n2"), *objs]
    snap = snapshot(*objs)
    setup, _ = handle_for(snap)
    evictor = DefaultEvictor(args(DefaultEvictorArgs, protections or {}), setup)
    handle, executor = handle_for(snap, plugin=PLUGIN, limits=limits, filters=[evictor])
    plugin = RemovePodsViolatingNodeTaints(args(RemovePodsViolatingNodeTaintsArgs, raw), handle)
    plugin.deschedule(snap.ready_nodes())
    return executor.evicted, handle


# -- arguments and validation --------------------------------------------------------------------

VALIDATION: list[tuple[str, dict[str, Any], list[str]]] = [
    ("no args", {}, []),
    ("excludedTaints only", {"excludedTaints": ["a"]}, []),
    ("includedTaints only", {"includedTaints": ["a", "b=c"]}, []),
    ("both", {"excludedTaints": ["a"], "includedTaints": ["b"]},
     ["either includedTaints or excludedTaints can be set, but not both"]),
    ("excludedTaints with an empty includedTaints", {"excludedTaints": ["a"], "includedTaints": []},
     []),
    ("include and exclude namespaces", {"namespaces": {"include": ["a"], "exclude": ["b"]}},
     ["only one of Include/Exclude namespaces can be set"]),
    ("bad label selector", {"labelSelector": {"matchExpressions": [
        {"key": "app", "operator": "Exists", "values": ["x"]}]}},
     ["failed to get label selectors from strategy's params: values: Invalid value: "
      '["x"]: values set must be empty for exists and does not exist']),
    ("first error only", {"namespaces": {"include": ["a"], "exclude": ["b"]},
                          "excludedTaints": ["a"], "includedTaints": ["b"]},
     ["only one of Include/Exclude namespaces can be set"]),
]


@pytest.mark.parametrize(("raw", "errors"), [c[1:] for c in VALIDATION],
                         ids=[c[0] for c in VALIDATION])
def test_validation(raw: dict[str, Any], errors: list[str]) -> None:
    assert validate(args(RemovePodsViolatingNodeTaintsArgs, raw)) == errors


def test_included_taints_absent_null_and_empty_decode_differently() -> None:
    decoded = args(RemovePodsViolatingNodeTaintsArgs, {})
    assert decoded.included_taints is None
    assert args(RemovePodsViolatingNodeTaintsArgs, {"includedTaints": None}).included_taints \
        is None
    assert args(RemovePodsViolatingNodeTaintsArgs, {"includedTaints": []}).included_taints == []
    assert decoded.excluded_taints == [] and decoded.include_prefer_no_schedule is False


def test_policy_without_args_is_valid() -> None:
    doc = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
           "profiles": [{"name": "p", "pluginConfig": [{"name": PLUGIN}],
                         "plugins": {"deschedule": {"enabled": [PLUGIN]}}}]}
    policy = policy_from_document("policy.yaml", doc, PLUGINS)
    assert policy.profiles[0].enabled["deschedule"] == [PLUGIN]


# -- which pods are evicted ---------------------------------------------------------------------

PLAIN = pod("p", "n1")

# (id, args, n1's taints, pods, evicted pods)
CASES: list[tuple[str, dict[str, Any], list[dict[str, str]], list[Any], list[str]]] = [
    ("NoSchedule taint, no toleration", {}, [taint("dedicated", "gpu")], [PLAIN], ["p"]),
    ("node without taints", {}, [], [PLAIN], []),
    ("tolerated by key and value", {}, [taint("dedicated", "gpu")],
     [tolerating("p", tol("dedicated", "gpu"))], []),
    ("toleration with another value", {}, [taint("dedicated", "gpu")],
     [tolerating("p", tol("dedicated", "cpu"))], ["p"]),
    ("tolerated by Exists on the key", {}, [taint("dedicated", "gpu")],
     [tolerating("p", tol("dedicated", operator="Exists"))], []),
    ("tolerated by an empty-key Exists", {}, [taint("dedicated", "gpu"), taint("other")],
     [tolerating("p", tol(operator="Exists"))], []),
    ("toleration for another effect", {}, [taint("dedicated", "gpu")],
     [tolerating("p", tol("dedicated", "gpu", effect="NoExecute"))], ["p"]),
    ("toleration with the same effect", {}, [taint("dedicated", "gpu")],
     [tolerating("p", tol("dedicated", "gpu", effect="NoSchedule"))], []),
    ("one of two taints untolerated", {}, [taint("a", "1"), taint("b", "2")],
     [tolerating("p", tol("a", "1"))], ["p"]),
    ("PreferNoSchedule is ignored by default", {}, [taint("soft", "x", "PreferNoSchedule")],
     [PLAIN], []),
    ("PreferNoSchedule with includePreferNoSchedule", {"includePreferNoSchedule": True},
     [taint("soft", "x", "PreferNoSchedule")], [PLAIN], ["p"]),
    ("PreferNoSchedule tolerated", {"includePreferNoSchedule": True},
     [taint("soft", "x", "PreferNoSchedule")],
     [tolerating("p", tol("soft", operator="Exists", effect="PreferNoSchedule"))], []),
    ("NoExecute is never considered", {"includePreferNoSchedule": True},
     [taint("gone", "x", "NoExecute")], [PLAIN], []),
    ("NoExecute is not considered even when included", {"includedTaints": ["gone"]},
     [taint("gone", "x", "NoExecute")], [PLAIN], []),
    # excludedTaints
    ("excluded by key", {"excludedTaints": ["dedicated"]}, [taint("dedicated", "gpu")],
     [PLAIN], []),
    ("excluded by key=value", {"excludedTaints": ["dedicated=gpu"]},
     [taint("dedicated", "gpu")], [PLAIN], []),
    ("key=value exclusion with another value", {"excludedTaints": ["dedicated=cpu"]},
     [taint("dedicated", "gpu")], [PLAIN], ["p"]),
    ("key= does not name a taint without a value", {"excludedTaints": ["dedicated="]},
     [taint("dedicated")], [PLAIN], ["p"]),
    ("exclusion leaves other taints", {"excludedTaints": ["a"]}, [taint("a"), taint("b")],
     [PLAIN], ["p"]),
    ("excluded PreferNoSchedule", {"includePreferNoSchedule": True, "excludedTaints": ["soft"]},
     [taint("soft", "x", "PreferNoSchedule")], [PLAIN], []),
    # includedTaints
    ("included by key", {"includedTaints": ["dedicated"]}, [taint("dedicated", "gpu")],
     [PLAIN], ["p"]),
    ("included by key=value", {"includedTaints": ["dedicated=gpu"]},
     [taint("dedicated", "gpu")], [PLAIN], ["p"]),
    ("key=value inclusion with another value", {"includedTaints": ["dedicated=cpu"]},
     [taint("dedicated", "gpu")], [PLAIN], []),
    ("another taint included", {"includedTaints": ["other"]}, [taint("dedicated", "gpu")],
     [PLAIN], []),
    ("includedTaints: [] includes nothing", {"includedTaints": []},
     [taint("dedicated", "gpu")], [PLAIN], []),
    ("includedTaints: null includes everything", {"includedTaints": None},
     [taint("dedicated", "gpu")], [PLAIN], ["p"]),
    ("included taint tolerated", {"includedTaints": ["a"]}, [taint("a"), taint("b")],
     [tolerating("p", tol("a", operator="Exists"))], []),
    # listing and filters
    ("namespaces.include", {"namespaces": {"include": ["x"]}}, [taint("t")],
     [pod("in", "n1", namespace="x"), pod("out", "n1", namespace="y")], ["in"]),
    ("namespaces.exclude", {"namespaces": {"exclude": ["x"]}}, [taint("t")],
     [pod("in", "n1", namespace="x"), pod("out", "n1", namespace="y")], ["out"]),
    ("labelSelector", {"labelSelector": {"matchLabels": {"app": "a"}}}, [taint("t")],
     [pod("a", "n1", labels={"app": "a"}), pod("b", "n1", labels={"app": "b"})], ["a"]),
    ("terminal pods are not listed", {}, [taint("t")],
     [pod("done", "n1", phase="Succeeded"), pod("failed", "n1", phase="Failed"), PLAIN], ["p"]),
    ("pods on other nodes are untouched", {}, [taint("t")],
     [pod("a", "n1"), pod("b", "n2")], ["a"]),
    ("DefaultEvictor protections", {}, [taint("t")],
     [pod("bare", "n1", owner=None), pod("ds", "n1", owner=("DaemonSet", "d")),
      pod("critical", "n1", priority=2_000_000_000),
      pod("local", "n1", spec={"volumes": [{"name": "v", "emptyDir": {}}]}),
      pod("mirror", "n1", annotations={"kubernetes.io/config.mirror": "x"}),
      pod("ok", "n1")], ["ok"]),
    ("evict annotation bypasses the protections", {}, [taint("t")],
     [pod("bare", "n1", owner=None,
          annotations={"descheduler.alpha.kubernetes.io/evict": "true"})], ["bare"]),
]


@pytest.mark.parametrize(("raw", "taints", "pods", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_cases(raw: dict[str, Any], taints: list[dict[str, str]], pods: list[Any],
               expected: list[str]) -> None:
    evicted, _ = run(raw, *pods, taints=taints)
    assert evicted == expected


def test_nodes_are_processed_in_order_pods_in_list_order() -> None:
    objs = [node("n1", taints=[taint("t")]), node("n2", taints=[taint("t")]), node("n3"),
            pod("b", "n2"), pod("a", "n1"), pod("c", "n1"), pod("d", "n3")]
    evicted, _ = run({}, *objs)
    assert evicted == ["a", "c", "b"]


def test_node_limit_moves_on_to_the_next_node() -> None:
    objs = [node("n1", taints=[taint("t")]), node("n2", taints=[taint("t")]),
            *(pod(f"a{i}", "n1") for i in range(3)), *(pod(f"b{i}", "n2") for i in range(3))]
    evicted, handle = run({}, *objs, limits=Limits(per_node=2))
    assert evicted == ["a0", "a1", "b0", "b1"]
    assert [d.pod for d in handle.log.decisions if d.outcome == "limited"] == ["a2", "b2"]


def test_total_limit_ends_the_run() -> None:
    objs = [node("n1", taints=[taint("t")]), node("n2", taints=[taint("t")]),
            *(pod(f"a{i}", "n1") for i in range(2)), *(pod(f"b{i}", "n2") for i in range(2))]
    evicted, handle = run({}, *objs, limits=Limits(total=3))
    assert evicted == ["a0", "a1", "b0"]
    assert [d.pod for d in handle.log.decisions if d.outcome == "limited"] == ["b1"]


def test_namespace_limit_skips_only_the_pod() -> None:
    pods = [pod("a", "n1", namespace="x"), pod("b", "n1", namespace="x"),
            pod("c", "n1", namespace="y")]
    evicted, _ = run({}, *pods, taints=[taint("t")], limits=Limits(per_namespace=1))
    assert evicted == ["a", "c"]


def test_node_fit_keeps_pods_with_nowhere_to_go() -> None:
    objs = [node("n1", taints=[taint("t")]), node("n2", taints=[taint("t")]),
            pod("p", "n1")]
    evicted, _ = run({}, *objs, protections={"nodeFit": True})
    assert evicted == []
    objs = [node("n1", taints=[taint("t")]), node("n2"), pod("p", "n1")]
    evicted, _ = run({}, *objs, protections={"nodeFit": True})
    assert evicted == ["p"]


def test_eviction_reason_names_the_taint() -> None:
    _, handle = run({"excludedTaints": ["ok"]}, pod("p", "n1"),
                    taints=[taint("ok", "x"), taint("dedicated", "gpu")])
    [decision] = handle.log.evictions()
    assert decision.plugin == PLUGIN
    assert decision.reason == "pod does not tolerate taint dedicated=gpu:NoSchedule on node n1"


# -- the example ---------------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / PLUGIN


def test_example_simulation() -> None:
    result = run_simulation(str(EXAMPLE / "policy.yaml"), [str(EXAMPLE / "cluster.yaml")], NOW,
                            1, False)
    assert [(d.namespace, d.pod, d.plugin) for d in result.evictions] == [
        ("shop", "web-5d8f9-0", PLUGIN), ("shop", "api-6b7d8-0", PLUGIN)]
