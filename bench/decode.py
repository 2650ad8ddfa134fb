"""Decode benchmark: load a 5,000-node / 150,000-pod snapshot, report load time and peak RSS.

    .venv/bin/python bench/decode.py [--nodes 5000] [--pods 150000] [--runs 5]
    .venv/bin/python bench/decode.py --snapshot /tmp/prod/cluster.json   # any snapshot file

Without --snapshot, the uniform cluster is generated once (bench/generate_cluster.py) into
$DESCHED_BENCH_DIR (default /tmp/desched-bench); bench/generate_production.py writes the
production-like one in every form (JSON lines, kubectl's List, kubectl's YAML).
Each run is a fresh process, so peak RSS is the whole process's high-water
mark (interpreter, modules, decoded objects and indices), read from the kernel (VmHWM).
Targets (bench/README.md): <= 3 s and <= 800 MB on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_CHILD = r"""
import json, sys, time
from desched.snapshot.loader import load_snapshot
t, cpu = time.perf_counter(), time.process_time()
snap = load_snapshot(sys.argv[1:], warn=lambda m: None)
elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
hwm = 0
with open("/proc/self/status") as fh:
    for line in fh:
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) * 1024
print(json.dumps({"seconds": elapsed, "cpu": cpu, "peak_rss": hwm, "nodes": len(snap.nodes),
                  "pods": len(snap.pods)}))
"""


# The floor (issue 33, item 4): msgspec's own decode of the same bytes into plain Python objects,
# line by line for JSON lines, whole otherwise; the objects are dropped as they come, as the
# loader drops what it does not keep.
_FLOOR = r"""
import json, sys, time, msgspec
decode = msgspec.json.decode
t, cpu = time.perf_counter(), time.process_time()
for path in sys.argv[1:]:
    with open(path, "rb") as fh:
        data = fh.read()
    t, cpu = time.perf_counter(), time.process_time()  # the read is the loader's too: not timed
    if path.endswith(".jsonl"):
        for line in data.splitlines():
            if line.strip():
                decode(line)
    else:
        decode(data)
elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
print(json.dumps({"seconds": elapsed, "cpu": cpu}))
"""
# A second floor for JSON lines: each page decoded by msgspec straight into desched's own lean
# types (model/kinds.PAGE_DECODERS), one call a page, nothing indexed: what the load adds past
# decoding is the snapshot's indices and the pods' shared parts.
_TYPED_FLOOR = r"""
import json, re, sys, time, msgspec
from desched.model.kinds import PAGE_DECODERS
kind = re.compile(rb'"kind":"([A-Za-z]+List)"')
plain = msgspec.json.decode
with open(sys.argv[1], "rb") as fh:
    lines = [line for line in fh.read().splitlines() if line.strip()]
t, cpu = time.perf_counter(), time.process_time()
for line in lines:
    found = kind.search(line[:200]) or kind.search(line[-200:])
    decoder = PAGE_DECODERS.get(found.group(1).decode()) if found else None
    decoder.decode(line) if decoder is not None else plain(line)
elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
print(json.dumps({"seconds": elapsed, "cpu": cpu}))
"""

# The lowest floor for JSON lines: each page checked and skipped by msgspec (its items decoded into
# structs with no fields), what reading the text at all costs before any object is built.
_SKIP_FLOOR = r"""
import json, sys, time, msgspec
class Item(msgspec.Struct):
    pass
class Page(msgspec.Struct):
    items: list[Item] | None = None
skip = msgspec.json.Decoder(Page)
with open(sys.argv[1], "rb") as fh:
    lines = [line for line in fh.read().splitlines() if line.strip()]
t, cpu = time.perf_counter(), time.process_time()
for line in lines:
    skip.decode(line)
elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
print(json.dumps({"seconds": elapsed, "cpu": cpu}))
"""


def _floor_cpu(script: str, paths: list[Path], runs: int) -> list[float]:
    return [json.loads(subprocess.run([sys.executable, "-c", script, *map(str, paths)],
                                      check=True, capture_output=True, text=True).stdout)["cpu"]
            for _ in range(runs)]


def ensure_snapshot(nodes: int, pods: int) -> Path:
    base = Path(os.environ.get("DESCHED_BENCH_DIR", "/tmp/desched-bench"))
    base.mkdir(parents=True, exist_ok=True)
    path = base / f"cluster-{nodes}n-{pods}p.jsonl"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        subprocess.run([sys.executable, str(HERE / "generate_cluster.py"), "--nodes", str(nodes),
                        "--pods", str(pods), "--out", str(tmp)], check=True)
        tmp.rename(path)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description="snapshot decode benchmark")
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=150000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--snapshot", type=Path, action="append",
                    help="load this file instead of the uniform cluster (repeat for several)")
    ap.add_argument("--floor", action="store_true",
                    help="also time msgspec's plain decode of the same bytes (JSON only) and "
                         "give the load as a ratio of it")
    opts = ap.parse_args()
    paths = opts.snapshot or [ensure_snapshot(opts.nodes, opts.pods)]
    results = []
    for _ in range(opts.runs):
        out = subprocess.run([sys.executable, "-c", _CHILD, *map(str, paths)], check=True,
                             capture_output=True, text=True).stdout
        results.append(json.loads(out))
    secs = [r["seconds"] for r in results]
    cpu = [r["cpu"] for r in results]
    rss = [r["peak_rss"] / 2**20 for r in results]
    size = sum(p.stat().st_size for p in paths)
    print(f"snapshot: {', '.join(map(str, paths))} ({size / 2**20:.0f} MiB, "
          f"{results[0]['nodes']} nodes, {results[0]['pods']} pods)")
    # CPU seconds beside the wall clock: on a shared machine the wall clock also counts the
    # time other processes held the core.
    print(f"load time: median {statistics.median(secs):.2f} s "
          f"(min {min(secs):.2f}, max {max(secs):.2f}, {len(secs)} runs); "
          f"CPU median {statistics.median(cpu):.2f} s")
    print(f"peak RSS:  median {statistics.median(rss):.0f} MiB "
          f"(min {min(rss):.0f}, max {max(rss):.0f})")
    if opts.floor:
        floor = _floor_cpu(_FLOOR, paths, opts.runs)
        print(f"msgspec's plain decode of the same bytes: CPU median "
              f"{statistics.median(floor):.2f} s; load / floor "
              f"{statistics.median(cpu) / statistics.median(floor):.2f}x")
        if len(paths) == 1 and paths[0].suffix == ".jsonl":
            typed = _floor_cpu(_TYPED_FLOOR, paths, opts.runs)
            print(f"msgspec's decode into desched's types, page by page: CPU median "
                  f"{statistics.median(typed):.2f} s; load / typed floor "
                  f"{statistics.median(cpu) / statistics.median(typed):.2f}x")
            skipped = _floor_cpu(_SKIP_FLOOR, paths, opts.runs)
            print(f"msgspec checking and skipping every item, page by page: CPU median "
                  f"{statistics.median(skipped):.2f} s; load / skip floor "
                  f"{statistics.median(cpu) / statistics.median(skipped):.2f}x")


if __name__ == "__main__":
    main()
