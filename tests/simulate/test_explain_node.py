"""`desched explain --node` through the real CLI (issue 21): the node's header first (its
utilization, its role for each utilization plugin, taints, cordon, pool labels), replacements
that arrive on it under --reschedule, and a protected pod's protection before any verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from desched.commands.cli import main

PLUGINS = Path(__file__).resolve().parents[2] / "examples" / "plugins"
HNU_DIR = PLUGINS / "HighNodeUtilization"
HNU = ("--policy", str(HNU_DIR / "policy.yaml"), "--snapshot", str(HNU_DIR / "cluster.yaml"))
METRICS_DIR = PLUGINS / "LowNodeUtilization-metrics"
HOTSPOT_DIR = PLUGINS.parent / "lownodeload-hotspot"

# RemovePodsHavingTooManyRestarts (its verdict on a pod with no restarts) beside
# HighNodeUtilization (whose DefaultEvictor keeps the DaemonSet pods).
RESTARTS_AND_HNU = yaml.safe_dump({
    "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
    "profiles": [{"name": "default", "pluginConfig": [
        {"name": "DefaultEvictor", "args": {"nodeFit": True}},
        {"name": "RemovePodsHavingTooManyRestarts", "args": {"podRestartThreshold": 5}},
        {"name": "HighNodeUtilization", "args": {"thresholds": {"cpu": 20, "memory": 20}}}],
        "plugins": {"deschedule": {"enabled": ["RemovePodsHavingTooManyRestarts"]},
                    "balance": {"enabled": ["HighNodeUtilization"]}}}]})


def ok(*args: str) -> str:
    result = CliRunner().invoke(main, ["explain", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def header(out: str) -> list[str]:
    """The lines between `node NAME: N pod(s)` and the first pod."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("node "))
    end = next(i for i, line in enumerate(lines)
               if i > start and (not line.startswith("  ") or line.startswith("  pod ")))
    return lines[start + 1:end]


def items(path: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = yaml.safe_load(path.read_text())["items"]
    return found


def millicores(text: str) -> int:
    return int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)


def test_the_header_comes_first_with_requests_usage_and_each_plugins_role() -> None:
    out = ok(*HNU, "--node", "worker-3")
    head = header(out)
    # The snapshot's own figures: the cpu its running pods on worker-3 request, of 4 cores.
    requested = sum(millicores(c.get("resources", {}).get("requests", {}).get("cpu", "0"))
                    for obj in items(HNU_DIR / "cluster.yaml") if obj["kind"] == "Pod"
                    and obj["spec"].get("nodeName") == "worker-3"
                    for c in obj["spec"]["containers"])
    percent = f"{requested * 100 / 4000:.2f}".rstrip("0").rstrip(".")
    assert head[0].startswith(f"  requests: cpu {percent}% ({requested}m of 4), memory ")
    assert ", pods 2.73% (3 of 110)" in head[0]
    # The role is the one the cycle-1 run itself found: the same figures as its eviction.
    role = ("  default/HighNodeUtilization (cycle 1): underutilized (cpu 8.75% <= 20%, memory "
            "3.43% <= 20%), a source of evictions")
    assert role in head
    assert "node worker-3 is underutilized (cpu 8.75% <= 20%, memory 3.43% <= 20%)" in out
    assert "  schedulable; taints: none; pool labels: none" in head

    # Measured usage (metrics.k8s.io NodeMetrics) and LowNodeUtilization's role by usage.
    usage = header(ok("--policy", str(METRICS_DIR / "policy.yaml"), "--snapshot",
                      str(METRICS_DIR / "cluster.yaml"), "--now", "2026-11-22T12:00:00Z",
                      "--node", "worker-2"))
    assert "  usage (metrics.k8s.io): cpu 85% (3400m of 4), memory 25% (4Gi of 16Gi)" in usage
    assert ("  default/LowNodeUtilization (cycle 1): overutilized (cpu 85% > 60%), a source of "
            "evictions") in usage

    # LowNodeLoad: hot in cycle 1, but its anomaly detector has seen it once only.
    hot = header(ok("--policy", str(HOTSPOT_DIR / "policy.yaml"), "--snapshot",
                    str(HOTSPOT_DIR / "cluster.yaml"), "--node", "cn-beijing.10.0.0.53"))
    assert any(line.startswith("  usage (Koordinator NodeMetric): cpu 68.53% ") for line in hot)
    assert ("  koord-descheduler/LowNodeLoad (cycle 1): hot (cpu 68.53% > 50.00%), not yet a "
            "source: on 1 consecutive pass(es); LowNodeLoad acts after more than 5 "
            "(anomalyCondition.consecutiveAbnormalities)") in hot


