"""Upstream `DeschedulerPolicy` (descheduler/v1alpha2) loading: the validation error catalogue
for DefaultEvictor, PodLifeTime and RemoveDuplicates, defaults
and the load order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from desched.errors import InputError
from desched.framework.policy import Policy
from desched.plugins.catalog import PLUGINS
from desched.plugins.defaultevictor import DefaultEvictorArgs, effective_protections
from desched.plugins.podlifetime import ALLOWED_STATES, PodLifeTimeArgs
from desched.plugins.removeduplicates import RemoveDuplicatesArgs
from desched.policy_files.errors import DecodeError, PolicyError
from desched.policy_files.loader import load_policy, policy_from_document

PATH = "policy.yaml"
DECODE_PREFIX = f'failed decoding descheduler\'s policy config "{PATH}": '

_EP = {"PodLifeTime": "deschedule", "RemoveDuplicates": "balance"}


def doc(*configs: dict[str, Any], profile: str = "p", plugins: dict[str, Any] | None = None,
        **top: Any) -> dict[str, Any]:
    """A v1alpha2 policy with one profile holding `configs`; plugins other than DefaultEvictor
    are enabled at their extension point unless `plugins` is given."""
    if plugins is None:
        plugins = {}
        for pc in configs:
            ep = _EP.get(pc["name"])
            if ep:
                plugins.setdefault(ep, {"enabled": []})["enabled"].append(pc["name"])
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
            "profiles": [{"name": profile, "pluginConfig": list(configs), "plugins": plugins}],
            **top}


def pc(name: str, args: Any = None, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if args is not None or kw:
        out["args"] = {**(args or {}), **kw}
    return out


def load(d: dict[str, Any]) -> Policy:
    return policy_from_document(PATH, d, PLUGINS)


def policy_error(d: dict[str, Any]) -> str:
    with pytest.raises(PolicyError) as info:
        load(d)
    return str(info.value)


def decode_error(d: dict[str, Any]) -> str:
    with pytest.raises(DecodeError) as info:
        load(d)
    return str(info.value)


def in_profile(message: str, profile: str = "p") -> str:
    return f"{PATH}: in profile {profile}: {message}"


PLT_OK = {"maxPodLifeTimeSeconds": 60}

# ---------------------------------------------------------------------------------------------
# DefaultEvictor
# ---------------------------------------------------------------------------------------------


def test_de_priority_threshold_both_fields() -> None:
    d = doc(pc("DefaultEvictor", priorityThreshold={"value": 100, "name": "high"}))
    assert policy_error(d) == in_profile(
        "priority threshold misconfigured, only one of priorityThreshold fields can be set")


def test_de_priority_threshold_one_field_is_fine() -> None:
    for pt in ({"value": 100}, {"name": "high"}):
        policy = load(doc(pc("DefaultEvictor", priorityThreshold=pt)))
        assert policy.profiles[0].args["DefaultEvictor"].priority_threshold is not None


def test_de_no_eviction_policy_unknown() -> None:
    d = doc(pc("DefaultEvictor", noEvictionPolicy="Sometimes"))
    assert policy_error(d) == in_profile(
        'noEvictionPolicy accepts only ["Preferred" "Mandatory"] values')


@pytest.mark.parametrize("value", ["", "Preferred", "Mandatory"])
def test_de_no_eviction_policy_allowed(value: str) -> None:
    args = load(doc(pc("DefaultEvictor", noEvictionPolicy=value))).profiles[0].args
    assert args["DefaultEvictor"].no_eviction_policy == value


@pytest.mark.parametrize("deprecated", ["evictLocalStoragePods", "evictDaemonSetPods",
                                        "evictSystemCriticalPods", "ignorePvcPods",
                                        "evictFailedBarePods", "ignorePodsWithoutPDB"])
@pytest.mark.parametrize("protections", [{"extraEnabled": ["PodsWithPVC"]},
                                         {"defaultDisabled": ["DaemonSetPods"]}])
def test_de_deprecated_fields_with_pod_protections(deprecated: str,
                                                   protections: dict[str, Any]) -> None:
    d = doc(pc("DefaultEvictor", {deprecated: True, "podProtections": protections}))
    assert policy_error(d) == in_profile(
        "cannot use Deprecated fields alongside PodProtections.ExtraEnabled or "
        "PodProtections.DefaultDisabled")


def test_de_deprecated_false_with_pod_protections_is_fine() -> None:
    load(doc(pc("DefaultEvictor", evictLocalStoragePods=False,
                podProtections={"extraEnabled": ["PodsWithPVC"]})))


def test_de_unknown_extra_enabled() -> None:
    d = doc(pc("DefaultEvictor", podProtections={"extraEnabled": ["PodsWithLocalStorage"]}))
    assert policy_error(d) == in_profile(
        'invalid pod protection policy in ExtraEnabled: "PodsWithLocalStorage". Valid options '
        "are: [PodsWithPVC PodsWithoutPDB PodsWithResourceClaims]")


def test_de_unknown_default_disabled() -> None:
    d = doc(pc("DefaultEvictor", podProtections={"defaultDisabled": ["X"]}))
    assert policy_error(d) == in_profile(
        'invalid pod protection policy in DefaultDisabled: "X". Valid options are: '
        "[PodsWithLocalStorage SystemCriticalPods FailedBarePods DaemonSetPods]")


def test_de_duplicate_default_disabled() -> None:
    d = doc(pc("DefaultEvictor",
               podProtections={"defaultDisabled": ["DaemonSetPods", "DaemonSetPods"]}))
    assert policy_error(d) == in_profile(
        "PodProtections.DefaultDisabled contains duplicate entries")


def test_de_duplicate_extra_enabled() -> None:
    d = doc(pc("DefaultEvictor",
               podProtections={"extraEnabled": ["PodsWithoutPDB", "PodsWithoutPDB"]}))
    assert policy_error(d) == in_profile("PodProtections.ExtraEnabled contains duplicate entries")


def test_de_protected_storage_class_without_name() -> None:
    d = doc(pc("DefaultEvictor", podProtections={
        "extraEnabled": ["PodsWithPVC"],
        "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "ok"}, {"name": ""}]}},
    }))
    assert policy_error(d) == in_profile(
        "PodProtections.Config.PodsWithPVC.ProtectedStorageClasses[1] name cannot be empty")


def test_de_storage_class_without_name_ignored_when_pvc_protection_off() -> None:
    load(doc(pc("DefaultEvictor", podProtections={
        "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": ""}]}}})))


def test_de_min_replicas_one_is_not_an_error() -> None:
    args = load(doc(pc("DefaultEvictor", minReplicas=1))).profiles[0].args["DefaultEvictor"]
    assert args.min_replicas == 1


def test_de_several_errors_of_one_plugin_aggregate_inside_the_profile_prefix() -> None:
    d = doc(pc("DefaultEvictor", noEvictionPolicy="x",
               priorityThreshold={"value": 1, "name": "n"}))
    assert policy_error(d) == in_profile(
        "[priority threshold misconfigured, only one of priorityThreshold fields can be set, "
        'noEvictionPolicy accepts only ["Preferred" "Mandatory"] values]')


# ---------------------------------------------------------------------------------------------
# RemoveDuplicates
# ---------------------------------------------------------------------------------------------


def test_rd_include_and_exclude() -> None:
    d = doc(pc("RemoveDuplicates", namespaces={"include": ["a"], "exclude": ["b"]}))
    assert policy_error(d) == in_profile("only one of Include/Exclude namespaces can be set")


def test_rd_without_args_is_valid() -> None:
    policy = load(doc(pc("RemoveDuplicates")))
    assert policy.profiles[0].args["RemoveDuplicates"] == RemoveDuplicatesArgs()
    assert policy.profiles[0].enabled["balance"] == ["RemoveDuplicates"]


def test_rd_include_only_or_exclude_only_is_valid() -> None:
    load(doc(pc("RemoveDuplicates", namespaces={"include": ["a"]})))
    load(doc(pc("RemoveDuplicates", namespaces={"exclude": ["a"]}, excludeOwnerKinds=["Job"])))


# ---------------------------------------------------------------------------------------------
# PodLifeTime
# ---------------------------------------------------------------------------------------------


def test_plt_namespaces_include_and_exclude() -> None:
    d = doc(pc("PodLifeTime", PLT_OK, namespaces={"include": ["a"], "exclude": ["b"]}))
    assert policy_error(d) == in_profile("only one of Include/Exclude namespaces can be set")


def test_plt_bad_label_selector() -> None:
    d = doc(pc("PodLifeTime", PLT_OK, labelSelector={
        "matchExpressions": [{"key": "app", "operator": "Bogus", "values": ["x"]}]}))
    assert policy_error(d).startswith(in_profile(
        "failed to get label selectors from strategy's params: "))


def test_plt_owner_kinds_include_and_exclude() -> None:
    d = doc(pc("PodLifeTime", PLT_OK, ownerKinds={"include": ["Job"], "exclude": ["DaemonSet"]}))
    assert policy_error(d) == in_profile("only one of Include/Exclude ownerKinds can be set")


def test_plt_unknown_state() -> None:
    d = doc(pc("PodLifeTime", states=["Running", "Sleeping"]))
    expected = "states must be one of [" + " ".join(sorted(ALLOWED_STATES)) + "]"
    assert policy_error(d) == in_profile(expected)
    # The list is sorted, and contains phases, pod reasons and container reasons.
    assert "CrashLoopBackOff" in expected and "NodeLost" in expected and "OOMKilled" in expected


def test_plt_empty_condition() -> None:
    d = doc(pc("PodLifeTime", conditions=[{"type": "Ready"}, {}]))
    assert policy_error(d) == in_profile(
        "conditions[1]: at least one of type, status, reason, or "
        "minTimeSinceLastTransitionSeconds must be set")


@pytest.mark.parametrize("cond", [{"type": "Ready"}, {"status": "False"}, {"reason": "x"},
                                  {"minTimeSinceLastTransitionSeconds": 0}])
def test_plt_condition_with_one_field_is_valid(cond: dict[str, Any]) -> None:
    load(doc(pc("PodLifeTime", conditions=[cond])))


def test_plt_no_criterion() -> None:
    d = doc(pc("PodLifeTime", namespaces={"exclude": ["kube-system"]}))
    assert policy_error(d) == in_profile(
        "at least one filtering criterion must be specified (maxPodLifeTimeSeconds, states, "
        "conditions, or exitCodes)")


def test_plt_without_args_fails_validation_before_defaulting() -> None:
    """Validating before defaulting makes a bare PodLifeTime pluginConfig an error."""
    assert policy_error(doc(pc("PodLifeTime"))) == in_profile(
        "at least one filtering criterion must be specified (maxPodLifeTimeSeconds, states, "
        "conditions, or exitCodes)")


@pytest.mark.parametrize("args", [{"maxPodLifeTimeSeconds": 0}, {"states": ["Pending"]},
                                  {"conditions": [{"type": "Ready", "status": "False"}]},
                                  {"exitCodes": [137]}])
def test_plt_each_criterion_alone_is_enough(args: dict[str, Any]) -> None:
    load(doc(pc("PodLifeTime", args)))


# ---------------------------------------------------------------------------------------------
# Defaults
# ---------------------------------------------------------------------------------------------


def test_defaults_are_no_ops_for_the_three_plugins() -> None:
    policy = load(doc(pc("DefaultEvictor"), pc("RemoveDuplicates"),
                      pc("PodLifeTime", maxPodLifeTimeSeconds=10)))
    args = policy.profiles[0].args
    assert args["DefaultEvictor"] == DefaultEvictorArgs()
    assert args["RemoveDuplicates"] == RemoveDuplicatesArgs()
    assert args["PodLifeTime"] == PodLifeTimeArgs(max_pod_life_time_seconds=10)


def test_default_evictor_zero_value_is_the_legacy_path_with_default_protections() -> None:
    args = load(doc(pc("RemoveDuplicates"))).profiles[0].args["DefaultEvictor"]
    assert not (args.evict_local_storage_pods or args.evict_daemon_set_pods
                or args.evict_system_critical_pods or args.ignore_pvc_pods
                or args.evict_failed_bare_pods or args.ignore_pods_without_pdb or args.node_fit)
    assert args.priority_threshold is None  # resolved to 2000000000 when the plugin is built
    assert effective_protections(args) == {"PodsWithLocalStorage", "SystemCriticalPods",
                                           "FailedBarePods", "DaemonSetPods"}


def test_top_level_defaults() -> None:
    policy = load(doc(pc("RemoveDuplicates")))
    assert policy.format == "v1alpha2"
    assert policy.limits.per_node is None
    assert policy.limits.per_namespace is None
    assert policy.limits.total is None
    assert policy.node_selector is None
    assert policy.grace_period_seconds is None
    assert policy.eviction_failure_event_notification is False
    assert policy.metrics_collector_enabled is False
    assert policy.metrics_providers == []


def test_top_level_fields_are_read() -> None:
    policy = load(doc(pc("RemoveDuplicates"), nodeSelector="zone in (a,b)",
                      maxNoOfPodsToEvictPerNode=3, maxNoOfPodsToEvictPerNamespace=2,
                      maxNoOfPodsToEvictTotal=0, gracePeriodSeconds=5,
                      evictionFailureEventNotification=True))
    assert (policy.limits.per_node, policy.limits.per_namespace, policy.limits.total) == (3, 2, 0)
    assert policy.node_selector is not None
    assert policy.node_selector({"zone": "a"}) and not policy.node_selector({"zone": "c"})
    assert policy.node_selector_text == "zone in (a,b)"
    assert policy.grace_period_seconds == 5
    assert policy.eviction_failure_event_notification is True


def test_negative_limit_is_a_decode_error() -> None:
    assert decode_error(doc(pc("RemoveDuplicates"), maxNoOfPodsToEvictPerNode=-1)) == (
        DECODE_PREFIX + "json: cannot unmarshal number -1 into Go struct field "
        "DeschedulerPolicy.maxNoOfPodsToEvictPerNode of type uint")


# ---------------------------------------------------------------------------------------------
# Load order
# ---------------------------------------------------------------------------------------------


def test_missing_file(tmp_path: Any) -> None:
    path = str(tmp_path / "nope.yaml")
    with pytest.raises(InputError) as info:
        load_policy(path, PLUGINS)
    assert str(info.value).startswith(f'failed to read policy config file "{path}": ')


def test_yaml_and_json_files_both_load(write_policy: Callable[..., str]) -> None:
    yaml_path = write_policy("""
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerPolicy
        profiles:
        - name: p
          pluginConfig: [{name: RemoveDuplicates}]
          plugins: {balance: {enabled: [RemoveDuplicates]}}
        """)
    json_path = write_policy(
        '{"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": '
        '[{"name": "p", "pluginConfig": [{"name": "RemoveDuplicates"}], '
        '"plugins": {"balance": {"enabled": ["RemoveDuplicates"]}}}]}', name="policy.json")
    a, b = load_policy(yaml_path, PLUGINS), load_policy(json_path, PLUGINS)
    assert a.profiles[0].enabled == b.profiles[0].enabled
    assert a.profiles[0].enabled["balance"] == ["RemoveDuplicates"]


def test_malformed_yaml_names_the_file(write_policy: Callable[..., str]) -> None:
    path = write_policy("apiVersion: descheduler/v1alpha2\nprofiles: [\n")
    with pytest.raises(InputError) as info:
        load_policy(path, PLUGINS)
    assert str(info.value).startswith(f"{path}: invalid YAML")


@pytest.mark.parametrize(("api_version", "kind"), [
    ("descheduler/v1alpha2", "Foo"),
    ("descheduler/v1beta1", "DeschedulerPolicy"),
    ("v1", "DeschedulerPolicy"),
])
def test_unknown_kind_or_version(api_version: str, kind: str) -> None:
    message = decode_error({"apiVersion": api_version, "kind": kind})
    assert message.startswith(
        DECODE_PREFIX + f'no kind "{kind}" is registered for version "{api_version}"')


@pytest.mark.parametrize("d", [{"kind": "DeschedulerPolicy"},
                               {"apiVersion": "descheduler/v1alpha2"}, {}])
def test_missing_kind_or_version(d: dict[str, Any]) -> None:
    assert decode_error(d).startswith(
        DECODE_PREFIX + "Object 'Kind' is missing or 'apiVersion' is missing")


def test_top_level_decoding_is_lenient() -> None:
    """Unknown top-level and profile keys are ignored silently (a leftover `strategies:`, a
    typo, `tracing:`)."""
    d = doc(pc("RemoveDuplicates"), strategies={"PodLifeTime": {"enabled": True}},
            maxNoOfPodsToEvictPerNod=1, tracing={"collectorEndpoint": "x"})
    d["profiles"][0]["unknownProfileKey"] = 1
    policy = load(d)
    assert policy.limits.per_node is None
    assert [p.name for p in policy.profiles] == ["p"]


def test_top_level_key_matching_is_case_sensitive() -> None:
    d = doc(pc("RemoveDuplicates"), MaxNoOfPodsToEvictPerNode=1)
    d["Profiles"] = d.pop("profiles")
    policy = load(d)
    assert policy.profiles == []
    assert policy.limits.per_node is None


def test_wrong_top_level_type_is_a_decode_error() -> None:
    assert decode_error(doc(pc("RemoveDuplicates"), maxNoOfPodsToEvictPerNode="many")).startswith(
        DECODE_PREFIX)


def test_args_decoding_is_strict_unknown_field() -> None:
    d = doc(pc("PodLifeTime", PLT_OK, x=1))
    assert decode_error(d) == DECODE_PREFIX + 'strict decoding error: unknown field "x"'


def test_args_decoding_is_strict_nested_unknown_field() -> None:
    d = doc(pc("RemoveDuplicates", namespaces={"exclude": ["a"], "other": ["b"]}))
    assert decode_error(d) == (
        DECODE_PREFIX + 'strict decoding error: unknown field "namespaces.other"')


def test_args_decoding_is_case_sensitive() -> None:
    d = doc(pc("PodLifeTime", MaxPodLifeTimeSeconds=5))
    assert decode_error(d) == (
        DECODE_PREFIX + 'strict decoding error: unknown field "MaxPodLifeTimeSeconds" '
                        '(did you mean "maxPodLifeTimeSeconds"?)')


def test_args_of_the_wrong_type_are_a_decode_error() -> None:
    message = decode_error(doc(pc("PodLifeTime", maxPodLifeTimeSeconds="abc")))
    assert message.startswith(DECODE_PREFIX)
    assert "maxPodLifeTimeSeconds" in message


def test_args_api_version_and_kind_are_accepted() -> None:
    policy = load(doc(pc("PodLifeTime", PLT_OK, apiVersion="descheduler/v1alpha2",
                         kind="PodLifeTimeArgs")))
    assert policy.profiles[0].args["PodLifeTime"].max_pod_life_time_seconds == 60


def test_null_args_are_the_zero_value() -> None:
    d = doc({"name": "RemoveDuplicates", "args": None})
    assert load(d).profiles[0].args["RemoveDuplicates"] == RemoveDuplicatesArgs()


def test_decode_errors_come_before_validation_errors() -> None:
    d = doc(pc("RemoveDuplicates", namespaces={"include": ["a"], "exclude": ["b"]}),
            pc("PodLifeTime", PLT_OK, bogus=True))
    assert decode_error(d) == DECODE_PREFIX + 'strict decoding error: unknown field "bogus"'


def test_plugin_config_not_registered() -> None:
    d = doc(pc("NoSuchPlugin", {"a": 1}), pc("RemoveDuplicates"))
    assert policy_error(d) == in_profile("plugin NoSuchPlugin in pluginConfig not registered")


def test_several_errors_aggregate_as_a_bracketed_list() -> None:
    d = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [
        {"name": "a", "pluginConfig": [
            pc("RemoveDuplicates", namespaces={"include": ["x"], "exclude": ["y"]}),
            pc("Nope")]},
        {"name": "b", "pluginConfig": [pc("PodLifeTime")]},
    ]}
    with pytest.raises(PolicyError) as info:
        load(d)
    assert info.value.messages == [
        "in profile a: only one of Include/Exclude namespaces can be set",
        "in profile a: plugin Nope in pluginConfig not registered",
        "in profile b: at least one filtering criterion must be specified "
        "(maxPodLifeTimeSeconds, states, conditions, or exitCodes)",
    ]
    assert str(info.value) == PATH + ": [" + ", ".join(info.value.messages) + "]"


def test_single_error_prints_bare() -> None:
    with pytest.raises(PolicyError) as info:
        load(doc(pc("Nope")))
    assert str(info.value) == in_profile("plugin Nope in pluginConfig not registered")
    assert "[" not in str(info.value)


def test_every_plugin_config_entry_is_validated_even_a_repeated_one() -> None:
    d = doc(pc("PodLifeTime", PLT_OK), pc("PodLifeTime", states=["Nope"]))
    assert policy_error(d).startswith(in_profile("states must be one of ["))


def test_first_plugin_config_of_a_name_wins() -> None:
    policy = load(doc(pc("PodLifeTime", maxPodLifeTimeSeconds=10),
                      pc("PodLifeTime", maxPodLifeTimeSeconds=20),
                      pc("DefaultEvictor", nodeFit=True), pc("DefaultEvictor", nodeFit=False),
                      plugins={"deschedule": {"enabled": ["PodLifeTime"]}}))
    args = policy.profiles[0].args
    assert args["PodLifeTime"].max_pod_life_time_seconds == 10
    assert args["DefaultEvictor"].node_fit is True


def test_default_evictor_injected_into_filter_and_preevictionfilter() -> None:
    profile = load(doc(pc("RemoveDuplicates"))).profiles[0]
    assert profile.enabled["filter"] == ["DefaultEvictor"]
    assert profile.enabled["preevictionfilter"] == ["DefaultEvictor"]
    assert profile.enabled["deschedule"] == []
    assert profile.enabled["balance"] == ["RemoveDuplicates"]
    assert isinstance(profile.args["DefaultEvictor"], DefaultEvictorArgs)


def test_default_evictor_injected_into_an_empty_profile() -> None:
    profile = load({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
                    "profiles": [{"name": "empty"}]}).profiles[0]
    assert profile.enabled["filter"] == ["DefaultEvictor"]
    assert profile.enabled["preevictionfilter"] == ["DefaultEvictor"]
    assert profile.args == {"DefaultEvictor": DefaultEvictorArgs()}


def test_default_evictor_not_duplicated_when_listed() -> None:
    profile = load(doc(pc("DefaultEvictor", nodeFit=True), pc("RemoveDuplicates"), plugins={
        "balance": {"enabled": ["RemoveDuplicates"]},
        "filter": {"enabled": ["DefaultEvictor"]},
        "preevictionfilter": {"enabled": ["DefaultEvictor"]},
    })).profiles[0]
    assert profile.enabled["filter"] == ["DefaultEvictor"]
    assert profile.enabled["preevictionfilter"] == ["DefaultEvictor"]
    assert profile.args["DefaultEvictor"].node_fit is True


def test_disabled_lists_are_ignored() -> None:
    profile = load(doc(pc("RemoveDuplicates"), plugins={
        "balance": {"enabled": ["RemoveDuplicates"], "disabled": ["RemoveDuplicates"]},
        "filter": {"disabled": ["DefaultEvictor", "*"]},
    })).profiles[0]
    assert profile.enabled["balance"] == ["RemoveDuplicates"]
    assert profile.enabled["filter"] == ["DefaultEvictor"]


def test_enabled_order_is_kept() -> None:
    profile = load(doc(pc("PodLifeTime", PLT_OK), pc("RemoveDuplicates"), plugins={
        "deschedule": {"enabled": ["PodLifeTime"]},
        "balance": {"enabled": ["RemoveDuplicates"]},
    })).profiles[0]
    assert profile.enabled["deschedule"] == ["PodLifeTime"]
    assert profile.enabled["balance"] == ["RemoveDuplicates"]


@pytest.mark.parametrize(("ep", "key"), [("deschedule", "deschedule"), ("balance", "balance"),
                                         ("filter", "filter"),
                                         ("preevictionfilter", "preEvictionFilter")])
def test_non_existing_plugin_in_an_extension_point(ep: str, key: str) -> None:
    d = doc(pc("RemoveDuplicates"), plugins={ep: {"enabled": ["NoSuchPlugin", "Other"]}})
    assert policy_error(d) == (
        f'{PATH}: unable to create "p" profile: profile "p" configures {key} extension point '
        f"of non-existing plugins: [NoSuchPlugin Other]")


def test_plugin_at_an_extension_point_it_does_not_implement() -> None:
    d = doc(pc("PodLifeTime", PLT_OK), plugins={"balance": {"enabled": ["PodLifeTime"]}})
    assert policy_error(d) == (
        f'{PATH}: unable to create "p" profile: profile "p" configures balance extension point '
        f"of non-existing plugins: [PodLifeTime]; PodLifeTime is a deschedule plugin: enable it "
        f"under plugins.deschedule")


def test_enabled_plugin_without_plugin_config() -> None:
    d = doc(plugins={"deschedule": {"enabled": ["PodLifeTime"]}})
    assert policy_error(d) == (
        f'{PATH}: unable to create "p" profile: unable to build PodLifeTime plugin: '
        f'unable to find "PodLifeTime" plugin config; add "- name: PodLifeTime" with its args '
        f'to the pluginConfig of profile "p" (without args: at least one filtering criterion '
        f'must be specified (maxPodLifeTimeSeconds, states, conditions, or exitCodes))')


def test_plugin_config_without_enabling_is_validated_but_not_run() -> None:
    profile = load(doc(pc("PodLifeTime", PLT_OK), plugins={})).profiles[0]
    assert profile.enabled["deschedule"] == []
    assert "PodLifeTime" in profile.args


def test_profile_names_are_not_checked_for_uniqueness() -> None:
    d = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [
        {"name": "same", "pluginConfig": [pc("RemoveDuplicates")],
         "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}}},
        {"name": "same", "pluginConfig": [pc("PodLifeTime", PLT_OK)],
         "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}}},
    ]}
    assert [p.name for p in load(d).profiles] == ["same", "same"]


def test_lower_case_preevictionfilter_key() -> None:
    profile = load(doc(pc("RemoveDuplicates"), plugins={
        "balance": {"enabled": ["RemoveDuplicates"]},
        "preevictionfilter": {"enabled": ["DefaultEvictor"]}})).profiles[0]
    assert profile.enabled["preevictionfilter"] == ["DefaultEvictor"]


# ---------------------------------------------------------------------------------------------
# metricsProviders
# ---------------------------------------------------------------------------------------------


def _with_providers(*providers: dict[str, Any], **top: Any) -> dict[str, Any]:
    return doc(pc("RemoveDuplicates"), metricsProviders=list(providers), **top)


def test_metrics_provider_repeated() -> None:
    d = _with_providers({"source": "KubernetesMetrics"}, {"source": "KubernetesMetrics"})
    assert policy_error(d) == (
        f'{PATH}: metric provider "KubernetesMetrics" is already configured, each source can be '
        f"configured only once")


def test_metrics_provider_with_collector() -> None:
    d = _with_providers({"source": "KubernetesMetrics"}, metricsCollector={"enabled": True})
    assert policy_error(d) == (
        f"{PATH}: it is not allowed to combine metrics provider when metrics collector is "
        f"enabled")


def test_metrics_provider_repeated_with_collector_reports_each_problem_once() -> None:
    d = _with_providers({"source": "KubernetesMetrics"}, {"source": "KubernetesMetrics"},
                        metricsCollector={"enabled": True})
    with pytest.raises(PolicyError) as info:
        load(d)
    assert info.value.messages == [
        'metric provider "KubernetesMetrics" is already configured, each source can be '
        "configured only once",
        "it is not allowed to combine metrics provider when metrics collector is enabled",
    ]


def test_metrics_collector_alone_is_fine() -> None:
    assert load(doc(pc("RemoveDuplicates"), metricsCollector={"enabled": True})
                ).metrics_collector_enabled


def test_prometheus_without_config() -> None:
    assert policy_error(_with_providers({"source": "Prometheus"})) == (
        f"{PATH}: prometheus configuration is required when prometheus source is enabled")


def test_prometheus_without_url() -> None:
    d = _with_providers({"source": "Prometheus", "prometheus": {"url": ""}})
    assert policy_error(d) == f"{PATH}: prometheus URL is required when prometheus is enabled"


@pytest.mark.parametrize(("url", "detail"), [
    # upstream's own test case (Go's url.Parse rejects it; Python's urlparse would not)
    ("http://example.com:-80", 'parse "http://example.com:-80": invalid port ":-80" after host'),
    ("http://[::1", "parse \"http://[::1\": missing ']' in host"),
    ("://prom", 'parse "://prom": missing protocol scheme'),
])
def test_prometheus_bad_url(url: str, detail: str) -> None:
    d = _with_providers({"source": "Prometheus", "prometheus": {"url": url}})
    assert policy_error(d) == f"{PATH}: error parsing prometheus URL: {detail}"


@pytest.mark.parametrize("url", ["https://prom:9090", "http://[::1]:9090/api", "http://prom",
                                 "http://user:pw@prom:9090/x?q=a:b#c:d"])
def test_prometheus_good_url(url: str) -> None:
    load(_with_providers({"source": "Prometheus", "prometheus": {"url": url}}))


def test_prometheus_auth_token_without_secret() -> None:
    d = _with_providers({"source": "Prometheus",
                         "prometheus": {"url": "https://prom:9090", "authToken": {}}})
    assert policy_error(d) == (
        f"{PATH}: prometheus authToken secret is expected to be set when authToken field is")


@pytest.mark.parametrize("ref", [{"name": "s"}, {"namespace": "ns"}])
def test_prometheus_auth_token_incomplete_secret(ref: dict[str, str]) -> None:
    d = _with_providers({"source": "Prometheus", "prometheus": {
        "url": "https://prom:9090", "authToken": {"secretReference": ref}}})
    assert policy_error(d) == (
        f"{PATH}: prometheus authToken secret reference does not set both namespace and name")


def test_prometheus_valid() -> None:
    policy = load(_with_providers({"source": "Prometheus", "prometheus": {
        "url": "https://prom:9090",
        "authToken": {"secretReference": {"namespace": "ns", "name": "s"}}}}))
    [provider] = policy.metrics_providers
    assert provider.source == "Prometheus"
    assert provider.prometheus_url == "https://prom:9090"
    assert provider.auth_token_secret == ("ns", "s")


def test_profile_errors_come_before_top_level_errors() -> None:
    d = doc(pc("Nope"), metricsProviders=[{"source": "Prometheus"}])
    with pytest.raises(PolicyError) as info:
        load(d)
    assert info.value.messages == [
        "in profile p: plugin Nope in pluginConfig not registered",
        "prometheus configuration is required when prometheus source is enabled",
    ]


# ---------------------------------------------------------------------------------------------
# ConfigMap wrapping
# ---------------------------------------------------------------------------------------------

_INNER = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: p
  pluginConfig: [{name: RemoveDuplicates}]
  plugins: {balance: {enabled: [RemoveDuplicates]}}
"""


