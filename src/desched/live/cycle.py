"""The plumbing of one live cycle: the executor guard that stops evictions on a shutdown or a
lost lease, the decision log that reports as it records, and the reporter that turns decisions
into log lines, metrics and events (called in the cycle's worker thread)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from desched.framework.decisions import (
    EVICTED_OUTCOMES,
    Decision,
    DecisionLog,
    Note,
    Restart,
    WaitTimeout,
)
from desched.framework.evictor import (
    LIMIT_MESSAGES,
    ExecutionResult,
    Executor,
    RestartOrder,
    cordoning,
    moving,
)
from desched.framework.policy import Policy
from desched.live import logging as desched_logging
from desched.live.events import (
    FAILED_REASON,
    RESTART_ACTION,
    RESTART_REASON,
    TIMEOUT_REASON,
    EventRecorder,
    ObjectRef,
    PodRef,
    eviction_note,
    restart_note,
)
from desched.live.metrics import Metrics
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot

log = desched_logging.get_logger("desched.run")


class CycleInterrupted(Exception):
    """Raised into the cycle before an eviction that must not happen (shutdown, lost lease).
    No plugin catches it, so the cycle ends there, between two evictions."""


class LiveDecisionLog(DecisionLog):
    """A DecisionLog that tells `listener` about every decision as it is recorded, so logs,
    metrics and events follow the cycle as it runs (and tell the same story as `explain`)."""

    def __init__(self, listener: Callable[[Decision], None],
                 on_abort: Callable[[str, str, str], None] | None = None,
                 on_note: Callable[[Note], None] | None = None,
                 on_move: Callable[[Restart | WaitTimeout], None] | None = None) -> None:
        super().__init__()
        self.listener = listener
        self.on_abort = on_abort
        self.on_note = on_note
        self.on_move = on_move  # a restart made, a wait given up (framework/moves)

    def restarted(self, restart: Restart) -> None:
        super().restarted(restart)
        if self.on_move is not None:
            self.on_move(restart)

    def timed_out(self, timeout: WaitTimeout) -> None:
        super().timed_out(timeout)
        if self.on_move is not None:
            self.on_move(timeout)

    def note(self, node: str, profile: str, plugin: str, text: str) -> None:
        super().note(node, profile, plugin, text)
        if self.on_note is not None:
            self.on_note(self.notes[-1])

    def detach(self) -> None:
        """Forget the listeners once the cycle is over: the log outlives the cycle in the
        recent reports, and its reporter holds the cycle's whole snapshot."""
        self.listener = _ignore
        self.on_abort = None
        self.on_note = None
        self.on_move = None

    def record(self, outcome: Any, namespace: str, pod: str, node: str, profile: str,
               plugin: str, reason: str) -> None:
        super().record(outcome, namespace, pod, node, profile, plugin, reason)
        self.listener(self.decisions[-1])

    def aborted(self, profile: str, plugin: str, text: str) -> None:
        super().aborted(profile, plugin, text)
        if self.on_abort is not None:
            self.on_abort(profile, plugin, text)


def _ignore(_: Decision) -> None:
    return None


