"""Generate a production-like cluster: workloads pinned to node pools, placed as a scheduler would.

What `generate_cluster.py`'s uniform cluster lacks and real clusters have: node pools by label
(5 to 50 nodes, every sixth tainted), workloads selecting their pool by nodeSelector (45 %) or
required node affinity (40 %) or pinned by hostname (3 %), a few percent of large pods, six
DaemonSet pods per node pinned by matchFields on the node name, priority classes, and a
PodDisruptionBudget over 80 % of multi-replica workloads.

Scenarios (--scenario):
  production     the default. Every pod, in creation order, goes to a node it could be scheduled
                 on: of its pool (or its node), taints tolerated, requests within what is left
                 of allocatable cpu, memory and pods; most-allocated with noise, so some nodes
                 end near 100 % and others idle. What fits nowhere is Pending, PodScheduled=False
                 Unschedulable. Then DRIFT_SHARE of the nodes move to another pool (label
                 changed, DRIFT annotation, listed in the summary): their pods break affinity.
                 Pods as Helm and istio leave them (~10 KB): 12 labels, istio annotations and
                 sidecar, managedFields from kubectl or helm, kube-controller-manager, kubelet.
  production-v1  the 2026-11-24 cluster: pools filled least-allocated and then overflowing onto
                 any node, past allocatable ("overcommitted" nodes); ~5 KB pods.
  uniform        generate_cluster.py's cluster.

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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
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
from generate_cluster import generate as generate_uniform

POOL = "node.example.com/pool"
DAEMONSETS = ["kube-proxy", "node-exporter", "fluent-bit", "csi-node", "npd", "cni"]
PRIORITIES = [("high", 100000), ("default", 1000), ("low", -10), ("batch", 0)]


def generate_v1(N: int, P: int, out: str, seed: int) -> None:
    """The production-v1 scenario (2026-11-24): pods bound past allocatable when pools overflow."""
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


# --- the production scenario (2026-11-26): placed by a scheduler-like pass -------------------

DRIFT = "bench.desched.io/drift"  # node annotation: its pool label changed after placement
DRIFT_SHARE = 0.005  # of the nodes, relabelled after placement (NodeAffinity finds work there)
JITTER = 0.35  # random share of a node's score: most-allocated with drift, not strict packing
ZONE, HOSTNAME = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
# The needs-work scenario (generate_needs_work).
OUTAGE_ZONE = "zone-c"
OUTAGE = (0.6, 0.9)  # when the zone was down, as shares of the pods created
SPREAD_SHARE = 0.3  # of the pinned workloads of 3 replicas or more: zone spread
ANTI_SHARE = 0.1  # of the others: one replica per node (required anti-affinity)
PREFERRED_SHARE = 0.6  # of the rest: preferred anti-affinity, as most Helm charts
NEEDS_WORK_DRIFT_SHARE = 0.02
RETAINT_SHARE = 0.01
OLD_SHARE = 0.05
FAILED_SHARE = 0.005
UNREADY_SHARE = 0.02
MESH_SHARE = 0.7
ISTIO_STATUS = json.dumps(
    {
        "initContainers": None,
        "containers": ["istio-proxy"],
        "volumes": ["workload-socket", "credential-socket", "workload-certs", "istio-envoy",
                    "istio-data", "istio-podinfo", "istio-token", "istiod-ca-cert"],
        "imagePullSecrets": None,
        "revision": "default",
    },
    separators=(",", ":"),
)


def _fields(names: list[str]) -> dict[str, Any]:
    return {f"f:{name}": {} for name in names}


def _container_fields(c: dict[str, Any]) -> dict[str, Any]:
    """What kube-controller-manager's managedFields entry lists for one container."""
    keyed = ("resources", "env", "ports", "volumeMounts")
    fields: dict[str, Any] = {".": {}, **_fields([k for k in c if k not in keyed])}
    fields["f:ports"] = {".": {}} | {
        f'k:{{"containerPort":{p["containerPort"]},"protocol":"TCP"}}':
            {".": {}, **_fields(list(p))}
        for p in c["ports"]
    }
    fields["f:volumeMounts"] = {".": {}} | {
        f'k:{{"mountPath":"{m["mountPath"]}"}}': {".": {}, **_fields(list(m))}
        for m in c["volumeMounts"]
    }
    fields["f:env"] = {".": {}} | {
        f'k:{{"name":"{e["name"]}"}}': {".": {}, "f:name": {},
                                         **({"f:value": {}} if "value" in e
                                            else {"f:valueFrom": {".": {}, "f:fieldRef": {}}})}
        for e in c["env"]
    }
    fields["f:resources"] = {".": {}, **{f"f:{kind}": _fields(list(c["resources"][kind]))
                                         for kind in ("limits", "requests")}}
    return fields


