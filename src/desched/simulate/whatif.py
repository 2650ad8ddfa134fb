"""What a simulation's reports say beyond its decisions, computed once for text, JSON and HTML:
the whole story of the evictions (evicted, refused, paced, kept), the balance per cycle and
series, the churn (evictions that bought nothing), and the balance of each node group
(`--group-by LABEL`).

Churn is what a user turning a policy on must not discover live, each plugin judged by what its
evictions exist for (PluginSpec.purpose):
- a replacement placed back on the node its pod was evicted from (the scheduler undoes the
  eviction), unless the plugin wanted only a fresh pod (PodLifeTime, RemoveFailedPods);
- a replacement evicted again (the policy moves the same workload twice for one cause);
- an eviction by a balancing plugin in a cycle that changed no balance figure (disruption that
  bought nothing).
Each comes with the remedy that addresses it. Not churn: a workload drained over several cycles
because a budget or a limit held some of its pods back (paced: the budget working), an eviction
refused and tried again, the evictions of plugins that do not balance.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from desched.framework.decisions import EVICTED_OUTCOMES
from desched.framework.policy import Policy
from desched.framework.registry import Purpose
from desched.simulate.frames import Balance, Frame, balance, thresholds
from desched.simulate.simulation import CycleSummary, SimulationResult

NOT_REPLACED = ("evicted pods not replaced: optimistic, their replacements land somewhere and "
                "bring their load back; --reschedule places them")

REMEDY_BACK = ("enable PingPongGuard (it refuses an eviction whose replacement would come "
               "straight back), or give --reschedule the scheduler configuration the cluster "
               "runs (--scheduler-config), or revisit the plugin's thresholds")
REMEDY_REPEATED = ("enable PingPongGuard, or set thresholds the moved pods do not cross again "
                   "(a replacement evicted again moved its workload twice)")
REMEDY_IDLE = ("raise the thresholds or enable PingPongGuard: these evictions by a balancing "
               "plugin disrupted pods and left every balance figure as it was")
PACED = ("the budgets, limits and pacing at work: the drain takes more cycles, and no pod "
         "moves twice")


@dataclass(frozen=True)
class BackOnSource:
    cycle: int
    replacement: str  # "namespace/name" of the new pod
    replaces: str
    node: str


@dataclass(frozen=True)
class Repeated:
    workload: str  # "Deployment ns/name"
    cycles: tuple[int, ...]  # every cycle that evicted one of its pods
    evictions: int  # of its pods, replacements included
    replacements: tuple[str, ...] = ()  # its replacements evicted again


@dataclass(frozen=True)
class Idle:
    cycle: int
    evictions: int  # by balancing plugins


@dataclass
class Churn:
    back_on_source: list[BackOnSource] = field(default_factory=list)
    repeated: list[Repeated] = field(default_factory=list)
    idle: list[Idle] = field(default_factory=list)
    # The evictions flagged, each once: the pods whose replacement came back, the replacements
    # evicted again, the balancing plugins' evictions in an idle cycle.
    flagged: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.back_on_source or self.repeated or self.idle)

    def lines(self) -> list[str]:
        """One line per kind found, with its count, examples and remedy."""
        out = []
        if self.back_on_source:
            shown = _some([f"{b.replacement} on {b.node}" for b in self.back_on_source])
            out.append(f"{len(self.back_on_source)} replacement(s) placed back on the node "
                       f"their pod was evicted from ({shown}): {REMEDY_BACK}")
        if self.repeated:
            shown = _some([f"{r.workload} in cycles {_cycles(r.cycles)}" for r in self.repeated])
            out.append(f"{len(self.repeated)} workload(s) whose replacement was evicted again "
                       f"({shown}): {REMEDY_REPEATED}")
        if self.idle:
            count = sum(i.evictions for i in self.idle)
            out.append(f"{count} eviction(s) by a balancing plugin changed no balance figure "
                       f"(cycle(s) {_cycles(tuple(i.cycle for i in self.idle))}): {REMEDY_IDLE}")
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "backOnSource": [{"cycle": b.cycle, "pod": b.replacement, "replaces": b.replaces,
                              "node": b.node} for b in self.back_on_source],
            "repeatedWorkloads": [{"workload": r.workload, "cycles": list(r.cycles),
                                   "evictions": r.evictions,
                                   "replacementsEvicted": list(r.replacements)}
                                  for r in self.repeated],
            "noBalanceChange": [{"cycle": i.cycle, "evictions": i.evictions}
                                for i in self.idle],
            "flaggedEvictions": len(self.flagged),
            "remedies": {"backOnSource": REMEDY_BACK, "repeatedWorkloads": REMEDY_REPEATED,
                         "noBalanceChange": REMEDY_IDLE},
        }


def _some(examples: list[str], joint: str = ", ") -> str:
    """The first three examples, and how many more."""
    more = (f"{joint.strip(', ')} and {len(examples) - 3} more" if len(examples) > 3
            else "")
    return joint.join(examples[:3]) + more


def _cycles(cycles: tuple[int, ...]) -> str:
    return ", ".join(str(c) for c in cycles)


def _figures(b: Balance) -> tuple[float, float, int | None]:
    # What a report shows, to the tenth of a point: a change below that is no change to a reader.
    return round(b.std, 1), round(b.max, 1), b.over


def purpose(policy: Policy, plugin: str) -> Purpose:
    """What the plugin's evictions exist for; a plugin the policy does not know relocates."""
    spec = policy.plugins.get(plugin)
    return spec.purpose if spec is not None else "relocate"


