"""Rendering a simulation: text for people, JSON per docs/report.md; the HTML page is in
report/html.py."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from desched.framework.decisions import (
    REFUSED_OUTCOMES,
    Decision,
    DecisionLog,
    Note,
    Restart,
)
from desched.model.meta import json_encoder
from desched.simulate import whatif
from desched.simulate.frames import Balance, balance, thresholds
from desched.simulate.simulation import CycleSummary, SimulationResult


def to_json_obj(result: SimulationResult) -> dict[str, Any]:
    """`cycles` and `evictions` keep the contract's meaning; the other keys are additions."""
    log = result.log
    kept = [{"cycle": cycle, "profile": profile, "plugin": plugin, "reason": reason,
             "pods": count}
            for (cycle, profile, plugin, reason), count in sorted(log.kept.items())]
    out: dict[str, Any] = {
        "cycles": result.cycles,
        "clock": {"now": result.clock.now, "source": result.clock.source},
        "evictions": [
            {"cycle": d.cycle, "namespace": d.namespace, "pod": d.pod, "node": d.node,
             "profile": d.profile, "plugin": d.plugin, "reason": d.reason}
            for d in log.evictions()
        ],
        "dryRun": [
            {"cycle": d.cycle, "namespace": d.namespace, "pod": d.pod, "node": d.node,
             "profile": d.profile, "plugin": d.plugin, "reason": d.reason}
            for d in log.decisions if d.outcome == "dry-run"
        ],
        # A Decision encodes as a refusal's object (its fields, in their order): no dict per
        # refusal (161,000 of them in an unlimited cycle at 150,000 pods).
        "refusals": [d for d in log.decisions if d.outcome in REFUSED_OUTCOMES],
        "skipped": kept,  # the name of the first version; "kept" is what the text says
        "kept": kept,
        "notes": [{"cycle": n.cycle, "node": n.node, "profile": n.profile, "plugin": n.plugin,
                   "note": n.text} for n in log.notes],
        "cyclesSkipped": [{"cycle": s.cycle, "reason": s.skipped}
                          for s in result.summaries if s.skipped],
        "rescheduled": [_placement(s, key, node)
                        for s in result.summaries for key, node in s.placements],
        "evictedPodsReplaced": result.replaced,
        "balance": whatif.balance_json(result),
        "churn": whatif.churn(result).to_json(),
        "summary": whatif.story(result).to_json(),
        "warnings": result.warnings,
    }
    groups = whatif.groups_json(result)
    if groups is not None:
        out["groups"] = groups
    if result.policy.plans_moves:
        out.update(moves_json(log))
    return out


def moves_json(log: DecisionLog) -> dict[str, Any]:
    """With the policy's `moves`: `evictions` lists every pod that left its node, each with
    its `mode` (evict, or restart for a pod a Deployment restart replaced), and `restarts`,
    `deferred` and `waitTimeouts` say the rest (docs/moves.md)."""
    return {
        "evictions": [
            {"cycle": d.cycle, "namespace": d.namespace, "pod": d.pod, "node": d.node,
             "profile": d.profile, "plugin": d.plugin, "reason": d.reason,
             "mode": "restart" if d.outcome == "restarted" else "evict"}
            for d in log.moved()
        ],
        "restarts": [
            {"cycle": r.cycle, "namespace": r.namespace, "deployment": r.name,
             "replicas": r.replicas, "maxSurge": r.max_surge,
             "maxUnavailable": r.max_unavailable, "pods": list(r.pods), "profile": r.profile,
             "plugin": r.plugin, "reason": r.reason}
            for r in log.restarts
        ],
        "deferred": [
            {"cycle": d.cycle, "namespace": d.namespace, "pod": d.pod, "node": d.node,
             "profile": d.profile, "plugin": d.plugin, "reason": d.reason}
            for d in log.of_outcome("deferred")
        ],
        "waitTimeouts": [
            {"cycle": t.cycle, "workload": f"{t.kind} {t.namespace}/{t.name}",
             "waitedSeconds": round(t.waited, 3), "profile": t.profile, "plugin": t.plugin,
             "note": t.text}
            for t in log.timeouts
        ],
    }


