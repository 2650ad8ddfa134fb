"""`kube-default`: kube-scheduler (v1.36) with a profile: its default one, or one the user gives
in a KubeSchedulerConfiguration (scheduler/profile.py, scheduler/config/).

Filters: NodeUnschedulable, NodeAffinity, TaintToleration, NodeResourcesFit, InterPodAffinity
(the pod's required affinity and anti-affinity over their topology domains, and running pods'
required anti-affinity against it), PodTopologySpread (DoNotSchedule constraints, the pod's own
or the profile's List defaults). Scores, number for number (scheduler/scores.py), each
normalized as kube-scheduler does and weighted by the profile: TaintToleration, NodeAffinity,
NodeResourcesFit (its scoring strategy, non-zero request defaults), NodeResourcesBalancedAllocation,
PodTopologySpread (the pod's ScheduleAnyway constraints, else the default constraints: the system
defaults {hostname, maxSkew 3} and {zone, maxSkew 5} for a pod a Service, ReplicaSet, StatefulSet
or ReplicationController selects), InterPodAffinity (the pod's preferred terms, and running
pods' preferred terms and required affinity toward it) and ImageLocality (node status.images).

Where kube-scheduler chooses at random the Placement says so: `tied` lists every node with the
winning score, and `why` notes when kube-scheduler would score only a sample of the feasible
nodes (percentageOfNodesToScore). desched takes the last tied node by name, so a simulation is
reproducible.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from desched.model.meta import Shared
from desched.model.node import Node, Taint
from desched.model.pod import Pod
from desched.predicates.nodeaffinity import (
    compile_term,
    required_affinity_matcher,
)
from desched.predicates.nodefit import affinity_space, insufficient_resource
from desched.predicates.taints import SCHEDULING_EFFECTS, first_untolerated, tolerates_taint
from desched.scheduler import kube_ranked
from desched.scheduler import scores as sc
from desched.scheduler.affinity_index import affinity_index
from desched.scheduler.interpod import (
    affinity_misses,
    affinity_raw,
    affinity_score,
    blocked_by_running_anti_affinity,
    required_anti_affinity,
    running_terms_select,
)
from desched.scheduler.model import KUBE_DEFAULT, Placement
from desched.scheduler.node_scores import (
    balanced_score,
    best_effort,
    fit_score,
    image_scores,
    node_affinity_weigher,
    prefer_no_schedule_tolerations,
    untolerated_soft_taints,
)
from desched.scheduler.nowhere import (
    Counted,
    Failed,
    FailedWait,
    domains_around,
    last_failed,
    names_of,
    remember,
    rememberable,
    wait_key,
)
from desched.scheduler.profile import (
    DEFAULT,
    DEFAULT_CONFIG,
    Profile,
    SchedulerConfig,
)
from desched.scheduler.ranking import Rankings, simple, stranger
from desched.scheduler.spread import counted_nodes, spread_misses, spread_raw
from desched.scheduler.verdicts import local_key, refusals
from desched.snapshot.cluster import ClusterSnapshot

_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
_OWN_AFFINITY = "node(s) didn't match pod affinity/anti-affinity rules"

# What NodeUnschedulable asks a pod to tolerate to go to a cordoned node.
_UNSCHEDULABLE = Taint(key=Shared("node.kubernetes.io/unschedulable"), effect="NoSchedule")


def gone_at_once(pod: Pod) -> bool:
    """Whether an evicted pod leaves kube-scheduler's view before its replacement is scheduled:
    one deleted without a grace period (terminationGracePeriodSeconds 0), or a StatefulSet's,
    whose controller creates the replacement only once the pod is gone."""
    return (pod.spec.termination_grace_period_seconds == 0
            or any(ref.kind == "StatefulSet" for ref in pod.metadata.owner_references))


class KubeDefault:
    name = KUBE_DEFAULT

    def __init__(self, config: SchedulerConfig = DEFAULT_CONFIG,
                 rng: random.Random | None = None) -> None:
        self.config = config
        self.rankings = Rankings()
        # With rng, ties go to a random one of the tied nodes, as kube-scheduler's do (every
        # feasible node scored: the Ranking names only some of them); else the last by name.
        self.rng = rng

    def profile(self, pod: Pod) -> Profile:
        """The profile named by the pod's schedulerName; kube-scheduler's default profile for a
        pod another scheduler places (koord-scheduler, say) that the configuration does not
        describe: the nearest prediction there is."""
        return self.config.profile_for(pod) or DEFAULT

    def place(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
              now: datetime) -> Placement:
        """Where `pod` lands among `nodes` (the candidates; pods are counted over every node of
        the snapshot, as kube-scheduler counts over its whole cache). A pod still bound to a
        node is asked about as if it were evicted: see `subject`."""
        profile = self.profile(pod)
        subject, gone = self.subject(pod)
        if self.rng is None and self.rankable(subject, snapshot, profile, gone):
            placed = kube_ranked.place(self, subject, nodes, snapshot, profile, gone)
            if placed is not None:
                return placed
        return self._exact(subject, nodes, snapshot, profile, gone)

    @staticmethod
    def subject(pod: Pod) -> tuple[Pod, Pod | None]:
        """What kube-scheduler places for a pod being evicted, and the pod if it is gone by
        then. A terminating pod stays in kube-scheduler's cache, its requests and pod
        (anti-)affinity counted on its node, until the kubelet confirms it gone, seconds after
        its replacement was scheduled (only topology spreading skips it): the replacement is
        placed beside it. A pod deleted at once (gone_at_once) has left before."""
        if not pod.spec.node_name:
            return pod, None
        if gone_at_once(pod):
            return pod, pod
        return stranger(pod), None

    def rankable(self, pod: Pod, snapshot: ClusterSnapshot, profile: Profile,
                 gone: Pod | None) -> bool:
        """Whether the Ranking answers for the pod (scheduler/kube_ranked.py): a simple pod no
        running pod's term scores, with no DoNotSchedule default constraints to filter by."""
        return (simple(pod) and snapshot.finished
                and not ("PodTopologySpread" in profile.filters and any(
                    (c.when_unsatisfiable or "DoNotSchedule") == "DoNotSchedule"
                    for c in profile.spread.effective))
                and not ("InterPodAffinity" in profile.scores
                         and not profile.ignore_preferred_terms_of_existing_pods
                         and running_terms_select(pod, snapshot, profile, gone)))

    @staticmethod
    def space(pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
              profile: Profile) -> Sequence[Node]:
        """The nodes worth filtering: those the pod's node selector and affinity may match."""
        return (affinity_space(pod, nodes, snapshot) if "NodeAffinity" in profile.filters
                else nodes)

    def _exact(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
               profile: Profile, gone: Pod | None) -> Placement:
        candidates, fits, reasons = self._filter(pod, nodes, snapshot, profile, gone)
        if not fits:
            if gone is None and rememberable(pod):
                remember(snapshot, self._failed(pod, candidates, snapshot, profile))
            return Placement(None, self._why(candidates, reasons))
        return self.choose(self.scores(pod, fits, snapshot, profile, gone),
                           len(snapshot.all_nodes()), profile)

    def _failed(self, pod: Pod, candidates: Sequence[Node], snapshot: ClusterSnapshot,
                profile: Profile) -> Failed:
        """What a search that found no node for `pod` depended on (scheduler/nowhere.py)."""
        names = names_of(candidates, snapshot)
        counted = ([Counted(*c) for c in counted_nodes(pod, snapshot.all_nodes(), snapshot,
                                                       profile)]
                   if "PodTopologySpread" in profile.filters else [])
        interpod = "InterPodAffinity" in profile.filters
        domains = []
        if interpod:
            index = affinity_index(snapshot)
            keys = {s.topology_key for s in index.selecting(pod) if s.kind == "anti"}
            keys.update(t.topology_key for t in required_anti_affinity(pod))
            domains = [domains_around(key, names, index, snapshot) for key in sorted(keys)]
        return Failed(self, pod, names, counted, domains, interpod,
                      lambda: self.node_filter(pod, profile))

    def waiting(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot
                ) -> FailedWait | None:
        """What `pod`, which `place` just found no node for, waits on (scheduler/waiting.py);
        None when pods coming or going anywhere may let it in."""
        failed = last_failed(self, pod, snapshot)
        if failed is None:
            return None
        return FailedWait(failed, snapshot, wait_key(pod, local_key(pod), self.profile(pod)))

    def choose(self, scores: Mapping[str, int], total: int, profile: Profile) -> Placement:
        top = max(scores.values())
        tied = tuple(sorted(n for n, s in scores.items() if s == top))
        chosen = self.rng.choice(tied) if self.rng is not None else tied[-1]
        return self.describe(top, chosen, tied, len(tied), len(scores), total, profile)

    def describe(self, score: int, chosen: str, tied: tuple[str, ...], ties: int, feasible: int,
                 total: int, profile: Profile) -> Placement:
        """The placement on `chosen` (the last by name of the `ties` nodes with the top score,
        `tied` those of them known by name), saying where kube-scheduler chooses at random."""
        why = f"score {score} of {feasible} feasible node(s)"
        if ties > 1:
            why += f"; one of {ties} nodes with that score (kube-scheduler picks at random)"
        sample = self.config.nodes_to_score(profile, total)
        sampled = sample if sample < feasible else 0
        if sampled:
            why += (f"; kube-scheduler scores only the first {sample} feasible node(s) it finds "
                    f"(percentageOfNodesToScore), so it may pick a lower score")
        return Placement(chosen, why, tied, ties, sampled)

    # -- filters -------------------------------------------------------------------------------

    def static_filter(self, pod: Pod, profile: Profile) -> Callable[[Node], str | None]:
        """The node-local filters of the profile that read the node alone (NodeUnschedulable,
        NodeAffinity, TaintToleration), compiled for `pod`: why a node is refused, or None.
        Their verdict on a node holds while the node object does."""
        on = profile.filters
        unschedulable = "NodeUnschedulable" in on and not tolerates_taint(
            pod.spec.tolerations, _UNSCHEDULABLE)
        affinity = required_affinity_matcher(pod) if "NodeAffinity" in on else None
        added = profile.added_affinity
        added_required = (added.required_during_scheduling_ignored_during_execution
                          if added is not None else None)
        added_terms = ([compile_term(t) for t in added_required.node_selector_terms]
                       if added_required is not None and "NodeAffinity" in on else None)
        taints = "TaintToleration" in on
        tolerations = pod.spec.tolerations

        def refuse(node: Node) -> str | None:
            if unschedulable and node.spec.unschedulable:
                return "node(s) were unschedulable"
            if affinity is not None and not affinity(node):
                return "node(s) didn't match Pod's node affinity/selector"
            if added_terms is not None and not any(t(node) for t in added_terms):
                return "node(s) didn't match Pod's node affinity/selector"
            if taints and node.spec.taints and first_untolerated(
                    node.spec.taints, tolerations, SCHEDULING_EFFECTS) is not None:
                return "node(s) had untolerated taint"
            return None
        return refuse

    def node_filter(self, pod: Pod, profile: Profile) -> Callable[[Node, ClusterSnapshot],
                                                                  str | None]:
        """The node-local filters of the profile, compiled for `pod`: why a node is refused,
        or None (NodeResourcesFit last: it reads the node's pods)."""
        static = self.static_filter(pod, profile)
        resources = "NodeResourcesFit" in profile.filters

        def refuse(node: Node, snapshot: ClusterSnapshot) -> str | None:
            problem = static(node)
            if problem is not None:
                return problem
            if resources and pod.spec.node_name != node.metadata.name:
                problem = insufficient_resource(pod, node, snapshot, scheduler=True)
                if problem is not None:
                    return problem.replace("insufficient", "Insufficient")
            return None
        return refuse

    def feasible(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
                 profile: Profile = DEFAULT, gone: Pod | None = None
                 ) -> tuple[list[Node], str]:
        """The candidates among `nodes` the profile's filters pass, or why none does. `gone`:
        the pod being placed again, already deleted (not counted anywhere)."""
        candidates, fits, reasons = self._filter(pod, nodes, snapshot, profile, gone)
        return fits, "" if fits else self._why(candidates, reasons)

    def _filter(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
                profile: Profile, gone: Pod | None
                ) -> tuple[Sequence[Node], list[Node], Counter[str]]:
        """The candidates, those the filters pass, and how many each refusal took."""
        candidates = self.space(pod, nodes, snapshot, profile)
        everywhere = snapshot.all_nodes()
        reasons: Counter[str] = Counter()
        fits: list[Node] = []
        for node, problem in refusals(pod, profile, candidates, snapshot,
                                      lambda: self.node_filter(pod, profile)):
            if problem is None:
                fits.append(node)
            else:
                reasons[problem] += 1
        checks: list[tuple[str, str, Callable[[list[Node]], set[str]]]] = [
            ("InterPodAffinity", _EXISTING_ANTI_AFFINITY,
             lambda ns: blocked_by_running_anti_affinity(snapshot, pod, gone)),
            ("InterPodAffinity", _OWN_AFFINITY,
             lambda ns: affinity_misses(pod, ns, snapshot, gone)),
            ("PodTopologySpread", "node(s) didn't match pod topology spread constraints",
             lambda ns: spread_misses(pod, ns, everywhere, snapshot, profile)),
        ]
        for plugin, label, check in checks:
            if not fits:
                break
            if plugin not in profile.filters:
                continue
            out = check(fits)
            if out:
                reasons[label] += sum(1 for n in fits if n.metadata.name in out)
                fits = [n for n in fits if n.metadata.name not in out]
        return candidates, fits, reasons

    @staticmethod
    def _why(candidates: Sequence[Node], reasons: Counter[str]) -> str:
        if not reasons:
            return "no node matches the pod's node selector and affinity"
        shown = ", ".join(f"{count} {reason}" for reason, count in reasons.most_common())
        return f"0/{len(candidates)} nodes are available: {shown}"

    # -- scores --------------------------------------------------------------------------------

    def scores(self, pod: Pod, feasible: Sequence[Node], snapshot: ClusterSnapshot,
               profile: Profile, gone: Pod | None = None) -> dict[str, int]:
        """Each feasible node's weighted total, as kube-scheduler sums its score plugins."""
        nodes = snapshot.all_nodes()
        names = [n.metadata.name for n in feasible]
        total = dict.fromkeys(names, 0)

        def add(plugin: str, normalized: Mapping[str, int]) -> None:
            weight = profile.weight(plugin)
            for name in names:
                total[name] += weight * normalized.get(name, 0)

        weights = profile.scores
        if "TaintToleration" in weights:
            tolerations = prefer_no_schedule_tolerations(pod)
            add("TaintToleration", sc.default_normalize(
                {n.metadata.name: untolerated_soft_taints(tolerations, n) for n in feasible},
                reverse=True))
        if "NodeAffinity" in weights:
            weigh = node_affinity_weigher(pod, profile)
            if weigh is not None:
                add("NodeAffinity", sc.default_normalize(
                    {n.metadata.name: weigh(n) for n in feasible}, reverse=False))
        if "NodeResourcesFit" in weights:
            add("NodeResourcesFit", {n.metadata.name: fit_score(pod, n, snapshot, profile)
                                     for n in feasible})
        if "NodeResourcesBalancedAllocation" in weights and not best_effort(pod, profile):
            add("NodeResourcesBalancedAllocation",
                {n.metadata.name: balanced_score(pod, n, snapshot, profile) for n in feasible})
        if "ImageLocality" in weights:
            add("ImageLocality", image_scores(pod, nodes, snapshot))
        if "PodTopologySpread" in weights:
            spread = spread_raw(pod, feasible, nodes, snapshot, profile)
            if spread is not None:
                add("PodTopologySpread", sc.spread_normalize(*spread))
        if "InterPodAffinity" in weights:
            topology = affinity_raw(pod, snapshot, profile, gone)
            if topology is not None:
                add("InterPodAffinity", sc.min_max_normalize(
                    {n.metadata.name: affinity_score(topology, n) for n in feasible}))
        return total

