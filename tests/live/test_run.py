"""`desched run` against kmock over real HTTP: one cycle evicting per a PodLifeTime policy,
the dry run reporting the same decisions while evicting nothing, schedules, shutdown between
evictions, leader election, connection errors, and the command run as a real process."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import re
import signal
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_apiserver import Emulator, FakeApiServer, node, pod
from test_executor import Evictions, pdb

from builders import COMMAND_WAIT
from desched.errors import InputError
from desched.live.client import AccessDenied, ApiClient, ApiError
from desched.live.config import parse_cron
from desched.live.run import (
    LEASE_LOST,
    RunConfig,
    Runner,
    Schedule,
    prepare,
    resolve_schedule,
)
from desched.model.resources import RESOURCES
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import load_policy

pytestmark = pytest.mark.asyncio

POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
evictionFailureEventNotification: {notify}
profiles:
- name: default
  pluginConfig:
  - name: DefaultEvictor
  - name: PodLifeTime
    args:
      maxPodLifeTimeSeconds: 3600
  plugins:
    deschedule:
      enabled: [PodLifeTime]
"""

# What the policies here read; in-process runs watch only these (the command watches all).
KINDS = ("Namespace", "Node", "PodDisruptionBudget", "Pod", "NodeMetric")
OLD = (datetime.now(UTC) - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
YOUNG = (datetime.now(UTC) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(autouse=True)
def unfreeze() -> Iterator[None]:
    """A run freezes the heap after its caches sync (gc.freeze); give it back."""
    yield
    gc.unfreeze()


def owned(name: str, node_name: str, created: str, app: str = "web") -> dict[str, Any]:
    return pod(name, node=node_name, labels={"app": app}, metadata={
        "creationTimestamp": created,
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-rs",
                             "uid": f"uid-rs-{app}", "controller": True}]})


def cluster(api: FakeApiServer, old: int = 2) -> Evictions:
    """Two Ready nodes; `old` pods past the 1h lifetime, one young pod, and one old pod a
    PodDisruptionBudget protects (disruptionsAllowed 0)."""
    # Every kind, optional ones included: kmock's 404s for unknown resources are slow.
    api.serve(*(r.kind for r in RESOURCES))
    api.add_now("Node", node("n1"), node("n2"))
    api.add_now("Pod", *(owned(f"old-{i}", f"n{i % 2 + 1}", OLD) for i in range(1, old + 1)),
                owned("young", "n1", YOUNG), owned("db-0", "n2", OLD, app="db"))
    api.add_now("PodDisruptionBudget", pdb("db", 0, {"app": "db"}))
    return Evictions(api).install()


def kubeconfig(tmp_path: Path, server: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t0ken"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}]}))
    return str(path)


def policy_file(tmp_path: Path, notify: bool = False, text: str = POLICY) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(text.format(notify=str(notify).lower()))
    return str(path)


def config(tmp_path: Path, emulator: Emulator, **options: Any) -> RunConfig:
    if "policy_path" not in options:
        options["policy_path"] = policy_file(tmp_path)
    options.setdefault("kinds", KINDS)
    options.setdefault("kubeconfig", kubeconfig(tmp_path, str(emulator.url).rstrip("/")))
    return RunConfig(signals=False, connect_backoff=(0.01, 0.05),
                     eviction_backoff=(0.01, 0.02), **options)


def runner_for(cfg: RunConfig, **options: Any) -> Runner:
    policy, schedule = prepare(cfg)
    return Runner(cfg, policy, schedule, **options)


async def run(cfg: RunConfig, **options: Any) -> tuple[Runner, int]:
    runner = runner_for(cfg, **options)
    code = await asyncio.wait_for(runner.run(), 20)
    return runner, code


def decisions(runner: Runner) -> list[tuple[str, str, str]]:
    return sorted((d.outcome, f"{d.namespace}/{d.pod}", d.plugin)
                  for report in runner.reports for d in report.log.decisions)


def server_pods(api: FakeApiServer) -> list[str]:
    return sorted(api.kinds["Pod"].objects)


async def events(emulator: Emulator) -> list[dict[str, Any]]:
    async with ApiClient.for_server(str(emulator.url).rstrip("/"), trust_env=False) as client:
        try:
            body = await client.get("/apis/events.k8s.io/v1/namespaces/default/events",
                                    what="list events")
        except ApiError as err:  # kmock knows the resource once an event was posted
            if err.code == 404:
                return []
            raise
    items: list[dict[str, Any]] = json.loads(body)["items"]
    return items


@contextlib.asynccontextmanager
async def background(runner: Runner) -> AsyncIterator[asyncio.Task[int]]:
    """runner.run() as a task, stopped at the end whatever happens."""
    task = asyncio.create_task(runner.run())
    try:
        yield task
    finally:
        if not task.done():
            runner.request_stop("the test ends")
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 10)


