"""What plugins see: the handle, the profile-bound evictor, and the plugin protocols."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from desched.framework.evictor import EvictionLimitError, LimitScope
from desched.model.node import Node
from desched.model.pod import Pod

if TYPE_CHECKING:
    from desched.framework.decisions import DecisionLog
    from desched.framework.evictor import ProfileEvictor
    from desched.framework.policy import Policy
    from desched.snapshot.cluster import ClusterSnapshot

EXTENSION_POINTS = ("deschedule", "balance", "filter", "preevictionfilter", "evict")


class Clock:
    """The run's notion of now (fixed by --now so a simulation is reproducible)."""

    def __init__(self, now: datetime) -> None:
        self.now = now


@dataclass(frozen=True)
class QueryAnswer:
    """A metrics server's answer to one query as the transport got it: the HTTP status and
    reason phrase, the body, and the endpoint that answered (for the reader's messages)."""

    status: int
    reason: str
    body: bytes
    endpoint: str


class QueryFailed(Exception):
    """A query that got no answer (the server unreachable, the URL unusable, the token
    unreadable); the message says why (one line)."""


@runtime_checkable
class UsageQueries(Protocol):
    """The network requests of the plugins' usage sources, made by whoever runs the cycle:
    `desched run` over the live layer's HTTP client (its TLS, timeouts, retries and metrics),
    on the event loop while the cycle's thread waits. Plugins and usage sources hold the query
    logic and read the answers; they never talk to the network (docs/architecture.md)."""

    def prometheus(self, url: str, auth_secret: tuple[str, str] | None,
                   params: Mapping[str, str]) -> QueryAnswer:
        """An instant query (`params`: the form of /api/v1/query) against the Prometheus at
        `url`, authenticated per the provider (`auth_secret`: its authToken's secret, if set).
        Raises QueryFailed when no answer came; any answer, an error status included, is
        returned."""


class Handle:
    """One plugin's view of the framework: the cluster, its profile's evictor and the clock."""

    def __init__(self, snapshot: ClusterSnapshot, evictor: ProfileEvictor, clock: Clock,
                 log: DecisionLog, profile: str, plugin: str,
                 policy: Policy | None = None, queries: UsageQueries | None = None) -> None:
        # The whole policy, for plugins that read top-level settings (metrics providers).
        self.policy = policy
        # How usage sources query a metrics server; None where nothing may (simulate).
        self.queries = queries
        self.snapshot = snapshot
        self.evictor = evictor
        self.clock = clock
        self.log = log
        self.profile = profile
        self.plugin = plugin

    @property
    def now(self) -> datetime:
        return self.clock.now

    def filter(self, pod: Pod) -> bool:
        """The profile's Filter verdict; a rejection is recorded against this plugin."""
        return self.evictor.filter(pod, self.plugin)

    def pre_eviction_filter(self, pod: Pod) -> bool:
        return self.evictor.pre_eviction_filter(pod, self.plugin)

    def evict(self, pod: Pod, reason: str) -> bool:
        """Ask for an eviction. Raises EvictionLimitError when a global limit is reached."""
        return self.evictor.evict(pod, self.plugin, reason)

    def limit_for_all(self, pods: list[Pod]) -> LimitScope | None:
        """The eviction limit that evicting all of `pods` would pass, or None."""
        return self.evictor.evictor.limit_for_all(pods)

    def set_unschedulable(self, node: str, unschedulable: bool, reason: str) -> bool:
        """Cordon (True) or uncordon (False) a node through the run's executor, recorded as a
        note on the node; False when it could not be done (the note says why)."""
        return self.evictor.evictor.set_unschedulable(node, unschedulable, self.profile,
                                                      self.plugin, reason)

    def note(self, text: str, node: str = "") -> None:
        """Record a finding about a node (or, without one, the whole run) for reports and
        `explain`: bad or stale metrics, a hot node whose pods fit nowhere."""
        self.log.note(node, self.profile, self.plugin, text)

    def abort(self, text: str) -> None:
        """Record why this plugin's run ends without acting (no usage data at all): a note,
        and, in `desched run`, a metric."""
        self.log.aborted(self.profile, self.plugin, text)

    def evict_node_pods(self, candidates: Iterable[tuple[Pod, str]]) -> bool:
        """Evict one node's candidates in order, reacting to limits as upstream's plugins do:
        a node limit ends this node's batch; the total limit ends the plugin's run (False)."""
        evict, plugin = self.evictor.evict, self.plugin  # `evict`, a call less per pod
        for pod, reason in candidates:
            try:
                evict(pod, plugin, reason)
            except EvictionLimitError as err:
                if err.scope == "total":
                    return False
                if err.scope == "node":
                    return True
        return True

    def considered(self, pod: Pod, reason: str) -> None:
        """Record why this plugin looked at a pod and did not pick it (for `explain` only)."""
        self.log.considered(pod.namespace, pod.name, pod.node_name, self.profile, self.plugin,
                            reason)

    def skip(self, pod: Pod, reason: str) -> None:
        """Record why this plugin passed over a pod it considered (for `explain`)."""
        self.log.filtered(pod.namespace, pod.name, pod.node_name, self.profile, self.plugin,
                          reason)


@runtime_checkable
class DeschedulePlugin(Protocol):
    def deschedule(self, nodes: list[Node]) -> None: ...


@runtime_checkable
class BalancePlugin(Protocol):
    def balance(self, nodes: list[Node]) -> None: ...


@runtime_checkable
class FilterPlugin(Protocol):
    def filter(self, pod: Pod) -> str | None:
        """None when the pod may be evicted, else why not."""

    def pre_eviction_filter(self, pod: Pod) -> str | None: ...


# What a plugin may declare beyond its extension points. The framework, `explain`, the guard and
# the run loop ask for these by protocol, never by plugin name.

@runtime_checkable
class ExplainsPods(Protocol):
    def verdict(self, pod: Pod, nodes: list[Node]) -> str | None:
        """Why the last run left `pod` alone (`explain`), when the run did not say."""


@runtime_checkable
class Protects(Protocol):
    def protection(self, pod: Pod) -> str | None:
        """Why this filter keeps `pod` whichever plugin asks (a protection such as
        DefaultEvictor's, not a verdict on one eviction), else None: `explain` tells it first,
        before any plugin's verdict, even when no plugin asked."""


@runtime_checkable
class ClassifiesNodes(Protocol):
    def node_role(self, node: str) -> str | None:
        """What the last run found node `node` to be (source, destination...), for `explain
        --node`."""


@runtime_checkable
class ChecksThresholds(Protocol):
    def over_thresholds_after(self, node: str, pod: Pod) -> str | None:
        """Which of the plugin's thresholds node `node` would cross with `pod` on it, if any
        (PingPongGuard asks the plugin that evicts)."""


@runtime_checkable
class CarriesState(Protocol):
    """State that outlives the cycle's snapshot (anomaly detectors, rate limiters): `desched
    run` hands it from a plugin to the next instance of the same profile and plugin, across
    cycles and policy reloads. Holding the plugin instead would hold its whole snapshot."""

    def carried_state(self) -> object: ...

    def adopt_state(self, state: object) -> None: ...


@runtime_checkable
class PersistsState(Protocol):
    """State worth keeping between separate runs (a CronJob's), as JSON by name: `desched run`
    keeps it in a ConfigMap."""

    def dump_state(self, now: datetime) -> dict[str, object]: ...

    def load_state(self, entries: dict[str, object], now: datetime) -> None: ...
