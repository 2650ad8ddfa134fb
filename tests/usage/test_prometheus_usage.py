"""The Prometheus usage source, without a network (usage/ makes no requests): the query it asks
(expression and time), how it reads answers and errors, the MetricResource and node-exporter
modes, LowNodeUtilization's decisions in Prometheus mode (bad samples included), a simulation
over recorded answers, and a simulation without them, which says why it has no Prometheus usage.
The requests themselves (HTTP, auth, TLS, retries): tests/live/test_prometheus_queries.py."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_prometheus import vector

from builders import NOW, args, handle_for, node, pod, snapshot
from desched.framework.evictor import Limits
from desched.framework.policy import MetricsProvider, Policy
from desched.framework.types import QueryAnswer, QueryFailed, UsageQueries
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.lownodeutilization import LowNodeUtilization, LowNodeUtilizationArgs
from desched.simulate.simulation import run_simulation
from desched.usage import (
    METRIC_RESOURCE,
    NODE_EXPORTER_QUERIES,
    PrometheusError,
    PrometheusUsage,
    RecordedQueries,
    UsageUnavailable,
    instant_query,
    provider_query,
)
from desched.usage.prometheus import NO_QUERIES, format_time, read_answer

NOW_TEXT = "1795348800"  # 2026-11-22T12:00:00Z
QUERY = "instance:node_cpu:ratio"
PLUGIN = "LowNodeUtilization"
URL = "https://prometheus.monitoring.svc:9090"
ENDPOINT = f"{URL}/api/v1/query"

Answer = tuple[int, Any] | Exception  # (HTTP status, JSON body or raw bytes), or no answer


class Canned:
    """UsageQueries with canned answers by expression (`default` for any other), keeping what
    was asked: (url, auth secret, form)."""

    def __init__(self, answers: Mapping[str, Answer] | None = None,
                 default: Answer | None = None) -> None:
        self.answers = dict(answers or {})
        self.default = default if default is not None else (200, vector({}))
        self.asked: list[tuple[str, tuple[str, str] | None, dict[str, str]]] = []

    def prometheus(self, url: str, auth_secret: tuple[str, str] | None,
                   params: Mapping[str, str]) -> QueryAnswer:
        self.asked.append((url, auth_secret, dict(params)))
        answer = self.answers.get(params["query"], self.default)
        if isinstance(answer, Exception):
            raise answer
        status, body = answer
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return QueryAnswer(status, "", data, f"{url}/api/v1/query")


@pytest.fixture
def prometheus() -> Canned:
    """Canned answers: this module makes no requests (conftest's fake server is for
    tests/live/test_prometheus_queries.py)."""
    return Canned()


def test_canned_and_recorded_queries_are_usage_queries() -> None:
    assert isinstance(Canned(), UsageQueries)
    assert isinstance(RecordedQueries({}), UsageQueries)


# -- the query and its answer ------------------------------------------------------------------


def test_the_query_sends_the_expression_and_the_run_time() -> None:
    queries = Canned({QUERY: (200, vector({"n1": 0.5, "n2": "NaN", "n3": "+Inf"}))})
    samples = provider_query(queries, URL, ("monitoring", "token"))(QUERY, NOW)
    assert [(s.labels["instance"], s.value) for s in samples][:1] == [("n1", 0.5)]
    assert str(samples[1].value) == "nan" and samples[2].value == float("inf")
    assert queries.asked == [(URL, ("monitoring", "token"), {"query": QUERY, "time": NOW_TEXT})]


def test_time_keeps_a_fraction_and_naive_times_are_utc() -> None:
    assert format_time(NOW + timedelta(milliseconds=250)) == f"{NOW_TEXT}.25"
    assert format_time(NOW.replace(tzinfo=None)) == NOW_TEXT


@pytest.mark.parametrize(("answer", "message"), [
    ((400, {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}),
     f"{ENDPOINT} answered HTTP 400 Bad Request: bad_data: parse error at char 3"),
    ((401, b"Unauthorized"),
     "answered HTTP 401 Unauthorized (desched sends the token from "
     "DESCHED_PROMETHEUS_TOKEN_FILE or DESCHED_PROMETHEUS_TOKEN"),
    ((503, b"<html>down</html>"), "answered HTTP 503 Service Unavailable"),
    ((200, b"not json"), f"unreadable answer from {ENDPOINT}"),
    ((200, {"status": "error", "errorType": "timeout", "error": "query timed out"}),
     "query failed: timeout: query timed out"),
    ((200, {"status": "success", "data": {"resultType": "matrix", "result": []}}),
     'expected query results to be of type "vector", got "matrix" instead'),
    ((200, {"status": "success", "data": {"resultType": "vector", "result": [{"value": 1}]}}),
     "unreadable vector in the answer"),
    (QueryFailed(f"cannot reach {ENDPOINT}: connection refused"),
     f"cannot reach {ENDPOINT}: connection refused"),
], ids=["bad data", "unauthorized", "unavailable", "not json", "status error", "matrix",
        "malformed vector", "no answer"])
def test_error_answers(answer: Answer, message: str) -> None:
    with pytest.raises(PrometheusError) as info:
        provider_query(Canned(default=answer), URL)(QUERY, NOW)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_the_reason_phrase_the_server_gave_is_kept() -> None:
    answer = QueryAnswer(418, "I'm a teapot", b"", ENDPOINT)
    with pytest.raises(PrometheusError, match=r"answered HTTP 418 I'm a teapot$"):
        read_answer(answer, QUERY)


def test_recorded_queries_answer_by_url_and_expression() -> None:
    recorded = RecordedQueries({(URL, QUERY): json.dumps(vector({"n1": 0.25})).encode()})
    query = instant_query(lambda form: recorded.prometheus(URL, None, form))
    assert [s.value for s in query(QUERY, NOW)] == [0.25]
    assert query("other", NOW) == []  # not recorded: an empty vector
    assert recorded.asked == [(URL, {"query": QUERY, "time": NOW_TEXT}),
                              (URL, {"query": "other", "time": NOW_TEXT})]


# -- the usage source --------------------------------------------------------------------------


NODES = [node(f"n{i}") for i in range(1, 5)]


def source(prometheus: Canned, queries: dict[str, str] | None = None,
           names: list[str] | None = None) -> PrometheusUsage:
    snap = snapshot(*NODES, pod("a", "n1"), pod("b", "n1"), pod("c", "n2"))
    return PrometheusUsage(snap, provider_query(prometheus, URL),
                           queries or {METRIC_RESOURCE: QUERY}, names or [METRIC_RESOURCE],
                           lambda: NOW)


def test_metric_resource_is_the_value_times_100_truncated(prometheus: Canned) -> None:
    # 0.29 * 100 is 28.999999999999996 in float64: upstream's int64() makes it 28.
    prometheus.answers[QUERY] = (200, vector({"n1": 0.29, "n2": 1, "n3": 0, "n4": 0.555}))
    usage = source(prometheus)
    assert usage.sync(NODES) == {}
    assert [usage.node_usage(n.name) for n in NODES] == [
        {METRIC_RESOURCE: 28}, {METRIC_RESOURCE: 100}, {METRIC_RESOURCE: 0},
        {METRIC_RESOURCE: 55}]
    assert [p.name for p in usage.pods("n1")] == ["a", "b"]
    assert not usage.pod_usage_known


def test_bad_samples_leave_their_nodes_out(prometheus: Canned) -> None:
    answer = vector({"n1": 1.5, "n2": "NaN", "n3": -0.1})
    # n4 has two samples, and one sample names no node at all.
    answer["data"]["result"] += [
        {"metric": {"instance": "n4"}, "value": [1, "0.1"]},
        {"metric": {"instance": "n4"}, "value": [1, "0.2"]},
        {"metric": {"job": "node"}, "value": [1, "0.3"]}]
    prometheus.answers[QUERY] = (200, answer)
    extra = node("n5")
    usage = source(prometheus)
    assert usage.sync([*NODES, extra]) == {
        "n1": "the collected metrics sample for \"n1\" has value 1.5 outside of <0; 1> interval",
        "n2": "the collected metrics sample for \"n2\" is NaN",
        "n3": "the collected metrics sample for \"n3\" has value -0.1 outside of <0; 1> interval",
        "n4": "the query returned more than one sample with instance=\"n4\"",
        "n5": "unable to find metric entry for n5",
    }


@pytest.mark.parametrize(("answer", "message"), [
    ((200, vector({})), f"the query returned an empty vector: {QUERY}"),
    ((200, {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"node": "n1"}, "value": [1, "0.5"]}]}}),
     "the collected metrics samples are missing the 'instance' label, which must hold the node "
     "name"),
    ((422, {"status": "error", "errorType": "execution", "error": "boom"}),
     "unable to capture prometheus metrics: "),
], ids=["empty vector", "no instance label", "server error"])
def test_unusable_results_end_the_run(prometheus: Canned, answer: Any,
                                      message: str) -> None:
    prometheus.answers[QUERY] = answer
    with pytest.raises(UsageUnavailable) as info:
        source(prometheus).sync(NODES)
    assert message in str(info.value)


def test_node_exporter_mode_scales_fractions_by_allocatable(prometheus: Canned) -> None:
    prometheus.answers[NODE_EXPORTER_QUERIES["cpu"]] = (
        200, vector({"n1": 0.8, "n2": 0.1, "n3": 0.5, "n4": 0.25}))
    prometheus.answers[NODE_EXPORTER_QUERIES["memory"]] = (
        200, vector({"n1": 0.5, "n2": 0.125, "n3": 0.5}))
    usage = source(prometheus, NODE_EXPORTER_QUERIES, ["cpu", "memory", "pods"])
    assert usage.sync(NODES) == {
        "n4": "unable to find metric entry for n4 (query for memory)"}
    assert usage.node_usage("n1") == {"cpu": 3200, "memory": 4 * 2**30, "pods": 2}
    assert usage.node_usage("n2") == {"cpu": 400, "memory": 2**30, "pods": 1}
    assert [(form["query"], form["time"]) for _, _, form in prometheus.asked] == [
        (NODE_EXPORTER_QUERIES["cpu"], NOW_TEXT), (NODE_EXPORTER_QUERIES["memory"], NOW_TEXT)]
    assert "node_cpu_seconds_total" in NODE_EXPORTER_QUERIES["cpu"]
    assert "node_memory_MemAvailable_bytes" in NODE_EXPORTER_QUERIES["memory"]


# -- LowNodeUtilization in Prometheus mode -----------------------------------------------------


METRIC_ARGS: dict[str, Any] = {
    "thresholds": {METRIC_RESOURCE: 30}, "targetThresholds": {METRIC_RESOURCE: 70},
    "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": QUERY}}}


def lnu_pods() -> list[Any]:
    return [pod("hot-a", "n1", priority=100), pod("hot-b", "n1", priority=10),
            pod("hot-c", "n1", priority=50), pod("warm-a", "n4", priority=5),
            pod("warm-b", "n4", priority=1), pod("cold", "n2")]


def run_lnu(queries: UsageQueries | None, raw: dict[str, Any] | None = None,
            providers: list[MetricsProvider] | None = None,
            limits: Limits | None = None, url: str = URL) -> tuple[list[str], Any]:
    snap = snapshot(*NODES, *lnu_pods())
    setup, _ = handle_for(snap)
    evictor = DefaultEvictor(args(DefaultEvictorArgs, {}), setup)
    handle, executor = handle_for(snap, plugin=PLUGIN, filters=[evictor], limits=limits)
    handle.queries = queries
    handle.policy = Policy("policy.yaml", "v1alpha2", [], metrics_providers=providers if
                           providers is not None else [MetricsProvider("Prometheus", url)])
    plugin = LowNodeUtilization(args(LowNodeUtilizationArgs, raw or METRIC_ARGS), handle)
    plugin.balance(snap.ready_nodes())
    return executor.evicted, handle


def kept(handle: Any) -> dict[str, int]:
    """Why pods were kept and what the run noted about nodes, with counts."""
    out = {reason: count for (_, plugin, reason), count in handle.log.filtered_counts.items()
           if plugin == PLUGIN}
    for n in handle.log.notes:
        if n.plugin == PLUGIN:
            out[n.text] = out.get(n.text, 0) + 1
    return out


def test_one_pod_per_overutilized_node(prometheus: Canned) -> None:
    prometheus.answers[QUERY] = (200, vector({"n1": 0.9, "n2": 0.2, "n3": 0.1, "n4": 0.75}))
    evicted, handle = run_lnu(prometheus)
    # Unconstrained: the lowest-priority pod of each source node, n1 (90) before n4 (75).
    assert evicted == ["hot-b", "warm-b"]
    assert prometheus.asked == [(URL, None, {"query": QUERY, "time": NOW_TEXT})]
    assert handle.log.evictions()[0].reason == (
        "node n1 is overutilized (MetricResource 90% > 70%; usage from the Prometheus query); "
        "evicting one pod (the query gives no per-pod usage) to move load to underutilized "
        "nodes n2, n3")


def test_eviction_limit_per_node_lets_more_go(prometheus: Canned) -> None:
    prometheus.answers[QUERY] = (200, vector({"n1": 0.9, "n2": 0.2, "n3": 0.1, "n4": 0.5}))
    evicted, handle = run_lnu(prometheus, {**METRIC_ARGS, "evictionLimits": {"node": 2}})
    # Usage is not updated after an eviction: the limit alone stops the node.
    assert evicted == ["hot-b", "hot-c"]
    assert "evicting up to evictionLimits.node 2 pods" in handle.log.evictions()[0].reason


def test_pool_is_the_room_below_the_high_threshold(prometheus: Canned) -> None:
    # Destinations n2 and n3 are at 30%: with the 70% cap there are 40+40 points of room.
    prometheus.answers[QUERY] = (200, vector({"n1": 0.9, "n2": 0.3, "n3": 0.3, "n4": 0.7}))
    evicted, _ = run_lnu(prometheus)
    assert evicted == ["hot-b"]  # n4 at exactly 70% is not above the target


def test_a_bad_sample_leaves_only_its_node_out(prometheus: Canned) -> None:
    prometheus.answers[QUERY] = (200, vector({"n1": 0.9, "n2": 0.2, "n3": 0.1, "n4": 7.5}))
    evicted, handle = run_lnu(prometheus)
    assert evicted == ["hot-b"]
    assert kept(handle) == {
        "node n4 left out of this run: the collected metrics sample for \"n4\" has value 7.5 "
        "outside of <0; 1> interval": 1}
    assert [d.outcome for d in handle.log.decisions] == ["evicted"]


def test_missing_node_entry_is_recorded_not_raised(prometheus: Canned) -> None:
    prometheus.answers[QUERY] = (200, vector({"n1": 0.9, "n2": 0.2, "n3": 0.1}))
    evicted, handle = run_lnu(prometheus)
    assert evicted == ["hot-b"]
    assert "node n4 left out of this run: unable to find metric entry for n4" in kept(handle)


def test_no_answer_ends_the_run_with_a_reason() -> None:
    queries = Canned(default=QueryFailed(f"cannot reach {ENDPOINT}: connection refused"))
    evicted, handle = run_lnu(queries)
    assert evicted == []
    assert kept(handle) == {"error getting node usage: unable to capture prometheus metrics: "
                            f"cannot reach {ENDPOINT}: connection refused": 1}


def test_without_a_prometheus_provider_the_run_ends_with_a_reason() -> None:
    evicted, handle = run_lnu(Canned(), providers=[MetricsProvider("KubernetesMetrics")])
    assert evicted == []
    assert kept(handle) == {
        "prometheus client not initialized: the policy needs a metricsProviders entry with "
        "source Prometheus and a url": 1}


def test_without_queries_the_run_ends_with_why() -> None:
    """A simulation makes no network requests: the run says so and evicts nothing."""
    evicted, handle = run_lnu(None)
    assert evicted == []
    assert kept(handle) == {NO_QUERIES: 1}
    assert NO_QUERIES.startswith("prometheus client not initialized: only desched run queries "
                                 "Prometheus")


def test_the_provider_and_its_secret_reach_the_queries() -> None:
    queries = Canned({QUERY: (200, vector({"n1": 0.9, "n2": 0.2, "n3": 0.1, "n4": 0.5}))})
    providers = [MetricsProvider("Prometheus", URL + "/prometheus", ("monitoring", "prom"))]
    run_lnu(queries, providers=providers)
    assert [(url, secret) for url, secret, _ in queries.asked] == [
        (URL + "/prometheus", ("monitoring", "prom"))]


def test_total_limit_applies(prometheus: Canned) -> None:
    prometheus.answers[QUERY] = (200, vector({"n1": 0.9, "n2": 0.2, "n3": 0.1, "n4": 0.75}))
    evicted, _ = run_lnu(prometheus, limits=Limits(total=1))
    assert evicted == ["hot-b"]


POLICY = """apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
metricsProviders:
- source: Prometheus
  prometheus:
    url: {url}
