"""MigrationController: its args (defaults, validation),
its place in a Koordinator configuration, Filter / PreEvictionFilter, the Evict extension point
(dryRun, arbitration, object limiters, ReservationFirst), and the example end to end."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from builders import NOW, args, decode, handle_for, node, pod, snapshot
from desched.framework.types import Handle
from desched.model.pod import Pod
from desched.plugins.catalog import PLUGINS
from desched.plugins.migrationcontroller import (
    ArbitrationArgs,
    MigrationController,
    MigrationControllerArgs,
    MigrationObjectLimiter,
    default,
    validate,
)
from desched.policy_files.args import ArgsError
from desched.policy_files.errors import DecodeError, PolicyError
from desched.policy_files.loader import policy_from_document
from desched.simulate.simulation import SimulationResult, run_simulation

PATH = "koord.yaml"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "migration"
KOORD = {"schedulerName": "koord-scheduler"}


def defaulted(raw: dict[str, Any]) -> MigrationControllerArgs:
    a: MigrationControllerArgs = args(MigrationControllerArgs, raw)
    default(a)
    return a


# ---------------------------------------------------------------------------------------------
# Args: defaults
# ---------------------------------------------------------------------------------------------


def test_defaults_of_empty_args() -> None:
    a = defaulted({})
    assert a == MigrationControllerArgs(
        dry_run=False, max_concurrent_reconciles=1, max_migrating_per_node=2,
        default_job_mode="ReservationFirst", default_job_ttl="5m",
        scheduler_names=["koord-scheduler"], evict_qps=10.0, evict_burst=1,
        eviction_policy="Eviction",
        object_limiters={"workload": MigrationObjectLimiter(duration="5m")},
        arbitration_args=ArbitrationArgs(enabled=True, interval="500ms"))
    assert a.max_migrating_globally is None
    assert a.max_migrating_per_namespace is None
    assert a.max_migrating_per_workload is None
    assert a.max_unavailable_per_workload is None
    assert a.skip_check_expected_replicas is None
    assert validate(a) == []


def test_given_values_are_kept() -> None:
    a = defaulted({"maxMigratingPerNode": 0, "defaultJobMode": "EvictDirectly",
                   "schedulerNames": ["mine"], "defaultJobTTL": "0s", "evictionPolicy": "Delete",
                   "maxConcurrentReconciles": 3, "evictBurst": 5,
                   "objectLimiters": {"namespace": {"duration": "1m", "maxMigrating": 3}}})
    assert a.max_migrating_per_node == 0  # 0 is "off", not unset
    assert (a.default_job_mode, a.scheduler_names, a.default_job_ttl) == (
        "EvictDirectly", ["mine"], "0s")
    assert (a.eviction_policy, a.max_concurrent_reconciles, a.evict_burst) == ("Delete", 3, 5)
    # Only an empty map is defaulted.
    assert a.object_limiters == {"namespace": MigrationObjectLimiter(duration="1m",
                                                                     max_migrating=3)}


@pytest.mark.parametrize(("raw", "expected"), [
    ({"evictQPS": "10"}, "10"), ({"evictQPS": 2.5}, 2.5), ({"evictQPS": 3}, 3.0)])
def test_evict_qps_is_a_number_or_a_string(raw: dict[str, Any], expected: Any) -> None:
    a = defaulted(raw)
    assert a.evict_qps == expected
    assert validate(a) == []


@pytest.mark.parametrize(("raw", "expected"), [
    ({}, ArbitrationArgs(enabled=True, interval="500ms")),
    ({"arbitrationArgs": {"interval": "1s"}}, ArbitrationArgs(enabled=True, interval="1s")),
    ({"arbitrationArgs": {"enabled": False}}, ArbitrationArgs(enabled=False, interval="500ms")),
])
def test_arbitration_args_defaults(raw: dict[str, Any], expected: ArbitrationArgs) -> None:
    """An absent `enabled` stays on (Go would read false, but Koordinator ignores the flag, so
    only an explicit false may switch arbitration off)."""
    assert defaulted(raw).arbitration_args == expected


@pytest.mark.parametrize(("raw", "message"), [
    ({"maxMigratingPerNodes": 1}, 'strict decoding error: unknown field "maxMigratingPerNodes" '
                                  '(did you mean "maxMigratingPerNode"?)'),
    ({"objectLimiters": {"workload": {"window": "5m"}}},
     'strict decoding error: unknown field "objectLimiters.workload.window"'),
    ({"arbitrationArgs": {"enable": True}},
     'strict decoding error: unknown field "arbitrationArgs.enable" (did you mean "enabled"?)'),
    # metav1.Duration text is parsed when decoded, as Go's decoder parses it.
    ({"defaultJobTTL": "5 minutes"},
     'time: unknown unit " minutes" in duration "5 minutes" - at `$.defaultJobTTL`'),
    ({"objectLimiters": {"workload": {"duration": "5"}}},
     'time: missing unit in duration "5" - at `$.objectLimiters.workload.duration`'),
    ({"arbitrationArgs": {"interval": "often"}},
     'time: invalid duration "often" - at `$.arbitrationArgs.interval`'),
    ({"defaultDeleteOptions": {"grace": 1}},
     'strict decoding error: unknown field "defaultDeleteOptions.grace"'),
])
def test_decoding_is_strict(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ArgsError) as info:
        args(MigrationControllerArgs, raw)
    assert str(info.value) == message


# ---------------------------------------------------------------------------------------------
# Args: validation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "errors"), [
    ({"maxMigratingGlobally": -1},
     ["maxMigratingGlobally: Invalid value: -1: maxMigratingGlobally should be greater or "
      "equal 0"]),
    ({"maxMigratingPerNamespace": -2},
     ["maxMigratingPerNamespace: Invalid value: -2: maxMigratingPerNamespace should be greater "
      "or equal 0"]),
    ({"maxMigratingPerNode": -1},
     ["maxMigratingPerNode: Invalid value: -1: maxMigratingPerNode should be greater or equal "
      "0"]),
    ({"maxMigratingPerWorkload": "abc"},
     ["maxMigratingPerWorkload: Invalid value: abc: maxMigratingPerWorkload is invalid, err: "
      "invalid value for IntOrString: invalid type: string is not a percentage "]),
    ({"maxUnavailablePerWorkload": "x%"},
     ['maxUnavailablePerWorkload: Invalid value: x%: maxUnavailablePerWorkload is invalid, err: '
      'invalid value for IntOrString: invalid value "x%": strconv.Atoi: parsing "x": invalid '
      'syntax ']),
    ({"evictQPS": "0"}, ["evictQPS: Invalid value: 0: evictQPS must be greater than 0"]),
    ({"evictQPS": "fast"}, ["evictQPS: Invalid value: fast: evictQPS must be greater than 0"]),
    ({"evictQPS": -1.5}, ["evictQPS: Invalid value: -1.5: evictQPS must be greater than 0"]),
    ({"evictBurst": 0}, ["evictBurst: Invalid value: 0: evictBurst must be greater than 0"]),
    ({"namespaces": {"include": ["a"], "exclude": ["b"]}},
     ['namespaces: Invalid value: &config.Namespaces{Include:[]string{"a"}, '
      'Exclude:[]string{"b"}}: only one of Include/Exclude namespaces can be set']),
    ({"maxConcurrentReconciles": 0},
     ["maxConcurrentReconciles: Invalid value: 0: maxConcurrentReconciles should be greater "
      "than or equal to 1"]),
    ({"defaultJobMode": "Whatever"},
     ['defaultJobMode: Invalid value: "Whatever": defaultJobMode must be ReservationFirst or '
      "EvictDirectly"]),
    ({"defaultJobTTL": "-10m"},
     ["defaultJobTTL: Invalid value: -10m0s: defaultJobTTL should be positive or zero"]),
    ({"skipEvictionGates": ["MaxMigratingPerNode", "NoSuchGate"]},
     ['skipEvictionGates[1]: Unsupported value: "NoSuchGate": supported values: '
      '"MaxUnavailablePerWorkload", "MaxMigratingPerWorkload", "MaxMigratingPerNode", '
      '"MaxMigratingPerNamespace", "MaxMigratingGlobally", "ExpectedReplicas", "PVC", '
      '"BarePods", "LocalStorage", "SystemCritical", "PriorityThreshold", "LabelSelector", '
      '"Namespaces", "NodeFit"']),
    ({"evictionPolicy": "Drain"},
     ['evictionPolicy: Unsupported value: "Drain": supported values: "Eviction", "Delete", '
      '"SoftEviction"']),
    ({"priorityThreshold": {"value": 10, "name": "high"}},
     ["priority threshold misconfigured, only one of priorityThreshold fields can be set"]),
    ({"nodeSelector": "a in b"},
     ["nodeSelector: unable to parse requirement: found 'b' expected: '('"]),
    ({"maxMigratingPerNode": -1, "evictBurst": -3},
     ["maxMigratingPerNode: Invalid value: -1: maxMigratingPerNode should be greater or equal "
      "0", "evictBurst: Invalid value: -3: evictBurst must be greater than 0"]),
])
def test_validation(raw: dict[str, Any], errors: list[str]) -> None:
    assert validate(defaulted(raw)) == errors


@pytest.mark.parametrize("raw", [
    {"maxMigratingPerWorkload": "10%", "maxUnavailablePerWorkload": 0},
    {"maxMigratingGlobally": 0, "maxMigratingPerNamespace": 0, "maxMigratingPerNode": 0},
    {"skipEvictionGates": ["NodeFit", "PVC"], "defaultJobTTL": "0s"},
    {"labelSelector": {"matchLabels": {"a": "b"}}, "nodeSelector": "pool=web"},
    {"objectLimiters": {"workload": {"duration": "0s"}, "namespace": {"duration": "1m",
                                                                      "maxMigrating": "50%"}}},
])
def test_valid(raw: dict[str, Any]) -> None:
    assert validate(defaulted(raw)) == []


# ---------------------------------------------------------------------------------------------
# In a Koordinator DeschedulerConfiguration
# ---------------------------------------------------------------------------------------------


def koord(*profiles: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "descheduler/v1alpha2",
                           "kind": "DeschedulerConfiguration"}
    if profiles:
        doc["profiles"] = list(profiles)
    return doc


def test_the_default_profile_uses_migration_controller() -> None:
    [p] = policy_from_document(PATH, koord(), PLUGINS).profiles
    assert p.name == "koord-descheduler"
    assert p.enabled["evict"] == ["MigrationController"]
    assert p.enabled["filter"] == ["MigrationController"]
    assert p.enabled["preevictionfilter"] == ["MigrationController"]
    assert p.args["MigrationController"] == defaulted({})


def test_the_shipped_configmap_loads() -> None:
    shipped = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
deschedulingInterval: 10s
profiles:
- name: koord-descheduler
  plugins:
    deschedule: {disabled: [{name: "*"}]}
    evict: {disabled: [{name: "*"}], enabled: [{name: MigrationController}]}
  pluginConfig:
  - name: MigrationController
    args: {apiVersion: descheduler/v1alpha2, kind: MigrationControllerArgs,
           evictionPolicy: Eviction, evictQPS: "10", evictBurst: 1,
           namespaces: {exclude: [kube-system, koordinator-system]}}
"""
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "koord-descheduler-config", "namespace": "koordinator-system"},
          "data": {"koord-descheduler-config": shipped}}
    [p] = policy_from_document(PATH, cm, PLUGINS).profiles
    mc = p.args["MigrationController"]
    assert mc.namespaces is not None and mc.namespaces.exclude == ["kube-system",
                                                                   "koordinator-system"]
    assert mc.evict_qps == "10" and mc.max_migrating_per_node == 2


