"""The Prometheus usage source against a real HTTP server on 127.0.0.1 (and a real Prometheus
binary when one is installed): what the client sends (query, time, auth, POST then GET), how it
reads answers and errors, the MetricResource and node-exporter modes, and LowNodeUtilization's
decisions in Prometheus mode, bad samples included."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_prometheus import FakePrometheus, vector

from builders import NOW, args, handle_for, node, pod, snapshot
from desched.framework.evictor import Limits
from desched.framework.policy import MetricsProvider, Policy
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.lownodeutilization import LowNodeUtilization, LowNodeUtilizationArgs
from desched.simulation import run_simulation
from desched.usage import (
    METRIC_RESOURCE,
    NODE_EXPORTER_QUERIES,
    BearerToken,
    PrometheusClient,
    PrometheusError,
    PrometheusUsage,
    UsageUnavailable,
)
from desched.usage.prometheus import TOKEN_ENV, TOKEN_FILE_ENV, format_time

NOW_TEXT = "1795348800"  # 2026-11-22T12:00:00Z
QUERY = "instance:node_cpu:ratio"
PLUGIN = "LowNodeUtilization"


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# -- the client --------------------------------------------------------------------------------


def test_query_posts_the_expression_and_the_run_time(prometheus: FakePrometheus) -> None:
    prometheus.answers[QUERY] = (200, vector({"n1": 0.5, "n2": "NaN", "n3": "+Inf"}))
    samples = PrometheusClient(prometheus.url).query(QUERY, NOW)
    assert [(s.labels["instance"], s.value) for s in samples][:1] == [("n1", 0.5)]
    assert str(samples[1].value) == "nan" and samples[2].value == float("inf")
    [request] = prometheus.requests
    assert request.method == "POST"
    assert request.path == "/api/v1/query"
    assert request.params == {"query": QUERY, "time": NOW_TEXT}
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert "Authorization" not in request.headers


def test_time_keeps_a_fraction_and_naive_times_are_utc() -> None:
    assert format_time(NOW + timedelta(milliseconds=250)) == f"{NOW_TEXT}.25"
    assert format_time(NOW.replace(tzinfo=None)) == NOW_TEXT


def test_url_path_prefix_is_kept(prometheus: FakePrometheus) -> None:
    prometheus.answers[QUERY] = (200, vector({"n1": 0.5}))
    PrometheusClient(prometheus.url + "/prometheus/").query(QUERY, NOW)
    assert prometheus.requests[0].path == "/prometheus/api/v1/query"


def test_get_when_the_server_refuses_post(prometheus: FakePrometheus) -> None:
    prometheus.refuse_post = True
    prometheus.answers[QUERY] = (200, vector({"n1": 0.25}))
    samples = PrometheusClient(prometheus.url).query(QUERY, NOW)
    assert [s.value for s in samples] == [0.25]
    assert [(r.method, r.params) for r in prometheus.requests] == [
        ("POST", {"query": QUERY, "time": NOW_TEXT}),
        ("GET", {"query": QUERY, "time": NOW_TEXT})]


def test_bearer_token_file_is_reread_every_query(prometheus: FakePrometheus,
                                                 tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    client = PrometheusClient(prometheus.url, BearerToken(path=str(token)))
    client.query(QUERY, NOW)
    token.write_text("rotated")
    client.query(QUERY, NOW)
    assert [r.headers["Authorization"] for r in prometheus.requests] == [
        "Bearer first", "Bearer rotated"]


def test_unreadable_token_file_is_a_query_error(tmp_path: Path) -> None:
    client = PrometheusClient("http://127.0.0.1:9", BearerToken(path=str(tmp_path / "none")))
    with pytest.raises(PrometheusError, match="cannot read the bearer token file"):
        client.query(QUERY, NOW)


def test_token_sources_in_order(tmp_path: Path) -> None:
    account = tmp_path / "sa"
    account.mkdir()
    (account / "token").write_text("sa-token")
    sa = str(account)
    assert BearerToken.from_env({TOKEN_FILE_ENV: "/x", TOKEN_ENV: "v"},
                                service_account_dir=sa) == BearerToken(path="/x")
    assert BearerToken.from_env({TOKEN_ENV: "v"}, service_account_dir=sa) == BearerToken(
        value="v")
    # In a pod and without a secretReference, upstream uses the service account token.
    assert BearerToken.from_env({}, service_account_dir=sa)() == "sa-token"
    assert BearerToken.from_env({}, secret_configured=True, service_account_dir=sa)() is None
    assert BearerToken.from_env({}, service_account_dir=str(tmp_path / "no"))() is None


@pytest.mark.parametrize(("answer", "message"), [
    ((400, {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}),
     "answered HTTP 400 Bad Request: bad_data: parse error at char 3"),
    ((401, b"Unauthorized"),
     "answered HTTP 401 Unauthorized (desched sends the token from "
     "DESCHED_PROMETHEUS_TOKEN_FILE or DESCHED_PROMETHEUS_TOKEN"),
    ((503, b"<html>down</html>"), "answered HTTP 503 Service Unavailable"),
    ((200, b"not json"), "unreadable answer from"),
    ((200, {"status": "error", "errorType": "timeout", "error": "query timed out"}),
     "query failed: timeout: query timed out"),
    ((200, {"status": "success", "data": {"resultType": "matrix", "result": []}}),
     'expected query results to be of type "vector", got "matrix" instead'),
    ((200, {"status": "success", "data": {"resultType": "vector", "result": [{"value": 1}]}}),
     "unreadable vector in the answer"),
], ids=["bad data", "unauthorized", "unavailable", "not json", "status error", "matrix",
        "malformed vector"])
def test_error_answers(prometheus: FakePrometheus, answer: Any, message: str) -> None:
    prometheus.default = answer
    with pytest.raises(PrometheusError) as info:
        PrometheusClient(prometheus.url).query(QUERY, NOW)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_unreachable_server() -> None:
    url = closed_port_url()
    with pytest.raises(PrometheusError, match=f"cannot reach {url}/api/v1/query"):
        PrometheusClient(url, timeout=5).query(QUERY, NOW)


# -- the usage source --------------------------------------------------------------------------


NODES = [node(f"n{i}") for i in range(1, 5)]


def source(prometheus: FakePrometheus, queries: dict[str, str] | None = None,
           names: list[str] | None = None) -> PrometheusUsage:
    snap = snapshot(*NODES, pod("a", "n1"), pod("b", "n1"), pod("c", "n2"))
    return PrometheusUsage(snap, PrometheusClient(prometheus.url),
                           queries or {METRIC_RESOURCE: QUERY}, names or [METRIC_RESOURCE],
                           lambda: NOW)


def test_metric_resource_is_the_value_times_100_truncated(prometheus: FakePrometheus) -> None:
    # 0.29 * 100 is 28.999999999999996 in float64: upstream's int64() makes it 28.
    prometheus.answers[QUERY] = (200, vector({"n1": 0.29, "n2": 1, "n3": 0, "n4": 0.555}))
    usage = source(prometheus)
    assert usage.sync(NODES) == {}
    assert [usage.node_usage(n.name) for n in NODES] == [
        {METRIC_RESOURCE: 28}, {METRIC_RESOURCE: 100}, {METRIC_RESOURCE: 0},
        {METRIC_RESOURCE: 55}]
    assert [p.name for p in usage.pods("n1")] == ["a", "b"]
    assert not usage.pod_usage_known


def test_bad_samples_leave_their_nodes_out(prometheus: FakePrometheus) -> None:
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
def test_unusable_results_end_the_run(prometheus: FakePrometheus, answer: Any,
                                      message: str) -> None:
    prometheus.answers[QUERY] = answer
    with pytest.raises(UsageUnavailable) as info:
        source(prometheus).sync(NODES)
    assert message in str(info.value)


def test_node_exporter_mode_scales_fractions_by_allocatable(prometheus: FakePrometheus) -> None:
    prometheus.answers[NODE_EXPORTER_QUERIES["cpu"]] = (
        200, vector({"n1": 0.8, "n2": 0.1, "n3": 0.5, "n4": 0.25}))
    prometheus.answers[NODE_EXPORTER_QUERIES["memory"]] = (
        200, vector({"n1": 0.5, "n2": 0.125, "n3": 0.5}))
    usage = source(prometheus, NODE_EXPORTER_QUERIES, ["cpu", "memory", "pods"])
    assert usage.sync(NODES) == {
        "n4": "unable to find metric entry for n4 (query for memory)"}
    assert usage.node_usage("n1") == {"cpu": 3200, "memory": 4 * 2**30, "pods": 2}
    assert usage.node_usage("n2") == {"cpu": 400, "memory": 2**30, "pods": 1}
    assert [(r.params["query"], r.params["time"]) for r in prometheus.requests] == [
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


def run_lnu(url: str, raw: dict[str, Any] | None = None,
            providers: list[MetricsProvider] | None = None,
            limits: Limits | None = None) -> tuple[list[str], Any]:
    snap = snapshot(*NODES, *lnu_pods())
    setup, _ = handle_for(snap)
    evictor = DefaultEvictor(args(DefaultEvictorArgs, {}), setup)
    handle, executor = handle_for(snap, plugin=PLUGIN, filters=[evictor], limits=limits)
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


def test_one_pod_per_overutilized_node(prometheus: FakePrometheus) -> None:
    prometheus.answers[QUERY] = (200, vector({"n1": 0.9, "n2": 0.2, "n3": 0.1, "n4": 0.75}))
    evicted, handle = run_lnu(prometheus.url)
    # Unconstrained: the lowest-priority pod of each source node, n1 (90) before n4 (75).
    assert evicted == ["hot-b", "warm-b"]
    [request] = prometheus.requests
    assert request.params == {"query": QUERY, "time": NOW_TEXT}
    assert handle.log.evictions()[0].reason == (
        "node n1 is overutilized (MetricResource 90% > 70%; usage from the Prometheus query); "
        "evicting one pod (the query gives no per-pod usage) to move load to underutilized "
        "nodes n2, n3")


def test_eviction_limit_per_node_lets_more_go(prometheus: FakePrometheus) -> None:
    prometheus.answers[QUERY] = (200, vector({"n1": 0.9, "n2": 0.2, "n3": 0.1, "n4": 0.5}))
    evicted, handle = run_lnu(prometheus.url, {**METRIC_ARGS, "evictionLimits": {"node": 2}})
    # Usage is not updated after an eviction: the limit alone stops the node.
    assert evicted == ["hot-b", "hot-c"]
    assert "evicting up to evictionLimits.node 2 pods" in handle.log.evictions()[0].reason


def test_pool_is_the_room_below_the_high_threshold(prometheus: FakePrometheus) -> None:
    # Destinations n2 and n3 are at 30%: with the 70% cap there are 40+40 points of room.
    prometheus.answers[QUERY] = (200, vector({"n1": 0.9, "n2": 0.3, "n3": 0.3, "n4": 0.7}))
    evicted, _ = run_lnu(prometheus.url)
    assert evicted == ["hot-b"]  # n4 at exactly 70% is not above the target


def test_a_bad_sample_leaves_only_its_node_out(prometheus: FakePrometheus) -> None:
    prometheus.answers[QUERY] = (200, vector({"n1": 0.9, "n2": 0.2, "n3": 0.1, "n4": 7.5}))
    evicted, handle = run_lnu(prometheus.url)
    assert evicted == ["hot-b"]
    assert kept(handle) == {
        "node n4 left out of this run: the collected metrics sample for \"n4\" has value 7.5 "
        "outside of <0; 1> interval": 1}
    assert [d.outcome for d in handle.log.decisions] == ["evicted"]


def test_missing_node_entry_is_recorded_not_raised(prometheus: FakePrometheus) -> None:
    prometheus.answers[QUERY] = (200, vector({"n1": 0.9, "n2": 0.2, "n3": 0.1}))
    evicted, handle = run_lnu(prometheus.url)
    assert evicted == ["hot-b"]
    assert "node n4 left out of this run: unable to find metric entry for n4" in kept(handle)


def test_unreachable_prometheus_ends_the_run_with_a_reason() -> None:
    url = closed_port_url()
    evicted, handle = run_lnu(url)
    assert evicted == []
    [reason] = kept(handle)
    assert reason.startswith("error getting node usage: unable to capture prometheus metrics: "
                             f"cannot reach {url}/api/v1/query")


@pytest.mark.parametrize(("url", "problem"), [
    ("/prometheus", "'/prometheus' is not an http(s) URL with a host"),
    ("http://[::1", "'http://[::1' is not a valid URL: Invalid IPv6 URL"),
])
def test_an_unusable_url_ends_the_run_with_a_reason(url: str, problem: str) -> None:
    evicted, handle = run_lnu(url)
    assert evicted == []
    assert kept(handle) == {"error getting node usage: unable to capture prometheus metrics: "
                            f"the Prometheus URL {problem}": 1}


def test_without_a_prometheus_provider_the_run_ends_with_a_reason() -> None:
    evicted, handle = run_lnu("", providers=[MetricsProvider("KubernetesMetrics")])
    assert evicted == []
    assert kept(handle) == {
        "prometheus client not initialized: the policy needs a metricsProviders entry with "
        "source Prometheus and a url": 1}


def test_token_from_the_environment_reaches_the_server(prometheus: FakePrometheus,
                                                       tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    monkeypatch.setenv(TOKEN_FILE_ENV, str(token))
    prometheus.answers[QUERY] = (200, vector({"n1": 0.9, "n2": 0.2, "n3": 0.1, "n4": 0.5}))
    run_lnu(prometheus.url)
    assert prometheus.requests[0].headers["Authorization"] == "Bearer s3cret"


def test_total_limit_applies(prometheus: FakePrometheus) -> None:
    prometheus.answers[QUERY] = (200, vector({"n1": 0.9, "n2": 0.2, "n3": 0.1, "n4": 0.75}))
    evicted, _ = run_lnu(prometheus.url, limits=Limits(total=1))
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


def test_simulation_with_a_live_prometheus_url(prometheus: FakePrometheus,
                                              tmp_path: Path) -> None:
    prometheus.answers[QUERY] = (200, vector({"n1": 0.95, "n2": 0.05, "n3": 0.15}))
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(url=prometheus.url, query=QUERY))
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    result = run_simulation(str(policy), [str(cluster)], NOW, 2, False)
    # One pod per cycle: Prometheus still reports n1 at 95% in cycle 2 (nothing tells it the
    # evicted pod's share), exactly what upstream would do run after run.
    assert [(d.cycle, d.pod, d.node) for d in result.evictions] == [(1, "p1", "n1"),
                                                                   (2, "p2", "n1")]
    assert [r.params["time"] for r in prometheus.requests] == [NOW_TEXT, NOW_TEXT]


# -- a real Prometheus, when one is installed --------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.skipif(shutil.which("prometheus") is None,
                    reason="no `prometheus` binary on PATH (not installed here; the fake server "
                           "tests cover the protocol)")
def test_against_a_real_prometheus(tmp_path: Path) -> None:
    binary = shutil.which("prometheus")
    assert binary is not None
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1m\n")
    process = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                pytest.fail("prometheus did not become ready within 30 s")
            time.sleep(0.2)
        # Constant series need no scraped data: one sample per node, labelled instance.
        query = " or ".join(f'label_replace(vector({v}), "instance", "{n}", "", "")'
                            for n, v in (("n1", 0.9), ("n2", 0.2), ("n3", 0.1), ("n4", 0.75)))
        raw = {**METRIC_ARGS, "metricsUtilization": {"source": "Prometheus",
                                                     "prometheus": {"query": query}}}
        evicted, handle = run_lnu(url, raw)
        assert evicted == ["hot-b", "warm-b"]
        assert not kept(handle)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_a_simulation_takes_moved_pods_off_what_prometheus_answers(
        prometheus: FakePrometheus, tmp_path: Path) -> None:
    """The server cannot see simulated evictions: a pod requesting half of n1's cpu, evicted
    in cycle 1, comes off n1's MetricResource in cycle 2 (95 -> 45, under 70: nothing more to
    evict), and the report's usage figures say the same."""
    prometheus.answers[QUERY] = (200, vector({"n1": 0.95, "n2": 0.05, "n3": 0.15}))
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(url=prometheus.url, query=QUERY))
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER.replace('image: "app:1"}',
                                       'image: "app:1", resources: {requests: {cpu: "2"}}}'))
    result = run_simulation(str(policy), [str(cluster)], NOW, 2, False, with_frames=True)
    assert [(d.cycle, d.pod, d.node) for d in result.evictions] == [(1, "p1", "n1")]
    series = [frame.values["MetricResource usage"] for frame in result.frames]
    assert [s["n1"] for s in series] == [95.0, 45.0, 45.0]
    assert [s["n2"] for s in series] == [5.0, 5.0, 5.0]