profiles:
- name: default
  pluginConfig:
  - name: DefaultEvictor
  - name: LowNodeUtilization
    args:
      thresholds: {{MetricResource: 30}}
      targetThresholds: {{MetricResource: 70}}
      metricsUtilization:
        source: Prometheus
        prometheus:
          query: {query}
  plugins:
    balance:
      enabled: [LowNodeUtilization]
"""

CLUSTER = """apiVersion: v1
kind: List
items:
""" + "".join(f"""- apiVersion: v1
  kind: Node
  metadata: {{name: {name}}}
  status:
    allocatable: {{cpu: "4", memory: 8Gi, pods: "110"}}
    conditions: [{{type: Ready, status: "True"}}]
""" for name in ("n1", "n2", "n3")) + "".join(f"""- apiVersion: v1
  kind: Pod
  metadata:
    name: {name}
    namespace: default
    ownerReferences: [{{kind: ReplicaSet, name: rs, uid: rs, controller: true}}]
  spec:
    nodeName: {node_name}
    containers: [{{name: main, image: "app:1"}}]
  status: {{phase: Running}}
""" for name, node_name in (("p1", "n1"), ("p2", "n1"), ("q1", "n2")))


def files(tmp_path: Path, cluster: str = CLUSTER) -> tuple[str, str]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(url=URL, query=QUERY))
    path = tmp_path / "cluster.yaml"
    path.write_text(cluster)
    return str(policy), str(path)


def recorded(values: dict[str, float | str]) -> RecordedQueries:
    return RecordedQueries({(URL, QUERY): json.dumps(vector(values)).encode()})


def test_a_simulation_over_recorded_answers(tmp_path: Path) -> None:
    policy, cluster = files(tmp_path)
    queries = recorded({"n1": 0.95, "n2": 0.05, "n3": 0.15})
    result = run_simulation(policy, [cluster], NOW, 2, False, queries=queries)
    # One pod per cycle: Prometheus still reports n1 at 95% in cycle 2 (nothing tells it the
    # evicted pod's share), exactly what upstream would do run after run.
    assert [(d.cycle, d.pod, d.node) for d in result.evictions] == [(1, "p1", "n1"),
                                                                   (2, "p2", "n1")]
    assert [form["time"] for _, form in queries.asked] == [NOW_TEXT, NOW_TEXT]


def test_a_simulation_without_answers_says_why_it_has_no_prometheus_usage(
        tmp_path: Path) -> None:
    """`simulate` makes no network requests: each run of the plugin ends with the reason, and
    nothing is evicted."""
    policy, cluster = files(tmp_path)
    result = run_simulation(policy, [cluster], NOW, 2, False)
    assert result.evictions == []
    assert [(n.cycle, n.plugin, n.text) for n in result.log.notes] == [
        (1, PLUGIN, NO_QUERIES), (2, PLUGIN, NO_QUERIES)]


def test_a_simulation_takes_moved_pods_off_what_prometheus_answers(tmp_path: Path) -> None:
    """The server cannot see simulated evictions: a pod requesting half of n1's cpu, evicted
    in cycle 1, comes off n1's MetricResource in cycle 2 (95 -> 45, under 70: nothing more to
    evict), and the report's usage figures say the same."""
    policy, cluster = files(tmp_path, CLUSTER.replace(
        'image: "app:1"}', 'image: "app:1", resources: {requests: {cpu: "2"}}}'))
    queries = recorded({"n1": 0.95, "n2": 0.05, "n3": 0.15})
    result = run_simulation(policy, [cluster], NOW, 2, False, with_frames=True,
                            queries=queries)
    assert [(d.cycle, d.pod, d.node) for d in result.evictions] == [(1, "p1", "n1")]
    series = [frame.values["MetricResource usage"] for frame in result.frames]
    assert [s["n1"] for s in series] == [95.0, 45.0, 45.0]
    assert [s["n2"] for s in series] == [5.0, 5.0, 5.0]
