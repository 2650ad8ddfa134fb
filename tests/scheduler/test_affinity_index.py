"""InterPodAffinity from the index of running pods' terms (scheduler/affinity_index.py) answers
as a walk over every pod of the cluster does, as pods come, go, terminate and are replaced.

The walk below is the definition: each running pod's terms matched against the pod being placed,
each pod of the cluster against the pod's own terms. 2,000 random clusters (seeded; 200 in the
quick loop) with terms of every kind (preferred and required, affinity and anti-affinity,
hostname, zone and a key no node has, listed namespaces, namespaceSelectors, matchLabels,
In/NotIn/Exists expressions, empty and missing selectors), pods bound, pending, terminal,
terminating or on a node the snapshot lacks; then hypothesis holds the model's ranked placement
equal to its exact search on such clusters.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import NOW, decode, node, pod, snapshot
from desched.model.labels import lenient_matcher
from desched.model.pod import Pod, PodAffinityTerm
from desched.scheduler import interpod
from desched.scheduler.kube_default import KubeDefault
from desched.scheduler.placement import bind
from desched.scheduler.profile import DEFAULT, Profile
from desched.snapshot.cluster import ClusterSnapshot
from oracles.placement import kube_default_exact

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
NAMESPACES = ("default", "other", "third")


# -- the walk over every pod (the definition) ---------------------------------------------------

def _selects_namespace(term: PodAffinityTerm, owner: Pod, namespace: str,
                       snap: ClusterSnapshot) -> bool:
    if term.namespace_selector is None:
        return namespace in (term.namespaces or (owner.namespace,))
    match = lenient_matcher(term.namespace_selector)
    return namespace in term.namespaces or (
        match is not None and match(snap.namespace_labels(namespace)))


def _selects(term: PodAffinityTerm, owner: Pod, other: Pod, snap: ClusterSnapshot) -> bool:
    match = lenient_matcher(term.label_selector)
    return (_selects_namespace(term, owner, other.namespace, snap) and match is not None
            and match(other.metadata.labels))


def _terms(pod: Pod) -> dict[str, list[tuple[PodAffinityTerm, int]]]:
    a = pod.spec.affinity
    out: dict[str, list[tuple[PodAffinityTerm, int]]] = {
        "preferred": [], "required": [], "anti": []}
    if a is not None and a.pod_affinity is not None:
        out["preferred"] += [(t.pod_affinity_term, t.weight) for t in
                             a.pod_affinity.preferred_during_scheduling_ignored_during_execution]
        out["required"] += [(t, 1) for t in
                            a.pod_affinity.required_during_scheduling_ignored_during_execution]
    if a is not None and a.pod_anti_affinity is not None:
        out["preferred"] += [
            (t.pod_affinity_term, -t.weight) for t in
            a.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution]
        out["anti"] += [(t, 1) for t in
                        a.pod_anti_affinity.required_during_scheduling_ignored_during_execution]
    return out


def _running(snap: ClusterSnapshot, gone: Pod | None) -> list[tuple[Pod, dict[str, str]]]:
    """Bound, not terminal pods (terminating ones count) with their node's labels, `gone` out."""
    out = []
    for other in snap.pods.values():
        if not other.node_name or other.terminal or (gone is not None and other.key == gone.key):
            continue
        n = snap.nodes.get(other.node_name)
        out.append((other, n.metadata.labels if n is not None else {}))
    return out


def walk_raw(p: Pod, snap: ClusterSnapshot, profile: Profile,
             gone: Pod | None) -> dict[str, dict[str, int]] | None:
    own = _terms(p)["preferred"]
    if profile.ignore_preferred_terms_of_existing_pods and not own:
        return None
    topology: dict[str, dict[str, int]] = {}

    def add(term: PodAffinityTerm, weight: int, labels: dict[str, str]) -> None:
        if term.topology_key in labels:
            values = topology.setdefault(term.topology_key, {})
            values[labels[term.topology_key]] = values.get(labels[term.topology_key], 0) + weight

    for other, labels in _running(snap, gone):
        for term, weight in own:
            if _selects(term, p, other, snap):
                add(term, weight, labels)
        theirs = _terms(other)
        scoring = theirs["preferred"] + [
            (t, profile.hard_pod_affinity_weight) for t, _ in theirs["required"]
            if profile.hard_pod_affinity_weight > 0]
        for term, weight in scoring:
            if _selects(term, other, p, snap):
                add(term, weight, labels)
    return topology or None


