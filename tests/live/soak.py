"""A fault-injection soak of `desched run` against kmock (docs/reliability.md).

A cluster of apps (ReplicaSets of replicas crowded onto some nodes, old and young pods, a
PodDisruptionBudget per app) runs under PodLifeTime and RemoveDuplicates with eviction limits.
While the runner loops, a churn task creates, deletes and re-creates pods elsewhere through watch
events, budgets are replenished as the disruption controller would, and a fault task injects, at
random: 5xx, 429 with and without Retry-After, and 410 on lists and watches; dropped and ended
watch streams; 5xx, 429 (with and without Retry-After), timeouts and slow answers on evictions;
and a lost Lease in the middle of a cycle, after which a new runner takes over (a restarted pod).

`run_soak` returns what happened; the invariants are checked by tests/live/test_soak.py.
`run_process_soak` runs the same against the `desched run` command in its own process, whose
resident memory is then desched's alone (the emulator and the harness live in this one).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
from fake_apiserver import Emulator, FakeApiServer, node, pod
from test_executor import Evictions, pdb
from test_run import command_env

from builders import COMMAND_WAIT
from desched.live.config import RunConfig
from desched.live.run import CycleReport, Runner, prepare
from desched.live.triggers import SCHEDULED, Cause
from desched.model.resources import RESOURCES

KINDS = ("Namespace", "Node", "PodDisruptionBudget", "Pod")
PER_NODE, TOTAL = 3, 25
POLICY = f"""\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
maxNoOfPodsToEvictPerNode: {PER_NODE}
maxNoOfPodsToEvictTotal: {TOTAL}
profiles:
- name: soak
  pluginConfig:
  - name: DefaultEvictor
  - name: PodLifeTime
    args: {{maxPodLifeTimeSeconds: 3600}}
  - name: RemoveDuplicates
  plugins:
    deschedule: {{enabled: [PodLifeTime]}}
    balance: {{enabled: [RemoveDuplicates]}}
