from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from desched.predicates.nodefit import (
    ANTI_AFFINITY,
    NOT_SCHEDULABLE,
    SELECTOR_MISMATCH,
    UNTOLERATED_TAINT,
    fit_failures,
    insufficient_resource,
    node_fit,
    pod_fits_any_node,
    pod_fits_any_other_node,
    scheduler_fit,
)

HOST = "kubernetes.io/hostname"
ALLOC = {"cpu": "2", "memory": "4Gi", "pods": "10"}
ANTI_WEB = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "web"}}}]}}
NO_SCHEDULE = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


# Every check fails on the first row; each following row repairs the failure the previous one
# reported, so the rows pin down the order of the checks.
@pytest.mark.parametrize(
    ("node_kwargs", "pod_kwargs", "expected"),
    [
        ({"unschedulable": True, "labels": {"zone": "b"}, "taints": [NO_SCHEDULE]},
         {"affinity": ANTI_WEB, "requests": {"cpu": "1"}}, NOT_SCHEDULABLE),
        ({"labels": {"zone": "b"}, "taints": [NO_SCHEDULE]},
         {"affinity": ANTI_WEB, "requests": {"cpu": "1"}}, SELECTOR_MISMATCH),
        ({"taints": [NO_SCHEDULE]}, {"affinity": ANTI_WEB, "requests": {"cpu": "1"}},
         UNTOLERATED_TAINT),
        ({}, {"affinity": ANTI_WEB, "requests": {"cpu": "1"}}, ANTI_AFFINITY),
        ({}, {"requests": {"cpu": "1"}}, "insufficient cpu"),
        ({}, {"requests": {"cpu": "500m"}}, None),
    ],
)
def test_node_fit_check_order(make_pod: Any, make_node: Any, make_snapshot: Any,
                              node_kwargs: dict[str, Any], pod_kwargs: dict[str, Any],
                              expected: str | None) -> None:
    labels = {"zone": "a", HOST: "n2", **node_kwargs.pop("labels", {})}
    target = make_node("n2", labels=labels, allocatable=ALLOC, **node_kwargs)
    existing = make_pod("web-1", node="n2", labels={"app": "web"}, requests={"cpu": "1500m"})
    pod = make_pod("web-0", node="n1", labels={"app": "web"}, nodeSelector={"zone": "a"},
                   **pod_kwargs)
    snap = make_snapshot(target, existing, pod)
    assert node_fit(pod, target, snap) == expected


@pytest.mark.parametrize(
    ("taints", "tolerations", "expected"),
    [
        ([{"key": "k", "effect": "PreferNoSchedule"}], [], None),
        ([{"key": "k", "effect": "NoExecute"}], [], UNTOLERATED_TAINT),
        ([{"key": "k", "effect": "NoExecute"}], [{"key": "k", "operator": "Exists"}], None),
        ([NO_SCHEDULE], [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}], None),
        ([NO_SCHEDULE], [{"key": "dedicated", "value": "cpu"}], UNTOLERATED_TAINT),
        ([NO_SCHEDULE, {"key": "k", "effect": "NoExecute"}], [{"operator": "Exists"}], None),
    ],
)
def test_node_fit_taints(make_pod: Any, make_node: Any, make_snapshot: Any,
                         taints: list[dict[str, str]], tolerations: list[dict[str, str]],
                         expected: str | None) -> None:
    node = make_node("n2", allocatable=ALLOC, taints=taints)
    pod = make_pod(node="n1", tolerations=tolerations)
    assert node_fit(pod, node, make_snapshot(node, pod)) == expected


