"""MigrationController benchmark (Koordinator): snapshot rebuild, arbitration of waiting
PodMigrationJobs, and one cycle of RemoveDuplicates behind MigrationController, on the generated
5,000-node / 150,000-pod snapshot.

    .venv/bin/python bench/migration.py [--runs 3] [--jobs 2000] [--rebuilds 5]
                                        [--policy bench/migration-policy.yaml] [--no-workloads]

Each run is a fresh process: load the snapshot (not timed here; see bench/decode.py), then
1. rebuild: a new ClusterSnapshot over every loaded object (add_all per kind + finish, GC paused),
   as the live migration service does before every arbitration round (live/informer.py
   build_snapshot); median of --rebuilds repetitions;
2. arbitrate: --jobs waiting (Pending, not yet passed) PodMigrationJobs, for distinct pods chosen
   with a seeded random among non-DaemonSet pods with a controller, added to the last rebuilt
   snapshot; time `Arbitrator(settings(args), snapshot, resolver, ledger).arbitrate()` with
   default MigrationControllerArgs but defaultJobMode EvictDirectly (a new resolver, ledger and
   arbitrator each time, as each live round has); first and median of --rebuilds repetitions;
3. cycle: one `Descheduler.run_cycle` of bench/migration-policy.yaml (RemoveDuplicates behind the
   default MigrationController, EvictDirectly) with the simulation executor, on the loaded
   snapshot (without the benchmark's jobs).

The generated snapshot holds no workload objects, so every pod's workload would be unresolved
and MigrationController would refuse every pod at its expected-replicas check. Unless
--no-workloads is given, the ReplicaSets (each under a Deployment) and StatefulSets the pods name
are added first, with as many replicas as they have pods; the live service watches them too.
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
import gc, json, random, sys, time
from collections import Counter
from datetime import datetime, timedelta, timezone
import msgspec
from desched.plugins.catalog import PLUGINS
from desched.executors.simulation import SimulationExecutor
from desched.framework.runner import Descheduler
from desched.framework.types import Clock
from desched.model.resources import RESOURCES
from desched.migration.arbitration import EVICT_DIRECTLY, Arbitrator, MigrationLedger
from desched.migration.limits import WorkloadResolver
from desched.model.kinds import JSON_DECODERS
from desched.model.meta import controller_ref
from desched.migration.args import MigrationControllerArgs, default, settings
from desched.policy_files.loader import load_policy
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.loader import load_snapshot

path, policy_path, n_jobs, reps, workloads = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
                                              int(sys.argv[4]), sys.argv[5] == "1")
enc = msgspec.json.encode
snap = load_snapshot([path], warn=lambda m: None)

# -- workload objects the pods name (the generated snapshot has none) ---------------------------
added = 0
if workloads:
    counts = Counter()
    for pod in snap.pods.values():
        ref = controller_ref(pod.metadata)
        if ref is not None and ref.kind in ("ReplicaSet", "StatefulSet"):
            counts[(str(ref.kind), str(pod.namespace), str(ref.name), str(ref.uid))] += 1
    objs = []
    for (kind, ns, name, uid), n in sorted(counts.items()):
        meta = {"name": name, "namespace": ns, "uid": uid}
        if kind == "ReplicaSet":
            app = name.rsplit("-", 1)[0]
            duid = f"uid-{ns}-deployment-{app}"
            objs.append(JSON_DECODERS["Deployment"].decode(enc(
                {"metadata": {"name": app, "namespace": ns, "uid": duid},
                 "spec": {"replicas": n}})))
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": app, "uid": duid, "controller": True}]
        objs.append(JSON_DECODERS[kind].decode(enc({"metadata": meta, "spec": {"replicas": n}})))
    snap.add_all(tuple(objs))
    added = len(objs)

# -- 1. rebuild -----------------------------------------------------------------------------------
objects = [*snap.nodes.values(), *snap.pods.values(), *snap.namespaces.values(),
           *(p for pdbs in snap.pdbs_by_namespace.values() for p in pdbs),
           *snap.priority_classes.values(), *snap.pvcs.values(), *snap.workloads.values(),
           *snap.node_metrics.values(), *snap.metrics_nodes.values(),
           *snap.metrics_pods.values(), *snap.migration_jobs.values(),
           *snap.reservations.values()]
by_kind = {}
for obj in objects:
    by_kind.setdefault(type(obj).__name__, []).append(obj)
order = [r.kind for r in RESOURCES if r.kind in by_kind]
order += [k for k in by_kind if k not in order]
stores = [tuple(by_kind[k]) for k in order]  # the informers' stores, in their order

def rebuild():
    fresh = ClusterSnapshot()
    was = gc.isenabled()
    gc.disable()
    try:
        for store in stores:
            fresh.add_all(store)
        fresh.finish()
    finally:
        if was:
            gc.enable()
    return fresh

rebuild_secs = []
for _ in range(reps):
    t = time.perf_counter()
    rebuilt = rebuild()
    rebuild_secs.append(time.perf_counter() - t)
assert len(rebuilt.pods) == len(snap.pods)

# -- 2. arbitration -------------------------------------------------------------------------------
rng = random.Random(42)
candidates = sorted(key for key, pod in rebuilt.pods.items()
                    if not pod.is_daemonset and controller_ref(pod.metadata) is not None)
chosen = rng.sample(candidates, min(n_jobs, len(candidates)))
base = datetime(2026, 11, 22, 11, tzinfo=timezone.utc)
jobs = []
for i, key in enumerate(chosen):
    pod = rebuilt.pods[key]
    created = base - timedelta(seconds=rng.randrange(1800))
    jobs.append(JSON_DECODERS["PodMigrationJob"].decode(enc({
        "metadata": {"name": f"bench-pmj-{i:05d}", "namespace": "koordinator-system",
                     "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ")},
        "spec": {"podRef": {"namespace": str(pod.namespace), "name": str(pod.metadata.name),
                            "uid": str(pod.metadata.uid)}},
        "status": {"phase": "Pending"}})))
rebuilt.add_all(tuple(jobs))
args = MigrationControllerArgs(default_job_mode=EVICT_DIRECTLY)
default(args)
arb_secs = []
for _ in range(reps):
    t = time.perf_counter()
    resolver = WorkloadResolver(rebuilt)
    ledger = MigrationLedger(rebuilt, resolver)
    verdicts = Arbitrator(settings(args), rebuilt, resolver, ledger).arbitrate()
    arb_secs.append(time.perf_counter() - t)
outcomes = Counter(v.outcome for v in verdicts)

def why(v):
    text = v.reason.split("requirements: ", 1)[-1]
    if v.outcome == "waiting":
        return "waiting: " + text.split(":", 1)[0]
    return f"{v.outcome}: " + " ".join(w for w in text.split()[:6] if "/" not in w)

reasons = Counter(why(v) for v in verdicts).most_common(6)
del rebuilt, jobs, verdicts, resolver, ledger

# -- 3. cycle -------------------------------------------------------------------------------------
n_pods = len(snap.pods)
policy = load_policy(policy_path, PLUGINS)
executor = SimulationExecutor(snap)
d = Descheduler(policy, snap, executor, Clock(datetime(2026, 11, 22, 12, tzinfo=timezone.utc)))
t = time.perf_counter()
d.run_cycle(1)
cycle_secs = time.perf_counter() - t
decided = Counter(dec.outcome for dec in d.log.decisions)
hwm = 0
with open("/proc/self/status") as fh:
    for line in fh:
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) * 1024
print(json.dumps({
    "objects": len(objects), "workloads_added": added, "pods": n_pods,
    "rebuild": rebuild_secs, "jobs": len(chosen), "arbitrate": arb_secs,
    "verdicts": {k: outcomes.get(k, 0) for k in ("passed", "waiting", "failed")},
    "reasons": reasons, "cycle": cycle_secs, "evicted": decided["evicted"],
    "limited": decided["limited"], "filtered": sum(d.log.filtered_counts.values()),
    "decisions": dict(decided), "peak_rss": hwm}))
"""