def test_invalid_args_fail_the_policy() -> None:
    doc = koord({"name": "p", "pluginConfig": [
        {"name": "MigrationController", "args": {"evictBurst": 0, "defaultJobMode": "x"}}]})
    with pytest.raises(PolicyError) as info:
        policy_from_document(PATH, doc, PLUGINS)
    assert str(info.value) == (
        f'{PATH}: profile "p": MigrationController: [evictBurst: Invalid value: 0: evictBurst '
        f'must be greater than 0, defaultJobMode: Invalid value: "x": defaultJobMode must be '
        f"ReservationFirst or EvictDirectly]")


def test_unknown_args_fail_decoding() -> None:
    doc = koord({"name": "p", "pluginConfig": [
        {"name": "MigrationController", "args": {"kind": "MigrationControllerArgs",
                                                 "maxMigrating": 1}}]})
    with pytest.raises(DecodeError) as info:
        policy_from_document(PATH, doc, PLUGINS)
    assert info.value.detail == ('strict decoding error: unknown field "maxMigrating" '
                                 '(did you mean "maxMigratingPerNode"?)')


# ---------------------------------------------------------------------------------------------
# The plugin: Filter, PreEvictionFilter, Evict
# ---------------------------------------------------------------------------------------------

NODES = [node("n1"), node("n2"), node("n3")]


