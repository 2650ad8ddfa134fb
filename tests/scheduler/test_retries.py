"""A replacement that waits is asked again each time an evicted pod goes (scheduler/placement.py).
The model keeps the node-local filters' verdicts per node version (scheduler/verdicts.py) and a
search that found no node until a pod it depends on moves (scheduler/nowhere.py): every question
of a `--reschedule` cycle gets the answer a model without either gives, on 300 seeded clusters
whose pools are full, with zone spreading, anti-affinity and pods deleted at once."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import pytest

from builders import NOW, decode, node, pod, snapshot
from desched.model.node import Node
from desched.model.pod import Pod
from desched.scheduler import kube_default
from desched.scheduler.kube_default import KubeDefault
from desched.scheduler.model import Placement
from desched.scheduler.placement import reschedule
from desched.snapshot.cluster import ClusterSnapshot

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


class Recording(KubeDefault):
    """Every question and its answer, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, str | None, str, int]] = []

    def place(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
              now: datetime) -> Placement:
        placed = super().place(pod, nodes, snapshot, now)
        self.asked.append((pod.key, placed.node, placed.why, placed.ties))
        return placed


def _objects(rng: random.Random) -> list[Any]:
    out: list[Any] = []
    names = []
    for i in range(rng.randint(2, 7)):
        labels = {HOST: f"n{i}", ZONE: rng.choice(["za", "zb", "zc"]),
                  "pool": rng.choice(["p1", "p2"])}
        out.append(node(f"n{i}", cpu=rng.choice(["1", "2", "3"]), memory="8Gi", labels=labels))
        names.append(f"n{i}")
    for app in "abc":
        out.append(decode("ReplicaSet", {"metadata": {"name": f"rs-{app}", "namespace": "default"},
                                         "spec": {"selector": {"matchLabels": {"app": app}}}}))
    for i in range(rng.randint(2, 14)):
        app = rng.choice("abc")
        spec: dict[str, Any] = {}
        if rng.random() < 0.4:
            spec["nodeSelector"] = {"pool": rng.choice(["p1", "p2"])}
        if rng.random() < 0.4:
            spec["topologySpreadConstraints"] = [{
                "maxSkew": 1, "topologyKey": rng.choice([ZONE, HOST]),
                "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
                "labelSelector": {"matchLabels": {"app": app}},
                "nodeAffinityPolicy": rng.choice(["Honor", "Ignore"])}]
        kind = rng.random()
        term = {"topologyKey": rng.choice([HOST, ZONE]),
                "labelSelector": {"matchLabels": {"app": app}}}
        if kind < 0.15:
            spec["affinity"] = {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        elif kind < 0.4:
            spec["affinity"] = {"podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "podAffinityTerm": term}]}}
        elif kind < 0.45:
            spec["affinity"] = {"podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        if rng.random() < 0.3:
            spec["terminationGracePeriodSeconds"] = 0
        out.append(pod(f"p{i}", rng.choice(names), cpu=rng.choice(["500m", "1"]),
                       labels={"app": app}, owner=("ReplicaSet", f"rs-{app}"), spec=spec))
    return out


def _plain_refusals(pod: Pod, profile: object, candidates: Sequence[Node],
                    snapshot: ClusterSnapshot, refuse: Callable[[], Any]
                    ) -> list[tuple[Node, str | None]]:
    check = refuse()
    return [(n, check(n, snapshot)) for n in candidates]


def _cycle(seed: int) -> list[tuple[str, str | None, str, int]]:
    rng = random.Random(seed)
    snap = snapshot(*_objects(rng))
    pods = sorted(snap.pods.values(), key=lambda p: p.key)
    evicted = rng.sample(pods, rng.randint(1, len(pods)))
    model = Recording()
    reschedule(evicted, snap, 1, snap.ready_nodes(), model, NOW)
    return model.asked


def test_every_question_of_a_cycle_is_answered_as_without_remembering(
        monkeypatch: pytest.MonkeyPatch) -> None:
    waited = answered = 0
    recall = kube_default.remembered

    def counted(*args: Any) -> Placement | None:
        nonlocal answered
        found = recall(*args)
        answered += found is not None
        return found

    for seed in range(300):
        with monkeypatch.context() as m:
            m.setattr(kube_default, "remembered", counted)
            remembering = _cycle(seed)
        with monkeypatch.context() as m:
            m.setattr(kube_default, "remembered", lambda *args: None)
            m.setattr(kube_default, "refusals", _plain_refusals)
            plain = _cycle(seed)
        assert remembering == plain, seed
        waited += sum(1 for _, target, _, _ in plain if target is None)
    # The clusters make replacements wait, and many a wait is answered from memory.
    assert waited > 1000 and answered > 200, (waited, answered)
