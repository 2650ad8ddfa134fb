"""Generate a production-like cluster: workloads pinned to node pools, pools run full.

What `generate_cluster.py`'s uniform cluster lacks and real clusters have: node pools by label
(5 to 50 nodes, some tainted), workloads selecting their pool by nodeSelector (45 %) or required
node affinity (40 %) or pinned by hostname (3 %), pools filled least-allocated until full and then
overflowing (so most pods fit no other node), a few percent of large pods (12 or 20 cpu), six
DaemonSet pods per node pinned by matchFields on the node name, priority classes, and a
PodDisruptionBudget over 80 % of multi-replica workloads. Pods carry managedFields, the
last-applied annotation and a sidecar, like an API server's.

    python bench/generate_production.py --nodes 5000 --pods 150000 --out DIR

writes DIR/cluster.jsonl (one list page per line, what `desched snapshot` writes); with --list,
DIR/cluster.json: the same objects as one List document laid out as `kubectl get -o json`
prints it (keys sorted, four-space indent); with --yaml, DIR/cluster.yaml: that List as
`kubectl get -o yaml` prints it (keys sorted, two-space indent, sequences not indented).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate_cluster import (
    BASE_TIME,
    container,
    make_node,
    managed_fields,
    ts,
    uid,
)

POOL = "node.example.com/pool"
DAEMONSETS = ["kube-proxy", "node-exporter", "fluent-bit", "csi-node", "npd", "cni"]
PRIORITIES = [("high", 100000), ("default", 1000), ("low", -10), ("batch", 0)]


def generate(N: int, P: int, out: str, seed: int) -> None:
    rng = random.Random(seed)
    nodes, pools = [], []
    i = 0
    while i < N:
        size = min(rng.randint(5, 50), N - i)
        pools.append(list(range(i, i + size)))
        i += size
    node_pool = {}
    for p, members in enumerate(pools):
        cpu = rng.choice([8, 16, 32, 64])
        tainted = p % 6 == 5
        for n in members:
            node = make_node(n, rng)
            node["metadata"]["labels"][POOL] = f"pool-{p}"
            node["status"]["allocatable"] = {
                "cpu": f"{cpu * 1000 - 500}m",
                "memory": f"{cpu * 4 - 2}Gi",
                "pods": "110",
            }
            node["spec"]["taints"] = (
                [{"key": "dedicated", "value": f"pool-{p}", "effect": "NoSchedule"}]
                if tainted
                else []
            )
            nodes.append(node)
            node_pool[n] = p
    free = {n: [int(nodes[n]["status"]["allocatable"]["cpu"][:-1]), 110] for n in range(N)}
    pods = []

    def pod(name, ns, owner_kind, owner, n, cpu, spec_extra, labels, prio):
        c = container("main", f"registry.example.com/{owner}:v1", cpu, 256, rng)
        created = BASE_TIME - timedelta(minutes=rng.randint(5, 60 * 24 * 30))
        spec = {
            "nodeName": f"node-{n:05d}",
            "containers": [c, container("istio-proxy", "istio/proxyv2:1.24", 100, 128, rng)],
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "priorityClassName": prio[0],
            "priority": prio[1],
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
        }
        spec.update(spec_extra)
        return {
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": uid(rng),
                "creationTimestamp": ts(created),
                "labels": labels,
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
                        {"metadata": {"labels": labels}, "spec": {"containers": [c]}}
                    )
                },
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": owner_kind,
                        "name": owner,
                        "uid": f"uid-{ns}-{owner}",
                        "controller": True,
                    }
                ],
                "managedFields": managed_fields(rng),
            },
            "spec": spec,
            "status": {
                "phase": "Running",
                "qosClass": "Burstable",
                "conditions": [
                    {"type": t, "status": "True", "lastTransitionTime": ts(created)}
                    for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
                ],
                "containerStatuses": [
                    {"name": "main", "ready": True, "restartCount": rng.choice([0] * 30 + [5, 200])}
                ],
            },
        }

    DS = DAEMONSETS
    for n in range(N):
        for d in DS:
            spec = {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": [f"node-{n:05d}"],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                },
                "tolerations": [{"operator": "Exists"}],
            }
            pods.append(
                pod(
                    f"{d}-{n:05d}",
                    "kube-system",
                    "DaemonSet",
                    d,
                    n,
                    50,
                    spec,
                    {"app": d},
                    ("system-node-critical", 2000001000),
                )
            )
            free[n][0] -= 50
            free[n][1] -= 1
    pdbs, w = [], 0
    PRIOS = PRIORITIES
    while len(pods) < P:
        p = rng.randrange(len(pools))
        members = pools[p]
        w += 1
        ns = f"team-{w % 60:02d}"
        app = f"app-{w:05d}"
        owner = f"{app}-7d9f8b6c5d"
        replicas = min(P - len(pods), rng.choice([1, 2, 3, 3, 5, 8, 12, 20, 40, 60]))
        how = rng.random()
        extra = {}
        if how < 0.45:
            extra["nodeSelector"] = {POOL: f"pool-{p}"}
        elif how < 0.85:
            extra["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": POOL, "operator": "In", "values": [f"pool-{p}"]},
                                    {
                                        "key": "kubernetes.io/os",
                                        "operator": "In",
                                        "values": ["linux"],
                                    },
                                ]
                            }
                        ]
                    }
                }
            }
        elif how < 0.88:
            extra["nodeSelector"] = {"kubernetes.io/hostname": f"node-{members[0]:05d}"}
        if p % 6 == 5:
            extra.setdefault("tolerations", []).append(
                {
                    "key": "dedicated",
                    "operator": "Equal",
                    "value": f"pool-{p}",
                    "effect": "NoSchedule",
                }
            )
        big = rng.random() < 0.03
        cpu = rng.choice([12000, 20000]) if big else rng.choice([100, 250, 500, 1000])
        labels = {"app": app, "pod-template-hash": "7d9f8b6c5d", "team": ns}
        cand = members  # every workload is placed in its pool, pinned or not
        for r in range(replicas):
            # least-allocated within pool, honouring cpu and pods; overflow -> any node with room
            best = max(cand, key=lambda n: free[n][0])
            if free[best][0] < cpu or free[best][1] <= 0:
                best = rng.randrange(N)
            free[best][0] -= cpu
            free[best][1] -= 1
            pods.append(
                pod(
                    f"{owner}-{r:04d}x{w}",
                    ns,
                    "ReplicaSet",
                    owner,
                    best,
                    cpu,
                    json.loads(json.dumps(extra)),
                    labels,
                    rng.choice(PRIOS),
                )
            )
        if replicas > 1 and rng.random() < 0.8:
            pdbs.append(
                {
                    "apiVersion": "policy/v1",
                    "kind": "PodDisruptionBudget",
                    "metadata": {"name": app, "namespace": ns},
                    "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": app}}},
                }
            )
    prios = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": n},
            "value": v,
        }
        for n, v in [*PRIOS, ("system-node-critical", 2000001000)]
    ]
    with open(out, "w") as f:
        for start in range(0, len(nodes), 500):
            f.write(
                json.dumps(
                    {"apiVersion": "v1", "kind": "NodeList", "items": nodes[start : start + 500]},
                    separators=(",", ":"),
                )
                + "\n"
            )
        f.write(json.dumps({"apiVersion": "v1", "kind": "List", "items": prios + pdbs}) + "\n")
        for start in range(0, len(pods), 500):
            f.write(
                json.dumps(
                    {
                        "apiVersion": "v1",
                        "kind": "PodList",
                        "items": [
                            {"apiVersion": "v1", "kind": "Pod", **p}
                            for p in pods[start : start + 500]
                        ],
                    },
                    separators=(",", ":"),
                )
                + "\n"
            )
    over = sum(1 for n in range(N) if free[n][0] < 0)
    print(
        "nodes",
        N,
        "pods",
        len(pods),
        "workloads",
        w,
        "pdbs",
        len(pdbs),
        "overcommitted",
        over,
        "pools",
        len(pools),
    )


def to_kubectl_json(lines: Path, out: Path) -> None:
    """The JSON lines as one `kubectl get -o json` List, written item by item."""
    encoder = msgspec.json.Encoder(order="sorted")
    indent = b"        "
    with lines.open("rb") as src, out.open("wb") as dst:
        dst.write(b'{\n    "apiVersion": "v1",\n    "items": [\n')
        first = True
        for line in src:
            page: dict[str, Any] = json.loads(line)
            kind = page["kind"][: -len("List")]
            for item in page["items"]:
                if kind:
                    item = {"apiVersion": page.get("apiVersion", "v1"), "kind": kind, **item}
                text = msgspec.json.format(encoder.encode(item), indent=4)
                if not first:
                    dst.write(b",\n")
                dst.write(b"\n".join(indent + part for part in text.split(b"\n")))
                first = False
        dst.write(
            b'\n    ],\n    "kind": "List",\n    "metadata": {\n'
            b'        "resourceVersion": ""\n    }\n}\n'
        )


def _kubectl_items(lines: Path) -> Any:
    """Every object of the JSON lines with its own apiVersion and kind, as a List holds them."""
    with lines.open("rb") as src:
        for line in src:
            page: dict[str, Any] = json.loads(line)
            kind = page["kind"][: -len("List")]
            for item in page["items"]:
                yield {"apiVersion": page.get("apiVersion", "v1"), "kind": kind, **item}


def to_kubectl_yaml(lines: Path, out: Path) -> None:
    """The JSON lines as one `kubectl get -o yaml` List, written item by item."""
    with out.open("w") as dst:
        dst.write("apiVersion: v1\nitems:\n")
        for item in _kubectl_items(lines):
            text = yaml.dump(item, Dumper=yaml.CSafeDumper, default_flow_style=False,
                             sort_keys=True, width=10**9)
            dst.write("- " + text.rstrip("\n").replace("\n", "\n  ") + "\n")
        dst.write('kind: List\nmetadata:\n  resourceVersion: ""\n')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=150000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", required=True, help="directory")
    ap.add_argument("--list", action="store_true", help="also write the kubectl List form")
    ap.add_argument("--yaml", action="store_true", help="also write the kubectl YAML form")
    opts = ap.parse_args()
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    generate(opts.nodes, opts.pods, str(out / "cluster.jsonl"), opts.seed)
    if opts.list:
        to_kubectl_json(out / "cluster.jsonl", out / "cluster.json")
    if opts.yaml:
        to_kubectl_yaml(out / "cluster.jsonl", out / "cluster.yaml")


if __name__ == "__main__":
    main()
