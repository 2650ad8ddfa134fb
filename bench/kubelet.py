"""A stand-in kubelet for a control plane without nodes (tests/e2e/controlplane.py,
../shared/realk8s): what the availability bench and the e2e tests need of a kubelet, through the
API only. No container runs.

For the pods bound to the nodes it serves (a watch on pods):
- a bound pod is reported Running at once and Ready `ready_after` seconds later (a container
  starting, then its readiness probe passing);
- a pod being deleted (deletionTimestamp) is reported not Ready at once (its containers got
  SIGTERM; a kubelet fails the readiness of a terminating pod) and its deletion is finished
  with grace 0 once its grace period is over, as a kubelet does when the containers stop.

Nodes are created Ready by `add_node`; without a node lifecycle controller (the e2e control
plane runs none) no heartbeat is needed."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from lightkube import ApiError, Client, codecs
from lightkube.models.meta_v1 import Status
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import PatchType

# msgspec builds a class's type information on its first decode, and building it from several
# threads at once crashed the process (a segfault in CI: the kubelet's steps raising their first
# ApiError together). Built here, once, before any thread: ApiError decodes a Status.
Status.from_dict({"kind": "Status", "apiVersion": "v1", "metadata": {"resourceVersion": ""},
                  "status": "Failure", "message": "", "reason": "NotFound", "code": 404,
                  "details": {"name": "", "kind": "pods", "causes": [
                      {"reason": "", "message": "", "field": ""}]}})


def stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_object(name: str, cpu: str, memory: str, labels: dict[str, str],
                taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                  "kubernetes.io/os": "linux", **labels}},
            "spec": {"taints": taints} if taints else {}}


def node_status(cpu: str, memory: str) -> dict[str, Any]:
    now = stamp()
    resources = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
    return {"status": {
        "capacity": resources, "allocatable": resources,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "stand-in kubelet", "lastHeartbeatTime": now,
                        "lastTransitionTime": now}],
        "nodeInfo": {"kubeletVersion": "v1.36.2", "architecture": "amd64",
                     "operatingSystem": "linux", "containerRuntimeVersion": "none",
                     "kernelVersion": "", "osImage": "", "kubeProxyVersion": "",
                     "machineID": "", "systemUUID": "", "bootID": ""}}}


class Kubelet:
    """Serves the pods of `nodes` until `stop()`; a context manager."""

    def __init__(self, client: Client, nodes: Iterable[str], ready_after: float = 3.0,
                 namespace: str | None = None) -> None:
        self.client = client
        self.nodes = set(nodes)
        self.ready_after = ready_after
        self.namespace = namespace
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._steps = threading.Lock()
        # By uid: a StatefulSet's replacement has its predecessor's name.
        self._started: set[str] = set()  # reported Running
        self._stopped: set[str] = set()  # deletion under way
        self._timers: list[threading.Timer] = []
        self._thread = threading.Thread(target=self._run, name="stand-in-kubelet", daemon=True)
        self.errors: list[str] = []

    def add_node(self, name: str, cpu: str = "8", memory: str = "32Gi",
                 labels: dict[str, str] | None = None,
                 taints: list[dict[str, str]] | None = None) -> None:
        self.client.create(codecs.from_dict(node_object(name, cpu, memory, labels or {}, taints)))
        self.client.patch(Node.Status, name, node_status(cpu, memory), patch_type=PatchType.MERGE)
        self.nodes.add(name)

    def __enter__(self) -> Kubelet:
        # lightkube's msgspec decoders are built on first use, and building them from two
        # threads at once has crashed the interpreter: build them here, before the watch.
        list(self.client.list(Pod, namespace=self.namespace or "*", chunk_size=1))
        list(self.client.list(Node, chunk_size=1))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            for timer in self._timers:
                timer.cancel()
        # The watch thread may sit in a read until the next event: it is a daemon, and it
        # acts on nothing once stopping is set.
        self._thread.join(timeout=0.5)

    # -- the watch ---------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                # lightkube watches again by itself when the server ends a watch.
                for _, pod in self.client.watch(Pod, namespace=self.namespace or "*"):
                    if self._stopping.is_set():
                        return
                    self._see(pod)
            except Exception as err:  # the API server restarts in fault tests: watch again
                if self._stopping.is_set():
                    return
                self.errors.append(str(err))
                time.sleep(0.5)

    def _see(self, pod: Pod) -> None:
        meta, spec = pod.metadata, pod.spec
        if meta is None or spec is None or spec.nodeName not in self.nodes:
            return
        key = str(meta.uid)
        if meta.deletionTimestamp is not None:
            if key not in self._stopped:
                self._stopped.add(key)
                self._stopping_pod(pod)
            return
        phase = pod.status.phase if pod.status is not None else None
        if key not in self._started and phase != "Running":
            self._started.add(key)
            self._later(0, lambda: self._starting_pod(pod))

    # Each pod's steps are retried until they go through (the API server may be down, or just
    # restarted and answering 429/503): a pod taken on is never left half started or stopped.
    def _starting_pod(self, pod: Pod) -> None:
        self._report(pod, ready=False, first=True)
        self._later(self.ready_after, lambda: self._report(pod, ready=True, only_alive=True))

    def _stopping_pod(self, pod: Pod) -> None:
        self._later(0, lambda: self._report(pod, ready=False, only_alive=True))
        grace = pod.metadata.deletionGracePeriodSeconds if pod.metadata else None
        self._later(float(grace or 0), lambda: self._finish(pod))

    def _later(self, seconds: float, action: Any) -> None:
        timer = threading.Timer(seconds, self._guarded, (action,))
        timer.daemon = True
        with self._lock:
            if self._stopping.is_set():
                return
            self._timers = [t for t in self._timers if t.is_alive()]
            self._timers.append(timer)
        timer.start()

    def _guarded(self, action: Any) -> None:
        for _ in range(120):  # the API server may be down or restarting: try again for ~60 s
            if self._stopping.is_set():
                return
            try:
                with self._steps:  # one step at a time through the shared client
                    action()
                return
            except ApiError as err:
                if err.status.code in (404, 409, 422):
                    return
                self.errors.append(str(err))
            except Exception as err:
                self.errors.append(str(err))
            time.sleep(0.5)

    # -- status ------------------------------------------------------------------------------------
    def _current(self, pod: Pod) -> Pod | None:
        """The pod as it is now, if it is still this pod (not a successor of the same name)."""
        assert pod.metadata is not None
        current = self.client.get(Pod, pod.metadata.name, namespace=pod.metadata.namespace)
        if current.metadata is None or current.metadata.uid != pod.metadata.uid:
            return None
        return current

    def _report(self, pod: Pod, ready: bool, only_alive: bool = False,
                first: bool = False) -> None:
        assert pod.metadata is not None and pod.spec is not None
        name, ns = pod.metadata.name, pod.metadata.namespace
        if only_alive:
            current = self._current(pod)
            if current is None:
                return
            assert current.metadata is not None
            if ready and current.metadata.deletionTimestamp is not None:
                return  # deleted while starting: never Ready
        now = stamp()
        flag = "True" if ready else "False"
        conditions = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                      {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                      {"type": "ContainersReady", "status": flag, "lastTransitionTime": now},
                      {"type": "Ready", "status": flag, "lastTransitionTime": now}]
        containers = [{"name": c.name, "image": c.image or "", "imageID": "", "ready": ready,
                       "started": True, "restartCount": 0,
                       "state": {"running": {"startedAt": now}}}
                      for c in pod.spec.containers]
        status: dict[str, Any] = {"phase": "Running", "conditions": conditions,
                                  "hostIP": "10.255.0.1", "podIP": "10.255.0.2",
                                  "containerStatuses": containers}
        if first:
            status["startTime"] = now
        self.client.patch(Pod.Status, name, {"status": status}, namespace=ns,
                          patch_type=PatchType.STRATEGIC)

    def _finish(self, pod: Pod) -> None:
        assert pod.metadata is not None
        if self._current(pod) is None:
            return
        self.client.delete(Pod, pod.metadata.name, namespace=pod.metadata.namespace,
                           grace_period=0)
