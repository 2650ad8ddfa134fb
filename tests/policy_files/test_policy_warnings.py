"""Policy.warnings: keys the decoder ignores (named with their place in the file and the nearest
known name) and a policy that enables nothing that evicts. Loading itself is unchanged: the same
Policy, the same errors."""

from __future__ import annotations

import dataclasses
import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from desched.framework.policy import Policy
from desched.plugins.catalog import PLUGINS
from desched.policy_files.errors import DecodeError, PolicyError
from desched.policy_files.loader import load_policy, policy_from_document
from desched.util.names import nearest

REPO = Path(__file__).resolve().parents[2]
V2 = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"
V1 = "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\n"
KOORD = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"
IDLE = "policy.yaml: no deschedule or balance plugin is enabled; the policy evicts nothing"

# A v1alpha2 policy that evicts (PodLifeTime), to add one typo at a time to.
PROFILE = """\
profiles:
- name: p
  pluginConfig:
  - name: PodLifeTime
    args: {maxPodLifeTimeSeconds: 60}
  plugins:
    deschedule:
      enabled: [PodLifeTime]
"""


def unknown(field: str, near: str | None = None, path: str = "policy.yaml") -> str:
    hint = f' (did you mean "{near}"?)' if near else ""
    return f'{path}: unknown field "{field}"{hint}; it is ignored'