def web(count: int = 6, **kw: Any) -> list[Any]:
    """Deployment default/web and its ReplicaSet rs-1 (the builders' default owner), with
    `count` koord-scheduler pods web-0.. on n1."""
    spec = {**KOORD, **kw.pop("spec", {})}
    return [decode("Deployment", {"metadata": {"name": "web", "namespace": "default",
                                               "uid": "uid-Deployment-web"},
                                  "spec": {"replicas": count}}),
            decode("ReplicaSet", {"metadata": {
                "name": "rs-1", "namespace": "default", "uid": "uid-ReplicaSet-rs-1",
                "ownerReferences": [{"kind": "Deployment", "name": "web",
                                     "uid": "uid-Deployment-web", "controller": True}]},
                "spec": {"replicas": count}}),
            *[pod(f"web-{i}", spec=spec, **kw) for i in range(count)]]


class Harness:
    """A MigrationController over a snapshot, with a proceed() that evicts through the
    framework's Evictor as the evict extension point will."""

    def __init__(self, raw: dict[str, Any], *objects: Any, nodes: list[Any] | None = None) -> None:
        a = defaulted(raw)
        assert validate(a) == []
        self.snap = snapshot(*(NODES if nodes is None else nodes), *objects)
        self.handle: Handle
        self.handle, self.executor = handle_for(self.snap, plugin="MigrationController")
        self.mc = MigrationController(a, self.handle)
        self.proceeded: list[str] = []
        self.refuse_proceed = False

    def pod(self, name: str) -> Pod:
        return self.snap.pods[f"default/{name}"]

    def evict(self, name: str, trigger: str = "RemoveDuplicates", reason: str = "dup") -> bool:
        subject = self.pod(name)

        def proceed() -> bool:
            self.proceeded.append(subject.name)
            if self.refuse_proceed:
                return False
            return self.handle.evictor.evictor.evict(subject, self.handle.profile, trigger,
                                                     reason)
        return self.mc.evict(subject, trigger, reason, proceed)

    def advance(self, seconds: float) -> None:
        self.handle.clock.now += timedelta(seconds=seconds)

    def decisions(self) -> list[tuple[str, str, str]]:
        return [(d.outcome, d.pod, d.reason) for d in self.handle.log.decisions]


