"""Decision records: every eviction, refusal and filter verdict, with its reason.

Evictions and refusals (limits, PDBs, API errors) are always recorded one by one. Filter verdicts
are counted per (plugin, reason); they are recorded per pod only for the pods being explained,
because at 150k pods a record per pod per plugin would cost more than the decisions themselves.
So are the verdicts of plugins that passed an explained pod over (framework/verdicts.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import msgspec

Outcome = Literal["evicted", "filtered", "limited", "pdb-blocked", "failed", "skipped",
                  "dry-run", "considered", "restarted", "deferred", "background"]
# "background": the eviction request started an eviction in background (a live migration,
# framework/background.py): the pod stays while its controller moves it.
# The pod leaves (or, in a dry run, would leave) its node: evicted, or replaced by a surge-first
# restart of its Deployment (framework/moves).
EVICTED_OUTCOMES = frozenset({"evicted", "dry-run", "restarted"})
# An eviction a plugin wanted that did not happen: a limit, a PodDisruptionBudget, an error.
# ("deferred", a move paced to a later cycle, is not refused: it is told apart.)
REFUSED_OUTCOMES = frozenset({"limited", "pdb-blocked", "failed"})


class Decision(msgspec.Struct, frozen=True, gc=False):
    """One eviction, refusal or explained verdict. A struct: a cycle at 150,000 pods records
    one per eviction attempt (189,000 without limits), and a frozen dataclass's __init__ costs
    ten times as much."""

    cycle: int
    outcome: Outcome
    namespace: str
    pod: str
    node: str
    profile: str
    plugin: str
    reason: str


class Note(msgspec.Struct, frozen=True, gc=False):
    cycle: int
    node: str
    profile: str
    plugin: str
    text: str


class Restart(msgspec.Struct, frozen=True, gc=False):
    """A Deployment restarted surge-first instead of evicting its pods (one per restart; each
    pod it replaces has a "restarted" Decision too)."""

    cycle: int
    profile: str
    plugin: str
    namespace: str
    name: str
    uid: str
    replicas: int
    max_surge: int
    max_unavailable: int
    pods: tuple[str, ...]  # the pods it replaces, namespace/name
    reason: str  # "restart Deployment ns/name (...): <what the rollout guarantees>"


class WaitTimeout(msgspec.Struct, frozen=True, gc=False):
    """desched stopped waiting for a workload's replacement (moves.replacementTimeout)."""

    cycle: int
    profile: str
    plugin: str
    kind: str
    namespace: str
    name: str
    uid: str
    waited: float  # seconds
    text: str


