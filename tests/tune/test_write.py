"""The recommended candidate written in the input's own format: only the changed values and the
added keys differ from the user's text, and the written file loads to the candidate."""

from __future__ import annotations

import difflib
import json
import textwrap
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from tune_policies import CLUSTER, HNU, HOTSPOT, LNU, POOLS, V1ALPHA1, configmap, load

from desched.framework.policy import Policy
from desched.plugins.catalog import PLUGINS
from desched.policy_files.errors import PolicyError
from desched.policy_files.loader import policy_from_document
from desched.tune.knobs import Knob, Value, candidate, default_knobs, parse_vary
from desched.tune.write import write_policy

ANEW = "# written anew by desched tune"


def written(text: str, **values: Value) -> tuple[str, Policy]:
    """`text` written with each `--vary` target (keys: the knob text, `__` for dots) set; the
    written text is checked to load to the candidate."""
    doc, policy = load(text)
    assignment = {parse_vary(f"{name.replace('__', '.')}={_span(name, value)}", policy): value
                  for name, value in values.items()}
    out = write_policy(text, "policy.yaml", policy, assignment)
    assert_loads_as(out, doc, policy, assignment)
    return out, policy


def _span(name: str, value: Value) -> str:
    if isinstance(value, bool):
        return "false:true"
    return "0:100" if "hresholds" in name else "0:1000"


def assert_loads_as(out: str, doc: dict[str, Any], policy: Policy,
                    assignment: dict[Knob, Value]) -> None:
    expected = candidate("policy.yaml", doc, policy, assignment)
    loaded = policy_from_document("policy.yaml", yaml.safe_load(out), PLUGINS)
    assert [p.args for p in loaded.profiles] == [p.args for p in expected.profiles]
    assert [p.enabled for p in loaded.profiles] == [p.enabled for p in expected.profiles]
    assert loaded.limits == expected.limits and loaded.format == expected.format


def changes(before: str, after: str) -> tuple[list[str], list[str]]:
    """(lines removed, lines added)."""
    removed, added = [], []
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        if line.startswith("- "):
            removed.append(line[2:])
        elif line.startswith("+ "):
            added.append(line[2:])
    return removed, added


def test_changed_values_only_comments_kept() -> None:
    text = LNU.read_text()
    doc, policy = load(text)
    target = parse_vary("LowNodeUtilization.targetThresholds.cpu=40:80", policy)
    low = parse_vary("LowNodeUtilization.thresholds.memory=10:30", policy)
    out = write_policy(text, "policy.yaml", policy, {target: 65, low: 15})
    assert changes(text, out) == (
        ["      thresholds: {cpu: 20, memory: 20, pods: 20}",
         "      targetThresholds: {cpu: 50, memory: 50, pods: 50}"],
        ["      thresholds: {cpu: 20, memory: 15, pods: 20}",
         "      targetThresholds: {cpu: 65, memory: 50, pods: 50}"])
    assert out.startswith("# LowNodeUtilization (upstream descheduler/v1alpha2)")
    assert_loads_as(out, doc, policy, {target: 65, low: 15})


def test_missing_keys_are_new_lines_at_their_mappings_indentation() -> None:
    text = LNU.read_text()
    out, _ = written(text, LowNodeUtilization__numberOfNodes=2, maxNoOfPodsToEvictPerNode=3,
                     LowNodeUtilization__useDeviationThresholds=True)
    assert changes(text, out) == ([], ["      numberOfNodes: 2",
                                       "      useDeviationThresholds: true",
                                       "maxNoOfPodsToEvictPerNode: 3"])
    # The args' entries end with a nested block mapping: the new keys follow its last line.
    assert "        exclude: [kube-system]\n      numberOfNodes: 2\n" in out


def test_high_node_utilization() -> None:
    text = HNU.read_text()
    out, _ = written(text, HighNodeUtilization__thresholds__cpu=35,
                     HighNodeUtilization__numberOfNodes=1)
    assert changes(text, out) == (["      thresholds: {cpu: 20, memory: 20}"],
                                  ["      thresholds: {cpu: 35, memory: 20}",
                                   "      numberOfNodes: 1"])


def test_koordinator_low_node_load() -> None:
    text = HOTSPOT.read_text()
    out, _ = written(text, LowNodeLoad__highThresholds__memory=75,
                     LowNodeLoad__useDeviationThresholds=True, LowNodeLoad__lowThresholds__cpu=12.5)
    assert changes(text, out) == (
        ["      useDeviationThresholds: false", "      lowThresholds: {cpu: 20, memory: 30}",
         "      highThresholds: {cpu: 50, memory: 60}"],
        ["      useDeviationThresholds: true", "      lowThresholds: {cpu: 12.5, memory: 30}",
         "      highThresholds: {cpu: 50, memory: 75}"])
    assert out.splitlines()[:10] == text.splitlines()[:10]  # the comments