def churn(result: SimulationResult) -> Churn:
    found = Churn()
    policy = result.policy
    replacements: set[str] = set()  # every replacement placed so far
    by_workload: dict[str, list[int]] = defaultdict(list)
    again: dict[str, list[str]] = defaultdict(list)
    for summary in result.summaries:
        for key, evicted in summary.evicted.items():
            by_workload[evicted.workload].append(summary.cycle)
            if key in replacements and purpose(policy, evicted.plugin) != "replace":
                again[evicted.workload].append(key)
                found.flagged.add(key)
        for key, node in summary.placements:
            old = summary.came_back(key, node)
            if (old is not None and node is not None
                    and purpose(policy, summary.evicted[old].plugin) != "replace"):
                found.back_on_source.append(BackOnSource(summary.cycle, key, old, node))
                found.flagged.add(old)
            if node is not None:
                replacements.add(key)
    found.repeated = sorted(
        (Repeated(workload, tuple(sorted(set(by_workload[workload]))),
                  len(by_workload[workload]), tuple(keys))
         for workload, keys in again.items()),
        key=lambda r: (-r.evictions, r.workload))
    frames = result.frames
    limits = thresholds(policy)
    if len(frames) == len(result.summaries) + 1:
        figures = [{b.series: _figures(b) for b in balance(frame, limits)} for frame in frames]
        for i, summary in enumerate(result.summaries):
            balancing = [key for key, e in summary.evicted.items()
                         if purpose(policy, e.plugin) == "balance"]
            if balancing and figures[i] == figures[i + 1]:
                found.idle.append(Idle(summary.cycle, len(balancing)))
                found.flagged.update(balancing)
    return found


def workloads_in_several_cycles(summaries: Iterable[CycleSummary]) -> list[Repeated]:
    """The workloads evicted in more than one cycle, but those a budget, a limit or `moves`
    held back in an earlier one (paced: see `story`); for cycles whose replacements nobody
    tracked (`desched run`'s, placed by the cluster's scheduler)."""
    by_workload: dict[str, list[int]] = defaultdict(list)
    held: dict[str, int] = {}  # workload -> the first cycle that held one of its pods back
    for summary in summaries:
        for h in summary.held.values():
            held.setdefault(h.workload, summary.cycle)
        for evicted in summary.evicted.values():
            by_workload[evicted.workload].append(summary.cycle)
    return sorted(
        (Repeated(workload, tuple(sorted(set(cycles))), len(cycles))
         for workload, cycles in by_workload.items()
         if len(set(cycles)) > 1 and not (workload in held and held[workload] < max(cycles))),
        key=lambda r: (-r.evictions, r.workload))


