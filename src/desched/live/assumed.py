"""Pods this process evicted, assumed terminating until the cache says so itself.

The cache learns of an eviction from the pods watch, a moment after the API server answered it.
On a loaded API server (or one throttling desched) that moment can outlast the time to the next
cycle, which would then see the pod still running, pick it again and send a second eviction;
the server accepts it (a terminating pod may always be evicted), so the pod is evicted twice
and counted twice against the limits. Like kube-scheduler, which assumes a pod bound before its
watch confirms it, desched assumes an evicted pod terminating: every snapshot shows it with a
deletionTimestamp (the DefaultEvictor then says "pod is terminating") until the cache shows it
terminating, gone or replaced by a new pod of the same name, or `ttl` seconds passed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from desched.model.pod import Pod

# Far longer than a watch lags behind a live server (the stale-cache guard stops cycles on a
# broken one), short enough that a pod whose eviction outcome was unknown is reconsidered.
ASSUME_SECONDS = 300.0


class EvictedPods:
    """namespace/name → (UID, when assumed, monotonic deadline) of the pods evicted lately."""

    def __init__(self, ttl: float = ASSUME_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._pods: dict[str, tuple[str, datetime, float]] = {}
        # Added from the cycle's worker thread, read on the event loop.
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._pods)

    def add(self, pod: Pod) -> None:
        if pod.metadata.uid:
            with self._lock:
                self._pods[pod.key] = (pod.metadata.uid, datetime.now(UTC),
                                       self.clock() + self.ttl)

    def overlay(self, store: Mapping[str, Any]) -> dict[str, Pod]:
        """The cached pods to show as terminating (a copy each; the cache is not touched), and
        forget those the cache has caught up with."""
        now = self.clock()
        shown: dict[str, Pod] = {}
        with self._lock:
            for key, (uid, since, deadline) in list(self._pods.items()):
                pod = store.get(key)
                if (pod is None or pod.metadata.uid != uid or deadline <= now
                        or pod.metadata.deletion_timestamp is not None):
                    del self._pods[key]
                    continue
                meta = msgspec.structs.replace(pod.metadata, deletion_timestamp=since)
                shown[key] = msgspec.structs.replace(pod, metadata=meta)
        return shown
