"""RemovePodsHavingTooManyRestarts: restart sum against podRestartThreshold, init containers,
states, terminal pods, per-node order by restarts, limits, validation
."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from builders import NOW, args, handle_for, node, pod, snapshot
from desched.errors import InputError
from desched.framework.evictor import Limits
from desched.plugins.catalog import PLUGINS
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.removepodshavingtoomanyrestarts import (
    RemovePodsHavingTooManyRestarts,
    RemovePodsHavingTooManyRestartsArgs,
    validate,
)
from desched.policy_files.loader import policy_from_document
from desched.simulate.simulation import run_simulation

PLUGIN = "RemovePodsHavingTooManyRestarts"


def cs(restarts: int, waiting: str | None = None, name: str = "main") -> dict[str, Any]:
    state: dict[str, Any] = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
    return {"name": name, "restartCount": restarts, "state": state}


def restarting(name: str, *statuses: dict[str, Any], node_name: str = "n1",
               init: list[dict[str, Any]] | None = None, **kw: Any) -> Any:
    status: dict[str, Any] = {"containerStatuses": list(statuses)}
    if init:
        status["initContainerStatuses"] = init
    return pod(name, node_name, status=status, **kw)


def run(raw: dict[str, Any], *pods: Any, limits: Limits | None = None,
        protections: dict[str, Any] | None = None) -> tuple[list[str], Any]:
    snap = snapshot(node("n1"), node("n2"), *pods)
    setup, _ = handle_for(snap)
    evictor = DefaultEvictor(args(DefaultEvictorArgs, protections or {}), setup)
    handle, executor = handle_for(snap, plugin=PLUGIN, limits=limits, filters=[evictor])
    plugin = RemovePodsHavingTooManyRestarts(args(RemovePodsHavingTooManyRestartsArgs, raw),
                                             handle)
    plugin.deschedule(snap.ready_nodes())
    return executor.evicted, handle


T3 = {"podRestartThreshold": 3}

# (id, args, the pod, evicted?)
CASES: list[tuple[str, dict[str, Any], Any, bool]] = [
    ("restarts equal to the threshold", T3, restarting("p", cs(3)), True),
    ("restarts above the threshold", T3, restarting("p", cs(30)), True),
    ("restarts below the threshold", T3, restarting("p", cs(2)), False),
    ("no container statuses", T3, pod("p"), False),
    ("restarts of all containers are summed", T3,
     restarting("p", cs(2, name="a"), cs(1, name="b")), True),
    ("init container restarts ignored by default", T3,
     restarting("p", cs(1), init=[cs(5, name="init")]), False),
    ("init container restarts with includingInitContainers",
     {**T3, "includingInitContainers": True},
     restarting("p", cs(1), init=[cs(2, name="init")]), True),
    ("states Running: running pod", {**T3, "states": ["Running"]}, restarting("p", cs(5)), True),
    ("states Running: pending pod", {**T3, "states": ["Running"]},
     restarting("p", cs(5), phase="Pending"), False),
    ("states CrashLoopBackOff: crashlooping container", {**T3, "states": ["CrashLoopBackOff"]},
     restarting("p", cs(5, waiting="CrashLoopBackOff")), True),
    ("states CrashLoopBackOff: running container", {**T3, "states": ["CrashLoopBackOff"]},
     restarting("p", cs(5)), False),
    ("states CrashLoopBackOff still needs the threshold",
     {**T3, "states": ["CrashLoopBackOff"]},
     restarting("p", cs(1, waiting="CrashLoopBackOff")), False),
    ("states: crashlooping init container ignored by default",
     {**T3, "states": ["CrashLoopBackOff"]},
     restarting("p", cs(5), init=[cs(0, waiting="CrashLoopBackOff", name="init")],
                phase="Pending"), False),
    ("states: crashlooping init container with includingInitContainers",
     {**T3, "states": ["CrashLoopBackOff"], "includingInitContainers": True},
     restarting("p", cs(5), init=[cs(0, waiting="CrashLoopBackOff", name="init")],
                phase="Pending"), True),
    ("terminal pods are listed: Failed", T3, restarting("p", cs(4), phase="Failed"), True),
    ("terminal pods are listed: Succeeded", T3, restarting("p", cs(4), phase="Succeeded"), True),
    ("states Running: a Failed pod is not running", {**T3, "states": ["Running"]},
     restarting("p", cs(4), phase="Failed"), False),
    ("namespaces include: other namespace", {**T3, "namespaces": {"include": ["dev"]}},
     restarting("p", cs(5)), False),
    ("namespaces exclude: listed namespace", {**T3, "namespaces": {"exclude": ["default"]}},
     restarting("p", cs(5)), False),
    ("labelSelector matches", {**T3, "labelSelector": {"matchLabels": {"app": "web"}}},
     restarting("p", cs(5), labels={"app": "web"}), True),
    ("labelSelector does not match", {**T3, "labelSelector": {"matchLabels": {"app": "web"}}},
     restarting("p", cs(5), labels={"app": "db"}), False),
    ("DefaultEvictor: bare pod protected", T3, restarting("p", cs(5), owner=None), False),
    ("DefaultEvictor: DaemonSet pod protected", T3,
     restarting("p", cs(5), owner=("DaemonSet", "d")), False),
]


@pytest.mark.parametrize(("raw", "subject", "evicted"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_criteria(raw: dict[str, Any], subject: Any, evicted: bool) -> None:
    names, _ = run(raw, subject)
    assert names == (["p"] if evicted else [])


def test_most_restarts_first_per_node() -> None:
    pods = [restarting("a5", cs(5)), restarting("b10", cs(10)), restarting("c7", cs(7)),
            restarting("d7", cs(7)), restarting("m20", cs(20), node_name="n2"),
            restarting("m4", cs(4), node_name="n2")]
    names, _ = run(T3, *pods)
    assert names == ["b10", "c7", "d7", "a5", "m20", "m4"]


def test_sort_counts_init_containers_when_included() -> None:
    pods = [restarting("few", cs(3)), restarting("many", cs(1), init=[cs(9, name="init")])]
    assert run({**T3, "includingInitContainers": True}, *pods)[0] == ["many", "few"]


def test_node_limit_moves_to_next_node() -> None:
    pods = [restarting("a", cs(5)), restarting("b", cs(9)), restarting("c", cs(4), node_name="n2")]
    names, handle = run(T3, *pods, limits=Limits(per_node=1))
    assert names == ["b", "c"]
    assert [d.pod for d in handle.log.decisions if d.outcome == "limited"] == ["a"]


def test_total_limit_stops() -> None:
    pods = [restarting("a", cs(5)), restarting("b", cs(9)), restarting("c", cs(4), node_name="n2")]
    names, handle = run(T3, *pods, limits=Limits(total=1))
    assert names == ["b"]
    assert [d.pod for d in handle.log.decisions if d.outcome == "limited"] == ["a"]


def test_node_fit_pre_eviction_filter() -> None:
    pods = [restarting("fits", cs(5)),
            restarting("pinned", cs(6), spec={"nodeSelector": {"kubernetes.io/hostname": "n1"}})]
    assert run(T3, *pods, protections={"nodeFit": True})[0] == ["fits"]


def test_reason() -> None:
    _, handle = run({**T3, "states": ["CrashLoopBackOff"], "includingInitContainers": True},
                    restarting("p", cs(4, waiting="CrashLoopBackOff")))
    [decision] = handle.log.evictions()
    assert decision.reason == ("containers and init containers restarted 4 times, at least the "
                               "podRestartThreshold 3; pod is in state CrashLoopBackOff")


# -- validation ----------------------------------------------------------------------------------

def test_validate() -> None:
    assert validate(args(RemovePodsHavingTooManyRestartsArgs, T3)) == []
    assert validate(args(RemovePodsHavingTooManyRestartsArgs,
                         {**T3, "states": ["Running", "CrashLoopBackOff"]})) == []


def _policy(plugin_args: dict[str, Any] | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": PLUGIN}
    if plugin_args is not None:
        entry["args"] = plugin_args
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
            "profiles": [{"name": "p", "pluginConfig": [entry],
                          "plugins": {"deschedule": {"enabled": [PLUGIN]}}}]}


@pytest.mark.parametrize(("raw", "message"), [
    (None, "invalid PodsHavingTooManyRestarts threshold"),
    ({"podRestartThreshold": 0}, "invalid PodsHavingTooManyRestarts threshold"),
    ({"podRestartThreshold": -1}, "invalid PodsHavingTooManyRestarts threshold"),
    ({**T3, "states": ["Pending"]}, "states must be one of [CrashLoopBackOff Running]"),
    ({**T3, "namespaces": {"include": ["a"], "exclude": ["b"]}},
     "only one of Include/Exclude namespaces can be set"),
    ({**T3, "labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
     "failed to get label selectors from strategy's params: values: Invalid value: "
     "null: for 'in', 'notin' operators, values set can't be empty"),
    ({"states": ["Waiting"]},
     "[invalid PodsHavingTooManyRestarts threshold, "
     "states must be one of [CrashLoopBackOff Running]]"),
])
def test_policy_validation_messages(raw: dict[str, Any] | None, message: str) -> None:
    with pytest.raises(InputError) as info:
        policy_from_document("policy.yaml", _policy(raw), PLUGINS)
    assert str(info.value) == f"policy.yaml: in profile p: {message}"


def test_policy_loads() -> None:
    policy = policy_from_document("policy.yaml", _policy({**T3, "states": ["Running"]}), PLUGINS)
    assert policy.profiles[0].args[PLUGIN] == RemovePodsHavingTooManyRestartsArgs(
        pod_restart_threshold=3, states=["Running"])


# -- the example ---------------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / PLUGIN


def test_example_simulation() -> None:
    result = run_simulation(str(EXAMPLE / "policy.yaml"), [str(EXAMPLE / "cluster.yaml")], NOW,
                            1, False)
    evicted = [(d.namespace, d.pod, d.plugin) for d in result.evictions]
    assert evicted == [("shop", "checkout-7d4f8-x2k9p", PLUGIN),
                       ("shop", "checkout-7d4f8-q8w3n", PLUGIN)]
    assert result.evictions[0].reason == (
        "containers restarted 42 times, at least the podRestartThreshold 10; "
        "pod is in state CrashLoopBackOff")