class GuardedExecutor:
    """Checks before every eviction that it may still happen: no shutdown was asked for, and
    this instance still leads. A lost lease refuses the eviction with a recorded reason, then
    ends the cycle."""

    def __init__(self, inner: Executor, stopping: threading.Event,
                 guard: Callable[[], str | None] | None = None) -> None:
        self.inner = inner
        self.stopping = stopping
        self.guard = guard
        self.pods: dict[str, Pod] = {}  # every pod handed on, by key (for event UIDs)
        self._refused = False

    def evict(self, pod: Pod, profile: str, plugin: str, reason: str) -> ExecutionResult:
        refused = self._refusal()
        if refused is not None:
            return refused
        self.pods[pod.key] = pod
        return self.inner.evict(pod, profile, plugin, reason)

    def _refusal(self) -> ExecutionResult | None:
        """Why nothing may be changed now: a shutdown ends the cycle, a lost lease refuses
        once (recorded) and then ends it."""
        if self.stopping.is_set():
            raise CycleInterrupted("shutting down")
        refusal = self.guard() if self.guard is not None else None
        if refusal:
            if self._refused:
                raise CycleInterrupted(refusal)
            self._refused = True
            return ExecutionResult(False, "failed", refusal)
        return None

    # -- moves (framework/moves): a budget check changes nothing; a restart is guarded ----------
    def check_budget(self, pod: Pod) -> ExecutionResult:
        return moving(self.inner).check_budget(pod)

    def restart(self, order: RestartOrder) -> ExecutionResult:
        refused = self._refusal()
        if refused is not None:
            return refused
        for pod in order.pods:
            self.pods[pod.key] = pod
        return moving(self.inner).restart(order)

    # -- a plugin's autoCordon: guarded as an eviction is ------------------------------------
    def set_unschedulable(self, node: str, unschedulable: bool) -> ExecutionResult:
        refused = self._refusal()
        if refused is not None:
            return refused
        return cordoning(self.inner).set_unschedulable(node, unschedulable)


_LIMIT_SCOPES = {message: scope for scope, message in LIMIT_MESSAGES.items()}


