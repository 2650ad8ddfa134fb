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
