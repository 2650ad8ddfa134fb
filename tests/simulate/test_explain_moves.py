"""`explain --pod` under the policy's `moves`: a pod replaced by a restart of its Deployment is
told as moved by it, with what the rollout guarantees; a paced pod as not evicted yet, with the
replacement it waits for, until the cycle it moves in."""

from __future__ import annotations

from pathlib import Path

import pytest

from desched.simulate.explain import explain_run

REPO = Path(__file__).resolve().parents[2]
POLICY = str(REPO / "examples" / "zero-downtime" / "policy.yaml")
CLUSTER = str(REPO / "examples" / "zero-downtime" / "cluster.yaml")
TAINT = "pod does not tolerate taint maintenance=true:NoSchedule on node worker-1"


def explain(pod: str, cycles: int) -> list[str]:
    return explain_run(POLICY, [CLUSTER], None, pod, None, cycles, True).splitlines()


def test_a_restarted_pod_is_told_as_moved_by_the_restart() -> None:
    lines = explain("shop/web-5d8f9-x7k2p", 2)
    assert lines[1:4] == [
        "pod shop/web-5d8f9-x7k2p on worker-1:",
        "  cycle 1:",
        f"    default/RemovePodsViolatingNodeTaints: MOVED by a restart: {TAINT}; restart "
        f"Deployment shop/web (1 replica, maxSurge 1): no pod stops before its replacement is "
        f"Ready"]
    assert lines[4].startswith("  after cycle 1: replaced by shop/web-5d8f9-x7k2p-r1, placed on")


@pytest.mark.parametrize(("cycles", "last"), [
    (2, ["    default/RemovePodsViolatingNodeTaints: not evicted yet: deferred: the replacement "
         "of shop/cart-6b7d8-f3 is not Ready yet (1 of 10 unavailable, limit 1); " + TAINT]),
    # Evicted in the last cycle: where its replacement lands ends the story.
    (3, ["    default/RemovePodsViolatingNodeTaints: EVICTED: " + TAINT + "; evicted, not "
         "restarted: only 4 of the 10 ready pods of Deployment shop/cart are to move, and a "
         "restart would replace them all",
         "  after cycle 3: replaced by shop/cart-6b7d8-h5-r3, placed on worker-4 (the run ends "
         "here; --cycles 4 explains it there)"]),
])
def test_a_paced_pod_is_told_as_deferred_until_it_moves(cycles: int, last: list[str]) -> None:
    lines = explain("shop/cart-6b7d8-h5", cycles)
    assert lines[3] == ("    default/RemovePodsViolatingNodeTaints: not evicted yet: deferred: "
                        "the replacement of shop/cart-6b7d8-d1 is not Ready yet (1 of 10 "
                        "unavailable, limit 1); " + TAINT)
    assert lines[-len(last):] == last