@dataclass
class DecisionLog:
    """What one run decided. `explain` names pods (namespace/name) or nodes to record in full;
    the runner asks the plugins' verdicts and the filters' protections about the pods
    (framework/verdicts.py). Whatever else explain follows through a run (the pods as the
    snapshot held them, their replacements), it keeps itself (simulate/explain.py)."""

    explain_pods: frozenset[str] = frozenset()
    explain_nodes: frozenset[str] = frozenset()
    decisions: list[Decision] = field(default_factory=list)
    # Pods kept per (cycle, profile, plugin, reason): a pod kept in every cycle is kept once
    # per cycle, never summed into more pods than the cluster has.
    kept: Counter[tuple[int, str, str, str]] = field(default_factory=Counter)
    notes: list[Note] = field(default_factory=list)
    cycle: int = 1
    # (cycle, profile, plugin, pod key) -> why the plugin passed over an explained pod it
    # recorded nothing about, asked of the plugin after its run (framework/verdicts.py).
    verdicts: dict[tuple[int, str, str, str], str] = field(default_factory=dict)
    # (cycle, profile, pod key) -> reason -> the filter plugin that gave it: why the profile's
    # filters keep an explained pod, whichever plugin asked (one protection binds them all).
    protections: dict[tuple[int, str, str], dict[str, str]] = field(default_factory=dict)
    # (cycle, profile, plugin, node) -> what a utilization plugin's run found an explained node
    # to be (its role: source, target, neither), asked of the plugin after its run.
    node_roles: dict[tuple[int, str, str, str], str] = field(default_factory=dict)
    # Surge-first restarts, and the waits for a replacement desched gave up (framework/moves).
    restarts: list[Restart] = field(default_factory=list)
    timeouts: list[WaitTimeout] = field(default_factory=list)
    # Every pod `kept` counts, as (namespace, name), once however many cycles and plugins kept
    # it: the reports' "kept" pods. `compact_kept` keeps only their number.
    kept_pods: set[tuple[str, str]] = field(default_factory=set)
    _kept_count: int = 0

    def explain(self, pod_key: str) -> None:
        """Record this pod in full from now on too (explain follows a replacement, or a pod
        that arrives on an explained node)."""
        if pod_key not in self.explain_pods:
            self.explain_pods = self.explain_pods | {pod_key}

    def wants_detail(self, pod_key: str, node: str) -> bool:
        return pod_key in self.explain_pods or node in self.explain_nodes

    def record(self, outcome: Outcome, namespace: str, pod: str, node: str, profile: str,
               plugin: str, reason: str) -> None:
        self.decisions.append(Decision(self.cycle, outcome, namespace, pod, node, profile, plugin,
                                       reason))

    def filtered(self, namespace: str, pod: str, node: str, profile: str, plugin: str,
                 reason: str) -> None:
        self.kept[(self.cycle, profile, plugin, reason)] += 1
        self.kept_pods.add((namespace, pod))
        if (self.explain_pods or self.explain_nodes) and self.wants_detail(
                f"{namespace}/{pod}", node):
            self.record("filtered", namespace, pod, node, profile, plugin, reason)

    def protected(self, pod_key: str, node: str, profile: str, reason: str, by: str) -> None:
        """A filter plugin (`by`) keeps the pod: for `explain`, which tells it before the
        plugins' verdicts."""
        if self.wants_detail(pod_key, node):
            self.protections.setdefault((self.cycle, profile, pod_key), {}).setdefault(reason,
                                                                                       by)

    def kept_count(self, leaving: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset()
                   ) -> int:
        """The pods kept, each once, but those in `leaving` ((namespace, name): evicted in
        another cycle or by another plugin)."""
        if not self.kept_pods:
            return self._kept_count
        return len(self.kept_pods - leaving) if leaving else len(self.kept_pods)

    def compact_kept(self) -> None:
        """Keep the number of kept pods, not the pods (a log kept after its cycle)."""
        if self.kept_pods:
            self._kept_count = len(self.kept_pods)
            self.kept_pods = set()

    @property
    def filtered_counts(self) -> Counter[tuple[str, str, str]]:
        """The kept counts of every cycle together, by (profile, plugin, reason)."""
        total: Counter[tuple[str, str, str]] = Counter()
        for (_, profile, plugin, reason), n in self.kept.items():
            total[(profile, plugin, reason)] += n
        return total

    @property
    def explaining(self) -> bool:
        return bool(self.explain_pods or self.explain_nodes)

    def considered(self, namespace: str, pod: str, node: str, profile: str, plugin: str,
                   reason: str) -> None:
        """Why a plugin looked at a pod and did not pick it, for `explain` only (not a kept
        pod: nothing stopped an eviction the plugin wanted)."""
        if self.wants_detail(f"{namespace}/{pod}", node):
            self.record("considered", namespace, pod, node, profile, plugin, reason)

    def note(self, node: str, profile: str, plugin: str, text: str) -> None:
        """A finding about a node or the whole run (bad metrics, a hot node whose pods fit
        nowhere), not about one pod. `node` is empty for run-level notes."""
        self.notes.append(Note(self.cycle, node, profile, plugin, text))

    def aborted(self, profile: str, plugin: str, text: str) -> None:
        """A plugin's run ended for want of data (usage unavailable): a run-level note."""
        self.note("", profile, plugin, text)

    def kept_by(self, cycle: int, profile: str, plugin: str) -> Counter[str]:
        """What one plugin kept in one cycle, by reason."""
        return Counter({reason: n for (c, p, name, reason), n in self.kept.items()
                        if c == cycle and p == profile and name == plugin})

    def restarted(self, restart: Restart) -> None:
        self.restarts.append(restart)

    def timed_out(self, timeout: WaitTimeout) -> None:
        """A wait given up: recorded, and told as a run-level note."""
        self.timeouts.append(timeout)
        self.note("", timeout.profile, timeout.plugin, timeout.text)

    def evictions(self) -> list[Decision]:
        return [d for d in self.decisions if d.outcome == "evicted"]

    def moved(self) -> list[Decision]:
        """Every pod that left its node, evicted or replaced by a restart, in order."""
        return [d for d in self.decisions if d.outcome in ("evicted", "restarted")]

    def of_outcome(self, outcome: Outcome) -> list[Decision]:
        return [d for d in self.decisions if d.outcome == outcome]
