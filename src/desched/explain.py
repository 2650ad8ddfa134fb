"""`desched explain`: the simulation with full decision records for one pod or every pod on a
node, told per pod and cycle: a protection the profile's filters give it first, then every
enabled plugin's verdict (evicted, refused, kept by a filter with its reason, or considered and
not picked with why: a namespace scope first), and the notes about its node; with
`--reschedule`, where an evicted pod's replacement landed, even after the last cycle. `--node`
starts with the node itself (its utilization, its role for each utilization plugin, taints,
cordon, pool labels) and, with `--reschedule`, ends with the replacements that arrive on it."""

from __future__ import annotations

from datetime import datetime

from desched.framework.decisions import EVICTED_OUTCOMES, DecisionLog, Note
from desched.framework.runner import IDLE
from desched.framework.types import ClassifiesNodes
from desched.model.node import Node
from desched.model.pod import Pod
from desched.plugins.nodeutilization_common import fmt_pct
from desched.policy.args import namespace_allowed
from desched.predicates.taints import describe_taint
from desched.preflight import NAMESPACE_SCOPES
from desched.scheduler.model import KUBE_DEFAULT
from desched.scheduler.profile import DEFAULT_CONFIG, SchedulerConfig
from desched.simulation import SimulationResult, run_simulation
from desched.utilization import Frame

_VERBS = {"evicted": "EVICTED", "filtered": "kept", "limited": "not evicted (limit)",
          "pdb-blocked": "not evicted (PDB)", "failed": "eviction failed", "skipped": "kept",
          "dry-run": "would be evicted (dryRun)", "considered": "considered, not picked",
          # framework/moves: replaced by a restart of its Deployment, or paced to a later cycle.
          "restarted": "MOVED by a restart", "deferred": "not evicted yet"}
# What a plugin that passed over a protected pod adds: picking it would not have evicted it.
_PROTECTED = "; protected, so kept even if picked"

# Node labels that name the pool or group a node belongs to (cloud node pools, Karpenter,
# instance type, zone); node-role.kubernetes.io/* too.
POOL_LABELS = frozenset({
    "node-pool", "nodepool", "agentpool", "kubernetes.azure.com/agentpool",
    "eks.amazonaws.com/nodegroup", "alpha.eksctl.io/nodegroup-name",
    "cloud.google.com/gke-nodepool", "karpenter.sh/nodepool", "doks.digitalocean.com/node-pool",
    "node.kubernetes.io/instance-type", "topology.kubernetes.io/zone"})
ROLE_PREFIX = "node-role.kubernetes.io/"


def explain_run(policy_path: str, snapshot_paths: list[str], now: datetime | None,
                pod_ref: str | None, node_name: str | None, cycles: int = 1,
                reschedule: bool = False, scheduler: str = KUBE_DEFAULT,
                scheduler_config: SchedulerConfig = DEFAULT_CONFIG) -> str:
    log = DecisionLog(explain_pods=frozenset({pod_ref}) if pod_ref else frozenset(),
                      explain_nodes=frozenset({node_name}) if node_name else frozenset())
    # --node: the frame before the first cycle gives the header its utilization.
    result = run_simulation(policy_path, snapshot_paths, now, cycles, reschedule, log,
                            scheduler=scheduler, scheduler_config=scheduler_config,
                            with_frames=node_name is not None)
    lines = [f"clock: {result.clock.describe()}"]
    # Replacements are told under the pod they replace; those arriving on the node, last.
    followed = {new.key for _, new, _ in log.replacements.values()}
    arrivals = _arrivals(result, node_name) if node_name else []
    arriving = {key for _, key, _ in arrivals}
    subjects = [pod for pod in log.subjects.values()
                if pod.key not in followed and pod.key not in arriving]
    if node_name:
        lines.append(f"node {node_name}: {len(subjects)} pod(s)")
        lines.extend(_header(result, node_name))
        lines.extend(_notes(log.notes, node_name, "  "))
    for pod in subjects:
        lines.extend(_explain_pod(result, pod, indent="" if pod_ref else "  "))
    for cycle, key, replaced in arrivals:
        lines.append(f"  arrives after cycle {cycle}: {key} (replaces {replaced})")
        pod = log.subjects.get(key)
        if pod is not None and cycle < result.cycles:
            # Its cycles, without the `pod ... on NODE:` line the arrival line stands for.
            lines.extend(_explain_pod(result, pod, "  ", first=cycle + 1)[1:])
    return "\n".join(lines)


