"""`desched run`'s /cycles and /cycles.json (live/cycles_page.py) against kmock: the kept cycles
newest first as the simulate report renders them, built by Debian's chromium from the served
page (its Content-Security-Policy on), the JSON matching what the cycles logged; live-only facts
(eviction requests, retries, API errors, skipped cycles and why, dry runs); a standby's page
naming the leader; read-only routes; the flag that turns the page off; the kept size capped."""

from __future__ import annotations

import asyncio
import gc
import html
import itertools
import json
import re
import shutil
import signal
import sys
import tracemalloc
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fake_apiserver import Emulator, FakeApiServer
from soak import FlakyElector
from test_leader import FakeLeases
from test_run import (
    OLD,
    POLICY,
    background,
    cluster,
    command_env,
    config,
    kubeconfig,
    owned,
    runner_for,
    until,
)

from desched.framework.decisions import DecisionLog
from desched.framework.policy import Policy
from desched.live.cycle_facts import (
    KEPT_CYCLES,
    MAX_API_ERRORS,
    MAX_DECISIONS,
    MAX_KEPT,
    MAX_NOTES,
    CompactFrame,
    CycleFacts,
    CycleReport,
)
from desched.live.cycles_page import PageState, render_html, render_json
from desched.live.run import LEASE_LOST, Runner
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import load_policy
from desched.simulate.frames import SERIES, Frame
from desched.snapshot.cluster import ClusterSnapshot

pytestmark = pytest.mark.asyncio

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# No "/" (it is part of the eviction's URL path), everything else a page must not trust.
HOSTILE = "evil-<script>alert(1)<img src=x onerror=alert(2)>\"'&"
# One eviction a cycle: the old pods go one by one, the others are refused by the limit.
LIMITED = POLICY.format(notify="false") + "maxNoOfPodsToEvictTotal: 1\n"


async def fetch(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], str]:
    async with aiohttp.ClientSession(trust_env=False) as session, \
            session.request(method, f"http://127.0.0.1:{port}{path}") as response:
        return response.status, dict(response.headers), await response.text()


async def browse(url: str, profile: Path, *args: str) -> str:
    """Chromium loads the page over HTTP (the test's loop serves it meanwhile)."""
    assert CHROMIUM, "chromium is not installed: scripts/test installs Debian's package"
    proc = await asyncio.create_subprocess_exec(
        CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-2000:]
    return out.decode()


def write_policy(tmp_path: Path, text: str = LIMITED) -> str:
    path = tmp_path / "limited.yaml"
    path.write_text(text)
    return str(path)


async def hostile_pods(api: FakeApiServer, keep: int = 4) -> None:
    """Old pods with a hostile name, `keep` of them on the server at all times: every cycle has
    one to evict (the limit is one) and others the limit refuses, however many cycles ran."""
    serials = itertools.count()
    while True:
        while sum(1 for key in api.kinds["Pod"].objects
                  if key.startswith(f"default/{HOSTILE}")) < keep:
            await api.add("Pod", owned(f"{HOSTILE}{next(serials)}", "n1", OLD, app="evil"))
        await asyncio.sleep(0.05)


async def read_log(stream: asyncio.StreamReader, lines: list[dict[str, Any]]) -> None:
    """The command's JSON log lines as they come, until it closes its stderr."""
    while line := await stream.readline():
        if line.startswith(b"{"):
            lines.append(json.loads(line))


def ended(lines: list[dict[str, Any]]) -> set[int]:
    """The cycles the log told as over, run or skipped: each is kept on the page."""
    return {e["cycle"] for e in lines if e["event"] == "descheduling cycle finished"
            or e["event"].startswith("descheduling cycle skipped")}


def kept_window(newest: int) -> list[int]:
    """The cycles a page whose newest is `newest` holds, newest first: every cycle is kept,
    run or skipped, and only the last KEPT_CYCLES of them."""
    return list(range(newest, max(0, newest - KEPT_CYCLES), -1))


# The log's line for each decision a kept cycle holds, and the outcome it stands for.
DECISION_LINES = {"Evicted pod": "evicted", "Eviction refused by a limit": "limited"}


