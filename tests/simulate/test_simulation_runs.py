"""Issue 35, item 2: a Simulation loads the policy and the snapshot once and runs again on a
restored copy of the snapshot, with a seed: `--outcomes N` costs one load and N runs, reads
standard input like every other path, and gives the figures N fresh loads would."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from desched.executors.simulation import SimulationExecutor
from desched.framework.runner import Descheduler
from desched.framework.types import Clock
from desched.simulate import simulation
from desched.simulate.simulation import Simulation, SimulationResult
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.loader import load_snapshot

REPO = Path(__file__).resolve().parents[2]
POLICY = str(REPO / "examples" / "policy.yaml")
CLUSTER = str(REPO / "examples" / "cluster.yaml")
NOW = datetime(2026, 11, 22, 12, tzinfo=UTC)


def simulation_of(cycles: int = 2) -> Simulation:
    return Simulation(POLICY, [CLUSTER], NOW, cycles=cycles, reschedule=True, with_frames=True)


def told(result: SimulationResult) -> tuple[Any, ...]:
    """What a report tells of a run: its decisions, placements and utilization frames."""
    return (result.log.decisions, [(s.placements, s.replaces, s.evicted, s.held)
                                   for s in result.summaries], result.frames)


def test_outcomes_load_the_policy_and_the_snapshot_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"policy": 0, "snapshot": 0}

    def counted(name: str, load: Any) -> Any:
        def spy(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return load(*args, **kwargs)
        return spy

    monkeypatch.setattr(simulation, "load_policy", counted("policy", simulation.load_policy))
    monkeypatch.setattr(simulation, "load_snapshot",
                        counted("snapshot", simulation.load_snapshot))
    result = simulation_of().outcomes(4)
    assert len(result.other_outcomes) == 3
    assert calls == {"policy": 1, "snapshot": 1}


def test_each_outcome_is_what_a_fresh_load_gives_with_its_seed() -> None:
    result = simulation_of().outcomes(5)
    assert told(result) == told(simulation_of().run())
    fresh = [simulation_of().run(seed).frames[-1] for seed in range(1, 5)]
    assert result.other_outcomes == fresh
    # The example's ties make the outcomes differ: the copies are not all the first run's.
    assert len({repr(f.values) for f in [result.frames[-1], *fresh]}) > 1


def test_a_run_on_a_copy_leaves_the_snapshot_as_loaded() -> None:
    sim = simulation_of()
    loaded = sim.snapshot
    before = ({key: id(pod) for key, pod in loaded.pods.items()},
              {node: list(pods) for node, pods in loaded.pods_by_node.items()},
              dict(loaded.node_version), loaded.additions)
    first = sim.run(again=True)
    assert first.evictions and first.summaries[0].placements  # the run changed its cluster
    assert ({key: id(pod) for key, pod in loaded.pods.items()},
            {node: list(pods) for node, pods in loaded.pods_by_node.items()},
            dict(loaded.node_version), loaded.additions) == before
    assert told(sim.run()) == told(first)  # the last run takes the loaded snapshot itself
    with pytest.raises(RuntimeError):
        sim.run()


def test_a_copy_holds_every_container_of_its_own() -> None:
    snapshot = load_snapshot([CLUSTER])
    copy = snapshot.copy()
    assert vars(copy).keys() == vars(snapshot).keys()
    for name, value in vars(snapshot).items():
        theirs = vars(copy)[name]
        if isinstance(value, dict | list | set):
            assert theirs is not value, name
            for key, inner in value.items() if isinstance(value, dict) else ():
                if isinstance(inner, dict | list) and key in theirs:
                    assert theirs[key] is not inner, (name, key)
    for name in ("nodes", "pods", "pods_by_node", "pods_by_namespace", "pods_by_owner_uid",
                 "namespaces", "pdbs_by_namespace", "workloads", "node_metrics",
                 "_terminal_on_node", "node_version"):
        assert vars(copy)[name] == vars(snapshot)[name], name
    pod = next(iter(copy.pods.values()))
    copy.remove_pod(pod)
    assert pod.key not in copy.pods and snapshot.pods[pod.key] is pod
    assert pod.key in snapshot.pods_by_node[pod.node_name]


def test_the_executor_is_swapped_in_one_place() -> None:
    snapshot = ClusterSnapshot()
    sim = simulation_of()
    descheduler = Descheduler(sim.policy, snapshot, SimulationExecutor(snapshot), Clock(NOW))
    fresh = SimulationExecutor(snapshot)
    descheduler.use_executor(fresh)
    assert descheduler.executor is fresh and descheduler.evictor.executor is fresh


@pytest.mark.process
def test_outcomes_read_the_snapshot_from_standard_input() -> None:
    args = [sys.executable, "-m", "desched", "simulate", "--policy", POLICY, "--now",
            "2026-11-22T12:00:00Z", "--reschedule", "--outcomes", "3", "--snapshot"]
    with open(CLUSTER, "rb") as stdin:
        piped = subprocess.run([*args, "-"], stdin=stdin, capture_output=True, check=False,
                               timeout=60)
    assert piped.returncode == 0, piped.stderr
    named = subprocess.run([*args, CLUSTER], capture_output=True, check=False, timeout=60)
    assert named.returncode == 0, named.stderr
    assert b"ranges over 3 outcomes" in piped.stdout
    assert (piped.stdout, piped.stderr) == (named.stdout, named.stderr)