def walk_misses(p: Pod, snap: ClusterSnapshot, gone: Pod | None) -> set[str]:
    fits = snap.all_nodes()
    running = _running(snap, gone)
    misses: set[str] = set()
    affinity = [t for t, _ in _terms(p)["required"]]
    if affinity:
        counts: Counter[tuple[str, str]] = Counter()
        for other, labels in running:
            if other.node_name in snap.nodes and all(_selects(t, p, other, snap)
                                                     for t in affinity):
                for t in affinity:
                    if t.topology_key in labels:
                        counts[(t.topology_key, labels[t.topology_key])] += 1
        first = not counts and all(_selects(t, p, p, snap) for t in affinity)
        for n in fits:
            labels = n.metadata.labels
            if any(t.topology_key not in labels for t in affinity) or (not first and any(
                    counts[(t.topology_key, labels[t.topology_key])] == 0 for t in affinity)):
                misses.add(n.name)
    for term, _ in _terms(p)["anti"]:
        taken = {labels[term.topology_key] for other, labels in running
                 if term.topology_key in labels and _selects(term, p, other, snap)}
        misses.update(n.name for n in fits if n.metadata.labels.get(term.topology_key) in taken)
    return misses


def walk_blocked(p: Pod, snap: ClusterSnapshot, gone: Pod | None) -> set[str]:
    blocked: set[str] = set()
    for other, labels in _running(snap, gone):
        for term, _ in _terms(other)["anti"]:
            if term.topology_key in labels and _selects(term, other, p, snap):
                blocked.update(n.name for n in snap.all_nodes()
                               if n.metadata.labels.get(term.topology_key)
                               == labels[term.topology_key])
    return blocked


def walk_selected(p: Pod, snap: ClusterSnapshot, profile: Profile, gone: Pod | None) -> bool:
    for other, _ in _running(snap, gone):
        theirs = _terms(other)
        scoring = theirs["preferred"] + (theirs["required"]
                                         if profile.hard_pod_affinity_weight > 0 else [])
        if any(_selects(term, other, p, snap) for term, _ in scoring):
            return True
    return False


# -- random clusters --------------------------------------------------------------------------