def _configmap(data: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "descheduler", "namespace": "kube-system"}, "data": data}


def test_configmap_single_key() -> None:
    policy = load(_configmap({"policy.yaml": _INNER}))
    assert policy.format == "v1alpha2"
    assert policy.profiles[0].enabled["balance"] == ["RemoveDuplicates"]


def test_configmap_any_single_key_name() -> None:
    assert load(_configmap({"config": _INNER})).profiles[0].name == "p"


def test_configmap_from_a_file(write_policy: Callable[..., str]) -> None:
    indented = "".join(f"    {line}\n" for line in _INNER.splitlines())
    path = write_policy(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: descheduler}\n"
        "data:\n  policy.yaml: |\n" + indented, name="cm.yaml")
    assert load_policy(path, PLUGINS).profiles[0].enabled["balance"] == ["RemoveDuplicates"]


def test_configmap_several_keys_one_named_policy_yaml() -> None:
    policy = load(_configmap({"README": "not yaml: [", "policy.yaml": _INNER}))
    assert policy.profiles[0].name == "p"


def test_configmap_several_keys_ambiguous() -> None:
    with pytest.raises(InputError) as info:
        load(_configmap({"a": _INNER, "b": _INNER}))
    assert str(info.value).startswith(f"{PATH}: ConfigMap has several data keys (a, b)")


