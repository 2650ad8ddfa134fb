"""Notes that repeat one cause on many nodes are one line with the count (issue 36, item 5)."""

from __future__ import annotations

from desched.framework.decisions import Note
from desched.report.render import note_lines


def note(node: str, text: str, cycle: int = 1, plugin: str = "LowNodeLoad") -> Note:
    return Note(cycle, node, "p", plugin, text)


def test_one_cause_on_many_nodes_is_one_line() -> None:
    notes = [note(f"worker-{i}", f"node worker-{i} has no NodeMetric: it is neither a source "
                                 f"nor a target") for i in range(1, 6)]
    assert note_lines(notes) == [
        "  cycle 1 5 nodes (worker-1, worker-2, worker-3, ...) [p/LowNodeLoad]: the node has "
        "no NodeMetric: it is neither a source nor a target"]


def test_different_causes_cycles_and_plugins_stay_apart() -> None:
    notes = [note("a", "node a has no NodeMetric"), note("b", "node b is cordoned"),
             note("c", "node c has no NodeMetric", cycle=2),
             note("d", "node d has no NodeMetric", plugin="Other"), note("", "run note"),
             note("", "run note")]
    assert note_lines(notes) == [
        "  cycle 1 node a [p/LowNodeLoad]: node a has no NodeMetric",
        "  cycle 1 node b [p/LowNodeLoad]: node b is cordoned",
        "  cycle 2 node c [p/LowNodeLoad]: node c has no NodeMetric",
        "  cycle 1 node d [p/Other]: node d has no NodeMetric",
        "  cycle 1 run [p/LowNodeLoad]: run note", "  cycle 1 run [p/LowNodeLoad]: run note"]


def test_only_the_whole_node_name_is_set_aside() -> None:
    # worker-10 in worker-1's note is another node, not worker-1's name.
    notes = [note("worker-1", "node worker-1 is fuller than worker-10"),
             note("worker-2", "node worker-2 is fuller than worker-10")]
    assert note_lines(notes) == [
        "  cycle 1 2 nodes (worker-1, worker-2) [p/LowNodeLoad]: the node is fuller than "
        "worker-10"]