def moves_counts(log: DecisionLog, cycle: int | None = None) -> str:
    """", 4 moved by 2 restart(s), 7 deferred" (of one cycle, or all), or "" when none."""
    restarts = [r for r in log.restarts if cycle is None or r.cycle == cycle]
    deferred = sum(1 for d in log.decisions
                   if d.outcome == "deferred" and (cycle is None or d.cycle == cycle))
    out = ""
    if restarts:
        out += f", {sum(len(r.pods) for r in restarts)} moved by {len(restarts)} restart(s)"
    if deferred:
        out += f", {deferred} deferred"
    return out


def _placement(summary: CycleSummary, key: str, node: str | None) -> dict[str, object]:
    """A `rescheduled` entry: the replacement, its node, the pod it replaces, and where
    kube-scheduler chooses at random: how many nodes tied (1: none), how many it scores."""
    chance = summary.chances.get(key)
    entry: dict[str, object] = {"cycle": summary.cycle, "pod": key, "node": node,
                                "replaces": summary.replaces.get(key),
                                "tiedNodes": chance.ties if chance is not None else 1}
    if chance is not None and chance.sampled:
        entry["scoredNodes"] = chance.sampled
    return entry


def _span(values: list[float] | list[int], shape: str) -> str:
    """' (low–high)' over the outcomes, when there are several and they differ."""
    if len(values) < 2 or min(values) == max(values):
        return ""
    return f" ({shape.format(min(values))}–{shape.format(max(values))})"


def summary_lines(result: SimulationResult) -> list[str]:
    """Counts per plugin and node, and the balance before and after: what a reader wants
    first."""
    evictions = result.evictions
    lines = [f"summary: {len(evictions)} pod(s) evicted{moves_counts(result.log)} in "
             f"{result.cycles} cycle(s)"]
    if evictions:
        by_plugin = Counter(f"{d.profile}/{d.plugin}" for d in evictions)
        lines.append("  by plugin: " + ", ".join(f"{name} {n}" for name, n in
                                                 by_plugin.most_common()))
        by_node = Counter(d.node for d in evictions)
        shown = ", ".join(f"{name} {n}" for name, n in by_node.most_common(5))
        more = ""
        if len(by_node) > 5:  # the top alone reads as a column of 2s on a big cluster
            spread = Counter(by_node.values())
            more = (f" (and {len(by_node) - 5} more nodes; evictions per node: "
                    + ", ".join(f"{n} on {spread[n]}" for n in sorted(spread)) + ")")
        lines.append(f"  by node: {shown}{more}")
    lines.extend(f"  {line}" for line in whatif.story(result).lines())
    placed = sum(1 for s in result.summaries for _, node in s.placements if node)
    tied = sum(1 for s in result.summaries for p in s.chances.values() if p.ties > 1)
    sampled = max((p.sampled for s in result.summaries for p in s.chances.values()), default=0)
    outcomes = 1 + len(result.other_outcomes)
    if tied and outcomes > 1:
        lines.append(f"  {tied} of {placed} replacement(s) went to one of several equally likely "
                     f"nodes (kube-scheduler picks at random): ranges over {outcomes} outcomes")
    elif tied:
        lines.append(f"  {tied} of {placed} replacement(s) went to one of several equally likely "
                     f"nodes (kube-scheduler picks at random): the figures after are one outcome "
                     f"(--outcomes N gives their range)")
    if sampled:
        lines.append(f"  at this size kube-scheduler scores only {sampled} feasible node(s) per "
                     f"pod (percentageOfNodesToScore): it may place a replacement on a node that "
                     f"scores less than the one shown")
    if len(result.frames) >= 2:
        lines.extend(_balance_lines(result))
    churn = whatif.churn(result)
    if churn:
        lines.append("  churn:")
        lines.extend(f"    {line}" for line in churn.lines())
    limits = thresholds(result.policy)
    for group in whatif.group_balance(result):
        lines.append(f"  {result.group_label}={group.name} ({group.nodes} node(s)):")
        lines.extend(f"    {_change(b, a, [a], result.replaced, limits)}"
                     for b, a in group.pairs())
    return lines