# -- the command, its page in chromium, its JSON against its log ------------------------------


@pytest.mark.browser
async def test_the_command_serves_its_cycles_as_its_log_tells_them(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    """Cycles go on every second while chromium loads the page, however long that takes, so
    the page and the JSON are judged against the cycles the log tells, not against a number
    of cycles assumed to have run by then."""
    cluster(api, old=0)
    feeder = asyncio.create_task(hostile_pods(api))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "desched", "run", "--policy", write_policy(tmp_path),
        "--kubeconfig", kubeconfig(tmp_path, str(emulator.url).rstrip("/")),
        "--interval", "1s", "--log-format", "json", "--metrics-address", "127.0.0.1:0",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=command_env())
    assert proc.stderr is not None
    lines: list[dict[str, Any]] = []
    reader = asyncio.create_task(read_log(proc.stderr, lines))
    try:
        await until(lambda: reader.done() or len(ended(lines)) >= 3, timeout=120)
        assert not reader.done(), "the command ended"
        told = max(ended(lines))  # before the page was read: it holds this cycle at least
        [port] = [int(e["address"].rpartition(":")[2]) for e in lines
                  if e["event"] == "listening"]
        url = f"http://127.0.0.1:{port}/cycles"
        dom = await browse(url, tmp_path / "profile", "--virtual-time-budget=5000",
                           "--dump-dom")
        shot = tmp_path / "cycles.png"
        await browse(url, tmp_path / "profile", "--window-size=1200,1400",
                     f"--screenshot={shot}")
        status, headers, text = await fetch(port, "/cycles.json")
        assert status == 200 and headers["Content-Type"].startswith("application/json")
        body = json.loads(text)
    finally:
        feeder.cancel()
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 30)
        await asyncio.wait_for(reader, 30)
    assert proc.returncode == 0
    logged: dict[int, list[tuple[str, str]]] = defaultdict(list)
    decided: dict[int, Counter[str]] = defaultdict(Counter)
    for e in lines:
        if e["event"] == "Evicted pod":
            logged[e["cycle"]].append((e["pod"], e["node"]))
        if e["event"] in DECISION_LINES:
            decided[e["cycle"]][DECISION_LINES[e["event"]]] += 1
        elif e["event"] == "Error evicting pod":
            decided[e["cycle"]][e["outcome"]] += 1

    # The JSON: the kept cycles newest first, each the simulate shape plus its live facts, and
    # its evictions and refusals those its log lines told.
    cycles = body["cycles"]
    numbers = [c["cycle"] for c in cycles]
    assert numbers[0] >= told and numbers == kept_window(numbers[0]), (told, numbers)
    assert set(numbers) <= ended(lines)
    for c in cycles:
        assert {"evictions", "refusals", "kept", "notes", "balance", "churn",
                "cyclesSkipped"} <= set(c)
        assert [(f"{e['namespace']}/{e['pod']}", e["node"]) for e in c["evictions"]] == \
            logged.get(c["cycle"], []), c["cycle"]
        assert c["live"]["mode"] == "live"
        assert c["live"]["evictionRequests"]["sent"] >= len(c["evictions"])
        assert c["live"]["evictionRequests"]["outcomes"] == decided[c["cycle"]], c["cycle"]
        assert [b["cycle"] for b in c["balance"]] == [c["cycle"]] * len(c["balance"])
    assert any(e["pod"].startswith(HOSTILE) for c in cycles for e in c["evictions"])
    assert any(c["live"]["evictionRequests"]["outcomes"].get("limited", 0) >= 1
               for c in cycles)
    assert body["instance"]["leaderElection"]["enabled"] is False
    kept = body["instance"]["kept"]
    assert (kept["cycles"], kept["max"]) == (len(cycles), KEPT_CYCLES)

    # The page, built by the browser under its Content-Security-Policy: the script ran (it
    # only runs if its hash is the one the header allows), tables and plots are there.
    assert 'data-ready="1"' in dom, "the page's script did not run"
    shown_cycles = [int(n) for n in re.findall(r'<section class="cycle" id="cycle-(\d+)"', dom)]
    assert shown_cycles[0] >= told and shown_cycles == kept_window(shown_cycles[0])
    assert len(shown_cycles) >= 3
    for n in shown_cycles:  # each cycle's evictions table holds what its log lines told
        table = dom[dom.index(f'id="c{n}-evictions"'):dom.index(f'id="c{n}-refusals"')]
        for pod, node_name in logged[n]:
            shown = html.escape(pod, quote=False)  # as the DOM serialises a text node
            assert f'<tr><td class="n">{n}</td><td>{shown}</td><td>{node_name}</td>' in table
        assert f"{len(logged[n])} row(s)" in table
    assert any(logged[n] for n in shown_cycles)
    assert dom.count("<svg") >= 3 * 2  # three series per cycle's report, two reports at least
    # A live cycle's report says nothing a live run does not know: where replacements went.
    assert "--reschedule" not in dom and "replacements placed" not in dom
    assert "where the scheduler put them shows in the next cycle's before" in dom
    # The hostile name is text wherever it shows: no element came out of it.
    assert "evil-&lt;script&gt;alert(1)&lt;img src=x onerror=alert(2)&gt;" in dom
    assert "<img" not in dom and dom.count("<script") == 2
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


