"""Two-phase moves (docs/moves.md): the Evictor plans each eviction a plugin asks for, and after
the plugin's run carries the plan out workload by workload, in one of three modes:

- restart: a Deployment that can surge, all of whose ready pods are to move, is restarted the
  way `kubectl rollout restart` does; its controller starts each new pod before an old one
  stops (what its rollout strategy promises). Every planned pod must first be evictable under
  its PodDisruptionBudget. The restart counts as one move against the eviction limits;
- paced eviction: at most maxUnavailablePerWorkload of a workload's pods unavailable at once,
  minDelayBetweenMoves apart; the rest are deferred to a later cycle;
- plain eviction, exactly as without `moves`.

A planned pod leaves the snapshot at once, so the rest of the plugin's run sees it gone as it
would after an eviction; the flush puts the plan back and decides, so every figure it reads is
the cluster as it was before the plugin's evictions. Simulate, dry run and live runs share this
code: only the executor's `evict`, `check_budget` and `restart` differ.
"""

from __future__ import annotations

from dataclasses import dataclass

from desched.framework.decisions import DecisionLog, Outcome, Restart, WaitTimeout
from desched.framework.evictor import Evictor, ExecutionResult, MoveExecutor, RestartOrder
from desched.framework.moves.args import MovesArgs
from desched.framework.moves.inflight import (
    InFlight,
    Target,
    deployment_of,
    in_flight,
    target_of,
)
from desched.framework.moves.rollout import cannot_surge, in_progress, rollout
from desched.framework.moves.tracker import MoveTracker
from desched.framework.types import Clock
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.workloads import WorkloadResolver, is_available
from desched.util.duration import format_duration

# Why a workload of each kind is not restarted (surgeFirst falls through to pacing or eviction).
_NO_RESTART = {
    "StatefulSet": "a StatefulSet replaces a pod only after it is gone",
    "ReplicaSet": "a ReplicaSet without a Deployment has no rollout to restart",
    "ReplicationController": "a ReplicationController has no rollout to restart",
    "Pod": "a bare pod has no controller to start its replacement",
}


_REMEMBERED = 3600.0


@dataclass(frozen=True, slots=True)
class Planned:
    pod: Pod
    profile: str
    plugin: str
    reason: str