@pytest.mark.parametrize(
    ("allocatable", "existing", "requests", "expected"),
    [
        (ALLOC, [{"cpu": "1"}], {"cpu": "1"}, None),  # exactly the remainder fits
        (ALLOC, [{"cpu": "1"}], {"cpu": "1001m"}, "insufficient cpu"),
        (ALLOC, [{"memory": "3Gi"}], {"memory": "1Gi"}, None),
        (ALLOC, [{"memory": "3Gi"}], {"memory": "1025Mi"}, "insufficient memory"),
        ({**ALLOC, "pods": "2"}, [{}], {}, None),
        ({**ALLOC, "pods": "2"}, [{}, {}], {}, "insufficient pods"),
        ({"cpu": "2", "memory": "4Gi"}, [], {}, "insufficient pods"),  # no pods allocatable
        ({"memory": "4Gi", "pods": "10"}, [], {"cpu": "100m"}, "insufficient cpu"),
        # An extended resource the node does not have.
        (ALLOC, [], {"example.com/gpu": "1"}, "insufficient example.com/gpu"),
        (ALLOC, [], {"example.com/gpu": "0"}, None),
        ({**ALLOC, "example.com/gpu": "2"}, [{"example.com/gpu": "1"}],
         {"example.com/gpu": "1"}, None),
        ({**ALLOC, "example.com/gpu": "2"}, [{"example.com/gpu": "1"}],
         {"example.com/gpu": "2"}, "insufficient example.com/gpu"),
        (ALLOC, [], {"ephemeral-storage": "1Gi"}, "insufficient ephemeral-storage"),
        # A missing extended resource has 0 available whatever the node's pods request, while
        # cpu and memory are always allocatable minus usage (so negative here).
        (ALLOC, [{"example.com/gpu": "1"}], {"example.com/gpu": "0"}, None),
        ({"memory": "4Gi", "pods": "10"}, [{"cpu": "100m"}], {"cpu": "0"}, "insufficient cpu"),
        # A resource failure is reported before the pod count.
        ({"cpu": "1", "memory": "4Gi", "pods": "1"}, [{}], {"cpu": "2"}, "insufficient cpu"),
    ],
)
def test_node_fit_resources(make_pod: Any, make_node: Any, make_snapshot: Any,
                            allocatable: dict[str, Any], existing: list[dict[str, str]],
                            requests: dict[str, str], expected: str | None) -> None:
    node = make_node("n2", allocatable=allocatable)
    others = [make_pod(f"o{i}", node="n2", requests=r) for i, r in enumerate(existing)]
    pod = make_pod("p", node="n1", requests=requests)
    assert node_fit(pod, node, make_snapshot(node, pod, *others)) == expected


def test_terminal_pods_are_not_counted(make_pod: Any, make_node: Any,
                                       make_snapshot: Any) -> None:
    node = make_node("n2", allocatable={**ALLOC, "pods": "2"})
    done = make_pod("done", node="n2", requests={"cpu": "2"}, phase="Succeeded")
    failed = make_pod("failed", node="n2", requests={"cpu": "2"}, phase="Failed")
    running = make_pod("running", node="n2", requests={"cpu": "1"})
    pod = make_pod("p", node="n1", requests={"cpu": "1"})
    assert node_fit(pod, node, make_snapshot(node, done, failed, running, pod)) is None
    bigger = make_pod("p", node="n1", requests={"cpu": "1100m"})
    snap = make_snapshot(node, done, failed, running, bigger)
    assert node_fit(bigger, node, snap) == "insufficient cpu"


def test_pod_on_node_skips_resource_check(make_pod: Any, make_node: Any,
                                          make_snapshot: Any) -> None:
    node = make_node("n1", allocatable={"cpu": "1", "memory": "1Gi", "pods": "1"})
    pod = make_pod("p", node="n1", requests={"cpu": "4", "memory": "8Gi"})
    snap = make_snapshot(node, pod)
    assert node_fit(pod, node, snap) is None
    elsewhere = make_pod("p", node="n9", requests={"cpu": "4", "memory": "8Gi"})
    assert node_fit(elsewhere, node, make_snapshot(node, elsewhere)) == "insufficient cpu"


def test_invalid_anti_affinity_selector_fails_the_node(make_pod: Any, make_node: Any,
                                                       make_snapshot: Any) -> None:
    node = make_node("n2", labels={HOST: "n2"}, allocatable=ALLOC)
    bad = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": HOST,
         "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Nope"}]}}]}}
    pod = make_pod("p", node="n1", affinity=bad)
    reason = node_fit(pod, node, make_snapshot(node, pod))
    assert reason is not None
    assert "Nope" in reason


