"""RemovePodsViolatingNodeAffinity: validation, the required and preferred types, the filters
and limits."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from builders import NOW, args, decode, handle_for, node, pod, snapshot
from desched.framework.evictor import Limits
from desched.plugins.catalog import PLUGINS
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.removepodsviolatingnodeaffinity import (
    PLUGIN,
    RemovePodsViolatingNodeAffinity,
    RemovePodsViolatingNodeAffinityArgs,
    validate,
)
from desched.policy_files.errors import PolicyError
from desched.policy_files.loader import policy_from_document
from desched.simulate.simulation import run_simulation

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    """A pod spec whose required node affinity is the given terms (ORed)."""
    return {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": list(terms)}}}}


def label_in(key: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}


def preferred(*weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {PREFERRED: [
        {"weight": w, "preference": term} for w, term in weighted]}}}


def disk(kind: str, name: str, **kw: Any) -> Any:
    return node(name, labels={"kubernetes.io/hostname": name, "disk": kind}, **kw)


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
    plugin = RemovePodsViolatingNodeAffinity(args(RemovePodsViolatingNodeAffinityArgs, raw),
                                             handle)
    plugin.deschedule(snap.ready_nodes())
    return executor.evicted, handle


REQ = {"nodeAffinityType": [REQUIRED]}
PREF = {"nodeAffinityType": [PREFERRED]}
SSD_ON_HDD = pod("p", "n1", spec=required(label_in("disk", "ssd")))
PREFERS_SSD = pod("p", "n1", spec=preferred((10, label_in("disk", "ssd"))))


# -- validation ---------------------------------------------------------------------------------

VALIDATION: list[tuple[str, dict[str, Any], list[str]]] = [
    ("nodeAffinityType missing", {}, ["nodeAffinityType needs to be set"]),
    ("nodeAffinityType empty", {"nodeAffinityType": []}, ["nodeAffinityType needs to be set"]),
    ("required", REQ, []),
    ("both types", {"nodeAffinityType": [REQUIRED, PREFERRED]}, []),
    ("unknown type is not rejected", {"nodeAffinityType": ["sometimes"]}, []),
    ("include and exclude", {**REQ, "namespaces": {"include": ["a"], "exclude": ["b"]}},
     ["only one of Include/Exclude namespaces can be set"]),
    ("bad label selector", {**REQ, "labelSelector": {"matchExpressions": [
        {"key": "app", "operator": "In", "values": []}]}},
     ["failed to get label selectors from strategy's params: values: Invalid value: "
      "null: for 'in', 'notin' operators, values set can't be empty"]),
    ("first error only", {"namespaces": {"include": ["a"], "exclude": ["b"]}},
     ["nodeAffinityType needs to be set"]),
]


@pytest.mark.parametrize(("raw", "errors"), [c[1:] for c in VALIDATION],
                         ids=[c[0] for c in VALIDATION])
def test_validation(raw: dict[str, Any], errors: list[str]) -> None:
    assert validate(args(RemovePodsViolatingNodeAffinityArgs, raw)) == errors


def test_policy_without_args_fails_validation() -> None:
    doc = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
           "profiles": [{"name": "p", "pluginConfig": [{"name": PLUGIN}],
                         "plugins": {"deschedule": {"enabled": [PLUGIN]}}}]}
    with pytest.raises(PolicyError, match="in profile p: nodeAffinityType needs to be set"):
        policy_from_document("policy.yaml", doc, PLUGINS)


# -- requiredDuringSchedulingIgnoredDuringExecution ---------------------------------------------

# (id, args, objects, evicted pods)
CASES: list[tuple[str, dict[str, Any], list[Any], list[str]]] = [
    ("required: still matches its node", REQ,
     [disk("ssd", "n1"), disk("hdd", "n2"), SSD_ON_HDD], []),
    ("required: no longer matches, another node matches", REQ,
     [disk("hdd", "n1"), disk("ssd", "n2"), SSD_ON_HDD], ["p"]),
    ("required: no longer matches, no node matches", REQ,
     [disk("hdd", "n1"), disk("hdd", "n2"), SSD_ON_HDD], []),
    ("required: the matching node is unschedulable", REQ,
     [disk("hdd", "n1"), disk("ssd", "n2", unschedulable=True), SSD_ON_HDD], []),
    ("required: the matching node has an untolerated NoSchedule taint", REQ,
     [disk("hdd", "n1"), disk("ssd", "n2", taints=[{"key": "k", "effect": "NoSchedule"}]),
      SSD_ON_HDD], []),
    ("required: the matching node's taint is tolerated", REQ,
     [disk("hdd", "n1"), disk("ssd", "n2", taints=[{"key": "k", "effect": "NoSchedule"}]),
      pod("p", "n1", spec={**required(label_in("disk", "ssd")),
                           "tolerations": [{"key": "k", "operator": "Exists"}]})], ["p"]),
    ("required: the matching node lacks resources", REQ,
     [disk("hdd", "n1"), disk("ssd", "n2", cpu="50m"), SSD_ON_HDD], []),
    ("required: the matching node is not Ready", REQ,
     [disk("hdd", "n1"), disk("hdd", "n3"), disk("ssd", "n2", ready=False), SSD_ON_HDD], []),
    ("required: terms are ORed, one matches its node", REQ,
     [disk("hdd", "n1"), disk("ssd", "n2"),
      pod("p", "n1", spec=required(label_in("disk", "ssd"), label_in("disk", "hdd")))], []),
    ("required: nodeSelector alone is not node affinity", REQ,
     [disk("hdd", "n1"), disk("ssd", "n2"), pod("p", "n1", spec={"nodeSelector": {"disk": "ssd"}})],
     []),
    ("required: affinity matches but nodeSelector does not", REQ,
     [disk("hdd", "n1"), disk("ssd", "n2"),
      pod("p", "n1", spec={**required({"matchExpressions": [
          {"key": "disk", "operator": "Exists"}]}), "nodeSelector": {"disk": "ssd"}})], ["p"]),
    ("required: matchFields metadata.name NotIn its node", REQ,
     [node("n1"), node("n2"), pod("p", "n1", spec=required({"matchFields": [
         {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}))], ["p"]),
    ("required: an empty node selector (no terms) matches nowhere", REQ,
     [node("n1"), node("n2"), pod("p", "n1", spec=required())], []),
    ("required: only the preferred type is configured", PREF,
     [disk("hdd", "n1"), disk("ssd", "n2"), SSD_ON_HDD], []),
    ("required: terminal pods are not listed", REQ,
     [disk("hdd", "n1"), disk("ssd", "n2"),
      pod("p", "n1", phase="Succeeded", spec=required(label_in("disk", "ssd")))], []),
    ("required: namespaces.include lists the pod's namespace",
     {**REQ, "namespaces": {"include": ["default"]}},
     [disk("hdd", "n1"), disk("ssd", "n2"), SSD_ON_HDD], ["p"]),
    ("required: namespaces.include lists another namespace",
     {**REQ, "namespaces": {"include": ["other"]}},
     [disk("hdd", "n1"), disk("ssd", "n2"), SSD_ON_HDD], []),
    ("required: namespaces.exclude lists the pod's namespace",
     {**REQ, "namespaces": {"exclude": ["default"]}},
     [disk("hdd", "n1"), disk("ssd", "n2"), SSD_ON_HDD], []),
    ("required: labelSelector matches", {**REQ, "labelSelector": {"matchLabels": {"app": "a"}}},
     [disk("hdd", "n1"), disk("ssd", "n2"),
      pod("p", "n1", labels={"app": "a"}, spec=required(label_in("disk", "ssd")))], ["p"]),
    ("required: labelSelector does not match",
     {**REQ, "labelSelector": {"matchLabels": {"app": "b"}}},
     [disk("hdd", "n1"), disk("ssd", "n2"),
      pod("p", "n1", labels={"app": "a"}, spec=required(label_in("disk", "ssd")))], []),
    ("required: DefaultEvictor keeps a bare pod", REQ,
     [disk("hdd", "n1"), disk("ssd", "n2"),
      pod("p", "n1", owner=None, spec=required(label_in("disk", "ssd")))], []),
    ("required: DefaultEvictor keeps a DaemonSet pod", REQ,
     [disk("hdd", "n1"), disk("ssd", "n2"),
      pod("p", "n1", owner=("DaemonSet", "ds"), spec=required(label_in("disk", "ssd")))], []),
    ("required: DefaultEvictor keeps a system-critical pod", REQ,
     [disk("hdd", "n1"), disk("ssd", "n2"),
      pod("p", "n1", priority=2_000_000_000, spec=required(label_in("disk", "ssd")))], []),
    ("required: DefaultEvictor keeps a pod with local storage", REQ,
     [disk("hdd", "n1"), disk("ssd", "n2"),
      pod("p", "n1", spec={**required(label_in("disk", "ssd")),
                           "volumes": [{"name": "s", "emptyDir": {}}]})], []),
    # -- preferredDuringSchedulingIgnoredDuringExecution ----------------------------------------
    ("preferred: its node is the best", PREF,
     [disk("ssd", "n1"), disk("hdd", "n2"), PREFERS_SSD], []),
    ("preferred: another node scores higher", PREF,
     [disk("hdd", "n1"), disk("ssd", "n2"), PREFERS_SSD], ["p"]),
    ("preferred: weights tie", PREF,
     [disk("ssd", "n1"), disk("ssd", "n2"), PREFERS_SSD], []),
    ("preferred: weights of matching terms add up", PREF,
     [node("n1", labels={"disk": "ssd"}), node("n2", labels={"disk": "ssd", "gpu": "yes"}),
      pod("p", "n1", spec=preferred((10, label_in("disk", "ssd")), (5, label_in("gpu", "yes"))))],
     ["p"]),
    ("preferred: a heavier term on its node beats two lighter ones elsewhere", PREF,
     [node("n1", labels={"disk": "ssd"}), node("n2", labels={"zone": "a", "gpu": "yes"}),
      pod("p", "n1", spec=preferred((50, label_in("disk", "ssd")), (20, label_in("zone", "a")),
                                    (20, label_in("gpu", "yes"))))], []),
    ("preferred: the best node counts even when the pod does not fit there", PREF,
     [disk("hdd", "n1"), disk("ssd", "n2", unschedulable=True), PREFERS_SSD], ["p"]),
    ("preferred: fits nowhere, its own node included", PREF,
     [disk("hdd", "n1", unschedulable=True), disk("ssd", "n2", unschedulable=True), PREFERS_SSD],
     []),
    ("preferred: a better node that is not Ready does not count", PREF,
     [disk("hdd", "n1"), disk("hdd", "n3"), disk("ssd", "n2", ready=False), PREFERS_SSD], []),
    ("preferred: only required affinity on the pod", PREF,
     [disk("hdd", "n1"), disk("ssd", "n2"), SSD_ON_HDD], []),
    ("preferred: only the required type is configured", REQ,
     [disk("hdd", "n1"), disk("ssd", "n2"), PREFERS_SSD], []),
    ("preferred: DefaultEvictor keeps a bare pod", PREF,
     [disk("hdd", "n1"), disk("ssd", "n2"),
      pod("p", "n1", owner=None, spec=preferred((10, label_in("disk", "ssd"))))], []),
    ("unknown types are skipped, known ones still run",
     {"nodeAffinityType": ["sometimes", REQUIRED]},
     [disk("hdd", "n1"), disk("ssd", "n2"), SSD_ON_HDD], ["p"]),
]


@pytest.mark.parametrize(("raw", "objects", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_cases(raw: dict[str, Any], objects: list[Any], expected: list[str]) -> None:
    evicted, _ = run(raw, *objects)
    assert evicted == expected


def test_types_run_in_list_order_each_over_every_node() -> None:
    objs = [disk("hdd", "n1"), disk("ssd", "n2"),
            pod("pref-1", "n1", spec=preferred((10, label_in("disk", "ssd")))),
            pod("req-1", "n1", spec=required(label_in("disk", "ssd"))),
            pod("pref-2", "n1", spec=preferred((10, label_in("disk", "ssd")))),
            pod("req-2", "n1", spec=required(label_in("disk", "ssd")))]
    evicted, _ = run({"nodeAffinityType": [REQUIRED, PREFERRED]}, *objs)
    assert evicted == ["req-1", "req-2", "pref-1", "pref-2"]
    evicted, _ = run({"nodeAffinityType": [PREFERRED, REQUIRED]}, *objs)
    assert evicted == ["pref-1", "pref-2", "req-1", "req-2"]


def test_unknown_type_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    objs = [disk("hdd", "n1"), disk("ssd", "n2"), SSD_ON_HDD]
    snap = snapshot(*objs)
    handle, _ = handle_for(snap, plugin=PLUGIN)
    plugin = RemovePodsViolatingNodeAffinity(
        args(RemovePodsViolatingNodeAffinityArgs, {"nodeAffinityType": ["bogus"]}), handle)
    with caplog.at_level(logging.ERROR):
        plugin.deschedule(snap.ready_nodes())
        plugin.deschedule(snap.ready_nodes())
    assert [r.getMessage() for r in caplog.records].count(
        f"Invalid nodeAffinityType 'bogus' (plugin {PLUGIN}, profile default): ignored") == 1


def test_pod_fitting_nowhere_is_explained() -> None:
    _, handle = run(REQ, disk("hdd", "n1"), disk("hdd", "n2"), SSD_ON_HDD)
    assert handle.log.filtered_counts
    [(key, count)] = handle.log.filtered_counts.items()
    assert count == 1 and "does not fit any node" in key[2]


def test_eviction_reason_names_the_node() -> None:
    _, handle = run(REQ, disk("hdd", "n1"), disk("ssd", "n2"), SSD_ON_HDD)
    [decision] = handle.log.evictions()
    assert decision.plugin == PLUGIN
    assert "no longer matches node n1" in decision.reason
    _, handle = run(PREF, disk("hdd", "n1"), disk("ssd", "n2"), PREFERS_SSD)
    [decision] = handle.log.evictions()
    assert "node n1 scores 0" in decision.reason and "another node scores 10" in decision.reason


def test_node_fit_filter_applies() -> None:
    """With nodeFit the DefaultEvictor wants another node; the plugin's own check counts the
    current node too. Both must hold."""
    objs = [disk("hdd", "n1"), disk("ssd", "n2"), PREFERS_SSD]
    evicted, _ = run(PREF, *objs, protections={"nodeFit": True})
    assert evicted == ["p"]
    objs = [disk("hdd", "n1"), disk("ssd", "n2", unschedulable=True), PREFERS_SSD]
    evicted, _ = run(PREF, *objs, protections={"nodeFit": True})
    assert evicted == []


def test_pdb_blocks_in_simulation() -> None:
    budget = decode("PodDisruptionBudget", {
        "metadata": {"name": "b", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "a"}}}})
    objs = [disk("hdd", "n1"), disk("ssd", "n2"), budget,
            pod("p", "n1", labels={"app": "a"}, spec=required(label_in("disk", "ssd"))),
            pod("q", "n1", spec=required(label_in("disk", "ssd")))]
    evicted, handle = run(REQ, *objs)
    assert evicted == ["q"]
    assert [d.pod for d in handle.log.decisions if d.outcome == "pdb-blocked"] == ["p"]


def _violators(node_name: str, count: int, prefix: str) -> list[Any]:
    return [pod(f"{prefix}{i}", node_name, spec=required(label_in("disk", "ssd")))
            for i in range(count)]


def test_node_limit_moves_on_to_the_next_node() -> None:
    objs = [disk("hdd", "n1"), disk("hdd", "n2"), disk("ssd", "n3"),
            *_violators("n1", 3, "a"), *_violators("n2", 2, "b")]
    evicted, handle = run(REQ, *objs, limits=Limits(per_node=2))
    assert evicted == ["a0", "a1", "b0", "b1"]
    # The first refusal on a node ends that node: a2 is the only pod refused.
    assert [d.pod for d in handle.log.decisions if d.outcome == "limited"] == ["a2"]


def test_total_limit_ends_the_run() -> None:
    objs = [disk("hdd", "n1"), disk("hdd", "n2"), disk("ssd", "n3"),
            *_violators("n1", 2, "a"), *_violators("n2", 2, "b"),
            pod("pref", "n1", spec=preferred((10, label_in("disk", "ssd"))))]
    evicted, handle = run({"nodeAffinityType": [REQUIRED, PREFERRED]}, *objs,
                          limits=Limits(total=3))
    assert evicted == ["a0", "a1", "b0"]
    assert [d.pod for d in handle.log.decisions if d.outcome == "limited"] == ["b1"]


def test_namespace_limit_skips_only_the_pod() -> None:
    objs = [disk("hdd", "n1"), disk("ssd", "n2"),
            pod("a", "n1", namespace="x", spec=required(label_in("disk", "ssd"))),
            pod("b", "n1", namespace="x", spec=required(label_in("disk", "ssd"))),
            pod("c", "n1", namespace="y", spec=required(label_in("disk", "ssd")))]
    evicted, _ = run(REQ, *objs, limits=Limits(per_namespace=1))
    assert evicted == ["a", "c"]


def test_preferred_best_weight_is_per_distinct_terms() -> None:
    """Pods with different preferences on the same nodes each get their own best weight."""
    objs = [node("n1", labels={"disk": "ssd"}), node("n2", labels={"disk": "hdd"}),
            pod("wants-ssd", "n1", spec=preferred((10, label_in("disk", "ssd")))),
            pod("wants-hdd", "n1", spec=preferred((10, label_in("disk", "hdd")))),
            pod("wants-ssd-2", "n2", spec=preferred((10, label_in("disk", "ssd"))))]
    evicted, _ = run(PREF, *objs)
    assert evicted == ["wants-hdd", "wants-ssd-2"]


# -- the example ---------------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / PLUGIN


def test_example_simulation() -> None:
    result = run_simulation(str(EXAMPLE / "policy.yaml"), [str(EXAMPLE / "cluster.yaml")], NOW,
                            1, False)
    assert [(d.namespace, d.pod, d.plugin) for d in result.evictions] == [
        ("shop", "db-6f7c9-0", PLUGIN), ("shop", "cache-8c2f1-0", PLUGIN)]
