"""Whole-command benchmark: `desched simulate` as a user runs it, in a fresh process per run.

    .venv/bin/python bench/simulate.py --snapshot /tmp/nw/cluster.jsonl \
        --policy bench/all-strategies.yaml [--runs 3] [-- EXTRA SIMULATE ARGS...]
    .venv/bin/python bench/simulate.py --snapshot A --snapshot B ...   # several sizes: the exponent

Each run is `python -m desched simulate --policy P --snapshot S --now ...` (the text a user
reads; its header and summary lines give the pods and the evictions). Measured from outside the
process (os.wait4): the wall clock, the CPU it used (user + system: on a shared machine the wall
clock also counts the time other processes held the cores) and its peak RSS, so the figure is
what `time` shows a user: load, cycles and rendering together. With several snapshots it gives
how CPU time grows with the pods in them: the exponent k of time ~ pods^k between two sizes.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOW = "2026-11-01T00:00:00Z"


@dataclass(frozen=True)
class Run:
    wall: float
    cpu: float
    rss_mb: float
    evicted: int
    pods: int


def one_run(snapshot: Path, policy: str, extra: list[str]) -> Run:
    cmd = [sys.executable, "-m", "desched", "simulate", "--policy", policy, "--snapshot",
           str(snapshot), "--now", NOW, *extra]
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):  # 1: evictions planned (the contract's exit codes)
            raise SystemExit(f"{' '.join(cmd)} exited {code}: {err.strip()[-500:]}")
        out.seek(0)
        text = out.read(64 * 1024).decode(errors="replace")
    pods = re.search(r"snapshot: [\d,]+ nodes, ([\d,]+) pods", text)
    evicted = re.search(r"summary: ([\d,]+) pod\(s\) evicted", text)
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
               _number(evicted), _number(pods))


def _number(match: re.Match[str] | None) -> int:
    return int(match.group(1).replace(",", "")) if match else 0


def compile_package() -> None:
    """Write desched's bytecode first, as `pip install` does: from a checkout, with
    PYTHONDONTWRITEBYTECODE set (as on the measuring machine), every run would otherwise compile
    the modules it imports again (0.5 s of a 5,000-node run), which no installed copy does."""
    import desched

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(desched.__file__).parent)],
                   check=True, env=env, stdout=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--snapshot", type=Path, action="append", required=True)
    ap.add_argument("--policy", default=str(HERE / "all-strategies.yaml"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("extra", nargs="*", help="more simulate arguments (after --)")
    opts = ap.parse_args()
    compile_package()
    sizes: list[tuple[int, float]] = []
    for snapshot in opts.snapshot:
        runs = [one_run(snapshot, opts.policy, opts.extra) for _ in range(opts.runs)]
        wall = statistics.median(r.wall for r in runs)
        cpu = statistics.median(r.cpu for r in runs)
        rss = statistics.median(r.rss_mb for r in runs)
        pods = runs[0].pods
        print(f"{snapshot}: {pods:,} pods, {runs[0].evicted:,} evictions; medians of "
              f"{len(runs)}: wall {wall:.2f} s, CPU {cpu:.2f} s, peak RSS {rss:.0f} MB "
              f"(CPU min {min(r.cpu for r in runs):.2f}, max {max(r.cpu for r in runs):.2f})")
        if pods:
            sizes.append((pods, cpu))
    for (p0, c0), (p1, c1) in itertools.pairwise(sizes):
        if p0 != p1 and c0 > 0:
            print(f"  {p0:,} -> {p1:,} pods: CPU x{c1 / c0:.2f}, exponent "
                  f"{math.log(c1 / c0) / math.log(p1 / p0):.2f}")


if __name__ == "__main__":
    main()
