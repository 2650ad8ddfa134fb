"""kube-default's answer for a simple pod, from a Ranking instead of scoring every node.

A simple pod (no topology spread constraints or pod (anti-)affinity of its own) that no running
pod's term scores is placed by scores that depend on a node only through its own pods, its
static facts (soft taints, preferred affinity weight, images, topology labels), and, for the
default spreading, how many of the pod's workload run on it and in its topology domains. The
Ranking (scheduler/ranking.py) keeps each feasible node's resource score by class of static
facts; the nodes where the workload runs, and the node the pod leaves, are judged one by one.
Normalizations and the spreading's domain weights are computed over the same feasible set as
the exact search, so the answer is the exact search's (tests/scheduler hold them equal).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from desched.model.node import Node
from desched.model.pod import Pod
from desched.predicates.nodeaffinity import required_affinity_matcher
from desched.predicates.nodefit import scheduler_fit
from desched.scheduler import node_scores as ns
from desched.scheduler import scores as sc
from desched.scheduler import spread
from desched.scheduler.interpod import blocked_by_running_anti_affinity
from desched.scheduler.model import Placement
from desched.scheduler.profile import Profile
from desched.scheduler.ranking import Class, Entry, simple_key, static_key
from desched.scheduler.verdicts import kept_table
from desched.snapshot.cluster import ClusterSnapshot

if TYPE_CHECKING:  # kube_default calls this module
    from desched.scheduler.kube_default import KubeDefault

SpreadOf = Callable[[Class, "str | None"], int]

_HOSTNAME = "kubernetes.io/hostname"
_STATICS = "scheduler.ranked_statics"  # snapshot cache: static verdicts and classes


def domain_keys(profile: Profile) -> tuple[str, ...]:
    """The topology keys (besides hostname) of the profile's default constraints: a node's
    values of them are part of its class."""
    return tuple(dict.fromkeys(c.topology_key for c in profile.spread.effective
                               if c.topology_key != _HOSTNAME))


def entry(model: KubeDefault, pod: Pod, snapshot: ClusterSnapshot, profile: Profile) -> Entry:
    """A node's class (untolerated soft taints, preferred affinity weight, hostname label
    present, its domain values) and resource score, or None when a filter refuses it.

    What reads the node alone (the static filters and the class) is kept per node object for
    the pods with the pod's static_key, across their signatures: a signature's Ranking over
    5,000 nodes then checks and scores only the resources of the nodes that pass."""
    table = kept_table(snapshot, _STATICS, (static_key(pod), id(profile)), profile,
                       len(snapshot.nodes))
    static: Callable[[Node], str | None] | None = None
    tolerations = ns.prefer_no_schedule_tolerations(pod)
    weigh = ns.node_affinity_weigher(pod, profile)
    keys = domain_keys(profile)
    fits = scheduler_fit(pod) if "NodeResourcesFit" in profile.filters else None
    score = ns.resource_scorer(pod, profile, not ns.best_effort(pod, profile))
    bound = pod.spec.node_name

    def of(node: Node) -> tuple[Class, float] | None:
        nonlocal static
        name = node.metadata.name
        known = table.get(name)
        if known is None or known[0] is not node:
            if static is None:
                static = model.static_filter(pod, profile)
            cls: Class | None = None
            if static(node) is None:
                labels = node.metadata.labels
                cls = (ns.untolerated_soft_taints(tolerations, node),
                       weigh(node) if weigh is not None else 0,
                       _HOSTNAME in labels, tuple(labels.get(k) for k in keys))
            known = table[name] = (node, cls)
        cls = known[1]
        if cls is None or (fits is not None and name != bound and not fits(node, snapshot)):
            return None
        return cls, float(score(node, snapshot))
    return of


def place(model: KubeDefault, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
          profile: Profile, gone: Pod | None) -> Placement | None:
    """The placement among the candidate `nodes`, or None when the exact search must answer
    (nothing fits: it says why). `gone`: the pod itself, bound and already deleted (its node is
    judged apart, without it)."""
    everywhere = snapshot.all_nodes()
    key = (simple_key(pod), id(profile))
    ranking = model.rankings.get(key, pod, nodes, snapshot,
                                 lambda p: entry(model, p, snapshot, profile),
                                 candidates=model.space(pod, nodes, snapshot, profile))
    exclude = (blocked_by_running_anti_affinity(snapshot, pod, gone)
               if "InterPodAffinity" in profile.filters else set())
    constraints: list[spread.Spread] = []
    require_all = False
    if "PodTopologySpread" in profile.scores:
        constraints, require_all = spread.spread_constraints(pod, snapshot, profile,
                                                             "ScheduleAnyway")
    per_node: Counter[str] = Counter()
    if constraints:
        per_node = spread.matching_per_node(pod, constraints[0][1], snapshot)
    images = (ns.image_scores(pod, everywhere, snapshot) if "ImageLocality" in profile.scores
              else {})
    # Judged one by one: the nodes where the workload runs or that hold its images, and the
    # node the pod leaves.
    alone: dict[str, tuple[Class, float]] = {}
    for name in (*per_node, *images):
        if name in ranking.nodes and name not in exclude and name != pod.node_name:
            found = ranking.member(name)
            if found is not None:
                alone[name] = found
    own = ranking.nodes.get(pod.node_name) if pod.node_name else None
    if own is not None and own.metadata.name not in exclude:
        found = entry(model, pod, snapshot, profile)(own)
        if found is not None:
            alone[own.metadata.name] = found
    tops = ranking.tops(exclude | set(per_node) | set(images)
                        | ({pod.node_name} if pod.node_name else set()))
    if not tops and not alone:
        return None
    feasible = sum(t[3] for t in tops.values()) + len(alone)
    classes = list(tops) + [c for c, _ in alone.values()]

    # Per class (and per node judged alone): the static part of the total.
    taint_max = max(c[0] for c in classes)
    affinity_max = max(c[1] for c in classes)

    def static(cls: Class, spread_norm: int, image: int) -> int:
        taint = sc.MAX - (sc.go_div(sc.MAX * cls[0], taint_max) if taint_max else 0)
        affinity = sc.go_div(sc.MAX * cls[1], affinity_max) if affinity_max else 0
        return (profile.weight("TaintToleration") * taint
                + profile.weight("NodeAffinity") * affinity
                + profile.weight("ImageLocality") * image
                + profile.weight("PodTopologySpread") * spread_norm)

    spread_of = _spread(pod, constraints, require_all, tops, alone, per_node, feasible,
                        snapshot, profile)
    totals: list[tuple[int, str, int]] = []  # (total, node, how many nodes have it)
    for cls, (score, name, at_top, _) in tops.items():
        totals.append((static(cls, spread_of(cls, None), 0) + int(score), name, at_top))
    for name, (cls, score) in alone.items():
        totals.append((static(cls, spread_of(cls, name), images.get(name, 0)) + int(score),
                       name, 1))
    best = max(totals)
    tied = [t for t in totals if t[0] == best[0]]
    count = sum(t[2] for t in tied)
    names = tuple(sorted(t[1] for t in tied))
    return model.describe(best[0], best[1], names, count, feasible, len(everywhere), profile)


def _spread(pod: Pod, constraints: list[spread.Spread], require_all: bool,
            tops: dict[Class, tuple[float, str, int, int]],
            alone: dict[str, tuple[Class, float]], per_node: Counter[str], feasible: int,
            snapshot: ClusterSnapshot, profile: Profile) -> SpreadOf:
    """PodTopologySpread's normalized score for a class (its nodes hold none of the workload)
    or for one node judged alone, over the feasible nodes as the exact search counts them."""
    if not constraints:
        return lambda cls, name: 0
    keys = domain_keys(profile)
    index = {k: i for i, k in enumerate(keys)}

    def ignored(cls: Class) -> bool:
        return require_all and any(
            (c.topology_key == _HOSTNAME and not cls[2])
            or (c.topology_key != _HOSTNAME and cls[3][index[c.topology_key]] is None)
            for c, _ in constraints)

    groups = [(cls, t[3]) for cls, t in tops.items()] + [(c, 1) for c, _ in alone.values()]
    scored = sum(n for cls, n in groups if not ignored(cls))
    weights: list[float] = []
    counts: list[dict[str, int]] = []
    match = required_affinity_matcher(pod)
    for c, _ in constraints:
        if c.topology_key == _HOSTNAME:
            weights.append(sc.topology_weight(scored))
            counts.append({})
            continue
        i = index[c.topology_key]
        domains = {cls[3][i] or "" for cls, _ in groups if not ignored(cls)}
        weights.append(sc.topology_weight(len(domains)))
        tally = dict.fromkeys(domains, 0)
        honor_affinity = c.node_affinity_policy != "Ignore"
        for name, n in per_node.items():
            node = snapshot.nodes.get(name)
            if node is None or (honor_affinity and not match(node)):
                continue
            labels = node.metadata.labels
            if require_all and any(k.topology_key not in labels for k, _ in constraints):
                continue
            value = labels.get(c.topology_key, "")
            if value in tally:
                tally[value] += n
        counts.append(tally)

    def raw(cls: Class, name: str | None) -> int:
        total = 0.0
        for (c, _), weight, tally in zip(constraints, weights, counts, strict=True):
            if c.topology_key == _HOSTNAME:
                if cls[2]:
                    total += sc.spread_part(per_node.get(name, 0) if name else 0, c.max_skew,
                                            weight)
                continue
            value = cls[3][index[c.topology_key]]
            if value is not None:
                total += sc.spread_part(tally[value], c.max_skew, weight)
        return sc.go_round(total)

    values = [raw(cls, None) for cls in tops if not ignored(cls)]
    values += [raw(cls, name) for name, (cls, _) in alone.items() if not ignored(cls)]
    low, high = min(values, default=0), max(values, default=0)

    def normalized(cls: Class, name: str | None) -> int:
        if ignored(cls):
            return 0
        if high == 0:
            return sc.MAX
        return sc.go_div(sc.MAX * (high + low - raw(cls, name)), high)
    return normalized

