"""Whole-command benchmark of `desched tune`, as a user runs it, in a fresh process per run.

    .venv/bin/python bench/tune.py --snapshot /tmp/nw500/cluster.jsonl \
        --policy bench/lnu-40-50.yaml --goal "std cpu requests <= 35" [--runs 3] [-- EXTRA ARGS]

tune forks worker processes after the load, so the figures cover the whole process tree: the
wall clock; the CPU of the command and every worker it waited for (the children's rusage,
user + system); and the peak memory of the tree, sampled every 0.2 s as the sum of each
process's proportional set size (PSS: a page the workers share with the parent copy-on-write
counts once, split between them, where RSS would count it in every process). The summary's
"searched:" and "floor:" lines give the candidates run and the floor's time.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

NOW = "2026-11-22T12:00:00Z"


@dataclass(frozen=True)
class Run:
    wall: float
    cpu: float
    peak_mb: float
    searched: str
    floor: str


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants, as /proc lists them now."""
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    stack.extend(int(c) for c in fh.read().split())
        except OSError:
            continue
    return out


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def one_run(args: argparse.Namespace, extra: list[str]) -> Run:
    cmd = [sys.executable, "-m", "desched", "tune", "--policy", args.policy, "--snapshot",
           args.snapshot, "--now", NOW, *(a for g in args.goal for a in ("--goal", g)), *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak = 0
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.2):
                peak = max(peak, sum(_pss_kb(p) for p in _tree(proc.pid)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        code = proc.wait()
        wall = time.perf_counter() - start
        done.set()
        sampler.join()
        if code != 0:
            raise SystemExit(f"{' '.join(cmd)} exited {code}: {err.strip()[-500:]}")
        out.seek(0)
        text = out.read().decode(errors="replace")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    searched = re.search(r"^searched: (.*)$", text, re.M)
    floor = re.search(r"^floor: (.*)$", text, re.M)
    return Run(wall, cpu, peak / 1024, searched.group(1) if searched else "",
               floor.group(1)[:160] if floor else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshot", required=True)
    parser.add_argument("--policy", required=True)
    parser.add_argument("--goal", action="append", required=True)
    parser.add_argument("--runs", type=int, default=1)
    argv = sys.argv[1:]
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    args = parser.parse_args(argv)
    runs = [one_run(args, extra) for _ in range(args.runs)]
    for r in runs:
        print(f"wall {r.wall:.1f} s, cpu {r.cpu:.1f} s, peak PSS {r.peak_mb:.0f} MB; "
              f"searched: {r.searched}; floor: {r.floor}")
    if len(runs) > 1:
        print(f"median: wall {statistics.median(r.wall for r in runs):.1f} s, "
              f"cpu {statistics.median(r.cpu for r in runs):.1f} s, "
              f"peak {statistics.median(r.peak_mb for r in runs):.0f} MB")
    print(f"{Path(args.snapshot).name}: {' '.join(extra)}")


if __name__ == "__main__":
    main()
