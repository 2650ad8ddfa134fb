"""Two-phase moves (framework/moves/planner.py) through the real Descheduler: what a plugin's
planned evictions become after its run — a surge-first restart, paced evictions and deferrals,
plain evictions — and how the limits, budgets, delays and timeouts bear on them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from builders import NOW, decode, pod
from desched.framework.evictor import Limits
from desched.framework.moves import MoveTracker
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import policy_from_document
from moves_builders import (
    Run,
    cluster,
    deployment,
    policy,
    replica,
    statefulset,
)

SURGE = {"surgeFirst": True}
PACED = {"maxUnavailablePerWorkload": 1}
BOTH = {"surgeFirst": True, "maxUnavailablePerWorkload": 1}
TAINTED = "pod does not tolerate taint maintenance=true:NoSchedule on node n1"


def test_without_moves_nothing_is_planned() -> None:
    """No `moves` (or one that enables nothing): the Evictor evicts at once, as upstream."""
    for moves in (None, {}, {"surgeFirst": False}):
        run = Run(policy(moves))
        snap = cluster(*deployment("web", 1), replica("web-0"))
        run.cycle(snap)
        assert run.descheduler is not None and run.descheduler.evictor.moves is None
        assert run.outcomes() == {"web-0": "evicted"}
        assert run.log.restarts == [] and run.executors[0].orders == []


def test_a_one_replica_deployment_is_restarted_not_evicted() -> None:
    run = Run(policy(SURGE))
    snap = cluster(*deployment("web", 1), replica("web-0"))
    run.cycle(snap)
    [order] = run.executors[0].orders
    assert (order.namespace, order.name, order.uid, order.resource_version, order.at) == (
        "shop", "web", "uid-Deployment-web", "7", NOW)
    assert [p.key for p in order.pods] == ["shop/web-0"]
    d = run.decision("web-0")
    assert d.outcome == "restarted"
    assert d.reason == (f"{TAINTED}; restart Deployment shop/web (1 replica, maxSurge 1): no "
                        f"pod stops before its replacement is Ready")
    [restart] = run.log.restarts
    assert (restart.name, restart.replicas, restart.max_surge, restart.max_unavailable,
            restart.pods) == ("web", 1, 1, 0, ("shop/web-0",))
    assert "shop/web-0" not in snap.pods  # replaced: later plugins no longer see it


def test_a_deployment_whose_every_ready_pod_moves_is_restarted_once() -> None:
    """Three pods on the tainted node: one restart replaces all three."""
    run = Run(policy(SURGE))
    run.cycle(cluster(*deployment("api", 3), *(replica(f"api-{i}", owner="api-rs")
                                               for i in range(3))))
    assert len(run.executors[0].orders) == 1
    assert run.outcomes() == {"api-0": "restarted", "api-1": "restarted", "api-2": "restarted"}
    assert run.log.restarts[0].reason == ("restart Deployment shop/api (3 replicas, maxSurge 1):"
                                          " no pod stops before its replacement is Ready")


def test_a_restart_says_what_a_rollout_that_may_stop_pods_keeps() -> None:
    """10 replicas at 25%/25%: maxSurge 3 (rounded up), maxUnavailable 2 (rounded down)."""
    run = Run(policy(SURGE))
    run.cycle(cluster(*deployment("big", 10),
                      *(replica(f"big-{i}", owner="big-rs") for i in range(10))))
    assert run.log.restarts[0].reason == (
        "restart Deployment shop/big (10 replicas, maxSurge 3, maxUnavailable 2): at least 8 "
        "of 10 pods stay Ready")


def test_a_partly_planned_deployment_is_paced_not_restarted() -> None:
    """Two of three pods must move: a restart would replace the third too, so the pods are
    evicted one at a time (pacing), and the decision says why not restarted."""
    run = Run(policy(BOTH))
    run.cycle(cluster(*deployment("api", 3), replica("api-0", owner="api-rs"),
                      replica("api-1", owner="api-rs"), replica("api-2", "n2", owner="api-rs")))
    assert run.executors[0].orders == []
    assert run.outcomes() == {"api-0": "evicted", "api-1": "deferred"}
    assert run.decision("api-0").reason == (
        f"{TAINTED}; evicted, not restarted: only 2 of the 3 ready pods of Deployment shop/api "
        f"are to move, and a restart would replace them all")
    assert run.decision("api-1").reason == (
        f"deferred: the replacement of shop/api-0 is not Ready yet (1 of 3 unavailable, "
        f"limit 1); {TAINTED}")


@pytest.mark.parametrize(("deployment_args", "why"), [
    ({"strategy": {"type": "Recreate"}},
     "its strategy is Recreate: every old pod stops before a new one starts"),
    ({"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}},
     "its maxSurge resolves to 0 for 1 replica(s): a new pod starts only after an old one "
     "stops"),
    ({"strategy": {"rollingUpdate": {"maxSurge": "0%"}}},
     "its maxSurge resolves to 0 for 1 replica(s): a new pod starts only after an old one "
     "stops"),
    ({"paused": True}, "it is paused: a restart would not roll out until it is resumed"),
    ({"annotations": {"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""}},
     "it is annotated descheduler.alpha.kubernetes.io/prefer-no-eviction"),
])
def test_a_deployment_that_cannot_surge_is_evicted_and_says_why(
        deployment_args: dict[str, object], why: str) -> None:
    run = Run(policy(SURGE))
    run.cycle(cluster(*deployment("web", 1, **deployment_args), replica("web-0")))
    assert run.executors[0].orders == []
    d = run.decision("web-0")
    assert d.outcome == "evicted"
    assert d.reason == (f"{TAINTED}; evicted, not restarted: Deployment shop/web cannot surge: "
                        f"{why}")


def test_mid_rollout_neither_restarts_nor_evicts_under_pacing() -> None:
    """A Deployment its controller has not caught up with (a restart in progress, desched's
    own before it was itself restarted): no second restart, and pacing counts it in flight."""
    run = Run(policy(PACED))
    run.cycle(cluster(*deployment("web", 1, generation=2, observed=1), replica("web-0")))
    d = run.decision("web-0")
    assert d.outcome == "deferred"
    assert d.reason.startswith("deferred: it is mid-rollout (its controller has not observed "
                               "its spec yet (generation 2, observed 1)) (1 of 1 unavailable, "
                               "limit 1)")
    run = Run(policy(BOTH))  # surge-first: left to the rollout, whatever the pacing
    run.cycle(cluster(*deployment("web", 1, generation=2, observed=1), replica("web-0")))
    d = run.decision("web-0")
    assert d.outcome == "deferred" and run.executors[0].orders == []
    assert d.reason.startswith("deferred: Deployment shop/web is rolling out (its controller "
                               "has not observed its spec yet (generation 2, observed 1))")


@pytest.mark.parametrize("moves", [SURGE, BOTH])
def test_a_deployment_rolling_out_is_left_to_its_rollout(moves: dict[str, object]) -> None:
    """Surge-first: a Deployment mid-rollout (desched's restart of the last cycle, or anyone's)
    is neither restarted again nor evicted beside its rollout, which replaces the old pods
    within what the strategy allows (an eviction would go below it: seen on a real cluster)."""
    run = Run(policy(moves))
    run.cycle(cluster(*deployment("api", 2, updated=1), replica("api-0", owner="api-rs"),
                      replica("api-1", owner="api-rs")))
    assert run.executors[0].orders == []
    for name in ("api-0", "api-1"):
        d = run.decision(name)
        assert d.outcome == "deferred"
        assert d.reason.startswith(
            "deferred: Deployment shop/api is rolling out (1 of 2 replicas updated): the "
            "rollout replaces its pods; desched waits for it to finish; ")


def test_a_budget_that_refuses_one_pod_blocks_the_restart() -> None:
    pdb = decode("PodDisruptionBudget", {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 0},
        "status": {"disruptionsAllowed": 0}})
    run = Run(policy(SURGE))
    snap = cluster(*deployment("web", 1), replica("web-0"), pdb)
    run.cycle(snap)
    assert run.executors[0].orders == [] and run.executors[0].checked == ["shop/web-0"]
    d = run.decision("web-0")
    assert d.outcome == "pdb-blocked"
    assert d.reason.startswith("restart of Deployment shop/web not started: shop/web-0: Cannot "
                               "evict pod as it would violate the pod's disruption budget.")
    assert "shop/web-0" in snap.pods  # nothing moved


def test_a_restart_counts_once_against_the_limits() -> None:
    """Planning counts every pod (the limits refuse as they would refuse evictions); the flush
    keeps one count per restart and refunds the rest."""
    run = Run(policy(SURGE, maxNoOfPodsToEvictTotal=4))
    run.cycle(cluster(*deployment("api", 3), *(replica(f"api-{i}", owner="api-rs")
                                               for i in range(3)),
                      *deployment("web", 1), replica("web-0")))
    assert run.descheduler is not None
    evictor = run.descheduler.evictor
    assert len(run.log.restarts) == 2
    assert (evictor.total, evictor.by_node, evictor.by_namespace) == (2, {"n1": 2},
                                                                       {"shop": 2})


def test_deferred_pods_are_refunded_and_stay() -> None:
    run = Run(policy(PACED))
    snap = cluster(statefulset("db", 3),
                   *(replica(f"db-{i}", owner="db", kind="StatefulSet") for i in range(3)))
    run.cycle(snap)
    assert run.outcomes() == {"db-0": "evicted", "db-1": "deferred", "db-2": "deferred"}
    assert run.descheduler is not None and run.descheduler.evictor.total == 1
    assert "shop/db-1" in snap.pods and "shop/db-0" not in snap.pods


def test_pacing_counts_pods_unavailable_for_any_reason() -> None:
    run = Run(policy(PACED))
    run.cycle(cluster(statefulset("db", 3), replica("db-0", owner="db", kind="StatefulSet"),
                      replica("db-1", owner="db", kind="StatefulSet"),
                      replica("db-2", "n2", owner="db", kind="StatefulSet", ready=False)))
    assert run.outcomes() == {"db-0": "deferred", "db-1": "deferred"}
    assert run.decision("db-0").reason.startswith(
        "deferred: StatefulSet shop/db has 1 pod(s) not Ready (1 of 3 unavailable, limit 1)")


def test_pacing_at_two_moves_two() -> None:
    run = Run(policy({"maxUnavailablePerWorkload": 2}))
    run.cycle(cluster(statefulset("db", 3),
                      *(replica(f"db-{i}", owner="db", kind="StatefulSet") for i in range(3))))
    assert run.outcomes() == {"db-0": "evicted", "db-1": "evicted", "db-2": "deferred"}
    assert run.decision("db-2").reason.startswith(
        "deferred: the replacement of shop/db-1 is not Ready yet (2 of 3 unavailable, limit 2)")


def test_the_next_cycle_moves_the_next_pod_once_the_replacement_is_ready() -> None:
    """A live loop: each cycle reads the workload from the cluster. The replacement of db-0
    is not Ready in cycle 2, is in cycle 3."""
    run = Run(policy(PACED))
    sts = statefulset("db", 3)
    run.cycle(cluster(sts, *(replica(f"db-{i}", owner="db", kind="StatefulSet")
                             for i in range(3))), 1)
    waiting = [replica("db-0", "n2", owner="db", kind="StatefulSet", ready=False),
               replica("db-1", owner="db", kind="StatefulSet"),
               replica("db-2", owner="db", kind="StatefulSet")]
    run.cycle(cluster(sts, *waiting), 2, NOW + timedelta(seconds=2))
    assert run.outcomes(2) == {"db-1": "deferred", "db-2": "deferred"}
    assert run.decision("db-1", 2).reason.startswith(
        "deferred: the replacement of shop/db-0 is not Ready yet (1 of 3 unavailable, limit 1)")
    ready = [replica("db-0", "n2", owner="db", kind="StatefulSet"), *waiting[1:]]
    run.cycle(cluster(sts, *ready), 3, NOW + timedelta(seconds=4))
    assert run.outcomes(3) == {"db-1": "evicted", "db-2": "deferred"}


def test_a_workload_without_a_count_waits_for_its_evicted_pod_to_be_gone() -> None:
    """Pods of a controller the snapshot does not hold: desched's own evictions not yet gone
    are what is in flight."""
    run = Run(policy(PACED))
    orphans = [replica(f"job-{i}", owner="batch", kind="Job") for i in range(2)]
    run.cycle(cluster(*orphans), 1)
    assert run.outcomes(1) == {"job-0": "evicted", "job-1": "deferred"}
    assert run.decision("job-1", 1).reason.startswith(
        "deferred: shop/job-0, which desched evicted, is not gone yet")
    terminating = pod("job-0", "n1", namespace="shop", owner=("Job", "batch"),
                      meta={"deletionTimestamp": "2026-11-22T12:00:01Z"})
    run.cycle(cluster(terminating, orphans[1]), 2, NOW + timedelta(seconds=2))
    assert run.outcomes(2) == {"job-1": "deferred"}
    run.cycle(cluster(orphans[1]), 3, NOW + timedelta(seconds=4))
    assert run.outcomes(3) == {"job-1": "evicted"}


def test_bare_pods_are_each_their_own_workload() -> None:
    run = Run(policy(BOTH))
    # The evict annotation lets DefaultEvictor pass a bare pod.
    bare = {"descheduler.alpha.kubernetes.io/evict": ""}
    run.cycle(cluster(*(pod(name, "n1", namespace="shop", owner=None, annotations=bare)
                        for name in ("a", "b"))))
    assert run.outcomes() == {"a": "evicted", "b": "evicted"}
    assert "a bare pod has no controller to start its replacement" in run.decision("b").reason


def test_min_delay_between_moves_on_a_fake_clock() -> None:
    run = Run(policy({"maxUnavailablePerWorkload": 3, "minDelayBetweenMoves": "10s"}))
    sts = statefulset("db", 3)
    pods = [replica(f"db-{i}", owner="db", kind="StatefulSet") for i in range(3)]
    run.cycle(cluster(sts, *pods), 1)
    assert run.outcomes(1) == {"db-0": "evicted", "db-1": "deferred", "db-2": "deferred"}
    assert run.decision("db-1", 1).reason.startswith(
        "deferred: StatefulSet shop/db moved shop/db-0 in this cycle, and minDelayBetweenMoves "
        "is 10s")
    replaced = [replica("db-0", "n2", owner="db", kind="StatefulSet"), *pods[1:]]
    run.cycle(cluster(sts, *replaced), 2, NOW + timedelta(seconds=4))
    assert run.outcomes(2) == {"db-1": "deferred", "db-2": "deferred"}
    assert run.decision("db-1", 2).reason.startswith(
        "deferred: StatefulSet shop/db last moved shop/db-0 4s ago, and minDelayBetweenMoves "
        "is 10s")
    run.cycle(cluster(sts, *replaced), 3, NOW + timedelta(seconds=10))
    assert run.outcomes(3) == {"db-1": "evicted", "db-2": "deferred"}


def test_replacement_timeout_stops_waiting_and_says_so() -> None:
    run = Run(policy({"maxUnavailablePerWorkload": 1, "replacementTimeout": "10m"}))
    sts = statefulset("db", 3)
    pods = [replica(f"db-{i}", owner="db", kind="StatefulSet") for i in range(3)]
    run.cycle(cluster(sts, *pods), 1)
    # db-0's replacement never comes (it fits nowhere, say): its workload stays one short.
    run.cycle(cluster(sts, *pods[1:]), 2, NOW + timedelta(minutes=5))
    assert run.outcomes(2) == {"db-1": "deferred", "db-2": "deferred"}
    assert run.log.timeouts == []
    run.cycle(cluster(sts, *pods[1:]), 3, NOW + timedelta(minutes=10))
    assert run.outcomes(3) == {"db-1": "evicted", "db-2": "deferred"}
    [timeout] = run.log.timeouts
    assert (timeout.kind, timeout.name, timeout.waited) == ("StatefulSet", "db", 600.0)
    assert timeout.text == ("replacementTimeout: StatefulSet shop/db waited 10m0s (more than "
                            "10m0s) for the replacement of shop/db-0 is not Ready yet; desched "
                            "stops waiting and moves its next pod")
    assert [n.text for n in run.log.notes if n.cycle == 3] == [timeout.text]
    # db-0 is forgiven, db-1's replacement is awaited now.
    run.cycle(cluster(sts, pods[2]), 4, NOW + timedelta(minutes=11))
    assert run.decision("db-2", 4).reason.startswith(
        "deferred: the replacement of shop/db-1 is not Ready yet (1 of 3 unavailable, limit 1)")


def test_koordinator_dry_run_predicts_the_restart() -> None:
    doc = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration",
           "dryRun": True, "moves": SURGE,
           "profiles": [{"name": "p", "plugins": {
               "deschedule": {"enabled": [{"name": "RemovePodsViolatingNodeTaints"}]},
               "evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]},
               "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]}}}]}
    run = Run(policy_from_document("koord.yaml", doc, PLUGINS))
    run.cycle(cluster(*deployment("web", 1), replica("web-0")))
    d = run.decision("web-0")
    assert d.outcome == "restarted" and d.reason.endswith("(dry run: not restarted)")


def test_a_simulated_tracker_ends_a_delay_with_the_cycle() -> None:
    """simulate's cycles at one moment (no deschedulingInterval): each is the delay passing."""
    tracker = MoveTracker(simulated=True)
    tracker.moved("StatefulSet/shop/db", "shop/db-0", NOW, 1)
    assert tracker.delay_left("StatefulSet/shop/db", NOW, 1, 10) == 10
    assert tracker.delay_left("StatefulSet/shop/db", NOW, 2, 10) == 0
    live = MoveTracker()
    live.moved("StatefulSet/shop/db", "shop/db-0", NOW, 1)
    assert live.delay_left("StatefulSet/shop/db", NOW, 2, 10) == 10