def doc(text: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(textwrap.dedent(text))
    return loaded


def without_warnings(policy: Policy) -> Policy:
    return dataclasses.replace(policy, warnings=[])


# -- the four typos of the issue -----------------------------------------------------------------

def test_profile_for_profiles(from_yaml: Callable[[str], Policy]) -> None:
    policy = from_yaml(V2 + PROFILE.replace("profiles:", "profile:"))
    assert policy.profiles == []
    assert policy.warnings == [unknown("profile", "profiles"), IDLE]


def test_plugin_for_plugins(from_yaml: Callable[[str], Policy]) -> None:
    policy = from_yaml(V2 + PROFILE.replace("  plugins:", "  plugin:"))
    assert policy.profiles[0].enabled["deschedule"] == []
    assert policy.warnings == [unknown("profiles[0].plugin", "plugins"), IDLE]


def test_enable_for_enabled(from_yaml: Callable[[str], Policy]) -> None:
    policy = from_yaml(V2 + PROFILE.replace("enabled:", "enable:"))
    assert policy.warnings == [unknown("profiles[0].plugins.deschedule.enable", "enabled"), IDLE]


def test_misspelt_top_level_limit(from_yaml: Callable[[str], Policy]) -> None:
    policy = from_yaml(V2 + "maxNoOfPodsToEvictPerNod: 5\n" + PROFILE)
    assert policy.limits.per_node is None
    assert policy.warnings == [unknown("maxNoOfPodsToEvictPerNod", "maxNoOfPodsToEvictPerNode")]


def test_a_typo_changes_nothing_else(from_yaml: Callable[[str], Policy]) -> None:
    clean = from_yaml(V2 + PROFILE)
    assert clean.warnings == []
    for typo in (V2 + "maxNoOfPodsToEvictPerNod: 5\n" + PROFILE,
                 V2 + PROFILE + "  plugin: {balance: {enabled: [RemoveDuplicates]}}\n",
                 V2 + PROFILE + "    balance: {enable: [RemoveDuplicates]}\n",
                 V2 + PROFILE.replace("    args:", "    arg: {nodeFit: true}\n    args:")):
        policy = from_yaml(typo)
        assert policy.warnings, typo
        assert without_warnings(policy) == clean


# -- other places, nearest names -------------------------------------------------------------------

def test_nested_places(from_yaml: Callable[[str], Policy]) -> None:
    policy = from_yaml(V2 + textwrap.dedent("""\
        metricsCollector: {enable: true}
        metricsProviders:
        - source: Prometheus
          prometheus:
            url: http://prom:9090
            authToken: {secretReference: {namespace: ns, name: t, nme: t}}
        profiles:
        - name: p
          nmae: typo
          pluginConfig:
          - name: PodLifeTime
            args: {maxPodLifeTimeSeconds: 60}
            arg: {}
          plugins:
            deschedule: {enabled: [PodLifeTime], disable: [X]}
            descheduler: {enabled: [RemoveDuplicates]}
            preEvictionFilter: {enabled: [DefaultEvictor]}
        """))
    assert policy.warnings == [
        unknown("metricsCollector.enable", "enabled"),
        unknown("metricsProviders[0].prometheus.authToken.secretReference.nme", "name"),
        unknown("profiles[0].nmae", "name"),
        unknown("profiles[0].pluginConfig[0].arg", "args"),
        unknown("profiles[0].plugins.deschedule.disable", "disabled"),
        unknown("profiles[0].plugins.descheduler", "deschedule"),
    ]


def test_case_and_distance(from_yaml: Callable[[str], Policy]) -> None:
    # Keys are case-sensitive (as upstream): the same name in another case is the suggestion.
    policy = from_yaml(V2 + "Profiles: []\ntracing: {}\nkind2: x\n" + PROFILE)
    assert policy.warnings == [unknown("Profiles", "profiles"), unknown("tracing"),
                               unknown("kind2", "kind")]


def test_nearest() -> None:
    known = ["profiles", "nodeSelector", "maxNoOfPodsToEvictPerNode",
             "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal"]
    assert nearest("profile", known) == "profiles"
    assert nearest("NODESELECTOR", known) == "nodeSelector"
    assert nearest("maxNoOfPodsToEvictPerNamespac", known) == "maxNoOfPodsToEvictPerNamespace"
    assert nearest("maxPodsPerNode", known) == "maxNoOfPodsToEvictPerNode"
    assert nearest("tracing", known) is None
    assert nearest("zzz", known) is None
    assert nearest("x", []) is None


def test_type_meta_and_known_keys_are_not_warned(from_yaml: Callable[[str], Policy]) -> None:
    policy = from_yaml(V2 + textwrap.dedent("""\
        nodeSelector: role=worker
        maxNoOfPodsToEvictPerNode: 1
        maxNoOfPodsToEvictPerNamespace: 1
        maxNoOfPodsToEvictTotal: 1
        evictionFailureEventNotification: true
        gracePeriodSeconds: 0
        profiles:
        - name: p
          pluginConfig:
          - name: PodLifeTime
            args: {apiVersion: descheduler/v1alpha2, kind: PodLifeTimeArgs,
                   maxPodLifeTimeSeconds: 60}
          plugins:
            presort: {enabled: []}
            sort: {enabled: []}
            deschedule: {enabled: [PodLifeTime], disabled: []}
            balance: {enabled: []}
            filter: {enabled: [DefaultEvictor]}
            preevictionfilter: {enabled: [DefaultEvictor]}
        """))
    assert policy.warnings == []


def test_lenient_selectors_inside_strict_args(from_yaml: Callable[[str], Policy]) -> None:
    """Plugin args are strict, except the label selectors inside them: those warn."""
    policy = from_yaml(V2 + textwrap.dedent("""\
        profiles:
        - name: p
          pluginConfig:
          - name: DefaultEvictor
            args:
              labelSelector:
                matchLabel: {app: a}
                matchExpressions: [{key: app, operator: Exists, value: [x]}]
          - name: PodLifeTime
            args: {maxPodLifeTimeSeconds: 60, labelSelector: {matchLabels: {a: b}}}
          plugins:
            deschedule: {enabled: [PodLifeTime]}
        """))
    where = "profiles[0].pluginConfig[0].args.labelSelector"
    assert policy.warnings == [unknown(f"{where}.matchLabel", "matchLabels"),
                               unknown(f"{where}.matchExpressions[0].value", "values")]


def test_strict_args_still_fail(from_yaml: Callable[[str], Policy]) -> None:
    with pytest.raises(DecodeError, match='strict decoding error: unknown field '
                                          '"maxPodLifeTimeSecond"'):
        from_yaml(V2 + PROFILE.replace("maxPodLifeTimeSeconds", "maxPodLifeTimeSecond"))


def test_errors_are_unchanged_by_typos(from_yaml: Callable[[str], Policy]) -> None:
    def error(text: str) -> str:
        with pytest.raises(PolicyError) as info:
            from_yaml(text)
        return str(info.value)

    bad = PROFILE.replace("[PodLifeTime]", "[Nope]")
    assert error(V2 + "profile: []\n" + bad) == error(V2 + bad)
    assert error(V2 + bad).endswith("non-existing plugins: [Nope]")


# -- nothing enabled -------------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    "",
    "profiles: []\n",
    "profiles:\n- name: p\n",
    "profiles:\n- name: p\n  pluginConfig:\n  - name: PodLifeTime\n"
    "    args: {maxPodLifeTimeSeconds: 60}\n",
    "profiles:\n- name: p\n  plugins:\n    filter: {enabled: [DefaultEvictor]}\n",
])
def test_nothing_enabled(from_yaml: Callable[[str], Policy], body: str) -> None:
    assert from_yaml(V2 + body).warnings == [IDLE]


