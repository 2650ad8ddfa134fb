"""Evictions in background: pods whose eviction a controller carries out over time (KubeVirt's
live migration), counted against the limits until they leave.

Upstream's `EvictionsInBackground` gate (v0.32+, alpha). A pod annotated
`descheduler.alpha.kubernetes.io/request-evict-only` asks to be evicted by its controller, not
deleted: its eviction request is answered 429 "Eviction triggered evacuation" and the pod stays
while the controller moves it, annotated `descheduler.alpha.kubernetes.io/eviction-in-progress`.
Such a pod is in progress from the answer (assumed, for at most `timeout` seconds before the
annotation confirms it) or from the annotation, until it is deleted, ends (Succeeded or
Failed), loses `request-evict-only`, or loses `eviction-in-progress` after having had it (the
controller cancelled). While in progress it counts against maxNoOfPodsToEvictPerNode,
PerNamespace and Total in every cycle, and a second eviction of it is not requested.

Upstream keeps this set from the pods informer's events; desched derives it from each cycle's
snapshot (`observe`), which is what a cycle's decisions can see anyway, and which a simulation
has too: pods a snapshot shows in progress count there as they would in a live run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from desched.model.pod import Pod

REQUEST_EVICT_ONLY = "descheduler.alpha.kubernetes.io/request-evict-only"
EVICTION_IN_PROGRESS = "descheduler.alpha.kubernetes.io/eviction-in-progress"
# What KubeVirt's answer to an eviction it turns into a live migration says (a 429's message).
TRIGGERED_EVACUATION = "Eviction triggered evacuation"
# How long an answered request counts before the annotation confirms it (upstream's 10 min).
ASSUMED_TIMEOUT = 600.0

# How an eviction desched requested in background ended, as upstream's metric counts it:
# success (the pod was deleted or Succeeded), error (it Failed, or the request was never
# confirmed in time), cancelled (the controller dropped the eviction: not counted).
End = Literal["success", "error", "cancelled"]


@dataclass
class Requested:
    """An eviction desched requested in background: who asked, and since when (monotonic)."""

    namespace: str
    name: str
    node: str
    profile: str
    plugin: str
    since: float
    confirmed: bool = False  # the pod has carried eviction-in-progress since


@dataclass(frozen=True)
class Ended:
    request: Requested
    how: End
    why: str


def _identity(pod: Pod) -> str:
    """The pod's UID (upstream's key); namespace/name for a snapshot's pod written without one."""
    return pod.metadata.uid or pod.key


def requests_background(pod: Pod) -> bool:
    """Whether the pod asks to be evicted by its controller, in background."""
    return REQUEST_EVICT_ONLY in pod.metadata.annotations


@dataclass
class InBackground:
    """The evictions in background in progress now: by pod UID, and counted per node, per
    namespace and in total for the limits. `observe` each cycle's snapshot before its
    plugins run; `assume` what an eviction request started."""

    timeout: float = ASSUMED_TIMEOUT
    clock: Callable[[], float] = time.monotonic
    # Told of every request of desched's that ended (upstream's metric and log line).
    on_end: Callable[[Ended], None] | None = None
    requested: dict[str, Requested] = field(default_factory=dict)
    total: int = 0
    by_node: dict[str, int] = field(default_factory=dict)
    by_namespace: dict[str, int] = field(default_factory=dict)
    in_progress: dict[str, str] = field(default_factory=dict)  # identity -> namespace/name

    def has(self, pod: Pod) -> bool:
        return _identity(pod) in self.in_progress

    def observe(self, pods: Mapping[str, Pod]) -> None:
        """The set as `pods` (a snapshot's, by namespace/name) show it now."""
        now = self.clock()
        requested = self.requested
        seen: set[str] = set()
        self.in_progress = {}
        self.total = 0
        self.by_node = {}
        self.by_namespace = {}
        for key, pod in pods.items():
            annotations = pod.metadata.annotations
            if REQUEST_EVICT_ONLY not in annotations:
                continue
            uid = _identity(pod)
            seen.add(uid)
            mine = requested.get(uid)
            if pod.terminal:
                if mine is not None:
                    self._end(uid, "success" if pod.status.phase == "Succeeded" else "error",
                              f"the pod {pod.status.phase}")
                continue
            if EVICTION_IN_PROGRESS in annotations:
                if mine is not None:
                    mine.confirmed = True
            elif mine is None:
                continue
            elif mine.confirmed:
                self._end(uid, "cancelled", f"{EVICTION_IN_PROGRESS} was removed")
                continue
            elif now - mine.since > self.timeout:
                self._end(uid, "error", f"not confirmed by {EVICTION_IN_PROGRESS} within "
                                        f"{self.timeout:g}s")
                continue
            self._count(uid, key, pod.spec.node_name, pod.metadata.namespace)
        for uid in [uid for uid in requested if uid not in seen]:
            mine = requested[uid]
            now_there = pods.get(f"{mine.namespace}/{mine.name}")
            if now_there is None or _identity(now_there) != uid:
                self._end(uid, "success", "the pod was deleted")
            else:
                self._end(uid, "cancelled", f"{REQUEST_EVICT_ONLY} was removed")

    def assume(self, pod: Pod, profile: str, plugin: str) -> None:
        """An eviction request just started an eviction in background: in progress from now."""
        uid = _identity(pod)
        if uid in self.in_progress:
            return
        self.requested[uid] = Requested(pod.metadata.namespace, pod.metadata.name,
                                        pod.spec.node_name, profile, plugin, self.clock())
        self._count(uid, pod.key, pod.spec.node_name, pod.metadata.namespace)

    def _count(self, uid: str, key: str, node: str, namespace: str) -> None:
        self.in_progress[uid] = key
        self.total += 1
        self.by_node[node] = self.by_node.get(node, 0) + 1
        self.by_namespace[namespace] = self.by_namespace.get(namespace, 0) + 1

    def _end(self, uid: str, how: End, why: str) -> None:
        request = self.requested.pop(uid)
        if self.on_end is not None:
            self.on_end(Ended(request, how, why))

    def describe(self) -> str:
        """The pods in progress, for a cycle's note: "3 pod(s) ...: ns/a, ns/b, ns/c"."""
        keys = sorted(self.in_progress.values())
        shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
        return (f"{len(keys)} pod(s) with an eviction in background in progress count against "
                f"the eviction limits and are not evicted again: {shown}")