def test_filter_applies_the_configured_args() -> None:
    h = Harness({"namespaces": {"exclude": ["default"]}}, *web())
    assert h.mc.filter(h.pod("web-0")) == "namespace default is in namespaces.exclude"
    h = Harness({"namespaces": {"exclude": ["default"]}, "skipEvictionGates": ["Namespaces"]},
                *web())
    assert h.mc.filter(h.pod("web-0")) is None


def test_filter_and_preevictionfilter_through_the_profile() -> None:
    h = Harness({}, *web(1))
    assert h.mc.filter(h.pod("web-0")) == (
        "Deployment default/web has 1 replica: a single-replica workload is never migrated "
        "(skipCheckExpectedReplicas)")


@pytest.mark.parametrize(("raw", "fits_nowhere", "reason"), [
    ({}, True, None),  # nodeFit is off by default
    ({"nodeFit": True}, False, None),
    ({"nodeFit": True}, True,
     "pod does not fit on any other node because of nodeSelector(s), Taint(s), or nodes marked "
     "as unschedulable"),
    ({"nodeFit": True, "skipEvictionGates": ["NodeFit"]}, True, None),
    ({"nodeFit": True, "nodeSelector": "pool=big"}, False,
     "pod does not fit on any other node because of nodeSelector(s), Taint(s), or nodes marked "
     "as unschedulable"),
])
def test_pre_eviction_filter_is_node_fit(raw: dict[str, Any], fits_nowhere: bool,
                                         reason: str | None) -> None:
    nodes = [node("n1"), node("n2", labels={"pool": "small"}),
             node("n3", unschedulable=fits_nowhere, labels={"pool": "small"})]
    if fits_nowhere:
        nodes[1] = node("n2", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    h = Harness(raw, *web(), nodes=nodes)
    assert h.mc.pre_eviction_filter(h.pod("web-0")) == reason


def test_dry_run_returns_true_without_filtering_or_evicting() -> None:
    h = Harness({"dryRun": True}, *web(1))  # a single replica: the filter would refuse
    assert h.evict("web-0") is True
    assert h.proceeded == []
    assert h.executor.evicted == []
    assert h.handle.log.decisions == []


def test_evict_directly_just_proceeds() -> None:
    h = Harness({"defaultJobMode": "EvictDirectly"}, *web())
    assert h.evict("web-0") is True
    assert h.proceeded == ["web-0"]
    assert h.decisions() == [("evicted", "web-0", "dup")]


NO_LIMITER = {"objectLimiters": {"workload": {"duration": "0s"}}}


def test_reservation_first_places_a_reservation_on_another_node() -> None:
    h = Harness(NO_LIMITER, *web())
    assert h.evict("web-0") and h.evict("web-1")
    # Reservations spread: a node holding none is preferred.
    assert h.decisions() == [("evicted", "web-0", "dup; reservation on n3"),
                             ("evicted", "web-1", "dup; reservation on n2")]
    assert h.mc.reservations == {"default/web-0": "n3", "default/web-1": "n2"}


def test_reservation_first_refuses_when_no_other_node_fits() -> None:
    nodes = [node("n1"), node("n2", cpu="150m"), node("n3", unschedulable=True)]
    h = Harness(NO_LIMITER, *web(6, cpu="100m"), nodes=nodes)
    assert h.evict("web-0") is True  # 100m of n2's 150m reserved
    assert h.evict("web-1") is False
    assert h.proceeded == ["web-0"]
    assert h.decisions()[-1] == (
        "failed", "web-1",
        "MigrationController: ReservationFirst: no other node can take a Reservation for the pod: "
        "n2: taken by this cycle's Reservations; n3: node is not schedulable")
    # Next cycle the reservation is gone (the migration completed in the simulation).
    h.advance(60)
    assert h.evict("web-1") is True


def test_limits_refuse_with_limited_and_count_this_cycles_migrations() -> None:
    h = Harness({"maxMigratingPerNode": 5, "objectLimiters": {"workload": {"duration": "0s"}}},
                *web())
    assert [h.evict(f"web-{i}") for i in range(4)] == [True, True, False, False]
    assert h.decisions()[2] == (
        "limited", "web-2", "MigrationController: maxMigratingPerWorkload: Deployment "
                            "default/web has 2 migrating pods, the limit is 2 of 6 replicas")
    assert h.proceeded == ["web-0", "web-1"]
    h.advance(10)  # a new cycle: this run's migrations have completed
    assert h.evict("web-2") is True


def test_a_new_cycle_is_told_by_the_cycle_number_too() -> None:
    """With deschedulingInterval 0 every cycle of a simulation has the same clock."""
    h = Harness({"maxMigratingPerNode": 5, "objectLimiters": {"workload": {"duration": "0s"}}},
                *web())
    assert [h.evict(f"web-{i}") for i in range(3)] == [True, True, False]
    h.handle.log.cycle = 2
    assert h.evict("web-2") is True


def test_non_retryable_refusals_are_filtered() -> None:
    h = Harness({}, *web(1))
    assert h.evict("web-0") is False
    assert h.handle.log.decisions == []
    [(key, count)] = h.handle.log.filtered_counts.items()
    assert key[1] == "RemoveDuplicates" and count == 1
    assert "single-replica" in key[2]


def test_the_object_limiter_holds_a_workload_back_across_cycles() -> None:
    """The default {workload: {duration: 5m}}: 2 per 300s for 6 replicas, burst 1."""
    h = Harness({"maxMigratingPerNode": 5}, *web())
    assert [h.evict("web-0"), h.evict("web-1")] == [True, False]
    assert h.decisions()[1] == (
        "limited", "web-1", "MigrationController: objectLimiters.workload: Deployment/default/web "
                            "was migrated recently; the limiter allows 2 per 5m0s (burst 1), "
                            "next token in 2m30s")
    h.advance(149)
    assert h.evict("web-1") is False
    h.advance(1)
    assert h.evict("web-1") is True


def test_the_limiter_is_fed_only_by_evictions_that_happened() -> None:
    h = Harness({"maxMigratingPerNode": 5}, *web())
    h.refuse_proceed = True  # e.g. a PodDisruptionBudget said no
    assert h.evict("web-0") is False
    assert h.mc.ledger.started == []
    assert h.mc.reservations == {}  # nor does its Reservation hold room
    h.refuse_proceed = False
    # The token reserved for it went back (burst 1: else the workload would be limited now),
    assert h.evict("web-0") is True
    # and the eviction that happened took it.
    assert h.evict("web-1") is False
    assert h.decisions()[-1][:2] == ("limited", "web-1")
    assert "objectLimiters.workload: Deployment/default/web was migrated recently" in \
        h.decisions()[-1][2]


def test_the_evict_annotation_does_not_bypass_the_object_limiter() -> None:
    h = Harness({"maxMigratingPerNode": 5}, *web(annotations={
        "descheduler.alpha.kubernetes.io/evict": ""}))
    assert [h.evict("web-0"), h.evict("web-1")] == [True, False]
    assert "objectLimiters.workload" in h.decisions()[1][2]


def test_a_non_default_eviction_policy_is_named() -> None:
    h = Harness({"evictionPolicy": "SoftEviction", "defaultJobMode": "EvictDirectly"},
                *web(), pod("web-x", labels={"koordinator.sh/evict-policy": "Delete"},
                            spec=KOORD))
    assert h.evict("web-0") and h.decisions()[-1][2] == "dup; evictionPolicy SoftEviction"
    h.advance(600)
    assert h.evict("web-x") and h.decisions()[-1][2] == "dup; evictionPolicy Delete"


def test_arbitration_disabled_lets_the_limits_go() -> None:
    raw = {"maxMigratingPerNode": 5, "objectLimiters": {"workload": {"duration": "0s"}},
           "arbitrationArgs": {"enabled": False}}
    h = Harness(raw, *web())
    assert [h.evict(f"web-{i}") for i in range(4)] == [True, True, True, True]


def test_waiting_jobs_of_the_snapshot_are_arbitrated_once() -> None:
    jobs = [decode("PodMigrationJob", {
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {"podRef": {"namespace": "default", "name": target, "uid": f"uid-{target}"}},
        "status": {"phase": "Pending"}})
        for name, target, created in (("job-a", "web-1", "2026-11-22T11:55:00Z"),
                                      ("job-b", "solo", "2026-11-22T11:56:00Z"))]
    solo = pod("solo", owner=("StatefulSet", "db"), spec=KOORD)
    sts = decode("StatefulSet", {"metadata": {"name": "db", "namespace": "default",
                                              "uid": "uid-StatefulSet-db"},
                                 "spec": {"replicas": 1}})
    h = Harness({"maxMigratingPerNode": 5, "objectLimiters": {"workload": {"duration": "0s"}}},
                *web(), solo, sts, *jobs)
    assert h.mc.filter(h.pod("web-1")) == (
        "the pod is already migrating: PodMigrationJob job-a (Pending)")
    assert [(v.job, v.outcome) for v in h.mc.arbitration] == [("job-b", "failed"),
                                                              ("job-a", "passed")]
    notes = [n.text for n in h.handle.log.notes]
    assert notes[0].startswith("PodMigrationJob job-b failed arbitration: Pod \"default/solo\" "
                               "is forbidden to migrate")
    assert notes[1] == "PodMigrationJob job-a passed arbitration: passed arbitration"
    # job-a counts as in flight: one more of web may go, not two.
    assert [h.evict("web-2"), h.evict("web-3")] == [True, False]
    h.advance(60)
    assert len(h.handle.log.notes) == 2


# ---------------------------------------------------------------------------------------------
# The example, end to end
# ---------------------------------------------------------------------------------------------


def run_example(cycles: int) -> SimulationResult:
    return run_simulation(str(EXAMPLE / "policy.yaml"), [str(EXAMPLE / "cluster.yaml")], NOW,
                          cycles, True)


def check_example(result: SimulationResult) -> None:
    dup = ("duplicate of ReplicaSet/web-6b7f9: node worker-1 runs {}, above the ceiling of the "
           "average 2 over 3 feasible nodes; reservation on {}")
    per_workload = ("MigrationController: maxMigratingPerWorkload: Deployment shop/web has 2 "
                    "migrating pods, the limit is 2 of 6 replicas")
    limiter = ("MigrationController: objectLimiters.workload: Deployment/shop/web was migrated "
               "recently; the limiter allows 2 per 5m0s (burst 2), next token in {}")
    assert [(d.cycle, d.outcome, d.pod, d.reason) for d in result.log.decisions] == [
        # Cycle 1: RemoveDuplicates wants 4 of the 6 off worker-1; 2 may migrate.
        (1, "evicted", "web-6b7f9-c8w2d", dup.format(6, "worker-3")),
        (1, "evicted", "web-6b7f9-h5n6r", dup.format(6, "worker-2")),
        (1, "limited", "web-6b7f9-m3t8v", per_workload),
        (1, "limited", "web-6b7f9-x9b1j", per_workload),
        # The workload's limiter: 2 tokens spent at 0s, 2 per 300s back.
        (2, "limited", "web-6b7f9-m3t8v", limiter.format("1m30s")),
        (2, "limited", "web-6b7f9-x9b1j", limiter.format("1m30s")),
        (3, "limited", "web-6b7f9-m3t8v", limiter.format("30s")),
        (3, "limited", "web-6b7f9-x9b1j", limiter.format("30s")),
        (4, "evicted", "web-6b7f9-m3t8v", dup.format(4, "worker-3")),
        (4, "limited", "web-6b7f9-x9b1j", limiter.format("2m0s")),
        (5, "limited", "web-6b7f9-x9b1j", limiter.format("1m0s")),
        (6, "evicted", "web-6b7f9-x9b1j", dup.format(3, "worker-2")),
    ]
    filtered = {reason: count for (_, plugin, reason), count in result.log.filtered_counts.items()
                if plugin == "RemoveDuplicates"}
    assert filtered == {
        'spec.schedulerName is "default-scheduler", not one of schedulerNames [koord-scheduler]: '
        "a ReservationFirst migration needs a scheduler that honours Reservations": 18,
        "the pod's workload cannot be resolved: Job shop/nightly-report has no replica count "
        "(batch Jobs have no /scale subresource) (Koordinator reads it as 0 expected replicas "
        "and never migrates the pod)": 12,
    }


def test_example() -> None:
    check_example(run_example(6))


def test_example_through_the_command_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "simulate",
         "--config", str(EXAMPLE / "policy.yaml"), "--snapshot", str(EXAMPLE / "cluster.yaml"),
         "--now", "2026-11-22T12:00:00Z", "--cycles", "1"],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "cycle 1: 2 pod(s) evicted" in lines


