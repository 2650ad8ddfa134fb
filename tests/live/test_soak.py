"""The fault-injection soak (tests/live/soak.py) and its invariants. The suite runs a short one;
`DESCHED_SOAK=1` runs the long one docs/reliability.md reports (sizes from DESCHED_SOAK_PODS,
DESCHED_SOAK_NODES and DESCHED_SOAK_CYCLES)."""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections import Counter
from pathlib import Path

import pytest
from fake_apiserver import Emulator, FakeApiServer
from soak import (
    FAULTS,
    PER_NODE,
    TOTAL,
    SoakResult,
    SoakSettings,
    run_process_soak,
    run_soak,
)
from test_leader import FakeLeases
from test_run import OLD, cluster, config, kubeconfig, owned, runner_for, until

from desched.live.client import ApiClient
from desched.live.leader import LeaseElector
from desched.live.run import Elector, RunConfig, Runner, default_elector_factory

LONG = bool(os.environ.get("DESCHED_SOAK"))
LEASE = 5  # seconds: the Lease duration of the partition test's replicas

# The long soak stops itself after DESCHED_SOAK_SECONDS (default 1800).
pytestmark = [pytest.mark.asyncio, pytest.mark.soak,
              pytest.mark.timeout(0 if LONG else 420)]


def settings() -> SoakSettings:
    if not LONG:
        return SoakSettings(nodes=20, pods=300, cycles=10, seed=7, fault_every=0.1,
                            churn_every=0.05)
    return SoakSettings(nodes=int(os.environ.get("DESCHED_SOAK_NODES", "1000")),
                        pods=int(os.environ.get("DESCHED_SOAK_PODS", "30000")),
                        cycles=int(os.environ.get("DESCHED_SOAK_CYCLES", "60")),
                        seed=int(os.environ.get("DESCHED_SOAK_SEED", "1")),
                        interval="1s", fault_every=0.05, churn_every=0.01,
                        max_seconds=float(os.environ.get("DESCHED_SOAK_SECONDS", "1800")))


def check(result: SoakResult, cycles: int) -> None:
    reports = result.reports
    assert len(reports) >= cycles
    # No crash: a runner ends only when told to (0) or when its Lease was lost (1).
    assert set(result.exit_codes) <= {0, 1}
    assert result.exit_codes.count(1) <= result.faults["lease lost mid-cycle"]
    assert not [r for r in reports if r.result == "failed"]
    evicted = [d for r in reports for d in r.log.decisions if d.outcome == "evicted"]
    # No pod evicted twice, across cycles and runners.
    twice = [k for k, n in Counter(f"{d.namespace}/{d.pod}" for d in evicted).items() if n > 1]
    assert twice == []
    # Never beyond the limits, in any cycle.
    for report in reports:
        done = [d for d in report.log.decisions if d.outcome == "evicted"]
        assert len(done) <= TOTAL
        assert max(Counter(d.node for d in done).values(), default=0) <= PER_NODE
    # Never around a PodDisruptionBudget: evictions only (the server enforces budgets there),
    # never a pod DELETE.
    assert result.pod_deletes == 0
    assert result.eviction_requests > 0
    # Nothing left behind: tasks, connections.
    assert result.tasks_left <= 0, result.tasks_left
    assert result.fds_grown <= 2, result.fds_grown


async def test_soak_with_fault_injection(tmp_path: Path, emulator: Emulator,
                                         api: FakeApiServer) -> None:
    wanted = settings()
    kube = kubeconfig(tmp_path, str(emulator.url).rstrip("/"))
    result = await run_soak(tmp_path, emulator, api, kube, wanted)
    check(result, wanted.cycles)
    assert set(result.faults) == set(FAULTS)  # every kind of fault happened
    # Resident memory is checked by the process soak below: this process also holds the
    # emulator and the harness.
    evicted = sum(1 for r in result.reports for d in r.log.decisions if d.outcome == "evicted")
    print(f"\nsoak: {len(result.reports)} cycles in {result.seconds:.1f}s, "
          f"{result.eviction_requests} eviction requests, {evicted} evictions, "
          f"{result.churned} churn steps, runners {result.exit_codes}, "
          f"results {dict(Counter(r.result for r in result.reports))}, "
          f"rss {result.rss[9] >> 20 if len(result.rss) > 9 else 0}->{result.rss[-1] >> 20} MiB, "
          f"faults {dict(sorted(result.faults.items()))}")


