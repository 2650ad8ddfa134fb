"""Live benchmark: `desched run --dry-run` cycles on informer caches at scale.

    .venv/bin/python bench/live_informer.py --snapshot /tmp/prod/cluster.jsonl [--cycles 6]
        [--runs 2] [--policy bench/all-strategies-limited.yaml]

Each run is a fresh process. The informers of every kind `desched run` watches fill their stores
through their own list code (`Informer.relist`: page decoder, detach, trim, keys), served from a
JSON-lines snapshot by a stand-in client that pages it with limit/continue as an API server
would (no watches). Then, as `Runner.run_cycle` does in a dry run: `build_snapshot` of the caches,
a `Descheduler` with the simulation executor, `run_cycle`, and the collection `Runner` makes
between cycles. Reported: fill time and RSS, per cycle the snapshot build, the cycle and RSS.
Targets (issue 10): <= 2 s a warm cycle, <= 1 GB resident with every informer running.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_CHILD = r"""
import asyncio, gc, json, re, sys, time
from datetime import UTC, datetime
from desched.plugins.catalog import PLUGINS
from desched.executors.simulation import SimulationExecutor
from desched.framework.decisions import DecisionLog
from desched.framework.runner import Descheduler
from desched.framework.types import Clock
from desched.live.informer import build_snapshot, make_informers
from desched.policy_files.loader import load_policy

def rss():
    with open("/proc/self/status") as fh:
        return {l.split(":")[0]: int(l.split()[1]) // 1024 for l in fh
                if l.startswith(("VmRSS", "VmHWM"))}

class FileServer:
    server = "file"
    def __init__(self, path):
        self.file = open(path, "rb")
        self.pages = {}
        offset = 0
        for line in self.file:
            start, offset = offset, offset + len(line)
            kind = re.search(rb'"kind": ?"([A-Za-z]*)"', line[:300]).group(1).decode()
            if kind == "List":  # a mixed list: one page per item, by kind
                for item in json.loads(line)["items"]:
                    page = json.dumps({"kind": item["kind"] + "List", "items": [item]}).encode()
                    self.pages.setdefault(item["kind"] + "List", []).append(page)
            else:
                self.pages.setdefault(kind, []).append((start, len(line)))
        self.kinds = {}
    async def get(self, path, params=None, *, what):
        pages = self.pages.get(self.kinds[path] + "List", [])
        i = int((params or {}).get("continue", "0"))
        if i >= len(pages):
            return b'{"metadata":{},"items":[]}'
        page = pages[i]
        if isinstance(page, tuple):
            self.file.seek(page[0])
            page = self.file.read(page[1])
        token = str(i + 1) if i + 1 < len(pages) else ""
        return (b'{"metadata":{"resourceVersion":"1","continue":"%s"},' % token.encode()
                + page.strip()[1:])

async def main(path, policy_path, cycles):
    client = FileServer(path)
    informers = make_informers(client)
    client.kinds = {inf.resource.path: inf.resource.kind for inf in informers}
    t = time.perf_counter()
    gc.disable()  # as start_informers does around the initial lists
    for inf in informers:
        await inf.relist()
    gc.enable()
    gc.freeze()
    fill, filled = time.perf_counter() - t, rss()["VmRSS"]
    policy = load_policy(policy_path, PLUGINS)
    rows = []
    for n in range(1, cycles + 1):
        t0 = time.perf_counter()
        snap = await build_snapshot(informers)
        t1 = time.perf_counter()
        d = Descheduler(policy, snap, SimulationExecutor(snap),
                        Clock(datetime(2026, 11, 22, 12, tzinfo=UTC)), DecisionLog())
        d.run_cycle(n)
        t2 = time.perf_counter()
        evicted = len(d.log.evictions())
        del snap, d
        gc.collect()  # Runner._cycles collects between cycles
        rows.append([t1 - t0, t2 - t1, evicted, rss()["VmRSS"]])
    print(json.dumps({"fill": fill, "filled_rss": filled, "cycles": rows,
                      "peak_rss": rss()["VmHWM"]}))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description="live dry-run cycles on informer caches")
    ap.add_argument("--snapshot", required=True, help="a JSON-lines snapshot")
    ap.add_argument("--policy", default=str(HERE / "all-strategies-limited.yaml"))
    ap.add_argument("--cycles", type=int, default=6)
    ap.add_argument("--runs", type=int, default=2)
    opts = ap.parse_args()
    runs = []
    for _ in range(opts.runs):
        out = subprocess.run([sys.executable, "-c", _CHILD, opts.snapshot, opts.policy,
                              str(opts.cycles)], check=True, capture_output=True, text=True)
        runs.append(json.loads(out.stdout))
    print(f"command: {' '.join(sys.argv)}")
    print(f"fill (initial lists): median {statistics.median(r['fill'] for r in runs):.2f} s, "
          f"RSS {statistics.median(r['filled_rss'] for r in runs):.0f} MiB")
    for i in range(opts.cycles):
        build = statistics.median(r["cycles"][i][0] for r in runs)
        cycle = statistics.median(r["cycles"][i][1] for r in runs)
        resident = statistics.median(r["cycles"][i][3] for r in runs)
        print(f"cycle {i + 1}: build {build:.2f} s + cycle {cycle:.2f} s = {build + cycle:.2f} s,"
              f" {runs[0]['cycles'][i][2]} evictions, RSS {resident:.0f} MiB")
    print(f"peak RSS: {max(r['peak_rss'] for r in runs)} MiB")


if __name__ == "__main__":
    main()