def _managed_fields(template: dict[str, Any], client_manager: str) -> list[dict[str, Any]]:
    """Three managers, as the API server records them for a Helm-installed pod: the client that
    labelled it after creation, kube-controller-manager (the pod from its ReplicaSet's template)
    and the kubelet (status). Built once per workload; pods share it with their own times."""
    meta, spec = template["metadata"], template["spec"]
    owner_uid = meta["ownerReferences"][0]["uid"]
    client: dict[str, Any] = {
        "manager": client_manager,
        "operation": "Update",
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:annotations": {"f:checksum/config": {}},
                                    "f:labels": {"f:app.kubernetes.io/version": {}}}},
    }
    controller = {
        "manager": "kube-controller-manager",
        "operation": "Update",
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {
                "f:annotations": {".": {}, **_fields(list(meta["annotations"]))},
                "f:generateName": {},
                "f:labels": {".": {}, **_fields(list(meta["labels"]))},
                "f:ownerReferences": {".": {}, f'k:{{"uid":"{owner_uid}"}}': {}},
            },
            "f:spec": {
                "f:containers": {f'k:{{"name":"{c["name"]}"}}': _container_fields(c)
                                 for c in spec["containers"]},
                **_fields(["dnsPolicy", "enableServiceLinks", "priorityClassName",
                           "restartPolicy", "schedulerName", "serviceAccount",
                           "serviceAccountName", "terminationGracePeriodSeconds"]),
                "f:securityContext": {".": {}, **_fields(["fsGroup", "runAsNonRoot"])},
                "f:volumes": {".": {}} | {f'k:{{"name":"{v["name"]}"}}': {".": {}, "f:name": {}}
                                          for v in spec["volumes"]},
            },
        },
    }
    kubelet = {
        "manager": "kubelet",
        "operation": "Update",
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "subresource": "status",
        "fieldsV1": {"f:status": {
            "f:conditions": {
                f'k:{{"type":"{t}"}}': {".": {}, **_fields(["lastProbeTime", "lastTransitionTime",
                                                           "status", "type"])}
                for t in ("ContainersReady", "Initialized", "PodReadyToStartContainers", "Ready")
            },
            "f:containerStatuses": {},
            **_fields(["hostIP", "hostIPs", "phase", "podIP", "podIPs", "startTime"]),
        }},
    }
    return [client, controller, kubelet]


def _istio_proxy(rng: random.Random) -> dict[str, Any]:
    """The sidecar istio's injector adds (with istio's CNI plugin: no istio-init container)."""
    proxy = container("istio-proxy", "docker.io/istio/proxyv2:1.24.0", 100, 128, rng)
    proxy["args"] = ["proxy", "sidecar", "--domain", "$(POD_NAMESPACE).svc.cluster.local",
                     "--proxyLogLevel=warning", "--proxyComponentLogLevel=misc:error",
                     "--log_output_level=default:info"]
    proxy["env"] = proxy["env"] + [
        {"name": name, "value": value} for name, value in (
            ("PILOT_CERT_PROVIDER", "istiod"), ("CA_ADDR", "istiod.istio-system.svc:15012"),
            ("ISTIO_META_APP_CONTAINERS", "main"), ("ISTIO_META_MESH_ID", "cluster.local"))
    ]
    proxy["ports"] = [{"containerPort": 15090, "name": "http-envoy-prom", "protocol": "TCP"}]
    proxy["readinessProbe"] = {"httpGet": {"path": "/healthz/ready", "port": 15021,
                                           "scheme": "HTTP"},
                               "periodSeconds": 15, "timeoutSeconds": 3, "failureThreshold": 4}
    del proxy["livenessProbe"]
    return proxy


class _Nodes:
    """What is left of each node's allocatable, and a scheduler-like choice within a pool."""

    def __init__(self, nodes: list[dict[str, Any]], rng: random.Random) -> None:
        self.rng = rng
        self.cpu = [int(n["status"]["allocatable"]["cpu"][:-1]) for n in nodes]
        self.mem = [int(n["status"]["allocatable"]["memory"][:-2]) * 1024 for n in nodes]  # Mi
        self.slots = [int(n["status"]["allocatable"]["pods"]) for n in nodes]
        self.alloc_cpu = list(self.cpu)
        # Per candidate list (kept alive by the caller, so its id stays its own): requests
        # (cpu, mem) that found no node; requests at least as large in both cannot fit either
        # while pods only arrive, so a full pool is not scanned again for them.
        self.failed: dict[int, list[tuple[int, int]]] = {}

    def take(self, n: int, cpu: int, mem: int) -> None:
        self.cpu[n] -= cpu
        self.mem[n] -= mem
        self.slots[n] -= 1

    def give(self, n: int, cpu: int, mem: int) -> None:
        """A pod left node `n` (its zone went down): what it held is free again, so requests
        that found no room before may fit now."""
        self.cpu[n] += cpu
        self.mem[n] += mem
        self.slots[n] += 1
        self.failed.clear()

    def choose(self, cands: list[int], cpu: int, mem: int,
               skip: set[int] | None = None) -> int | None:
        """Most-allocated (by cpu) among the nodes where the requests fit, with some noise: hot
        nodes fill up to the brim while others stay nearly idle, as drift leaves them. `skip`:
        nodes a required pod anti-affinity rules out."""
        failed = self.failed.setdefault(id(cands), [])
        if any(cpu >= c and mem >= m for c, m in failed):
            return None
        free_cpu, free_mem, slots, alloc = self.cpu, self.mem, self.slots, self.alloc_cpu
        random = self.rng.random
        best, best_score = None, -1.0
        for n in cands:
            if free_cpu[n] >= cpu and free_mem[n] >= mem and slots[n] > 0 and (
                    not skip or n not in skip):
                score = 1.0 - free_cpu[n] / alloc[n] + JITTER * random()
                if score > best_score:
                    best, best_score = n, score
        if best is None and not skip:
            failed.append((cpu, mem))
            del failed[:-8]  # the latest few: a full pool sees the same sizes again and again
        return best


