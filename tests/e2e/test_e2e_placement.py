"""Placement fidelity against the real kube-scheduler: for each deterministic scenario of
bench/placement_fidelity.py, `desched simulate --reschedule --scheduler kube-default` must put
the replacements of the pods `desched run --once` evicts where kube-scheduler really puts them
(by class of interchangeable nodes: at least 95 %), and predict the balance after the cycle
(std and max of cpu-request utilization per node) within half a point. Where the server took
another order than simulate assumes (a loaded machine: an evicted pod still counted on its node
when kube-scheduler placed its replacement), the same model in the order the server took
(placement_fidelity.replay) is the prediction judged; the report says so.

The cluster must run kube-scheduler and the ReplicaSet controller and have no schedulable node
of its own (see README.md, "Placement fidelity"). The scenarios delete every Node and Namespace
labelled `desched-fidelity` first; they take turns (a file lock) with each other under
`pytest -n 2` and with the bench."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import placement_fidelity as fidelity  # noqa: E402

# One worker takes these in turn (they share the cluster's nodes: a lock), the others go on.
pytestmark = [pytest.mark.needs("kube-scheduler", "kube-controller-manager"),
              pytest.mark.xdist_group("fidelity"), pytest.mark.timeout(600)]
# This module is also a plugin for its hook below (test_e2e_guard.py shares it).
pytest_plugins = [__name__]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--dist loadgroup` sends the tests whose node ids end in `@<group>` to one worker;
    pytest-xdist (3.8) appends the group of `xdist_group` to `item._nodeid`, which pytest 9.2
    no longer reads (a node's id is `item._id`, a NodeId), so without this each test went to
    any worker, and the workers queued on the fidelity lock. Where xdist's suffix took, this
    leaves it."""
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import NodeId

    for item in items:
        groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                         for mark in item.iter_markers("xdist_group")})
        if groups and "@" not in item.nodeid.rpartition("]")[2]:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")
SHARE = 0.95  # of the replacements, on a node of the predicted class
POINTS = 0.5  # balance after the cycle: |predicted - real|, std and max, percentage points


@pytest.mark.parametrize("name", fidelity.DETERMINISTIC)
def test_replacements_land_where_kube_scheduler_puts_them(
        name: str, kubeconfig: str, tmp_path: Path) -> None:
    opts = fidelity.Options(kubeconfig, tmp_path, mode="interleaved", log=lambda text: None)
    result = fidelity.run_scenario(fidelity.SCENARIOS[name](), opts)
    if "skipped" in result:
        pytest.skip(f"{name}: {result['skipped']}")
    report = fidelity.details(result)
    placements = result["placements"]
    assert placements["total"] > 0, f"no replacements to compare:\n{report}"
    assert placements["fraction"] >= SHARE, (
        f"{placements['matched']} of {placements['total']} replacements on the predicted "
        f"class of nodes (need {SHARE:.0%}):\n{report}")
    balance: dict[str, Any] = result["balance"]
    for measure in ("std", "max"):
        predicted, real = balance["predicted"][measure], balance["real"][measure]
        assert abs(predicted - real) <= POINTS, (
            f"{measure} of cpu-request utilization after the cycle: predicted {predicted:.2f}, "
            f"real {real:.2f} (allowed difference {POINTS} points):\n{report}")