def test_limits_still_refuse_while_planning() -> None:
    run = Run(policy(PACED, maxNoOfPodsToEvictPerNode=1))
    run.cycle(cluster(statefulset("db", 3), *(replica(f"db-{i}", owner="db", kind="StatefulSet")
                                               for i in range(2)),
                      *deployment("web", 1), replica("web-0")))
    assert run.outcomes()["db-1"] == "limited"
    assert run.policy.limits == Limits(per_node=1)


def test_a_restart_under_way_is_neither_repeated_nor_undercut_by_an_eviction() -> None:
    """surgeFirst alone (no pacing): while desched's own restart runs — its patch not in the
    cache yet, then the rollout not finished — the old pods are deferred, not evicted (an
    eviction would take the last ready pod) and not restarted again."""
    run = Run(policy(SURGE))
    run.cycle(cluster(*deployment("web", 1), replica("web-0")), 1)
    assert len(run.log.restarts) == 1
    run.cycle(cluster(*deployment("web", 1), replica("web-0")), 2, NOW + timedelta(seconds=2))
    assert run.decision("web-0", 2).outcome == "deferred"
    assert run.decision("web-0", 2).reason.startswith(
        "deferred: Deployment shop/web is rolling out (desched restarted it and the cache has "
        "not shown it yet): the rollout replaces its pods")
    rolling = deployment("web", 1, generation=2, observed=2, updated=0)
    run.cycle(cluster(*rolling, replica("web-0")), 3, NOW + timedelta(seconds=4))
    assert run.decision("web-0", 3).outcome == "deferred"
    assert len(run.log.restarts) == 1 and not any(
        d.outcome == "evicted" for d in run.log.decisions)
    # Rolled out (generation 2 observed, every replica updated): the restart is over, and a
    # pod that must move again (a new taint, days later) is restarted again.
    run.cycle(cluster(*deployment("web", 1, generation=2, observed=2), replica("web-1")), 4,
              NOW + timedelta(days=2))
    assert run.decision("web-1", 4).outcome == "restarted" and len(run.log.restarts) == 2