class CycleReporter:
    """Turns decisions into log lines, metrics and events (called in the cycle's thread)."""

    def __init__(self, policy: Policy, metrics: Metrics, snapshot: ClusterSnapshot,
                 events: EventRecorder | None, dry_run: bool,
                 migrating: frozenset[str] = frozenset()) -> None:
        self.policy = policy
        # Profiles whose evictions are PodMigrationJobs: the job's controller evicts (and
        # posts the pod's event) later.
        self.migrating = migrating
        self.metrics = metrics
        self.snapshot = snapshot
        self.events = events
        self.dry_run = dry_run
        self.pods: dict[str, Pod] = {}
        self.evicted = 0
        self.failed = 0
        self.restarted = 0  # pods moved by restarts
        self.restarts = 0
        self.deferred = 0

    def _ref(self, d: Decision) -> PodRef:
        key = f"{d.namespace}/{d.pod}"
        pod = self.pods.get(key) or self.snapshot.pods.get(key)
        return PodRef(d.namespace, d.pod, pod.metadata.uid if pod is not None else "", d.node)

    def _limit_text(self, message: str) -> str:
        scope = _LIMIT_SCOPES.get(message)
        limits = self.policy.limits
        value = {"total": limits.total, "node": limits.per_node,
                 "namespace": limits.per_namespace}.get(scope or "")
        return f"{scope} eviction limit exceeded ({value})" if scope else message

    def record(self, d: Decision) -> None:
        fields = {"pod": f"{d.namespace}/{d.pod}", "node": d.node, "profile": d.profile,
                  "strategy": d.plugin, "cycle": d.cycle}
        if d.outcome == "restarted":
            self.restarted += 1
            self.metrics.moved("restart")
            log.info("Pod moved by a restart of its Deployment", reason=d.reason,
                     dry_run=self.dry_run, **fields)
            return
        if d.outcome == "deferred":
            self.deferred += 1
            self.metrics.moved("deferred")
            log.info("Eviction deferred", reason=d.reason, dry_run=self.dry_run, **fields)
            return
        # "dry-run": a Koordinator policy's dryRun (the run is a dry run then, see Runner).
        if d.outcome in EVICTED_OUTCOMES:
            self.evicted += 1
            self.metrics.evicted("success", d.plugin, d.profile, d.namespace, d.node)
            self.metrics.moved("evict")
            if d.profile in self.migrating:
                log.info("Created PodMigrationJob", reason=d.reason, **fields)
                return
            log.info("Evicted pod in dry run mode" if self.dry_run else "Evicted pod",
                     reason=d.reason, dry_run=self.dry_run, **fields)
            if self.events is not None:
                self.events.emit(self._ref(d), "Normal", d.plugin, eviction_note(d.node))
            return
        if d.outcome == "background":  # a live migration started; the pod stays, counted
            self.metrics.evicted("background", d.plugin, d.profile, d.namespace, d.node)
            log.info("Eviction in background assumed", reason=d.reason, **fields)
            return
        if d.outcome == "limited":
            failure = self._limit_text(d.reason)
            self.metrics.evicted(d.reason, d.plugin, d.profile, d.namespace, d.node)
            log.info("Eviction refused by a limit", error=d.reason, dry_run=self.dry_run,
                     **fields)
        elif d.outcome in ("pdb-blocked", "failed"):
            self.failed += 1
            failure = d.reason
            self.metrics.evicted("error", d.plugin, d.profile, d.namespace, d.node)
            log.warning("Error evicting pod", outcome=d.outcome, error=d.reason,
                        dry_run=self.dry_run, **fields)
        else:
            return
        if self.events is not None and self.policy.eviction_failure_event_notification:
            self.events.emit(self._ref(d), "Warning", FAILED_REASON,
                             eviction_note(d.node, failure))


    def moved(self, move: Restart | WaitTimeout) -> None:
        """A Deployment restarted (an event on it, and one on each pod it replaces), or a wait
        for a replacement given up (a warning event on the workload)."""
        if isinstance(move, Restart):
            self._restarted(move)
        else:
            self._timed_out(move)

    def _restarted(self, r: Restart) -> None:
        self.restarts += 1
        self.metrics.deployment_restarts.labels(r.plugin, r.profile).inc()
        log.info("Restarted Deployment" if not self.dry_run
                 else "Restarted Deployment in dry run mode",
                 deployment=f"{r.namespace}/{r.name}", pods=list(r.pods), replicas=r.replicas,
                 maxSurge=r.max_surge, maxUnavailable=r.max_unavailable, reason=r.reason,
                 profile=r.profile, strategy=r.plugin, cycle=r.cycle, dry_run=self.dry_run)
        if self.events is None:
            return
        self.events.emit(ObjectRef("apps/v1", "Deployment", r.namespace, r.name, r.uid),
                         "Normal", RESTART_REASON, restart_note(r), action=RESTART_ACTION)
        for key in r.pods:
            namespace, _, name = key.partition("/")
            pod = self.pods.get(key) or self.snapshot.pods.get(key)
            self.events.emit(PodRef(namespace, name, str(pod.metadata.uid) if pod else "",
                                    pod.node_name if pod else ""),
                             "Normal", RESTART_REASON,
                             f"pod moves off {pod.node_name if pod else 'its'} node by a "
                             f"restart of Deployment {r.namespace}/{r.name} by desched "
                             f"({r.plugin})")

    def _timed_out(self, t: WaitTimeout) -> None:
        self.metrics.replacement_timeouts.labels(t.kind).inc()
        log.warning("Stopped waiting for a replacement", workload=f"{t.kind} {t.namespace}/"
                    f"{t.name}", waited=round(t.waited, 1), note=t.text, profile=t.profile,
                    strategy=t.plugin, cycle=t.cycle, dry_run=self.dry_run)
        if self.events is None or not t.uid:
            return
        subject: PodRef | ObjectRef = (
            PodRef(t.namespace, t.name, t.uid) if t.kind == "Pod"
            else ObjectRef(_API_VERSIONS.get(t.kind, "apps/v1"), t.kind, t.namespace, t.name,
                           t.uid))
        self.events.emit(subject, "Warning", TIMEOUT_REASON, t.text)

    def move_counts(self) -> dict[str, int]:
        """The cycle's restarts and deferrals for its closing log line (none: nothing)."""
        if not (self.restarts or self.deferred):
            return {}
        return {"totalRestarted": self.restarted, "restarts": self.restarts,
                "totalDeferred": self.deferred}


# The API version of the workload kinds a wait can be for (the event's `regarding`).
_API_VERSIONS = {"ReplicationController": "v1", "Job": "batch/v1"}


def log_note(note: Note) -> None:
    """A plugin's finding (why it did nothing, a node it could not measure) as a log line."""
    fields = {"node": note.node} if note.node else {}
    log.info(note.text, profile=note.profile, strategy=note.plugin, cycle=note.cycle, **fields)