def _selector(rng: random.Random) -> dict[str, Any] | None:
    app = rng.choice("abc")
    return rng.choice([
        {"matchLabels": {"app": app}},
        {"matchLabels": {"app": app, "tier": rng.choice("xy")}},
        {"matchExpressions": [{"key": "app", "operator": "In",
                               "values": rng.sample("abc", rng.randint(1, 2))}]},
        {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": [app]}]},
        {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
        {},
        None,
    ])


def _term(rng: random.Random) -> dict[str, Any]:
    term: dict[str, Any] = {"topologyKey": rng.choice([HOST, HOST, ZONE, ZONE, "rack"])}
    selector = _selector(rng)
    if selector is not None:
        term["labelSelector"] = selector
    shape = rng.random()
    if shape < 0.15:
        term["namespaces"] = rng.sample(NAMESPACES, rng.randint(1, 2))
    elif shape < 0.25:
        term["namespaceSelector"] = rng.choice([{}, {"matchLabels": {"team": "t1"}}])
        if rng.random() < 0.5:
            term["namespaces"] = ["third"]
    return term


def affinity(rng: random.Random) -> dict[str, Any] | None:
    """A pod's affinity: none, or some terms of each kind."""
    if rng.random() < 0.35:
        return None
    out: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        part: dict[str, Any] = {}
        if rng.random() < 0.6:
            part["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.choice([1, 5, 100]), "podAffinityTerm": _term(rng)}
                for _ in range(rng.randint(1, 2))]
        if rng.random() < 0.3:
            part["requiredDuringSchedulingIgnoredDuringExecution"] = [
                _term(rng) for _ in range(rng.randint(1, 2))]
        if part or rng.random() < 0.1:
            out[kind] = part
    return out or None


class Cluster:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.count = 0
        nodes = []
        for i in range(rng.randint(1, 6)):
            labels = {} if rng.random() < 0.1 else {HOST: f"n{i}"}
            zone = rng.choice(["za", "zb", None])
            if zone is not None and labels:
                labels[ZONE] = zone
            nodes.append(node(f"n{i}", cpu="64", memory="256Gi", labels=labels))
        self.names = [n.name for n in nodes]
        spaces = [decode("Namespace", {"metadata": {"name": "other", "labels": {"team": "t1"}}}),
                  decode("Namespace", {"metadata": {"name": "third"}})]
        self.snap = snapshot(*nodes, *spaces, *(self.new() for _ in range(rng.randint(0, 12))))

    def new(self, node_name: str | None = None, bound: bool = True) -> Pod:
        rng = self.rng
        self.count += 1
        labels = {"app": rng.choice("abc")}
        if rng.random() < 0.5:
            labels["tier"] = rng.choice("xy")
        where = node_name if node_name is not None else (
            rng.choice([*self.names, "gone-node"]) if bound and rng.random() < 0.9 else "")
        phase = "Failed" if rng.random() < 0.08 else "Running"
        meta = {"deletionTimestamp": "2026-11-22T12:00:00Z"} if rng.random() < 0.08 else None
        spec = {"affinity": affinity(rng)}
        return pod(f"p{self.count}", where, namespace=rng.choice(NAMESPACES), labels=labels,
                   phase=phase, meta=meta, spec=spec)

    def change(self) -> None:
        """A pod comes, goes, starts terminating, or is replaced by one of the same name."""
        rng, snap = self.rng, self.snap
        pods = sorted(snap.pods.values(), key=lambda p: p.key)
        what = rng.random()
        if what < 0.35 or not pods:
            snap.add_pod(self.new())
        elif what < 0.6:
            snap.remove_pod(rng.choice(pods))
        elif what < 0.7:  # terminating where it runs, its terms still held
            old = rng.choice(pods)
            snap.add_pod(msgspec.structs.replace(old, metadata=msgspec.structs.replace(
                old.metadata, deletion_timestamp=NOW)))
        elif what < 0.8:  # the same name with other terms
            old = rng.choice(pods)
            snap.add_pod(pod(old.name, old.node_name, namespace=old.namespace,
                             labels=dict(old.metadata.labels), spec={"affinity": affinity(rng)}))
        else:
            old = rng.choice(pods)
            if old.node_name:
                snap.add_pod(bind(old, rng.choice(self.names), NOW))


PROFILES = [DEFAULT, Profile(hard_pod_affinity_weight=0),
            Profile(ignore_preferred_terms_of_existing_pods=True),
            Profile(hard_pod_affinity_weight=7)]


def _check(cluster: Cluster, subject: Pod, gone: Pod | None) -> None:
    snap = cluster.snap
    for profile in PROFILES:
        assert interpod.affinity_raw(subject, snap, profile, gone) == walk_raw(
            subject, snap, profile, gone)
        assert interpod.running_terms_select(subject, snap, profile, gone) == walk_selected(
            subject, snap, profile, gone)
    assert interpod.affinity_misses(subject, snap.all_nodes(), snap, gone) == walk_misses(
        subject, snap, gone)
    assert interpod.blocked_by_running_anti_affinity(snap, subject, gone) == walk_blocked(
        subject, snap, gone)


def _clusters(seeds: range) -> None:
    for seed in seeds:
        rng = random.Random(seed)
        cluster = Cluster(rng)
        for _ in range(rng.randint(1, 6)):
            snap = cluster.snap
            incoming = cluster.new(node_name="")
            _check(cluster, incoming, None)
            running = sorted((p for p in snap.pods.values() if p.node_name),
                             key=lambda p: p.key)
            if running:
                bound = rng.choice(running)
                _check(cluster, bound, bound)  # the guard's question about a pod gone at once
                _check(cluster, bound, None)
            cluster.change()


def test_the_index_answers_as_the_walk_over_every_pod() -> None:
    _clusters(range(200))


@pytest.mark.slow
def test_the_index_answers_as_the_walk_over_every_pod_on_2000_clusters() -> None:
    _clusters(range(200, 2000))


# -- the model's ranked placement against its exact search --------------------------------------

@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6))
def test_ranked_placement_equals_the_exact_search_among_pods_with_affinity(
        seed: int, steps: int) -> None:
    """Pods whose terms select the replacement send it to the exact search; those whose do
    not leave it to the Ranking: either way the answer is the exact search's."""
    rng = random.Random(seed)
    cluster = Cluster(rng)
    model = KubeDefault()
    for i in range(steps):
        snap = cluster.snap
        subject = pod(f"new{i}", "", namespace=rng.choice(NAMESPACES),
                      labels={"app": rng.choice("abc")},
                      spec={"affinity": affinity(rng)} if rng.random() < 0.3 else None)
        ready = snap.ready_nodes()
        ranked = model.place(subject, ready, snap, NOW)
        exact = kube_default_exact(model, subject, ready, snap)
        assert (ranked.node, ranked.ties, ranked.why) == (exact.node, exact.ties, exact.why)
        if ranked.node is not None:
            snap.add_pod(bind(subject, ranked.node, NOW))
        cluster.change()