async def until(check: Any, timeout: float = 30.0) -> None:
    """Poll until check() holds; the bound only ends a test that would otherwise hang."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


EXPECTED = [("evicted", "default/old-1", "PodLifeTime"),
            ("evicted", "default/old-2", "PodLifeTime"),
            ("pdb-blocked", "default/db-0", "PodLifeTime")]


# -- one cycle, live and dry ---------------------------------------------------------------------

async def test_once_evicts_per_the_policy(tmp_path: Path, emulator: Emulator,
                                          api: FakeApiServer) -> None:
    evictions = cluster(api)
    runner, code = await run(config(tmp_path, emulator, once=True))
    assert code == 0
    assert decisions(runner) == EXPECTED
    assert server_pods(api) == ["default/db-0", "default/young"]
    assert sorted(evictions.evicted()) == ["default/db-0", "default/old-1", "default/old-2"]
    [report] = runner.reports
    assert (report.result, report.evicted, report.failed) == ("completed", 2, 1)
    posted = await events(emulator)
    assert sorted((e["type"], e["regarding"]["name"]) for e in posted) == [
        ("Normal", "old-1"), ("Normal", "old-2")]  # failures only with the notification
    assert all(e["reason"] == "PodLifeTime" and e["regarding"]["uid"] for e in posted)


async def test_dry_run_reports_the_same_and_evicts_nothing(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    evictions = cluster(api)
    before = server_pods(api)
    dry, code = await run(config(tmp_path, emulator, once=True, dry_run=True))
    assert code == 0
    assert evictions.bodies == [] and server_pods(api) == before
    assert await events(emulator) == []  # as upstream: a dry run records no events
    live, code = await run(config(tmp_path, emulator, once=True))
    assert code == 0
    assert decisions(dry) == decisions(live) == EXPECTED


KOORD_FILE = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
{head}profiles:
- name: koord
  plugins:
    evict: {{disabled: [{{name: "*"}}], enabled: [{{name: DefaultEvictor}}]}}
    filter: {{disabled: [{{name: "*"}}], enabled: [{{name: DefaultEvictor}}]}}
    deschedule: {{enabled: [{{name: PodLifeTime}}]}}
  pluginConfig:
  - name: PodLifeTime
    args: {{maxPodLifeTimeSeconds: {max_age}}}
"""


def koord_dry_run(dry_run: str) -> str:
    """A Koordinator file of one PodLifeTime profile (pods older than an hour), `dryRun` set."""
    return KOORD_FILE.format(head=f"dryRun: {dry_run}\n", max_age=3600)


def koord_loop(head: str) -> str:
    """The same profile for pods older than a minute, `head` the file's process settings."""
    return KOORD_FILE.format(head=head, max_age=60)


@pytest.mark.parametrize(("file_dry_run", "flag_dry_run"), [(True, False), (False, True),
                                                            (True, True)])
async def test_a_dry_run_from_the_file_or_the_flag_goes_through_the_budgets(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer, file_dry_run: bool,
        flag_dry_run: bool) -> None:
    # Koordinator's dryRun or --dry-run, either makes the run a dry run (neither can undo the
    # other); the PDB still refuses db-0 and nothing reaches the API server.
    evictions = cluster(api)
    before = server_pods(api)
    path = tmp_path / "koord.yaml"
    path.write_text(koord_dry_run(str(file_dry_run).lower()))
    runner, code = await run(config(tmp_path, emulator, policy_path=str(path), once=True,
                                    dry_run=flag_dry_run))
    assert code == 0
    assert evictions.bodies == [] and server_pods(api) == before
    # The file's dryRun records Koordinator's "dry-run" outcome; --dry-run keeps upstream's.
    done = "dry-run" if file_dry_run else "evicted"
    assert decisions(runner) == [(done, "default/old-1", "PodLifeTime"),
                                 (done, "default/old-2", "PodLifeTime"),
                                 ("pdb-blocked", "default/db-0", "PodLifeTime")]
    assert runner.reports[0].evicted == 2


