"""What a simulation's reports say beyond its decisions, computed once for text, JSON and HTML:
the balance per cycle and series, the churn (evictions that bought nothing), and the balance of
each node group (`--group-by LABEL`).

Churn is what a user turning a policy on must not discover live:
- a replacement placed back on the node its pod was evicted from (the scheduler undoes the
  eviction);
- a workload evicted in more than one cycle (the policy keeps moving the same pods);
- a cycle whose evictions changed no balance figure (disruption that bought nothing).
Each comes with the remedy that addresses it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from desched.simulation import SimulationResult
from desched.utilization import Balance, Frame, balance, thresholds

NOT_REPLACED = ("evicted pods not replaced: optimistic, their replacements land somewhere and "
                "bring their load back; --reschedule places them")

REMEDY_BACK = ("enable PingPongGuard (it refuses an eviction whose replacement would come "
               "straight back), or give --reschedule the scheduler configuration the cluster "
               "runs (--scheduler-config), or revisit the plugin's thresholds")
REMEDY_REPEATED = ("enable PingPongGuard, or set thresholds the moved pods do not cross again "
                   "(the same workloads are evicted cycle after cycle)")
REMEDY_IDLE = ("raise the thresholds or enable PingPongGuard: these evictions disrupted pods "
               "and left every balance figure as it was")


@dataclass(frozen=True)
class BackOnSource:
    cycle: int
    replacement: str  # "namespace/name" of the new pod
    replaces: str
    node: str


@dataclass(frozen=True)
class Repeated:
    workload: str  # "Deployment ns/name"
    cycles: tuple[int, ...]
    evictions: int


@dataclass(frozen=True)
class Idle:
    cycle: int
    evictions: int


@dataclass
class Churn:
    back_on_source: list[BackOnSource] = field(default_factory=list)
    repeated: list[Repeated] = field(default_factory=list)
    idle: list[Idle] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.back_on_source or self.repeated or self.idle)

    def lines(self) -> list[str]:
        """One line per kind found, with its count, examples and remedy."""
        out = []
        if self.back_on_source:
            shown = ", ".join(f"{b.replacement} on {b.node}" for b in self.back_on_source[:3])
            more = (f" and {len(self.back_on_source) - 3} more" if len(self.back_on_source) > 3
                    else "")
            out.append(f"{len(self.back_on_source)} replacement(s) placed back on the node "
                       f"their pod was evicted from ({shown}{more}): {REMEDY_BACK}")
        if self.repeated:
            shown = ", ".join(f"{r.workload} in cycles {_cycles(r.cycles)}"
                              for r in self.repeated[:3])
            more = f" and {len(self.repeated) - 3} more" if len(self.repeated) > 3 else ""
            out.append(f"{len(self.repeated)} workload(s) evicted in more than one cycle "
                       f"({shown}{more}): {REMEDY_REPEATED}")
        if self.idle:
            count = sum(i.evictions for i in self.idle)
            out.append(f"{count} eviction(s) changed no balance figure (cycle(s) "
                       f"{_cycles(tuple(i.cycle for i in self.idle))}): {REMEDY_IDLE}")
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "backOnSource": [{"cycle": b.cycle, "pod": b.replacement, "replaces": b.replaces,
                              "node": b.node} for b in self.back_on_source],
            "repeatedWorkloads": [{"workload": r.workload, "cycles": list(r.cycles),
                                   "evictions": r.evictions} for r in self.repeated],
            "noBalanceChange": [{"cycle": i.cycle, "evictions": i.evictions}
                                for i in self.idle],
            "remedies": {"backOnSource": REMEDY_BACK, "repeatedWorkloads": REMEDY_REPEATED,
                         "noBalanceChange": REMEDY_IDLE},
        }


def _cycles(cycles: tuple[int, ...]) -> str:
    return ", ".join(str(c) for c in cycles)


def _figures(b: Balance) -> tuple[float, float, int | None]:
    # What a report shows, to the tenth of a point: a change below that is no change to a reader.
    return round(b.std, 1), round(b.max, 1), b.over


def churn(result: SimulationResult) -> Churn:
    found = Churn()
    by_workload: dict[str, list[int]] = defaultdict(list)
    for summary in result.summaries:
        for evicted in summary.evicted.values():
            by_workload[evicted.workload].append(summary.cycle)
        for key, node in summary.placements:
            old = summary.came_back(key, node)
            if old is not None and node is not None:
                found.back_on_source.append(BackOnSource(summary.cycle, key, old, node))
    # A workload paced by `moves` (a pod deferred, then moved) moves over several cycles by
    # design: that is not churn.
    deferred = {f"{d.namespace}/{d.pod}" for d in result.log.of_outcome("deferred")}
    paced = {e.workload for s in result.summaries for key, e in s.evicted.items()
             if key in deferred} if deferred else set()
    found.repeated = sorted(
        (Repeated(workload, tuple(sorted(set(cycles))), len(cycles))
         for workload, cycles in by_workload.items()
         if len(set(cycles)) > 1 and workload not in paced),
        key=lambda r: (-r.evictions, r.workload))
    frames = result.frames
    limits = thresholds(result.policy)
    if len(frames) == len(result.summaries) + 1:
        figures = [{b.series: _figures(b) for b in balance(frame, limits)} for frame in frames]
        for i, summary in enumerate(result.summaries):
            if summary.evicted and figures[i] == figures[i + 1]:
                found.idle.append(Idle(summary.cycle, len(summary.evicted)))
    return found


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
