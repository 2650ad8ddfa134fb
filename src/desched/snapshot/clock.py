"""The clock a simulation of a snapshot runs at: the snapshot's own time, never the wall clock.

A snapshot taken yesterday and simulated today must decide as it would have when it was taken:
NodeMetrics are fresh, pod ages are what they were. `desched snapshot` records when it finished
(a SnapshotInfo document); for other files (`kubectl get -o json`, hand-written), the newest
timestamp the snapshot holds stands in for it: the cluster was observed no earlier than that.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from desched.snapshot.cluster import ClusterSnapshot

_TRANSITION = re.compile(rb'"lastTransitionTime"\s*:\s*"([^"]+)"')


@dataclass(frozen=True, slots=True)
class SimulationClock:
    now: datetime
    source: str  # what the time was taken from, as the output says it

    def describe(self) -> str:
        return f"{self.now.strftime('%Y-%m-%dT%H:%M:%SZ')} ({self.source})"


def fixed_clock(now: datetime) -> SimulationClock:
    return SimulationClock(now, "--now")


def snapshot_clock(snapshot: ClusterSnapshot) -> SimulationClock:
    """The capture time when recorded, else the newest timestamp, else (a snapshot without any
    time in it, where no decision depends on the clock but pod ages) the wall clock."""
    if snapshot.captured_at is not None:
        return SimulationClock(snapshot.captured_at.astimezone(UTC), "snapshot capture time")
    newest = newest_timestamp(snapshot)
    if newest is not None:
        at, where = newest
        return SimulationClock(at.astimezone(UTC), f"newest timestamp in the snapshot: {where}")
    return SimulationClock(datetime.now(UTC).replace(microsecond=0),
                           "wall clock: the snapshot holds no timestamp")


def _latest(found: tuple[datetime, str] | None, at: datetime | None,
            where: str) -> tuple[datetime, str] | None:
    if at is None or (found is not None and at <= found[0]):
        return found
    return at, where


def _newest_transition(raw: msgspec.Raw) -> datetime | None:
    """The latest lastTransitionTime in a pod's raw conditions (decoded lazily elsewhere: reading
    them here must not decode every pod's conditions)."""
    best: datetime | None = None
    for match in _TRANSITION.finditer(memoryview(raw)):
        try:
            at = datetime.fromisoformat(match.group(1).decode())
        except ValueError:
            continue  # the pod's conditions are checked when they are decoded
        if at.tzinfo is not None and (best is None or at > best):
            best = at
    return best


def newest_timestamp(snapshot: ClusterSnapshot) -> tuple[datetime, str] | None:
    """The newest time any object records (creation, deletion, start, condition transitions,
    metric samples), with which object and field it came from."""
    found: tuple[datetime, str] | None = None
    for metric in snapshot.node_metrics.values():
        found = _latest(found, metric.status.update_time,
                        f"NodeMetric {metric.metadata.name} updateTime")
    samples: tuple[tuple[str, Mapping[str, Any]], ...] = (
        ("NodeMetrics", snapshot.metrics_nodes), ("PodMetrics", snapshot.metrics_pods))
    for kind, objects in samples:
        for sample in objects.values():
            found = _latest(found, sample.timestamp, f"{kind} {sample.metadata.name} timestamp")
    others: tuple[tuple[str, Mapping[str, Any]], ...] = (
        ("Node", snapshot.nodes), ("PodMigrationJob", snapshot.migration_jobs),
        ("Reservation", snapshot.reservations))
    for kind, objects in others:
        for obj in objects.values():
            found = _latest(found, obj.metadata.creation_timestamp,
                            f"{kind} {obj.metadata.name} creationTimestamp")
    for pod in snapshot.pods.values():
        meta, status = pod.metadata, pod.status
        # Cheap comparisons first: most pods are older than the newest time seen so far.
        for at, field in ((meta.creation_timestamp, "creationTimestamp"),
                          (meta.deletion_timestamp, "deletionTimestamp"),
                          (status.start_time, "status.startTime")):
            if at is not None and (found is None or at > found[0]):
                found = (at, f"Pod {pod.key} {field}")
        if status.conditions:
            at = _newest_transition(status.conditions)
            if at is not None and (found is None or at > found[0]):
                found = (at, f"Pod {pod.key} condition lastTransitionTime")
    return found


def advance_metrics(snapshot: ClusterSnapshot, by: timedelta) -> None:
    """Move every usage sample's time forward with the simulated clock: between simulated
    cycles the metrics agents keep reporting, so the metrics stay as fresh as when captured
    instead of expiring."""
    if not by:
        return
    for name, metric in snapshot.node_metrics.items():
        updated = metric.status.update_time
        if updated is not None:
            snapshot.node_metrics[name] = msgspec.structs.replace(
                metric, status=msgspec.structs.replace(metric.status, update_time=updated + by))
    samples: tuple[dict[str, Any], ...] = (snapshot.metrics_nodes, snapshot.metrics_pods)
    for objects in samples:
        for key, sample in objects.items():
            if sample.timestamp is not None:
                objects[key] = msgspec.structs.replace(sample, timestamp=sample.timestamp + by)