async def test_soak_of_the_desched_run_process(tmp_path: Path, emulator: Emulator,
                                              api: FakeApiServer) -> None:
    """The command itself in its own process under the same churn and faults, its /cycles page
    fetched after every cycle: the safety checks from its log, and its resident memory, which
    is desched's alone."""
    wanted = settings()
    # The command reconnects with its real backoff (1 s, doubling): streams cut more often than
    # that keep its cache stale and every cycle skipped.
    wanted.stream_gap = 3.0 if LONG else 2.0
    kube = kubeconfig(tmp_path, str(emulator.url).rstrip("/"))
    result = await run_process_soak(tmp_path, emulator, api, kube, wanted)
    assert result.cycles.count("completed") >= wanted.cycles, (result.cycles,
                                                               result.errors[-5:])
    assert result.exit_code == 0  # stopped by SIGTERM, as Kubernetes stops a pod
    assert "failed" not in result.cycles
    assert result.errors == []
    evicted = [pod for cycle in result.evicted for pod, _ in cycle]
    assert evicted, "nothing was evicted: the soak exercised nothing"
    assert [pod for pod, n in Counter(evicted).items() if n > 1] == []
    for cycle in result.evicted:
        assert len(cycle) <= TOTAL
        assert max(Counter(node for _, node in cycle).values(), default=0) <= PER_NODE
    assert result.pod_deletes == 0
    assert set(result.faults) == set(FAULTS) - {"lease lost mid-cycle"}
    # The /cycles page served and fetched after every cycle, holding that cycle first.
    assert len(result.pages) == len(result.cycles)
    assert all(html == data == 200 and newest >= cycle
               for html, data, newest, cycle in result.pages), result.pages
    rss = [round(r / 2**20, 1) for r in result.rss]
    if len(rss) >= 30:
        # Resident memory flat: under 5 % growth from the tenth cycle to the last.
        assert rss[-1] <= rss[9] * 1.05, f"RSS (MiB) after each cycle: {rss}"
    print(f"\nprocess soak: {len(result.cycles)} cycles in {result.seconds:.1f}s, "
          f"{result.eviction_requests} eviction requests, {len(evicted)} evictions, "
          f"results {dict(Counter(result.cycles))}, rss (MiB) every 10 cycles "
          f"{rss[::10] + rss[-1:]}, faults {dict(sorted(result.faults.items()))}")


async def test_two_replicas_under_a_partition_never_evict_at_once(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    """Both replicas run with leader election; the leader is cut off from the Lease API. It
    stops evicting within its renew deadline, the other takes over once the Lease expires, and
    no eviction of one falls between evictions of the other.

    The electors run on the real clock, as in production, so their durations are ones a loaded
    machine keeps: a renewal every 250 ms need only succeed within 3 s (0.5 s once was missed,
    and the new leader stepped down on its own), and 2 s lie between the old leader's last
    eviction check and the earliest take-over."""
    leases = FakeLeases(emulator)
    evictions = cluster(api, old=0)

    def registered(client: ApiClient, cfg: RunConfig, identity: str) -> Elector:
        elector = default_elector_factory(client, cfg, identity)
        assert isinstance(elector, LeaseElector)
        leases.electors[identity] = elector  # the server then checks every hand-over
        return elector

    runners: dict[str, Runner] = {}
    for token in ("replica-a", "replica-b"):
        kube = tmp_path / f"kubeconfig-{token}"
        kube.write_text(Path(kubeconfig(tmp_path, str(emulator.url).rstrip("/")))
                        .read_text().replace("t0ken", token))
        runners[token] = runner_for(config(
            tmp_path, emulator, interval="50ms", leader_elect=True,
            lease_duration=f"{LEASE}s", renew_deadline="3s", retry_period="250ms",
            lease_namespace="kube-system", kubeconfig=str(kube)), elector_factory=registered)

    async def old_pods() -> None:  # something to evict all the time
        for i in itertools.count():
            await api.add("Pod", owned(f"aged-{i}", f"n{i % 2 + 1}", OLD))
            await asyncio.sleep(0.03)

    feeder = asyncio.create_task(old_pods())
    tasks = {token: asyncio.create_task(r.run()) for token, r in runners.items()}
    try:
        await until(lambda: len(evictions.callers) >= 5)
        leader = evictions.callers[-1][1]
        other = next(t for t in runners if t != leader)
        cut = time.monotonic()
        holder = next(iter(leases.objects.values()))["spec"]["holderIdentity"]
        leases.partitioned[leader] = 503
        assert await asyncio.wait_for(tasks[leader], 30) == 1  # it knew it lost the lease
        await until(lambda: evictions.callers[-1][1] == other)
        first = next(at for at, token in evictions.callers if token == other)
        taken = first - cut
        # Progress only (not timed): generous for a machine busy with the rest of the suite.
        await until(lambda: sum(1 for _, t in evictions.callers if t == other) >= 5)
    finally:
        feeder.cancel()
        for runner in runners.values():
            runner.request_stop("test")
        await asyncio.gather(*tasks.values(), feeder, return_exceptions=True)
    order = [token for _, token in sorted(evictions.callers)]
    switches = sum(1 for a, b in itertools.pairwise(order) if a != b)
    assert switches == 1 and order[0] == leader, order
    # Ordered on the server, not timed: the old leader's last eviction arrived before the other
    # took the Lease, when the old leader no longer thought itself leader, and the server
    # stored the take-over only once the renewTime the old leader last wrote was a Lease
    # duration old. (Not the new leader's own stamp: it is read before the Lease is, so it
    # may be earlier than the moment the Lease was judged expired by as long as that read.)
    assert leases.violations == []
    last = max(at for at, token in evictions.callers if token == leader)
    took_at, _, _, took_wall = next(w for w in leases.history
                                    if w[1] == runners[other].identity)
    assert last < took_at, (last, took_at)
    renewed = [stamp for _, h, stamp, _ in leases.history if h == holder and stamp is not None]
    assert renewed
    # 1 ms: the wall clock the stamps come from may be slewed against the monotonic clock
    # the lease's age is also judged by.
    assert (took_wall - renewed[-1]).total_seconds() >= LEASE - 0.001, (took_wall, renewed[-1])
    assert first > took_at
    assert taken < 30.0, taken  # progress, as generous as the waits above
    print(f"\nhand-over: first eviction by the new leader {taken:.2f}s after the partition")