def test_the_header_names_taints_cordon_and_pool_labels(tmp_path: Path) -> None:
    objs = items(HNU_DIR / "cluster.yaml")
    for obj in objs:
        if obj["kind"] == "Node" and obj["metadata"]["name"] == "worker-4":
            obj["metadata"]["labels"].update({
                "agentpool": "batch", "topology.kubernetes.io/zone": "zone-b",
                "node-role.kubernetes.io/worker": "", "team": "data"})
            obj["spec"]["taints"] = [{"key": "dedicated", "value": "batch",
                                      "effect": "NoSchedule"},
                                     {"key": "spot", "effect": "PreferNoSchedule"}]
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objs}))
    head = header(ok("--policy", str(HNU_DIR / "policy.yaml"), "--snapshot", str(cluster),
                     "--node", "worker-4"))
    assert ("  unschedulable (cordoned); taints: dedicated=batch:NoSchedule, "
            "spot:PreferNoSchedule; pool labels: agentpool=batch, "
            "node-role.kubernetes.io/worker, topology.kubernetes.io/zone=zone-b") in head
    assert any(line.startswith("  default/HighNodeUtilization (cycle 1): underutilized (")
               for line in head)


def test_reschedule_names_the_replacements_that_arrive_and_explains_them(tmp_path: Path) -> None:
    out = ok(*HNU, "--node", "worker-3", "--reschedule", "--cycles", "2")
    lines = out.splitlines()
    at = lines.index("  arrives after cycle 1: shop/batch-0-r1 (replaces shop/batch-0 evicted "
                     "from worker-4)")
    assert lines[at + 1] == "    cycle 2:"
    assert lines[at + 2].startswith("      default/HighNodeUtilization: EVICTED: node worker-3 "
                                    "is underutilized")
    # Placed after the last cycle: told under the pod it replaces (once), with nothing later
    # to explain.
    assert lines[at + 3] == ("    after cycle 2: replaced by shop/batch-0-r2, placed on worker-3 "
                             "(the run ends here; --cycles 3 explains it there)")
    assert "arrives after cycle 2" not in out
    # An arriving pod is followed like the node's own: every plugin's verdict on it.
    policy = tmp_path / "policy.yaml"
    policy.write_text(RESTARTS_AND_HNU)
    out = ok("--policy", str(policy), "--snapshot", str(HNU_DIR / "cluster.yaml"),
             "--node", "worker-3", "--reschedule", "--cycles", "2")
    lines = out.splitlines()
    at = lines.index("  arrives after cycle 1: shop/batch-0-r1 (replaces shop/batch-0 evicted "
                     "from worker-4)")
    assert lines[at + 2] == ("      default/RemovePodsHavingTooManyRestarts: considered, not "
                             "picked: 0 restart(s), under the podRestartThreshold 5")


def test_a_protected_pods_protection_comes_before_every_verdict(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(RESTARTS_AND_HNU)
    args = ("--policy", str(policy), "--snapshot", str(HNU_DIR / "cluster.yaml"))
    for out, indent in ((ok(*args, "--node", "worker-3"), "      "),
                        (ok(*args, "--pod", "kube-system/kube-proxy-2"), "    ")):
        lines = out.splitlines()
        cycle = lines.index(indent[2:] + "cycle 1:")
        assert lines[cycle + 1] == (f"{indent}protected: pod is related to daemonset and is "
                                    f"protected against eviction (default/DefaultEvictor)")
        # A plugin that passed it over does not suggest it could have evicted it.
        assert lines[cycle + 2] == (f"{indent}default/RemovePodsHavingTooManyRestarts: "
                                    f"considered, not picked: 0 restart(s), under the "
                                    f"podRestartThreshold 5; protected, so kept even if picked")
        assert lines[cycle + 3] == (f"{indent}default/HighNodeUtilization: kept: pod is related "
                                    f"to daemonset and is protected against eviction")
    # An unprotected pod's verdicts are as they were.
    out = ok(*args, "--pod", "shop/api-0")
    assert "protected" not in out
    assert ("    default/RemovePodsHavingTooManyRestarts: considered, not picked: 0 restart(s), "
            "under the podRestartThreshold 5") in out
