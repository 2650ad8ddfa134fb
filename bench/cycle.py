"""Cycle benchmark: one descheduling cycle with all ten upstream strategies enabled
(bench/all-strategies.yaml) on the generated 5,000-node / 150,000-pod snapshot.

    .venv/bin/python bench/cycle.py [--runs 3] [--policy bench/all-strategies.yaml]
    .venv/bin/python bench/cycle.py --snapshot /tmp/prod/cluster.jsonl \
        --policy bench/all-strategies-limited.yaml    # the production-like cluster

Each run is a fresh process: load the snapshot (not timed here; see bench/decode.py), then time
one `Descheduler.run_cycle` with the simulation executor, and time each plugin separately.
Target (bench/README.md): one full cycle <= 2 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from decode import ensure_snapshot  # noqa: E402

_CHILD = r"""
import json, sys, time
from datetime import datetime, timezone
from desched.plugins.catalog import PLUGINS
from desched.executors.simulation import SimulationExecutor
from desched.framework.runner import Descheduler
from desched.framework.types import Clock
from desched.policy_files.loader import load_policy
from desched.snapshot.loader import load_snapshot

policy = load_policy(sys.argv[2], PLUGINS)
snap = load_snapshot([sys.argv[1]], warn=lambda m: None)
executor = SimulationExecutor(snap)
d = Descheduler(policy, snap, executor, Clock(datetime(2026, 11, 22, 12, tzinfo=timezone.utc)))
timings = {}
cpus = {}
for profile in d.profiles:
    for kind in ("deschedule", "balance"):
        for i, (name, plugin) in enumerate(getattr(profile, kind)):
            method = getattr(plugin, kind)
            def timed(nodes, _m=method, _n=name):
                t0, c0 = time.perf_counter(), time.process_time()
                _m(nodes)
                timings[_n] = timings.get(_n, 0.0) + time.perf_counter() - t0
                cpus[_n] = cpus.get(_n, 0.0) + time.process_time() - c0
            setattr(plugin, kind, timed)
t, cpu = time.perf_counter(), time.process_time()
d.run_cycle(1)
elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
print(json.dumps({"seconds": elapsed, "cpu": cpu, "evicted": len(d.log.evictions()),
                  "plugins": timings, "plugins_cpu": cpus}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description="one-cycle benchmark, all strategies")
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=150000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--policy", default=str(HERE / "all-strategies.yaml"))
    ap.add_argument("--snapshot", type=Path, help="use this file instead of the uniform cluster")
    opts = ap.parse_args()
    path = opts.snapshot or ensure_snapshot(opts.nodes, opts.pods)
    runs = []
    for _ in range(opts.runs):
        out = subprocess.run([sys.executable, "-c", _CHILD, str(path), opts.policy], check=True,
                             capture_output=True, text=True).stdout
        runs.append(json.loads(out))
    secs = [r["seconds"] for r in runs]
    cpu = [r["cpu"] for r in runs]
    # CPU seconds beside the wall clock: on a shared machine the wall clock also counts the
    # time other processes held the core.
    print(f"cycle: median {statistics.median(secs):.2f} s (min {min(secs):.2f}, "
          f"max {max(secs):.2f}, {len(secs)} runs); CPU median {statistics.median(cpu):.2f} s; "
          f"{runs[0]['evicted']} evictions")
    print(f"  {'plugin':48} {'wall':>9} {'CPU':>9}  (medians)")
    for name in runs[0]["plugins"]:
        med = statistics.median(r["plugins"][name] for r in runs)
        med_cpu = statistics.median(r["plugins_cpu"][name] for r in runs)
        print(f"  {name:48} {med:7.3f} s {med_cpu:7.3f} s")


if __name__ == "__main__":
    main()
