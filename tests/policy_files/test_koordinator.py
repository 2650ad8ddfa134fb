"""Koordinator's `DeschedulerConfiguration` (descheduler/v1alpha2): strict decoding, profile
validation, plugin-set merging and defaults.

MigrationController is not registered yet, so these configurations use DefaultEvictor as the
evict and filter plugin."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from desched.framework.policy import Policy
from desched.framework.registry import Plugins, PluginSpec
from desched.plugins.catalog import PLUGINS
from desched.plugins.defaultevictor import DefaultEvictorArgs
from desched.plugins.removeduplicates import RemoveDuplicatesArgs
from desched.policy_files.errors import DecodeError, PolicyError
from desched.policy_files.koordinator import DEFAULT_PROFILE
from desched.policy_files.loader import load_policy, policy_from_document

PATH = "koord.yaml"
DECODE_PREFIX = f'failed decoding descheduler\'s policy config "{PATH}": '

EVICT_DE = {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]}
FILTER_DE = {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]}


def plugins(**eps: Any) -> dict[str, Any]:
    """A plugins block with DefaultEvictor as evict and filter plugin, plus `eps`."""
    return {"evict": EVICT_DE, "filter": FILTER_DE, **eps}


def enabled(*names: str) -> dict[str, Any]:
    return {"enabled": [{"name": n} for n in names]}


def cfg(*profiles: dict[str, Any], **top: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"apiVersion": "descheduler/v1alpha2",
                         "kind": "DeschedulerConfiguration", **top}
    if profiles:
        d["profiles"] = list(profiles)
    return d


def profile(name: str = "p", plugin_config: list[dict[str, Any]] | None = None,
            **eps: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "plugins": plugins(**eps)}
    if plugin_config is not None:
        out["pluginConfig"] = plugin_config
    return out


def load(d: dict[str, Any], plugins: Plugins = PLUGINS) -> Policy:
    return policy_from_document(PATH, d, plugins)


def policy_error(d: dict[str, Any], plugins: Plugins = PLUGINS) -> PolicyError:
    with pytest.raises(PolicyError) as info:
        load(d, plugins)
    return info.value


def decode_error(d: dict[str, Any]) -> str:
    with pytest.raises(DecodeError) as info:
        load(d)
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# A working configuration
# ---------------------------------------------------------------------------------------------


def test_minimal_working_configuration() -> None:
    policy = load(cfg(profile(
        plugin_config=[{"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 60}}],
        deschedule=enabled("PodLifeTime"), balance=enabled("RemoveDuplicates"))))
    assert policy.format == "koordinator"
    [p] = policy.profiles
    assert p.name == "p"
    assert p.enabled["evict"] == ["DefaultEvictor"]
    assert p.enabled["filter"] == ["DefaultEvictor"]
    assert p.enabled["preevictionfilter"] == ["DefaultEvictor"]
    assert p.enabled["deschedule"] == ["PodLifeTime"]
    assert p.enabled["balance"] == ["RemoveDuplicates"]
    assert p.args["PodLifeTime"].max_pod_life_time_seconds == 60


def test_from_a_file(write_policy: Callable[..., str]) -> None:
    path = write_policy("""
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerConfiguration
        deschedulingInterval: 10s
        dryRun: true
        profiles:
        - name: koord
          plugins:
            evict: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
            filter: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
            balance: {enabled: [{name: RemoveDuplicates}]}
        """)
    policy = load_policy(path, PLUGINS)
    assert policy.format == "koordinator"
    assert policy.dry_run is True
    assert policy.descheduling_interval == 10.0
    assert policy.profiles[0].enabled["balance"] == ["RemoveDuplicates"]


def test_default_args_for_enabled_plugins_without_plugin_config() -> None:
    p = load(cfg(profile(balance=enabled("RemoveDuplicates")))).profiles[0]
    assert p.args["RemoveDuplicates"] == RemoveDuplicatesArgs()
    assert p.args["DefaultEvictor"] == DefaultEvictorArgs()


def test_default_args_are_validated() -> None:
    """An enabled PodLifeTime with no pluginConfig gets default args, which do not validate."""
    err = policy_error(cfg(profile(deschedule=enabled("PodLifeTime"))))
    assert str(err) == (
        f'{PATH}: profile "p": PodLifeTime: at least one filtering criterion must be specified '
        f"(maxPodLifeTimeSeconds, states, conditions, or exitCodes)")


def test_plugin_args_are_validated() -> None:
    err = policy_error(cfg(profile(
        plugin_config=[{"name": "RemoveDuplicates",
                        "args": {"namespaces": {"include": ["a"], "exclude": ["b"]}}}],
        balance=enabled("RemoveDuplicates"))))
    assert str(err) == (
        f'{PATH}: profile "p": RemoveDuplicates: only one of Include/Exclude namespaces can be '
        f"set")


def test_plugin_args_api_version_and_kind_are_optional() -> None:
    p = load(cfg(profile(
        plugin_config=[{"name": "DefaultEvictor", "args": {
            "apiVersion": "descheduler/v1alpha2", "kind": "DefaultEvictorArgs",
            "evictLocalStoragePods": True}}]))).profiles[0]
    assert p.args["DefaultEvictor"].evict_local_storage_pods is True


def test_plugin_args_are_decoded_strictly() -> None:
    d = cfg(profile(plugin_config=[{"name": "DefaultEvictor", "args": {"x": 1}}]))
    assert decode_error(d) == DECODE_PREFIX + 'strict decoding error: unknown field "x"'


def test_plugin_config_of_unregistered_plugin() -> None:
    err = policy_error(cfg(profile(plugin_config=[{"name": "NoSuchPlugin", "args": {}}])))
    assert "NoSuchPlugin" in str(err) and "not registered" in str(err)


# ---------------------------------------------------------------------------------------------
# Strict top-level decoding
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda d: d.update(unknownTop=1), "unknownTop"),
    (lambda d: d["profiles"][0].update(extra=True), "profiles[0].extra"),
    (lambda d: d["profiles"][0]["plugins"].update(preevictionfilter={}),
     "profiles[0].plugins.preevictionfilter"),
    (lambda d: d["profiles"][0]["plugins"]["evict"]["enabled"][0].update(weight=1),
     "profiles[0].plugins.evict.enabled[0].weight"),
    (lambda d: d.update(leaderElection={"leaderElect": False, "lease": "1s"}),
     "leaderElection.lease"),
    (lambda d: d.update(MaxNoOfPodsToEvictPerNode=1),
     'MaxNoOfPodsToEvictPerNode" (did you mean "maxNoOfPodsToEvictPerNode"?)'),
    (lambda d: d["profiles"][0].update(plugin={}), 'profiles[0].plugin" (did you mean "plugins"?)'),
])
def test_strict_decoding_unknown_fields(mutate: Callable[[dict[str, Any]], None],
                                        field: str) -> None:
    d = cfg(profile())
    d["profiles"][0]["plugins"] = {"evict": {"disabled": [{"name": "*"}],
                                             "enabled": [{"name": "DefaultEvictor"}]},
                                   "filter": {"disabled": [{"name": "*"}]}}
    mutate(d)
    # Go's message, and the name a typo misspells after it.
    want = field if field.endswith(")") else f'{field}"'
    assert decode_error(d) == DECODE_PREFIX + f'strict decoding error: unknown field "{want}'


def test_wrong_type_is_a_decode_error() -> None:
    assert decode_error(cfg(profile(), dryRun="yes")).startswith(DECODE_PREFIX)


def test_known_top_level_fields_are_accepted() -> None:
    policy = load(cfg(
        profile(),
        leaderElection={"leaderElect": True, "leaseDuration": "15s", "renewDeadline": "10s",
                        "retryPeriod": "2s", "resourceLock": "leases",
                        "resourceName": "koord-descheduler",
                        "resourceNamespace": "koordinator-system"},
        clientConnection={"kubeconfig": "", "qps": 50, "burst": 100,
                          "contentType": "application/vnd.kubernetes.protobuf",
                          "acceptContentTypes": "application/json"},
        enableProfiling=True, enableContentionProfiling=True,
        healthzBindAddress="0.0.0.0:10251", metricsBindAddress="0.0.0.0:10251",
        deschedulingInterval="1m30s", dryRun=False,
        maxNoOfPodsToEvictPerNode=1, maxNoOfPodsToEvictPerNamespace=2, maxNoOfPodsToEvictTotal=3,
    ))
    assert policy.descheduling_interval == 90.0
    assert policy.dry_run is False
    assert (policy.limits.per_node, policy.limits.per_namespace, policy.limits.total) == (1, 2, 3)


def test_top_level_defaults() -> None:
    policy = load(cfg(profile()))
    assert policy.descheduling_interval == 0.0  # run once
    assert policy.dry_run is False
    assert policy.node_selector is None
    assert (policy.limits.per_node, policy.limits.per_namespace, policy.limits.total) == (
        None, None, None)


def test_bad_descheduling_interval() -> None:
    assert decode_error(cfg(profile(), deschedulingInterval="often")) == (
        DECODE_PREFIX + 'time: invalid duration "often" - at `$.deschedulingInterval`')


def test_negative_limit() -> None:
    assert decode_error(cfg(profile(), maxNoOfPodsToEvictTotal=-1)) == (
        DECODE_PREFIX + "json: cannot unmarshal number -1 into Go struct field "
        "DeschedulerConfiguration.maxNoOfPodsToEvictTotal of type uint")


@pytest.mark.parametrize("field", ["healthzBindAddress", "metricsBindAddress"])
def test_bad_bind_address(field: str) -> None:
    err = policy_error(cfg(profile(), **{field: "nowhere"}))
    assert str(err) == f'{PATH}: {field}: Invalid value: "nowhere": must be a valid host:port'


def test_node_selectors() -> None:
    p = profile()
    p["nodeSelector"] = {"matchLabels": {"pool": "a"}}
    policy = load(cfg(p, nodeSelector={"matchExpressions": [
        {"key": "role", "operator": "In", "values": ["worker"]}]}))
    assert policy.node_selector is not None
    assert policy.node_selector({"role": "worker"}) and not policy.node_selector({"role": "x"})
    matcher = policy.profiles[0].node_selector
    assert matcher is not None and matcher({"pool": "a"}) and not matcher({"pool": "b"})


def test_bad_node_selector() -> None:
    err = policy_error(cfg(profile(), nodeSelector={"matchExpressions": [
        {"key": "role", "operator": "Bogus", "values": ["x"]}]}))
    assert str(err).startswith(f"{PATH}: nodeSelector: Invalid value: ")


# ---------------------------------------------------------------------------------------------
# Profiles: names, defaults
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [cfg(), cfg(profiles=[]),
                               cfg(profiles=[{"pluginConfig": []}])])
def test_default_profile_evicts_and_filters_with_migration_controller(
        d: dict[str, Any]) -> None:
    prof = load(d).profiles[0]
    assert prof.name == DEFAULT_PROFILE
    assert prof.enabled["evict"] == ["MigrationController"]
    assert prof.enabled["filter"] == ["MigrationController"]
    assert "MigrationController" in prof.args  # defaulted args, as Koordinator appends them


def test_shipped_default_config_names_migration_controller() -> None:
    """koord-descheduler's shipped ConfigMap."""
    shipped = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