def test_a_pool_gets_its_own_copy_of_an_inherited_map() -> None:
    out, _ = written(POOLS, LowNodeLoad__nodePools__batch__highThresholds__memory=75,
                     LowNodeLoad__nodePools__gpu__pool__highThresholds__cpu=80)
    assert changes(POOLS, out) == (
        ["        highThresholds: {cpu: 70, memory: 60}"],
        ["        highThresholds: {cpu: 80, memory: 60}",
         "        highThresholds: {cpu: 50, memory: 75}"])
    assert out.endswith('        nodeSelector: {matchLabels: {batch: "true"}}\n'
                        "        highThresholds: {cpu: 50, memory: 75}\n")


def test_v1alpha1_params_with_quoted_keys() -> None:
    out, _ = written(V1ALPHA1, LowNodeUtilization__targetThresholds__cpu=60,
                     LowNodeUtilization__numberOfNodes=3, maxNoOfPodsToEvictPerNode=4,
                     PodLifeTime__maxPodLifeTimeSeconds=600)
    assert changes(V1ALPHA1, out) == (
        ["maxNoOfPodsToEvictPerNode: 10", '           "cpu" : 50',
         "       podLifeTime: {states: [Pending]}"],
        ["maxNoOfPodsToEvictPerNode: 4", '           "cpu" : 60', "         numberOfNodes: 3",
         "       podLifeTime: {states: [Pending], maxPodLifeTimeSeconds: 600}"])


def test_a_key_added_among_quoted_keys_is_quoted() -> None:
    text = V1ALPHA1.replace("       nodeResourceUtilizationThresholds:",
                            '       "nodeResourceUtilizationThresholds":')
    text = text.replace("         thresholds:", '         "thresholds":')
    out, _ = written(text, LowNodeUtilization__numberOfNodes=3)
    assert changes(text, out) == ([], ['         "numberOfNodes": 3'])


def test_a_configmaps_policy_is_edited_inside_its_block() -> None:
    inner = textwrap.dedent("""\
        apiVersion: "descheduler/v1alpha2"
        kind: "DeschedulerPolicy"
        profiles:
        - name: default
          pluginConfig:
          - name: DefaultEvictor
            args:
              nodeFit: true   # evict only what fits elsewhere
          - name: LowNodeUtilization
            args:
              thresholds:
                cpu: 20
                memory: 20

              targetThresholds:
                cpu: 50
                memory: 50
          plugins:
            balance:
              enabled: [LowNodeUtilization]
        """)
    text = "# as the Helm chart ships it\n" + configmap(inner)
    out, _ = written(text, LowNodeUtilization__targetThresholds__memory=70,
                     LowNodeUtilization__numberOfNodes=2, maxNoOfPodsToEvictTotal=5)
    assert changes(text, out) == (["            memory: 50"],
                                  ["            memory: 70", "          numberOfNodes: 2",
                                   "    maxNoOfPodsToEvictTotal: 5"])
    assert "nodeFit: true   # evict only what fits elsewhere" in out
    assert out.startswith("# as the Helm chart ships it\napiVersion: v1\nkind: ConfigMap\n")


def test_a_configmaps_quoted_policy_is_rewritten_as_one_string() -> None:
    inner = LNU.read_text()
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d  # the chart's\ndata:\n"
            f"  policy.yaml: {json.dumps(inner)}\n")
    out, _ = written(text, LowNodeUtilization__thresholds__cpu=10)
    removed, added = changes(text, out)
    assert len(removed) == len(added) == 1 and removed[0].startswith("  policy.yaml: ")
    value = yaml.safe_load(out)["data"]["policy.yaml"]
    assert changes(inner, value) == (["      thresholds: {cpu: 20, memory: 20, pods: 20}"],
                                     ["      thresholds: {cpu: 10, memory: 20, pods: 20}"])
    assert "metadata:\n  name: d  # the chart's\n" in out


@pytest.mark.parametrize("indent", [2, None])
def test_json_gives_json(indent: int | None) -> None:
    text = json.dumps(yaml.safe_load(LNU.read_text()), indent=indent) + "\n"
    out, _ = written(text, LowNodeUtilization__targetThresholds__cpu=65,
                     LowNodeUtilization__numberOfNodes=2, maxNoOfPodsToEvictPerNode=3)
    doc = json.loads(out)
    assert doc["maxNoOfPodsToEvictPerNode"] == 3
    assert doc["profiles"][0]["pluginConfig"][1]["args"]["numberOfNodes"] == 2
    if indent is None:
        assert len(out.splitlines()) == 1
        assert out.endswith('"exclude": ["kube-system"]}, "numberOfNodes": 2}}], "plugins": '
                            '{"balance": {"enabled": ["LowNodeUtilization"]}}}], '
                            '"maxNoOfPodsToEvictPerNode": 3}\n')
    else:
        assert changes(text, out) == (
            ['              "cpu": 50,', "            }", "  ]"],
            ['              "cpu": 65,', "            },", '            "numberOfNodes": 2',
             "  ],", '  "maxNoOfPodsToEvictPerNode": 3'])


