"""The scheduler models' filters and scores against kube-scheduler's default profile and
Koordinator's LoadAwareScheduling (defaults: usage thresholds cpu 65% memory 95%, estimated
scaling factors cpu 85% memory 70%, NodeMetric expiry 180 s)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from builders import NOW, decode, node, pod, snapshot
from desched.model.node import ContainerImage
from desched.scheduler.by_name import scheduler_model
from desched.scheduler.kube_default import KubeDefault
from desched.scheduler.load_aware import LoadAware, estimated_usage
from oracles.placement import kube_default_exact, load_aware_exact

STAMP = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")


def place(model: Any, p: Any, *objects: Any) -> str | None:
    snap = snapshot(p, *objects)
    return model.place(snap.pods[p.key], snap.ready_nodes(), snap, NOW).node


def test_kube_default_prefers_the_least_requested_node() -> None:
    new = pod("new", node_name="", cpu="500m")
    busy = [pod(f"b{i}", "n1", cpu="1") for i in range(3)]
    assert place(KubeDefault(), new, node("n1"), node("n2"), *busy) == "n2"


def test_a_pod_still_bound_is_placed_as_if_it_had_left() -> None:
    """The ping-pong case: the hot node is the lightest by requests once the pod is gone."""
    leaving = pod("leaving", "n1", cpu="2")
    others = [pod(f"o{i}", "n2", cpu="1") for i in range(2)]
    assert place(KubeDefault(), leaving, node("n1"), node("n2"), *others) == "n1"


@pytest.mark.parametrize(("spec", "expected"), [
    # A required node affinity wins over free room.
    ({"nodeSelector": {"pool": "b"}}, "n1"),
    # An untolerated NoSchedule taint filters the emptier node.
    ({}, "n1"),
])
def test_kube_default_filters(spec: dict[str, Any], expected: str) -> None:
    taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if not spec else None
    nodes = [node("n1", labels={"pool": "b"}), node("n2", labels={"pool": "a"}, taints=taints)]
    busy = pod("busy", "n1", cpu="2")
    assert place(KubeDefault(), pod("new", node_name="", spec=spec), *nodes, busy) == expected


def test_prefer_no_schedule_taints_weigh_three_times_least_allocated() -> None:
    soft = [{"key": "spot", "value": "x", "effect": "PreferNoSchedule"}]
    busy = pod("busy", "n1", cpu="1")
    assert place(KubeDefault(), pod("new", node_name=""), node("n1"),
                 node("n2", taints=soft), busy) == "n1"


def test_preferred_node_affinity_weighs_twice_least_allocated() -> None:
    spec = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [
            {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}}
    busy = pod("busy", "n1", cpu="1")
    nodes = [node("n1", labels={"disk": "ssd"}), node("n2")]
    assert place(KubeDefault(), pod("new", node_name="", spec=spec), *nodes, busy) == "n1"


def test_topology_spread_do_not_schedule_filters_the_crowded_domain() -> None:
    labels = {"app": "web"}
    spec = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                           "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": labels}}]}
    nodes = [node("n1", cpu="64", labels={"zone": "a"}), node("n2", labels={"zone": "b"})]
    web = [pod("w1", "n2", labels=labels, cpu="3")]
    # n2 is fuller by requests but zone b... holds the only replica: zone a must get the next.
    new = pod("new", node_name="", labels=labels, spec=spec)
    assert place(KubeDefault(), new, *nodes, *web) == "n1"
    web2 = [pod("w1", "n1", labels=labels), pod("w2", "n1", labels=labels)]
    assert place(KubeDefault(), new, *nodes, *web2) == "n2"


def test_running_pods_required_anti_affinity_keeps_the_pod_away() -> None:
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname",
         "labelSelector": {"matchLabels": {"app": "web"}}}]}}}
    guard = pod("guard", "n2", spec=anti, cpu="3")
    new = pod("new", node_name="", labels={"app": "web"})
    # n2 has the most room after the guard's 3 cpu... no: n1 is busier; still n2 is refused.
    busy = pod("busy", "n1", cpu="3500m")
    assert place(KubeDefault(), new, node("n1"), node("n2"), guard, busy) == "n1"


def test_required_pod_affinity_needs_a_matching_pod_in_the_domain() -> None:
    aff = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname",
         "labelSelector": {"matchLabels": {"app": "db"}}}]}}}
    db = pod("db", "n1", labels={"app": "db"}, cpu="3")
    assert place(KubeDefault(), pod("new", node_name="", spec=aff), node("n1"), node("n2"),
                 db) == "n1"


def test_nothing_fits_says_why() -> None:
    snap = snapshot(node("n1", cpu="1"), pod("big", node_name="", cpu="2"))
    placement = KubeDefault().place(snap.pods["default/big"], snap.ready_nodes(), snap, NOW)
    assert placement.node is None
    assert placement.why == "0/1 nodes are available: 1 Insufficient cpu"


# -- koord-load-aware ----------------------------------------------------------------------------

def metric(name: str, pods: dict[str, str], system: str = "0", age: int = 30) -> Any:
    from datetime import timedelta
    updated = (NOW - timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return decode("NodeMetric", {"metadata": {"name": name}, "status": {
        "updateTime": updated,
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": "0"}},
                       "systemUsage": {"resources": {"cpu": system}}},
        "podsMetric": [{"namespace": "default", "name": p, "podUsage": {"resources": {"cpu": cpu}}}
                       for p, cpu in pods.items()]}})


def test_estimated_usage_of_an_unreported_pod() -> None:
    assert estimated_usage(pod("p", cpu="1", memory="1Gi")) == {
        "cpu": 850, "memory": 1024 ** 3 * 70 // 100}
    assert estimated_usage(pod("q", cpu=None, memory=None)) == {
        "cpu": 250, "memory": 200 * 1024 * 1024}
    limited = pod("l", spec={"containers": [{"name": "c", "resources": {
        "requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}]})
    assert estimated_usage(limited)["cpu"] == 2000


def test_load_aware_places_by_measured_usage_where_requests_would_not() -> None:
    """n1 is light by requests but hot by usage: kube-default picks it, load-aware does not."""
    hot = pod("hot", "n1", cpu="100m")
    calm = [pod(f"c{i}", "n2", cpu="1") for i in range(2)]
    objects = [node("n1"), node("n2"), hot, *calm,
               metric("n1", {"hot": "2800m"}), metric("n2", {"c0": "200m", "c1": "200m"})]
    new = pod("new", node_name="", cpu="100m")
    assert place(KubeDefault(), new, *objects) == "n1"
    assert place(LoadAware(), new, *objects) == "n2"


def test_load_aware_filters_nodes_at_the_usage_threshold_and_expired_metrics() -> None:
    objects = [node("n1"), node("n2"), pod("a", "n1"), pod("b", "n2"),
               metric("n1", {"a": "2600m"}),  # 65% of 4 cpu: unschedulable
               metric("n2", {"b": "100m"}, age=181)]  # expired: unschedulable
    snap = snapshot(pod("new", node_name=""), *objects)
    placement = LoadAware().place(snap.pods["default/new"], snap.ready_nodes(), snap, NOW)
    assert placement.node is None
    assert "1 node(s) cpu usage exceed threshold" in placement.why
    assert "1 node(s) nodeMetric expired" in placement.why


def test_load_aware_reads_its_arguments_from_the_koord_scheduler_configuration() -> None:
    """usageThresholds cpu 70 admits the node at 65 %; nodeMetricExpirationSeconds 300 keeps
    the 181-second-old metric; filterExpiredNodeMetrics false would too."""
    from desched.scheduler.profile import LoadAwareArgs, Profile, SchedulerConfig

    objects = [node("n1"), node("n2"), pod("a", "n1"), pod("b", "n2", cpu="3"),
               metric("n1", {"a": "2600m"}), metric("n2", {"b": "3500m"}, age=181)]
    snap = snapshot(pod("new", node_name=""), *objects)
    subject, ready = snap.pods["default/new"], snap.ready_nodes()
    assert LoadAware().place(subject, ready, snap, NOW).node is None
    args = LoadAwareArgs(usage_thresholds={"cpu": 70, "memory": 95},
                         node_metric_expiration_seconds=300)
    config = SchedulerConfig(profiles={"koord-scheduler": Profile(
        scheduler_name="koord-scheduler", load_aware=args)})
    assert LoadAware(config).place(subject, ready, snap, NOW).node == "n1"  # n2: 87.5 %


def test_a_node_without_nodemetric_is_scheduled_on_estimates() -> None:
    objects = [node("n1"), node("n2"), pod("a", "n1", cpu="1"),
               metric("n1", {"a": "3"})]
    assert place(LoadAware(), pod("new", node_name=""), *objects) == "n2"


def test_unknown_model_name() -> None:
    with pytest.raises(ValueError, match="unknown scheduler model 'x'"):
        scheduler_model("x")


# -- the incremental ranking equals the exact search ----------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ZONE = "topology.kubernetes.io/zone"


def workload(app: str) -> Any:
    return decode("ReplicaSet", {"metadata": {"name": f"rs-{app}", "namespace": "default"},
                                 "spec": {"selector": {"matchLabels": {"app": app}}}})


@st.composite
def placements(draw: Any) -> tuple[list[Any], list[Any]]:
    nodes = []
    for i in range(draw(st.integers(2, 8))):
        taints = [{"key": "spot", "value": "x", "effect": "PreferNoSchedule"}] \
            if draw(st.booleans()) else None
        labels = {"disk": draw(st.sampled_from(["ssd", "hdd"])),
                  "kubernetes.io/hostname": f"n{i}"}
        zone = draw(st.sampled_from(["za", "zb", "zc", None]))
        if zone is not None:
            labels[ZONE] = zone
        images = [{"names": ["app:1"], "sizeBytes": 300 * 1024 * 1024}] \
            if draw(st.booleans()) else []
        n = node(f"n{i}", cpu=draw(st.sampled_from(["2", "4", "8"])),
                 memory=draw(st.sampled_from(["4Gi", "8Gi"])), labels=labels, taints=taints)
        if images:
            n = msgspec.structs.replace(n, status=msgspec.structs.replace(
                n.status, images=(ContainerImage(names=("app:1",), size_bytes=300 << 20),)))
        nodes.append(n)
    pods = []
    for i in range(draw(st.integers(0, 12))):
        app = draw(st.sampled_from(["a", "b", "c"]))
        # Some are deleted at once when evicted (no grace period), the others terminate.
        grace = {"terminationGracePeriodSeconds": 0} if draw(st.booleans()) else None
        pods.append(pod(f"p{i}", f"n{draw(st.integers(0, len(nodes) - 1))}",
                        cpu=draw(st.sampled_from(["100m", "500m", "1", None])),
                        memory=draw(st.sampled_from(["128Mi", "1Gi"])),
                        labels={"app": app}, owner=("ReplicaSet", f"rs-{app}"), spec=grace))
    metrics = []
    for n in nodes:  # some nodes report usage (LoadAware reads it), some do not
        if draw(st.booleans()):
            mine = {p.name: draw(st.sampled_from(["50m", "900m", "2500m"]))
                    for p in pods if p.node_name == n.name}
            metrics.append(metric(n.name, mine))
    owners = [workload("a"), workload("b")]  # rs-c is not in the snapshot: no spreading
    if draw(st.booleans()):
        owners.append(decode("Service", {"metadata": {"name": "svc", "namespace": "default"},
                                         "spec": {"selector": {"app": "c"}}}))
    return nodes, [*pods, *metrics, *owners]


PREFER_SSD = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 5, "preference": {"matchExpressions": [
        {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}}


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(placements(), st.lists(st.tuples(st.sampled_from(["100m", "700m", "2"]), st.booleans(),
                                        st.booleans(), st.sampled_from(["a", "b", "c"])),
                              min_size=1, max_size=8))
def test_ranked_placement_equals_the_exact_search(
        case: tuple[list[Any], list[Any]], steps: list[tuple[str, bool, bool, str]]) -> None:
    """The Ranking's answer (scheduler/kube_ranked.py) is the exact search's: the node, its
    score and how many nodes tie with it, as replacements land and pods leave."""
    nodes, running = case
    snap = snapshot(*nodes, *running)
    model, load_aware = KubeDefault(), LoadAware()
    for i, (cpu, prefer, bound, app) in enumerate(steps):
        if bound and snap.pods:  # the guard's question: a running pod, as if it left
            subject = sorted(snap.pods.values(), key=lambda p: p.key)[i % len(snap.pods)]
        else:
            subject = pod(f"new{i}", node_name="", cpu=cpu, spec=PREFER_SSD if prefer else None,
                          labels={"app": app}, owner=("ReplicaSet", f"rs-{app}"))
        ready = snap.ready_nodes()
        ranked = model.place(subject, ready, snap, NOW)
        exact = kube_default_exact(model, subject, ready, snap)
        assert (ranked.node, ranked.ties, ranked.why) == (exact.node, exact.ties, exact.why), (
            subject.key, subject.node_name)
        by_usage = load_aware.place(subject, ready, snap, NOW).node
        assert by_usage == load_aware_exact(load_aware, subject, ready, snap, NOW), subject.key
        if ranked.node is not None and not subject.node_name:
            from desched.scheduler.placement import bind
            snap.add_pod(bind(subject, ranked.node, NOW))
        elif subject.node_name and i % 2:
            snap.remove_pod(subject)


@pytest.mark.parametrize(("nodes", "percentage", "profile_percentage", "scored"), [
    (99, 0, None, 99),  # below 100 nodes kube-scheduler scores them all
    (150, 0, None, 100),  # 50 - 1 = 49 % of 150 = 73, but at least 100
    (1000, 0, None, 420),  # adaptive: 50 - 1000/125 = 42 %
    (5000, 0, None, 500),  # 10 %
    (7000, 0, None, 350),  # 50 - 56 < 5: the 5 % floor
    (1000, 30, None, 300),
    (1000, 30, 60, 600),  # the profile's own percentage wins
])
def test_percentage_of_nodes_to_score(nodes: int, percentage: int,
                                      profile_percentage: int | None, scored: int) -> None:
    from desched.scheduler.profile import Profile, SchedulerConfig

    profile = Profile(percentage_of_nodes_to_score=profile_percentage)
    config = SchedulerConfig(percentage_of_nodes_to_score=percentage)
    assert config.nodes_to_score(profile, nodes) == scored


def test_a_placement_among_a_sample_says_so() -> None:
    many = [node(f"n{i:03}") for i in range(150)]
    snap = snapshot(pod("new", node_name=""), *many)
    placement = KubeDefault().place(snap.pods["default/new"], snap.ready_nodes(), snap, NOW)
    assert placement.sampled == 100 and placement.ties == 150
    assert "scores only the first 100 feasible node(s)" in placement.why
    assert placement.node == "n149"  # the last of the tied nodes by name
