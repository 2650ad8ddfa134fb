"""desched-deadline's own tests: its args and validation, and the plugin as desched runs it
(`desched validate`, `simulate -o json` and `explain` on example/), with the package installed
beside desched (`pip install -e '.[test]'`, then `pytest`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from desched_deadline import SPEC, RemovePodsPastDeadlineArgs, validate

HERE = Path(__file__).resolve().parents[1] / "example"
POLICY = HERE / "policy.yaml"
CLUSTER = HERE / "cluster.yaml"
NOW = "2026-03-01T06:00:00Z"


def desched(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "desched", *map(str, args)],
                          capture_output=True, text=True, timeout=120, check=False)


def args(**raw: object) -> RemovePodsPastDeadlineArgs:
    return msgspec.convert(raw, RemovePodsPastDeadlineArgs)


@pytest.mark.parametrize(("raw", "errors"), [
    ({}, []),
    ({"leadTime": "1h30m", "namespaces": {"exclude": ["kube-system"]}}, []),
    ({"leadTime": "soon"}, ['leadTime: time: invalid duration "soon"']),
    ({"leadTime": "-5m"}, ["leadTime: must not be negative, got -5m"]),
    ({"namespaces": {"include": ["a"], "exclude": ["b"]}},
     ["only one of Include/Exclude namespaces can be set"]),
])
def test_validate(raw: dict[str, object], errors: list[str]) -> None:
    assert validate(args(**raw)) == errors


def test_args_refuse_unknown_keys() -> None:
    with pytest.raises(msgspec.ValidationError, match="leadTme"):
        args(leadTme="1h")


def test_spec() -> None:
    assert SPEC.name == "RemovePodsPastDeadline"
    assert SPEC.extension_points == {"deschedule"}
    assert SPEC.annotations == ("deadline.example.com/evict-after",)
    scope = SPEC.scope(args(namespaces={"exclude": ["kube-system"]}))
    assert [(n.field, n.exclude) for n in scope.namespaces] == [("namespaces", ("kube-system",))]


def test_desched_validates_the_policy() -> None:
    proc = desched("validate", "--policy", POLICY)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ok\n", "")


def test_simulate_evicts_the_pods_past_or_near_their_deadline() -> None:
    proc = desched("simulate", "--policy", POLICY, "--snapshot", CLUSTER, "--now", NOW,
                   "-o", "json")
    assert proc.returncode == 0, proc.stderr
    evictions = json.loads(proc.stdout)["evictions"]
    # Earliest deadline first; DefaultEvictor keeps the bare debug pod; kube-system is out of
    # the plugin's namespaces; the third API pod's deadline is a day away.
    assert [(e["namespace"], e["pod"], e["plugin"], e["reason"]) for e in evictions] == [
        ("payments", "api-7c9f4-k2x8p", "RemovePodsPastDeadline",
         "deadline 2026-03-01T00:00:00Z (deadline.example.com/evict-after) passed 6h ago"),
        ("payments", "api-7c9f4-m4q7z", "RemovePodsPastDeadline",
         "deadline 2026-03-01T06:30:00Z (deadline.example.com/evict-after) is 30m away, "
         "within leadTime 1h"),
    ]


@pytest.mark.parametrize(("pod", "said"), [
    ("payments/api-7c9f4-r8w2n", "considered, not picked: deadline 2026-03-02T00:00:00Z "
                                 "(deadline.example.com/evict-after) is 18h away"),
    ("payments/worker-5d6b8-t7j3c", "kept: annotation deadline.example.com/evict-after "
                                    "'tomorrow' is not an RFC 3339 time"),
    ("kube-system/metrics-agent-9xv2d", "considered, not picked: namespace kube-system is "
                                        "outside the plugin's namespaces"),
    ("payments/web-84d7c-l9v2s", "considered, not picked: pod has no "
                                 "deadline.example.com/evict-after annotation"),
])
def test_explain_says_why_a_pod_stays(pod: str, said: str) -> None:
    proc = desched("explain", "--policy", POLICY, "--snapshot", CLUSTER, "--now", NOW,
                   "--pod", pod)
    assert proc.returncode == 0, proc.stderr
    assert f"default/RemovePodsPastDeadline: {said}" in proc.stdout, proc.stdout
