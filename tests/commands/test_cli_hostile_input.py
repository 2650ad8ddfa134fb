"""Hostile input through the real CLI: deep nesting, alias bombs, bad values that used to crash
(exit 1 or 139) or hang. Each must be one error line and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import CLUSTER, NOW, POLICY, assert_input_error, desched, write

pytestmark = pytest.mark.process

POD_HEAD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"


def _laughs(levels: int = 12) -> list[str]:
    """Nested aliases: 9**levels nodes once expanded, a few hundred bytes as text."""
    lines = ["x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return lines


def test_deeply_nested_yaml_policy(tmp_path: Path) -> None:
    # libyaml 0.2.5's scanner stops this one at 1,000 levels itself; older ones do not.
    path = write(tmp_path / "deep.yaml", "[" * 50000 + "]" * 50000 + "\n")
    assert_input_error(desched("validate", "--policy", path), "deep.yaml", "nesting")


def test_deeply_nested_block_yaml_policy(tmp_path: Path) -> None:
    text = "a:\n" + "".join(" " * (i + 1) + "-\n" for i in range(3000))
    path = write(tmp_path / "deep.yaml", text)
    assert_input_error(desched("validate", "--policy", path), "deep.yaml", "nesting deeper than")


def test_deeply_nested_yaml_snapshot(tmp_path: Path) -> None:
    path = write(tmp_path / "deep.yaml", POD_HEAD + "x: " + "{a: " * 50000 + "}" * 50000 + "\n")
    assert_input_error(desched("simulate", "--policy", POLICY, "--snapshot", path, "--now", NOW),
                       "deep.yaml", "nesting deeper than")


def test_deeply_nested_json_snapshots(tmp_path: Path) -> None:
    deep = "{\"a\":" * 10000 + "1" + "}" * 10000
    pod = '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":' + deep + "}}"
    cases = {
        "one.json": pod + "\n",
        "two.json": pod + pod,  # concatenated documents: split by the json module
        "list.json": '{"apiVersion":"v1","kind":"List","items":[' + pod + "]}",
        "pretty.json": '{"apiVersion":"v1","kind":"PodList",\n "items":[\n  ' + pod + "\n ]}",
        "array.json": "[" * 50000 + "]" * 50000,
    }
    for name, text in cases.items():
        path = write(tmp_path / name, text)
        proc = desched("simulate", "--policy", POLICY, "--snapshot", path, "--now", NOW)
        assert_input_error(proc, name, "nesting too deep")


def test_alias_bomb_snapshot(tmp_path: Path) -> None:
    path = write(tmp_path / "bomb.yaml", POD_HEAD + "\n".join(_laughs()) + "\n")
    assert_input_error(desched("simulate", "--policy", POLICY, "--snapshot", path, "--now", NOW),
                       "bomb.yaml", "aliases expand to more than")


def test_alias_bomb_in_a_configmap_policy(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n" + "\n".join(_laughs())
    path = write(tmp_path / "cm.yaml", text + "\ndata: {policy.yaml: *a11}\n")
    assert_input_error(desched("validate", "--policy", path), "cm.yaml",
                       "aliases expand to more than")


def test_recursive_alias(tmp_path: Path) -> None:
    path = write(tmp_path / "rec.yaml", "apiVersion: v1\nkind: Pod\nmetadata: &m {x: *m}\n")
    assert_input_error(desched("simulate", "--policy", POLICY, "--snapshot", path, "--now", NOW),
                       "rec.yaml", "alias")


def test_a_few_aliases_still_load(tmp_path: Path) -> None:
    policy = Path(POLICY).read_text(encoding="utf-8").replace(
        "      evictLocalStoragePods: false", "      evictLocalStoragePods: &f false\n"
        "      evictSystemCriticalPods: *f")
    path = write(tmp_path / "p.yaml", policy)
    proc = desched("validate", "--policy", path)
    assert proc.returncode == 0, proc.stderr


def test_configmap_data_must_be_a_string(tmp_path: Path) -> None:
    path = write(tmp_path / "cm.yaml", """\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: c}
        data:
          policy.yaml: {apiVersion: descheduler/v1alpha2, kind: DeschedulerPolicy}
        """)
    assert_input_error(desched("validate", "--policy", path),
                       'cm.yaml: data["policy.yaml"] must be a string')


def test_cluster_example_is_unaffected() -> None:
    proc = desched("simulate", "--policy", POLICY, "--snapshot", CLUSTER, "--now", NOW,
                   "--output", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["evictions"]


ANTI_AFFINITY_POLICY = """\
    apiVersion: descheduler/v1alpha2
    kind: DeschedulerPolicy
    profiles:
    - name: p
      pluginConfig: [{name: RemovePodsViolatingInterPodAntiAffinity}]
      plugins: {deschedule: {enabled: [RemovePodsViolatingInterPodAntiAffinity]}}
    """


def test_invalid_quantity_reached_through_qos(tmp_path: Path) -> None:
    """RemovePodsViolatingInterPodAntiAffinity sorts by QoS, which parsed limits and requests
    unchecked (exit 1); quantities are now checked as the pod is decoded."""
    snapshot = write(tmp_path / "s.yaml", """\
        apiVersion: v1
        kind: List
        items:
        - {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: 4}}}
        - {apiVersion: v1, kind: Node, metadata: {name: n2}, status: {allocatable: {cpu: 4}}}
        - apiVersion: v1
          kind: Pod
          metadata: {name: p1, namespace: default, labels: {app: a}}
          spec:
            nodeName: n1
            containers: [{name: c, resources: {limits: {cpu: "1.5.3"}}}]
            affinity:
              podAntiAffinity:
                requiredDuringSchedulingIgnoredDuringExecution:
                - {labelSelector: {matchLabels: {app: a}}, topologyKey: kubernetes.io/hostname}
        """)
    policy = write(tmp_path / "p.yaml", ANTI_AFFINITY_POLICY)
    proc = desched("simulate", "--policy", policy, "--snapshot", snapshot, "--now", NOW)
    assert_input_error(proc, "s.yaml", '"default/p1"', "1.5.3", "limits")


KOORD_POLICY = """\
    apiVersion: descheduler/v1alpha2
    kind: DeschedulerConfiguration
    deschedulingInterval: 60s
    profiles:
    - name: koord
      pluginConfig: [{name: PodLifeTime, args: {maxPodLifeTimeSeconds: 60}}]
      plugins: {deschedule: {enabled: [{name: PodLifeTime}]}}
    """


def test_cycles_past_the_end_of_time(tmp_path: Path) -> None:
    policy = write(tmp_path / "k.yaml", KOORD_POLICY)
    for now, cycles in (("9999-12-31T23:59:00Z", "3"), ("0001-01-01T00:00:00Z", "1"),
                        (NOW, "300000000000")):
        proc = desched("simulate", "--policy", policy, "--snapshot", CLUSTER, "--now", now,
                       "--cycles", cycles)
        assert_input_error(proc, "--now", "representable time")
    proc = desched("simulate", "--policy", policy, "--snapshot", CLUSTER, "--now", NOW,
                   "--cycles", "3")
    assert proc.returncode == 0, proc.stderr


def test_control_characters_in_names_are_quoted(tmp_path: Path) -> None:
    head = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n"
    cases = {
        "config.yaml": (head + '- name: "a\\nb"\n  pluginConfig: [{name: "X\\nY"}]\n',
                        'in profile "a\\nb": plugin "X\\nY" in pluginConfig not registered'),
        "enabled.yaml": (head + '- name: "a\\rb"\n'
                         '  plugins: {balance: {enabled: ["X\\u2028Y", "Plain"]}}\n',
                         'non-existing plugins: ["X\\u2028Y" Plain]'),
        "koord.yaml": ("apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"
                       'profiles:\n- name: "k\\x85"\n  plugins: {balance: {enabled: '
                       '[{name: "Z\\"\\n"}]}}\n',
                       'profile "k\\x85": balance plugin "Z\\"\\n" is not registered'),
    }
    for name, (text, needle) in cases.items():
        path = write(tmp_path / name, text)
        assert_input_error(desched("validate", "--policy", path), name, needle)


def _plt(args: str) -> str:
    return ("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n"
            f"  pluginConfig: [{{name: PodLifeTime, args: {args}}}]\n"
            "  plugins: {deschedule: {enabled: [PodLifeTime]}}\n")


KOORD_HEAD = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"
# Input upstream (or Koordinator) refuses, with what the one error line must say.
REFUSED = {
    "selector-key": (_plt('{maxPodLifeTimeSeconds: 5, labelSelector: {matchLabels: {"a b": v}}}'),
                     ['key: Invalid value: "a b": name part must consist of']),
    "selector-prefix": (_plt("{maxPodLifeTimeSeconds: 5, labelSelector: {matchExpressions: "
                             "[{key: Bad_Prefix/app, operator: Exists}]}}"),
                        ["prefix part a lowercase RFC 1123 subdomain"]),
    "selector-value": (_plt("{maxPodLifeTimeSeconds: 5, labelSelector: {matchLabels: {app: "
                            + "v" * 64 + "}}}"), ["must be no more than 63 bytes"]),
    "selector-in-empty": (_plt("{maxPodLifeTimeSeconds: 5, labelSelector: {matchExpressions: "
                               "[{key: app, operator: In}]}}"), ["values set can't be empty"]),
    "koord-node-selector": (KOORD_HEAD + 'nodeSelector: {matchLabels: {"x/y/z": a}}\n',
                            ["nodeSelector", "a valid label key"]),
    "node-selector-string": ("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"
                             "nodeSelector: 'a b=c'\n", ["nodeSelector"]),
    "arabic-digit-duration": (KOORD_HEAD + 'deschedulingInterval: "\\u0665m"\n',
                              ['time: invalid duration "\\xd9\\xa5m"']),
    "leader-election-duration": (KOORD_HEAD + "leaderElection: {renewDeadline: 10 s}\n",
                                 ['time: unknown unit " s" in duration "10 s"']),
    "nan-threshold": (
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n"
        "  pluginConfig: [{name: LowNodeUtilization, args: {thresholds: {cpu: .nan}, "
        "targetThresholds: {cpu: 50}}}]\n  plugins: {balance: {enabled: [LowNodeUtilization]}}\n",
        ["unsupported value: NaN"]),
    "int32-overflow": (
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n"
        "  pluginConfig: [{name: RemovePodsHavingTooManyRestarts, "
        "args: {podRestartThreshold: 18446744073709551616}}]\n"
        "  plugins: {deschedule: {enabled: [RemovePodsHavingTooManyRestarts]}}\n",
        ["cannot unmarshal number 18446744073709551616 into Go struct field "
         "RemovePodsHavingTooManyRestartsArgs.podRestartThreshold of type int32"]),
    "exit-code-overflow": (_plt("{exitCodes: [1, 4294967296]}"),
                           ["PodLifeTimeArgs.exitCodes of type int32"]),
}


def test_input_upstream_refuses_is_refused(tmp_path: Path) -> None:
    for name, (text, needles) in REFUSED.items():
        path = write(tmp_path / f"{name}.yaml", text)
        assert_input_error(desched("validate", "--policy", path), f"{name}.yaml", *needles)


def test_non_string_where_a_string_belongs_in_a_snapshot(tmp_path: Path) -> None:
    path = write(tmp_path / "s.yaml", """\
        apiVersion: v1
        kind: Pod
        metadata:
          name: p
          ownerReferences: [{kind: 5, name: rs, uid: u, controller: true}]
        """)
    assert_input_error(desched("simulate", "--policy", POLICY, "--snapshot", path, "--now", NOW),
                       "s.yaml", "Expected `str`, got `int`", "ownerReferences[0].kind")
