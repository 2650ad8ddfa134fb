"""Cycle assembly on its own (live/cycle_assembly.py), against kmock over real HTTP: one cycle
from the informer caches to its report, as a dry run (nothing leaves the process) and live (the
Eviction API); each plugin run timed; plugin state carried to the next cycle; the usage
sources' queries handed to the plugins; a policy its snapshot cannot build failing a loop's
cycle and stopping a single run. With the whole loop: tests/live/test_run.py."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from fake_apiserver import FakeApiServer
from test_run import KINDS, POLICY, cluster, server_pods

from desched.errors import InputError
from desched.framework.moves import MoveTracker
from desched.framework.policy import Policy
from desched.live.assumed import EvictedPods
from desched.live.carried_state import CarriedState
from desched.live.client import ApiClient
from desched.live.config import RunConfig
from desched.live.cycle_assembly import CycleAssembly
from desched.live.informer import Informer, make_informers, start_informers, stop_informers
from desched.live.metrics import Metrics
from desched.live.migration_supervisor import MigrationSupervisor
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import parse_policy
from desched.usage import RecordedQueries
from usage.fake_prometheus import vector

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def informers(client: ApiClient) -> AsyncIterator[list[Informer]]:
    started = make_informers(client, KINDS)
    yield started
    await stop_informers(started)


def policy(text: str = POLICY.format(notify="false")) -> Policy:
    return parse_policy("policy.yaml", text.encode(), PLUGINS)


def assembly(dry_run: bool, looping: bool = True,
             carried: CarriedState | None = None) -> CycleAssembly:
    metrics = Metrics()
    carried = carried or CarriedState()
    return CycleAssembly(
        RunConfig(policy_path="policy.yaml", eviction_backoff=(0.01, 0.02)), metrics,
        dry_run=dry_run, looping=looping, stopping=threading.Event(), carried=carried,
        migrations=MigrationSupervisor({}, carried, metrics, looping=looping),
        evicted_pods=EvictedPods(), moves=MoveTracker())


async def one_cycle(a: CycleAssembly, p: Policy, informers: list[Informer],
                    client: ApiClient, number: int = 1, **options: Any) -> Any:
    await start_informers(informers, timeout=10)
    return await a.run(number, p, informers=informers, client=client,
                       loop=asyncio.get_running_loop(), events=None, guard=None,
                       wake=asyncio.Event(), **options)


def sample(a: CycleAssembly, name: str, **labels: str) -> float:
    return a.metrics.registry.get_sample_value(name, labels) or 0.0


async def test_a_dry_run_cycle_decides_and_changes_nothing(
        api: FakeApiServer, client: ApiClient, informers: list[Informer]) -> None:
    cluster(api)
    before = server_pods(api)
    a = assembly(dry_run=True)
    report = await one_cycle(a, policy(), informers, client)
    assert (report.number, report.result, report.evicted) == (1, "completed", 2)
    assert sorted(d.pod for d in report.log.evictions()) == ["old-1", "old-2"]
    assert server_pods(api) == before
    assert report.facts.nodes == 2 and report.facts.pods == 4
    assert sample(a, "desched_cycles_total", result="completed") == 1
    assert sample(a, "descheduler_strategy_duration_seconds_count",
                  strategy="PodLifeTime", profile="default") == 1
    assert sample(a, "descheduler_loop_duration_seconds_count") == 1


async def test_a_live_cycle_evicts_through_the_api(
        api: FakeApiServer, client: ApiClient, informers: list[Informer]) -> None:
    evictions = cluster(api)
    a = assembly(dry_run=False)
    report = await one_cycle(a, policy(), informers, client)
    assert report.result == "completed" and report.evicted == 2
    assert sorted(b["metadata"]["name"] for b in evictions.bodies) == [
        "db-0", "old-1", "old-2"]  # db-0's budget refused it
    assert report.failed == 1
    assert "old-1" not in " ".join(server_pods(api))


LOAD_AWARE = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
metricsProviders:
- source: Prometheus
  prometheus: {url: "http://prometheus:9090"}
profiles:
- name: default
  pluginConfig:
  - name: DefaultEvictor
  - name: LowNodeUtilization
    args:
      thresholds: {MetricResource: 30}
      targetThresholds: {MetricResource: 70}
      metricsUtilization: {source: Prometheus, prometheus: {query: "node:cpu"}}
  plugins:
    balance: {enabled: [LowNodeUtilization]}
"""


async def test_the_plugins_query_through_the_runs_queries(
        api: FakeApiServer, client: ApiClient, informers: list[Informer]) -> None:
    cluster(api)
    queries = RecordedQueries({("http://prometheus:9090", "node:cpu"): json.dumps(
        vector({"n1": 0.9, "n2": 0.1})).encode()})
    report = await one_cycle(assembly(dry_run=True), policy(LOAD_AWARE), informers, client,
                             queries=queries)
    assert [form["query"] for _, form in queries.asked] == ["node:cpu"]
    assert [d.node for d in report.log.evictions()] == ["n1"]


async def test_without_queries_the_plugin_says_why(
        api: FakeApiServer, client: ApiClient, informers: list[Informer]) -> None:
    cluster(api)
    report = await one_cycle(assembly(dry_run=True), policy(LOAD_AWARE), informers, client)
    assert report.evicted == 0
    assert report.log.notes[0].text.startswith(
        "prometheus client not initialized")


LOW_NODE_LOAD = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: koord
  plugins:
    evict: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
    filter: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
    balance:
      enabled: [{name: LowNodeLoad}]
  pluginConfig:
  - name: LowNodeLoad
    args:
      lowThresholds: {cpu: 20, memory: 30}
      highThresholds: {cpu: 50, memory: 60}
"""


async def test_carried_state_reaches_the_next_cycle(
        api: FakeApiServer, client: ApiClient, informers: list[Informer]) -> None:
    cluster(api)
    carried = CarriedState()
    a = assembly(dry_run=True, carried=carried)
    p = policy(LOW_NODE_LOAD)
    await one_cycle(a, p, informers, client)
    assert ("koord", "LowNodeLoad") in carried
    state: Any = carried[("koord", "LowNodeLoad")]
    await one_cycle(a, p, informers, client, number=2)
    # The same detector caches went from the first cycle's plugin to the second's.
    now: Any = carried[("koord", "LowNodeLoad")]
    assert now.node is state.node


THRESHOLD = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: default
  pluginConfig:
  - name: DefaultEvictor
    args: {priorityThreshold: {name: no-such-class}}
  - name: PodLifeTime
    args: {maxPodLifeTimeSeconds: 3600}
  plugins:
    deschedule: {enabled: [PodLifeTime]}
"""


async def test_a_policy_the_snapshot_cannot_build(
        api: FakeApiServer, client: ApiClient, informers: list[Informer]) -> None:
    cluster(api)
    a = assembly(dry_run=True)
    report = await one_cycle(a, policy(THRESHOLD), informers, client)
    assert report.result == "failed"
    assert report.facts.why.startswith("cannot build the policy's profiles on this cycle's "
                                       "snapshot: ")
    with pytest.raises(InputError, match="no-such-class"):
        await one_cycle(assembly(dry_run=True, looping=False), policy(THRESHOLD), informers,
                        client)


async def test_event_failures_are_counted() -> None:
    a = assembly(dry_run=True)
    a.event_posted("Normal", True)
    a.event_posted("Warning", False)
    assert a.events_failed == 1
    assert sample(a, "desched_events_total", type="Warning", result="failed") == 1
