"""The historic `strategies:` format (descheduler/v1alpha1), converted as v0.30 did
."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from desched.framework.policy import Policy
from desched.plugins.catalog import PLUGINS
from desched.plugins.defaultevictor import DefaultEvictorArgs
from desched.policy_files.errors import DecodeError, PolicyError
from desched.policy_files.loader import policy_from_document
from desched.policy_files.v1alpha1 import convert_v1alpha1

PATH = "policy.yaml"


def v1(strategies: Any, **top: Any) -> dict[str, Any]:
    return {"apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy",
            "strategies": strategies, **top}


def load(d: dict[str, Any]) -> Policy:
    return policy_from_document(PATH, d, PLUGINS)


PLT = {"enabled": True, "params": {"podLifeTime": {"maxPodLifeTimeSeconds": 86400}}}
RD = {"enabled": True}


def test_one_profile_per_enabled_strategy() -> None:
    policy = load(v1({"PodLifeTime": PLT, "RemoveDuplicates": RD}))
    assert policy.format == "v1alpha1"
    assert [p.name for p in policy.profiles] == ["strategy-PodLifeTime-profile",
                                                 "strategy-RemoveDuplicates-profile"]
    plt, rd = policy.profiles
    assert plt.enabled["deschedule"] == ["PodLifeTime"]
    assert plt.enabled["balance"] == []
    assert rd.enabled["balance"] == ["RemoveDuplicates"]
    assert rd.enabled["deschedule"] == []
    for profile in policy.profiles:
        assert profile.enabled["filter"] == ["DefaultEvictor"]
        assert profile.enabled["preevictionfilter"] == ["DefaultEvictor"]
        assert isinstance(profile.args["DefaultEvictor"], DefaultEvictorArgs)
    assert plt.args["PodLifeTime"].max_pod_life_time_seconds == 86400


def test_disabled_strategies_are_dropped_and_weight_ignored() -> None:
    policy = load(v1({"PodLifeTime": {**PLT, "weight": 7},
                      "RemoveDuplicates": {"enabled": False, "weight": 100}}))
    assert [p.name for p in policy.profiles] == ["strategy-PodLifeTime-profile"]


def test_disabled_strategy_params_are_not_validated() -> None:
    policy = load(v1({"PodLifeTime": {"enabled": False, "params": {}},
                      "RemoveDuplicates": RD}))
    assert [p.name for p in policy.profiles] == ["strategy-RemoveDuplicates-profile"]


def test_no_strategies_gives_no_profiles() -> None:
    assert load(v1({})).profiles == []
    assert load({"apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy"}).profiles == []


@pytest.mark.parametrize("enabled", [True, False])
def test_unknown_strategy_name(enabled: bool) -> None:
    with pytest.raises(PolicyError) as info:
        load(v1({"RemoveDuplicates": RD, "RemoveEverything": {"enabled": enabled}}))
    assert str(info.value) == f"{PATH}: unknown strategy name: RemoveEverything"


def test_strategies_not_a_map() -> None:
    with pytest.raises(DecodeError):
        load(v1(["PodLifeTime"]))


def test_default_evictor_from_top_level_booleans() -> None:
    policy = load(v1({"RemoveDuplicates": RD}, evictLocalStoragePods=True,
                     evictDaemonSetPods=True, evictSystemCriticalPods=True, ignorePvcPods=True,
                     evictFailedBarePods=True))
    de = policy.profiles[0].args["DefaultEvictor"]
    assert de.evict_local_storage_pods and de.evict_daemon_set_pods
    assert de.evict_system_critical_pods and de.ignore_pvc_pods and de.evict_failed_bare_pods
    assert de.node_fit is False
    assert de.priority_threshold is None


def test_default_evictor_booleans_default_false() -> None:
    de = load(v1({"RemoveDuplicates": RD})).profiles[0].args["DefaultEvictor"]
    assert de == DefaultEvictorArgs()


def test_node_fit_is_taken_from_params() -> None:
    de = load(v1({"RemoveDuplicates": {"enabled": True, "params": {"nodeFit": True}}})
              ).profiles[0].args["DefaultEvictor"]
    assert de.node_fit is True


def test_node_fit_is_forced_false_for_pod_life_time() -> None:
    strategy = {"enabled": True, "params": {"nodeFit": True,
                                            "podLifeTime": {"maxPodLifeTimeSeconds": 60}}}
    de = load(v1({"PodLifeTime": strategy})).profiles[0].args["DefaultEvictor"]
    assert de.node_fit is False


def test_threshold_priority_value() -> None:
    de = load(v1({"RemoveDuplicates": {"enabled": True, "params": {"thresholdPriority": 1000}}})
              ).profiles[0].args["DefaultEvictor"]
    assert de.priority_threshold is not None
    assert de.priority_threshold.value == 1000
    assert de.priority_threshold.name == ""


def test_threshold_priority_class_name() -> None:
    params = {"thresholdPriorityClassName": "high"}
    de = load(v1({"RemoveDuplicates": {"enabled": True, "params": params}})
              ).profiles[0].args["DefaultEvictor"]
    assert de.priority_threshold is not None
    assert de.priority_threshold.name == "high"
    assert de.priority_threshold.value is None


def test_threshold_priority_both_set() -> None:
    params = {"thresholdPriority": 10, "thresholdPriorityClassName": "high"}
    with pytest.raises(PolicyError) as info:
        load(v1({"RemoveDuplicates": {"enabled": True, "params": params}}))
    assert str(info.value) == (
        f"{PATH}: priority threshold misconfigured for plugin RemoveDuplicates")


def test_pod_life_time_args_mapping() -> None:
    params = {
        "namespaces": {"exclude": ["kube-system"]},
        "labelSelector": {"matchLabels": {"app": "x"}},
        "podLifeTime": {"maxPodLifeTimeSeconds": 5, "podStatusPhases": ["Pending"],
                        "states": ["Running"]},
    }
    args = load(v1({"PodLifeTime": {"enabled": True, "params": params}})
                ).profiles[0].args["PodLifeTime"]
    assert args.max_pod_life_time_seconds == 5
    assert args.states == ["Pending", "Running"]  # podStatusPhases, then states
    assert args.namespaces is not None and args.namespaces.exclude == ["kube-system"]
    assert args.label_selector is not None


def test_pod_life_time_states_only() -> None:
    strategy = {"enabled": True, "params": {"podLifeTime": {"podStatusPhases": ["Pending"]}}}
    args = load(v1({"PodLifeTime": strategy})).profiles[0].args["PodLifeTime"]
    assert args.states == ["Pending"]
    assert args.max_pod_life_time_seconds is None


def test_remove_duplicates_args_mapping() -> None:
    params = {"namespaces": {"include": ["a"]},
              "removeDuplicates": {"excludeOwnerKinds": ["ReplicaSet"]},
              # RemoveDuplicates never took a labelSelector: it is not copied.
              "labelSelector": {"matchLabels": {"app": "x"}}}
    args = load(v1({"RemoveDuplicates": {"enabled": True, "params": params}})
                ).profiles[0].args["RemoveDuplicates"]
    assert args.exclude_owner_kinds == ["ReplicaSet"]
    assert args.namespaces is not None and args.namespaces.include == ["a"]


def test_converted_args_are_validated() -> None:
    params = {"namespaces": {"include": ["a"], "exclude": ["b"]}}
    with pytest.raises(PolicyError) as info:
        load(v1({"RemoveDuplicates": {"enabled": True, "params": params}}))
    assert str(info.value) == (
        f'{PATH}: strategy "RemoveDuplicates" param validation failed: only one of '
        f"Include/Exclude namespaces can be set")


def test_pod_life_time_without_criterion_fails_validation() -> None:
    with pytest.raises(PolicyError) as info:
        load(v1({"PodLifeTime": {"enabled": True}}))
    assert str(info.value) == (
        f'{PATH}: strategy "PodLifeTime" param validation failed: at least one filtering '
        f"criterion must be specified (maxPodLifeTimeSeconds, states, conditions, or exitCodes)")


DECODE_PREFIX = f'failed decoding descheduler\'s policy config "{PATH}": '


@pytest.mark.parametrize(("d", "where"), [
    (v1({"PodLifeTime": {"enabled": True, "params": {
        "podLifeTime": {"maxPodLifeTimeSeconds": "old"}}}}),
     "$.strategies.PodLifeTime.params.podLifeTime.maxPodLifeTimeSeconds"),
    (v1({"RemoveDuplicates": {"enabled": "yes"}}), "$.strategies.RemoveDuplicates.enabled"),
    (v1({"RemoveDuplicates": True}), "$.strategies.RemoveDuplicates"),
    (v1({"RemoveDuplicates": {"enabled": True, "params": 5}}),
     "$.strategies.RemoveDuplicates.params"),
    (v1({"PodLifeTime": {"enabled": True, "params": {"podLifeTime": {
        "podStatusPhases": "Pending"}}}}),
     "$.strategies.PodLifeTime.params.podLifeTime.podStatusPhases"),
    (v1({"RemoveDuplicates": {"enabled": True, "params": {"nodeFit": "true"}}}),
     "$.strategies.RemoveDuplicates.params.nodeFit"),
    (v1({}, evictLocalStoragePods="false"), "$.evictLocalStoragePods"),
    (v1({}, maxNoOfPodsToEvictPerNode="3"), "$.maxNoOfPodsToEvictPerNode"),
])
def test_wrongly_typed_values_are_decode_errors_not_coerced(d: dict[str, Any],
                                                           where: str) -> None:
    """A string "false" must never turn into True, a string into a list of characters, etc."""
    with pytest.raises(DecodeError) as info:
        load(d)
    message = str(info.value)
    assert message.startswith(DECODE_PREFIX)
    assert f"- at `{where}`" in message
    assert "\n" not in message


def test_null_strategy_is_disabled() -> None:
    assert load(v1({"RemoveDuplicates": None})).profiles == []


def test_unknown_keys_are_ignored() -> None:
    policy = load(v1({"RemoveDuplicates": {"enabled": True, "extra": 1,
                                           "params": {"somethingElse": True}}}, unknownTop=1))
    assert [p.name for p in policy.profiles] == ["strategy-RemoveDuplicates-profile"]


def test_top_level_fields_copied() -> None:
    policy = load(v1({"RemoveDuplicates": RD}, nodeSelector="role=worker",
                     maxNoOfPodsToEvictPerNode=4, maxNoOfPodsToEvictPerNamespace=2,
                     # v1alpha1 had no total limit
                     maxNoOfPodsToEvictTotal=1))
    assert policy.limits.per_node == 4
    assert policy.limits.per_namespace == 2
    assert policy.limits.total is None
    assert policy.node_selector is not None
    assert policy.node_selector({"role": "worker"}) and not policy.node_selector({"role": "x"})


def test_convert_produces_the_v1alpha2_document() -> None:
    out = convert_v1alpha1(PATH, v1({"PodLifeTime": PLT}, evictDaemonSetPods=True), PLUGINS)
    assert out == {"profiles": [{
        "name": "strategy-PodLifeTime-profile",
        "pluginConfig": [
            {"name": "DefaultEvictor", "args": {
                "evictLocalStoragePods": False, "evictDaemonSetPods": True,
                "evictSystemCriticalPods": False, "ignorePvcPods": False,
                "evictFailedBarePods": False, "nodeFit": False}},
            {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 86400}},
        ],
        "plugins": {"filter": {"enabled": ["DefaultEvictor"]},
                    "preevictionfilter": {"enabled": ["DefaultEvictor"]},
                    "deschedule": {"enabled": ["PodLifeTime"]}},
    }]}


def test_v1alpha1_from_a_file(write_policy: Callable[..., str]) -> None:
    from desched.policy_files.loader import load_policy

    path = write_policy("""
        apiVersion: descheduler/v1alpha1
        kind: DeschedulerPolicy
        evictLocalStoragePods: true
        strategies:
          RemoveDuplicates:
            enabled: true
          PodLifeTime:
            enabled: true
            params:
              podLifeTime:
                maxPodLifeTimeSeconds: 3600
        """)
    policy = load_policy(path, PLUGINS)
    assert policy.format == "v1alpha1"
    assert {p.name for p in policy.profiles} == {"strategy-RemoveDuplicates-profile",
                                                 "strategy-PodLifeTime-profile"}
    assert all(p.args["DefaultEvictor"].evict_local_storage_pods for p in policy.profiles)


def test_v1alpha1_in_a_configmap() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "descheduler"},
          "data": {"policy.yaml": "apiVersion: descheduler/v1alpha1\n"
                                  "kind: DeschedulerPolicy\n"
                                  "strategies:\n  RemoveDuplicates:\n    enabled: true\n"}}
    policy = load(cm)
    assert policy.format == "v1alpha1"
    assert [p.name for p in policy.profiles] == ["strategy-RemoveDuplicates-profile"]