def _span(values: list[float], fmt: str = ".2f", unit: str = " s") -> str:
    return (f"median {statistics.median(values):{fmt}}{unit} (min {min(values):{fmt}}, "
            f"max {max(values):{fmt}}, {len(values)} runs)")


def main() -> None:
    ap = argparse.ArgumentParser(description="MigrationController benchmark")
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=150000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--rebuilds", type=int, default=5,
                    help="in-process repetitions of the rebuild and of the arbitration")
    ap.add_argument("--policy", default=str(HERE / "migration-policy.yaml"))
    ap.add_argument("--no-workloads", action="store_true",
                    help="do not add the ReplicaSets/Deployments/StatefulSets the pods name")
    opts = ap.parse_args()
    path = ensure_snapshot(opts.nodes, opts.pods)
    runs = []
    for _ in range(opts.runs):
        out = subprocess.run([sys.executable, "-c", _CHILD, str(path), opts.policy,
                              str(opts.jobs), str(opts.rebuilds),
                              "0" if opts.no_workloads else "1"],
                             check=True, capture_output=True, text=True).stdout
        runs.append(json.loads(out))
    first = runs[0]
    rebuild = [statistics.median(r["rebuild"]) for r in runs]
    arb = [statistics.median(r["arbitrate"]) for r in runs]
    arb_first = [r["arbitrate"][0] for r in runs]
    rss = [r["peak_rss"] / 2**20 for r in runs]
    print(f"snapshot: {path} ({first['objects']} objects, {first['workloads_added']} workload "
          f"objects added, {first['pods']} pods)")
    print(f"rebuild (add_all + finish), per-run median of {opts.rebuilds}: {_span(rebuild)}")
    print(f"arbitrate {first['jobs']} waiting jobs, per-run median of {opts.rebuilds}: "
          f"{_span(arb, '.3f')}; {first['jobs'] / statistics.median(arb):.0f} jobs/s")
    print(f"  first (cold) arbitration: {_span(arb_first, '.3f')}")
    v = first["verdicts"]
    print(f"  verdicts: {v['passed']} passed, {v['waiting']} waiting, {v['failed']} failed")
    for reason, count in first["reasons"]:
        print(f"    {count:6d}  {reason}")
    print(f"cycle (RemoveDuplicates behind MigrationController): "
          f"{_span([r['cycle'] for r in runs])}")
    print(f"  {first['evicted']} evicted, {first['limited']} limited, {first['filtered']} "
          f"filtered; decisions {first['decisions']}")
    print(f"peak RSS: {_span(rss, '.0f', ' MiB')}")


if __name__ == "__main__":
    main()
