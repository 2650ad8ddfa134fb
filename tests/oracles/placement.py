"""The scheduler models' exact searches, built on their public API: every feasible node filtered
and scored in full, as kube-scheduler and koord-scheduler do. The models' fast paths (the
Rankings of scheduler/kube_ranked.py and LoadAware's) are checked against these."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from desched.model.node import Node
from desched.model.pod import Pod
from desched.scheduler.kube_default import KubeDefault
from desched.scheduler.load_aware import LoadAware
from desched.scheduler.model import Placement, best
from desched.snapshot.cluster import ClusterSnapshot


def kube_default_exact(model: KubeDefault, pod: Pod, nodes: Sequence[Node],
                       snapshot: ClusterSnapshot) -> Placement:
    """Where `model.place` sends `pod` when every feasible node is scored: the pod as placed
    (a bound pod asked about as if evicted), filtered under its profile, then each feasible
    node's weighted total and the model's choice among the top ones."""
    subject, gone = model.subject(pod)
    profile = model.profile(pod)
    fits, why = model.feasible(subject, nodes, snapshot, profile, gone)
    if not fits:
        return Placement(None, why)
    return model.choose(model.scores(subject, fits, snapshot, profile, gone),
                        len(snapshot.all_nodes()), profile)


def load_aware_exact(model: LoadAware, pod: Pod, nodes: Sequence[Node],
                     snapshot: ClusterSnapshot, now: datetime) -> str | None:
    """The node `model.place` sends `pod` to when every feasible node is scored: the one with
    the least estimated usage among those under the usage thresholds, or None."""
    fits, _ = model.requests_model.feasible(pod, nodes, snapshot)
    scores: dict[str, float] = {}
    for node in fits:
        score = model.node_score(pod, node, snapshot, now)
        if not isinstance(score, str):
            scores[node.name] = score
    return best(scores) if scores else None