def _balance_lines(result: SimulationResult) -> list[str]:
    """Per series, before the first cycle and after the last. Without --reschedule the true
    figure (now) leads and the one after is named for what it is: pods gone, not replaced."""
    limits = thresholds(result.policy)
    before = {b.series: b for b in balance(result.frames[0], limits)}
    after = {b.series: b for b in balance(result.frames[-1], limits)}
    others: dict[str, list[Balance]] = {}
    for frame in result.other_outcomes:
        for o in balance(frame, limits):
            others.setdefault(o.series, []).append(o)
    lines = [] if not result.optimistic else [
        f"  balance now, then after the evictions ({whatif.NOT_REPLACED}):"]
    for series, b in before.items():
        a = after.get(series)
        if a is not None:
            every = [a, *others.get(series, [])]
            lines.append(f"  {_change(b, a, every, result.replaced, limits)}")
    return lines


def _change(b: Balance, a: Balance, every: list[Balance], replaced: bool,
            limits: dict[str, float]) -> str:
    """One series' figures before and after (`every`: the outcomes after, for ranges)."""
    limit = limits.get(b.series)
    if not replaced:
        over = (f", over {limit:g}%: {b.over} node(s)" if b.over is not None
                and limit is not None else "")
        over_after = (f", over {limit:g}%: {a.over}" if a.over is not None
                      and limit is not None else "")
        return (f"{b.series}: now std {b.std:.1f} points, max {b.max:.1f}%{over}; "
                f"not replaced: std {a.std:.1f}, max {a.max:.1f}%{over_after}")
    over = (f", over {limit:g}%: {b.over} -> {a.over}"
            f"{_span([o.over or 0 for o in every], '{:d}')} node(s)"
            if b.over is not None and limit is not None else "")
    return (f"{b.series}: std {b.std:.1f} -> {a.std:.1f}{_span([o.std for o in every], '{:.1f}')}"
            f" points, max {b.max:.1f}% -> {a.max:.1f}%{_span([o.max for o in every], '{:.1f}%')}"
            f"{over}")


# The other outcomes a cycle lists, each with the word its line starts with.
_LISTED = {"deferred": "defer", "limited": "limited", "pdb-blocked": "pdb-blocked",
           "failed": "failed", "dry-run": "dry-run"}


def render_text(result: SimulationResult) -> str:
    lines = [f"policy {result.policy.path} ({result.policy.format}); snapshot: "
             f"{result.nodes} nodes, {result.pods} pods",
             # What the snapshot lacks and what matches nothing in it (also on stderr).
             *(f"  warning: {line}" for line in result.warnings),
             f"clock: {result.clock.describe()}", *summary_lines(result)]
    by_cycle: dict[int, list[str]] = {}
    evicted_in: Counter[int] = Counter()
    restarts = _restart_lines(result.log)
    # One pass over the decisions (~170,000 in a 5,000-node cycle).
    for d in result.log.decisions:
        outcome = d.outcome
        if outcome == "evicted":
            evicted_in[d.cycle] += 1
            text = (f"  evict   {d.namespace}/{d.pod} on {d.node} [{d.profile}/{d.plugin}]: "
                    f"{d.reason}")
        elif outcome == "restarted":
            text = restarts.pop((d.cycle, f"{d.namespace}/{d.pod}"), "")
            if not text:
                continue
        elif outcome in _LISTED:
            text = (f"  {_LISTED[outcome]:7} {d.namespace}/{d.pod} on {d.node} "
                    f"[{d.profile}/{d.plugin}]: {d.reason}")
        else:
            continue
        lines_of = by_cycle.get(d.cycle)
        if lines_of is None:
            lines_of = by_cycle[d.cycle] = []
        lines_of.append(text)
    back = {b.replacement for b in whatif.churn(result).back_on_source}
    for summary in result.summaries:
        evicted = evicted_in[summary.cycle]
        head = (f"cycle {summary.cycle}: {evicted} pod(s) evicted"
                f"{moves_counts(result.log, summary.cycle)}")
        if summary.skipped:
            head += f" ({summary.skipped})"
        lines.append(head)
        lines.extend(by_cycle.get(summary.cycle, []))
        for key, node in summary.placements:
            chance = summary.chances.get(key)
            tied = chance.ties if chance is not None else 1
            chance_text = f" (one of {tied} equally likely nodes)" if tied > 1 else ""
            if key in back:
                chance_text += (f": the scheduler ({result.scheduler} model) put it back on "
                                f"the node its pod was evicted from (churn)")
            lines.append(f"  placed  {key} on {node}{chance_text}" if node
                         else f"  pending {key}: no node fits")
    if result.log.notes:
        lines.append("notes:")
        lines.extend(note_lines(result.log.notes))
    kept: dict[int, list[tuple[int, str]]] = {}
    for (cycle, profile, plugin, reason), count in result.log.kept.items():
        kept.setdefault(cycle, []).append((count, f"[{profile}/{plugin}] {reason}"))
    for cycle in sorted(kept):
        lines.append(f"kept in cycle {cycle} (pods a plugin considered but did not evict, "
                     f"by reason):")
        for count, text in sorted(kept[cycle], key=lambda entry: (-entry[0], entry[1])):
            lines.append(f"  {count:6} {text}")
    total = len(result.evictions)
    lines.append(f"total: {total} pod(s) evicted{moves_counts(result.log)} in {result.cycles} "
                 f"cycle(s)")
    return "\n".join(lines) + "\n"