"""
FAULTS = ("list 5xx", "watch 5xx", "watch 429", "watch 429 Retry-After", "watch 410",
          "dropped streams", "ended streams", "eviction 5xx", "eviction 429",
          "eviction 429 Retry-After", "eviction timeout", "slow evictions",
          "lease lost mid-cycle")


@dataclass
class SoakSettings:
    nodes: int = 40
    pods: int = 2_000
    cycles: int = 20
    seed: int = 1
    fault_every: float = 0.05  # seconds between injected faults
    churn_every: float = 0.03  # seconds between churn steps
    interval: str = "100ms"
    each_fault: int = 1  # and go on until every kind of fault happened this often
    stream_gap: float = 1.2  # least seconds between faults that end the watch streams
    # Give up (the test then fails on what is missing). Quiet, the short soak takes ~30 s; with
    # both cores busy 90-120 s, and a CI run with four workers was seen past 180 s.
    max_seconds: float = 330.0


@dataclass
class SoakResult:
    reports: list[CycleReport] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)  # bytes, after each cycle
    faults: Counter[str] = field(default_factory=Counter)
    exit_codes: list[int] = field(default_factory=list)
    eviction_requests: int = 0
    pod_deletes: int = 0  # DELETE requests on pods: must stay 0 (evictions only)
    churned: int = 0
    tasks_left: int = 0
    fds_grown: int = 0
    seconds: float = 0.0


class FlakyElector:
    """Leader election whose Lease can be taken away at any moment (a lost renewal)."""

    def __init__(self) -> None:
        self.lost = asyncio.Event()

    async def acquire(self) -> None:
        return None

    def is_leader(self) -> bool:
        return not self.lost.is_set()

    async def release(self) -> None:
        return None


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class Cluster:
    """The objects, and the churn a live cluster has."""

    def __init__(self, api: FakeApiServer, settings: SoakSettings, rng: random.Random) -> None:
        self.api = api
        self.rng = rng
        self.settings = settings
        self.nodes = [f"n{i}" for i in range(settings.nodes)]
        self.apps = [f"app{i}" for i in range(max(1, settings.pods // 20))]
        self.budgets: dict[str, int] = {}
        self.serial = 0

    def pod(self, app: str, node_name: str, old: bool) -> dict[str, Any]:
        self.serial += 1
        age = timedelta(hours=3) if old else timedelta(minutes=5)
        return pod(f"{app}-{self.serial}", node=node_name, labels={"app": app}, metadata={
            "creationTimestamp": _stamp(datetime.now(UTC) - age),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": f"{app}-rs", "uid": f"uid-rs-{app}",
                                 "controller": True}]})

    def populate(self) -> Evictions:
        api = self.api
        api.serve(*(r.kind for r in RESOURCES))
        api.add_now("Node", *(node(n, cpu="64", memory="256Gi") for n in self.nodes))
        pods = []
        for i in range(self.settings.pods):
            app = self.apps[i % len(self.apps)]
            # Crowded: an app's replicas sit on a few nodes (RemoveDuplicates has work).
            home = self.nodes[(hash(app) + i % 3) % len(self.nodes)]
            pods.append(self.pod(app, home, old=self.rng.random() < 0.2))
        api.add_now("Pod", *pods)
        for app in self.apps:
            self.budgets[app] = self.rng.choice((0, 1, 2))
            api.add_now("PodDisruptionBudget", pdb(app, self.budgets[app], {"app": app}))
        return Evictions(api).install()

    async def churn(self, result: SoakResult) -> None:
        api, rng = self.api, self.rng
        steps = 0
        while True:
            await asyncio.sleep(self.settings.churn_every)
            steps += 1
            pods = api.kinds["Pod"].objects
            action = rng.random()
            app = rng.choice(self.apps)
            # The cluster keeps its size (scale-ups as many as scale-downs and evictions), so
            # what grows over a long soak is desched's, not the cluster's.
            if action < 0.7 and len(pods) < self.settings.pods:  # a scale-up, a new rollout
                await api.add("Pod", self.pod(app, rng.choice(self.nodes),
                                              old=rng.random() < 0.1))
            elif action < 0.7 and pods:  # a pod goes away (scale-down, completion)
                ns, _, name = rng.choice(list(pods)).partition("/")
                app = pods[f"{ns}/{name}"]["metadata"]["labels"]["app"]
                await api.delete("Pod", name, ns)
            elif pods:  # rescheduled: gone here, its replacement elsewhere
                key = rng.choice(list(pods))
                app = pods[key]["metadata"]["labels"]["app"]
                ns, _, name = key.partition("/")
                await api.delete("Pod", name, ns)
                await api.add("Pod", self.pod(app, rng.choice(self.nodes), old=False))
            result.churned += 1
            if steps % 10 == 0:  # node status updates
                name = rng.choice(self.nodes)
                await api.modify("Node", {**node(name, cpu="64", memory="256Gi"),
                                          "metadata": {"name": name, "annotations": {
                                              "soak/heartbeat": str(steps)}}})
            # The disruption controller recomputes the budget of the workload that changed.
            await api.modify("PodDisruptionBudget", pdb(app, self.budgets[app], {"app": app}))


class Faults:
    def __init__(self, api: FakeApiServer, evictions: Evictions, rng: random.Random,
                 result: SoakResult, stream_gap: float) -> None:
        self.api = api
        self.evictions = evictions
        self.rng = rng
        self.result = result
        self.elector: FlakyElector | None = None
        self.lose_at: int | None = None  # lose the Lease at this eviction request
        self.streams_ended = 0.0
        self.armed_at = 0.0
        self.next_loss = 2  # cycles before the first lost Lease
        self.stream_gap = stream_gap  # least seconds between faults that end the streams
        evictions.on_request = self._on_eviction

    def _on_eviction(self, body: dict[str, Any]) -> None:
        self.result.eviction_requests += 1
        if (self.lose_at is not None and self.elector is not None
                and self.result.eviction_requests >= self.lose_at):
            self.lose_at = None
            self.elector.lost.set()  # mid-cycle: the cycle is evicting right now

    async def inject(self, every: float) -> None:
        api, rng = self.api, self.rng
        kinds = ("Pod", "Node", "PodDisruptionBudget")
        order = list(FAULTS)
        rng.shuffle(order)
        step = 0
        while True:
            await asyncio.sleep(every)
            # In turn, so a short run sees every kind; one that has to wait (see below) is
            # tried again rather than skipped.
            fault = order[step % len(order)]
            kind = rng.choice(kinds)
            if fault.startswith(("list", "watch")) and any(f.times > 0 for f in api.faults):
                # One armed at a time: faster than the informers' backoff they would pile up
                # into an outage (which the stale-cache test covers). One nobody asked for in
                # a while (its kind had nothing to list again) is withdrawn.
                if time.monotonic() - self.armed_at < 5.0:
                    continue
                api.faults.clear()
            streams = fault.startswith(("watch", "list")) or fault.endswith("streams")
            if streams:
                now = time.monotonic()
                if now - self.streams_ended < self.stream_gap:
                    continue  # a server cutting every stream each second is down, not flaky
                self.streams_ended = now
            if streams:
                self.armed_at = time.monotonic()
            if fault == "list 5xx":
                # History compacted past every version and the streams ended: the kind must
                # list again, and its first list fails.
                api.fail("list", kind, rng.choice((500, 503)))
                api.compact(kind)
                api.kinds[kind].floor = api.rv + 1
                await api.end_watches()
            elif fault.startswith("watch"):
                # The streams end; the kind's next watch request gets the error.
                code = {"watch 5xx": 500, "watch 410": 410}.get(fault, 429)
                retry = 1 if fault.endswith("Retry-After") else None
                api.fail("watch", kind, code, retry_after=retry)
                await api.end_watches()
            elif fault in ("dropped streams", "ended streams"):
                await api.end_watches(abort=fault == "dropped streams")
            elif fault == "eviction 5xx":
                self.evictions.script.append((rng.choice((500, 503)), "injected"))
            elif fault == "eviction 429":
                self.evictions.script.append((429, "throttled"))
            elif fault == "eviction 429 Retry-After":
                self.evictions.script.append((429, "throttled", 1))
            elif fault == "eviction timeout":
                self.evictions.script.append(("hang", 0.3))  # carried out, answered late
            elif fault == "slow evictions":
                self.evictions.delay = 0.0 if self.evictions.delay else 0.02
            elif fault == "lease lost mid-cycle":
                # Rarer than the others (each costs a runner's restart): at most one in five
                # cycles.
                if self.lose_at is not None or len(self.result.reports) < self.next_loss:
                    step += 1  # not waited for: it would hold every other fault back
                    continue
                self.next_loss = len(self.result.reports) + 5
                self.lose_at = self.result.eviction_requests + rng.randint(1, 5)
            self.result.faults[fault] += 1
            step += 1


async def _fetch_pages(http: aiohttp.ClientSession, port: int,
                       cycle: int) -> tuple[int, int, int, int]:
    """The process's /cycles and /cycles.json, as an operator's browser and tools fetch them."""
    url = f"http://127.0.0.1:{port}"
    async with http.get(f"{url}/cycles") as page:
        await page.read()
    async with http.get(f"{url}/cycles.json") as data:
        cycles = (await data.json())["cycles"] if data.status == 200 else []
    return page.status, data.status, cycles[0]["cycle"] if cycles else 0, cycle


def _rss(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def run_soak(tmp_path: Path, emulator: Emulator, api: FakeApiServer, kubeconfig: str,
                   settings: SoakSettings) -> SoakResult:
    result = SoakResult()
    cluster, faults, policy = _setup(tmp_path, api, settings, result)
    baseline_tasks = len(asyncio.all_tasks())
    baseline_fds = _fds()
    started = time.monotonic()
    background = _background(cluster, faults, emulator, api, settings, result, result)
    try:
        def done() -> bool:
            if time.monotonic() - started > settings.max_seconds:
                return True
            return len(result.reports) >= settings.cycles and all(
                result.faults[f] >= settings.each_fault for f in FAULTS)

        while not done():
            config = RunConfig(
                str(policy), kubeconfig=kubeconfig, interval=settings.interval,
                leader_elect=True, lease_duration="15s", renew_deadline="10s",
                retry_period="2s", kinds=KINDS, signals=False, connect_backoff=(0.01, 0.1),
                eviction_backoff=(0.01, 0.05), eviction_timeout=0.2, eviction_attempts=3,
                stale_cache_timeout=1.0)
            elector = FlakyElector()
            faults.elector = elector
            plan, schedule = prepare(config)
            runner = Runner(config, plan, schedule,
                            elector_factory=lambda *_, e=elector: e)
            cycle = runner.run_cycle

            async def recorded(number: int, cause: Cause = SCHEDULED,
                               cycle: Any = cycle) -> CycleReport:
                report: CycleReport = await cycle(number, cause)
                result.reports.append(report)
                result.rss.append(_rss())
                return report

            runner.run_cycle = recorded  # type: ignore[method-assign]
            task = asyncio.create_task(runner.run())
            while not task.done() and not done():
                await asyncio.sleep(0.02)
            runner.request_stop("soak done")
            result.exit_codes.append(await asyncio.wait_for(task, COMMAND_WAIT))
    finally:
        await _stop(background)
    result.seconds = time.monotonic() - started
    # Closed connections' callbacks end their tasks on this loop: waited for (bounded, for a
    # loaded machine), not given a guessed time; what is left then is counted.
    deadline = time.monotonic() + 30
    while len(asyncio.all_tasks()) > baseline_tasks and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    result.tasks_left = len(asyncio.all_tasks()) - baseline_tasks
    result.fds_grown = _fds() - baseline_fds
    result.pod_deletes += _pod_deletes(emulator)
    return result


def _setup(tmp_path: Path, api: FakeApiServer, settings: SoakSettings,
           shared: SoakResult) -> tuple[Cluster, Faults, Path]:
    """The cluster in the emulator, the faults to inject, and the policy file."""
    rng = random.Random(settings.seed)
    cluster = Cluster(api, settings, rng)
    faults = Faults(api, cluster.populate(), rng, shared, settings.stream_gap)
    policy = tmp_path / "soak-policy.yaml"
    policy.write_text(POLICY)
    return cluster, faults, policy


def _background(cluster: Cluster, faults: Faults, emulator: Emulator, api: FakeApiServer,
                settings: SoakSettings, shared: SoakResult,
                tally: SoakResult | ProcessSoakResult) -> list[asyncio.Task[None]]:
    """Churn, faults, and the audit that tallies pod DELETEs into `tally`."""
    return [asyncio.create_task(cluster.churn(shared), name="soak churn"),
            asyncio.create_task(faults.inject(settings.fault_every), name="soak faults"),
            asyncio.create_task(_audit(emulator, api, tally), name="soak audit")]


async def _stop(background: list[asyncio.Task[None]]) -> None:
    for job in background:
        job.cancel()
    await asyncio.gather(*background, return_exceptions=True)


async def _audit(emulator: Emulator, api: FakeApiServer,
                 result: SoakResult | ProcessSoakResult) -> None:
    # The emulator's request logs (its own and each reaction's) would grow the process for the
    # whole soak (and be counted as desched's memory): tallied and dropped as it goes.
    while True:
        await asyncio.sleep(0.25)
        result.pod_deletes += _pod_deletes(emulator)
        api.forget_requests()
        api.log.clear()
        for kind in ("Pod", "Node", "PodDisruptionBudget"):
            api.trim(kind, keep=2_000)


def _pod_deletes(emulator: Emulator) -> int:
    return sum(1 for r in emulator._requests if r.method.value == "DELETE"
               and "/pods/" in str(r.url) and "/eviction" not in str(r.url))


@dataclass
class ProcessSoakResult:
    """What a `desched run` process did under the soak, read from its JSON log lines."""

    rss: list[int] = field(default_factory=list)  # the process's, bytes, after each cycle
    cycles: list[str] = field(default_factory=list)  # each cycle's result
    evicted: list[list[tuple[str, str]]] = field(default_factory=list)  # (pod, node) a cycle
    faults: Counter[str] = field(default_factory=Counter)
    eviction_requests: int = 0
    pod_deletes: int = 0
    exit_code: int | None = None
    errors: list[str] = field(default_factory=list)  # error-level log lines
    seconds: float = 0.0
    # /cycles and /cycles.json fetched after each cycle: (HTML status, JSON status, the newest
    # cycle the JSON holds, the cycle the log had just finished).
    pages: list[tuple[int, int, int, int]] = field(default_factory=list)


async def run_process_soak(tmp_path: Path, emulator: Emulator, api: FakeApiServer,
                           kubeconfig: str, settings: SoakSettings) -> ProcessSoakResult:
    """The same cluster, churn and faults (but a lost Lease, which needs a runner the harness
    can take it from) against the real command in its own process: its resident memory is
    desched's alone, not the emulator's or the harness's."""
    shared = SoakResult()
    cluster, faults, policy = _setup(tmp_path, api, settings, shared)
    result = ProcessSoakResult()
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "desched", "run", "--policy", str(policy),
        "--kubeconfig", kubeconfig, "--interval", settings.interval,
        "--stale-cache-timeout", "1s", "--log-format", "json",
        "--metrics-address", "127.0.0.1:0",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=command_env(),
        limit=2**20)
    background = _background(cluster, faults, emulator, api, settings, shared, result)
    this_cycle: list[tuple[str, str]] = []
    port = 0
    http = aiohttp.ClientSession(trust_env=False)
    try:
        assert proc.stderr is not None
        wanted = set(FAULTS) - {"lease lost mid-cycle"}

        def done() -> bool:
            return (result.cycles.count("completed") >= settings.cycles
                    and all(shared.faults[f] >= settings.each_fault for f in wanted))

        while not done():
            remaining = settings.max_seconds - (time.monotonic() - started)
            if remaining <= 0:
                break
            try:
                line = await asyncio.wait_for(proc.stderr.readline(), remaining)
            except TimeoutError:
                break
            if not line:  # the process ended on its own
                break
            if not line.startswith(b"{"):
                result.errors.append(line.decode(errors="replace").rstrip())
                continue
            entry = json.loads(line)
            event = entry.get("event", "")
            if entry.get("level") in ("error", "critical") and event != "Error evicting pod":
                # Evictions refused or failed are expected (budgets, injected faults).
                result.errors.append(event)
            if event == "listening":
                port = int(entry["address"].rpartition(":")[2])
            elif event == "Evicted pod":
                this_cycle.append((entry["pod"], entry["node"]))
            elif event == "descheduling cycle finished":
                result.rss.append(_rss(proc.pid))
                result.cycles.append(entry["result"])
                result.evicted.append(this_cycle)
                this_cycle = []
                result.pages.append(await _fetch_pages(http, port, entry["cycle"]))
            elif event.startswith("descheduling cycle skipped"):
                result.rss.append(_rss(proc.pid))
                result.cycles.append("stale")
                result.pages.append(await _fetch_pages(http, port, entry["cycle"]))
    finally:
        await http.close()
        await _stop(background)
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.communicate(), COMMAND_WAIT)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    result.exit_code = proc.returncode
    result.faults = shared.faults
    result.eviction_requests = shared.eviction_requests
    result.pod_deletes += _pod_deletes(emulator)
    result.seconds = time.monotonic() - started
    return result
