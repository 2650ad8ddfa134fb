"""The Evictor: global limits, the executor behind it, and the profile-bound view plugins use."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

import msgspec

from desched.framework.background import InBackground
from desched.framework.decisions import DecisionLog
from desched.model.pod import Pod

if TYPE_CHECKING:
    from desched.framework.moves.planner import MovePlanner

LimitScope = Literal["total", "node", "namespace"]

# Upstream's error texts (pkg/descheduler/evictions); also the metric's `result` label.
# The policy field that sets each limit.
LIMIT_ARGS: dict[LimitScope, str] = {"total": "maxNoOfPodsToEvictTotal",
                                     "node": "maxNoOfPodsToEvictPerNode",
                                     "namespace": "maxNoOfPodsToEvictPerNamespace"}
LIMIT_MESSAGES: dict[LimitScope, str] = {
    "total": "maximum number of evicted pods per a descheduling cycle reached",
    "node": "maximum number of evicted pods per node reached",
    "namespace": "maximum number of evicted pods per namespace reached",
}


ALREADY_IN_BACKGROUND = "eviction in background already requested: not requested again"


class EvictionLimitError(Exception):
    """A global limit refused the eviction. Plugins stop (total) or move to the next node (node)."""

    def __init__(self, scope: LimitScope) -> None:
        super().__init__(LIMIT_MESSAGES[scope])
        self.scope = scope


class ExecutionResult(msgspec.Struct, frozen=True, gc=False):
    """What an executor did with one eviction. A struct, not a dataclass: a cycle at 150,000
    pods makes one per refused eviction (189,000 without limits), and a frozen dataclass's
    __init__ costs ten times as much."""

    ok: bool
    # "background": the request was answered by an eviction in background (framework/
    # background.py); not ok: the pod stays, for now.
    outcome: Literal["evicted", "pdb-blocked", "failed", "restarted", "background"] = "evicted"
    message: str = ""


class Executor(Protocol):
    """Carries an eviction out: simulation mutates the snapshot, live calls the API."""

    def evict(self, pod: Pod, profile: str, plugin: str, reason: str) -> ExecutionResult: ...


@dataclass(frozen=True)
class RestartOrder:
    """Restart Deployment namespace/name as `kubectl rollout restart` does, replacing `pods`
    (framework/moves). `uid` and `resource_version` are the snapshot's: the restart applies to
    that Deployment as the cycle saw it, or not at all."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    at: datetime
    pods: tuple[Pod, ...]
    profile: str
    plugin: str
    reason: str


@runtime_checkable
class MoveExecutor(Protocol):
    """An executor that can also move pods without evicting them (framework/moves)."""

    def check_budget(self, pod: Pod) -> ExecutionResult:
        """Whether the pod's PodDisruptionBudget allows evicting it now; evicts nothing."""

    def restart(self, order: RestartOrder) -> ExecutionResult:
        """Restart the Deployment; its pods leave the cycle's snapshot (they are replaced)."""


class _CannotMove:
    """What stands in for an executor that cannot move pods (a plugin's test double, say)."""

    _NO = ExecutionResult(False, "failed", "this run's executor cannot restart a Deployment")

    def check_budget(self, pod: Pod) -> ExecutionResult:
        return self._NO

    def restart(self, order: RestartOrder) -> ExecutionResult:
        return self._NO


def moving(executor: Executor) -> MoveExecutor:
    """`executor` where it can move pods, else one that says it cannot."""
    return executor if isinstance(executor, MoveExecutor) else _CannotMove()


@runtime_checkable
class NodeExecutor(Protocol):
    """An executor that can also cordon and uncordon nodes (CustomPriority's autoCordon):
    simulation marks the snapshot's node, live patches the Node."""

    def set_unschedulable(self, node: str, unschedulable: bool) -> ExecutionResult:
        """Set the node's spec.unschedulable; later plugins and cycles see the change."""


class _CannotCordon:
    """What stands in for an executor that cannot change nodes (a plugin's test double)."""

    def set_unschedulable(self, node: str, unschedulable: bool) -> ExecutionResult:
        return ExecutionResult(False, "failed", "this run's executor cannot cordon a node")


