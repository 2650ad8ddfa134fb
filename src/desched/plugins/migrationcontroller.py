"""MigrationController: Koordinator's default evict and filter plugin
(docs/migration.md), as it plays out in simulation.

filter(pod) is the arbitrator's pipeline (desched.migration.arbitration); pre_eviction_filter is
DefaultEvictor's nodeFit. evict(...) is Koordinator's Evict: the plugin's dryRun, the filter, the
object limiters, then "create a PodMigrationJob": here, in ReservationFirst mode, place a
Reservation on another node (or refuse), then let the framework evict. Migrations started in a
cycle count as in flight for the rest of that cycle; the object limiters remember them across
cycles on the run's clock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import msgspec

from desched.framework.decisions import Outcome
from desched.framework.registry import PluginSpec, Reads, Scope
from desched.framework.types import Handle
from desched.migration.arbitration import (
    RESERVATION_FIRST,
    Arbitrator,
    MigrationLedger,
    Verdict,
)
from desched.migration.args import (
    ArbitrationArgs,
    MigrationControllerArgs,
    MigrationObjectLimiter,
    default,
    limiter_configs,
    settings,
    validate,
)
from desched.migration.limiter import ObjectLimiters
from desched.migration.objectlimits import PodObjectLimits
from desched.migration.policies import EVICTION, eviction_policy_for
from desched.model.labels import empty_set_warnings, parse_selector_string
from desched.model.node import Node
from desched.model.pod import Pod
from desched.plugins.defaultevictor import node_fit_scope
from desched.policy_files.args import namespace_scope
from desched.predicates.nodefit import fit_failures, pod_fits_any_other_node
from desched.scheduler.kube_default import KubeDefault
from desched.snapshot.workloads import RESOLVED_KINDS, WorkloadResolver

__all__ = ["ArbitrationArgs", "MigrationController", "MigrationControllerArgs",
           "MigrationObjectLimiter", "default", "validate"]

NODE_FIT_REASON = ("pod does not fit on any other node because of nodeSelector(s), Taint(s), or "
                   "nodes marked as unschedulable")


class MigrationController:
    def __init__(self, args: MigrationControllerArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        snapshot = handle.snapshot
        self.settings = settings(args)
        self.resolver = WorkloadResolver(snapshot)
        self.ledger = MigrationLedger(snapshot, self.resolver)
        self.arbitrator = Arbitrator(self.settings, snapshot, self.resolver, self.ledger)
        self.limiters = ObjectLimiters(limiter_configs(args))
        self.node_matcher = parse_selector_string(args.node_selector) if args.node_selector \
            else None
        self._cycle: tuple[int, datetime] | None = None
        # Requests of the Reservations placed this cycle, per node: later ones must fit beside.
        self._reserved: dict[str, dict[str, int]] = {}
        # pod key -> node of its Reservation, for the migrations started this cycle.
        self.reservations: dict[str, str] = {}
        # The arbitration of the snapshot's waiting PodMigrationJobs (done once, first cycle).
        self.arbitration: list[Verdict] = []

    # -- cycles ----------------------------------------------------------------------------------
    def _sync(self) -> None:
        """A new cycle (told apart by the cycle number and the run's clock) starts with no
        migration of this run in flight: in simulation they complete within their cycle."""
        key = (self.handle.log.cycle, self.handle.clock.now)
        if key == self._cycle:
            return
        first = self._cycle is None
        self._cycle = key
        self.ledger.new_cycle(self.handle.clock.now)
        self._reserved.clear()
        self.reservations.clear()
        if first:
            self._arbitrate_waiting_jobs()

    def _arbitrate_waiting_jobs(self) -> None:
        verdicts = self.arbitrator.arbitrate()
        self.arbitration = verdicts
        # Koordinator marks the jobs it fails Failed at once: they stop counting as in flight.
        self.ledger.drop_jobs(v.job for v in verdicts if v.outcome == "failed")
        for verdict in verdicts:
            self.handle.note(f"PodMigrationJob {verdict.job} {verdict.outcome} arbitration: "
                             f"{verdict.reason}")

    # -- Filter / PreEvictionFilter --------------------------------------------------------------
    def filter(self, pod: Pod) -> str | None:
        self._sync()
        return self.arbitrator.filter(pod)

    def pre_eviction_filter(self, pod: Pod) -> str | None:
        """DefaultEvictor's nodeFit over the nodes of args.nodeSelector (Koordinator hands
        nodeFit and nodeSelector to an upstream DefaultEvictor for this extension point)."""
        if not self.args.node_fit or self.arbitrator.skipped("NodeFit"):
            return None
        snapshot = self.handle.snapshot
        if not pod_fits_any_other_node(pod, snapshot.ready_nodes(self.node_matcher), snapshot):
            return NODE_FIT_REASON
        return None

    # -- Evict -----------------------------------------------------------------------------------
    # The rate limiters outlive the cycle (CarriesState): their windows span cycles.
    def carried_state(self) -> object:
        return self.limiters

    def adopt_state(self, state: object) -> None:
        if isinstance(state, ObjectLimiters):
            self.limiters = state

    def evict(self, pod: Pod, trigger: str, reason: str, proceed: Callable[[], bool]) -> bool:
        """Koordinator's Evict, called by the framework after its global limits. `proceed`
        performs the eviction through the framework's executor (recording it) and says whether
        it happened. Refusals are recorded here, against the trigger plugin."""
        if self.args.dry_run:
            # MigrationControllerArgs.dryRun: true, no filter, no PodMigrationJob.
            return True
        self._sync()
        refusal = self.arbitrator.check(pod)
        if refusal is not None:
            why, retryable = refusal
            if retryable:
                self._refuse(pod, trigger, "limited", why)
            else:
                self.handle.log.filtered(pod.namespace, pod.name, pod.node_name,
                                         self.handle.profile, trigger, why)
            return False
        limits = self.object_limits()
        why_not = limits.reserve(pod, self.ledger, self._now())
        if why_not is not None:
            self._refuse(pod, trigger, "limited", why_not)
            return False
        started = False
        try:
            target: str | None = None
            if self.settings.job_mode == RESERVATION_FIRST:
                target, why_not = self._reserve(pod)
                if target is None:
                    self._refuse(pod, trigger, "failed", why_not)
                    return False
            started = proceed()
        finally:
            if not started:  # the tokens taken for it go back
                limits.give_back(pod, self.ledger, self._now())
        if not started:
            return False
        self.ledger.start(pod)
        if target is not None:
            self._hold(pod, target)
        self._amend(pod, target)
        return True

    def object_limits(self) -> PodObjectLimits:
        # Read each time: the live runtime hands every cycle's plugin the run's limiters.
        return PodObjectLimits(self.limiters, self.args.max_migrating_per_workload)

    def _now(self) -> float:
        return self.handle.clock.now.timestamp()

    def _refuse(self, pod: Pod, trigger: str, outcome: Outcome, why: str) -> None:
        self.handle.log.record(outcome, pod.namespace, pod.name, pod.node_name,
                               self.handle.profile, trigger, f"MigrationController: {why}")

    # -- ReservationFirst ------------------------------------------------------------------------
    def _room(self, pod: Pod, node: Node) -> bool:
        """Whether the node still has room for the pod beside this cycle's Reservations."""
        reserved = self._reserved.get(node.name)
        if not reserved:
            return True
        used = self.handle.snapshot.node_requested(node.name)
        allocatable = node.allocatable
        for name, request in pod.requests.items():
            free = allocatable.get(name, 0) - used.get(name, 0) - reserved.get(name, 0)
            if request > free:
                return False
        pods_free = allocatable.get("pods", 0) - used.get("pods", 0) - reserved.get("pods", 0)
        return pods_free >= 1

    def _reserve(self, pod: Pod) -> tuple[str | None, str]:
        """Where koord-scheduler could place the pod's Reservation: another ready node
        (the Reservation carries a NotIn affinity to the pod's node) that fits the pod beside
        the Reservations placed earlier this cycle."""
        snapshot = self.handle.snapshot
        others = [n for n in snapshot.ready_nodes() if n.name != pod.node_name]
        candidates = [n for n in others if self._room(pod, n)]
        # The scheduler counts reserved resources as used, which spreads Reservations;
        # the model does not see them, so nodes holding none yet are tried first.
        fresh = [n for n in candidates if n.name not in self._reserved]
        model, now = KubeDefault(), self.handle.clock.now
        chosen = (model.place(pod, fresh, snapshot, now).node
                  or model.place(pod, candidates, snapshot, now).node)
        if chosen is None:
            failures = fit_failures(pod, candidates, snapshot)
            failures.update({n.name: "taken by this cycle's Reservations"
                             for n in others if n not in candidates})
            detail = "; ".join(f"{name}: {why}" for name, why in sorted(failures.items())[:5])
            more = f" (and {len(failures) - 5} more)" if len(failures) > 5 else ""
            return None, (f"ReservationFirst: no other node can take a Reservation for the pod"
                          f"{': ' + detail + more if detail else ' (no other ready node)'}")
        return chosen, ""

    def _hold(self, pod: Pod, node_name: str) -> None:
        """The Reservation of a migration that started holds its node's room for the cycle."""
        reserved = self._reserved.setdefault(node_name, {})
        for name, amount in pod.requests.items():
            reserved[name] = reserved.get(name, 0) + amount
        reserved["pods"] = reserved.get("pods", 0) + 1
        self.reservations[pod.key] = node_name

    def _amend(self, pod: Pod, target: str | None) -> None:
        """Name the Reservation's node (and a non-default eviction policy) in the eviction's
        recorded reason."""
        extra = []
        if target is not None:
            extra.append(f"reservation on {target}")
        policy = eviction_policy_for(pod, self.args.eviction_policy or EVICTION)
        if policy != EVICTION:
            extra.append(f"evictionPolicy {policy}")
        decisions = self.handle.log.decisions
        if not extra or not decisions:
            return
        last = decisions[-1]
        if last.outcome == "evicted" and last.namespace == pod.namespace and last.pod == pod.name:
            decisions[-1] = msgspec.structs.replace(last, reason="; ".join([last.reason, *extra]))


SPEC = PluginSpec(
    name="MigrationController",
    extension_points=frozenset({"filter", "preevictionfilter", "evict"}),
    args_type=MigrationControllerArgs,
    factory=MigrationController,
    validate=validate,
    warnings=lambda args: empty_set_warnings("nodeSelector", args.node_selector),
    default=default,
    args_kind="MigrationControllerArgs",
    scope=lambda args: Scope(
        reads=(Reads(RESOLVED_KINDS, "MigrationController (a pod's workload: its replicas, "
                                     "maxMigrating, maxUnavailable)"),),
        namespaces=namespace_scope("namespaces", args.namespaces),
        nodes=node_fit_scope(args.node_selector, args.node_fit)),
    evicts_through_migration_jobs=True,
)
