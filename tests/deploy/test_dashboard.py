"""The Grafana dashboard (deploy/grafana/desched.json) against the metrics desched really
exposes: a kmock run of `desched run` is scraped, and every panel's and variable's PromQL is
read for its metric names (exactly: a histogram's `_bucket`/`_sum`/`_count`, a counter's
`_total`) and label names (in matchers, `by (...)`, legends), each of which must be in the
scrape. And the chart provisions it: a ConfigMap with the grafana_dashboard label, rendered by
Helm's engine with the ServiceMonitor path only (off by default)."""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import kmock
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
# The live layer's kmock harness (fixtures aside, which are defined below).
sys.path.insert(0, str(REPO / "tests" / "live"))

from fake_apiserver import Emulator, FakeApiServer  # noqa: E402
from test_manifests import by_kind, helm_template, pod_spec  # noqa: E402
from test_migration_run import KINDS, POLICY, Jobs, workload_cluster  # noqa: E402
from test_run import background, config, runner_for, until  # noqa: E402
from test_stale_cache import METRICS_POLICY  # noqa: E402

DASHBOARD = REPO / "deploy" / "grafana" / "desched.json"
CHART_COPY = REPO / "deploy" / "helm" / "desched" / "dashboards" / "desched.json"
# Labels Prometheus adds to every series of a target (job, instance); `le` is a bucket's.
TARGET_LABELS = {"job", "instance"}
# What Grafana replaces before the query reaches Prometheus.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__range": "6h", "$__interval": "1m",
                     "$job": ".*", "${job}": ".*"}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
                "offset", "and", "or", "unless", "inf", "nan"}


@pytest_asyncio.fixture
async def cluster_api() -> AsyncIterator[tuple[Emulator, FakeApiServer]]:
    async with Emulator() as emulator, kmock.Server(emulator):
        yield emulator, FakeApiServer(emulator)


# -- reading PromQL --------------------------------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
# A whole identifier not followed by "(" (a function); a number's digits never start one.
_NAME = re.compile(r"(?<![\w:.])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:]|\s*\()")
_LEGEND = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")