def _header(result: SimulationResult, name: str) -> list[str]:
    """The node before the first cycle: requests and measured usage as shares of allocatable,
    what each utilization plugin found it to be in cycle 1, cordon, taints and pool labels."""
    descheduler = result.descheduler
    if descheduler is None or not result.frames:
        return []
    node = descheduler.snapshot.nodes[name]
    frame = result.frames[0]
    requests = _shares(frame, name, node, ("cpu requests", "memory requests", "pods"))
    lines = [f"  requests: {requests}"]
    if name in frame.values["cpu usage"]:
        source = ("Koordinator NodeMetric" if name in descheduler.snapshot.node_metrics
                  else "metrics.k8s.io")
        lines.append(f"  usage ({source}): "
                     f"{_shares(frame, name, node, ('cpu usage', 'memory usage'))}")
    lines.extend(f"  {profile}/{plugin} (cycle 1): {_role(result, profile, plugin, name)}"
                 for profile, plugin in _enabled(result)
                 if isinstance(_instance(result, profile, plugin), ClassifiesNodes))
    taints = ", ".join(describe_taint(t) for t in node.spec.taints) or "none"
    pools = ", ".join(key if not value else f"{key}={value}"
                      for key, value in sorted(node.labels.items())
                      if key in POOL_LABELS or key.startswith(ROLE_PREFIX)) or "none"
    cordon = "unschedulable (cordoned)" if node.spec.unschedulable else "schedulable"
    lines.append(f"  {cordon}; taints: {taints}; pool labels: {pools}")
    return lines


def _shares(frame: Frame, name: str, node: Node, series: tuple[str, ...]) -> str:
    """"cpu 8.75% (350m of 4), ..." from a frame's percentages and the node's allocatable."""
    parts = []
    for each in series:
        resource = each.split()[0]
        percent = frame.values[each].get(name, 0.0)
        total = node.allocatable.get(resource, 0)
        parts.append(f"{resource} {fmt_pct(percent)}% "
                     f"({_amount(resource, round(percent * total / 100))} of "
                     f"{_amount(resource, total)})")
    return ", ".join(parts)


def _amount(resource: str, amount: int) -> str:
    """cpu in cores when whole, else millicores; memory in the largest binary unit it fills."""
    if resource == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource == "memory":
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount >= size:
                return f"{amount / size:.1f}".removesuffix(".0") + unit
    return str(amount)


def _role(result: SimulationResult, profile: str, plugin: str, node: str) -> str:
    """What the plugin's cycle-1 run found the node to be; else why it did not classify it
    (the cycle was skipped, or the plugin's note about the node or its run)."""
    found = result.log.node_roles.get((1, profile, plugin, node))
    if found is not None:
        return found
    skipped = result.summaries[0].skipped if result.summaries else None
    said = [n.text for n in result.log.notes if n.cycle == 1 and n.profile == profile
            and n.plugin == plugin and n.node in ("", node)]
    why = (skipped or "; ".join(said)) + _causes(result, profile, plugin)
    return f"not classified: {why.removeprefix('; ')}" if why else "not classified"