def cordoning(executor: Executor) -> NodeExecutor:
    """`executor` where it can cordon nodes, else one that says it cannot."""
    return executor if isinstance(executor, NodeExecutor) else _CannotCordon()


@dataclass
class Limits:
    per_node: int | None = None
    per_namespace: int | None = None
    total: int | None = None


_NONE_IN_BACKGROUND = InBackground()  # what the limits count without the gate


@dataclass
class Evictor:
    """Counts evictions per cycle against the policy's limits (reset by `new_cycle`)."""

    limits: Limits
    executor: Executor
    log: DecisionLog
    dry_run: bool = False
    total: int = 0
    by_node: dict[str, int] = field(default_factory=dict)
    by_namespace: dict[str, int] = field(default_factory=dict)
    # The policy's `moves`: evictions are planned and carried out after each plugin's run
    # (framework/moves). None: each eviction is carried out at once, as upstream does.
    moves: MovePlanner | None = None
    # Evictions in background in progress (upstream's EvictionsInBackground gate): they count
    # against the limits and are not requested again. None: the gate is off.
    background: InBackground | None = None

    def new_cycle(self) -> None:
        self.total = 0
        self.by_node.clear()
        self.by_namespace.clear()

    def _limit_hit(self, pod: Pod) -> LimitScope | None:
        """The limit the pod's eviction would pass, counting the evictions in background in
        progress too (upstream's `counted + backgroundRequests + 1 > limit`)."""
        lim = self.limits
        bg = self.background if self.background is not None else _NONE_IN_BACKGROUND
        if lim.total is not None and self.total + bg.total + 1 > lim.total:
            return "total"
        node = pod.node_name
        if node and lim.per_node is not None and (
                self.by_node.get(node, 0) + bg.by_node.get(node, 0) + 1 > lim.per_node):
            return "node"
        namespace = pod.namespace
        if lim.per_namespace is not None and (
                self.by_namespace.get(namespace, 0) + bg.by_namespace.get(namespace, 0) + 1
                > lim.per_namespace):
            return "namespace"
        return None

    def limit_for_all(self, pods: list[Pod]) -> LimitScope | None:
        """The limit that evicting every one of `pods` would pass (None: they all fit), so an
        all-or-nothing move (CustomPriority's DrainNode) does not start one it cannot finish."""
        lim = self.limits
        bg = self.background if self.background is not None else _NONE_IN_BACKGROUND
        if lim.total is not None and self.total + bg.total + len(pods) > lim.total:
            return "total"
        by_node: dict[str, int] = {}
        by_namespace: dict[str, int] = {}
        for pod in pods:
            if pod.node_name:
                by_node[pod.node_name] = by_node.get(pod.node_name, 0) + 1
            by_namespace[pod.namespace] = by_namespace.get(pod.namespace, 0) + 1
        if lim.per_node is not None and any(
                self.by_node.get(node, 0) + bg.by_node.get(node, 0) + n > lim.per_node
                for node, n in by_node.items()):
            return "node"
        if lim.per_namespace is not None and any(
                self.by_namespace.get(ns, 0) + bg.by_namespace.get(ns, 0) + n > lim.per_namespace
                for ns, n in by_namespace.items()):
            return "namespace"
        return None

    def check_limits(self, pod: Pod, profile: str, plugin: str) -> None:
        """Raise EvictionLimitError (and record it) when a global limit refuses the pod."""
        scope = self._limit_hit(pod)
        if scope is not None:
            self.log.record("limited", pod.namespace, pod.name, pod.node_name, profile, plugin,
                            LIMIT_MESSAGES[scope])
            raise EvictionLimitError(scope)

    def _count(self, pod: Pod, step: int = 1) -> None:
        node = pod.node_name
        self.total += step
        if node:
            self.by_node[node] = self.by_node.get(node, 0) + step
        self.by_namespace[pod.namespace] = self.by_namespace.get(pod.namespace, 0) + step

    def count(self, pod: Pod) -> None:
        """A move made other than by `execute` (a restart counts once against the limits)."""
        self._count(pod)

    def refund(self, pod: Pod) -> None:
        """Take back a planned pod's count: the move it was counted for is decided anew."""
        self._count(pod, -1)

    def execute(self, pod: Pod, profile: str, plugin: str, reason: str) -> bool:
        """Carry an eviction out (limits already checked): the executor, counters, record.

        Koordinator's top-level dryRun goes through the executor too, which is then always the
        simulation one (desched run and simulate make sure of it): a PDB refuses the dry-run
        eviction as it would refuse the real one, and the cycle sees the pod gone."""
        result = self.executor.evict(pod, profile, plugin, reason)
        if not result.ok:
            if result.outcome == "background":
                return self._started_in_background(pod, profile, plugin, result.message)
            meta = pod.metadata  # its fields, not the Pod properties: one call per refusal less
            self.log.record(result.outcome, meta.namespace, meta.name, pod.spec.node_name,
                            profile, plugin, result.message)
            return False
        self._count(pod)
        if self.dry_run:
            self.log.record("dry-run", pod.namespace, pod.name, pod.node_name, profile, plugin,
                            reason)
            return True
        # The executor's note on a success (a PodMigrationJob's name, an uncertain outcome).
        recorded = f"{reason}; {result.message}" if result.message else reason
        self.log.record("evicted", pod.namespace, pod.name, pod.node_name, profile, plugin,
                        recorded)
        return True

    def _started_in_background(self, pod: Pod, profile: str, plugin: str, message: str) -> bool:
        """The request was answered by an eviction in background. With the gate on, the pod
        is in progress from now (counted against the limits, not counted as evicted); a pod
        that has ended is let be, as upstream does. With it off, the answer is an error."""
        background = self.background
        if background is None:
            self.log.record("failed", pod.namespace, pod.name, pod.node_name, profile, plugin,
                            message)
            return False
        if pod.terminal:
            self.log.record("skipped", pod.namespace, pod.name, pod.node_name, profile, plugin,
                            f"eviction in background of a {pod.status.phase} pod: ignored")
            return True
        background.assume(pod, profile, plugin)
        self.log.record("background", pod.namespace, pod.name, pod.node_name, profile, plugin,
                        message)
        return True

    def requested_in_background(self, pod: Pod, profile: str, plugin: str) -> bool:
        """An eviction in background of the pod is in progress: not requested again (the
        plugin is told it succeeded, as upstream tells it, and nothing is counted)."""
        background = self.background
        if background is None or not background.total or not background.has(pod):
            return False
        self.log.record("skipped", pod.namespace, pod.name, pod.node_name, profile, plugin,
                        ALREADY_IN_BACKGROUND)
        return True

    def count_without_eviction(self, pod: Pod, profile: str, plugin: str, reason: str) -> None:
        """An evict plugin reported success without evicting (MigrationController's dryRun):
        Koordinator counts it against the limits all the same."""
        self._count(pod)
        self.log.record("dry-run", pod.namespace, pod.name, pod.node_name, profile, plugin,
                        reason)

    def evict(self, pod: Pod, profile: str, plugin: str, reason: str) -> bool:
        bg = self.background  # simulate always has one: most cycles, with no pod in progress
        if bg is not None and bg.total and self.requested_in_background(pod, profile, plugin):
            return True
        lim = self.limits
        if lim.total is not None or lim.per_node is not None or lim.per_namespace is not None:
            self.check_limits(pod, profile, plugin)
        if self.moves is not None:
            return self.moves.plan(pod, profile, plugin, reason)
        return self.execute(pod, profile, plugin, reason)

    def set_unschedulable(self, node: str, unschedulable: bool, profile: str, plugin: str,
                          reason: str) -> bool:
        """Cordon (or uncordon) a node through the executor, told as a note on the node for
        reports, `explain --node` and the live log. Koordinator's top-level dryRun runs the
        simulation executor, so a dry run only marks the snapshot's node."""
        result = cordoning(self.executor).set_unschedulable(node, unschedulable)
        what = "cordoned" if unschedulable else "uncordoned"
        if result.ok:
            self.log.note(node, profile, plugin, f"{what} node {node}: {reason}")
        else:
            self.log.note(node, profile, plugin, f"node {node} could not be {what} ({reason}): "
                                                 f"{result.message}")
        return result.ok

    def flush_moves(self) -> None:
        """Carry out what the plugin that just ran planned (nothing without `moves`)."""
        if self.moves is not None:
            self.moves.flush()

    def drop_moves(self) -> None:
        """The plugin's run failed: what it planned stays undone."""
        if self.moves is not None:
            self.moves.drop()


