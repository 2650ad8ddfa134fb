"""Why a plugin passed over a pod that `explain` follows, when the plugin recorded nothing about
it: a plugin may define `verdict(pod, nodes) -> str | None`, asked after each of its runs for
the explained pods only (never for the others, so a run without explain pays nothing). It sees
what the run left behind (the snapshot after its evictions, and whatever the plugin kept of its
run) and says why this pod was not picked, or None when it has nothing specific to say.

`explain` prefers the plugin's namespaces, then its own notes, over a verdict, and a verdict over
the runner's note that the run evicted nothing (explain._not_picked). Likewise a plugin that
classifies nodes may define `node_role(node) -> str | None`, asked for the explained nodes, and
a filter that protects pods `protection(pod) -> str | None`, asked before each cycle."""

from __future__ import annotations

from collections.abc import Callable

from desched.framework.decisions import EVICTED_OUTCOMES, DecisionLog
from desched.framework.evictor import ProfileEvictor
from desched.framework.types import ClassifiesNodes, ExplainsPods, Protects
from desched.model.labels import Matcher
from desched.model.node import Node
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot

# A pod that met the criteria and passed the filters, yet has no record: the run stopped (an
# eviction limit) before its turn.
RUN_ENDED = "it met the plugin's criteria, but the run ended before its turn (an eviction limit)"


def listing_scope(pod: Pod, labels: Matcher | None, terminal: bool = True) -> str | None:
    """Why a plugin's pod listing leaves the pod out (its labelSelector, and for a listing
    without finished pods, the pod's phase), or None. The namespaces are explain's to check."""
    if not terminal and pod.terminal:
        return f"pod is {pod.status.phase}: the plugin lists no finished pods"
    if labels is not None and not labels(pod.metadata.labels):
        return "pod's labels do not match the plugin's labelSelector"
    return None


def criteria_verdict(scope: str | None,
                     criteria: Callable[[list[str]], str | None]) -> str | None:
    """The verdict of a plugin that lists pods, then checks criteria: why its listing leaves
    the pod out (`scope`), else the first criterion it fails (`criteria(misses)` returns None
    after adding why to `misses`), else RUN_ENDED."""
    if scope is not None:
        return scope
    misses: list[str] = []
    if criteria(misses) is None:
        return misses[0] if misses else None
    return RUN_ENDED


def excluded_owner(pod: Pod, excluded: frozenset[str]) -> str | None:
    """Why excludeOwnerKinds leaves the pod out, or None."""
    kinds = sorted({ref.kind for ref in pod.metadata.owner_references} & excluded)
    return f"its owner kind {', '.join(kinds)} is in excludeOwnerKinds" if kinds else None


def no_exit_code(codes: frozenset[int]) -> str:
    """The miss of an exitCodes criterion (PodLifeTime, RemoveFailedPods)."""
    return f"no container exited with one of the exitCodes {', '.join(map(str, sorted(codes)))}"


def ask_verdicts(log: DecisionLog, snapshot: ClusterSnapshot, profile: str, name: str,
                 plugin: object, nodes: list[Node], since: int) -> None:
    """After one plugin run: the verdict of each explained pod the run (its records from index
    `since` on) said nothing about."""
    decided = {f"{d.namespace}/{d.pod}" for d in log.decisions[since:]
               if d.profile == profile and d.plugin == name}
    ask = plugin.verdict if isinstance(plugin, ExplainsPods) else None
    names = {n.name for n in nodes}
    for key in sorted(log.explain_pods):
        if key in decided:
            continue  # the run said why
        pod = snapshot.pods.get(key)
        node = pod.node_name if pod is not None else ""
        if pod is None:
            text: str | None = _gone(log, key)
        elif not node:
            text = "pod is not bound to a node"
        elif node not in names:
            text = (f"node {node} is not among the nodes this profile runs on (not Ready, or "
                    f"outside the nodeSelector)")
        else:
            text = ask(pod, nodes) if ask is not None else None
        if text:
            log.verdicts[(log.cycle, profile, name, key)] = text


def ask_protections(log: DecisionLog, snapshot: ClusterSnapshot, evictor: ProfileEvictor) -> None:
    """Before a cycle's plugins run: the protection the profile's filters give each explained
    pod (framework.types.Protects), recorded whether or not a plugin will ask about it (one
    whose namespaces leave the pod out never does): the first such filter that keeps it, as a
    plugin asking the filters would find."""
    for key in sorted(log.explain_pods):
        pod = snapshot.pods.get(key)
        if pod is None:
            continue
        for check in evictor.filters:
            reason = check.protection(pod) if isinstance(check, Protects) else None
            if reason is not None:
                log.protected(key, pod.node_name, evictor.profile, reason, evictor.name_of(check))
                break


def ask_node_roles(log: DecisionLog, profile: str, name: str, plugin: object,
                   nodes: list[Node]) -> None:
    """After one plugin run: what a plugin that classifies nodes (`node_role(node) -> str |
    None`) found each explained node to be, for `explain --node`'s header."""
    if not isinstance(plugin, ClassifiesNodes):
        return
    ask = plugin.node_role
    names = {n.name for n in nodes}
    for node in log.explain_nodes:
        text = ask(node) if node in names else (
            "not among the nodes this profile runs on (not Ready, or outside the nodeSelector)")
        if text:
            log.node_roles[(log.cycle, profile, name, node)] = text


def _gone(log: DecisionLog, key: str) -> str | None:
    """An explained pod no longer in the cluster: which plugin evicted it this cycle."""
    for d in reversed(log.decisions):
        if d.cycle != log.cycle:
            break
        if d.outcome in EVICTED_OUTCOMES and f"{d.namespace}/{d.pod}" == key:
            return f"already evicted by {d.profile}/{d.plugin} earlier in this cycle"
    return None