def test_a_plugin_without_config_and_null_args() -> None:
    bare = POOLS.split("  pluginConfig:")[0]
    out, _ = written(bare, LowNodeLoad__numberOfNodes=2)
    assert changes(bare, out) == ([], ["  pluginConfig: [{name: LowNodeLoad, args: "
                                       "{numberOfNodes: 2}}]"])
    null = bare + "  pluginConfig:\n  - name: LowNodeLoad\n    args:\n"
    out, _ = written(null, LowNodeLoad__numberOfNodes=2)
    assert changes(null, out) == (["    args:"], ["    args: {numberOfNodes: 2}"])


@pytest.mark.parametrize("wrap", [False, True])
def test_crlf_lines_stay_crlf(wrap: bool) -> None:
    text = (configmap(LNU.read_text()) if wrap else LNU.read_text()).replace("\n", "\r\n")
    out, _ = written(text, LowNodeUtilization__numberOfNodes=2, maxNoOfPodsToEvictPerNode=3)
    assert out.count("\n") == out.count("\r\n") == text.count("\r\n") + 2


def test_anchored_args_are_written_anew() -> None:
    text = LNU.read_text().replace("    args:\n      thresholds",
                                   "    args: &lnu\n      thresholds") + textwrap.dedent("""\
        - name: second
          pluginConfig:
          - name: LowNodeUtilization
            args: *lnu
          plugins:
            balance:
              enabled: [LowNodeUtilization]
        """)
    out, _ = written(text, LowNodeUtilization__targetThresholds__cpu=70)
    assert out.startswith(f"{ANEW}: the input's comments and layout were not kept (a changed "
                          f"value is shared through a YAML anchor)\n")
    assert [p.args["LowNodeUtilization"].target_thresholds["cpu"] for p in
            policy_from_document("p", yaml.safe_load(out), PLUGINS).profiles] == [70, 70]


def test_json_written_anew_is_json() -> None:
    doc = yaml.safe_load(LNU.read_text())
    text = json.dumps(doc, indent=2).replace('"kind": "DeschedulerPolicy",',
                                             '"kind": "DeschedulerPolicy",\n'
                                             '  "kind": "DeschedulerPolicy",')
    out, _ = written(text, LowNodeUtilization__thresholds__cpu=25)
    assert json.loads(out)["profiles"][0]["pluginConfig"][1]["args"]["thresholds"]["cpu"] == 25
    assert out.count('"kind"') == 1


def test_a_configmap_written_anew_keeps_its_policy_a_block() -> None:
    inner = LNU.read_text().replace("    args:\n      thresholds",
                                    "    args: &lnu\n      thresholds")
    inner += "- name: second\n  pluginConfig:\n  - {name: LowNodeUtilization, args: *lnu}\n"
    text = configmap(inner)
    out, _ = written(text, LowNodeUtilization__thresholds__cpu=25)
    assert out.startswith(ANEW) and "  policy.yaml: |\n    apiVersion: descheduler/v1alpha2\n" \
        in out


def test_an_invalid_candidate_raises() -> None:
    text = LNU.read_text()
    _, policy = load(text)
    knob = parse_vary("LowNodeUtilization.thresholds.cpu=10:90", policy)
    with pytest.raises(PolicyError, match="greater than targetThresholds'"):
        write_policy(text, "policy.yaml", policy, {knob: 80})


# -- any values within the knobs' bounds -----------------------------------------------------


def _values(knob: Knob) -> st.SearchStrategy[Value]:
    if knob.boolean:
        return st.booleans()
    grid: st.SearchStrategy[Value] = st.sampled_from(knob.values())
    if knob.integer:
        return grid | st.integers(int(knob.low), int(knob.high))
    return grid | st.floats(float(knob.low), float(knob.high)).map(lambda v: round(v, 3))


def _check_any(text: str, knobs: list[Knob], data: st.DataObject) -> None:
    doc, policy = load(text)
    assignment = {k: data.draw(_values(k), label=k.text) for k in knobs}
    try:
        candidate("policy.yaml", doc, policy, assignment)
    except PolicyError:
        with pytest.raises(PolicyError):
            write_policy(text, "policy.yaml", policy, assignment)
        return
    out = write_policy(text, "policy.yaml", policy, assignment)
    assert not out.startswith(ANEW)
    assert_loads_as(out, doc, policy, assignment)
    removed, added = changes(text, out)
    assert len(removed) == len(added)  # values change in place; no key is missing here
    assert all("hresholds" in line or "numberOfNodes" in line for line in removed + added)


@settings(max_examples=40)
@given(st.data())
def test_any_values_within_the_default_knobs_round_trip(data: st.DataObject) -> None:
    text = LNU.read_text()
    _check_any(text, default_knobs(load(text)[1], CLUSTER), data)


@settings(max_examples=25)
@given(st.data())
def test_any_values_round_trip_through_a_configmap(data: st.DataObject) -> None:
    text = configmap(POOLS)
    _, policy = load(text)
    knobs = [parse_vary(t, policy) for t in (
        "LowNodeLoad.lowThresholds.cpu=0:50", "LowNodeLoad.highThresholds.memory=30:90:2.5",
        "LowNodeLoad.nodePools.gpu.pool.highThresholds.cpu=40:100",
        "LowNodeLoad.prodHighThresholds.cpu=20:60")]
    _check_any(text, knobs, data)
