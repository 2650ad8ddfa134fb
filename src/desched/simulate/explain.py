"""`desched explain`: the simulation with full decision records for one pod or every pod on a
node, told per pod and cycle: a protection the profile's filters give it first, then every
enabled plugin's verdict (evicted, refused, kept by a filter with its reason, or considered and
not picked with why: a namespace scope first), and the notes about its node; with
`--reschedule`, where an evicted pod's replacement landed, even after the last cycle. `--node`
starts with the node itself (its utilization, its role for each utilization plugin, taints,
cordon, pool labels) and, with `--reschedule`, ends with the replacements that arrive on it."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from desched.errors import InputError, quote
from desched.framework.decisions import EVICTED_OUTCOMES, DecisionLog, Note
from desched.framework.registry import Scope
from desched.framework.runner import IDLE
from desched.framework.types import ClassifiesNodes
from desched.model.node import Node
from desched.model.pod import Pod
from desched.predicates.taints import describe_taint
from desched.scheduler.model import KUBE_DEFAULT
from desched.scheduler.profile import DEFAULT_CONFIG, SchedulerConfig
from desched.simulate.frames import Frame
from desched.simulate.simulation import Simulation, SimulationResult
from desched.snapshot.cluster import ClusterSnapshot
from desched.util.names import nearest
from desched.util.percent import fmt_pct

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


class Following:
    """The pods explain tells about, followed through the run it watches (simulation.Observer):
    the pod named, or every pod on the node named, as the snapshot held them; with
    --reschedule, each one's replacement from the cycle after its eviction on, and on the node
    the replacements placed there. The run records them in full (DecisionLog.explain_pods)."""

    def __init__(self, snapshot: ClusterSnapshot, paths: list[str], pod_ref: str | None,
                 node_name: str | None) -> None:
        """An InputError when the snapshot holds no such pod or node."""
        self.nodes = frozenset({node_name}) if node_name else frozenset()
        self.pods = _subjects(snapshot, paths, pod_ref, node_name)
        # An explained pod evicted and recreated: its key -> (the cycle it was evicted in, the
        # replacement, the node it was placed on or None). The replacement is explained from
        # the next cycle on.
        self.replacements: dict[str, tuple[int, Pod, str | None]] = {}
        self._log = DecisionLog()  # the run's, once it starts

    def started(self, log: DecisionLog) -> None:
        log.explain_pods, log.explain_nodes = frozenset(self.pods), self.nodes
        self._log = log

    def cycle_starts(self, cycle: int, snapshot: ClusterSnapshot) -> None:
        """`--node` follows the replacements placed on the node since the last cycle as it
        follows the node's own pods."""
        for name in self.nodes:
            for pod in snapshot.pods_on_node(name, include_terminal=True):
                if pod.key not in self.pods:
                    self.pods[pod.key] = pod
                    self._log.explain(pod.key)

    def placed(self, cycle: int, placed: list[tuple[Pod, Pod, str | None]]) -> None:
        """An explained pod is followed to its replacement."""
        for old, new, node in placed:
            if old.key in self.pods:
                self.replacements[old.key] = (cycle, new, node)
                if node is not None:
                    self.pods[new.key] = new
                    self._log.explain(new.key)


def explain_run(policy_path: str, snapshot_paths: list[str], now: datetime | None,
                pod_ref: str | None, node_name: str | None, cycles: int = 1,
                reschedule: bool = False, scheduler: str = KUBE_DEFAULT,
                scheduler_config: SchedulerConfig = DEFAULT_CONFIG) -> str:
    # --node: the frame before the first cycle gives the header its utilization.
    simulation = Simulation(policy_path, snapshot_paths, now, cycles=cycles,
                            reschedule=reschedule, scheduler=scheduler,
                            scheduler_config=scheduler_config, with_frames=node_name is not None)
    following = Following(simulation.snapshot, snapshot_paths, pod_ref, node_name)
    result = simulation.run(observer=following)
    lines = [f"clock: {result.clock.describe()}"]
    # Replacements are told under the pod they replace; those arriving on the node, last.
    followed = {new.key for _, new, _ in following.replacements.values()}
    arrivals = _arrivals(result, following, node_name) if node_name else []
    arriving = {key for _, key, _ in arrivals}
    subjects = [pod for pod in following.pods.values()
                if pod.key not in followed and pod.key not in arriving]
    if node_name:
        lines.append(f"node {node_name}: {len(subjects)} pod(s)")
        lines.extend(_header(result, node_name))
        lines.extend(_notes(result.log.notes, node_name, "  "))
    for pod in subjects:
        lines.extend(_explain_pod(result, following, pod, indent="" if pod_ref else "  "))
    for cycle, key, replaced in arrivals:
        lines.append(f"  arrives after cycle {cycle}: {key} (replaces {replaced})")
        arrived = following.pods.get(key)
        if arrived is not None and cycle < result.cycles:
            # Its cycles, without the `pod ... on NODE:` line the arrival line stands for.
            lines.extend(_explain_pod(result, following, arrived, "  ", first=cycle + 1)[1:])
    return "\n".join(lines)


