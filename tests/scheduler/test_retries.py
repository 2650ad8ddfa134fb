"""A replacement that waits is tried again each time an evicted pod goes (scheduler/placement.py).
The model keeps the node-local filters' verdicts per node version (scheduler/verdicts.py), and
the waiting replacements are tried only when a pod coming or going may let them in
(scheduler/waiting.py, scheduler/nowhere.py): on 300 seeded clusters whose pools are full, with
zone spreading, required and preferred anti-affinity, required affinity and pods deleted at
once, a `--reschedule` cycle places every replacement where trying each of them each time, with
no verdict kept, places it, and leaves the same pods on the same nodes."""

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


def _cycle(seed: int) -> tuple[Any, ...]:
    rng = random.Random(seed)
    snap = snapshot(*_objects(rng))
    pods = sorted(snap.pods.values(), key=lambda p: p.key)
    evicted = rng.sample(pods, rng.randint(1, len(pods)))
    model = Recording()
    chances: dict[str, Placement] = {}
    placed = reschedule(evicted, snap, 1, snap.ready_nodes(), model, NOW, chances)
    where = sorted((p.key, p.node_name) for p in snap.pods.values())
    return ([(old.key, new.key, target) for old, new, target in placed], chances, where,
            len(model.asked), sum(1 for _, target, _, _ in model.asked if target is None))


def test_every_replacement_lands_where_trying_each_every_time_puts_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked = tried = waited = 0
    for seed in range(300):
        queued = _cycle(seed)
        with monkeypatch.context() as m:
            m.setattr(KubeDefault, "waiting", lambda *args: None)
            m.setattr(kube_default, "refusals", _plain_refusals)
            plain = _cycle(seed)
        assert queued[:3] == plain[:3], seed
        asked += queued[3]
        tried += plain[3]
        waited += plain[4]
    # The clusters make replacements wait, and the queue spares most tries.
    assert waited > 1000 and asked < tried * 3 // 4, (waited, asked, tried)
