"""examples/plugins/CustomPriority, as `desched simulate` and `desched explain` tell it: the
evictions, the cordon in the snapshot (what --reschedule places around), the node left alone and
why, and the policy loading without warnings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builders import NOW
from desched.errors import InputError
from desched.framework.runner import check_policy
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import load_policy
from desched.report.render import render
from desched.simulate.explain import explain_run
from desched.simulate.simulation import Simulation, run_simulation

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "plugins" / "CustomPriority"
POLICY, CLUSTER = str(EXAMPLE / "policy.yaml"), str(EXAMPLE / "cluster.yaml")
NOT_DRAINED = ("node elastic-2 of tier on-demand is not drained: not all of its 2 pod(s) can be "
               "placed; first: batch/report-5d7c9-z3x4c: no cheaper node can take it: static-1: "
               "insufficient cpu; static-2: insufficient cpu")
CORDONED = "cordoned node elastic-1: autoCordon: draining its 2 pod(s) to cheaper tiers"


def test_the_policy_loads_without_warnings() -> None:
    policy = load_policy(POLICY, PLUGINS)
    assert policy.warnings == []
    assert policy.profiles[0].enabled["balance"] == ["CustomPriority"]


def test_simulate() -> None:
    result = run_simulation(POLICY, [CLUSTER], NOW, warn=lambda _: None)
    out = json.loads(render(result, "json"))
    assert [(e["namespace"], e["pod"], e["node"], e["reason"]) for e in out["evictions"]] == [
        ("shop", pod, "elastic-1",
         "drain node elastic-1 (sourcePriority=on-demand); fits now on static-1")
        for pod in ("web-6c8d9-a1b2c", "web-6c8d9-d3e4f")]
    text = render(result, "text")
    assert f"cycle 1 node elastic-1 [koord-descheduler/CustomPriority]: {CORDONED}" in text
    assert f"cycle 1 node elastic-2 [koord-descheduler/CustomPriority]: {NOT_DRAINED}" in text
    assert "1 [koord-descheduler/CustomPriority] namespace kube-system is not evictable" in text


def test_the_cordon_holds_for_the_replacements_and_the_next_cycle() -> None:
    simulation = Simulation(POLICY, [CLUSTER], NOW, cycles=2, reschedule=True,
                            warn=lambda _: None)
    result = simulation.run()
    assert simulation.snapshot.nodes["elastic-1"].spec.unschedulable
    assert not simulation.snapshot.nodes["elastic-2"].spec.unschedulable
    # On the committed nodes (spread by the ReplicaSet's default topology spreading), none on
    # the cordoned elastic-1, though it is the emptiest node now.
    placed = dict(result.summaries[0].placements)
    assert placed == {"shop/web-6c8d9-a1b2c-r1": "static-1", "shop/web-6c8d9-d3e4f-r1": "static-2"}
    # Nothing more moves in cycle 2: elastic-1 holds only its DaemonSet pod.
    assert [d.cycle for d in result.log.evictions()] == [1, 1]


def test_explain_node_and_pod() -> None:
    node = explain_run(POLICY, [CLUSTER], NOW, None, "elastic-1")
    assert ("  koord-descheduler/CustomPriority (cycle 1): tier on-demand: a source for the "
            "cheaper tier(s) committed; node elastic-1 of tier on-demand drained (2 pod(s))"
            in node)
    assert "  unschedulable (cordoned);" in node
    assert f"note, cycle 1, koord-descheduler/CustomPriority: {CORDONED}" in node
    pod = explain_run(POLICY, [CLUSTER], NOW, "shop/api-7f5b4-q8w9e", None)
    assert (f"koord-descheduler/CustomPriority: considered, not picked: {NOT_DRAINED}" in pod)
    cheap = explain_run(POLICY, [CLUSTER], NOW, "shop/db-0", None)
    assert ("considered, not picked: node static-1 is in tier committed, the cheapest with "
            "nodes: its pods have nowhere cheaper to go") in cheap


def test_args_koordinator_refuses_fail_the_policy_check_in_one_line(tmp_path: Path) -> None:
    """`desched validate` builds the plugins (check_policy): the error names the file."""
    bad = tmp_path / "policy.yaml"
    bad.write_text((EXAMPLE / "policy.yaml").read_text().replace("mode: DrainNode",
                                                                  "mode: Drain"))
    with pytest.raises(InputError) as err:
        check_policy(load_policy(str(bad), PLUGINS))
    assert (err.value.source, err.value.message) == (
        str(bad), 'initializing plugin "CustomPriority": invalid mode: Drain, supported: '
                  'BestEffort, DrainNode')


def test_without_the_cordon_a_replacement_comes_back(tmp_path: Path) -> None:
    """What autoCordon is for: uncordoned, the emptied on-demand node is the emptiest, and the
    scheduler model puts a replacement back on it (churn)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text((EXAMPLE / "policy.yaml").read_text().replace("autoCordon: true",
                                                                     "autoCordon: false"))
    result = Simulation(str(policy), [CLUSTER], NOW, reschedule=True, warn=lambda _: None).run()
    assert "elastic-1" in dict(result.summaries[0].placements).values()


def test_pingpongguard_refuses_a_move_whose_replacement_lands_on_an_expensive_node(
        tmp_path: Path) -> None:
    """The scheduler model would put the replacement on the empty second on-demand node, not on
    the committed one: PingPongGuard, told by CustomPriority that the node is no cheaper, keeps
    the pod where it is."""
    policy = tmp_path / "policy.yaml"
    policy.write_text((EXAMPLE / "policy.yaml").read_text()
                      .replace("enabled: [{name: DefaultEvictor}]\n  pluginConfig",
                               "enabled: [{name: DefaultEvictor}, {name: PingPongGuard}]\n"
                               "  pluginConfig")
                      .replace("mode: DrainNode", "mode: BestEffort")
                      .replace("autoCordon: true", "autoCordon: false"))
    assert "PingPongGuard" in policy.read_text()
    cluster = tmp_path / "cluster.yaml"
    nodes = [("od-1", "on-demand"), ("od-2", "on-demand"), ("st-1", "committed")]
    items: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                               "node.example.com/billing": billing}},
         "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}]}}
        for name, billing in nodes]
    # The committed node is busy: the model's least-allocated choice is the empty od-2.
    items += [_pod("web-0", "od-1", "500m", "1Gi"), _pod("db-0", "st-1", "3", "12Gi")]
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    result = run_simulation(str(policy), [str(cluster)], NOW, warn=lambda _: None)
    assert result.log.evictions() == []
    kept = [d.reason for d in result.log.decisions if d.pod == "web-0"]
    assert kept == [], kept  # filter verdicts are counted, not recorded, outside explain
    [(reason, count)] = [(r, n) for (_, _, plugin, r), n in result.log.kept.items()
                         if plugin == "CustomPriority"]
    assert count == 1
    assert reason.startswith("replacement would land on od-2 (kube-default), where "
                             "CustomPriority has it in tier on-demand, not cheaper than tier "
                             "on-demand"), reason


def _pod(name: str, node: str, cpu: str, memory: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "shop", "uid": f"uid-{name}",
                         "creationTimestamp": "2026-11-20T08:00:00Z",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": name.split("-")[0],
                                              "uid": f"uid-{name.split('-')[0]}",
                                              "controller": True}]},
            "spec": {"nodeName": node, "containers": [
                {"name": "main", "image": "app:1",
                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True"}]}}