def _cluster(make_pod: Any, make_node: Any, make_snapshot: Any) -> tuple[Any, list[Any], Any]:
    """The pod runs on n1 (full); n2 is the wrong zone, n3 is out of cpu, n4 is unschedulable."""
    nodes = [
        make_node("n1", labels={"zone": "a"}, allocatable=ALLOC),
        make_node("n2", labels={"zone": "b"}, allocatable=ALLOC),
        make_node("n3", labels={"zone": "a"}, allocatable={**ALLOC, "cpu": "500m"}),
        make_node("n4", labels={"zone": "a"}, allocatable=ALLOC, unschedulable=True),
    ]
    pod = make_pod("p", node="n1", requests={"cpu": "1"}, nodeSelector={"zone": "a"})
    filler = make_pod("filler", node="n1", requests={"cpu": "1"})
    return pod, nodes, make_snapshot(*nodes, pod, filler)


def test_fits_any_node_versus_any_other_node(make_pod: Any, make_node: Any,
                                             make_snapshot: Any) -> None:
    pod, nodes, snap = _cluster(make_pod, make_node, make_snapshot)
    assert pod_fits_any_node(pod, nodes, snap) is True  # its own node
    assert pod_fits_any_other_node(pod, nodes, snap) is False
    assert pod_fits_any_other_node(pod, [], snap) is False
    spare = make_node("n5", labels={"zone": "a"}, allocatable=ALLOC)
    snap.add(spare)
    assert pod_fits_any_other_node(pod, [*nodes, spare], snap) is True
    assert pod_fits_any_node(pod, nodes[1:], snap) is False


def test_fit_failures(make_pod: Any, make_node: Any, make_snapshot: Any) -> None:
    pod, nodes, snap = _cluster(make_pod, make_node, make_snapshot)
    assert fit_failures(pod, nodes, snap) == {
        "n2": SELECTOR_MISMATCH,
        "n3": "insufficient cpu",
        "n4": NOT_SCHEDULABLE,
    }
    assert fit_failures(pod, nodes, snap, skip_current=True) == fit_failures(pod, nodes, snap)
    # On its own node the pod's usage is already counted; elsewhere n1 is full.
    other = make_pod("q", node="n2", requests={"cpu": "1"}, nodeSelector={"zone": "a"})
    snap.add(other)
    assert fit_failures(other, nodes[:1], snap) == {"n1": "insufficient cpu"}
    assert fit_failures(other, nodes[1:2], snap, skip_current=True) == {}


_AMOUNTS = st.one_of(st.none(), st.sampled_from(["0", "100m", "500m", "1", "2", "3"]))
_MEMORY = st.one_of(st.none(), st.sampled_from(["0", "512Mi", "1Gi", "4Gi"]))
_EXTENDED = st.one_of(st.none(), st.sampled_from(["0", "1", "2"]))


def _amounts(cpu: str | None, memory: str | None, gpu: str | None) -> dict[str, str]:
    named = {"cpu": cpu, "memory": memory, "example.com/gpu": gpu}
    return {name: value for name, value in named.items() if value is not None}


# The builders are stateless functions: one fixture serves every example.
@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pod=st.tuples(_AMOUNTS, _MEMORY, _EXTENDED),
       running=st.lists(st.tuples(_AMOUNTS, _MEMORY, _EXTENDED), max_size=4),
       node=st.tuples(_AMOUNTS, _MEMORY, _EXTENDED), pods_cap=st.sampled_from(["0", "2", "5"]),
       bound=st.booleans())
def test_scheduler_fit_is_insufficient_resource_none(
        make_pod: Any, make_node: Any, make_snapshot: Any, pod: tuple[str | None, ...],
        running: list[tuple[str | None, ...]], node: tuple[str | None, ...], pods_cap: str,
        bound: bool) -> None:
    """The Ranking's resource check answers as kube-scheduler's NodeResourcesFit check does,
    extended resources the node lacks and zero requests included."""
    target = make_node("n1", allocatable={**_amounts(*node), "pods": pods_cap})
    others = [make_pod(f"r{i}", node="n1", requests=_amounts(*amounts))
              for i, amounts in enumerate(running)]
    subject = make_pod("p", node="n1" if bound else "", requests=_amounts(*pod))
    snap = make_snapshot(target, *others)
    expected = insufficient_resource(subject, target, snap, scheduler=True) is None
    assert scheduler_fit(subject)(target, snap) is expected
