"""PodLifeTime (v0.36): every configured criterion ANDed, items within one ORed; oldest first
across the cluster; limits."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from builders import NOW, args, handle_for, node, pod, snapshot
from desched.framework.evictor import Limits
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.podlifetime import PodLifeTime, PodLifeTimeArgs


def ago(seconds: float) -> str:
    """An RFC 3339 timestamp `seconds` before NOW (fractional seconds kept)."""
    return (NOW - timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def run(raw: dict[str, Any], *pods: Any, limits: Limits | None = None,
        protections: dict[str, Any] | None = None, nodes: list[Any] | None = None
        ) -> tuple[list[str], Any]:
    """Run PodLifeTime over two Ready nodes (unless given) and `pods`; the evicted names in order
    and the handle."""
    snap = snapshot(*(nodes or [node("n1"), node("n2")]), *pods)
    filters = []
    if protections is not None:
        setup, _ = handle_for(snap)
        filters.append(DefaultEvictor(args(DefaultEvictorArgs, protections), setup))
    handle, executor = handle_for(snap, plugin="PodLifeTime", limits=limits, filters=filters)
    PodLifeTime(args(PodLifeTimeArgs, raw), handle).deschedule(snap.ready_nodes())
    return executor.evicted, handle


def waiting(reason: str) -> dict[str, Any]:
    return {"name": "main", "state": {"waiting": {"reason": reason}}}


def terminated(reason: str, code: int = 1) -> dict[str, Any]:
    return {"name": "main", "state": {"terminated": {"reason": reason, "exitCode": code}}}


def cond(type_: str, status: str, reason: str = "", since: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": type_, "status": status}
    if reason:
        out["reason"] = reason
    if since is not None:
        out["lastTransitionTime"] = ago(since)
    return out


# (id, args, the pod, evicted?)
MATCH_CASES: list[tuple[str, dict[str, Any], Any, bool]] = [
    # maxPodLifeTimeSeconds: truncated age strictly greater than the limit.
    ("older than max", {"maxPodLifeTimeSeconds": 3600}, pod("p", created=ago(3601)), True),
    ("exactly max is not older", {"maxPodLifeTimeSeconds": 3600}, pod("p", created=ago(3600)),
     False),
    ("fraction above max truncates to max", {"maxPodLifeTimeSeconds": 3600},
     pod("p", created=ago(3600.7)), False),
    ("younger than max", {"maxPodLifeTimeSeconds": 3600}, pod("p", created=ago(60)), False),
    ("max 0, created in the future", {"maxPodLifeTimeSeconds": 0}, pod("p", created=ago(-600)),
     False),
    ("max 0, one second old", {"maxPodLifeTimeSeconds": 0}, pod("p", created=ago(1)), True),
    ("age uses creationTimestamp, not startTime", {"maxPodLifeTimeSeconds": 3600},
     pod("p", created=ago(7200), status={"startTime": ago(10)}), True),
    # states: phases.
    ("state Pending: pending pod", {"states": ["Pending"]}, pod("p", phase="Pending"), True),
    ("state Pending: running pod", {"states": ["Pending"]}, pod("p"), False),
    ("state Running", {"states": ["Running"]}, pod("p"), True),
    ("state Succeeded: terminal pods are listed", {"states": ["Succeeded"]},
     pod("p", phase="Succeeded"), True),
    ("state Failed", {"states": ["Failed", "Unknown"]}, pod("p", phase="Failed"), True),
    # states: pod status.reason.
    ("state NodeLost via status.reason", {"states": ["NodeLost"]},
     pod("p", phase="Unknown", status={"reason": "NodeLost"}), True),
    ("state Shutdown via status.reason", {"states": ["Shutdown"]},
     pod("p", phase="Failed", status={"reason": "Shutdown"}), True),
    ("state NodeAffinity: other reason", {"states": ["NodeAffinity"]},
     pod("p", phase="Failed", status={"reason": "Shutdown"}), False),
    # states: container waiting reasons.
    ("state CrashLoopBackOff", {"states": ["CrashLoopBackOff"]},
     pod("p", status={"containerStatuses": [waiting("CrashLoopBackOff")]}), True),
    ("state ImagePullBackOff: container is crashlooping", {"states": ["ImagePullBackOff"]},
     pod("p", status={"containerStatuses": [waiting("CrashLoopBackOff")]}), False),
    ("state ContainerCreating on a pending pod", {"states": ["ContainerCreating"]},
     pod("p", phase="Pending", status={"containerStatuses": [waiting("ContainerCreating")]}),
     True),
    ("any container matches",
     {"states": ["ErrImagePull"]},
     pod("p", status={"containerStatuses": [{"name": "a", "state": {"running": {}}},
                                            waiting("ErrImagePull")]}), True),
    # states: container terminated reasons (v0.36).
    ("state OOMKilled", {"states": ["OOMKilled"]},
     pod("p", status={"containerStatuses": [terminated("OOMKilled", 137)]}), True),
    ("state Completed", {"states": ["Completed"]},
     pod("p", phase="Succeeded", status={"containerStatuses": [terminated("Completed", 0)]}),
     True),
    ("state Error: container OOMKilled", {"states": ["Error"]},
     pod("p", status={"containerStatuses": [terminated("OOMKilled", 137)]}), False),
    # states: init containers only with includingInitContainers.
    ("init container waiting reason ignored by default", {"states": ["ImagePullBackOff"]},
     pod("p", phase="Pending", status={"initContainerStatuses": [waiting("ImagePullBackOff")]}),
     False),
    ("init container waiting reason with includingInitContainers",
     {"states": ["ImagePullBackOff"], "includingInitContainers": True},
     pod("p", phase="Pending", status={"initContainerStatuses": [waiting("ImagePullBackOff")]}),
     True),
    ("init container terminated reason with includingInitContainers",
     {"states": ["Error"], "includingInitContainers": True},
     pod("p", phase="Pending", status={"initContainerStatuses": [terminated("Error", 1)]}),
     True),
    ("ephemeral container ignored by default", {"states": ["CrashLoopBackOff"]},
     pod("p", status={"ephemeralContainerStatuses": [waiting("CrashLoopBackOff")]}), False),
    ("ephemeral container with includingEphemeralContainers",
     {"states": ["CrashLoopBackOff"], "includingEphemeralContainers": True},
     pod("p", status={"ephemeralContainerStatuses": [waiting("CrashLoopBackOff")]}), True),
    # conditions.
    ("condition type+status matches", {"conditions": [{"type": "Ready", "status": "False"}]},
     pod("p", ready=False), True),
    ("condition status differs", {"conditions": [{"type": "Ready", "status": "False"}]},
     pod("p"), False),
    ("condition by reason only", {"conditions": [{"reason": "PodCompleted"}]},
     pod("p", status={"conditions": [cond("Ready", "False", "PodCompleted")]}), True),
    ("condition reason differs", {"conditions": [{"type": "Ready", "reason": "PodCompleted"}]},
     pod("p", status={"conditions": [cond("Ready", "False", "ContainersNotReady")]}), False),
    ("any of several condition filters",
     {"conditions": [{"type": "PodScheduled", "status": "False"},
                     {"type": "Ready", "status": "False"}]},
     pod("p", ready=False), True),
    ("condition transitioned long enough ago",
     {"conditions": [{"type": "Ready", "status": "False",
                      "minTimeSinceLastTransitionSeconds": 600}]},
     pod("p", status={"conditions": [cond("Ready", "False", since=700)]}), True),
    ("condition transitioned exactly the minimum ago",
     {"conditions": [{"type": "Ready", "minTimeSinceLastTransitionSeconds": 600}]},
     pod("p", status={"conditions": [cond("Ready", "False", since=600)]}), True),
    ("condition transitioned too recently",
     {"conditions": [{"type": "Ready", "status": "False",
                      "minTimeSinceLastTransitionSeconds": 600}]},
     pod("p", status={"conditions": [cond("Ready", "False", since=300)]}), False),
    ("condition without lastTransitionTime",
     {"conditions": [{"type": "Ready", "minTimeSinceLastTransitionSeconds": 600}]},
     pod("p", status={"conditions": [cond("Ready", "False")]}), False),
    # exitCodes.
    ("exit code matches", {"exitCodes": [137, 143]},
     pod("p", status={"containerStatuses": [terminated("OOMKilled", 137)]}), True),
    ("exit code differs", {"exitCodes": [137]},
     pod("p", status={"containerStatuses": [terminated("Error", 1)]}), False),
    ("exit code of a running container", {"exitCodes": [0]}, pod("p"), False),
    ("init exit code ignored by default", {"exitCodes": [2]},
     pod("p", status={"initContainerStatuses": [terminated("Error", 2)]}), False),
    ("init exit code with includingInitContainers",
     {"exitCodes": [2], "includingInitContainers": True},
     pod("p", status={"initContainerStatuses": [terminated("Error", 2)]}), True),
    ("ephemeral exit code never checked",
     {"exitCodes": [2], "includingEphemeralContainers": True},
     pod("p", status={"ephemeralContainerStatuses": [terminated("Error", 2)]}), False),
    # ownerKinds.
    ("ownerKinds include: listed kind", {"maxPodLifeTimeSeconds": 0,
                                         "ownerKinds": {"include": ["Job"]}},
     pod("p", owner=("Job", "j")), True),
    ("ownerKinds include: other kind", {"maxPodLifeTimeSeconds": 0,
                                        "ownerKinds": {"include": ["Job"]}},
     pod("p"), False),
    ("ownerKinds include: bare pod fails", {"maxPodLifeTimeSeconds": 0,
                                            "ownerKinds": {"include": ["Job"]}},
     pod("p", owner=None), False),
    ("ownerKinds exclude: listed kind", {"maxPodLifeTimeSeconds": 0,
                                         "ownerKinds": {"exclude": ["ReplicaSet"]}},
     pod("p"), False),
    ("ownerKinds exclude: other kind", {"maxPodLifeTimeSeconds": 0,
                                        "ownerKinds": {"exclude": ["ReplicaSet"]}},
     pod("p", owner=("StatefulSet", "s")), True),
    ("ownerKinds exclude: bare pod passes", {"maxPodLifeTimeSeconds": 0,
                                             "ownerKinds": {"exclude": ["ReplicaSet"]}},
     pod("p", owner=None), True),
    # namespaces and labelSelector.
    ("namespaces include: listed", {"maxPodLifeTimeSeconds": 0,
                                    "namespaces": {"include": ["dev"]}},
     pod("p", namespace="dev"), True),
    ("namespaces include: other", {"maxPodLifeTimeSeconds": 0,
                                   "namespaces": {"include": ["dev"]}},
     pod("p", namespace="prod"), False),
    ("namespaces exclude: listed", {"maxPodLifeTimeSeconds": 0,
                                    "namespaces": {"exclude": ["kube-system"]}},
     pod("p", namespace="kube-system"), False),
    ("namespaces exclude: other", {"maxPodLifeTimeSeconds": 0,
                                   "namespaces": {"exclude": ["kube-system"]}},
     pod("p"), True),
    ("labelSelector matches", {"maxPodLifeTimeSeconds": 0,
                               "labelSelector": {"matchLabels": {"app": "web"}}},
     pod("p", labels={"app": "web"}), True),
    ("labelSelector does not match", {"maxPodLifeTimeSeconds": 0,
                                      "labelSelector": {"matchLabels": {"app": "web"}}},
     pod("p", labels={"app": "db"}), False),
    # Categories are ANDed.
    ("old and in state", {"maxPodLifeTimeSeconds": 3600, "states": ["Pending"]},
     pod("p", phase="Pending", created=ago(7200)), True),
    ("old but not in state", {"maxPodLifeTimeSeconds": 3600, "states": ["Pending"]},
     pod("p", created=ago(7200)), False),
    ("in state but young", {"maxPodLifeTimeSeconds": 3600, "states": ["Pending"]},
     pod("p", phase="Pending", created=ago(60)), False),
    ("state matches but exit code does not", {"states": ["Error"], "exitCodes": [137]},
     pod("p", status={"containerStatuses": [terminated("Error", 1)]}), False),
    ("state and exit code and condition all match",
     {"states": ["Error"], "exitCodes": [1], "conditions": [{"type": "Ready", "status": "False"}]},
     pod("p", ready=False, status={"containerStatuses": [terminated("Error", 1)]}), True),
]


@pytest.mark.parametrize(("raw", "subject", "evicted"), [c[1:] for c in MATCH_CASES],
                         ids=[c[0] for c in MATCH_CASES])
def test_criteria(raw: dict[str, Any], subject: Any, evicted: bool) -> None:
    names, _ = run(raw, subject)
    assert names == (["p"] if evicted else [])


def test_oldest_first_across_nodes() -> None:
    pods = [pod("young-n1", "n1", created=ago(4000)),
            pod("oldest-n2", "n2", created=ago(9000)),
            pod("mid-n1", "n1", created=ago(6000)),
            pod("old-n2", "n2", created=ago(8000)),
            pod("too-young", "n2", created=ago(100))]
    names, _ = run({"maxPodLifeTimeSeconds": 3600}, *pods)
    assert names == ["oldest-n2", "old-n2", "mid-n1", "young-n1"]


def test_terminal_pods_included() -> None:
    pods = [pod("done", created=ago(9000), phase="Succeeded"),
            pod("failed", "n2", created=ago(8000), phase="Failed"),
            pod("running", created=ago(7000))]
    names, _ = run({"maxPodLifeTimeSeconds": 3600}, *pods)
    assert names == ["done", "failed", "running"]


def test_pods_on_not_ready_nodes_are_not_seen() -> None:
    pods = [pod("a", "n1", created=ago(9000)), pod("b", "n3", created=ago(9500))]
    names, _ = run({"maxPodLifeTimeSeconds": 3600}, *pods,
                   nodes=[node("n1"), node("n2"), node("n3", ready=False)])
    assert names == ["a"]


def test_default_evictor_filters_apply() -> None:
    pods = [pod("owned", created=ago(9000)),
            pod("bare", created=ago(9500), owner=None),
            pod("ds", created=ago(9600), owner=("DaemonSet", "d")),
            pod("critical", created=ago(9700), priority=2_000_000_000)]
    names, _ = run({"maxPodLifeTimeSeconds": 3600}, *pods, protections={})
    assert names == ["owned"]


def test_node_fit_pre_eviction_filter_applies() -> None:
    pods = [pod("fits", "n1", created=ago(9000)),
            pod("pinned", "n1", created=ago(9500), spec={"nodeSelector": {"only": "n1"}})]
    names, _ = run({"maxPodLifeTimeSeconds": 3600}, *pods, protections={"nodeFit": True},
                   nodes=[node("n1", labels={"only": "n1"}), node("n2")])
    assert names == ["fits"]


def test_node_limit_skips_the_pod_and_continues() -> None:
    pods = [pod("a", "n1", created=ago(9000)),
            pod("b", "n1", created=ago(8000)),
            pod("c", "n2", created=ago(7000)),
            pod("d", "n1", created=ago(6000)),
            pod("e", "n2", created=ago(5000))]
    names, handle = run({"maxPodLifeTimeSeconds": 3600}, *pods, limits=Limits(per_node=1))
    assert names == ["a", "c"]
    limited = [d.pod for d in handle.log.decisions if d.outcome == "limited"]
    assert limited == ["b", "d", "e"]


def test_namespace_limit_skips_the_pod_and_continues() -> None:
    pods = [pod("a", namespace="x", created=ago(9000)),
            pod("b", namespace="x", created=ago(8000)),
            pod("c", "n2", namespace="y", created=ago(7000))]
    names, _ = run({"maxPodLifeTimeSeconds": 3600}, *pods, limits=Limits(per_namespace=1))
    assert names == ["a", "c"]


def test_total_limit_stops() -> None:
    pods = [pod(f"p{i}", f"n{i % 2 + 1}", created=ago(9000 - i)) for i in range(5)]
    names, handle = run({"maxPodLifeTimeSeconds": 3600}, *pods, limits=Limits(total=2))
    assert names == ["p0", "p1"]
    # The plugin returns on the first total-limit error instead of trying every other pod.
    limited = [d for d in handle.log.decisions if d.outcome == "limited"]
    assert [d.pod for d in limited] == ["p2"]


def test_evicted_pod_reason_is_recorded() -> None:
    _, handle = run({"maxPodLifeTimeSeconds": 3600}, pod("p", created=ago(7200)))
    [decision] = handle.log.evictions()
    assert decision.plugin == "PodLifeTime"
    assert "maxPodLifeTimeSeconds" in decision.reason


def test_reason_written_at_eviction_names_every_matched_criterion() -> None:
    """The listing only tests the criteria; the reason is written when the pod's turn comes,
    and still names the age and the state it matched."""
    _, handle = run({"maxPodLifeTimeSeconds": 3600, "states": ["CrashLoopBackOff"]},
                    pod("p", created=ago(7200),
                        status={"containerStatuses": [waiting("CrashLoopBackOff")]}))
    [decision] = handle.log.evictions()
    assert decision.reason == ("pod age 7200s (2h) exceeds maxPodLifeTimeSeconds 3600 (1h); "
                               "pod is in state CrashLoopBackOff")