def _workload_template(app: str, ns: str, cpu: int, mem: int, extra: dict[str, Any],
                       rng: random.Random, mesh: bool = True) -> dict[str, Any]:
    """What every replica of a Helm-installed, istio-injected (`mesh`) Deployment shares."""
    release = f"{ns}-{app}"
    version = f"1.{rng.randrange(17)}.{rng.randrange(5)}"
    hash_ = f"{rng.getrandbits(40):010x}"[:10]
    labels = {
        "app": app,
        "app.kubernetes.io/name": app,
        "app.kubernetes.io/instance": release,
        "app.kubernetes.io/version": version,
        "app.kubernetes.io/component": rng.choice(["api", "worker", "frontend", "cache"]),
        "app.kubernetes.io/part-of": ns,
        "app.kubernetes.io/managed-by": "Helm",
        "helm.sh/chart": f"{app}-{version}",
        "pod-template-hash": hash_,
        "security.istio.io/tlsMode": "istio",
        "service.istio.io/canonical-name": app,
        "service.istio.io/canonical-revision": version,
    }
    annotations = {
        "checksum/config": f"{rng.getrandbits(256):064x}",
        "istio.io/rev": "default",
        "kubectl.kubernetes.io/default-container": "main",
        "kubectl.kubernetes.io/default-logs-container": "main",
        "prometheus.io/path": "/stats/prometheus",
        "prometheus.io/port": "15020",
        "prometheus.io/scrape": "true",
        "sidecar.istio.io/status": ISTIO_STATUS,
    }
    main = container("main", f"registry.example.com/{ns}/{app}:{version}", cpu, mem, rng)
    proxy = _istio_proxy(rng)
    owner = f"{app}-{hash_}"
    spec: dict[str, Any] = {
        "containers": [main, proxy] if mesh else [main],
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "serviceAccount": app,
        "serviceAccountName": app,
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "securityContext": {"runAsNonRoot": True, "fsGroup": 1337},
        "tolerations": [
            {"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}
            for key in ("not-ready", "unreachable")
        ],
        "volumes": [{"name": name, "emptyDir": {}} for name in
                    ("workload-socket", "credential-socket", "workload-certs", "istio-envoy",
                     "istio-data")]
        + [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt",
                           "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
        **extra,
    }
    meta = {
        "name": owner,
        "generateName": f"{owner}-",
        "namespace": ns,
        "labels": labels,
        "annotations": annotations,
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                             "uid": f"uid-{ns}-{owner}", "controller": True,
                             "blockOwnerDeletion": True}],
    }
    template: dict[str, Any] = {"metadata": meta, "spec": spec}
    # A third of the releases were last touched by kubectl apply, the rest by Helm.
    manager = "kubectl-client-side-apply" if rng.random() < 0.33 else "helm"
    template["managedFields"] = _managed_fields(template, manager)
    return template


def _pod_from(template: dict[str, Any], name: str, node: str | None, node_index: int,
              created: datetime, prio: tuple[str, int], rng: random.Random,
              node_count: int) -> dict[str, Any]:
    """One replica: the template's shared parts plus what the API server, the scheduler and the
    kubelet wrote for this pod. An unplaced pod is Pending with PodScheduled=False."""
    meta = template["metadata"]
    at = ts(created)
    managed = [{**entry, "time": at} for entry in template["managedFields"]]
    spec = {**template["spec"], "priorityClassName": prio[0], "priority": prio[1]}
    metadata = {**meta, "name": name, "uid": uid(rng),
                "resourceVersion": str(rng.randint(10**6, 10**9)),
                "creationTimestamp": at}
    if node is None:
        metadata["managedFields"] = managed[:2]
        return {
            "apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
            "status": {"phase": "Pending", "qosClass": "Burstable", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "lastProbeTime": None, "lastTransitionTime": at,
                "message": f"0/{node_count} nodes are available: insufficient cpu or memory "
                           "on the nodes the pod's node affinity allows. preemption: 0/"
                           f"{node_count} nodes are available: No preemption victims found "
                           "for incoming pod.",
            }]},
        }
    metadata["managedFields"] = managed
    spec["nodeName"] = node
    started = ts(created + timedelta(seconds=4))
    ip = f"10.{64 + node_index // 256}.{node_index % 256}.{rng.randint(2, 250)}"
    host = f"10.0.{node_index // 256}.{node_index % 256}"
    restarts = rng.choice([0] * 30 + [1, 4, 200])
    statuses = [{
        "name": c["name"], "image": c["image"],
        "imageID": f"{c['image'].split(':')[0]}@sha256:{rng.getrandbits(256):064x}",
        "containerID": f"containerd://{rng.getrandbits(256):064x}",
        "ready": True, "started": True, "restartCount": restarts if c["name"] == "main" else 0,
        "state": {"running": {"startedAt": started}},
        "lastState": {},
    } for c in spec["containers"]]
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
        "status": {
            "phase": "Running", "qosClass": "Burstable", "hostIP": host,
            "hostIPs": [{"ip": host}], "podIP": ip, "podIPs": [{"ip": ip}], "startTime": at,
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": at}
                for t in ("PodReadyToStartContainers", "Initialized", "Ready",
                          "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": statuses,
        },
    }


