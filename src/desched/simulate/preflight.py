"""What a simulation says once, before its first cycle, about the policy against the snapshot:
the kinds the policy (and --reschedule) reads that the snapshot lacks, and the node selectors
and namespace includes that match nothing in it.

Both depend only on the policy and the snapshot as loaded, so they are found once per run
rather than per cycle; the plugins' own messages ("No nodes to process LowNodeLoad", upstream's
"requires >=2 nodes") stay as they are, and these lines name the cause beside them. What each
plugin reads and how it is scoped is what its spec declares (PluginSpec.scope): this module
knows no plugin by class or name."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from desched.errors import quote
from desched.framework.registry import NodeScope, Scope
from desched.framework.runner import Descheduler
from desched.model.labels import Matcher
from desched.model.node import Node
from desched.model.objects import PodDisruptionBudget
from desched.scheduler.by_name import model_reads
from desched.scheduler.model import SchedulerModel
from desched.scheduler.profile import DEFAULT_CONFIG, SchedulerConfig
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.completeness import Needs, absent_controllers
from desched.snapshot.workloads import RESOLVED_KINDS
from desched.util.names import nearest


def needs(descheduler: Descheduler, models: list[tuple[str, SchedulerModel]]) -> Needs:
    """Who reads which kind in this run: the enabled plugins (what their specs declare, in the
    policy's order), the scheduler models (`models`: who runs each, e.g. --reschedule's) and
    budgets whose arithmetic counts the replicas a workload expects."""
    found = Needs()
    for _, _, scope in plugin_scopes(descheduler):
        for reads in scope.reads:
            found.add(reads.kinds, reads.who)
    for who, model in models:
        config: SchedulerConfig = getattr(model, "config", DEFAULT_CONFIG)
        for reads in model_reads(model.name, config, who):
            found.add(reads.kinds, reads.who)
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


def plugin_scopes(descheduler: Descheduler) -> Iterator[tuple[str, str, Scope]]:
    """(profile, plugin, what its spec says it reads and how it is scoped) for every plugin
    the profiles run, whatever its extension points, in the policy's order."""
    policy = descheduler.policy
    for profile, config in zip(descheduler.profiles, policy.profiles, strict=True):
        for name in profile.plugins:
            yield profile.name, name, policy.plugins[name].scope(config.args[name])


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
    policy = descheduler.policy
    several = len(descheduler.profiles) > 1
    for profile, config in zip(descheduler.profiles, policy.profiles, strict=True):
        if profile.node_selector is not None and _count(profile.node_selector, nodes) == 0:
            found.append(Unmatched(f"profile {quote(profile.name)} nodeSelector matches 0 of "
                                   f"{len(nodes)} nodes: its plugins see no node",
                                   profile.name))
        for name in profile.plugins:
            scope = policy.plugins[name].scope(config.args[name])
            who = f"{profile.name}/{name}" if several else name
            found.extend(Unmatched(_unmatched_nodes(who, each, len(nodes)), profile.name, name)
                         for each in scope.nodes if not _count(each.matcher, nodes))
            found.extend(_includes(who, profile.name, name, scope, snapshot))
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


def _unmatched_nodes(who: str, scope: NodeScope, total: int) -> str:
    """A plugin's node selector that matches no node (DefaultEvictor's nodeFit nodes,
    LowNodeLoad's node pools...), with what that means for the plugin when its spec says."""
    effect = f": {scope.unmatched}" if scope.unmatched else ""
    return f"{who} {scope.field} {quote(scope.selector)} matches 0 of {total} nodes{effect}"


def _includes(who: str, profile: str, name: str, scope: Scope,
              snapshot: ClusterSnapshot) -> list[Unmatched]:
    """A plugin's namespace includes that name namespaces the snapshot does not have, the
    nearest existing name offered for each."""
    found = []
    for namespaces in scope.namespaces:
        include = namespaces.include
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
        found.append(Unmatched(f"{who} {namespaces.field}.include names {names}{effect}",
                               profile, name, frozenset(include)))
    return found


def _did_you_mean(name: str, known: dict[str, Any]) -> str:
    close = nearest(name, known)
    return f" (did you mean {quote(close)}?)" if close else ""
