"""Values that only fail when used must fail at load (or use) as one-line input errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import NOW
from desched.errors import InputError
from desched.simulate.simulation import run_simulation
from desched.snapshot.loader import load_snapshot
from desched.util.duration import DurationError, parse_duration

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"

NODES = """
- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: "4", pods: "9"}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2}, status: {allocatable: {cpu: "4", pods: "9"}}}
"""


def write(tmp_path: Path, items: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(f"apiVersion: v1\nkind: List\nitems:{NODES}{items}")
    return str(path)


@pytest.mark.parametrize(("item", "fragment"), [
    ("- {apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: b, namespace: x},"
     " spec: {maxUnavailable: 'abc%'}}", "spec.maxUnavailable: 'abc%' is neither"),
    ("- {apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: b, namespace: x},"
     " spec: {minAvailable: '50.5%'}}", "spec.minAvailable: '50.5%' is neither"),
    ("- {apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: b, namespace: x},"
     " spec: {selector: {matchExpressions: [{key: a, operator: Bogus, values: [b]}]}}}",
     '"Bogus" is not a valid label selector operator'),
    ("- {apiVersion: v1, kind: Pod, metadata: {name: p, creationTimestamp: '2020-01-01T00:00:00'},"
     " spec: {nodeName: n1}}", "timezone"),
])
def test_rejected_at_load(tmp_path: Path, item: str, fragment: str) -> None:
    with pytest.raises(InputError) as info:
        load_snapshot([write(tmp_path, item)])
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_bad_quantity_names_the_pod(tmp_path: Path) -> None:
    # Checked when decoded, so no later computation (requests, QoS, fit) meets it unparsed.
    path = write(tmp_path, (
        "- {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: x}, spec: {nodeName: n1,"
        " containers: [{image: i, resources: {requests: {cpu: lots}}}]}}"))
    with pytest.raises(InputError, match=r'Pod "x/p"\): quantities must match.*requests'):
        load_snapshot([path])


@pytest.mark.parametrize("text", ["99999999999h", "9223372036854775808ns"])
def test_durations_beyond_go_int64_are_invalid(text: str) -> None:
    with pytest.raises(DurationError, match="invalid duration"):
        parse_duration(text)


def test_huge_min_pod_age_is_a_policy_error(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("""apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: a
  pluginConfig:
  - {name: DefaultEvictor, args: {minPodAge: 99999999999h}}
  - {name: RemoveDuplicates}
  plugins: {balance: {enabled: [RemoveDuplicates]}}
""")
    with pytest.raises(InputError, match='invalid duration "99999999999h"'):
        run_simulation(str(policy), [str(EXAMPLES / "cluster.yaml")], NOW, 1, False)
