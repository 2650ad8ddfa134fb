"""Zero-downtime moves on the real thing (docs/moves.md): bench/availability.py's `taints`
cluster — Deployments of 1, 3 and 10 replicas and a StatefulSet of 3 on two workers that are then
tainted NoSchedule, two empty workers beside them, kube-scheduler, the deployment, replicaset and
statefulset controllers, and the stand-in kubelet (Ready 3 s after a bind, gone 2 s after a
deletion) — drained by `desched run --interval 2s` with RemovePodsViolatingNodeTaints, each move
mode on a fresh copy. The ready pods of every workload are sampled every 100 ms.

The goals of issue 31: with surge-first, a restarted Deployment never has fewer ready pods than its
own rollout strategy allows (replicas - maxUnavailable: 1/1, 3/3, 8/10); with pacing at one pod
per workload, never fewer than replicas - 1; and in every mode, every pod leaves the tainted
nodes and every workload is full again within the run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import availability  # noqa: E402

pytestmark = [pytest.mark.needs("kube-controller-manager", "kube-scheduler"),
              pytest.mark.timeout(600)]

# The lowest ready count each workload may reach, per mode (None: no floor: that mode does not
# protect the workload, e.g. pacing alone cannot keep a single replica up).
FLOORS: dict[str, dict[str, int | None]] = {
    # A StatefulSet cannot surge: surge-first alone evicts it as upstream does.
    "surge": {"web-1": 1, "web-3": 3, "web-10": 8, "db-3": None},
    "paced": {"web-1": None, "web-3": 2, "web-10": 9, "db-3": 2},
    # examples/zero-downtime/policy.yaml: both; the Deployments are restarted, the StatefulSet
    # paced.
    "zero-downtime": {"web-1": 1, "web-3": 3, "web-10": 8, "db-3": 2},
}
RESTARTED = {"surge": ["web-1", "web-10", "web-3"], "paced": [],
             "zero-downtime": ["web-1", "web-10", "web-3"]}


@pytest.mark.parametrize("mode", list(FLOORS))
def test_moves_keep_workloads_up_and_finish_the_drain(
        mode: str, kube: Client, kubeconfig: str, tmp_path: Path) -> None:
    opts = argparse.Namespace(workdir=str(tmp_path), ready_after=3.0, interval=2.0,
                              timeout=240.0, keep=False, go_binary=None)
    result: dict[str, Any] = availability.run_mode(kube, kubeconfig, "taints", mode, opts)
    log = Path(result["log"]).read_text(errors="replace")[-4000:]
    assert result["secondsToDone"] is not None, \
        f"pods left on the tainted nodes or workloads not full after 240 s: {result}\n{log}"
    for name, floor in FLOORS[mode].items():
        seen = result["workloads"][name]
        if floor is not None:
            assert seen["lowestReady"] >= floor, (
                f"{mode}: {name} fell to {seen['lowestReady']}/{seen['replicas']} "
                f"(floor {floor}): {result}\n{log}")
    assert result["restarted"] == RESTARTED[mode], f"{result}\n{log}"