@pytest.mark.parametrize(("ttl", "created", "in_flight"), [
    (None, "2026-11-22T11:31:00Z", True),  # no TTL: the scavenger deletes it after 30m
    (None, "2026-11-22T11:30:00Z", False),
    ("5m0s", "2026-11-22T11:56:00Z", True),
    ("5m0s", "2026-11-22T11:55:00Z", False),  # timed out
    ("0s", "2026-11-22T11:45:00Z", True),  # 0 is no TTL
])
def test_snapshot_jobs_time_out(ttl: str | None, created: str, in_flight: bool) -> None:
    spec: dict[str, Any] = {"podRef": {"namespace": "default", "name": "web-1",
                                       "uid": "uid-web-1"}}
    if ttl is not None:
        spec["ttl"] = ttl
    job = decode("PodMigrationJob", {"metadata": {"name": "job", "creationTimestamp": created},
                                     "spec": spec, "status": {"phase": "Running"}})
    h = Harness({}, *web(), job)
    reason = h.mc.filter(h.pod("web-1"))
    assert (reason is not None) is in_flight


def test_a_job_times_out_as_the_clock_advances() -> None:
    job = decode("PodMigrationJob", {
        "metadata": {"name": "job", "creationTimestamp": "2026-11-22T11:59:00Z"},
        "spec": {"ttl": "5m", "podRef": {"namespace": "default", "name": "web-1"}},
        "status": {"phase": "Running"}})
    h = Harness({}, *web(), job)
    assert h.mc.filter(h.pod("web-1")) == (
        "the pod is already migrating: PodMigrationJob job (Running)")
    h.advance(240)
    assert h.mc.filter(h.pod("web-1")) is None


