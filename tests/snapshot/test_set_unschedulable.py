"""ClusterSnapshot.set_unschedulable (a plugin's cordon in simulation): the node becomes a new
struct, NodeFit and the node index see it cordoned at once, and uncordoning undoes it."""

from __future__ import annotations

from builders import node, pod, snapshot
from desched.predicates.nodefit import NOT_SCHEDULABLE, affinity_space, node_fit
from desched.predicates.nodeindex import node_index


def test_a_cordon_is_seen_through_the_node_index_and_nodefit() -> None:
    # Pool x is 2 of 5 nodes: few enough for the index to narrow a search to it.
    snap = snapshot(node("a", labels={"pool": "x"}), node("b", labels={"pool": "x"}),
                    *(node(name, labels={"pool": "y"}) for name in "cde"))
    pinned = pod("p", "c", spec={"nodeSelector": {"pool": "x"}})
    index = node_index(snap)  # built before the cordon
    before = snap.nodes["a"]
    assert snap.set_unschedulable("a", True)
    after = snap.nodes["a"]
    assert after is not before and after.spec.unschedulable and not before.spec.unschedulable
    assert node_index(snap) is index
    assert any(n is after for n in index.nodes) and not any(n is before for n in index.nodes)
    space = affinity_space(pinned, list(snap.nodes.values()), snap)
    assert [n.name for n in space] == ["a", "b"] and space[0] is after
    assert node_fit(pinned, space[0], snap) == NOT_SCHEDULABLE
    assert node_fit(pinned, space[1], snap) is None
    assert snap.ready_nodes()[0] is after
    assert snap.set_unschedulable("a", False)
    assert not snap.nodes["a"].spec.unschedulable


def test_an_unknown_node_or_no_change() -> None:
    snap = snapshot(node("a"))
    additions = snap.additions
    assert not snap.set_unschedulable("missing", True)
    assert snap.set_unschedulable("a", False)  # already schedulable: nothing derived is dropped
    assert snap.additions == additions