def _subjects(snapshot: ClusterSnapshot, paths: list[str], pod_ref: str | None,
              node_name: str | None) -> dict[str, Pod]:
    """The pods `explain` asks about (the one named, or those on the node named), by key; a
    name the snapshot does not hold is an input error."""
    where = ", ".join(paths)
    subjects: dict[str, Pod] = {}
    if pod_ref is not None:
        # NAME alone: the one pod of that name, in whichever namespace.
        ref = pod_ref if "/" in pod_ref else _pod_named(pod_ref, snapshot, where)
        pod = snapshot.pods.get(ref)
        if pod is None:
            namespace = ref.partition("/")[0]
            # Among the namespace's pods when it exists: a whole cluster's would be slow.
            known = snapshot.pods_by_namespace.get(namespace) or snapshot.pods
            raise InputError("--pod", f"pod {quote(ref)} is not in the snapshot ({where})"
                             f"{_did_you_mean(ref, known)}")
        subjects[ref] = pod
    if node_name is not None:
        if node_name not in snapshot.nodes:
            raise InputError("--node", f"node {quote(node_name)} is not in the snapshot "
                                       f"({where}){_did_you_mean(node_name, snapshot.nodes)}")
        for pod in sorted(snapshot.pods_on_node(node_name, include_terminal=True),
                          key=lambda p: p.key):
            subjects[pod.key] = pod
    return subjects


def _pod_named(name: str, snapshot: ClusterSnapshot, where: str) -> str:
    """The NAMESPACE/NAME of the one pod called `name`; an input error naming the pods it may
    mean when several namespaces hold one, or the nearest name when none does."""
    keys = sorted(key for key, pod in snapshot.pods.items() if pod.name == name)
    if len(keys) == 1:
        return keys[0]
    if keys:
        raise InputError("--pod", f"{len(keys)} pods are named {quote(name)} in the snapshot "
                                  f"({where}): give NAMESPACE/NAME; did you mean "
                                  f"{_either(keys)}?")
    close = nearest(name, {pod.name for pod in snapshot.pods.values()})
    meant = sorted(key for key, pod in snapshot.pods.items() if pod.name == close) if close \
        else []
    hint = f"; did you mean {_either(meant)}?" if meant else ""
    raise InputError("--pod", f"no pod named {quote(name)} is in the snapshot ({where}){hint}")


def _either(keys: list[str], shown: int = 5) -> str:
    """'"a", "b" or "c"', the first `shown` of `keys` and how many more."""
    names = [quote(k) for k in keys[:shown]]
    more = len(keys) - shown
    if more > 0:
        return f"{', '.join(names)} or {more} more"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    close = nearest(name, known)
    return f"; did you mean {quote(close)}?" if close else ""


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


def _arrivals(result: SimulationResult, following: Following,
              node: str) -> list[tuple[int, str, str]]:
    """Replacements placed on the node, as (cycle, key, "OLD evicted from NODE"), unless told
    under the pod they replace (an explained pod)."""
    told = {new.key for _, new, _ in following.replacements.values()}
    left = {f"{d.namespace}/{d.pod}": d.node for d in result.log.decisions
            if d.outcome == "evicted"}
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


def _explain_pod(result: SimulationResult, following: Following, pod: Pod, indent: str,
                 first: int = 1) -> list[str]:
    log, replacements = result.log, following.replacements
    key, node = pod.key, pod.node_name
    mine = [d for d in log.decisions if f"{d.namespace}/{d.pod}" == key]
    lines = [f"{indent}pod {key} on {node}:"]
    skipped = {s.cycle: s.skipped for s in result.summaries if s.skipped}
    gone_in: int | None = None
    restarted = False
    for cycle in range(first, result.cycles + 1):
        if gone_in is not None and key in replacements:
            lines.extend(_replacement(result, following, key, indent))
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
        if gone_in is not None and key in replacements:
            lines.extend(_replacement(result, following, key, indent))
    return lines


def _causes(result: SimulationResult, profile: str, plugin: str, pod: Pod | None = None) -> str:
    """What the simulation found matching nothing (simulate/preflight.py) that explains a
    plugin seeing no node or no pod, as "; ..." to follow its reason: the policy's
    nodeSelector, the profile's, the plugin's own, and a namespace include the pod is outside of."""
    scopes = {("", ""), (profile, ""), (profile, plugin)}
    return "".join(f"; {u.text}" for u in result.unmatched
                   if (u.profile, u.plugin) in scopes and (
                       u.namespaces is None
                       or (pod is not None and pod.namespace not in u.namespaces)))


def _replacement(result: SimulationResult, following: Following, key: str,
                 indent: str) -> list[str]:
    """The pod that replaced an evicted one, from the next cycle on."""
    cycle, new, node = following.replacements[key]
    if node is None:
        return [f"{indent}  after cycle {cycle}: its replacement {new.key} fits on no node; "
                f"it stays pending"]
    placed = f"{indent}  after cycle {cycle}: replaced by {new.key}, placed on {node}"
    if cycle >= result.cycles:  # the run ends with its placement
        return [f"{placed} (the run ends here; --cycles {cycle + 1} explains it there)"]
    return [placed, *_explain_pod(result, following, new, indent + "  ", first=cycle + 1)]


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


def _scope(result: SimulationResult, profile: str, plugin: str) -> Scope:
    """What the plugin's spec says of its scope (its namespaces), from its args in `profile`."""
    policy = result.policy
    for config in policy.profiles:
        if config.name == profile and plugin in config.args:
            return policy.plugins[plugin].scope(config.args[plugin])
    return Scope()


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
    for namespaces in _scope(result, profile, plugin).namespaces:
        if not namespaces.allows(pod.namespace):
            return "; ".join([f"namespace {pod.namespace} is outside the plugin's "
                              f"{namespaces.field}", *found])
    if found:
        return "; ".join(found)
    return result.log.verdicts.get((cycle, profile, plugin, pod.key),
                                   said[0] if said else "its criteria did not match this pod")