class MovePlanner:
    """The Evictor's plan for one plugin run, and how it is carried out (`flush`)."""

    def __init__(self, args: MovesArgs, evictor: Evictor, snapshot: ClusterSnapshot,
                 clock: Clock, log: DecisionLog, tracker: MoveTracker) -> None:
        self.args = args
        self.evictor = evictor
        self.snapshot = snapshot
        self.clock = clock
        self.log = log
        self.tracker = tracker
        self.resolver = WorkloadResolver(snapshot)
        self.planned: list[Planned] = []
        # A move is remembered for an hour at least: its name is what a deferral awaits.
        tracker.forget_stale(clock.now, max(_REMEMBERED, args.min_delay, args.timeout or 0))

    # -- phase one: during the plugin's run ----------------------------------------------------
    def plan(self, pod: Pod, profile: str, plugin: str, reason: str) -> bool:
        """Count the pod against the limits (already checked) and take it out of the snapshot,
        as an eviction would; the plugin sees success."""
        if self.snapshot.pods.get(pod.key) is not pod:
            # Gone already: the executor says so as it says so of any eviction.
            return self.evictor.execute(pod, profile, plugin, reason)
        self.evictor.count(pod)
        self.snapshot.remove_pod(pod)
        self.planned.append(Planned(pod, profile, plugin, reason))
        return True

    def drop(self) -> None:
        self._restore()

    def _restore(self) -> list[Planned]:
        """The plan, its pods back in the snapshot and their counts refunded."""
        planned, self.planned = self.planned, []
        for entry in planned:
            self.snapshot.add_pod(entry.pod)
            self.evictor.refund(entry.pod)
        return planned

    # -- phase two: after the plugin's run -------------------------------------------------------
    def flush(self) -> None:
        groups: dict[str, tuple[Target, list[Planned]]] = {}
        for entry in self._restore():
            target = target_of(entry.pod, self.resolver)
            groups.setdefault(target.key, (target, []))[1].append(entry)
        for target, entries in groups.values():
            self._move(target, entries)

    def _move(self, target: Target, entries: list[Planned]) -> None:
        args = self.args
        not_restarted = ""
        if args.surge_first:
            rolling = self._rolling_out(target)
            if rolling is not None:
                for entry in entries:
                    self._defer(entry, rolling)
                return
            why_not = self._restart_or_why_not(target, entries)
            if why_not is None:
                return
            not_restarted = f"evicted, not restarted: {why_not}"
        paced = args.max_unavailable_per_workload is not None or args.min_delay > 0
        room, flight, why = self._room(target, entries) if paced else (len(entries), None, "")
        moved: list[Pod] = []
        for entry in entries:
            if len(moved) >= room:
                self._defer(entry, self._why_wait(target, flight, moved, why))
                continue
            reason = f"{entry.reason}; {not_restarted}" if not_restarted else entry.reason
            if self.evictor.execute(entry.pod, entry.profile, entry.plugin, reason):
                moved.append(entry.pod)
                self._moved(target, entry.pod)

    def _moved(self, target: Target, pod: Pod) -> None:
        tracker, cycle = self.tracker, self.log.cycle
        tracker.moved(target.key, pod.key, self.clock.now, cycle)
        if target.workload is None:
            tracker.evicted_own(target.key, pod, cycle)

    def _defer(self, entry: Planned, why: str) -> None:
        pod = entry.pod
        self.log.record("deferred", pod.namespace, pod.name, pod.node_name, entry.profile,
                        entry.plugin, f"deferred: {why}; {entry.reason}")

    # -- surge-first restarts ------------------------------------------------------------------
    def _rolling_out(self, target: Target) -> str | None:
        """Why a Deployment's pods wait (None: they need not). A rollout in progress — desched's
        own restart or anyone's — replaces the old pods itself, within what the strategy
        allows; an eviction beside it would take the Deployment below that."""
        deployment = deployment_of(target, self.snapshot)
        if deployment is None:
            return None
        progress = in_progress(deployment)
        # desched's own restart counts until its rollout is done (then it is forgotten), so a
        # Deployment restarted once can be restarted again another day.
        ours = self.tracker.restarting(target.key, deployment)
        if progress is None and ours is None:
            return None
        what = progress or "desched restarted it and the cache has not shown it yet"
        return (f"{target} is rolling out ({what}): the rollout replaces its pods; "
                f"desched waits for it to finish")

    def _restart_or_why_not(self, target: Target, entries: list[Planned]) -> str | None:
        """Restart the target's Deployment for `entries` (None: done, restarted or refused
        by a budget), or say why it is not restarted."""
        if target.kind != "Deployment":
            return _NO_RESTART.get(target.kind, f"a {target.kind} has no rollout to restart")
        deployment = deployment_of(target, self.snapshot)
        if deployment is None or target.workload is None:
            return f"{target} is not in the snapshot"
        executor = self.evictor.executor
        if not isinstance(executor, MoveExecutor):
            return "this run's executor cannot restart a Deployment"
        problem = cannot_surge(deployment)
        if problem is not None:
            return f"{target} cannot surge: {problem}"
        pods = [p for p in self.resolver.pods(target.workload)
                if not p.terminal and p.metadata.deletion_timestamp is None]
        ready = sum(1 for p in pods if is_available(p))
        planned = {e.pod.key for e in entries}
        if any(is_available(p) and p.key not in planned for p in pods):
            return (f"only {len(planned)} of the {ready} ready pods of {target} are to move, and "
                    f"a restart would replace them all")
        for entry in entries:
            answer = executor.check_budget(entry.pod)
            if not answer.ok:
                self._refuse(entries, answer, f"restart of {target} not started: "
                                              f"{entry.pod.key}: {answer.message}")
                return None
        budget = rollout(deployment)
        text = f"restart {target} ({budget.describe()}): {budget.promise()}"
        first = entries[0]
        meta = deployment.metadata
        order = RestartOrder(target.namespace, target.name, target.uid,
                             meta.resource_version, self.clock.now, tuple(pods), first.profile,
                             first.plugin, text)
        result = executor.restart(order)
        if not result.ok:
            self._refuse(entries, result, f"restart of {target} failed: {result.message}")
            return None
        self._restarted(target, entries, pods, order, budget.replicas, budget.max_surge,
                        budget.max_unavailable, meta.generation)
        return None

    def _refuse(self, entries: list[Planned], result: ExecutionResult, text: str) -> None:
        outcome: Outcome = "pdb-blocked" if result.outcome == "pdb-blocked" else "failed"
        for entry in entries:
            pod = entry.pod
            self.log.record(outcome, pod.namespace, pod.name, pod.node_name, entry.profile,
                            entry.plugin, text)

    def _restarted(self, target: Target, entries: list[Planned], pods: list[Pod],
                   order: RestartOrder, replicas: int, surge: int, unavailable: int,
                   generation: int | None) -> None:
        evictor, log = self.evictor, self.log
        first = entries[0]
        evictor.count(first.pod)  # one move, whatever the number of pods it replaces
        dry = " (dry run: not restarted)" if evictor.dry_run else ""
        reasons = {e.pod.key: e.reason for e in entries}
        for pod in pods:
            wanted = reasons.get(pod.key)
            said = (f"{wanted}; {order.reason}{dry}" if wanted is not None
                    else f"replaced with the others: {order.reason}{dry}")
            log.record("restarted", pod.namespace, pod.name, pod.node_name, first.profile,
                       first.plugin, said)
        log.restarted(Restart(log.cycle, first.profile, first.plugin, target.namespace,
                              target.name, target.uid, replicas, surge, unavailable,
                              tuple(p.key for p in pods), order.reason + dry))
        self.tracker.moved(target.key, pods[0].key if pods else first.pod.key,
                           self.clock.now, log.cycle)
        self.tracker.restarted(target.key, generation, self.clock.now, log.cycle)

    # -- pacing ----------------------------------------------------------------------------------
    def _room(self, target: Target,
              entries: list[Planned]) -> tuple[int, InFlight | None, str]:
        """How many of the target's planned pods may move now; what is in flight (with
        pacing); why the rest wait when no figure says it (a delay)."""
        args, tracker, now, cycle = self.args, self.tracker, self.clock.now, self.log.cycle
        key = target.key
        left = tracker.delay_left(key, now, cycle, args.min_delay)
        if left > 0:
            last = tracker.last_move[key]
            return 0, None, (f"{target} last moved {last.pod} "
                             f"{format_duration((now - last.when).total_seconds())} ago, and "
                             f"minDelayBetweenMoves is {format_duration(args.min_delay)}")
        # A delay between moves lets one pod of the workload move per flush.
        at_once = 1 if args.min_delay > 0 else len(entries)
        limit = args.max_unavailable_per_workload
        if limit is None:
            return at_once, None, ""
        flight = in_flight(target, self.snapshot, self.resolver, tracker, cycle)
        if flight.count == 0:
            tracker.settled(key)
        elif flight.count >= limit and self._timed_out(target, entries[0], flight):
            flight = InFlight(0, flight.desired, "")
        return min(max(0, limit - flight.count), at_once), flight, ""

    def _why_wait(self, target: Target, flight: InFlight | None, moved: list[Pod],
                  why: str) -> str:
        """Why a planned pod waits: the replacement awaited and the figures, or the delay."""
        limit = self.args.max_unavailable_per_workload
        if flight is not None and limit is not None and flight.count + len(moved) >= limit:
            if not moved:
                awaited = flight.why or f"{target} has pods unavailable"
            elif flight.desired is None:  # no count: the pod itself must be gone
                awaited = f"{moved[-1].key}, which desched evicted, is not gone yet"
            else:
                awaited = f"the replacement of {moved[-1].key} is not Ready yet"
            of = f" of {flight.desired}" if flight.desired is not None else ""
            return f"{awaited} ({flight.count + len(moved)}{of} unavailable, limit {limit})"
        if moved:
            return (f"{target} moved {moved[-1].key} in this cycle, and minDelayBetweenMoves is "
                    f"{format_duration(self.args.min_delay)}")
        return why

    def _timed_out(self, target: Target, entry: Planned, flight: InFlight) -> str | None:
        """With replacementTimeout: if the target has waited longer than that, stop waiting
        (the unavailable pods count as replaced from now on), say so and return the text."""
        timeout = self.args.timeout
        if timeout is None:
            return None
        tracker, now = self.tracker, self.clock.now
        since = tracker.wait_began(target.key, now)
        waited = (now - since).total_seconds()
        if waited < timeout:
            return None
        tracker.stop_waiting(target.key, flight.count)
        text = (f"replacementTimeout: {target} waited {format_duration(waited)} (more than "
                f"{format_duration(timeout)}) for {flight.why or 'its pods to be Ready'}; "
                f"desched stops waiting and moves its next pod")
        self.log.timed_out(WaitTimeout(self.log.cycle, entry.profile, entry.plugin,
                                       target.kind, target.namespace, target.name, target.uid,
                                       waited, text))
        return text