# The whole story -------------------------------------------------------------------------


@dataclass(frozen=True)
class Refused:
    """Pods whose every eviction a budget, a limit or an error refused: still on their node."""

    outcome: str  # the refusals' outcome: "pdb-blocked", "limited", "failed"
    pods: int
    attempts: int

    @property
    def kind(self) -> str:
        """What refused them, as the text says it: "a PodDisruptionBudget", ..."""
        return _KINDS[self.outcome]


@dataclass(frozen=True)
class Paced:
    """A workload drained over several cycles: a budget or a limit (or `moves`) held some of
    its pods back in one cycle, and a later cycle evicted them (or others of it)."""

    workload: str
    by: tuple[str, ...]  # "PodDisruptionBudget ns/name", "maxNoOfPodsToEvictPerNode", ...
    cycles: tuple[int, ...]  # every cycle that evicted one of its pods
    pods: int  # its pods evicted after the hold


@dataclass
class Story:
    evicted: int
    refused: list[Refused]
    paced: list[Paced]
    kept: int  # pods a plugin considered and did not evict, each once, evicted in no cycle

    @property
    def refused_pods(self) -> int:
        return sum(r.pods for r in self.refused)

    @property
    def refused_attempts(self) -> int:
        return sum(r.attempts for r in self.refused)

    @property
    def paced_pods(self) -> int:
        return sum(p.pods for p in self.paced)

    def lines(self) -> list[str]:
        """The refused, paced and kept lines of the text summary (none when nothing)."""
        out = []
        if len(self.refused) == 1:
            r = self.refused[0]
            out.append(f"refused: {r.pods:,} pod(s) never evicted, by {r.kind} "
                       f"({r.attempts:,} attempt(s))")
        elif self.refused:
            kinds = ", ".join(f"{r.pods:,} by {r.kind} ({r.attempts:,} attempt(s))"
                              for r in self.refused)
            out.append(f"refused: {self.refused_pods:,} pod(s) never evicted "
                       f"({self.refused_attempts:,} attempt(s)): {kinds}")
        if self.paced:
            shown = _some([f"{p.workload} by {', '.join(p.by)} in cycles {_cycles(p.cycles)}"
                           for p in self.paced], "; ")
            out.append(f"paced: {self.paced_pods:,} of the evicted pod(s), of "
                       f"{len(self.paced):,} workload(s), evicted in a later cycle than one that "
                       f"held their workload back ({shown}): not churn, {PACED}")
        if self.kept:
            out.append(f"kept: {self.kept:,} pod(s) a plugin considered and did not evict "
                       f"(\"kept in cycle\" below, by reason)")
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "evicted": self.evicted,
            "refused": {"pods": self.refused_pods, "attempts": self.refused_attempts,
                        "by": [{"outcome": r.outcome, "pods": r.pods, "attempts": r.attempts}
                               for r in self.refused]},
            "paced": {"pods": self.paced_pods, "workloads": [
                {"workload": p.workload, "by": list(p.by), "cycles": list(p.cycles),
                 "pods": p.pods} for p in self.paced]},
            "kept": self.kept,
        }


_KINDS = {"pdb-blocked": "a PodDisruptionBudget", "limited": "a limit", "failed": "an error"}