def _required_pool(p: int) -> dict[str, Any]:
    term = {"matchExpressions": [
        {"key": POOL, "operator": "In", "values": [f"pool-{p}"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    ]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}


def _on_node(name: str) -> dict[str, Any]:
    """A DaemonSet pod's affinity: its node by name, as the DaemonSet controller writes it."""
    field = {"key": "metadata.name", "operator": "In", "values": [name]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [field]}]}}}


def generate(N: int, P: int, out: str, seed: int, work: bool = False) -> dict[str, Any]:
    """The production scenario: pools as in production-v1, every pod placed in creation order by
    a scheduler-like pass (its pool's nodes whose taints it tolerates and where its requests fit
    what is left of allocatable cpu, memory and pods; most-allocated with noise), Pending and
    Unschedulable where nothing fits; then DRIFT_SHARE of the nodes relabelled. `work`: the
    needs-work scenario (generate_needs_work). Returns the summary it prints."""
    rng = random.Random(seed)
    nodes: list[dict[str, Any]] = []
    pools: list[list[int]] = []
    i = 0
    while i < N:
        size = min(rng.randint(5, 50), N - i)
        pools.append(list(range(i, i + size)))
        i += size
    pool_cpu = []
    node_pool = {}
    for p, members in enumerate(pools):
        cpu = rng.choice([8, 16, 32, 64])
        pool_cpu.append(cpu)
        for n in members:
            node = make_node(n, rng)
            node["metadata"]["labels"][POOL] = f"pool-{p}"
            node_pool[n] = p
            node["status"]["capacity"].update(cpu=str(cpu), memory=f"{cpu * 4}Gi")
            node["status"]["allocatable"] = {"cpu": f"{cpu * 1000 - 500}m",
                                             "memory": f"{cpu * 4 - 2}Gi", "pods": "110",
                                             "ephemeral-storage": "180Gi"}
            node["spec"]["taints"] = (
                [{"key": "dedicated", "value": f"pool-{p}", "effect": "NoSchedule"}]
                if p % 6 == 5 else [])
            nodes.append(node)
    free = _Nodes(nodes, rng)
    zone_of = [n["metadata"]["labels"][ZONE] for n in nodes]
    pods: list[dict[str, Any]] = []
    start = BASE_TIME - timedelta(days=30)
    span = timedelta(days=29)
    system = ("system-node-critical", 2000001000)
    for d in DAEMONSETS:
        template = _workload_template(d, "kube-system", 50, 64,
                                      {"tolerations": [{"operator": "Exists"}]}, rng, mesh=False)
        template["metadata"]["ownerReferences"][0].update(kind="DaemonSet", name=d,
                                                          uid=f"uid-kube-system-{d}")
        for n in range(N):
            name = f"node-{n:05d}"
            pod = _pod_from(template, f"{d}-{n:05d}", name, n, start + timedelta(minutes=n % 60),
                            system, rng, N)
            pod["spec"]["affinity"] = _on_node(name)
            free.take(n, 50, 64)
            pods.append(pod)
    # Teams deploy where there is room (capacity planning, autoscaled pools): a workload's pool
    # is drawn in proportion to the cpu its nodes have left, so few pods end up Pending.
    room = [sum(free.cpu[n] for n in m) for m in pools]
    pinned: set[int] = set()  # nodes holding pods pinned to their pool: drift shows there
    single = [[n] for n in range(N)]  # kept: _Nodes remembers failures by candidate list
    untainted = [p for p in range(len(pools)) if p % 6 != 5]
    pdbs: list[dict[str, Any]] = []
    pending = w = 0
    placer = _Placer(free, zone_of, rng)
    outage = OUTAGE if work else None
    for_workload: list[_Workload] = []
    while len(pods) < P:
        if outage is not None and len(pods) >= outage[0] * P and not placer.down:
            placer.down = OUTAGE_ZONE  # its nodes are gone: their pods start elsewhere
            pending += _evacuate(pods, for_workload, placer, start + span * outage[0], rng, N)
        if outage is not None and len(pods) >= outage[1] * P and placer.down:
            placer.down = None  # back, empty but for the DaemonSets: nothing moves there
        p = rng.choices(range(len(pools)), [max(r, 1) for r in room])[0]
        members = pools[p]
        w += 1
        ns = f"team-{w % 60:02d}"
        app = f"app-{w:05d}"
        replicas = min(P - len(pods), rng.choice([1, 2, 3, 3, 5, 8, 12, 20, 40, 60]))
        how = rng.random()
        extra: dict[str, Any] = {}
        # Where the scheduler may put it: its pool, one node, or (unpinned) its pool first and
        # then any untainted pool, as a preferred affinity for the pool would.
        cands = [members]
        if how < 0.45:
            extra["nodeSelector"] = {POOL: f"pool-{p}"}
        elif how < 0.85:
            extra["affinity"] = _required_pool(p)
        elif how < 0.88:
            extra["nodeSelector"] = {"kubernetes.io/hostname": f"node-{members[0]:05d}"}
            cands = [single[members[0]]]
        else:
            cands += [pools[rng.choice(untainted)] for _ in range(3)]
        if p % 6 == 5:
            extra["tolerations"] = [
                {"key": f"node.kubernetes.io/{key}", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300}
                for key in ("not-ready", "unreachable")
            ] + [{"key": "dedicated", "operator": "Equal", "value": f"pool-{p}",
                  "effect": "NoSchedule"}]
        spread = anti = False
        if work and replicas >= 3 and how < 0.85:
            spread = rng.random() < SPREAD_SHARE
            anti = not spread and rng.random() < ANTI_SHARE and replicas <= len(members)
            _scheduling_terms(extra, app, spread, anti, rng.random() < PREFERRED_SHARE)
        if rng.random() < 0.03:  # large pods, sized to their pool's nodes
            cpu = min(rng.choice([12000, 20000]), pool_cpu[p] * 700)
            mem = cpu * 3
        else:
            cpu = rng.choice([100, 250, 500, 1000])
            mem = rng.choice([128, 256, 512, 1024, 2048])
        mesh = not work or rng.random() < MESH_SHARE
        template = _workload_template(app, ns, cpu, mem, extra, rng, mesh=mesh)
        # The pod's requests, as the scheduler sums them: main container plus the sidecar.
        need_cpu, need_mem = cpu + 100 * mesh, mem + 128 * mesh
        created = start + span * (len(pods) / P)
        if work and rng.random() < OLD_SHARE:  # deployed long ago, never rolled since
            created -= timedelta(days=rng.randint(15, 60))
        owner = template["metadata"]["name"]
        wl = _Workload(template, cands, need_cpu, need_mem, spread, anti, [])
        for_workload.append(wl)
        for r in range(replicas):
            chosen = placer.place(wl)
            if chosen is None:
                pending += 1
            else:
                placer.on[len(pods)] = chosen
                room[node_pool[chosen]] -= need_cpu
                if how < 0.85:
                    pinned.add(chosen)
            wl.pods.append(len(pods))
            pods.append(_pod_from(
                template, _unique(f"{owner}-", f"{r:x}", placer.names, rng),
                None if chosen is None else f"node-{chosen:05d}", chosen or 0,
                created + timedelta(seconds=r), rng.choice(PRIORITIES), rng, N))
        if replicas > 1 and rng.random() < 0.8:
            pdbs.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                         "metadata": {"name": app, "namespace": ns},
                         "spec": {"maxUnavailable": 1,
                                  "selector": {"matchLabels": {"app": app}}}})
    drifted = _drift(nodes, pools, untainted, pinned, rng,
                     NEEDS_WORK_DRIFT_SHARE if work else DRIFT_SHARE)
    retainted = _retaint(nodes, pools, untainted, set(drifted), rng) if work else []
    states = _pod_states(pods, rng) if work else {}
    if work:  # as `desched snapshot` or `kubectl get pdb -o json` captures them
        _budget_statuses(pdbs, pods, for_workload)
    # What `desched snapshot` also captures: the workloads behind the pods (the production
    # scenario keeps its published shape without them).
    owners = _owners(for_workload, pods) if work else []
    _write(out, nodes, pdbs, pods, owners)
    # Median pod as the API server sends it (compact) and as `kubectl get -o json` prints it.
    sample = [msgspec.json.encode(pod) for pod in pods[:: max(1, len(pods) // 2000)]]
    compact = sorted(len(text) for text in sample)
    pretty = sorted(len(msgspec.json.format(text, indent=4)) for text in sample)
    summary = {
        "nodes": N, "pods": len(pods), "pending": pending, "workloads": w, "pdbs": len(pdbs),
        "overcommitted": sum(1 for n in range(N)
                             if min(free.cpu[n], free.mem[n], free.slots[n]) < 0),
        "pools": len(pools), "drifted": drifted,
        **({"retainted": retainted, "outage_zone": OUTAGE_ZONE, **states} if work else {}),
        "median_pod_bytes": compact[len(compact) // 2],
        "median_pod_bytes_kubectl": pretty[len(pretty) // 2],
    }
    print(*(f"{k} {len(v) if isinstance(v, list) else v}" for k, v in summary.items()))
    return summary


def generate_needs_work(N: int, P: int, out: str, seed: int) -> dict[str, Any]:
    """The needs-work scenario: the production cluster as it looks when users point a
    descheduler at it. A zone (OUTAGE_ZONE) went down a little past the middle of the creation
    span: the pods on its nodes were recreated on the surviving nodes of their pools (pools
    span the three zones), and pods created while it was down landed there too; it came back
    empty but for its DaemonSets. SPREAD_SHARE of the multi-replica pinned workloads spread
    over zones (maxSkew 1, DoNotSchedule), honoured at every placement (so the outage, not the
    scheduler, skewed them); ANTI_SHARE require one replica per node; PREFERRED_SHARE prefer it,
    as most Helm charts do. Then NEEDS_WORK_DRIFT_SHARE of the nodes relabelled, RETAINT_SHARE
    tainted NoSchedule, OLD_SHARE of the workloads deployed 15-60 days before the span,
    FAILED_SHARE of the pods Failed (OOMKilled) and UNREADY_SHARE not Ready with the kubelet's
    message, and the istio sidecar (with its JSON status annotation) on MESH_SHARE of them."""
    return generate(N, P, out, seed, work=True)


@dataclass
class _Workload:
    template: dict[str, Any]
    cands: list[list[int]]  # the scheduler's choice, first group first
    cpu: int
    mem: int
    spread: bool  # over zones, maxSkew 1, DoNotSchedule
    anti: bool  # one replica per node, required
    pods: list[int]  # indices of its pods in the cluster's list


class _Placer:
    """The scheduler's filters for a workload's next replica: its candidate groups (less a
    zone that is down), its zone spread (only the zones holding fewest of its replicas, among
    the zones its nodes are in) and its required anti-affinity (no node holding a replica)."""

    def __init__(self, free: _Nodes, zone_of: list[str], rng: random.Random) -> None:
        self.free = free
        self.zone_of = zone_of
        self.rng = rng
        self.down: str | None = None
        self.names: set[str] = set()  # the workload pods' names given so far
        self.on: dict[int, int] = {}  # pod index -> node, for the pods placed
        # Candidate lists by (id of a group, zone or None, down zone), kept alive here: _Nodes
        # remembers failures by the list's id. Groups (pools, single nodes) live as long.
        self._lists: dict[tuple[int, str | None, str | None], list[int]] = {}

    def _within(self, group: list[int], zone: str | None) -> list[int]:
        key = (id(group), zone, self.down)
        found = self._lists.get(key)
        if found is None:
            found = self._lists[key] = [n for n in group if self.zone_of[n] != self.down
                                        and (zone is None or self.zone_of[n] == zone)]
        return found

    def place(self, wl: _Workload) -> int | None:
        nodes = [self.on[i] for i in wl.pods if i in self.on]
        skip = set(nodes) if wl.anti else None
        for group in wl.cands:
            if wl.spread:
                chosen = self._spread(wl, group, nodes, skip)
            else:
                chosen = self.free.choose(self._within(group, None), wl.cpu, wl.mem, skip)
            if chosen is not None:
                self.free.take(chosen, wl.cpu, wl.mem)
                return chosen
        return None

    def _spread(self, wl: _Workload, group: list[int], nodes: list[int],
                skip: set[int] | None) -> int | None:
        zones = sorted({self.zone_of[n] for n in self._within(group, None)})
        if not zones:
            return None
        count = {z: 0 for z in zones}
        for n in nodes:
            if self.zone_of[n] in count:
                count[self.zone_of[n]] += 1
        fewest = min(count.values())
        for zone in self.rng.sample(zones, len(zones)):
            if count[zone] == fewest:
                chosen = self.free.choose(self._within(group, zone), wl.cpu, wl.mem, skip)
                if chosen is not None:
                    return chosen
        return None  # DoNotSchedule: no zone within the skew has room


def _unique(prefix: str, suffix: str, taken: set[str], rng: random.Random) -> str:
    """A pod name as a ReplicaSet makes one (five random characters), never one already
    given: two pods of one name cannot both exist."""
    while True:
        name = f"{prefix}{uid(rng)[:5]}{suffix}"
        if name not in taken:
            taken.add(name)
            return name


def _evacuate(pods: list[dict[str, Any]], workloads: list[_Workload], placer: _Placer,
              at: datetime, rng: random.Random, node_count: int) -> int:
    """The down zone's pods recreated on its workloads' other nodes, as their ReplicaSets would
    (new names, new pods); returns how many found no room and stay Pending."""
    down = placer.down
    pending = 0
    for wl in workloads:
        gone = [i for i in wl.pods if i in placer.on and placer.zone_of[placer.on[i]] == down]
        for i in gone:
            node = placer.on.pop(i)
            placer.free.give(node, wl.cpu, wl.mem)
        for k, i in enumerate(gone):
            chosen = placer.place(wl)
            old = pods[i]
            name = _unique(f"{wl.template['metadata']['name']}-", "r", placer.names, rng)
            prio = (old["spec"]["priorityClassName"], old["spec"]["priority"])
            pods[i] = _pod_from(wl.template, name, None if chosen is None
                                else f"node-{chosen:05d}", chosen or 0,
                                at + timedelta(seconds=k), prio, rng, node_count)
            if chosen is None:
                pending += 1
            else:
                placer.on[i] = chosen
    return pending


def _scheduling_terms(extra: dict[str, Any], app: str, spread: bool, anti: bool,
                      preferred: bool) -> None:
    """What a Helm chart writes for the spread and anti-affinity the placement honours."""
    selector = {"matchLabels": {"app": app}}
    if spread:
        extra["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE,
                                               "whenUnsatisfiable": "DoNotSchedule",
                                               "labelSelector": selector}]
    affinity = extra.setdefault("affinity", {})
    if anti:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": HOSTNAME}]}
    elif preferred:
        affinity["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {"labelSelector": selector,
                                                "topologyKey": HOSTNAME}}]}
    if not affinity:
        del extra["affinity"]


def _retaint(nodes: list[dict[str, Any]], pools: list[list[int]], untainted: list[int],
             drifted: set[str], rng: random.Random) -> list[str]:
    """RETAINT_SHARE of the untainted nodes tainted NoSchedule after placement (a maintenance
    an operator started): their pods do not tolerate it."""
    candidates = sorted(n for p in untainted for n in pools[p]
                        if nodes[n]["metadata"]["name"] not in drifted)
    chosen = rng.sample(candidates, min(len(candidates),
                                        max(1, round(len(nodes) * RETAINT_SHARE))))
    for n in chosen:
        nodes[n]["spec"]["taints"] = [*nodes[n]["spec"]["taints"], {
            "key": "node.example.com/maintenance", "value": "kernel-upgrade",
            "effect": "NoSchedule", "timeAdded": ts(BASE_TIME - timedelta(hours=2))}]
    return sorted(nodes[n]["metadata"]["name"] for n in chosen)


def _pod_states(pods: list[dict[str, Any]], rng: random.Random) -> dict[str, int]:
    """FAILED_SHARE of the bound workload pods Failed (OOMKilled), UNREADY_SHARE running but not
    Ready, with what the kubelet writes for each."""
    failed = unready = 0
    for pod in pods:
        if pod["metadata"]["namespace"] == "kube-system" or "nodeName" not in pod["spec"]:
            continue
        roll = rng.random()
        status = pod["status"]
        main = status["containerStatuses"][0]
        if roll < FAILED_SHARE:
            failed += 1
            status["phase"] = "Failed"
            finished = ts(BASE_TIME - timedelta(hours=rng.randint(2, 48)))
            main.update(ready=False, started=False, state={"terminated": {
                "exitCode": 137, "reason": "OOMKilled", "startedAt": status["startTime"],
                "finishedAt": finished, "containerID": main["containerID"]}})
            _not_ready(status, finished, "PodFailed", "")
        elif roll < FAILED_SHARE + UNREADY_SHARE:
            unready += 1
            main["ready"] = False
            since = ts(BASE_TIME - timedelta(minutes=rng.randint(5, 600)))
            _not_ready(status, since, "ContainersNotReady",
                       f"containers with unready status: [{main['name']}]")
    return {"failed": failed, "unready": unready}


def _budget_statuses(pdbs: list[dict[str, Any]], pods: list[dict[str, Any]],
                     workloads: list[_Workload]) -> None:
    """Each budget's status as the disruption controller writes it: its pods are its workload's
    (the selector is the app label); expected, the replicas its Deployment wants (the
    controller's scale, for maxUnavailable); healthy, those Ready and not being deleted."""
    replicas = {(wl.template["metadata"]["namespace"], wl.template["metadata"]["labels"]["app"]):
                len(wl.pods) for wl in workloads}
    healthy: Counter[tuple[str, str]] = Counter()
    for pod in pods:
        meta = pod["metadata"]
        app = meta["labels"].get("app")
        if app is None or "deletionTimestamp" in meta:
            continue
        if any(c["type"] == "Ready" and c["status"] == "True"
               for c in pod["status"].get("conditions", ())):
            healthy[meta["namespace"], app] += 1
    for pdb in pdbs:
        key = (pdb["metadata"]["namespace"], pdb["spec"]["selector"]["matchLabels"]["app"])
        expected = replicas[key]
        desired = max(0, expected - pdb["spec"]["maxUnavailable"])
        pdb["status"] = {"observedGeneration": 1, "disruptionsAllowed":
                         max(0, healthy[key] - desired), "currentHealthy": healthy[key],
                         "desiredHealthy": desired, "expectedPods": expected}


def _not_ready(status: dict[str, Any], since: str, reason: str, message: str) -> None:
    for cond in status["conditions"]:
        if cond["type"] in ("Ready", "ContainersReady"):
            cond.update(status="False", reason=reason, lastTransitionTime=since)
            if message:
                cond["message"] = message


def _drift(nodes: list[dict[str, Any]], pools: list[list[int]], untainted: list[int],
           pinned: set[int], rng: random.Random, share: float = 0.0) -> list[str]:
    """Relabel DRIFT_SHARE of the nodes (untainted, holding pool-pinned pods) to another pool
    after placement, as an operator moving nodes between pools would: their pods no longer match
    their affinity. Each such node carries the DRIFT annotation (what changed) and is returned,
    so checks can tell drift from a placement error."""
    movable = sorted(n for p in untainted for n in pools[p] if n in pinned)
    if len(untainted) < 2 or not movable:
        return []
    drifted = []
    for n in rng.sample(movable, min(len(movable), max(1, round(len(nodes) * share)))):
        meta = nodes[n]["metadata"]
        was = meta["labels"][POOL]
        meta["annotations"][DRIFT] = f"{POOL} was {was} at placement"
        meta["labels"][POOL] = f"pool-{rng.choice([q for q in untainted if f'pool-{q}' != was])}"
        drifted.append(meta["name"])
    return drifted


def _owners(workloads: list[_Workload], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each workload's ReplicaSet and the Deployment behind it, with the replicas it asks for
    and the counts its controller reports."""
    found = []
    for wl in workloads:
        meta = wl.template["metadata"]
        ns, rs_name = meta["namespace"], meta["name"]
        deployment = rs_name.rsplit("-", 1)[0]
        ready = sum(1 for i in wl.pods if pods[i]["status"]["phase"] == "Running" and all(
            c["status"] == "True" for c in pods[i]["status"]["conditions"]
            if c["type"] == "Ready"))
        counts = {"replicas": len(wl.pods), "readyReplicas": ready,
                  "availableReplicas": ready}
        selector = {"matchLabels": {"app": meta["labels"]["app"],
                                    "pod-template-hash": meta["labels"]["pod-template-hash"]}}
        found.append({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": rs_name, "namespace": ns, "uid": f"uid-{ns}-{rs_name}",
                         "labels": meta["labels"],
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                              "name": deployment,
                                              "uid": f"uid-{ns}-{deployment}",
                                              "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"replicas": len(wl.pods), "selector": selector},
            "status": {**counts, "fullyLabeledReplicas": len(wl.pods),
                       "observedGeneration": 1}})
        found.append({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": deployment, "namespace": ns,
                         "uid": f"uid-{ns}-{deployment}", "generation": 1,
                         "labels": {k: v for k, v in meta["labels"].items()
                                    if k != "pod-template-hash"}},
            "spec": {"replicas": len(wl.pods),
                     "selector": {"matchLabels": {"app": meta["labels"]["app"]}},
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                         "maxSurge": "25%", "maxUnavailable": "25%"}}},
            "status": {**counts, "updatedReplicas": len(wl.pods), "observedGeneration": 1}})
    return found


def _write(out: str, nodes: list[dict[str, Any]], pdbs: list[dict[str, Any]],
           pods: list[dict[str, Any]], owners: list[dict[str, Any]] | None = None) -> None:
    """JSON lines: node pages, the priority classes and budgets (and the workloads), pod pages
    of 500."""
    prios = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
              "metadata": {"name": n}, "value": v}
             for n, v in [*PRIORITIES, ("system-node-critical", 2000001000)]]
    encode = msgspec.json.Encoder().encode
    with open(out, "wb") as f:
        for start in range(0, len(nodes), 500):
            f.write(encode({"apiVersion": "v1", "kind": "NodeList",
                            "items": nodes[start:start + 500]}) + b"\n")
        f.write(encode({"apiVersion": "v1", "kind": "List", "items": prios + pdbs}) + b"\n")
        for start in range(0, len(owners or ()), 500):
            f.write(encode({"apiVersion": "v1", "kind": "List",
                            "items": (owners or [])[start:start + 500]}) + b"\n")
        for start in range(0, len(pods), 500):
            f.write(encode({"apiVersion": "v1", "kind": "PodList",
                            "items": pods[start:start + 500]}) + b"\n")


SCENARIOS: dict[str, Callable[[int, int, str, int], object]] = {
    "production": generate,
    "needs-work": generate_needs_work,
    "production-v1": generate_v1,
    "uniform": generate_uniform,
}


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
            # kubectl's YAML writer (go-yaml v2) folds long strings at 80 columns, as PyYAML's
            # does by default: a long condition message runs over several lines.
            text = yaml.dump(item, Dumper=yaml.CSafeDumper, default_flow_style=False,
                             sort_keys=True)
            dst.write("- " + text.rstrip("\n").replace("\n", "\n  ") + "\n")
        dst.write('kind: List\nmetadata:\n  resourceVersion: ""\n')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=150000)
    ap.add_argument("--seed", type=int, help="default: 7 (uniform: 42, as generate_cluster.py)")
    ap.add_argument("--scenario", choices=sorted(SCENARIOS), default="production",
                    help="production: placed by a scheduler-like pass (the default); "
                         "production-v1: the 2026-11-24 cluster, pools overflowing past "
                         "allocatable; uniform: generate_cluster.py's cluster")
    ap.add_argument("--out", required=True, help="directory")
    ap.add_argument("--list", action="store_true", help="also write the kubectl List form")
    ap.add_argument("--yaml", action="store_true", help="also write the kubectl YAML form")
    opts = ap.parse_args()
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    seed = opts.seed if opts.seed is not None else 42 if opts.scenario == "uniform" else 7
    SCENARIOS[opts.scenario](opts.nodes, opts.pods, str(out / "cluster.jsonl"), seed)
    if opts.list:
        to_kubectl_json(out / "cluster.jsonl", out / "cluster.json")
    if opts.yaml:
        to_kubectl_yaml(out / "cluster.jsonl", out / "cluster.yaml")


if __name__ == "__main__":
    main()