def note_lines(notes: Iterable[Note]) -> list[str]:
    """A line per note, but notes of one cycle and plugin that say the same of several nodes
    (the node's name aside) are one line with their count: 300 nodes without a NodeMetric are
    one cause, not 300."""
    groups: dict[tuple[int, str, str, str, int], list[str]] = {}
    for number, n in enumerate(notes):
        # A note on the run is never folded (its number keeps it apart).
        key = (n.cycle, n.profile, n.plugin, _without_node(n.text, n.node), 0) if n.node \
            else (n.cycle, n.profile, n.plugin, n.text, number + 1)
        groups.setdefault(key, []).append(n.node)
    lines = []
    for (cycle, profile, plugin, text, _), nodes in groups.items():
        if len(nodes) == 1:
            where = f"node {nodes[0]}" if nodes[0] else "run"
            text = text.replace(_NODE, nodes[0])
        else:
            shown = ", ".join(nodes[:3]) + (", ..." if len(nodes) > 3 else "")
            where = f"{len(nodes)} nodes ({shown})"
            text = text.replace(f"node {_NODE}", "the node").replace(_NODE, "the node")
        lines.append(f"  cycle {cycle} {where} [{profile}/{plugin}]: {text}")
    return lines


def _without_node(text: str, node: str) -> str:
    """`text` with `node` (a whole name, not part of a longer one) replaced by a marker, so
    notes that differ only in their node compare equal."""
    return re.sub(rf"(?<![\w.-]){re.escape(node)}(?![\w.-])", _NODE, text)


_NODE = "\0node\0"


def _restart_lines(log: DecisionLog) -> dict[tuple[int, str], str]:
    """Each restart's text, keyed by its first pod's decision (where it is told): the restart,
    then each pod it replaces with what the plugin said of it."""
    if not log.restarts:
        return {}
    said: dict[tuple[int, str], Decision] = {
        (d.cycle, f"{d.namespace}/{d.pod}"): d for d in log.decisions if d.outcome == "restarted"}
    out = {}
    for r in log.restarts:
        lines = [_restart_head(r)]
        for key in r.pods:
            d = said.get((r.cycle, key))
            if d is not None:
                why = d.reason.removesuffix(f"; {r.reason}").removeprefix("replaced with the "
                                                                         "others: " + r.reason)
                lines.append(f"    replaces {key} on {d.node}" + (f": {why}" if why else ""))
        if r.pods:
            out[(r.cycle, r.pods[0])] = "\n".join(lines)
    return out


def _restart_head(r: Restart) -> str:
    return f"  {r.reason} [{r.profile}/{r.plugin}]"


def render(result: SimulationResult, output: str) -> str:
    if output == "json":
        return json_encoder.encode(to_json_obj(result)).decode() + "\n"
    if output == "html":
        from desched.report.html import render_html

        return render_html(result)
    return render_text(result)
