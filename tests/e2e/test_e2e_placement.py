"""Placement fidelity against the real kube-scheduler: for each deterministic scenario of
bench/placement_fidelity.py, `desched simulate --reschedule --scheduler kube-default` must put
the replacements of the pods `desched run --once` evicts where kube-scheduler really puts them
(by class of interchangeable nodes: at least 95 %), and predict the balance after the cycle
(std and max of cpu-request utilization per node) within half a point. Where the server took
another order than simulate assumes (a loaded machine: an evicted pod still counted on its node
when kube-scheduler placed its replacement), the same model in the order the server took
(placement_fidelity.replay) is the prediction judged; the report says so.

The cluster must run kube-scheduler and the ReplicaSet controller and have no schedulable node
of its own (see README.md, "Placement fidelity"). The scenarios delete every Node and Namespace
labelled `desched-fidelity` first; they take turns (a file lock) with each other under
`pytest -n 2` and with the bench."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import placement_fidelity as fidelity  # noqa: E402

# One worker takes these in turn (they share the cluster's nodes: a lock), the others go on.
pytestmark = [pytest.mark.needs("kube-scheduler", "kube-controller-manager"),
              pytest.mark.xdist_group("fidelity"), pytest.mark.timeout(600)]


SHARE = 0.95  # of the replacements, on a node of the predicted class
POINTS = 0.5  # balance after the cycle: |predicted - real|, std and max, percentage points


@pytest.mark.parametrize("name", fidelity.DETERMINISTIC)
def test_replacements_land_where_kube_scheduler_puts_them(
        name: str, kubeconfig: str, tmp_path: Path) -> None:
    opts = fidelity.Options(kubeconfig, tmp_path, mode="interleaved", log=lambda text: None)
    result = fidelity.run_scenario(fidelity.SCENARIOS[name](), opts)
    if "skipped" in result:
        pytest.skip(f"{name}: {result['skipped']}")
    report = fidelity.details(result)
    placements = result["placements"]
    assert placements["total"] > 0, f"no replacements to compare:\n{report}"
    assert placements["fraction"] >= SHARE, (
        f"{placements['matched']} of {placements['total']} replacements on the predicted "
        f"class of nodes (need {SHARE:.0%}):\n{report}")
    balance: dict[str, Any] = result["balance"]
    for measure in ("std", "max"):
        predicted, real = balance["predicted"][measure], balance["real"][measure]
        assert abs(predicted - real) <= POINTS, (
            f"{measure} of cpu-request utilization after the cycle: predicted {predicted:.2f}, "
            f"real {real:.2f} (allowed difference {POINTS} points):\n{report}")


# -- the order the server took (no cluster needed: desched's model on a small snapshot) ----------

def _node(name: str) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "4Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {}, "status": {"allocatable": resources, "capacity": resources,
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, node: str, cpu: str, memory: str, owner: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": owner, "uid": f"uid-{owner}",
                                              "controller": True}]},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "app", "image": fidelity.IMAGE, "resources": {
                         "requests": {"cpu": cpu, "memory": memory}}}]},
            "status": {"phase": "Running"}}


# Node a holds 1 cpu and the evicted pod x (1 cpu), node b 1.5 cpu (4 cpu each): x's replacement
# r goes to a once x is gone, to b while x is still counted there.
NODES = [_node("a"), _node("b")]
BEFORE = [_pod("fill-a", "a", "1", "1Gi", "fill"), _pod("fill-b", "b", "1500m", "1536Mi", "fill"),
          _pod("x", "a", "1", "1Gi", "app")]
GONE_FIRST = [(0.0, "evicted", "x", "a"), (0.0, "gone", "x", "a"), (0.0, "created", "r", ""),
              (0.0, "bound", "r", "a")]
RACED = [(0.0, "evicted", "x", "a"), (0.0, "created", "r", ""), (0.0, "gone", "x", "a"),
         (0.0, "bound", "r", "b")]
OWNERS = {"x": "app", "r": "app"}


def test_replay_places_a_replacement_beside_its_evicted_pod_while_it_is_there(
        tmp_path: Path) -> None:
    """The model in the server's order: r created after x was gone has one outcome (a, as
    simulate assumes); r created while x was still there (terminating) may have been placed
    then (b) or once x was gone (a); gated, just before its bind (x gone: a)."""
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                "items": [*NODES, *BEFORE]}), encoding="utf-8")
    assert fidelity.replay(snap, "ns", GONE_FIRST, OWNERS) == [{"r": "a"}]
    assert fidelity.replay(snap, "ns", RACED, OWNERS) == [{"r": "b"}, {"r": "a"}]
    assert fidelity.replay(snap, "ns", RACED, OWNERS, gated=True) == [{"r": "a"}]


def test_compare_judges_by_the_order_only_where_it_explains_the_placement() -> None:
    """simulate put r on a; kube-scheduler put it on b. An outcome of the server's order that
    puts it on b is the prediction judged (order: timeline); one that does not excuses
    nothing."""
    after = [BEFORE[0], BEFORE[1], _pod("r", "b", "1", "1Gi", "app")]
    simulated = {"evictions": [{"namespace": "ns", "pod": "x"}],
                 "rescheduled": [{"pod": "ns/x-r1", "node": "a", "replaces": "ns/x",
                                  "tiedNodes": 1}]}
    alone = fidelity.compare(NODES, BEFORE, after, simulated, ["r"])
    assert (alone["placements"]["matched"], alone["placements"]["order"]) == (0, "simulate")
    unexplained = fidelity.compare(NODES, BEFORE, after, simulated, ["r"], [{"r": "a"}])
    assert (unexplained["placements"]["matched"], unexplained["placements"]["order"]) == \
        (0, "simulate")
    assert unexplained["balance"]["predicted"] != unexplained["balance"]["real"]
    raced = fidelity.compare(NODES, BEFORE, after, simulated, ["r"], [{"r": "b"}, {"r": "a"}])
    placements = raced["placements"]
    assert (placements["matched"], placements["fraction"]) == (1, 1.0)
    assert placements["order"] == "timeline (1 of 2)"
    assert placements["simulate"]["matched"] == 0
    assert raced["balance"]["predicted"] == raced["balance"]["real"]
    assert "order: timeline (1 of 2)" in fidelity.details(
        {**raced, "scenario": "s", "mode": "interleaved", "summary": "", "simulateSeconds": 0,
         "cluster": {"nodes": 2, "pods": 3},
         "timeline": {"evictions": 0}})