@runtime_checkable
class EvictPlugin(Protocol):
    """Koordinator's evict extension point: the plugin decides, `proceed` evicts."""

    def evict(self, pod: Pod, trigger: str, reason: str,
              proceed: Callable[[], bool]) -> bool: ...


class FilterChain(Protocol):
    def filter(self, pod: Pod) -> str | None: ...

    def pre_eviction_filter(self, pod: Pod) -> str | None: ...


@dataclass
class ProfileEvictor:
    """The evictor as one profile sees it: its filter plugins ANDed, then the global Evictor."""

    evictor: Evictor
    profile: str
    filters: list[FilterChain] = field(default_factory=list)
    pre_eviction_filters: list[FilterChain] = field(default_factory=list)
    evict_plugin: EvictPlugin | None = None  # Koordinator profiles (MigrationController)
    # The profile's plugin instances by name, and which one is asking the filters now: a
    # filter may judge an eviction by the plugin that wants it (PingPongGuard).
    plugins: dict[str, object] = field(default_factory=dict)
    asking: str = ""

    def filter_reason(self, pod: Pod) -> str | None:
        for plugin in self.filters:
            reason = plugin.filter(pod)
            if reason is not None:
                return reason
        return None

    def pre_eviction_reason(self, pod: Pod) -> str | None:
        for plugin in self.pre_eviction_filters:
            reason = plugin.pre_eviction_filter(pod)
            if reason is not None:
                return reason
        return None

    def filter(self, pod: Pod, plugin: str) -> bool:
        # filter_reason inlined: every plugin asks this for most pods, every cycle.
        self.asking = plugin
        for check in self.filters:
            reason = check.filter(pod)
            if reason is not None:
                self._filtered(pod, plugin, reason, check)
                return False
        return True

    def pre_eviction_filter(self, pod: Pod, plugin: str) -> bool:
        self.asking = plugin
        for check in self.pre_eviction_filters:
            reason = check.pre_eviction_filter(pod)
            if reason is not None:
                self._filtered(pod, plugin, reason, check)
                return False
        return True

    def _filtered(self, pod: Pod, plugin: str, reason: str, check: FilterChain) -> None:
        meta = pod.metadata
        log = self.evictor.log
        log.filtered(meta.namespace, meta.name, pod.spec.node_name, self.profile, plugin, reason)
        if log.explaining:  # which filter kept it: looked up for explained runs only
            log.protected(pod.key, pod.spec.node_name, self.profile, reason, self.name_of(check))

    def name_of(self, plugin: object) -> str:
        """The name the profile enables `plugin` under."""
        return next((name for name, p in self.plugins.items() if p is plugin),
                    type(plugin).__name__)

    def evict(self, pod: Pod, plugin: str, reason: str) -> bool:
        evictor, profile = self.evictor, self.profile
        if self.evict_plugin is None or evictor.dry_run:
            return evictor.evict(pod, profile, plugin, reason)
        if evictor.requested_in_background(pod, profile, plugin):
            return True
        evictor.check_limits(pod, profile, plugin)
        proceeded = False

        def proceed() -> bool:
            nonlocal proceeded
            proceeded = True
            return evictor.execute(pod, profile, plugin, reason)

        ok = self.evict_plugin.evict(pod, plugin, reason, proceed)
        if ok and not proceeded:
            evictor.count_without_eviction(pod, profile, plugin,
                                           f"{reason} (evict plugin dryRun: not evicted)")
        return ok