enableContentionProfiling: true
enableProfiling: true
healthzBindAddress: 0.0.0.0:10251
metricsBindAddress: 0.0.0.0:10251
leaderElection: {resourceLock: leases, resourceName: koord-descheduler,
                 resourceNamespace: koordinator-system}
deschedulingInterval: 10s
dryRun: false
profiles:
- name: koord-descheduler
  plugins:
    deschedule: {disabled: [{name: "*"}]}
    evict: {disabled: [{name: "*"}], enabled: [{name: MigrationController}]}
  pluginConfig:
  - name: MigrationController
    args: {apiVersion: descheduler/v1alpha2, kind: MigrationControllerArgs,
           evictionPolicy: Eviction, evictQPS: "10", evictBurst: 1,
           namespaces: {exclude: [kube-system, koordinator-system]}}
"""
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "koord-descheduler-config", "namespace": "koordinator-system"},
          "data": {"koord-descheduler-config": shipped}}
    prof = load(cm).profiles[0]
    assert prof.enabled["evict"] == ["MigrationController"]
    assert prof.enabled["deschedule"] == []
    assert prof.args["MigrationController"].evict_qps in ("10", 10, 10.0)


def test_single_unnamed_profile_gets_the_default_name() -> None:
    p = profile()
    del p["name"]
    assert [x.name for x in load(cfg(p)).profiles] == [DEFAULT_PROFILE]


def test_profile_name_required() -> None:
    second = profile()
    del second["name"]
    err = policy_error(cfg(profile("a"), second))
    assert str(err) == f"{PATH}: profiles[1].name: Required value"


def test_profile_name_duplicate() -> None:
    err = policy_error(cfg(profile("a"), profile("b"), profile("a")))
    assert str(err) == f'{PATH}: profiles[2].name: Duplicate value: "a"'


def test_duplicate_plugin_config() -> None:
    err = policy_error(cfg(profile(plugin_config=[{"name": "DefaultEvictor"},
                                                  {"name": "DefaultEvictor"}])))
    assert str(err) == f'{PATH}: profiles[0].pluginConfig[1]: Duplicate value: "DefaultEvictor"'


def test_profile_validation_errors_aggregate() -> None:
    second = profile()
    del second["name"]
    err = policy_error(cfg(profile("a"), second, profile("a"), healthzBindAddress="x"))
    assert err.messages == ["profiles[1].name: Required value",
                            'profiles[2].name: Duplicate value: "a"',
                            'healthzBindAddress: Invalid value: "x": must be a valid host:port']
    assert str(err) == f"{PATH}: [" + ", ".join(err.messages) + "]"


def test_several_profiles_keep_their_order() -> None:
    policy = load(cfg(profile("one", balance=enabled("RemoveDuplicates")),
                      profile("two", plugin_config=[
                          {"name": "PodLifeTime", "args": {"states": ["Pending"]}}],
                          deschedule=enabled("PodLifeTime"))))
    assert [p.name for p in policy.profiles] == ["one", "two"]
    assert policy.profiles[1].args["PodLifeTime"].states == ["Pending"]


# ---------------------------------------------------------------------------------------------
# Plugin sets: merging with the defaults, evict plugins
# ---------------------------------------------------------------------------------------------


def test_filter_default_is_migration_controller() -> None:
    p = {"name": "p", "plugins": {"evict": EVICT_DE}}
    assert load(cfg(p)).profiles[0].enabled["filter"] == ["MigrationController"]


def test_filter_disabled_entirely_is_allowed() -> None:
    p = {"name": "p", "plugins": {"evict": EVICT_DE, "filter": {"disabled": [{"name": "*"}]}}}
    prof = load(cfg(p)).profiles[0]
    assert prof.enabled["filter"] == []
    assert prof.enabled["preevictionfilter"] == []


def test_filter_default_disabled_by_name() -> None:
    p = {"name": "p", "plugins": {
        "evict": EVICT_DE,
        "filter": {"disabled": [{"name": "MigrationController"}],
                   "enabled": [{"name": "DefaultEvictor"}]}}}
    assert load(cfg(p)).profiles[0].enabled["filter"] == ["DefaultEvictor"]


def test_no_evict_plugin() -> None:
    p = {"name": "p", "plugins": {"evict": {"disabled": [{"name": "*"}]}, "filter": FILTER_DE}}
    assert str(policy_error(cfg(p))) == f'{PATH}: profile "p": no evict plugin is enabled'


OTHER_EVICTOR = PluginSpec(name="OtherEvictor", extension_points=frozenset({"evict", "filter"}),
                           args_type=DefaultEvictorArgs, factory=lambda args, handle: object())
WITH_OTHER_EVICTOR = {**PLUGINS, OTHER_EVICTOR.name: OTHER_EVICTOR}


def test_only_one_evict_plugin() -> None:
    p = {"name": "p", "plugins": {
        "evict": {"disabled": [{"name": "*"}],
                  "enabled": [{"name": "DefaultEvictor"}, {"name": OTHER_EVICTOR.name}]},
        "filter": FILTER_DE}}
    assert str(policy_error(cfg(p), WITH_OTHER_EVICTOR)) == (
        f'{PATH}: profile "p": only one evict plugin can be enabled')


def test_only_one_evict_plugin_with_the_default_kept() -> None:
    """Enabling an evictor without disabling the default keeps MigrationController too."""
    p = {"name": "p", "plugins": {"evict": enabled(OTHER_EVICTOR.name), "filter": FILTER_DE}}
    assert str(policy_error(cfg(p), WITH_OTHER_EVICTOR)) == (
        f'{PATH}: profile "p": only one evict plugin can be enabled')


def test_unregistered_plugin_in_an_extension_point() -> None:
    err = policy_error(cfg(profile(deschedule=enabled("NoSuchPlugin"))))
    assert str(err) == f'{PATH}: profile "p": deschedule plugin "NoSuchPlugin" is not registered'


def test_plugin_in_an_extension_point_it_does_not_extend() -> None:
    err = policy_error(cfg(profile(balance=enabled("PodLifeTime"))))
    assert str(err) == (f'{PATH}: profile "p": plugin "PodLifeTime" does not extend balance; '
                        f"PodLifeTime is a deschedule plugin: enable it under plugins.deschedule")


def test_plugin_enabled_twice() -> None:
    err = policy_error(cfg(profile(balance=enabled("RemoveDuplicates", "RemoveDuplicates"))))
    assert str(err) == (
        f'{PATH}: profile "p": plugin "RemoveDuplicates" already registered as "balance"')


def test_deschedule_disabled_star_with_nothing_enabled() -> None:
    p = load(cfg(profile(deschedule={"disabled": [{"name": "*"}]}))).profiles[0]
    assert p.enabled["deschedule"] == []
    assert p.enabled["balance"] == []


# ---------------------------------------------------------------------------------------------
# ConfigMap wrapping
# ---------------------------------------------------------------------------------------------


def test_koordinator_in_a_configmap() -> None:
    inner = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: k
  plugins:
    evict: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
    filter: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
    balance: {enabled: [{name: RemoveDuplicates}]}
"""
    policy = load({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                   "data": {"koord-descheduler-config": inner}})
    assert policy.format == "koordinator"
    assert policy.profiles[0].enabled["balance"] == ["RemoveDuplicates"]


def test_strict_error_inside_a_configmap_names_the_key() -> None:
    inner = ("apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"
             "bogus: 1\n")
    with pytest.raises(DecodeError) as info:
        load({"apiVersion": "v1", "kind": "ConfigMap", "data": {"config.yaml": inner}})
    assert str(info.value) == (
        f'failed decoding descheduler\'s policy config "{PATH}[config.yaml]": '
        f'strict decoding error: unknown field "bogus"')


def test_default_evictor_checks_after_validation() -> None:
    err = policy_error(cfg(profile(plugin_config=[
        {"name": "DefaultEvictor", "args": {"nodeSelector": "a in (",
                                            "priorityThreshold": {"value": 2000000001}}}])))
    assert str(err) == (
        f"{PATH}: profile \"p\": priority threshold can't be greater than 2000000000")
    err = policy_error(cfg(profile(plugin_config=[
        {"name": "DefaultEvictor", "args": {"nodeSelector": "a in ("}}])))
    assert str(err).startswith(f'{PATH}: profile "p": DefaultEvictor nodeSelector: ')
