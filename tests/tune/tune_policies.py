"""Policies and a utilization spread the tune tests share: the shipped examples, a v1alpha1
policy, a Koordinator LowNodeLoad with node pools, and a ConfigMap wrapping any of them."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import yaml

from desched.framework.policy import Policy
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import policy_from_document
from desched.simulate.frames import Frame

ROOT = Path(__file__).resolve().parents[2]
LNU = ROOT / "examples/plugins/LowNodeUtilization/policy.yaml"
HNU = ROOT / "examples/plugins/HighNodeUtilization/policy.yaml"
HOTSPOT = ROOT / "examples/lownodeload-hotspot/policy.yaml"

V1ALPHA1 = """\
apiVersion: "descheduler/v1alpha1"
kind: "DeschedulerPolicy"
maxNoOfPodsToEvictPerNode: 10
strategies:
  "LowNodeUtilization":
     enabled: true
     params:
       nodeResourceUtilizationThresholds:
         thresholds:
           "cpu" : 20
           "memory": 20
         targetThresholds:
           "cpu" : 50
           "memory": 50
  "PodLifeTime":
     enabled: true
     params:
       podLifeTime: {states: [Pending]}
"""

POOLS = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: koord-descheduler
  plugins:
    balance:
      enabled: [{name: LowNodeLoad}]
    evict:
      disabled: [{name: "*"}]
      enabled: [{name: DefaultEvictor}]
    filter:
      disabled: [{name: "*"}]
      enabled: [{name: DefaultEvictor}]
  pluginConfig:
  - name: LowNodeLoad
    args:
      lowThresholds: {cpu: 20, memory: 30}
      highThresholds: {cpu: 50, memory: 60}
      prodHighThresholds: {cpu: 45}
      nodePools:
      - name: gpu.pool
        nodeSelector: {matchLabels: {gpu: "true"}}
        highThresholds: {cpu: 70, memory: 60}
      - name: batch
        nodeSelector: {matchLabels: {batch: "true"}}
"""


def configmap(policy_text: str) -> str:
    return ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: descheduler\ndata:\n"
            "  policy.yaml: |\n" + textwrap.indent(policy_text, "    "))


def load(text: str) -> tuple[dict[str, Any], Policy]:
    doc = yaml.safe_load(text)
    return doc, policy_from_document("policy.yaml", doc, PLUGINS)


def lnu_args(policy: Policy) -> Any:
    return next(p.args["LowNodeUtilization"] for p in policy.profiles
                if "LowNodeUtilization" in p.enabled.get("balance", []))


def spread(**series: list[float]) -> Frame:
    return Frame("before", {name.replace("_", " "): {f"n{i}": v for i, v in enumerate(values)}
                            for name, values in series.items()})


CLUSTER = spread(cpu_requests=[5, 12, 30, 41, 44, 52, 60, 71, 88, 93],
                 memory_requests=[40, 41, 42, 43, 44, 45, 46, 47, 48, 49],
                 pods=[10, 10, 10, 10, 10, 10, 10, 10, 10, 10])
