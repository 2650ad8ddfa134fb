"""Issue 22, item 4: a policy's or plugin's node selector that matches no node, and a namespace
include naming no namespace of the snapshot, are said in one line with the counts: on stderr as a
warning, in simulate's text and JSON, and beside the plugin's own message in explain. Upstream's
messages ("Skipping descheduling cycle: requires >=2 nodes", "No nodes to process LowNodeLoad")
stay. Through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
HOTSPOT = EXAMPLES / "lownodeload-hotspot"
CLUSTER = str(EXAMPLES / "cluster.yaml")
HOT_CLUSTER = str(HOTSPOT / "cluster.yaml")
NOW = "2026-11-22T12:00:00Z"
SKIP = "Skipping descheduling cycle: requires >=2 nodes"

# Upstream README's example policy, nodeSelector and all.
PROD_DEV = """\
apiVersion: "descheduler/v1alpha2"
kind: "DeschedulerPolicy"
nodeSelector: "prod=dev"
profiles:
  - name: ProfileName
    pluginConfig:
    - name: "DefaultEvictor"
    - name: "RemoveDuplicates"
    plugins:
      balance:
        enabled:
          - "RemoveDuplicates"
"""

# RemoveDuplicates limited to a misspelt namespace.
SHOPP = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: p
  pluginConfig:
  - name: RemoveDuplicates
    args: {namespaces: {include: [shopp]}}
  plugins:
    balance: {enabled: [RemoveDuplicates]}
"""


def desched(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "desched", *args], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc


def write(tmp_path: Path, text: str, name: str = "policy.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def hotspot_policy(tmp_path: Path, args: str, extra: str = "") -> str:
    """The hotspot example's policy with more LowNodeLoad args (and more pluginConfig)."""
    text = (HOTSPOT / "policy.yaml").read_text(encoding="utf-8").replace(
        "      useDeviationThresholds: false\n", f"      useDeviationThresholds: false\n{args}")
    return write(tmp_path, text + extra)


def said(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The warnings on stderr, which the text report repeats under its first line."""
    lines = [line.removeprefix("warning: ") for line in proc.stderr.splitlines()]
    assert len(lines) == len(proc.stderr.splitlines())
    report = proc.stdout.splitlines()
    assert report[1:1 + len(lines)] == [f"  warning: {line}" for line in lines]
    return lines


def test_upstream_readmes_node_selector_is_named(tmp_path: Path) -> None:
    policy = write(tmp_path, PROD_DEV)
    proc = desched("simulate", "--policy", policy, "--snapshot", CLUSTER)
    assert said(proc) == ['nodeSelector "prod=dev" matches 0 of 3 nodes: the cycle is skipped']
    assert f"cycle 1: 0 pod(s) evicted ({SKIP})" in proc.stdout  # upstream's message stays
    report = json.loads(desched("simulate", "--policy", policy, "--snapshot", CLUSTER, "-o",
                                "json").stdout)
    assert report["warnings"] == said(proc)
    assert report["cyclesSkipped"] == [{"cycle": 1, "reason": SKIP}]
    explained = desched("explain", "--policy", policy, "--snapshot", CLUSTER, "--pod",
                        "shop/web-5d8f9-0")
    assert (f"  cycle 1: nothing was evaluated: {SKIP}; nodeSelector \"prod=dev\" matches 0 of "
            f"3 nodes: the cycle is skipped") in explained.stdout.splitlines()
    assert explained.stderr == proc.stderr


def test_a_node_selector_leaving_one_node_says_the_cycle_needs_two(tmp_path: Path) -> None:
    policy = write(tmp_path, PROD_DEV.replace('"prod=dev"', '"topology.kubernetes.io/zone=zone-a"'))
    proc = desched("simulate", "--policy", policy, "--snapshot", CLUSTER)
    assert said(proc) == ['nodeSelector "topology.kubernetes.io/zone=zone-a" matches 1 of 3 '
                          'nodes: the cycle is skipped, which needs 2 ready nodes']
    matching = write(tmp_path, PROD_DEV.replace('"prod=dev"', '"topology.kubernetes.io/zone"'),
                     "all.yaml")
    assert desched("simulate", "--policy", matching, "--snapshot", CLUSTER).stderr == ""


def test_lownodeload_node_selector_and_pools(tmp_path: Path) -> None:
    policy = hotspot_policy(tmp_path, "      nodeSelector: {matchLabels: {pool: gpu}}\n")
    proc = desched("simulate", "--policy", policy, "--snapshot", HOT_CLUSTER, "--now", NOW)
    assert said(proc) == ['LowNodeLoad nodeSelector "pool=gpu" matches 0 of 3 nodes']
    assert "No nodes to process LowNodeLoad (node pool __default_node_pool__)" in proc.stdout
    explained = desched("explain", "--policy", policy, "--snapshot", HOT_CLUSTER, "--now", NOW,
                        "--node", "cn-beijing.10.0.0.53").stdout
    assert ("  koord-descheduler/LowNodeLoad (cycle 1): not classified: No nodes to process "
            "LowNodeLoad (node pool __default_node_pool__); LowNodeLoad nodeSelector "
            '"pool=gpu" matches 0 of 3 nodes') in explained.splitlines()
    assert ('koord-descheduler/LowNodeLoad: considered, not picked: No nodes to process '
            'LowNodeLoad (node pool __default_node_pool__); LowNodeLoad nodeSelector "pool=gpu" '
            'matches 0 of 3 nodes') in explained

    pools = hotspot_policy(tmp_path, """\
      nodePools:
      - name: gpu
        nodeSelector:
          matchExpressions: [{key: pool, operator: In, values: [gpu, tpu]}]
        lowThresholds: {cpu: 20, memory: 30}
        highThresholds: {cpu: 50, memory: 60}
""")
    proc = desched("simulate", "--policy", pools, "--snapshot", HOT_CLUSTER, "--now", NOW)
    assert said(proc) == ['LowNodeLoad nodePools "gpu" nodeSelector "pool in (gpu,tpu)" matches '
                          '0 of 3 nodes']


def test_evictor_node_selectors(tmp_path: Path) -> None:
    policy = hotspot_policy(tmp_path, "", """\
  - name: DefaultEvictor
    args: {nodeSelector: "pool=cpu", nodeFit: true}
""")
    proc = desched("simulate", "--policy", policy, "--snapshot", HOT_CLUSTER, "--now", NOW)
    assert said(proc) == ['DefaultEvictor nodeSelector "pool=cpu" matches 0 of 3 nodes: its '
                          'nodeFit finds no other node for any pod']
    off = hotspot_policy(tmp_path, "", """\
  - name: DefaultEvictor
    args: {nodeSelector: "pool=cpu"}
""")
    proc = desched("simulate", "--policy", off, "--snapshot", HOT_CLUSTER, "--now", NOW)
    assert said(proc) == ['DefaultEvictor nodeSelector "pool=cpu" matches 0 of 3 nodes: it '
                          'scopes only nodeFit, which is off']


def test_a_namespace_include_naming_no_namespace(tmp_path: Path) -> None:
    policy = write(tmp_path, SHOPP)
    proc = desched("simulate", "--policy", policy, "--snapshot", CLUSTER)
    line = ('RemoveDuplicates namespaces.include names "shopp", which no namespace in the '
            'snapshot has (did you mean "shop"?): it considers no pod')
    assert said(proc) == [line]
    explained = desched("explain", "--policy", policy, "--snapshot", CLUSTER, "--pod",
                        "shop/web-5d8f9-0").stdout
    assert (f"    p/RemoveDuplicates: considered, not picked: namespace shop is outside the "
            f"plugin's namespaces; {line}") in explained.splitlines()

    several = write(tmp_path, SHOPP.replace("[shopp]", "[shop, kube-sytem, qa]"), "two.yaml")
    proc = desched("simulate", "--policy", several, "--snapshot", CLUSTER)
    assert said(proc) == ['RemoveDuplicates namespaces.include names "kube-sytem" (did you mean '
                          '"kube-system"?) and "qa", which no namespace in the snapshot has']
    # A pod in an included namespace is not told about the others.
    explained = desched("explain", "--policy", several, "--snapshot", CLUSTER, "--pod",
                        "shop/web-5d8f9-0").stdout
    assert "kube-sytem" not in explained


def test_lownodeload_evictable_namespaces_and_several_profiles(tmp_path: Path) -> None:
    policy = (HOTSPOT / "policy.yaml").read_text(encoding="utf-8").replace(
        "        exclude: [kube-system, koordinator-system]\n", "        include: [defualt]\n")
    path = write(tmp_path, policy)
    proc = desched("simulate", "--policy", path, "--snapshot", HOT_CLUSTER, "--now", NOW)
    assert said(proc) == ['LowNodeLoad evictableNamespaces.include names "defualt", which no '
                          'namespace in the snapshot has (did you mean "default"?): it considers '
                          'no pod']
    two = SHOPP + SHOPP[SHOPP.index("- name: p"):].replace("- name: p", "- name: q").replace(
        "[shopp]", "[shop]")
    proc = desched("simulate", "--policy", write(tmp_path, two, "two.yaml"), "--snapshot",
                   CLUSTER)
    assert said(proc) == ['p/RemoveDuplicates namespaces.include names "shopp", which no '
                          'namespace in the snapshot has (did you mean "shop"?): it considers '
                          'no pod']


def test_koordinator_policy_and_profile_selectors(tmp_path: Path) -> None:
    """Koordinator's selectors are LabelSelectors the policy keeps compiled: named by place."""
    text = (HOTSPOT / "policy.yaml").read_text(encoding="utf-8")
    top = write(tmp_path, text.replace("deschedulingInterval: 10s\n", "deschedulingInterval: "
                                       "10s\nnodeSelector: {matchLabels: {pool: gpu}}\n"))
    proc = desched("simulate", "--policy", top, "--snapshot", HOT_CLUSTER, "--now", NOW)
    assert said(proc) == ["the policy's nodeSelector matches 0 of 3 nodes: the cycle is skipped"]
    profile = write(tmp_path, text.replace("- name: koord-descheduler\n", "- name: koord-"
                                           "descheduler\n  nodeSelector: {matchLabels: "
                                           "{pool: gpu}}\n"), "profile.yaml")
    proc = desched("simulate", "--policy", profile, "--snapshot", HOT_CLUSTER, "--now", NOW)
    line = 'profile "koord-descheduler" nodeSelector matches 0 of 3 nodes: its plugins see no node'
    assert said(proc) == [line]
    explained = desched("explain", "--policy", profile, "--snapshot", HOT_CLUSTER, "--now", NOW,
                        "--pod", "default/web-7d9f8c6b5-abcde").stdout
    assert ("    koord-descheduler/LowNodeLoad: considered, not picked: No nodes to process "
            f"LowNodeLoad (node pool __default_node_pool__); {line}") in explained.splitlines()


def test_what_matches_says_nothing() -> None:
    for policy, snapshot in ((EXAMPLES / "policy.yaml", CLUSTER),
                             (HOTSPOT / "policy.yaml", HOT_CLUSTER)):
        proc = desched("simulate", "--policy", str(policy), "--snapshot", snapshot, "-o", "json")
        assert proc.stderr == ""
        assert json.loads(proc.stdout)["warnings"] == []