# -- live facts: retries, API errors, dry runs, skipped cycles -------------------------------


async def cycles_json(runner: Runner) -> dict[str, Any]:
    [server] = runner.servers
    status, _, text = await fetch(server.port, "/cycles.json")
    assert status == 200
    body: dict[str, Any] = json.loads(text)
    return body


async def first_cycle(runner: Runner) -> tuple[dict[str, Any], str]:
    """Run until the first cycle is kept: /cycles.json and /cycles then."""
    async with background(runner):
        await until(lambda: len(runner.reports) == 1)
        body = await cycles_json(runner)
        _, _, page = await fetch(runner.servers[0].port, "/cycles")
    return body, page


async def test_retries_and_api_errors_then_a_dry_run(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    evictions = cluster(api)
    # The first eviction request answers 503 (retried, then carried out), a timeout on the
    # second (carried out, answered too late: read back, not sent again).
    # The timeout leaves the other requests, answered at once, ample time on a loaded machine
    # (at 0.1 s one was once timed out too).
    evictions.script += [(503, "etcd is away"), ("hang", 2.0)]
    body, page = await first_cycle(runner_for(config(
        tmp_path, emulator, interval="1h", eviction_timeout=0.5, metrics_address="127.0.0.1:0")))
    [cycle] = body["cycles"]
    live = cycle["live"]
    assert live["mode"] == "live" and live["result"] == "completed"
    requests = live["evictionRequests"]
    # old-1: 503 then evicted; old-2: a timeout then read back as gone; db-0: refused by its
    # budget (a refusal, among the refusals, not an API error).
    assert (requests["sent"], requests["retries"]) == (4, 1)
    assert requests["outcomes"] == {"evicted": 2, "pdb-blocked": 1}
    errors = live["apiErrors"]["first"]
    assert live["apiErrors"]["count"] == 2 == len(errors)
    assert any("attempt 1: cannot evict pod default/old-" in e and "503" in e
               and "etcd is away" in e for e in errors), errors
    assert not any("db-0" in e for e in errors)
    assert [r["pod"] for r in cycle["refusals"]] == ["db-0"]
    assert "2 API error(s) on eviction requests:" in page and "etcd is away" in page
    assert "4 eviction request(s) sent, 1 of them retries" in page
    assert "dry run" not in page.lower()

    cluster(api)  # the same pods again: the live run evicted two of them
    body, page = await first_cycle(runner_for(config(
        tmp_path, emulator, interval="1h", dry_run=True, metrics_address="127.0.0.1:0")))
    [cycle] = body["cycles"]
    assert body["instance"]["dryRun"] is True
    assert cycle["live"]["mode"] == "dry run"
    assert cycle["live"]["evictionRequests"]["sent"] == 0
    assert sorted(e["pod"] for e in cycle["evictions"]) == ["old-1", "old-2"]
    assert '<span class="dry">dry run</span>' in page
    assert "<b>Dry run</b>: nothing was evicted" in page


async def test_skipped_cycles_say_why(tmp_path: Path, emulator: Emulator,
                                      api: FakeApiServer) -> None:
    cluster(api)
    await api.delete("Node", "n2")  # one Ready node: upstream skips the cycle
    runner = runner_for(config(tmp_path, emulator, interval="50ms", dry_run=True,
                               stale_cache_timeout=0.2, metrics_address="127.0.0.1:0"))
    async with background(runner):
        await until(lambda: len(runner.reports) >= 1)
        # The pods' watch breaks for longer than the bound: the next cycle is skipped.
        api.fail("watch", "Pod", 500, times=10**6)
        await api.end_watches(abort=True)
        await until(lambda: any(r.result == "stale" for r in runner.reports))
        body = await cycles_json(runner)
        [server] = runner.servers
        _, _, page = await fetch(server.port, "/cycles")
        api.faults.clear()
    by_result = {c["live"]["result"]: c for c in body["cycles"]}
    skipped = by_result["skipped"]
    assert skipped["live"]["why"] == "Skipping descheduling cycle: requires >=2 nodes"
    assert skipped["cyclesSkipped"] == [{"cycle": skipped["cycle"],
                                         "reason": skipped["live"]["why"]}]
    stale = by_result["stale"]
    assert stale["live"]["why"].startswith("the cluster cache is not current: ")
    assert re.search(r"\bpods for \d", stale["live"]["why"])
    assert stale["cyclesSkipped"][0]["reason"] == stale["live"]["why"]
    assert "<b>stale</b>: the cluster cache is not current: " in page
    assert "<b>skipped</b>: Skipping descheduling cycle: requires &gt;=2 nodes" in page


async def test_a_lost_lease_stops_the_cycle_and_says_so(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    evictions = cluster(api)
    elector = FlakyElector()
    evictions.on_request = lambda _: elector.lost.set()  # lost during the first eviction
    runner = runner_for(config(tmp_path, emulator, interval="1h", leader_elect=True,
                               lease_namespace="kube-system", metrics_address="127.0.0.1:0"),
                        elector_factory=lambda *_: elector)
    assert await asyncio.wait_for(runner.run(), 20) == 1
    [report] = runner.reports
    assert report.result == "interrupted"
    assert runner.page is not None
    state = runner.page.state()  # what /cycles shows
    [cycle] = json.loads(render_json(state))["cycles"]
    assert cycle["live"]["why"] == f"stopped before its next eviction: {LEASE_LOST}"
    assert [r["reason"] for r in cycle["refusals"]] == [LEASE_LOST]
    assert f"<b>interrupted</b>: stopped before its next eviction: {LEASE_LOST}" in \
        render_html(state)


# -- leadership ------------------------------------------------------------------------------


async def test_a_standby_says_who_leads(tmp_path: Path, emulator: Emulator,
                                        api: FakeApiServer) -> None:
    cluster(api)
    FakeLeases(emulator)
    runners = []
    for token in ("replica-a", "replica-b"):
        kube = tmp_path / f"kubeconfig-{token}"
        kube.write_text(Path(kubeconfig(tmp_path, str(emulator.url).rstrip("/")))
                        .read_text().replace("t0ken", token))
        runners.append(runner_for(config(
            tmp_path, emulator, interval="1h", dry_run=False, leader_elect=True,
            lease_duration="10s", renew_deadline="5s", retry_period="100ms",
            lease_namespace="kube-system", kubeconfig=str(kube),
            metrics_address="127.0.0.1:0")))
    leader, standby = runners
    async with background(leader):
        await until(lambda: len(leader.reports) == 1)
        async with background(standby):
            await until(lambda: standby.elector is not None
                        and getattr(standby.elector, "holder", "") == leader.identity)
            body = await cycles_json(standby)
            [server] = standby.servers
            _, _, page = await fetch(server.port, "/cycles")
            _, _, leading = await fetch(leader.servers[0].port, "/cycles")
            leader_body = await cycles_json(leader)
    election = body["instance"]["leaderElection"]
    assert election == {"enabled": True, "leading": False, "lease": "kube-system/desched",
                        "holder": leader.identity}
    assert body["cycles"] == []
    assert "<b>This instance does not lead.</b>" in page
    assert f"is held by <b>{leader.identity}</b>" in page
    assert "no cycle has run here yet" in page
    assert "This instance leads: it holds the Lease kube-system/desched" in leading
    assert leader_body["instance"]["leaderElection"] == {
        "enabled": True, "leading": True, "lease": "kube-system/desched",
        "holder": leader.identity}
    assert [c["cycle"] for c in leader_body["cycles"]] == [1]


# -- read-only, and off ----------------------------------------------------------------------


async def test_read_only_and_the_flag_that_turns_it_off(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    cluster(api)
    runner = runner_for(config(tmp_path, emulator, interval="1h", dry_run=True,
                               metrics_address="127.0.0.1:0"))
    async with background(runner):
        await until(lambda: len(runner.reports) == 1)
        [server] = runner.servers
        for path in ("/cycles", "/cycles.json"):
            for method in ("POST", "PUT", "PATCH", "DELETE"):
                assert (await fetch(server.port, path, method))[0] == 405, (method, path)
            assert (await fetch(server.port, path, "HEAD"))[0] == 200
            _, headers, _ = await fetch(server.port, path)
            policy = headers["Content-Security-Policy"]
            assert "default-src 'none'" in policy and "script-src 'sha256-" in policy
            assert headers["X-Content-Type-Options"] == "nosniff"
            assert headers["Content-Encoding"] in ("gzip", "deflate")  # the client accepts them
    off = runner_for(config(tmp_path, emulator, interval="1h", dry_run=True,
                            metrics_address="127.0.0.1:0", cycles_page=False))
    async with background(off):
        await until(lambda: len(off.reports) == 1)
        [server] = off.servers
        assert (await fetch(server.port, "/cycles"))[0] == 404
        assert (await fetch(server.port, "/cycles.json"))[0] == 404
        assert (await fetch(server.port, "/metrics"))[0] == 200
    assert off.reports[0].facts is not None and off.reports[0].facts.frames is None

    # The command's flag reaches the run's settings.
    import desched.live.run as run_module

    seen: list[bool] = []
    monkeypatch.setattr(run_module, "run_command",
                        lambda config, **_: seen.append(config.cycles_page) or 0)
    from desched.commands.cli import main

    for flag, expected in (("--no-cycles-page", False), ("--cycles-page", True), (None, True)):
        args = ["run", "--policy", write_policy(tmp_path), *([flag] if flag else [])]
        main(args, standalone_mode=False)
        assert seen.pop() is expected, flag


# -- what a kept cycle may hold --------------------------------------------------------------


def oversized(number: int, nodes: int, policy: Policy) -> CycleReport:
    """A cycle over every cap: unique pod names and long reasons (the worst for memory)."""
    log = DecisionLog()
    log.cycle = number
    why = "x" * 180
    for i in range(MAX_DECISIONS + 1_000):
        outcome: Any = "evicted" if i % 3 == 0 else "limited"
        log.record(outcome, "default", f"pod-{number}-{i:06d}", f"node-{i % nodes:05d}",
                   "default", "PodLifeTime", f"{why} {number} {i}")
    for i in range(MAX_NOTES + 100):
        log.note(f"node-{i:05d}", "default", "LowNodeUtilization", f"{why} note {number} {i}")
    for i in range(MAX_KEPT + 100):
        log.kept[(number, "default", "PodLifeTime", f"{why} kept {number} {i}")] = i + 1
    names = tuple(f"node-{number}-{i:05d}" for i in range(nodes))
    frame = Frame("f", {s: {n: float(i % 100) for i, n in enumerate(names)} for s in SERIES})
    facts = CycleFacts(datetime.now(UTC), False, policy, nodes=nodes, pods=30 * nodes)
    facts.frames = (CompactFrame.of(frame, names), CompactFrame.of(frame, names))
    for i in range(MAX_API_ERRORS + 50):
        facts.answer(f"default/pod-{number}-{i:06d}", f"503 {why}")
    facts.settle(log, {}, ClusterSnapshot())
    return CycleReport(number, "completed", 0, 0, log, facts)


# Documented in docs/running.md: what the ten kept cycles hold at most.
PER_CYCLE = 1_400_000  # bytes, at the caps, the frames aside
PER_NODE = 120  # bytes per node and cycle: two frames of six series, the node names


@pytest.mark.slow
async def test_a_kept_cycle_is_capped_and_so_is_their_memory(tmp_path: Path) -> None:
    policy = load_policy(write_policy(tmp_path), PLUGINS)
    nodes = 5_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        reports = [oversized(n, nodes, policy) for n in range(1, KEPT_CYCLES + 1)]
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    report = reports[0]
    log, facts = report.log, report.facts
    assert facts is not None
    assert len(log.decisions) == MAX_DECISIONS and len(log.notes) == MAX_NOTES
    assert len(log.kept) == MAX_KEPT and len(facts.api_errors) == MAX_API_ERRORS
    # Evictions are kept first, the limit's refusals after them.
    evicted = sum(1 for d in log.decisions if d.outcome == "evicted")
    assert evicted == (MAX_DECISIONS + 1_000 + 2) // 3
    assert facts.dropped == Counter({"limited": 1_000, "notes": 100, "kept reasons": 100})
    assert facts.api_error_count == MAX_API_ERRORS + 50
    bound = KEPT_CYCLES * (PER_CYCLE + PER_NODE * nodes)
    assert held <= bound, f"{held / 2**20:.1f} MiB kept, documented {bound / 2**20:.1f} MiB"
    print(f"\nten cycles at the caps, {nodes} nodes: {held / 2**20:.1f} MiB "
          f"(bound {bound / 2**20:.1f} MiB)")
    # The page says what it left out.
    state = PageState("me", False, False, "", "", False, "every 5m", "policy.yaml",
                      tuple(reports[:1]))
    assert "not kept (over the page's caps; the log lines have them): 100 kept reasons, " \
           "1000 limited, 100 notes" in render_html(state)
    assert json.loads(render_json(state))["cycles"][0]["live"]["notKept"] == {
        "limited": 1_000, "notes": 100, "kept reasons": 100}


async def test_the_report_opened_is_the_newest_cycle_that_acted(tmp_path: Path) -> None:
    policy = load_policy(write_policy(tmp_path), PLUGINS)
    reports = []
    for number, evicted in ((1, True), (2, True), (3, False)):
        log = DecisionLog()
        log.cycle = number
        if evicted:
            log.record("evicted", "default", f"web-{number}", "n1", "default", "PodLifeTime",
                       "too old")
        reports.append(CycleReport(number, "completed", int(evicted), 0, log,
                                   CycleFacts(datetime.now(UTC), False, policy)))
    page = render_html(PageState("me", False, False, "", "", False, "every 5m", "p.yaml",
                                 tuple(reports)))
    sections = {int(n): body for n, body in re.findall(
        r'<section class="cycle" id="cycle-(\d+)">(.*?)</section>', page, re.S)}
    assert list(sections) == [3, 2, 1]
    opened = [n for n, body in sections.items() if "<details open><summary>the cycle's" in body]
    assert opened == [2]


async def test_the_page_s_figures_never_stop_a_cycle(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import desched.live.cycle_facts as facts_module

    def broken(*_: Any, **__: Any) -> None:
        raise ValueError("a node the figures cannot read")

    monkeypatch.setattr(facts_module, "take_frame", broken)
    monkeypatch.setattr(facts_module, "workload_name", broken)
    cluster(api)
    body, page = await first_cycle(runner_for(config(
        tmp_path, emulator, interval="1h", metrics_address="127.0.0.1:0")))
    [cycle] = body["cycles"]
    assert cycle["live"]["result"] == "completed"
    assert sorted(e["pod"] for e in cycle["evictions"]) == ["old-1", "old-2"]
    assert cycle["balance"] == [] and "no utilization data" in page
