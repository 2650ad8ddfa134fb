"""RemoveFailedPods: phase Failed, minPodLifetimeSeconds (default 3600), excludeOwnerKinds,
reasons, exitCodes, init containers, DefaultEvictor protections, limits, validation and defaults
."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from builders import NOW, args, handle_for, node, pod, snapshot
from desched.errors import InputError
from desched.framework.evictor import Limits
from desched.plugins.catalog import PLUGINS
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.removefailedpods import (
    RemoveFailedPods,
    RemoveFailedPodsArgs,
    default,
    validate,
)
from desched.policy_files.loader import policy_from_document
from desched.simulate.simulation import run_simulation

PLUGIN = "RemoveFailedPods"


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def terminated(reason: str, code: int = 1, name: str = "main") -> dict[str, Any]:
    return {"name": name, "state": {"terminated": {"reason": reason, "exitCode": code}}}


def waiting(reason: str, name: str = "main") -> dict[str, Any]:
    return {"name": name, "state": {"waiting": {"reason": reason}}}


def failed(name: str = "p", *statuses: dict[str, Any], init: list[dict[str, Any]] | None = None,
           reason: str = "", node_name: str = "n1", **kw: Any) -> Any:
    status: dict[str, Any] = {"containerStatuses": list(statuses) or [terminated("Error")]}
    if init:
        status["initContainerStatuses"] = init
    if reason:
        status["reason"] = reason
    kw.setdefault("phase", "Failed")
    return pod(name, node_name, status=status, **kw)


def run(raw: dict[str, Any], *pods: Any, limits: Limits | None = None,
        protections: dict[str, Any] | None = None) -> tuple[list[str], Any]:
    snap = snapshot(node("n1"), node("n2"), *pods)
    setup, _ = handle_for(snap)
    evictor = DefaultEvictor(args(DefaultEvictorArgs, protections or {}), setup)
    handle, executor = handle_for(snap, plugin=PLUGIN, limits=limits, filters=[evictor])
    plugin_args = args(RemoveFailedPodsArgs, raw)
    default(plugin_args)
    RemoveFailedPods(plugin_args, handle).deschedule(snap.ready_nodes())
    return executor.evicted, handle


# (id, args, the pod, evicted?)
CASES: list[tuple[str, dict[str, Any], Any, bool]] = [
    ("failed pod older than the default 3600s", {}, failed(), True),
    ("running pod", {}, failed(phase="Running"), False),
    ("succeeded pod", {}, failed(phase="Succeeded"), False),
    ("pending pod", {}, failed(phase="Pending"), False),
    ("failed pod younger than the default 3600s", {}, failed(created=ago(600)), False),
    ("age exactly minPodLifetimeSeconds", {"minPodLifetimeSeconds": 600},
     failed(created=ago(600)), True),
    ("age one second short", {"minPodLifetimeSeconds": 600}, failed(created=ago(599.5)), False),
    ("minPodLifetimeSeconds 0: any age", {"minPodLifetimeSeconds": 0}, failed(created=ago(1)),
     True),
    ("created in the future is not old enough", {"minPodLifetimeSeconds": 60},
     failed(created=ago(-600)), False),
    ("excludeOwnerKinds: listed kind", {"excludeOwnerKinds": ["Job"]},
     failed(owner=("Job", "j")), False),
    ("excludeOwnerKinds: other kind", {"excludeOwnerKinds": ["Job"]}, failed(), True),
    ("reasons: container terminated reason", {"reasons": ["OOMKilled"]},
     failed("p", terminated("OOMKilled", 137)), True),
    ("reasons: no match", {"reasons": ["OOMKilled"]}, failed("p", terminated("Error")), False),
    ("reasons: container waiting reason", {"reasons": ["CreateContainerConfigError"]},
     failed("p", waiting("CreateContainerConfigError")), True),
    ("reasons: pod status.reason", {"reasons": ["NodeAffinity"]},
     failed(reason="NodeAffinity"), True),
    ("reasons: any container matches", {"reasons": ["Error"]},
     failed("p", terminated("Completed", 0, "a"), terminated("Error", 2, "b")), True),
    ("reasons: init container ignored by default", {"reasons": ["ImagePullBackOff"]},
     failed("p", waiting("PodInitializing"), init=[waiting("ImagePullBackOff", "init")]), False),
    ("reasons: init container with includingInitContainers",
     {"reasons": ["ImagePullBackOff"], "includingInitContainers": True},
     failed("p", waiting("PodInitializing"), init=[waiting("ImagePullBackOff", "init")]), True),
    ("exitCodes: match", {"exitCodes": [137]}, failed("p", terminated("OOMKilled", 137)), True),
    ("exitCodes: no match", {"exitCodes": [137]}, failed("p", terminated("Error", 1)), False),
    ("exitCodes: a waiting container has none", {"exitCodes": [0]},
     failed("p", waiting("CrashLoopBackOff")), False),
    ("exitCodes: init container ignored by default", {"exitCodes": [2]},
     failed("p", terminated("Error", 1), init=[terminated("Error", 2, "init")]), False),
    ("exitCodes: init container with includingInitContainers",
     {"exitCodes": [2], "includingInitContainers": True},
     failed("p", terminated("Error", 1), init=[terminated("Error", 2, "init")]), True),
    ("reasons and exitCodes must both match", {"reasons": ["Error"], "exitCodes": [137]},
     failed("p", terminated("Error", 1)), False),
    ("reasons and exitCodes both match", {"reasons": ["Error"], "exitCodes": [1]},
     failed("p", terminated("Error", 1)), True),
    ("namespaces include: other namespace", {"namespaces": {"include": ["dev"]}}, failed(),
     False),
    ("namespaces exclude: other namespace", {"namespaces": {"exclude": ["dev"]}}, failed(), True),
    ("labelSelector matches", {"labelSelector": {"matchLabels": {"app": "batch"}}},
     failed(labels={"app": "batch"}), True),
    ("labelSelector does not match", {"labelSelector": {"matchLabels": {"app": "batch"}}},
     failed(labels={"app": "web"}), False),
    ("bare failed pod: FailedBarePods protection", {}, failed(owner=None), False),
    ("DaemonSet failed pod: protected", {}, failed(owner=("DaemonSet", "d")), False),
    ("no creationTimestamp: old enough (the zero time)", {},
     failed(meta={"creationTimestamp": None}), True),
]


@pytest.mark.parametrize(("raw", "subject", "evicted"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_criteria(raw: dict[str, Any], subject: Any, evicted: bool) -> None:
    names, _ = run(raw, subject)
    assert names == (["p"] if evicted else [])


def test_bare_failed_pod_with_protection_disabled() -> None:
    names, _ = run({}, failed(owner=None),
                   protections={"podProtections": {"defaultDisabled": ["FailedBarePods"]}})
    assert names == ["p"]


def test_node_order_then_list_order() -> None:
    pods = [failed("b", node_name="n2"), failed("a1"), failed("c", node_name="n2"), failed("a2")]
    assert run({}, *pods)[0] == ["a1", "a2", "b", "c"]


def test_node_limit_moves_to_next_node() -> None:
    pods = [failed("a1"), failed("a2"), failed("b", node_name="n2")]
    names, handle = run({}, *pods, limits=Limits(per_node=1))
    assert names == ["a1", "b"]
    assert [d.pod for d in handle.log.decisions if d.outcome == "limited"] == ["a2"]


def test_total_limit_stops() -> None:
    pods = [failed("a1"), failed("a2"), failed("b", node_name="n2")]
    names, handle = run({}, *pods, limits=Limits(total=1))
    assert names == ["a1"]
    assert [d.pod for d in handle.log.decisions if d.outcome == "limited"] == ["a2"]


def test_reason() -> None:
    _, handle = run({"reasons": ["OOMKilled"], "exitCodes": [137]},
                    failed("p", terminated("OOMKilled", 137), created=ago(7200)))
    [decision] = handle.log.evictions()
    assert decision.reason == ("pod phase is Failed; age 7200s is at least minPodLifetimeSeconds "
                               "3600; reason OOMKilled; a container exited with code 137")


# -- validation and defaults ----------------------------------------------------------------------

def test_defaults() -> None:
    a = args(RemoveFailedPodsArgs, {})
    default(a)
    assert a.min_pod_lifetime_seconds == 3600
    b = args(RemoveFailedPodsArgs, {"minPodLifetimeSeconds": 0})
    default(b)
    assert b.min_pod_lifetime_seconds == 0


def test_validate_returns_the_first_error_only() -> None:
    a = args(RemoveFailedPodsArgs, {
        "namespaces": {"include": ["a"], "exclude": ["b"]},
        "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Bad"}]}})
    assert validate(a) == ["only one of Include/Exclude namespaces can be set"]


def _policy(plugin_args: dict[str, Any] | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": PLUGIN}
    if plugin_args is not None:
        entry["args"] = plugin_args
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
            "profiles": [{"name": "p", "pluginConfig": [entry],
                          "plugins": {"deschedule": {"enabled": [PLUGIN]}}}]}


@pytest.mark.parametrize(("raw", "message"), [
    ({"namespaces": {"include": ["a"], "exclude": ["b"]}},
     "only one of Include/Exclude namespaces can be set"),
    ({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Exists",
                                              "values": ["x"]}]}},
     "failed to get label selectors from strategy's params: values: Invalid value: "
     '["x"]: values set must be empty for exists and does not exist'),
])
def test_policy_validation_messages(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError) as info:
        policy_from_document("policy.yaml", _policy(raw), PLUGINS)
    assert str(info.value) == f"policy.yaml: in profile p: {message}"


def test_policy_without_args_is_valid_and_defaulted() -> None:
    policy = policy_from_document("policy.yaml", _policy(None), PLUGINS)
    assert policy.profiles[0].args[PLUGIN].min_pod_lifetime_seconds == 3600


def test_negative_min_pod_lifetime_is_a_decode_error() -> None:
    with pytest.raises(InputError, match="minPodLifetimeSeconds"):
        policy_from_document("policy.yaml", _policy({"minPodLifetimeSeconds": -1}), PLUGINS)


# -- the example ---------------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / PLUGIN


def test_example_simulation() -> None:
    result = run_simulation(str(EXAMPLE / "policy.yaml"), [str(EXAMPLE / "cluster.yaml")], NOW,
                            1, False)
    evicted = [(d.namespace, d.pod, d.plugin) for d in result.evictions]
    assert evicted == [("batch", "import-28891-7xk2q", PLUGIN),
                       ("batch", "resize-5c8d9-r7t4m", PLUGIN)]
    assert result.evictions[0].reason == (
        "pod phase is Failed; age 86400s is at least minPodLifetimeSeconds 3600; "
        "reason OOMKilled")