def test_one_profile_enabling_something_is_enough(from_yaml: Callable[[str], Policy]) -> None:
    assert from_yaml(V2 + PROFILE + "- name: q\n").warnings == []


# -- v1alpha1 --------------------------------------------------------------------------------------

def test_v1alpha1_places(from_yaml: Callable[[str], Policy]) -> None:
    policy = from_yaml(V1 + textwrap.dedent("""\
        evictLocalStoragePod: true
        maxNoOfPodsToEvictTotal: 3
        strategies:
          LowNodeUtilization:
            enabled: true
            enable: true
            params:
              nodeResourceUtilizationThresholds:
                thresholds: {cpu: 20}
                targetThresholds: {cpu: 50}
                numberOfNode: 1
              labelSelector: {matchLabel: {a: b}}
              nodefit: true
          PodLifeTime:
            enabled: true
            params:
              podLifeTime: {maxPodLifeTimeSeconds: 60, state: [Running]}
              thresholdPriorityClass: high
          RemovePodsHavingTooManyRestarts:
            params:
              podsHavingTooManyRestarts: {podRestartThresholds: 3}
          RemoveFailedPods:
            params:
              failedPods: {reason: [x]}
          RemoveDuplicates:
            params:
              removeDuplicates: {excludeOwnerKind: [Job]}
        """))
    assert policy.format == "v1alpha1"
    lnu = "strategies.LowNodeUtilization"
    assert policy.warnings == [
        unknown("evictLocalStoragePod", "evictLocalStoragePods"),
        unknown("maxNoOfPodsToEvictTotal", "maxNoOfPodsToEvictPerNode"),
        unknown(f"{lnu}.enable", "enabled"),
        unknown(f"{lnu}.params.nodeResourceUtilizationThresholds.numberOfNode",
                "numberOfNodes"),
        unknown(f"{lnu}.params.labelSelector.matchLabel", "matchLabels"),
        unknown(f"{lnu}.params.nodefit", "nodeFit"),
        unknown("strategies.PodLifeTime.params.podLifeTime.state", "states"),
        unknown("strategies.PodLifeTime.params.thresholdPriorityClass",
                "thresholdPriorityClassName"),
        unknown("strategies.RemovePodsHavingTooManyRestarts.params.podsHavingTooManyRestarts"
                ".podRestartThresholds", "podRestartThreshold"),
        unknown("strategies.RemoveFailedPods.params.failedPods.reason", "reasons"),
        unknown("strategies.RemoveDuplicates.params.removeDuplicates.excludeOwnerKind",
                "excludeOwnerKinds"),
    ]


def test_v1alpha1_strategy_typo_disables_it(from_yaml: Callable[[str], Policy]) -> None:
    policy = from_yaml(V1 + "strategies:\n  PodLifeTime:\n    enable: true\n")
    assert policy.profiles == []
    assert policy.warnings == [unknown("strategies.PodLifeTime.enable", "enabled"), IDLE]
    policy = from_yaml(V1 + "strategy:\n  PodLifeTime: {enabled: true}\n")
    assert policy.warnings == [unknown("strategy", "strategies"), IDLE]


def test_v1alpha1_clean(from_yaml: Callable[[str], Policy]) -> None:
    policy = from_yaml(V1 + textwrap.dedent("""\
        nodeSelector: role=worker
        evictFailedBarePods: true
        evictLocalStoragePods: true
        evictSystemCriticalPods: true
        evictDaemonSetPods: true
        ignorePvcPods: true
        maxNoOfPodsToEvictPerNode: 1
        maxNoOfPodsToEvictPerNamespace: 1
        strategies:
          RemovePodsViolatingNodeTaints:
            enabled: true
            weight: 1
            params:
              includePreferNoSchedule: true
              excludedTaints: [a]
              includedTaints: [b]
              namespaces: {exclude: [kube-system]}
              thresholdPriority: 10
              nodeFit: true
              labelSelector: {matchExpressions: [{key: a, operator: Exists}]}
        """))
    assert policy.warnings == []


# -- Koordinator -----------------------------------------------------------------------------------

def test_koordinator_is_strict_as_before(from_yaml: Callable[[str], Policy]) -> None:
    with pytest.raises(DecodeError, match='strict decoding error: unknown field "profile"'):
        from_yaml(KOORD + "profile: []\n")
    with pytest.raises(DecodeError, match=re.escape(
            'unknown field "profiles[0].plugins.balance.enable"')):
        from_yaml(KOORD + "profiles:\n- name: p\n  plugins:\n    balance: {enable: []}\n")


