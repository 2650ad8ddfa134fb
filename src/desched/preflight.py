"""What a simulation says once, before its first cycle, about the policy against the snapshot:
the kinds the policy (and --reschedule) reads that the snapshot lacks, and the node selectors
and namespace includes that match nothing in it.

Both depend only on the policy and the snapshot as loaded, so they are found once per run
rather than per cycle; the plugins' own messages ("No nodes to process LowNodeLoad", upstream's
"requires >=2 nodes") stay as they are, and these lines name the cause beside them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from desched.errors import quote
from desched.framework.runner import Descheduler
from desched.model.labels import Matcher
from desched.model.meta import LabelSelector
from desched.model.node import Node
from desched.model.objects import PodDisruptionBudget
from desched.plugins.defaultevictor import DefaultEvictor
from desched.plugins.lownodeload import LowNodeLoad
from desched.plugins.lownodeload_args import DEFAULT_POOL
from desched.plugins.lownodeutilization import LowNodeUtilization
from desched.plugins.migrationcontroller import MigrationController
from desched.plugins.pingpongguard import PingPongGuard
from desched.scheduler.model import LOAD_AWARE, SchedulerModel
from desched.scheduler.profile import DEFAULT_CONFIG, Profile, SchedulerConfig
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.completeness import Needs, absent_controllers
from desched.snapshot.workloads import RESOLVED_KINDS
from desched.usage.base import KUBERNETES_METRICS
from desched.util.names import nearest

# The kinds kube-scheduler's default spreading reads a pod's selector from (default_spread.py).
_SPREAD_KINDS = ("Service", "ReplicaSet", "StatefulSet", "ReplicationController")


def needs(descheduler: Descheduler, models: list[tuple[str, SchedulerModel]]) -> Needs:
    """Who reads which kind in this run: the enabled plugins, budgets whose arithmetic counts
    the replicas a workload expects, and the scheduler models (`models`: who runs each;
    PingPongGuard's are added here)."""
    found = Needs()
    models = list(models)
    for plugin in _plugins(descheduler):
        if isinstance(plugin, MigrationController):
            found.add(RESOLVED_KINDS, "MigrationController (a pod's workload: its replicas, "
                                      "maxMigrating, maxUnavailable)")
        elif isinstance(plugin, LowNodeLoad):
            found.add(["NodeMetric"], "LowNodeLoad (node and pod usage)")
        elif isinstance(plugin, LowNodeUtilization) and plugin.mode == KUBERNETES_METRICS:
            found.add(["NodeMetrics", "PodMetrics"],
                      "LowNodeUtilization (metricsUtilization source KubernetesMetrics)")
        elif isinstance(plugin, PingPongGuard):
            models.append(("PingPongGuard", plugin.model))
    for who, model in models:
        config: SchedulerConfig = getattr(model, "config", DEFAULT_CONFIG)
        if any(_spreads(profile) for profile in config.profiles.values()):
            found.add(_SPREAD_KINDS, f"{who} (default topology spreading)")
        if model.name == LOAD_AWARE:
            found.add(["NodeMetric"], f"{who} (koord-load-aware: node usage)")
    snapshot = descheduler.snapshot
    counted = any(_counts_expected(pdb) for pdbs in snapshot.pdbs_by_namespace.values()
                  for pdb in pdbs)
    if counted or found.uses.keys() & set(RESOLVED_KINDS):
        found.absent = absent_controllers(snapshot)
    for kind, names in found.absent.items() if counted else ():
        # Only the pods naming an absent controller are looked at: few in a complete snapshot.
        if any(_counts_expected(pdb) for pods in names.values() for pod in pods
               for pdb in snapshot.pdbs_for_pod(pod)):
            found.add([kind], "PodDisruptionBudgets (maxUnavailable or a percentage "
                              "minAvailable, no status: the replicas their workloads expect)")
    return found


def _plugins(descheduler: Descheduler) -> Iterator[object]:
    for profile in descheduler.profiles:
        yield from profile.plugins.values()


def _spreads(profile: Profile) -> bool:
    """Whether a scheduler profile gives pods without constraints of their own default ones."""
    enabled = "PodTopologySpread" in profile.filters or profile.weight("PodTopologySpread")
    return bool(enabled and profile.spread.effective)


def _counts_expected(pdb: PodDisruptionBudget) -> bool:
    """The disruption controller's expected count comes from the pods' controllers (BudgetTracker
    ._expected_scale) when the budget has no status to read and is not a plain minAvailable."""
    spec, status = pdb.spec, pdb.status
    return (status is None or status.disruptions_allowed is None) and (
        spec.max_unavailable is not None or isinstance(spec.min_available, str))


@dataclass(frozen=True)
class Unmatched:
    """A node selector or namespace include that matches nothing in the snapshot, said in one
    line. `profile` and `plugin` are "" for the policy's own nodeSelector, `plugin` alone for a
    profile's; `namespaces` are the names an include lists (None for a node selector)."""

    text: str
    profile: str = ""
    plugin: str = ""
    namespaces: frozenset[str] | None = None


def unmatched(descheduler: Descheduler) -> list[Unmatched]:
    """Every node selector of the policy, its profiles and plugins that matches no node, and
    every namespace include naming a namespace the snapshot does not have."""
    snapshot = descheduler.snapshot
    nodes = snapshot.all_nodes()
    found = _policy_selector(descheduler, nodes)
    several = len(descheduler.profiles) > 1
    for profile in descheduler.profiles:
        if profile.node_selector is not None and _count(profile.node_selector, nodes) == 0:
            found.append(Unmatched(f"profile {quote(profile.name)} nodeSelector matches 0 of "
                                   f"{len(nodes)} nodes: its plugins see no node",
                                   profile.name))
        for name, plugin in profile.plugins.items():
            who = f"{profile.name}/{name}" if several else name
            found.extend(Unmatched(text, profile.name, name)
                         for text in _plugin_selectors(who, plugin, nodes))
            found.extend(_includes(who, profile.name, name, plugin, snapshot))
    return found


def _count(matcher: Matcher, nodes: list[Node]) -> int:
    return sum(1 for node in nodes if matcher(node.metadata.labels))


def _policy_selector(descheduler: Descheduler, nodes: list[Node]) -> list[Unmatched]:
    """The policy's nodeSelector when it leaves fewer than the 2 ready nodes a cycle needs."""
    policy = descheduler.policy
    matcher = policy.node_selector
    if matcher is None:
        return []
    ready = len(descheduler.nodes())
    if ready >= 2:
        return []
    matched = _count(matcher, nodes)
    what = (f"nodeSelector {quote(policy.node_selector_text)}" if policy.node_selector_text
            else "the policy's nodeSelector")
    unready = f" ({ready} ready)" if ready != matched else ""
    needed = ", which needs 2 ready nodes" if matched else ""
    return [Unmatched(f"{what} matches {matched} of {len(nodes)} nodes{unready}: the cycle is "
                      f"skipped{needed}")]


def _plugin_selectors(who: str, plugin: object, nodes: list[Node]) -> list[str]:
    """A plugin's node selectors that match no node: DefaultEvictor's and MigrationController's
    (the nodes nodeFit looks at), LowNodeLoad's (its node pools)."""
    total = f"matches 0 of {len(nodes)} nodes"
    if isinstance(plugin, DefaultEvictor | MigrationController):
        matcher = plugin.node_matcher
        if matcher is None or _count(matcher, nodes):
            return []
        # Whether a pod is then kept depends on who asks nodeFit: the effect is said as such.
        effect = ("its nodeFit finds no other node for any pod" if plugin.args.node_fit
                  else "it scopes only nodeFit, which is off")
        return [f"{who} nodeSelector {quote(plugin.args.node_selector)} {total}: {effect}"]
    if isinstance(plugin, LowNodeLoad):
        return [f"{who} {_pool_name(pool.name)}nodeSelector "
                f"{quote(format_selector(pool.node_selector))} {total}"
                for pool in plugin.pools
                if pool.matcher is not None and pool.node_selector is not None
                and not _count(pool.matcher, nodes)]
    return []


def _pool_name(name: str) -> str:
    return "" if name == DEFAULT_POOL else f"nodePools {quote(name)} "


def format_selector(selector: LabelSelector) -> str:
    """A LabelSelector as kubectl writes one (metav1.FormatLabelSelector): `a=b,c in (x,y)`."""
    parts = [f"{key}={value}" for key, value in sorted((selector.match_labels or {}).items())]
    for req in selector.match_expressions or ():
        values = ",".join(sorted(req.values))
        parts.append({"In": f"{req.key} in ({values})", "NotIn": f"{req.key} notin ({values})",
                      "Exists": req.key, "DoesNotExist": f"!{req.key}"}.get(req.operator, ""))
    return ",".join(parts)


# A plugin's namespace scopes: (the key a policy writes, the args attribute).
NAMESPACE_SCOPES = (("namespaces", "namespaces"), ("evictableNamespaces", "evictable_namespaces"))


def _includes(who: str, profile: str, name: str, plugin: object,
              snapshot: ClusterSnapshot) -> list[Unmatched]:
    """A plugin's namespace includes that name namespaces the snapshot does not have, the
    nearest existing name offered for each."""
    found = []
    args = getattr(plugin, "args", None)
    for field, attr in NAMESPACE_SCOPES:
        include = list(getattr(getattr(args, attr, None), "include", None) or ())
        absent = [n for n in include if n not in snapshot.namespaces]
        if not absent:
            continue
        hints = [_did_you_mean(n, snapshot.namespaces) for n in absent]
        if len(absent) == 1:
            names = f"{quote(absent[0])}, which no namespace in the snapshot has{hints[0]}"
        else:
            listed = [quote(n) + hint for n, hint in zip(absent, hints, strict=True)]
            names = (f"{', '.join(listed[:-1])} and {listed[-1]}, which no namespace in the "
                     f"snapshot has")
        effect = ": it considers no pod" if len(absent) == len(include) else ""
        found.append(Unmatched(f"{who} {field}.include names {names}{effect}", profile, name,
                               frozenset(include)))
    return found


def _did_you_mean(name: str, known: dict[str, Any]) -> str:
    close = nearest(name, known)
    return f" (did you mean {quote(close)}?)" if close else ""
