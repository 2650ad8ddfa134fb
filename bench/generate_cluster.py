"""Generate a large, realistic cluster snapshot for the benchmarks.

Pods look like what an API server returns: labels, annotations (including kubectl's
last-applied-configuration), three managedFields entries, several containers with requests and
limits, init containers and sidecars on some, affinity, tolerations, topology spread constraints,
container statuses with restarts. Written as one JSON list page per line (500 items), the format
`desched snapshot` writes.

    python bench/generate_cluster.py --nodes 5000 --pods 150000 --out /tmp/cluster.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import UTC, datetime, timedelta

PAGE = 500
ZONES = ["zone-a", "zone-b", "zone-c"]
APPS_PER_NS = 40
DAEMONSETS = ["kube-proxy", "node-exporter", "fluent-bit", "calico-node", "csi-node", "npd"]
BASE_TIME = datetime(2026, 11, 1, tzinfo=UTC)


def ts(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def uid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def make_node(i: int, rng: random.Random) -> dict:
    name = f"node-{i:05d}"
    big = i % 5 == 0
    cpu, mem = (64, 256) if big else (32, 128)
    taints = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}] if i % 50 == 0 else []
    return {
        "metadata": {
            "name": name, "uid": uid(rng), "resourceVersion": str(rng.randint(1, 10**7)),
            "creationTimestamp": ts(BASE_TIME - timedelta(days=30)),
            "labels": {
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "topology.kubernetes.io/zone": ZONES[i % 3],
                "node.kubernetes.io/instance-type": "m6i.16xlarge" if big else "m6i.8xlarge",
                "nodepool": f"pool-{i % 4}",
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": {"podCIDR": f"10.{i // 256}.{i % 256}.0/24", "providerID": f"aws:///{name}",
                 "taints": taints},
        "status": {
            "capacity": {"cpu": str(cpu), "memory": f"{mem}Gi", "pods": "110",
                         "ephemeral-storage": "200Gi"},
            "allocatable": {"cpu": f"{cpu * 1000 - 500}m", "memory": f"{mem - 2}Gi", "pods": "110",
                            "ephemeral-storage": "180Gi"},
            "conditions": [
                {"type": t, "status": "False", "reason": f"No{t}",
                 "lastHeartbeatTime": ts(BASE_TIME), "lastTransitionTime": ts(BASE_TIME)}
                for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "KernelDeadlock",
                          "ReadonlyFilesystem", "FrequentKubeletRestart")
            ] + [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                  "lastHeartbeatTime": ts(BASE_TIME), "lastTransitionTime": ts(BASE_TIME)}],
            "nodeInfo": {"kubeletVersion": "v1.34.1", "osImage": "Ubuntu 24.04",
                         "containerRuntimeVersion": "containerd://2.1.0"},
            "images": [{"names": [f"registry.example.com/img-{j}:v{j}"], "sizeBytes": 10**8 + j}
                       for j in range(12)],
        },
    }


def managed_fields(rng: random.Random) -> list:
    spec = {f"f:{k}": {} for k in ("containers", "dnsPolicy", "enableServiceLinks",
                                   "restartPolicy", "schedulerName", "securityContext",
                                   "terminationGracePeriodSeconds", "tolerations", "affinity")}
    status = {f"f:{k}": {} for k in ("conditions", "containerStatuses", "hostIP", "phase",
                                     "podIP", "podIPs", "startTime")}
    return [
        {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
         "time": ts(BASE_TIME), "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}},
                                     "f:ownerReferences": {".": {}}}, "f:spec": spec}},
        {"manager": "kube-scheduler", "operation": "Update", "apiVersion": "v1",
         "time": ts(BASE_TIME), "fieldsType": "FieldsV1", "subresource": "status",
         "fieldsV1": {"f:status": {"f:conditions": {".": {}, 'k:{"type":"PodScheduled"}': {}}}}},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": ts(BASE_TIME),
         "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {"f:status": status}},
    ]


def container(name: str, image: str, cpu: int, mem: int, rng: random.Random,
              restart_policy: str | None = None) -> dict:
    c = {
        "name": name, "image": image, "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"},
                      "limits": {"cpu": f"{cpu * 2}m", "memory": f"{mem}Mi"}},
        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
        "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "POD_NAME", "valueFrom": {
            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
        "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                          "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                          "periodSeconds": 10, "timeoutSeconds": 1, "failureThreshold": 3},
    }
    if restart_policy:
        c["restartPolicy"] = restart_policy
    return c


def make_pod(i: int, node: str, node_index: int, rng: random.Random, ds: str | None) -> dict:
    ns = f"team-{i % 60:02d}"
    if ds is not None:
        app, kind, owner = ds, "DaemonSet", ds
        ns = "kube-system"
    else:
        app = f"app-{(i // 60) % APPS_PER_NS:02d}"
        roll = i % 100
        kind = "StatefulSet" if roll < 2 else "Job" if roll < 5 else "ReplicaSet"
        owner = f"{app}-7d9f8b6c5d" if kind == "ReplicaSet" else app
    name = f"{owner}-{i:06d}"
    created = BASE_TIME - timedelta(minutes=rng.randint(5, 60 * 24 * 20))
    containers = [container("main", f"registry.example.com/{app}:v1.{i % 7}",
                            rng.choice([50, 100, 250, 500]), rng.choice([64, 128, 256, 512]), rng)]
    init = []
    if i % 4 == 0:
        containers.append(container("istio-proxy", "docker.io/istio/proxyv2:1.24.0", 100, 128, rng))
    if i % 10 == 0:
        init.append(container("init-config", "busybox:1.36", 10, 16, rng))
    if i % 25 == 0:
        init.append(container("log-shipper", "fluent/fluent-bit:3.0", 50, 64, rng, "Always"))
    labels = {"app": app, "app.kubernetes.io/name": app, "app.kubernetes.io/part-of": ns,
              "pod-template-hash": "7d9f8b6c5d", "version": f"v1.{i % 7}"}
    spec: dict = {
        "nodeName": node, "containers": containers, "restartPolicy": "Always",
        "schedulerName": "default-scheduler", "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
        "securityContext": {"runAsNonRoot": True, "fsGroup": 1000},
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300},
        ],
        "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt",
                           "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
    }
    if init:
        spec["initContainers"] = init
    if i % 9 == 0:
        spec["volumes"].append({"name": "cache", "emptyDir": {}})
    if i % 2 == 0 and ds is None:
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app": app}},
                    "topologyKey": "kubernetes.io/hostname"}}]},
        }
    if i % 5 == 0 and ds is None:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": app}}}]
    restarts = rng.choice([0] * 20 + [1, 3, 12, 150])
    statuses = [{
        "name": c["name"], "image": c["image"], "imageID": f"{c['image']}@sha256:{'a' * 64}",
        "containerID": f"containerd://{'b' * 64}", "ready": True, "started": True,
        "restartCount": restarts,
        "state": {"running": {"startedAt": ts(created + timedelta(seconds=20))}},
        **({"lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                         "startedAt": ts(created), "finishedAt": ts(created)}}}
           if restarts else {}),
    } for c in containers]
    meta = {
        "name": name, "generateName": f"{owner}-", "namespace": ns, "uid": uid(rng),
        "resourceVersion": str(rng.randint(1, 10**8)), "creationTimestamp": ts(created),
        "labels": labels,
        "annotations": {
            "kubectl.kubernetes.io/restartedAt": ts(created),
            "prometheus.io/scrape": "true", "prometheus.io/port": "8080",
            "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": labels}}),
        },
        "ownerReferences": [{"apiVersion": "apps/v1" if kind != "Job" else "batch/v1",
                             "kind": kind, "name": owner, "uid": f"uid-{ns}-{owner}",
                             "controller": True, "blockOwnerDeletion": True}],
        "managedFields": managed_fields(rng),
    }
    if i % 250 == 0:
        meta["deletionTimestamp"] = ts(BASE_TIME)
    return {
        "metadata": meta, "spec": spec,
        "status": {
            "phase": "Running", "qosClass": "Burstable", "hostIP": f"10.0.{node_index % 256}.1",
            "podIP": f"10.1.{i % 256}.{i % 200}", "podIPs": [{"ip": f"10.1.{i % 256}.{i % 200}"}],
            "startTime": ts(created + timedelta(seconds=3)),
            "conditions": [{"type": t, "status": "True", "lastProbeTime": None,
                            "lastTransitionTime": ts(created)}
                           for t in ("PodReadyToStartContainers", "Initialized", "Ready",
                                     "ContainersReady", "PodScheduled")],
            "containerStatuses": statuses,
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=150000)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    generate(args.nodes, args.pods, args.out, args.seed)


def generate(node_count: int, pod_count: int, path: str, seed: int) -> None:
    """The uniform cluster into `path` (also `generate_production.py --scenario uniform`)."""
    rng = random.Random(seed)
    with open(path, "w") as out:
        nodes = [make_node(i, rng) for i in range(node_count)]
        for start in range(0, len(nodes), PAGE):
            out.write(json.dumps({"apiVersion": "v1", "kind": "NodeList",
                                  "items": nodes[start:start + PAGE]}, separators=(",", ":")))
            out.write("\n")
        namespaces = [{"metadata": {"name": f"team-{n:02d}", "labels": {"team": f"t{n % 6}"}}}
                      for n in range(60)] + [{"metadata": {"name": "kube-system"}}]
        out.write(json.dumps({"apiVersion": "v1", "kind": "NamespaceList", "items": namespaces}))
        out.write("\n")
        pdbs = [{"metadata": {"name": f"app-{a:02d}", "namespace": f"team-{n:02d}"},
                 "spec": {"maxUnavailable": 1,
                          "selector": {"matchLabels": {"app": f"app-{a:02d}"}}}}
                for n in range(60) for a in range(0, APPS_PER_NS, 4)]
        out.write(json.dumps({"apiVersion": "policy/v1", "kind": "PodDisruptionBudgetList",
                              "items": pdbs}))
        out.write("\n")
        ds_count = min(len(DAEMONSETS) * node_count, pod_count // 5)
        page: list = []
        for i in range(pod_count):
            if i < ds_count:
                node_index = i // len(DAEMONSETS)
                pod = make_pod(i, f"node-{node_index:05d}", node_index, rng,
                               DAEMONSETS[i % len(DAEMONSETS)])
            else:
                # Skewed placement: a tenth of the nodes get about four times their share, so
                # utilization strategies find hot and cold nodes.
                hot = max(1, node_count // 10)
                node_index = rng.randrange(hot) if rng.random() < 0.3 else rng.randrange(node_count)
                pod = make_pod(i, f"node-{node_index:05d}", node_index, rng, None)
            page.append(pod)
            if len(page) == PAGE:
                out.write(json.dumps({"apiVersion": "v1", "kind": "PodList", "items": page},
                                     separators=(",", ":")))
                out.write("\n")
                page = []
        if page:
            out.write(json.dumps({"apiVersion": "v1", "kind": "PodList", "items": page},
                                 separators=(",", ":")))
            out.write("\n")


if __name__ == "__main__":
    main()
