"""`desched explain` through the real CLI: every case of issue 13's list."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASIC = ("--policy", str(EXAMPLES / "policy.yaml"), "--snapshot", str(EXAMPLES / "cluster.yaml"),
         "--now", "2026-11-22T12:00:00Z")
HOTSPOT = ("--policy", str(EXAMPLES / "lownodeload-hotspot" / "policy.yaml"), "--snapshot",
           str(EXAMPLES / "lownodeload-hotspot" / "cluster.yaml"))


def explain(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "desched", "explain", *args],
                          capture_output=True, text=True, check=False, timeout=60)


def ok(*args: str) -> str:
    proc = explain(*args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_an_unknown_pod_or_node_is_an_input_error_naming_the_nearest() -> None:
    for flag, name, what, near in (("--pod", "shop/reprot-28891", "pod", "shop/report-28891"),
                                   ("--node", "wroker-1", "node", "worker-1"),
                                   ("--node", "zz", "node", None)):
        proc = explain(*BASIC, flag, name)
        assert proc.returncode == 2
        hint = f'; did you mean "{near}"?' if near else ""
        assert proc.stderr == (f'error: {flag}: {what} "{name}" is not in the snapshot '
                               f'({EXAMPLES / "cluster.yaml"}){hint}\n')


def test_node_covers_every_pod_on_it_with_every_plugins_verdict() -> None:
    out = ok(*BASIC, "--node", "worker-1")
    assert "node worker-1: 7 pod(s)" in out
    pods = [line.split()[1] for line in out.splitlines() if line.startswith("  pod ")]
    assert len(pods) == 7
    # Each pod has a line from both enabled plugins.
    assert out.count("default/PodLifeTime: ") == 7
    assert out.count("default/RemoveDuplicates: ") == 7
    assert out.count("RemoveDuplicates: EVICTED: duplicate of ReplicaSet/web-5d8f9") == 2


def test_considered_not_picked_says_why() -> None:
    out = ok(*BASIC, "--pod", "shop/api-7c4b2-a")
    assert ("default/PodLifeTime: considered, not picked: pod age 187200s (2d4h) does not "
            "exceed maxPodLifeTimeSeconds 604800 (7d)") in out
    system = ok(*BASIC, "--pod", "kube-system/log-agent-w1")
    assert ("default/PodLifeTime: considered, not picked: namespace kube-system is outside the "
            "plugin's namespaces") in system
    assert ("default/RemoveDuplicates: kept: pod is related to daemonset and is protected "
            "against eviction") in system


def test_a_pdb_refusal_names_the_budget_and_its_numbers() -> None:
    out = ok(*BASIC, "--pod", "shop/api-7c4b2-b")
    assert ("default/RemoveDuplicates: not evicted (PDB): Cannot evict pod as it would violate "
            "the pod's disruption budget. (PodDisruptionBudget shop/api: healthy 3, desired "
            "healthy 3, disruptionsAllowed 0)") in out


def test_the_deciding_plugin_of_an_eviction() -> None:
    out = ok(*BASIC, "--pod", "shop/report-28891")
    assert "default/PodLifeTime: EVICTED: pod age 1850400s (21d10h) exceeds" in out


def test_cycles_explain_the_decision_of_a_later_cycle_and_node_notes() -> None:
    out = ok(*HOTSPOT, "--pod", "default/stress-demo-588f9646cf-s7x2k", "--cycles", "7")
    lines = out.splitlines()
    assert lines[0].startswith("clock: 2026-11-22T11:59:30Z (newest timestamp in the snapshot")
    assert ("koord-descheduler/LowNodeLoad: considered, not picked: node cn-beijing.10.0.0.53 "
            "is hot (cpu 68.53% > 50.00%) on 1 consecutive pass(es)") in out
    cycle6 = lines[lines.index("  cycle 6:") + 1]
    assert cycle6.startswith("    koord-descheduler/LowNodeLoad: EVICTED: node is overutilized")
    assert "  cycle 7: gone (evicted in cycle 6)" in lines


def test_reschedule_and_scheduler_are_accepted() -> None:
    out = ok(*HOTSPOT, "--node", "cn-beijing.10.0.0.53", "--cycles", "6", "--reschedule",
             "--scheduler", "koord-load-aware")
    assert "node cn-beijing.10.0.0.53: 4 pod(s)" in out
    assert "EVICTED" in out


def test_node_notes_are_shown_once_for_the_node() -> None:
    out = ok(*HOTSPOT, "--node", "cn-beijing.10.0.0.53", "--cycles", "2")
    assert out.count("note, cycle 1, koord-descheduler/LowNodeLoad: node cn-beijing.10.0.0.53 "
                     "is hot") == 1


def test_a_duplicate_removeduplicates_kept_says_so() -> None:
    out = ok(*BASIC, "--pod", "shop/web-5d8f9-1")
    assert ("default/RemoveDuplicates: considered, not picked: duplicate of ReplicaSet/web-5d8f9: "
            "node worker-1 runs 4, the ceiling of the average is 2 over 3 feasible nodes, and "
            "this one is within it") in out
    first = ok(*BASIC, "--pod", "shop/web-5d8f9-0")
    assert ("default/RemoveDuplicates: considered, not picked: not a duplicate: the first pod of "
            "ReplicaSet/web-5d8f9 with its images on node worker-1") in first


def test_reschedule_follows_the_pod_to_its_replacement() -> None:
    pod = "default/stress-demo-588f9646cf-s7x2k"
    out = ok(*HOTSPOT, "--pod", pod, "--cycles", "14", "--reschedule")
    # kube-default puts the replacement back on the hot node, where LowNodeLoad evicts it
    # again once the node has been hot long enough: the ping-pong, told pod by pod.
    assert f"  after cycle 6: replaced by {pod}-r6, placed on cn-beijing.10.0.0.53" in out
    assert f"    after cycle 12: replaced by {pod}-r12, placed on cn-beijing.10.0.0.53" in out
    assert out.count("LowNodeLoad: EVICTED") == 2
    assert out.count(f"pod {pod}-r6 on cn-beijing.10.0.0.53:") == 1  # told once, nested
    assert "gone (evicted" not in out
    # The load-aware model with the guard places it on the idle node, where it stays.
    guarded = ("--policy", str(EXAMPLES / "lownodeload-hotspot" /
                               "policy-guard-koord-load-aware.yaml"), *HOTSPOT[2:])
    out = ok(*guarded, "--pod", pod, "--cycles", "14", "--reschedule",
             "--scheduler", "koord-load-aware")
    assert out.count("LowNodeLoad: EVICTED") == 1
    assert "replaced by" in out and "placed on cn-beijing.10.0.0.215" in out
    assert "cycle 14:" in out


# -- issue 36: explain follows the pod as far as the run goes, protection and scope first ------

def test_reschedule_tells_where_the_replacement_lands_in_a_single_cycle() -> None:
    # The run places the replacement after its one cycle (simulate prints it): explain says
    # where, without --cycles 2.
    out = ok(*BASIC, "--pod", "shop/web-5d8f9-2", "--reschedule").splitlines()
    assert out[-2].startswith("    default/RemoveDuplicates: EVICTED: duplicate of ")
    assert out[-1] == ("  after cycle 1: replaced by shop/web-5d8f9-2-r1, placed on worker-2 "
                       "(the run ends here; --cycles 2 explains it there)")
    simulated = subprocess.run([sys.executable, "-m", "desched", "simulate", *BASIC,
                                "--reschedule"], capture_output=True, text=True, check=True,
                               timeout=60).stdout
    assert "  placed  shop/web-5d8f9-2-r1 on worker-2\n" in simulated
    # --cycles 2 follows it on, as before.
    two = ok(*BASIC, "--pod", "shop/web-5d8f9-2", "--reschedule", "--cycles", "2")
    assert "  after cycle 1: replaced by shop/web-5d8f9-2-r1, placed on worker-2\n" in two
    assert "  pod shop/web-5d8f9-2-r1 on worker-2:\n    cycle 2:\n" in two


def test_a_filters_protection_is_told_first_even_when_no_plugin_asked() -> None:
    # PodLifeTime's namespaces leave kube-system out and RemoveDuplicates skips a pod without
    # owner before asking the filters: the mirror pod's protection is still told, first.
    lines = ok(*BASIC, "--pod", "kube-system/etcd-worker-3").splitlines()
    assert lines[2:] == [
        "  cycle 1:",
        "    protected: pod is a mirror pod; pod is a static pod; pod has system critical "
        "priority and is protected against eviction; pod does not have any ownerRefs "
        "(default/DefaultEvictor)",
        "    default/PodLifeTime: considered, not picked: namespace kube-system is outside the "
        "plugin's namespaces; protected, so kept even if picked",
        "    default/RemoveDuplicates: considered, not picked: pod has no owner: not a duplicate "
        "of anything; protected, so kept even if picked"]
    # An unprotected pod gets no such line.
    assert "protected" not in ok(*BASIC, "--pod", "shop/web-5d8f9-1")


def test_a_namespace_scope_decides_before_the_runs_generic_note(tmp_path: Path) -> None:
    # LowNodeUtilization with evictableNamespaces excluding kube-system, on a cluster all under
    # its targets: for coredns the scope decides; the run's note comes after it.
    lnu = EXAMPLES / "plugins" / "LowNodeUtilization"
    policy = tmp_path / "policy.yaml"
    policy.write_text((lnu / "policy.yaml").read_text().replace(
        "targetThresholds: {cpu: 50, memory: 50, pods: 50}",
        "targetThresholds: {cpu: 95, memory: 95, pods: 95}"))
    out = ok("--policy", str(policy), "--snapshot", str(lnu / "cluster.yaml"),
             "--pod", "kube-system/coredns-0")
    assert out.splitlines()[-1] == (
        "    default/LowNodeUtilization: considered, not picked: namespace kube-system is "
        "outside the plugin's evictableNamespaces; All nodes are under target utilization, "
        "nothing to do here")
    # A pod inside the scope gets the run's note alone.
    shop = ok("--policy", str(policy), "--snapshot", str(lnu / "cluster.yaml"),
              "--pod", "shop/web-0")
    assert shop.splitlines()[-1] == ("    default/LowNodeUtilization: considered, not picked: "
                                     "All nodes are under target utilization, nothing to do "
                                     "here")


def test_a_pod_name_without_namespace_is_resolved_when_one_pod_has_it(tmp_path: Path) -> None:
    # `kubectl get pod NAME` habits: NAME alone is the one pod of that name.
    assert ok(*BASIC, "--pod", "web-5d8f9-2") == ok(*BASIC, "--pod", "shop/web-5d8f9-2")
    # No pod of that name: the nearest one, in one line.
    proc = explain(*BASIC, "--pod", "web-5d8f9-9")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f'error: --pod: no pod named "web-5d8f9-9" is in the snapshot '
                           f'({EXAMPLES / "cluster.yaml"}); did you mean "shop/web-5d8f9-3"?\n')
    # Two namespaces hold one: both named, and the form that picks one.
    staging = tmp_path / "staging.yaml"
    staging.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web-5d8f9-2, namespace: staging}\n"
        "spec: {nodeName: worker-2, containers: [{name: main, image: nginx}]}\n"
        "status: {phase: Running}\n")
    both = (*BASIC, "--snapshot", str(staging))
    proc = explain(*both, "--pod", "web-5d8f9-2")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f'error: --pod: 2 pods are named "web-5d8f9-2" in the snapshot '
                           f'({EXAMPLES / "cluster.yaml"}, {staging}): give NAMESPACE/NAME; '
                           f'did you mean "shop/web-5d8f9-2" or "staging/web-5d8f9-2"?\n')
    assert "pod staging/web-5d8f9-2 on worker-2:" in ok(*both, "--pod", "staging/web-5d8f9-2")
