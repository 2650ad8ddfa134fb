"""`desched explain`: the simulation with full decision records for one pod or every pod on a
node, told per pod and cycle: every enabled plugin's verdict (evicted, refused, kept by a filter
with its reason, or considered and not picked with why), and the notes about its node."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from desched.framework.decisions import EVICTED_OUTCOMES, DecisionLog, Note
from desched.framework.runner import IDLE
from desched.model.pod import Pod
from desched.policy.args import namespace_allowed
from desched.scheduler.model import KUBE_DEFAULT
from desched.scheduler.profile import DEFAULT_CONFIG, SchedulerConfig
from desched.simulation import SimulationResult, run_simulation

_VERBS = {"evicted": "EVICTED", "filtered": "kept", "limited": "not evicted (limit)",
          "pdb-blocked": "not evicted (PDB)", "failed": "eviction failed", "skipped": "kept",
          "dry-run": "would be evicted (dryRun)", "considered": "considered, not picked"}


def explain_run(policy_path: str, snapshot_paths: list[str], now: datetime | None,
                pod_ref: str | None, node_name: str | None, cycles: int = 1,
                reschedule: bool = False, scheduler: str = KUBE_DEFAULT,
                scheduler_config: SchedulerConfig = DEFAULT_CONFIG) -> str:
    log = DecisionLog(explain_pods=frozenset({pod_ref}) if pod_ref else frozenset(),
                      explain_nodes=frozenset({node_name}) if node_name else frozenset())
    result = run_simulation(policy_path, snapshot_paths, now, cycles, reschedule, log,
                            scheduler=scheduler, scheduler_config=scheduler_config)
    lines = [f"clock: {result.clock.describe()}"]
    # Replacements are told under the pod they replace.
    followed = {new.key for _, new, _ in log.replacements.values()}
    subjects = [pod for pod in log.subjects.values() if pod.key not in followed]
    if node_name:
        lines.append(f"node {node_name}: {len(subjects)} pod(s)")
        lines.extend(_notes(log.notes, node_name, "  "))
    for pod in subjects:
        lines.extend(_explain_pod(result, pod, indent="" if pod_ref else "  "))
    return "\n".join(lines)


def _notes(notes: list[Note], node: str, indent: str) -> list[str]:
    return [f"{indent}note, cycle {n.cycle}, {n.profile}/{n.plugin}: {n.text}"
            for n in notes if n.node == node]


def _explain_pod(result: SimulationResult, pod: Pod, indent: str, first: int = 1) -> list[str]:
    log = result.log
    key, node = pod.key, pod.node_name
    mine = [d for d in log.decisions if f"{d.namespace}/{d.pod}" == key]
    lines = [f"{indent}pod {key} on {node}:"]
    skipped = {s.cycle: s.skipped for s in result.summaries if s.skipped}
    gone_in: int | None = None
    for cycle in range(first, result.cycles + 1):
        if gone_in is not None and key in log.replacements:
            lines.extend(_replacement(result, key, indent))
            break
        if gone_in is not None:
            lines.append(f"{indent}  cycle {cycle}: gone (evicted in cycle {gone_in})")
            continue
        if cycle in skipped:
            lines.append(f"{indent}  cycle {cycle}: nothing was evaluated: {skipped[cycle]}")
            continue
        lines.append(f"{indent}  cycle {cycle}:")
        told: set[str] = set()  # notes already given as a plugin's reason
        for profile, plugin in _enabled(result):
            said = [d for d in mine if d.cycle == cycle and d.profile == profile
                    and d.plugin == plugin]
            for d in said:
                lines.append(f"{indent}    {profile}/{plugin}: {_VERBS[d.outcome]}: {d.reason}")
            if not said:
                why = _not_picked(result, cycle, profile, plugin, pod)
                told.add(why)
                lines.append(f"{indent}    {profile}/{plugin}: considered, not picked: {why}")
            if any(d.outcome in EVICTED_OUTCOMES for d in said):
                gone_in = cycle if not any(d.outcome == "dry-run" for d in said) else None
        if indent == "":  # --pod: its node's notes too (--node prints them once above)
            lines.extend(f"    {text}" for text in _notes(
                [n for n in log.notes if n.cycle == cycle and n.text not in told], node, ""))
    return lines


def _replacement(result: SimulationResult, key: str, indent: str) -> list[str]:
    """The pod that replaced an evicted one, from the next cycle on."""
    cycle, new, node = result.log.replacements[key]
    if node is None:
        return [f"{indent}  after cycle {cycle}: its replacement {new.key} fits on no node; "
                f"it stays pending"]
    return [f"{indent}  after cycle {cycle}: replaced by {new.key}, placed on {node}",
            *_explain_pod(result, new, indent + "  ", first=cycle + 1)]


def _enabled(result: SimulationResult) -> list[tuple[str, str]]:
    descheduler = result.descheduler
    if descheduler is None:
        return []
    return [(p.name, name) for p in descheduler.profiles
            for name, _ in (*p.deschedule, *p.balance)]


def _instance(result: SimulationResult, profile: str, plugin: str) -> Any:
    descheduler = result.descheduler
    if descheduler is None:
        return None
    for p in descheduler.profiles:
        if p.name == profile:
            return p.plugins.get(plugin)
    return None


def _not_picked(result: SimulationResult, cycle: int, profile: str, plugin: str,
                pod: Pod) -> str:
    """Why a plugin that recorded nothing about the pod passed it over: what it said about the
    run or the pod's node that cycle, else its namespaces, else its verdict after that cycle's
    run (framework/verdicts.py), else the runner's note that it evicted nothing."""
    said = [n.text for n in result.log.notes if n.cycle == cycle and n.profile == profile
            and n.plugin == plugin and n.node in ("", pod.node_name)]
    if said and not said[0].startswith(IDLE):  # the idle note comes alone
        return "; ".join(said)
    instance = _instance(result, profile, plugin)
    args = getattr(instance, "args", None)
    namespaces = getattr(args, "namespaces", None)
    if namespaces is not None and not namespace_allowed(namespaces, pod.namespace):
        return f"namespace {pod.namespace} is outside the plugin's namespaces"
    return result.log.verdicts.get((cycle, profile, plugin, pod.key),
                                   said[0] if said else "its criteria did not match this pod")