def promql(expr: str) -> tuple[dict[str, set[str]], set[str]]:
    """The metric names an expression selects, each with the label names its matchers use,
    and the label names it groups or joins by."""
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    expr = _STRING.sub('""', expr)
    metrics: dict[str, set[str]] = defaultdict(set)

    def selector(m: re.Match[str]) -> str:
        labels = set(_MATCHER.findall(m.group(2)))
        if m.group(1):
            metrics[m.group(1)] |= labels
        else:  # {__name__="..."} alone: not used here, and not readable by name
            raise AssertionError(f"a selector without a metric name: {m.group(0)}")
        return " "

    rest = _SELECTOR.sub(selector, expr)
    grouping = {label.strip() for labels in _GROUPING.findall(rest)
                for label in labels.split(",") if label.strip()}
    rest = _GROUPING.sub(" ", rest)
    rest = re.sub(r"\[[^\]]*\]", " ", rest)  # ranges and subqueries: [5m], [1h:1m]
    for name in _NAME.findall(rest):
        if name not in PROMQL_WORDS:
            metrics.setdefault(name, set())
    return dict(metrics), grouping


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(where, expression, legend) for every panel target and query variable."""
    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for item in items:
            yield item
            yield from panels(item.get("panels", []))

    for panel in panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"], target.get("legendFormat", "")
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            text = query["query"] if isinstance(query, dict) else query
            found = re.fullmatch(r"label_values\((.+),\s*([a-zA-Z_]\w*)\)", text)
            assert found, f"variable {variable['name']}: not a label_values() query: {text}"
            metric, label = found.groups()
            yield f"variable {variable['name']}", f"max by ({label}) ({metric})", ""


def problems(dashboard: dict[str, Any], scraped: dict[str, set[str]]) -> list[str]:
    """What the dashboard asks for that the scrape does not have."""
    found = []
    for where, expr, legend in queries(dashboard):
        metrics, grouping = promql(expr)
        if not metrics:
            found.append(f"{where}: no metric in {expr!r}")
        available = set(TARGET_LABELS)
        for name, labels in metrics.items():
            if name not in scraped:
                found.append(f"{where}: {name} is not exposed")
                continue
            available |= scraped[name]
            missing = labels - scraped[name] - TARGET_LABELS
            if missing:
                found.append(f"{where}: {name} has no label {sorted(missing)}")
        for label in (grouping | set(_LEGEND.findall(legend))) - available:
            found.append(f"{where}: no metric of {expr!r} has the label {label!r}")
    return found


def test_the_reader_is_exact() -> None:
    scraped = {"desched_cycles_total": {"result"},
               "descheduler_loop_duration_seconds_bucket": {"le"},
               "descheduler_loop_duration_seconds_count": set()}

    def board(expr: str, legend: str = "") -> dict[str, Any]:
        return {"panels": [{"title": "p", "targets": [{"expr": expr, "legendFormat": legend}]}],
                "templating": {"list": []}}

    ok = ('sum by (result) (increase(desched_cycles_total{job=~"$job", result="stale"}'
          '[$__rate_interval])) / on (job) group_left count(desched_cycles_total)')
    assert problems(board(ok, "{{result}}"), scraped) == []
    assert promql(ok) == ({"desched_cycles_total": {"job", "result"}}, {"result", "job"})
    assert problems(board("rate(desched_cycles[5m])"), scraped) == [
        "p: desched_cycles is not exposed"]  # the counter's name without _total
    quantile = ("histogram_quantile(0.9, sum by (le) "
                "(rate(descheduler_loop_duration_seconds[5m])))")  # no _bucket
    assert problems(board(quantile), scraped) == [
        "p: descheduler_loop_duration_seconds is not exposed",
        f"p: no metric of {quantile!r} has the label 'le'"]
    assert problems(board('desched_cycles_total{reason="x"}'), scraped) == [
        "p: desched_cycles_total has no label ['reason']"]
    assert problems(board("sum by (node) (desched_cycles_total)"), scraped) == [
        "p: no metric of 'sum by (node) (desched_cycles_total)' has the label 'node'"]
    assert problems(board("desched_cycles_total", "{{phase}}"), scraped) == [
        "p: no metric of 'desched_cycles_total' has the label 'phase'"]
    # Names inside strings, label names, functions and durations are not metrics.
    assert promql('label_replace(up{a="desched_x"}, "b", "$1", "a", "(.*)") offset 5m') == (
        {"up": {"a"}}, set())


# -- the scrape ------------------------------------------------------------------------------


async def scrape(runner: Any) -> str:
    async with aiohttp.ClientSession(trust_env=False) as http, \
            http.get(f"http://127.0.0.1:{runner.servers[0].port}/metrics") as response:
        assert response.status == 200
        return await response.text()


def series(text: str) -> dict[str, set[str]]:
    """Sample name -> label names, as Prometheus stores them."""
    out: dict[str, set[str]] = defaultdict(set)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name] |= set(sample.labels)
    return out


@pytest.mark.asyncio
@pytest.mark.slow
async def test_every_query_reads_metrics_desched_exposes(
        tmp_path: Path, cluster_api: tuple[Emulator, FakeApiServer]) -> None:
    emulator, api = cluster_api
    scraped: dict[str, set[str]] = defaultdict(set)
    # A MigrationController policy: evictions through PodMigrationJobs (jobs by phase), a
    # limiter's refusals, events; then a changed policy file (a reload).
    workload_cluster(api)
    Jobs(api)
    policy = tmp_path / "koord.yaml"
    policy.write_text(POLICY)
    runner = runner_for(config(tmp_path, emulator, interval="100ms", policy_path=str(policy),
                               kinds=KINDS, policy_poll=0.05, metrics_address="127.0.0.1:0"))
    value = runner.metrics.registry.get_sample_value
    async with background(runner):
        # A job carried out: its pod evicted, the event about it posted.
        await until(lambda: value("desched_migration_evictions_total", {"profile": "koord"})
                    and value("desched_events_total", {"type": "Normal", "result": "posted"}))
        policy.write_text(POLICY.replace("interval: 20ms", "interval: 30ms"))
        await until(lambda: value("desched_policy_reload_total", {"result": "success"}))
        for name, labels in series(await scrape(runner)).items():
            scraped[name] |= labels
    # metrics-server down: LowNodeUtilization's usage is unavailable.
    for kind in ("NodeMetrics", "PodMetrics"):
        api.fail("list", kind, 500, times=10**6)
    metrics_policy = tmp_path / "metrics.yaml"
    metrics_policy.write_text(METRICS_POLICY)
    runner = runner_for(config(tmp_path, emulator, interval="100ms", dry_run=True, kinds=None,
                               policy_path=str(metrics_policy), stale_cache_timeout=0.1,
                               metrics_address="127.0.0.1:0"))
    async with background(runner):
        await until(lambda: len(runner.reports) >= 1)
        for name, labels in series(await scrape(runner)).items():
            scraped[name] |= labels

    for needed in ("descheduler_pods_evicted_total", "desched_migration_jobs",
                   "desched_policy_reload_total", "desched_usage_unavailable_total",
                   "desched_events_total"):
        assert needed in scraped, f"the runs did not produce {needed}: the check means less"
    dashboard = json.loads(DASHBOARD.read_text())
    assert problems(dashboard, scraped) == []
    # Every metric the issue names has a panel.
    used = {name for _, expr, _ in queries(dashboard) for name in promql(expr)[0]}
    assert {"descheduler_pods_evicted_total", "descheduler_loop_duration_seconds_bucket",
            "desched_cycles_total", "desched_informer_stale_seconds",
            "desched_policy_reload_total", "desched_migration_jobs"} <= used


def test_the_dashboard_is_importable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "desched" and dashboard["title"] == "desched"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"] and panel["description"], panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]


# -- the chart provisions it -----------------------------------------------------------------

# Where the image is (the chart has no default for it); the rest is the ServiceMonitor path.
IMAGE = {"image": {"repository": "registry.example.com/desched"}}
MONITORED = {**IMAGE, "kind": "Deployment", "serviceMonitor": {"enabled": True}}


def test_the_chart_ships_the_dashboard_as_is() -> None:
    assert CHART_COPY.read_bytes() == DASHBOARD.read_bytes()


def test_helm_provisions_the_dashboard_with_the_service_monitor(tmp_path: Path) -> None:
    docs = helm_template(tmp_path, {**MONITORED, "grafanaDashboard": {
        "enabled": True, "annotations": {"grafana_folder": "Kubernetes"}}})
    assert isinstance(docs, list)
    [dashboard] = [d for d in by_kind(docs, "ConfigMap")
                   if d["metadata"]["name"].endswith("-dashboard")]
    meta = dashboard["metadata"]
    assert meta["labels"]["grafana_dashboard"] == "1"
    assert meta["annotations"] == {"grafana_folder": "Kubernetes"}
    assert meta["namespace"] == "kube-system"
    assert json.loads(dashboard["data"]["desched.json"]) == json.loads(DASHBOARD.read_text())
    # Off by default, with the ServiceMonitor or without.
    for values in (IMAGE, MONITORED):
        docs = helm_template(tmp_path, values)
        assert isinstance(docs, list)
        assert not [d for d in by_kind(docs, "ConfigMap")
                    if d["metadata"]["name"].endswith("-dashboard")]


@pytest.mark.parametrize("values", [
    {**IMAGE, "grafanaDashboard": {"enabled": True}},  # a CronJob: nothing to scrape
    {**IMAGE, "kind": "Deployment", "grafanaDashboard": {"enabled": True}},
])
def test_helm_refuses_a_dashboard_without_the_service_monitor(
        tmp_path: Path, values: dict[str, Any]) -> None:
    error = helm_template(tmp_path, values, expect_failure=True)
    assert "grafanaDashboard.enabled needs kind: Deployment and serviceMonitor.enabled" in \
        str(error)


def test_the_chart_turns_the_cycles_page_off(tmp_path: Path) -> None:
    def args(values: dict[str, Any]) -> list[str]:
        docs = helm_template(tmp_path, values)
        assert isinstance(docs, list)
        [workload] = by_kind(docs, "Deployment")
        return list(pod_spec(workload)["containers"][0]["args"])

    assert "--no-cycles-page" not in args(MONITORED)
    assert "--no-cycles-page" in args({**MONITORED, "cmdOptions": {
        "log-format": "json", "no-cycles-page": True}})