def _arrivals(result: SimulationResult, node: str) -> list[tuple[int, str, str]]:
    """Replacements placed on the node, as (cycle, key, "OLD evicted from NODE"), unless told
    under the pod they replace (an explained pod)."""
    log = result.log
    told = {new.key for _, new, _ in log.replacements.values()}
    left = {f"{d.namespace}/{d.pod}": d.node for d in log.decisions if d.outcome == "evicted"}
    found = []
    for summary in result.summaries:
        for key, placed in summary.placements:
            if placed == node and key not in told:
                old = summary.replaces[key]
                found.append((summary.cycle, key, f"{old} evicted from {left.get(old, '?')}"))
    return found


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
    restarted = False
    for cycle in range(first, result.cycles + 1):
        if gone_in is not None and key in log.replacements:
            lines.extend(_replacement(result, key, indent))
            break
        if gone_in is not None:
            how = "moved by a restart" if restarted else "evicted"
            lines.append(f"{indent}  cycle {cycle}: gone ({how} in cycle {gone_in})")
            continue
        if cycle in skipped:
            lines.append(f"{indent}  cycle {cycle}: nothing was evaluated: {skipped[cycle]}"
                         f"{_causes(result, '', '')}")
            continue
        lines.append(f"{indent}  cycle {cycle}:")
        # Protection first: a profile's filters keep the pod whichever plugin wants it.
        protected = {profile for profile, _ in _enabled(result)
                     if (cycle, profile, key) in log.protections}
        lines.extend(f"{indent}    protected: {reason} ({profile}/{by})"
                     f"{_causes(result, profile, by)}"
                     for profile in sorted(protected)
                     for reason, by in log.protections[(cycle, profile, key)].items())
        told: list[str] = []  # the plugins' reasons, which may give the node's notes
        for profile, plugin in _enabled(result):
            said = [d for d in mine if d.cycle == cycle and d.profile == profile
                    and d.plugin == plugin]
            moot = _PROTECTED if profile in protected else ""
            for d in said:
                tail = moot if d.outcome == "considered" else ""
                lines.append(f"{indent}    {profile}/{plugin}: {_VERBS[d.outcome]}: {d.reason}"
                             f"{tail}")
            if not said:
                why = _not_picked(result, cycle, profile, plugin, pod)
                told.append(why)
                lines.append(f"{indent}    {profile}/{plugin}: considered, not picked: {why}"
                             f"{_causes(result, profile, plugin, pod)}{moot}")
            if any(d.outcome in EVICTED_OUTCOMES for d in said):
                gone_in = cycle if not any(d.outcome == "dry-run" for d in said) else None
                restarted = any(d.outcome == "restarted" for d in said)
        if indent == "":  # --pod: its node's notes too (--node prints them once above)
            lines.extend(f"    {text}" for text in _notes(
                [n for n in log.notes if n.cycle == cycle
                 and not any(n.text in why for why in told)], node, ""))
    else:
        # Evicted in the last cycle: where its replacement landed is still part of the run.
        if gone_in is not None and key in log.replacements:
            lines.extend(_replacement(result, key, indent))
    return lines


def _causes(result: SimulationResult, profile: str, plugin: str, pod: Pod | None = None) -> str:
    """What the simulation found matching nothing (preflight.py) that explains a plugin seeing
    no node or no pod, as "; ..." to follow its reason: the policy's nodeSelector, the
    profile's, the plugin's own, and a namespace include the pod is outside of."""
    scopes = {("", ""), (profile, ""), (profile, plugin)}
    return "".join(f"; {u.text}" for u in result.unmatched
                   if (u.profile, u.plugin) in scopes and (
                       u.namespaces is None
                       or (pod is not None and pod.namespace not in u.namespaces)))


def _replacement(result: SimulationResult, key: str, indent: str) -> list[str]:
    """The pod that replaced an evicted one, from the next cycle on."""
    cycle, new, node = result.log.replacements[key]
    if node is None:
        return [f"{indent}  after cycle {cycle}: its replacement {new.key} fits on no node; "
                f"it stays pending"]
    placed = f"{indent}  after cycle {cycle}: replaced by {new.key}, placed on {node}"
    if cycle >= result.cycles:  # the run ends with its placement
        return [f"{placed} (the run ends here; --cycles {cycle + 1} explains it there)"]
    return [placed, *_explain_pod(result, new, indent + "  ", first=cycle + 1)]


def _enabled(result: SimulationResult) -> list[tuple[str, str]]:
    descheduler = result.descheduler
    if descheduler is None:
        return []
    return [(p.name, name) for p in descheduler.profiles
            for name, _ in (*p.deschedule, *p.balance)]


def _instance(result: SimulationResult, profile: str, plugin: str) -> object:
    descheduler = result.descheduler
    if descheduler is None:
        return None
    for p in descheduler.profiles:
        if p.name == profile:
            return p.plugins.get(plugin)
    return None


def _not_picked(result: SimulationResult, cycle: int, profile: str, plugin: str,
                pod: Pod) -> str:
    """Why a plugin that recorded nothing about the pod passed it over: its namespaces (or
    evictableNamespaces) when they leave the pod out, which decides whatever the run found
    (what it said about the run or the node follows), else what it said, else its verdict
    after that cycle's run (framework/verdicts.py), else the runner's note that it evicted
    nothing."""
    said = [n.text for n in result.log.notes if n.cycle == cycle and n.profile == profile
            and n.plugin == plugin and n.node in ("", pod.node_name)]
    found = [] if said and said[0].startswith(IDLE) else said  # the idle note comes alone
    args = getattr(_instance(result, profile, plugin), "args", None)
    for field, attr in NAMESPACE_SCOPES:
        namespaces = getattr(args, attr, None)
        if namespaces is not None and not namespace_allowed(namespaces, pod.namespace):
            return "; ".join([f"namespace {pod.namespace} is outside the plugin's {field}",
                              *found])
    if found:
        return "; ".join(found)
    return result.log.verdicts.get((cycle, profile, plugin, pod.key),
                                   said[0] if said else "its criteria did not match this pod")