@pytest.mark.parametrize("data", [None, {}])
def test_configmap_without_data(data: Any) -> None:
    with pytest.raises(InputError) as info:
        load(_configmap(data))
    assert str(info.value) == (f"{PATH}: ConfigMap has no data key holding a policy; expected "
                               f"the policy under policy.yaml (the key upstream's Helm chart "
                               f"and kustomize use)")


def test_configmap_errors_name_the_file_and_key() -> None:
    inner = _INNER.replace("[{name: RemoveDuplicates}]",
                           "[{name: RemoveDuplicates, args: {namespaces: "
                           "{include: [a], exclude: [b]}}}]")
    with pytest.raises(PolicyError) as info:
        load(_configmap({"policy.yaml": inner}))
    assert str(info.value) == (
        f"{PATH}[policy.yaml]: in profile p: only one of Include/Exclude namespaces can be set")


def test_configmap_with_malformed_yaml_in_the_key() -> None:
    with pytest.raises(InputError) as info:
        load(_configmap({"policy.yaml": "profiles: [\n"}))
    assert str(info.value).startswith(f"{PATH}[policy.yaml]: invalid YAML")


def test_configmap_inside_a_configmap_is_rejected() -> None:
    inner = "apiVersion: v1\nkind: ConfigMap\ndata:\n  x: y\n"
    with pytest.raises(DecodeError) as info:
        load(_configmap({"policy.yaml": inner}))
    assert 'no kind "ConfigMap" is registered for version "v1"' in str(info.value)


# ---------------------------------------------------------------------------------------------
# DefaultEvictor checks upstream makes after validation (load time / plugin build)
# ---------------------------------------------------------------------------------------------


def test_de_priority_threshold_value_above_system_critical() -> None:
    d = doc(pc("DefaultEvictor", priorityThreshold={"value": 2000000001}), pc("RemoveDuplicates"))
    assert policy_error(d) == in_profile("priority threshold can't be greater than 2000000000")


def test_de_priority_threshold_value_at_system_critical_is_fine() -> None:
    load(doc(pc("DefaultEvictor", priorityThreshold={"value": 2000000000})))


def test_de_node_selector_that_does_not_parse() -> None:
    d = doc(pc("DefaultEvictor", nodeSelector="zone in ("), pc("RemoveDuplicates"))
    assert policy_error(d).startswith(in_profile("DefaultEvictor nodeSelector: "))


def test_de_node_selector_set_based_is_fine() -> None:
    args = load(doc(pc("DefaultEvictor", nodeSelector="zone in (a,b),!spot"))
                ).profiles[0].args["DefaultEvictor"]
    assert args.node_selector == "zone in (a,b),!spot"