@pytest.mark.parametrize(("gates", "migrated"), [([], False),
                                                 (["MaxMigratingPerNamespace"], True)])
def test_max_migrating_per_namespace_and_its_skip_gate(gates: list[str], migrated: bool) -> None:
    """A job Running in the namespace uses up maxMigratingPerNamespace 1: the next pod waits
    (refused as retryable, against the trigger), unless skipEvictionGates names the limit."""
    created = (NOW - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")  # within its TTL
    running = decode("PodMigrationJob", {
        "metadata": {"name": "job-web-0", "creationTimestamp": created},
        "spec": {"podRef": {"namespace": "default", "name": "web-0", "uid": "uid-web-0"}},
        "status": {"phase": "Running"}})
    h = Harness({"maxMigratingPerNamespace": 1, "maxMigratingPerNode": 0,
                 "maxMigratingPerWorkload": 5, "maxUnavailablePerWorkload": 5,
                 "defaultJobMode": "EvictDirectly", "skipEvictionGates": gates},
                *web(), running)
    assert h.evict("web-3") is migrated
    assert h.proceeded == (["web-3"] if migrated else [])
    if not migrated:
        assert h.decisions() == [("limited", "web-3", "MigrationController: "
                                  "maxMigratingPerNamespace: 1 pods in namespace default are "
                                  "migrating, the limit is 1")]