async def test_failure_events_with_the_notification(tmp_path: Path, emulator: Emulator,
                                                    api: FakeApiServer) -> None:
    cluster(api)
    await run(config(tmp_path, emulator, once=True,
                     policy_path=policy_file(tmp_path, notify=True)))
    warnings = [e for e in await events(emulator) if e["type"] == "Warning"]
    [warning] = warnings
    assert warning["reason"] == "EvictionFailed" and warning["regarding"]["name"] == "db-0"
    assert warning["note"].startswith("pod eviction from n2 node by desched failed: Cannot "
                                      "evict pod as it would violate")


async def test_fewer_than_two_ready_nodes_skip_the_cycle(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    evictions = cluster(api)
    await api.delete("Node", "n2")
    runner, code = await run(config(tmp_path, emulator, once=True))
    assert code == 0 and runner.reports[0].result == "skipped" and evictions.bodies == []


# -- the loop ------------------------------------------------------------------------------------

async def test_interval_loop_sees_new_pods_and_stops_cleanly(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    evictions = cluster(api, old=1)
    runner = runner_for(config(tmp_path, emulator, interval="50ms"))
    async with background(runner) as task:
        await until(lambda: len(runner.reports) >= 1)
        await api.add("Pod", owned("old-9", "n2", OLD))  # through the watch
        await until(lambda: "default/old-9" in evictions.evicted())
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    assert "default/old-9" not in api.kinds["Pod"].objects
    assert runner.client is None and runner.informers == []


async def test_a_pod_evicted_before_the_watch_says_so_is_not_evicted_again(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    """The server accepted the eviction, but the pods watch lags (a loaded or throttling API
    server): the next cycles must see the pod terminating, not send it a second eviction."""
    evictions = cluster(api, old=1)
    evictions.script = [(201, "Success")]  # accepted; the watch hears nothing of it
    runner = runner_for(config(tmp_path, emulator, interval="50ms"))
    async with background(runner):
        await until(lambda: len(runner.reports) >= 4)
        names = [b["metadata"]["name"] for b in evictions.bodies]
        first = names[0]
        assert f"default/{first}" in api.kinds["Pod"].objects  # the cache has it running
        assert names.count(first) == 1, names
        assert len(runner.evicted_pods) == 1
        kept = [d for r in runner.reports[1:] for d in r.log.decisions if d.pod == first]
        assert kept == []
        # The watch catches up: the pod was deleted. Nothing is kept for it any longer.
        await api.delete("Pod", first, "default")
        reports = len(runner.reports)
        await until(lambda: len(runner.reports) >= reports + 2)
        assert len(runner.evicted_pods) == 0
    assert [b["metadata"]["name"] for b in evictions.bodies].count(first) == 1


async def test_stop_finishes_the_eviction_in_flight_and_starts_no_other(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    evictions = cluster(api, old=4)
    runner = runner_for(config(tmp_path, emulator, once=True))
    evictions.delay = 0.2
    evictions.on_request = lambda body: runner.request_stop("SIGTERM")  # mid-eviction
    code = await asyncio.wait_for(runner.run(), 20)
    assert code == 0
    assert len(evictions.bodies) == 1
    [evicted] = evictions.evicted()
    assert evicted not in api.kinds["Pod"].objects  # the one in flight was carried out
    assert runner.reports[0].result == "interrupted"
    assert [d.outcome for d in runner.reports[0].log.decisions] == ["evicted"]


async def test_policy_interval_applies_without_flags(tmp_path: Path) -> None:
    text = textwrap.dedent("""\
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerConfiguration
        deschedulingInterval: 90s
        profiles:
        - name: p
          plugins:
            evict: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
            filter: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
            deschedule:
              enabled: [{name: PodLifeTime}]
          pluginConfig:
          - name: PodLifeTime
            args: {maxPodLifeTimeSeconds: 60}
        """)
    path = tmp_path / "koord.yaml"
    path.write_text(text)
    policy = load_policy(str(path), PLUGINS)
    assert str(resolve_schedule(RunConfig(str(path)), policy)) == "every 90s"
    assert resolve_schedule(RunConfig(str(path), once=True), policy).kind == "once"
    assert resolve_schedule(RunConfig(str(path), interval="5m"), policy).interval == 300


async def test_schedules(tmp_path: Path) -> None:
    policy = load_policy(policy_file(tmp_path), PLUGINS)
    assert resolve_schedule(RunConfig("p"), policy).kind == "once"  # upstream's default: 0
    assert resolve_schedule(RunConfig("p", interval="0"), policy).kind == "once"
    t0 = datetime(2026, 11, 22, 12, 0, 30, tzinfo=UTC)
    every = Schedule("interval", 300)
    assert every.next_run(None, t0) == t0
    assert every.next_run(t0, t0 + timedelta(seconds=10)) == t0 + timedelta(seconds=300)
    late = t0 + timedelta(seconds=400)  # a cycle longer than the interval: next one at once
    assert every.next_run(t0, late) == late
    cron = Schedule("cron", cron=parse_cron("*/2 * * * *"))
    first = cron.next_run(None, t0)
    assert first == datetime(2026, 11, 22, 12, 2, tzinfo=UTC)
    assert cron.next_run(first, first + timedelta(seconds=5)) == first + timedelta(minutes=2)
    # A fire time missed while a cycle ran is skipped, not run late.
    assert cron.next_run(first, first + timedelta(minutes=2, seconds=1)) == \
        first + timedelta(minutes=4)
    assert Schedule("once").next_run(t0, t0) is None
    assert parse_cron("@hourly") == "@hourly"
    for bad, message in (("* * * *", "expected 5 fields"), ("*/2 * * * * *", "5 fields"),
                         ("61 * * * *", "not a valid crontab")):
        with pytest.raises(InputError, match=message):
            parse_cron(bad)
    with pytest.raises(InputError, match="at most one of --once, --interval and --cron"):
        resolve_schedule(RunConfig("p", once=True, cron="* * * * *"), policy)
    with pytest.raises(InputError,
                       match='--interval: time: unknown unit " min" in duration "5 min"'):
        resolve_schedule(RunConfig("p", interval="5 min"), policy)


async def test_flag_checks_before_connecting(tmp_path: Path) -> None:
    path = policy_file(tmp_path)
    with pytest.raises(InputError, match="leaderElection must be used with "
                                         "deschedulingInterval"):
        prepare(RunConfig(path, leader_elect=True, once=True))
    with pytest.raises(InputError, match="--metrics-address: expected HOST:PORT"):
        prepare(RunConfig(path, metrics_address="10258"))
    with pytest.raises(InputError, match="--leader-elect-lease-duration"):
        prepare(RunConfig(path, leader_elect=True, interval="1m", lease_duration="soon"))
    with pytest.raises(InputError, match="retry period < renew deadline < lease duration"):
        prepare(RunConfig(path, leader_elect=True, interval="1m", lease_duration="10s"))
    # Leader election is off in a dry run, as upstream.
    cfg = RunConfig(path, leader_elect=True, dry_run=True, once=True)
    prepare(cfg)
    assert not runner_for(cfg).leader_elect


# -- connection errors ---------------------------------------------------------------------------

async def test_once_fails_fast_on_forbidden(tmp_path: Path, emulator: Emulator,
                                            api: FakeApiServer) -> None:
    cluster(api)
    api.fail("list", "Node", 403, 'nodes is forbidden: User "u" cannot list resource')
    with pytest.raises(InputError, match=r"forbidden \(403\) to list nodes"):
        await run(config(tmp_path, emulator, once=True))


async def test_loop_retries_until_the_cluster_answers(tmp_path: Path, emulator: Emulator,
                                                      api: FakeApiServer) -> None:
    evictions = cluster(api)
    api.fail("list", "Node", 403, "nodes is forbidden", times=2)
    runner = runner_for(config(tmp_path, emulator, interval="1h"))
    async with background(runner) as task:
        await until(lambda: len(runner.reports) == 1)
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    assert len(api.requests("list", "nodes")) == 3
    assert len(evictions.bodies) == 3


# -- leader election -----------------------------------------------------------------------------

class FakeElector:
    def __init__(self) -> None:
        self.lost = asyncio.Event()
        self.allow = asyncio.Event()
        self.leading = False
        self.released = False
        self.waiting = False  # inside acquire(), until allowed

    async def acquire(self) -> None:
        self.waiting = True
        await self.allow.wait()
        self.waiting = False
        self.leading = True

    def is_leader(self) -> bool:
        return self.leading and not self.lost.is_set()

    async def release(self) -> None:
        self.released = True
        self.leading = False

    def lose(self) -> None:
        self.leading = False
        self.lost.set()


async def test_cycles_wait_for_the_lease(tmp_path: Path, emulator: Emulator,
                                         api: FakeApiServer) -> None:
    evictions = cluster(api)
    elector = FakeElector()
    runner = runner_for(config(tmp_path, emulator, interval="1h", leader_elect=True),
                        elector_factory=lambda client, cfg, identity: elector)
    async with background(runner) as task:
        await until(lambda: elector.waiting)  # the run waits in acquire(), before any cycle
        assert runner.reports == [] and evictions.bodies == []
        assert runner.readiness.reason() is None  # standing by counts as ready
        elector.allow.set()
        await until(lambda: len(runner.reports) == 1)
        assert runner.metrics.registry.get_sample_value("desched_leader") == 1
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    assert elector.released


async def test_lost_lease_refuses_evictions_and_exits(tmp_path: Path, emulator: Emulator,
                                                      api: FakeApiServer) -> None:
    evictions = cluster(api, old=3)
    elector = FakeElector()
    elector.allow.set()
    evictions.on_request = lambda body: elector.lose()  # lost while the first one is in flight
    runner, code = await run(config(tmp_path, emulator, interval="1h", leader_elect=True),
                             elector_factory=lambda client, cfg, identity: elector)
    assert code == 1
    assert len(evictions.bodies) == 1
    outcomes = [(d.outcome, d.reason) for d in runner.reports[0].log.decisions]
    assert outcomes[0][0] == "evicted"
    assert outcomes[1] == ("failed", LEASE_LOST)  # recorded, then the cycle ends
    assert len(outcomes) == 2
    assert runner.readiness.reason() == LEASE_LOST


async def test_lowNodeLoad_detectors_outlive_a_cycle(tmp_path: Path, emulator: Emulator,
                                                     api: FakeApiServer) -> None:
    text = textwrap.dedent("""\
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
        """)
    path = tmp_path / "koord.yaml"
    path.write_text(text)
    cluster(api)
    runner = runner_for(config(tmp_path, emulator, policy_path=str(path), interval="50ms"))
    async with background(runner) as task:
        await until(lambda: len(runner.reports) >= 1)
        carried = runner.carried[("koord", "LowNodeLoad")]
        await until(lambda: len(runner.reports) >= 3)
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    # The same detector caches went from cycle to cycle.
    assert runner.carried[("koord", "LowNodeLoad")].node is carried.node


# -- the command as a process --------------------------------------------------------------------

def command_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.pop("KUBECONFIG", None)
    return env


async def start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "desched", "run", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=command_env())


def json_lines(stderr: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]


@pytest.mark.process
async def test_command_once_and_dry_run(tmp_path: Path, emulator: Emulator,
                                        api: FakeApiServer) -> None:
    evictions = cluster(api)
    kube = kubeconfig(tmp_path, str(emulator.url).rstrip("/"))
    policy = policy_file(tmp_path)
    common = ("--policy-config-file", policy, "--kubeconfig", kube, "--log-format", "json")

    dry = await start(*common, "--once", "--dry-run")
    _, dry_err = await asyncio.wait_for(dry.communicate(), COMMAND_WAIT)
    assert dry.returncode == 0, dry_err.decode()
    assert evictions.bodies == []

    live = await start(*common, "--descheduling-interval", "0")
    _, live_err = await asyncio.wait_for(live.communicate(), COMMAND_WAIT)
    assert live.returncode == 0, live_err.decode()
    assert server_pods(api) == ["default/db-0", "default/young"]

    def evicted(lines: list[dict[str, Any]]) -> list[str]:
        return sorted(e["pod"] for e in lines if e["event"].startswith("Evicted pod"))

    dry_log, live_log = json_lines(dry_err), json_lines(live_err)
    assert evicted(dry_log) == evicted(live_log) == ["default/old-1", "default/old-2"]
    assert {e["event"] for e in dry_log} >= {"Evicted pod in dry run mode", "Error evicting pod"}
    assert all(e["dry_run"] for e in dry_log if e["event"].startswith("Evicted"))
    assert all(e["strategy"] == "PodLifeTime" and e["profile"] == "default"
               for e in live_log if e["event"] == "Evicted pod")


@pytest.mark.process
async def test_command_koordinator_dry_run_and_leader_election_from_the_file(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    evictions = cluster(api)
    path = tmp_path / "koord.yaml"
    path.write_text(koord_dry_run("true")
                    + "leaderElection: {leaderElect: true}\n")
    proc = await start("--policy", str(path), "--once", "--log-format", "json",
                       "--kubeconfig", kubeconfig(tmp_path, str(emulator.url).rstrip("/")))
    _, err = await asyncio.wait_for(proc.communicate(), COMMAND_WAIT)
    assert proc.returncode == 0, err.decode()
    assert evictions.bodies == []
    lines = json_lines(err)
    assert sorted(e["pod"] for e in lines if e["event"] == "Evicted pod in dry run mode") == [
        "default/old-1", "default/old-2"]
    assert [e["pod"] for e in lines if e["event"] == "Error evicting pod"] == ["default/db-0"]
    assert [e["level"] for e in lines if "leaderElection.leaderElect: true is not applied"
            in e["event"]] == ["warning"]


@pytest.mark.process
async def test_command_upstream_job_command_line(tmp_path: Path, emulator: Emulator,
                                                 api: FakeApiServer) -> None:
    # Upstream's Job manifest (`--policy-config-file ... --v 3`), in pflag's spellings.
    evictions = cluster(api)
    proc = await start("--policy-config-file", policy_file(tmp_path), "--v", "3",
                       "--logging-format=json", "--dry-run=true", "--leader-elect=false",
                       "--tls-min-version=VersionTLS12",
                       "--kubeconfig", kubeconfig(tmp_path, str(emulator.url).rstrip("/")))
    _, err = await asyncio.wait_for(proc.communicate(), COMMAND_WAIT)
    assert proc.returncode == 0, err.decode()
    assert evictions.bodies == []
    lines = json_lines(err)
    assert sorted(e["pod"] for e in lines if e["event"] == "Evicted pod in dry run mode") == [
        "default/old-1", "default/old-2"]
    assert [e["event"] for e in lines if e["level"] == "warning"] == [
        "--tls-min-version has no effect without --secure-port: ignored",
        "Error evicting pod"]  # the flag, then db-0's PodDisruptionBudget


@pytest.mark.process
async def test_command_upstream_secure_port_serves_health_and_metrics(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    import socket

    import aiohttp

    cluster(api)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = await start("--policy-config-file", policy_file(tmp_path), "--dry-run",
                       "--descheduling-interval=1h", f"--secure-port={port}",
                       "--bind-address=127.0.0.1", "--logging-format=json",
                       "--kubeconfig", kubeconfig(tmp_path, str(emulator.url).rstrip("/")))
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        while not any("next descheduling cycle" in line for line in seen):
            line = await asyncio.wait_for(proc.stderr.readline(), COMMAND_WAIT)
            assert line, "".join(seen)
            seen.append(line.decode())
        async with aiohttp.ClientSession(trust_env=False) as session:
            for path, expected in (("/healthz", "ok"), ("/metrics", "descheduler_")):
                # HTTPS, as upstream's, with a self-signed certificate (test_serving.py)
                async with session.get(f"https://127.0.0.1:{port}{path}",
                                       ssl=False) as response:
                    assert response.status == 200
                    assert expected in await response.text()
    except BaseException:
        proc.kill()  # a failed check leaves no command looping behind the suite
        await proc.wait()
        raise
    proc.send_signal(signal.SIGTERM)
    _, rest = await asyncio.wait_for(proc.communicate(), COMMAND_WAIT)
    assert proc.returncode == 0, rest.decode()


@pytest.mark.process
async def test_command_exits_0_on_sigterm_between_cycles(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    proc = await start("--policy", policy_file(tmp_path), "--log-format", "json",
                       "--kubeconfig", kubeconfig(tmp_path, str(emulator.url).rstrip("/")),
                       "--interval", "1h", "--health-address", "127.0.0.1:0")
    assert proc.stderr is not None
    seen: list[str] = []
    while not any("next descheduling cycle" in line for line in seen):
        line = await asyncio.wait_for(proc.stderr.readline(), COMMAND_WAIT)
        assert line, b"".join(s.encode() for s in seen)
        seen.append(line.decode())
    proc.send_signal(signal.SIGTERM)
    _, rest = await asyncio.wait_for(proc.communicate(), COMMAND_WAIT)
    assert proc.returncode == 0, rest.decode()
    assert "desched stopped" in rest.decode()


@pytest.mark.process
async def test_command_bad_kubeconfig_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [\n")
    proc = await start("--policy", policy_file(tmp_path), "--kubeconfig", str(bad), "--once")
    out, err = await asyncio.wait_for(proc.communicate(), COMMAND_WAIT)
    assert proc.returncode == 2
    lines = err.decode().splitlines()
    assert len(lines) == 1 and "invalid kubeconfig YAML" in lines[0], err.decode()
    assert out == b""


async def test_a_priority_class_threshold_does_not_stop_the_start(tmp_path: Path) -> None:
    """The class is looked up in each cycle's snapshot: checking the policy before connecting
    has no cluster to look in."""
    path = tmp_path / "pc.yaml"
    path.write_text(POLICY.format(notify="false").replace(
        "  - name: DefaultEvictor\n",
        "  - name: DefaultEvictor\n    args:\n      priorityThreshold: {name: high-priority}\n"))
    policy, schedule = prepare(RunConfig(policy_path=str(path), once=True))
    assert policy.profiles[0].args["DefaultEvictor"].priority_threshold.name == "high-priority"
    assert str(schedule) == "once"


async def test_a_missing_priority_class_fails_the_cycle_not_the_loop(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    path = tmp_path / "pc.yaml"
    path.write_text(POLICY.format(notify="false").replace(
        "  - name: DefaultEvictor\n",
        "  - name: DefaultEvictor\n    args:\n      priorityThreshold: {name: high-priority}\n"))
    runner = runner_for(config(tmp_path, emulator, policy_path=str(path), interval="50ms"))
    async with background(runner) as task:
        await until(lambda: len(runner.reports) >= 2)
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    assert {r.result for r in runner.reports} == {"failed"}
    # --once stops with the one-line error instead.
    once = runner_for(config(tmp_path, emulator, policy_path=str(path), once=True))
    missing = re.escape('priorityclasses.scheduling.k8s.io "high-priority"')
    with pytest.raises(InputError, match=missing):
        await asyncio.wait_for(once.run(), 20)


class ForbiddenElector(FakeElector):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error
        self.calls = 0

    async def acquire(self) -> None:
        self.calls += 1
        raise self.error


@pytest.mark.parametrize("error", [
    AccessDenied("server", "forbidden (403) to create lease koordinator-system/koord-descheduler"),
    ApiError(404, "NotFound", 'namespaces "koordinator-system" not found', "create lease"),
])
async def test_koordinators_default_election_yields_to_an_unusable_lease(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer, error: Exception) -> None:
    """desched's chart without an election, running a Koordinator file: the default alone
    does not keep the run from its cycles."""
    evictions = cluster(api)
    path = tmp_path / "koord.yaml"
    path.write_text(koord_loop(""))
    elector = ForbiddenElector(error)
    cfg = config(tmp_path, emulator, policy_path=str(path), interval="1h")
    runner = runner_for(cfg, elector_factory=lambda client, c, identity: elector)
    assert cfg.leader_elect and cfg.leader_elect_by_default
    async with background(runner) as task:
        await until(lambda: len(runner.reports) == 1)
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    assert elector.calls == 1 and not runner.leader_elect and runner.elector is None
    assert evictions.bodies  # the cycle ran and evicted


async def test_an_explicit_leader_elect_keeps_waiting_for_the_lease(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    path = tmp_path / "koord.yaml"
    path.write_text(koord_loop("leaderElection: {leaderElect: true}\n"))
    elector = ForbiddenElector(AccessDenied("server", "forbidden (403) to create lease"))
    cfg = config(tmp_path, emulator, policy_path=str(path), interval="1h")
    runner = runner_for(cfg, elector_factory=lambda client, c, identity: elector)
    assert cfg.leader_elect and not cfg.leader_elect_by_default
    async with background(runner) as task:
        await until(lambda: elector.calls >= 2)  # retried: no cycle without the lease
        assert runner.reports == []
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