def story(result: SimulationResult) -> Story:
    """Evicted, refused (distinct pods never evicted, with their attempts), paced, kept: one pod
    counted once, however many cycles tried it."""
    log = result.log
    # Pods by (namespace, name): a cycle at 5,000 nodes logs ~170,000 decisions.
    evicted = {(d.namespace, d.pod) for d in log.decisions if d.outcome in EVICTED_OUTCOMES}
    last: dict[tuple[str, str], str] = {}
    attempts: dict[tuple[str, str], int] = {}
    for d in log.decisions:
        kind = d.outcome
        if kind in _KINDS:
            key = (d.namespace, d.pod)
            if key not in evicted:
                last[key] = kind
                attempts[key] = attempts.get(key, 0) + 1
    held: dict[str, dict[str, int]] = {}  # workload -> what held it back -> the first cycle
    paced_pods: Counter[str] = Counter()
    cycles: dict[str, set[int]] = defaultdict(set)
    for summary in result.summaries:
        for e in summary.evicted.values():
            cycles[e.workload].add(summary.cycle)
            if any(c < summary.cycle for c in held.get(e.workload, {}).values()):
                paced_pods[e.workload] += 1
        for h in summary.held.values():
            held.setdefault(h.workload, {}).setdefault(h.by, summary.cycle)
    refused: dict[str, list[int]] = {}
    for key, outcome in last.items():
        entry = refused.setdefault(outcome, [0, 0])
        entry[0] += 1
        entry[1] += attempts[key]
    paced = sorted(
        (Paced(workload, tuple(by for by, c in held[workload].items()
                               if c < max(cycles[workload])),
               tuple(sorted(cycles[workload])), n)
         for workload, n in paced_pods.items()),
        key=lambda p: (-p.pods, p.workload))
    kept = log.kept_count(evicted)
    return Story(len(result.evictions),
                 [Refused(o, *refused[o]) for o in _KINDS if o in refused],
                 paced, kept)


def _figures_json(b: Balance) -> dict[str, object]:
    out: dict[str, object] = {"nodes": b.nodes, "mean": round(b.mean, 2),
                              "std": round(b.std, 2), "max": round(b.max, 2)}
    if b.over is not None:
        out["over"] = b.over
    return out


def balance_json(result: SimulationResult) -> list[dict[str, object]]:
    """Per cycle and series: the figures before the cycle and after it (percent of
    allocatable), the policy's threshold when it has one, and whether evicted pods were
    replaced."""
    limits = thresholds(result.policy)
    frames = result.frames
    out: list[dict[str, object]] = []
    for i in range(1, len(frames)):
        before = {b.series: b for b in balance(frames[i - 1], limits)}
        for a in balance(frames[i], limits):
            b = before.get(a.series)
            if b is None:
                continue
            entry: dict[str, object] = {"cycle": i, "series": a.series,
                                        "before": _figures_json(b), "after": _figures_json(a),
                                        "evictedPodsReplaced": result.replaced}
            if a.series in limits:
                entry["threshold"] = limits[a.series]
            out.append(entry)
    return out


@dataclass(frozen=True)
class GroupBalance:
    value: str  # the label's value; "" for nodes without the label
    nodes: int
    before: list[Balance]
    after: list[Balance]

    @property
    def name(self) -> str:
        return self.value or "(no label)"

    def pairs(self) -> list[tuple[Balance, Balance]]:
        """Each series measured both before and after."""
        after = {a.series: a for a in self.after}
        return [(b, after[b.series]) for b in self.before if b.series in after]


def _split(frame: Frame, groups: dict[str, str]) -> dict[str, Frame]:
    """The frame cut into one per group, in one pass over its values (not one per group)."""
    out: dict[str, Frame] = {}
    for series, values in frame.values.items():
        for node, value in values.items():
            group = groups.get(node, "")
            part = out.get(group)
            if part is None:
                part = out[group] = Frame(frame.label, {})
            part.values.setdefault(series, {})[node] = value
    return out


def group_balance(result: SimulationResult) -> list[GroupBalance]:
    """The balance before the first cycle and after the last, per value of the --group-by
    label; groups by node count, largest first."""
    if result.group_label is None or len(result.frames) < 2:
        return []
    sizes = Counter(result.groups.values())
    limits = thresholds(result.policy)
    empty = Frame("", {})
    before = _split(result.frames[0], result.groups)
    after = _split(result.frames[-1], result.groups)
    return [GroupBalance(value, size, balance(before.get(value, empty), limits),
                         balance(after.get(value, empty), limits))
            for value, size in sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))]


def groups_json(result: SimulationResult) -> dict[str, object] | None:
    groups = group_balance(result)
    if not groups:
        return None
    return {"label": result.group_label, "groups": [
        {"value": g.value, "nodes": g.nodes, "balance": [
            {"series": b.series, "before": _figures_json(b), "after": _figures_json(a)}
            for b, a in g.pairs()]}
        for g in groups]}
