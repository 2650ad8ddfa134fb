"""Scheduler models: where a scheduler would place a pod, for `simulate --reschedule` and the
PingPongGuard. Both models filter with the shared predicates (predicates/) and score the nodes
that pass; ties go to the node name (kube-scheduler picks among ties at random)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from desched.model.node import Node
from desched.model.pod import Pod
from desched.scheduler.waiting import Wait
from desched.snapshot.cluster import ClusterSnapshot

KUBE_DEFAULT = "kube-default"
LOAD_AWARE = "koord-load-aware"
MODELS = (KUBE_DEFAULT, LOAD_AWARE)


@dataclass(frozen=True, slots=True)
class Placement:
    node: str | None  # None: no node passes the filters
    why: str  # the winning score, or why nothing fits
    # Every node with the winning score, `node` among them: kube-scheduler picks one of these
    # at random, so each is as likely as `node` (desched takes the first by name).
    tied: tuple[str, ...] = ()
    ties: int = 1  # how many nodes have the winning score (not all named in `tied` at scale)
    # When kube-scheduler would score only a sample of the feasible nodes
    # (percentageOfNodesToScore): how many it scores, else 0.
    sampled: int = 0


class SchedulerModel(Protocol):
    name: str

    def place(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
              now: datetime) -> Placement:
        """Where `pod` would land. A pod still bound to a node is placed as if it had left it
        (its requests and usage no longer count there): the question is where its replacement
        goes once it is evicted."""
        ...

    def waiting(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot
                ) -> Wait | None:
        """What `pod`, which `place` just found no node for, waits on: the pods coming or
        going that may let it in (scheduler/waiting.py); None when any may."""
        ...


def best(scores: dict[str, float]) -> str:
    """The highest score; ties by node name, so a simulation is reproducible."""
    return max(scores, key=lambda n: (scores[n], n))


# The most equally scored nodes among which the pod's own node still counts as its landing place.
MAX_TIED = 2


def lands_back(pod: Pod, placement: Placement, model: str) -> str | None:
    """Why the replacement of `pod` would come back to the pod's own node, or None: it is the
    node placed on, or one of at most MAX_TIED equally scored nodes (kube-scheduler picks among
    them at random: back at even odds or worse is as good as certain)."""
    if placement.node is None:
        return None
    if placement.node == pod.node_name and placement.ties <= 1:
        return f"replacement would land on {placement.node} again ({model})"
    if pod.node_name in placement.tied and placement.ties <= MAX_TIED:
        return (f"replacement would land on {pod.node_name} again with probability "
                f"1/{placement.ties} ({model}: {placement.ties} nodes score the same)")
    return None
