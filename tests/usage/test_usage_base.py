"""What the usage sources share: the policy's metrics settings, staleness, and how a plugin
records a usage problem (metricsCollector / metricsProviders)."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from builders import NOW, handle_for, node, pod, snapshot
from desched.framework.policy import MetricsProvider, Policy
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import policy_from_document
from desched.usage import MetricsSettings, PrometheusSettings, RequestedUsage
from desched.usage.base import abort, format_age, note, staleness


def policy(**top: object) -> Policy:
    doc = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [],
           **top}
    return policy_from_document("policy.yaml", doc, PLUGINS)


def test_settings_from_a_loaded_policy() -> None:
    loaded = policy(metricsProviders=[
        {"source": "KubernetesMetrics"},
        {"source": "Prometheus", "prometheus": {
            "url": "https://prometheus.monitoring:9090",
            "authToken": {"secretReference": {"namespace": "kube-system", "name": "prom"}}}}])
    settings = MetricsSettings.from_policy(loaded)
    assert settings == MetricsSettings(
        collector_enabled=False, kubernetes_metrics_provider=True,
        prometheus=PrometheusSettings("https://prometheus.monitoring:9090",
                                      ("kube-system", "prom")))
    assert settings.metrics_client


def test_the_deprecated_collector_also_gives_a_metrics_client() -> None:
    settings = MetricsSettings.from_policy(policy(metricsCollector={"enabled": True}))
    assert settings.metrics_client and settings.prometheus is None
    assert not MetricsSettings.from_policy(policy()).metrics_client


def test_settings_from_a_handle_with_or_without_a_policy() -> None:
    handle, _ = handle_for(snapshot(node("n1")))
    handle.policy = None
    assert MetricsSettings.from_handle(handle) == MetricsSettings()
    handle.policy = Policy("p", "v1alpha2", [], metrics_providers=[
        MetricsProvider("Prometheus", "http://p:9090")])
    assert MetricsSettings.from_handle(handle).prometheus == PrometheusSettings("http://p:9090")
    del handle.policy  # a handle built without the attribute at all
    assert MetricsSettings.from_handle(handle) == MetricsSettings()


@pytest.mark.parametrize(("age", "expected"), [
    (timedelta(minutes=5), None),
    (timedelta(minutes=5, seconds=1),
     "x is stale: taken at 2026-11-22T11:54:59Z, 5m1s before now (limit 5m0s)"),
    (timedelta(hours=-1), None),
])
def test_staleness(age: timedelta, expected: str | None) -> None:
    assert staleness("x", NOW - age, NOW) == expected
    assert staleness("x", None, NOW) is None


def test_format_age() -> None:
    assert [format_age(timedelta(seconds=s)) for s in (0, 59, 61, 3600, 3725)] == [
        "0s", "59s", "1m1s", "1h0m0s", "1h2m5s"]


def test_notes_are_recorded_per_node_and_for_the_run(caplog: pytest.LogCaptureFixture) -> None:
    handle, _ = handle_for(snapshot(node("n1")), plugin="P")
    note(handle, "node n1 left out", "n1")
    with caplog.at_level(logging.WARNING, logger="desched.usage"):
        abort(handle, "no client")
    assert [(n.node, n.profile, n.plugin, n.text) for n in handle.log.notes] == [
        ("n1", "default", "P", "node n1 left out"), ("", "default", "P", "no client")]
    assert not handle.log.filtered_counts  # notes are not pods kept
    assert "default/P: no client" in caplog.text


def test_requested_usage_measures_every_node() -> None:
    snap = snapshot(node("n1"), node("n2"))
    usage = RequestedUsage(snap, ["cpu", "pods"])
    assert usage.sync([snap.nodes["n1"], snap.nodes["n2"]]) == {}
    assert usage.node_usage("n1") == {"cpu": 0, "pods": 0}
    assert usage.pod_usage_known


def test_requested_usage_of_pods_with_one_resource_spec_is_read_once() -> None:
    """Pods sharing their requests (one resource spec) share their usage; another spec has
    its own."""
    a, b = pod("a", cpu="250m"), pod("b", cpu="250m")
    other = pod("c", cpu="1")
    usage = RequestedUsage(snapshot(node("n1"), a, b, other), ["cpu", "memory", "gpu"])
    assert usage.pod_usage(a) == {"cpu": 250, "memory": 128 * 2**20, "gpu": 0}
    assert usage.pod_usage(b) is usage.pod_usage(a)
    assert usage.pod_usage(other) == {"cpu": 1000, "memory": 128 * 2**20, "gpu": 0}