def test_koordinator_label_selectors_warn(from_yaml: Callable[[str], Policy]) -> None:
    policy = from_yaml(KOORD + textwrap.dedent("""\
        nodeSelector: {matchLabel: {a: b}}
        profiles:
        - name: p
          nodeSelector: {matchLabels: {a: b}, matchExpression: []}
          plugins:
            balance: {enabled: [{name: LowNodeLoad}]}
          pluginConfig:
          - name: LowNodeLoad
            args:
              highThresholds: {cpu: 70}
              lowThresholds: {cpu: 20}
              nodeSelector: {matchLabel: {a: b}}
        """))
    assert policy.warnings == [
        unknown("nodeSelector.matchLabel", "matchLabels"),
        unknown("profiles[0].nodeSelector.matchExpression", "matchExpressions"),
        unknown("profiles[0].pluginConfig[0].args.nodeSelector.matchLabel", "matchLabels"),
    ]


def test_koordinator_default_profile_evicts_nothing_by_itself(
        from_yaml: Callable[[str], Policy]) -> None:
    assert from_yaml(KOORD).warnings == [
        IDLE + " by itself (MigrationController only carries out PodMigrationJobs created by "
               "others)"]


# -- ConfigMap -------------------------------------------------------------------------------------

def test_configmap_names_the_data_key() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
          "data": {"policy.yaml": V2 + "profile: []\n"}}
    policy = policy_from_document("cm.yaml", cm, PLUGINS)
    assert policy.warnings == [
        unknown("profile", "profiles", path="cm.yaml[policy.yaml]"),
        "cm.yaml[policy.yaml]: no deschedule or balance plugin is enabled; the policy evicts "
        "nothing"]


# -- every policy the repository ships -----------------------------------------------------------

POLICY_KINDS = {("descheduler/v1alpha2", "DeschedulerPolicy"),
                ("descheduler/v1alpha1", "DeschedulerPolicy"),
                ("descheduler/v1alpha2", "DeschedulerConfiguration")}


def is_policy(d: Any) -> bool:
    if not isinstance(d, dict):
        return False
    if (d.get("apiVersion"), d.get("kind")) in POLICY_KINDS:
        return True
    data = d.get("data") if d.get("kind") == "ConfigMap" else None
    return isinstance(data, dict) and any(
        is_policy(yaml.safe_load(v)) for v in data.values() if isinstance(v, str))


def shipped_policies() -> Iterator[tuple[str, dict[str, Any]]]:
    # Not the plugin package's example (examples/out-of-tree-plugin), which enables a plugin
    # only that package has: tests/test_plugin_packages.py checks it with the package installed.
    files = [p for top in ("examples", "deploy", "tests")
             for p in sorted((REPO / top).rglob("*.y*ml"))
             if "templates" not in p.parts and "out-of-tree-plugin" not in p.parts]
    files += sorted(REPO.glob("bench/*.yaml"))
    for path in files:
        try:
            docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except yaml.YAMLError:
            continue
        for i, d in enumerate(docs):
            if is_policy(d):
                yield f"{path.relative_to(REPO)}#{i}", d
    # The Helm chart's default policy, as its ConfigMap template renders it.
    values = yaml.safe_load((REPO / "deploy/helm/desched/values.yaml").read_text())
    yield "deploy/helm/desched/values.yaml", {
        "apiVersion": values["deschedulerPolicyAPIVersion"], "kind": "DeschedulerPolicy",
        **values["deschedulerPolicy"]}
    # Policies shown in the documentation.
    for md in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
               *sorted(p for p in (REPO / "examples").rglob("*.md")
                       if "out-of-tree-plugin" not in p.parts)]:
        text = md.read_text(encoding="utf-8")
        for i, block in enumerate(re.findall(r"```ya?ml\n(.*?)```", text, re.S)):
            try:
                d = yaml.safe_load(block)
            except yaml.YAMLError:
                continue
            if is_policy(d):
                yield f"{md.relative_to(REPO)}#{i}", d


SHIPPED = dict(shipped_policies())


def test_the_shipped_policies_are_found() -> None:
    assert len(SHIPPED) >= 18, sorted(SHIPPED)
    assert any(name.startswith("bench/") for name in SHIPPED)
    assert any(name.startswith("deploy/kustomize") for name in SHIPPED)
    assert any(name.startswith("examples/plugins") for name in SHIPPED)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_policies_have_no_warnings(name: str) -> None:
    assert policy_from_document(name, SHIPPED[name], PLUGINS).warnings == []


def test_shipped_example_through_the_file_loader() -> None:
    assert load_policy(str(REPO / "examples" / "policy.yaml"), PLUGINS).warnings == []
