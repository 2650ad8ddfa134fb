"""What moves remember across cycles (framework/moves): when each workload last moved, since
when it waits for a replacement, the waits given up, desched's own evictions of workloads
without a replica count, and its restarts the informer cache has not shown yet.

Everything else is read from each cycle's snapshot, so a desched restarted mid-move picks the
move up again from the cluster (a Deployment mid-rollout, a workload short of Ready pods) rather
than starting a second one: this state only makes a running desched more precise.

One tracker per run: `simulate` keeps one per simulation, `desched run` one per Runner. It
holds names, numbers and times only (never a snapshot's objects), one entry per workload that
moved, and drops an entry once it no longer matters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from desched.framework.moves.rollout import in_progress
from desched.model.pod import Pod


@dataclass(frozen=True)
class LastMove:
    when: datetime
    cycle: int
    pod: str  # namespace/name of the pod moved (the first a restart replaced)


@dataclass(frozen=True)
class OwnRestart:
    generation: int | None  # the Deployment's metadata.generation desched saw when it patched
    when: datetime
    cycle: int


@dataclass
class MoveTracker:
    # simulate: cycles follow one another without time passing unless the policy sets a
    # deschedulingInterval, so a cycle boundary ends a minDelayBetweenMoves wait.
    simulated: bool = False
    last_move: dict[str, LastMove] = field(default_factory=dict)
    # Workload key -> when its current wait for a replacement began.
    waiting_since: dict[str, datetime] = field(default_factory=dict)
    # Workload key -> unavailable pods desched stopped waiting for (replacementTimeout).
    forgiven: dict[str, int] = field(default_factory=dict)
    # Workload key (no replica count) -> pod key -> (uid, cycle evicted): not yet gone.
    own: dict[str, dict[str, tuple[str, int]]] = field(default_factory=dict)
    restarts: dict[str, OwnRestart] = field(default_factory=dict)
    # simulate without --reschedule: pods of a counted workload removed and never recreated,
    # which count as Ready replacements from the next cycle on.
    vanished: dict[str, int] = field(default_factory=dict)
    # Workloads seen with nothing in flight since their last move: a later wait is not for it.
    calm: set[str] = field(default_factory=set)

    def moved(self, key: str, pod: str, now: datetime, cycle: int) -> None:
        self.last_move[key] = LastMove(now, cycle, pod)
        self.waiting_since.pop(key, None)  # a move ends a wait; the next one starts afresh
        self.calm.discard(key)

    def evicted_own(self, key: str, pod: Pod, cycle: int) -> None:
        self.own.setdefault(key, {})[pod.key] = (str(pod.metadata.uid), cycle)

    def restarted(self, key: str, generation: int | None, now: datetime, cycle: int) -> None:
        self.restarts[key] = OwnRestart(generation, now, cycle)

    def restarting(self, key: str, deployment: Any) -> OwnRestart | None:
        """desched's own restart of Deployment `key` while it runs: its patch not in the cache
        yet (the generation is still the one it patched), or the rollout not finished. The
        restart is forgotten once it is. Never in simulation, whose Deployments do not
        change."""
        ours = self.restarts.get(key)
        if ours is None or self.simulated:
            return None
        generation = deployment.metadata.generation
        if (ours.generation is not None and generation is not None
                and generation <= ours.generation) or in_progress(deployment) is not None:
            return ours
        del self.restarts[key]
        return None

    def vanish(self, key: str, pods: int) -> None:
        self.vanished[key] = self.vanished.get(key, 0) + pods

    def delay_left(self, key: str, now: datetime, cycle: int, delay: float) -> float:
        """Seconds the workload's next move must still wait (minDelayBetweenMoves); 0 when it
        may move."""
        last = self.last_move.get(key)
        if last is None or delay <= 0:
            return 0.0
        if self.simulated and cycle > last.cycle and now == last.when:
            return 0.0  # simulate's cycles at one moment: a cycle is the delay passing
        return max(0.0, delay - (now - last.when).total_seconds())

    def wait_began(self, key: str, now: datetime) -> datetime:
        """When the workload's wait began: its last move, or now for a first deferral."""
        since = self.waiting_since.get(key)
        if since is None:
            last = self.last_move.get(key)
            since = last.when if last is not None and key not in self.calm else now
            self.waiting_since[key] = since
        return since

    def stop_waiting(self, key: str, unavailable: int) -> None:
        """replacementTimeout: the pods now unavailable count as replaced from here on."""
        self.forgiven[key] = self.forgiven.get(key, 0) + unavailable
        self.waiting_since.pop(key, None)

    def settled(self, key: str) -> None:
        """Nothing of the workload is in flight: no wait, nothing forgiven."""
        self.waiting_since.pop(key, None)
        self.forgiven.pop(key, None)
        if key in self.last_move:
            self.calm.add(key)

    def forget_stale(self, now: datetime, horizon: float) -> None:
        """Drop what can no longer matter (a long-running loop must not grow): the last moves
        older than `horizon` seconds of workloads that do not wait."""
        for key in [k for k, last in self.last_move.items()
                    if k not in self.waiting_since
                    and (now - last.when).total_seconds() > horizon]:
            del self.last_move[key]
            self.calm.discard(key)
