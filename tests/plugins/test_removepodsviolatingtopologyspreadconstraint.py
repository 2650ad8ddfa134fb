"""RemovePodsViolatingTopologySpreadConstraint: domains, the balanced check, upstream's two-pointer
balanceDomains, inclusion policies, matchLabelKeys, topologyBalanceNodeFit, the pick order within
a domain, limits, validation and defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from builders import NOW, args, handle_for, node, pod, snapshot
from desched.errors import InputError
from desched.framework.evictor import Limits
from desched.plugins.catalog import PLUGINS
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.removepodsviolatingtopologyspreadconstraint import (
    RemovePodsViolatingTopologySpreadConstraint,
    RemovePodsViolatingTopologySpreadConstraintArgs,
    default,
    validate,
)
from desched.policy_files.loader import policy_from_document
from desched.simulate.simulation import run_simulation

PLUGIN = "RemovePodsViolatingTopologySpreadConstraint"
LABELS = {"app": "web"}
SELECTOR = {"matchLabels": LABELS}
TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
REQUIRE_ZONE = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}}}}
TOLERATE = [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}]


def tsc(max_skew: int = 1, key: str = "zone", when: str = "DoNotSchedule",
        selector: dict[str, Any] | None = SELECTOR, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when,
                           **extra}
    if selector is not None:
        out["labelSelector"] = selector
    return out


def zone_node(name: str, zone: str | None, **kw: Any) -> Any:
    labels = {"kubernetes.io/hostname": name, **kw.pop("labels", {})}
    if zone is not None:
        labels["zone"] = zone
    return node(name, labels=labels, **kw)


def zones(*zs: str) -> list[Any]:
    """One node per zone: n1 in zs[0], n2 in zs[1], ..."""
    return [zone_node(f"n{i + 1}", z) for i, z in enumerate(zs)]


def spread(node_name: str, count: int, prefix: str | None = None,
           constraints: list[dict[str, Any]] | None = None, labels: dict[str, str] | None = None,
           spec: dict[str, Any] | None = None, **kw: Any) -> list[Any]:
    """`count` pods on `node_name` carrying the constraints (default: one zone constraint)."""
    prefix = prefix or node_name
    body = {"topologySpreadConstraints": constraints if constraints is not None else [tsc()],
            **(spec or {})}
    return [pod(f"{prefix}-{i}", node_name, labels=labels or LABELS, spec=body, **kw)
            for i in range(count)]


def run(nodes: list[Any], pods: list[Any], raw: dict[str, Any] | None = None,
        limits: Limits | None = None, protections: dict[str, Any] | None = None,
        apply_defaults: bool = True) -> tuple[list[str], Any]:
    snap = snapshot(*nodes, *pods)
    setup, _ = handle_for(snap)
    evictor = DefaultEvictor(args(DefaultEvictorArgs, protections or {}), setup)
    handle, executor = handle_for(snap, plugin=PLUGIN, limits=limits, filters=[evictor])
    plugin_args = args(RemovePodsViolatingTopologySpreadConstraintArgs, raw or {})
    if apply_defaults:
        default(plugin_args)
    RemovePodsViolatingTopologySpreadConstraint(plugin_args, handle).balance(snap.ready_nodes())
    return executor.evicted, handle


# (id, nodes, pods, args, evicted pod names in order)
CASES: list[tuple[str, list[Any], list[Any], dict[str, Any], list[str]]] = [
    ("2 domains 3/1, maxSkew 1: the last pod of the big domain moves",
     zones("a", "b"), spread("n1", 3) + spread("n2", 1), {}, ["n1-2"]),
    ("2 domains 2/1 are balanced", zones("a", "b"), spread("n1", 2) + spread("n2", 1), {}, []),
    ("2 domains 4/0, maxSkew 1: the last two pods move, in list order", zones("a", "b"),
     spread("n1", 4), {}, ["n1-2", "n1-3"]),
    ("maxSkew 2: 3/1 is balanced", zones("a", "b"),
     spread("n1", 3, constraints=[tsc(2)]) + spread("n2", 1, constraints=[tsc(2)]), {}, []),
    ("maxSkew 2: 4/1 moves half of skew-maxSkew, rounded up: 1", zones("a", "b"),
     spread("n1", 4, constraints=[tsc(2)]) + spread("n2", 1, constraints=[tsc(2)]), {},
     ["n1-3"]),
    ("maxSkew 2: 6/0 moves 2", zones("a", "b"), spread("n1", 6, constraints=[tsc(2)]), {},
     ["n1-4", "n1-5"]),
    ("3 domains 5/0/0, two empty domains pre-created: 3 pods move", zones("a", "b", "c"),
     spread("n1", 5), {}, ["n1-3", "n1-4", "n1-2"]),
    ("4 domains 3/3/0/0: two from the last-sorted big domain, then one from the other",
     zones("a", "b", "c", "d"), spread("n1", 3) + spread("n2", 3), {},
     ["n2-2", "n2-1", "n1-2"]),
    ("two nodes in one zone form one domain", zones("a", "a", "b"),
     spread("n1", 2) + spread("n2", 1), {}, ["n2-0"]),
    ("a node without the topology key is no domain and its pods do not count",
     [*zones("a", "b"), zone_node("n3", None)],
     spread("n1", 2) + spread("n2", 1) + spread("n3", 4), {}, []),
    ("pods not matching the constraint's selector do not count", zones("a", "b"),
     spread("n1", 2) + spread("n1", 3, prefix="other", labels={"app": "db"})
     + spread("n2", 1), {}, []),
    ("a constraint with no labelSelector matches nothing", zones("a", "b"),
     spread("n1", 4, constraints=[tsc(selector=None)]), {}, []),
    ("a constraint with an invalid selector is skipped", zones("a", "b"),
     spread("n1", 4, constraints=[tsc(selector={"matchExpressions": [
         {"key": "app", "operator": "In", "values": []}]})]), {}, []),
    # Soft constraints and the constraints arg.
    ("ScheduleAnyway ignored by default", zones("a", "b"),
     spread("n1", 4, constraints=[tsc(when="ScheduleAnyway")]), {}, []),
    ("ScheduleAnyway processed when listed", zones("a", "b"),
     spread("n1", 4, constraints=[tsc(when="ScheduleAnyway")]),
     {"constraints": ["DoNotSchedule", "ScheduleAnyway"]}, ["n1-2", "n1-3"]),
    ("constraints [ScheduleAnyway] leaves hard constraints alone", zones("a", "b"),
     spread("n1", 4), {"constraints": ["ScheduleAnyway"]}, []),
    # The plugin's own pod filter: namespaces and labelSelector restrict counting too.
    ("labelSelector: only matching pods are counted (1/1 balanced)", zones("a", "b"),
     spread("n1", 1, labels={**LABELS, "evict": "yes"}, prefix="x")
     + spread("n1", 2, labels=LABELS) + spread("n2", 1, labels={**LABELS, "evict": "yes"}),
     {"labelSelector": {"matchLabels": {"evict": "yes"}}}, []),
    ("without labelSelector the same pods are unbalanced", zones("a", "b"),
     spread("n1", 1, labels={**LABELS, "evict": "yes"}, prefix="x")
     + spread("n1", 2, labels=LABELS) + spread("n2", 1, labels={**LABELS, "evict": "yes"}),
     {}, ["n1-1"]),
    ("namespaces exclude", zones("a", "b"), spread("n1", 4, namespace="ops"),
     {"namespaces": {"exclude": ["ops"]}}, []),
    ("namespaces include", zones("a", "b"),
     spread("n1", 4, namespace="ops") + spread("n1", 4, prefix="dev", namespace="dev"),
     {"namespaces": {"include": ["dev"]}}, ["dev-2", "dev-3"]),
    ("each namespace is balanced on its own", zones("a", "b"),
     spread("n1", 2, namespace="x") + spread("n2", 2, prefix="y", namespace="y"), {},
     ["n1-1", "y-1"]),
    # Non-evictable pods are not counted.
    ("bare pods are not counted (1/1 balanced)", zones("a", "b"),
     spread("n1", 1) + spread("n1", 2, prefix="bare", owner=None) + spread("n2", 1), {}, []),
    ("DaemonSet pods are not counted", zones("a", "b"),
     spread("n1", 1) + spread("n1", 3, prefix="ds", owner=("DaemonSet", "d")), {}, []),
    ("terminating pods are not counted", zones("a", "b"),
     spread("n1", 1) + spread("n1", 2, prefix="gone",
                               meta={"deletionTimestamp": "2026-11-22T11:59:00Z"}), {}, []),
    # Pick order within a domain.
    ("highest priority first among pods without selector (upstream's inverted sort)",
     zones("a", "b"),
     spread("n1", 1, prefix="low", priority=5) + spread("n1", 1, prefix="high", priority=20)
     + spread("n1", 1, prefix="nil") + spread("n2", 1), {}, ["high-0"]),
    ("pods with a nodeSelector are taken after the others, whatever their priority",
     zones("a", "b"),
     spread("n1", 1, prefix="sel", priority=1, spec=REQUIRE_ZONE)
     + spread("n1", 1, prefix="plain", priority=100)
     + spread("n1", 1, prefix="plain2", priority=50) + spread("n2", 1),
     {}, ["plain-0"]),
    ("two pods move: ascending priority order, taken from the back",
     zones("a", "b"),
     spread("n1", 1, prefix="aff", priority=1000,
            spec={"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
                                                [{"weight": 1, "preference": {
                                                    "matchExpressions": [{"key": "zone",
                                                                          "operator": "Exists"}]}}]
                                                }}})
     + spread("n1", 1, prefix="p1", priority=1) + spread("n1", 1, prefix="pnil")
     + spread("n1", 1, prefix="p10", priority=10),
     {}, ["p1-0", "p10-0"]),
    # nodeAffinityPolicy (nil = Honor).
    ("Honor: a node the pods' nodeSelector excludes is no domain (2/2 balanced)",
     [zone_node("n1", "a", labels={"pool": "x"}), zone_node("n2", "b", labels={"pool": "x"}),
      zone_node("n3", "c")],
     spread("n1", 2, spec={"nodeSelector": {"pool": "x"}})
     + spread("n2", 2, spec={"nodeSelector": {"pool": "x"}}),
     {"topologyBalanceNodeFit": False}, []),
    ("Ignore: the excluded node's zone is an empty domain (2/2/0)",
     [zone_node("n1", "a", labels={"pool": "x"}), zone_node("n2", "b", labels={"pool": "x"}),
      zone_node("n3", "c")],
     spread("n1", 2, constraints=[tsc(nodeAffinityPolicy="Ignore")],
            spec={"nodeSelector": {"pool": "x"}})
     + spread("n2", 2, constraints=[tsc(nodeAffinityPolicy="Ignore")],
              spec={"nodeSelector": {"pool": "x"}}),
     {"topologyBalanceNodeFit": False}, ["n2-1"]),
    ("Ignore with topologyBalanceNodeFit: the pod fits no below-average node, nothing moves",
     [zone_node("n1", "a", labels={"pool": "x"}), zone_node("n2", "b", labels={"pool": "x"}),
      zone_node("n3", "c")],
     spread("n1", 2, constraints=[tsc(nodeAffinityPolicy="Ignore")],
            spec={"nodeSelector": {"pool": "x"}})
     + spread("n2", 2, constraints=[tsc(nodeAffinityPolicy="Ignore")],
              spec={"nodeSelector": {"pool": "x"}}),
     {}, []),
    ("Honor: pods on a node the policy excludes still count (domain made on demand)",
     [zone_node("n1", "a", labels={"pool": "x"}), zone_node("n2", "b", labels={"pool": "x"}),
      zone_node("n3", "c")],
     spread("n1", 1, spec={"nodeSelector": {"pool": "x"}})
     + spread("n2", 1, spec={"nodeSelector": {"pool": "x"}})
     + spread("n3", 3, spec={"nodeSelector": {"pool": "x"}}),
     {}, ["n3-2"]),
    # nodeTaintsPolicy (nil = Ignore).
    ("taints Ignore (default): a tainted node's zone is a domain",
     [*zones("a", "b"), zone_node("n3", "c", taints=[TAINT])],
     spread("n1", 2) + spread("n2", 2), {"topologyBalanceNodeFit": False}, ["n2-1"]),
    ("taints Honor: an untolerated NoSchedule taint excludes the node",
     [*zones("a", "b"), zone_node("n3", "c", taints=[TAINT])],
     spread("n1", 2, constraints=[tsc(nodeTaintsPolicy="Honor")])
     + spread("n2", 2, constraints=[tsc(nodeTaintsPolicy="Honor")]),
     {"topologyBalanceNodeFit": False}, []),
    ("taints Honor: a tolerated taint keeps the node, and the pod fits there",
     [*zones("a", "b"), zone_node("n3", "c", taints=[TAINT])],
     spread("n1", 2, constraints=[tsc(nodeTaintsPolicy="Honor")],
            spec={"tolerations": TOLERATE})
     + spread("n2", 2, constraints=[tsc(nodeTaintsPolicy="Honor")],
              spec={"tolerations": TOLERATE}),
     {}, ["n2-1"]),
    ("taints Honor ignores PreferNoSchedule",
     [*zones("a", "b"), zone_node("n3", "c", taints=[{**TAINT, "effect": "PreferNoSchedule"}])],
     spread("n1", 2, constraints=[tsc(nodeTaintsPolicy="Honor")])
     + spread("n2", 2, constraints=[tsc(nodeTaintsPolicy="Honor")]), {}, ["n2-1"]),
    # matchLabelKeys.
    ("without matchLabelKeys two revisions count together (2/2)", zones("a", "b"),
     spread("n1", 2, labels={"app": "web", "rev": "1"})
     + spread("n2", 2, labels={"app": "web", "rev": "2"}), {}, []),
    ("matchLabelKeys: each revision is spread on its own",
     zones("a", "b"),
     spread("n1", 2, labels={"app": "web", "rev": "1"},
            constraints=[tsc(matchLabelKeys=["rev"])])
     + spread("n2", 2, labels={"app": "web", "rev": "2"},
              constraints=[tsc(matchLabelKeys=["rev"])]), {}, ["n1-1", "n2-1"]),
    # topologyBalanceNodeFit.
    ("topologyBalanceNodeFit: no room below average, nothing evicted",
     [zone_node("n1", "a"), zone_node("n2", "b", pods="1")],
     spread("n1", 3) + spread("n2", 1), {}, []),
    ("topologyBalanceNodeFit false: evicted even with no room",
     [zone_node("n1", "a"), zone_node("n2", "b", pods="1")],
     spread("n1", 3) + spread("n2", 1), {"topologyBalanceNodeFit": False}, ["n1-2"]),
    ("only nodes of below-average domains are candidates",
     [*zones("a", "b"), zone_node("n3", "c", pods="0")],
     spread("n1", 4) + spread("n2", 2), {}, []),
    ("pods that fit are preferred: a big pod is passed over for one that fits",
     [zone_node("n1", "a"), zone_node("n2", "b", cpu="2")],
     spread("n1", 2) + spread("n1", 1, prefix="big", priority=100, cpu="3")
     + spread("n2", 1), {}, ["n1-1"]),
    # Several constraints.
    ("zone and hostname constraints: pods chosen by both are evicted once",
     zones("a", "a", "b"),
     spread("n1", 3, constraints=[tsc(), tsc(key="kubernetes.io/hostname")]),
     {}, ["n1-2", "n1-1"]),
]


@pytest.mark.parametrize(("nodes", "pods", "raw", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_topology_spread(nodes: list[Any], pods: list[Any], raw: dict[str, Any],
                         expected: list[str]) -> None:
    names, _ = run(nodes, pods, raw)
    assert names == expected


def test_de_node_fit_pre_eviction_filter() -> None:
    nodes = [zone_node("n1", "a"), zone_node("n2", "b", pods="1")]
    pods = spread("n1", 3) + spread("n2", 1)
    assert run(nodes, pods, {"topologyBalanceNodeFit": False})[0] == ["n1-2"]
    names, _ = run(nodes, pods, {"topologyBalanceNodeFit": False},
                   protections={"nodeFit": True})
    assert names == []


def test_pods_on_nodes_not_passed_in_are_not_counted() -> None:
    nodes = [*zones("a", "b"), zone_node("n3", "b", ready=False)]
    pods = spread("n1", 2) + spread("n3", 3)
    assert run(nodes, pods)[0] == ["n1-1"]


def test_node_limit_skips_the_rest_of_the_node() -> None:
    names, handle = run(zones("a", "b", "c"), spread("n1", 5), limits=Limits(per_node=1))
    assert names == ["n1-3"]
    limited = [d.pod for d in handle.log.decisions if d.outcome == "limited"]
    assert limited == ["n1-4"]  # the node is then skipped without asking again


def test_node_limit_other_nodes_continue() -> None:
    pods = (spread("n1", 4, namespace="x") + spread("n2", 4, prefix="m", namespace="y"))
    names, _ = run(zones("a", "b"), pods, limits=Limits(per_node=1))
    assert names == ["n1-2", "m-2"]


def test_total_limit_stops() -> None:
    names, handle = run(zones("a", "b", "c"), spread("n1", 5), limits=Limits(total=2))
    assert names == ["n1-3", "n1-4"]
    assert [d.pod for d in handle.log.decisions if d.outcome == "limited"] == ["n1-2"]


def test_without_defaults_constraints_empty_processes_nothing() -> None:
    """Upstream's plugin uses args.Constraints as given; the loader defaults it."""
    assert run(zones("a", "b"), spread("n1", 4), apply_defaults=False)[0] == []


def test_reason_names_the_domains() -> None:
    _, handle = run(zones("a", "b"), spread("n1", 3) + spread("n2", 1))
    [decision] = handle.log.evictions()
    assert decision.plugin == PLUGIN
    assert decision.reason == (
        "topology spread constraint topologyKey zone (maxSkew 1) in namespace default is "
        "unbalanced: domain zone=a has 3 matching pods, zone=b has 1, ideal average 2.00; "
        "moving 1 pod(s)")


def test_skip_is_recorded_when_nothing_fits() -> None:
    snap = snapshot(zone_node("n1", "a"), zone_node("n2", "b", pods="1"),
                    *spread("n1", 3), *spread("n2", 1))
    handle, executor = handle_for(snap, plugin=PLUGIN)
    handle.log.explain_nodes = frozenset({"n1"})
    plugin_args = args(RemovePodsViolatingTopologySpreadConstraintArgs, {})
    default(plugin_args)
    RemovePodsViolatingTopologySpreadConstraint(plugin_args, handle).balance(snap.ready_nodes())
    assert executor.evicted == []
    [skip] = [d for d in handle.log.decisions if d.outcome == "filtered"]
    assert skip.pod == "n1-2"
    assert "fits none of the 1 node(s)" in skip.reason


def test_one_constraint_per_node_affinity_under_honor() -> None:
    """Pods carrying the same constraint with different node selectors (Honor) are distinct
    constraints, each over its own nodes: the unselective pods' zones are 2/2/0 and one of them
    moves, though pods selecting pool x (2/2 over its two zones) are listed first (one
    constraint for both would be the first pod's). With Ignore every zone counts for both."""
    nodes = [zone_node("n1", "a", labels={"pool": "x"}), zone_node("n2", "b", labels={"pool": "x"}),
             zone_node("n3", "c")]
    in_pool = {"nodeSelector": {"pool": "x"}}
    evicted, _ = run(nodes, spread("n1", 2, prefix="sel", spec=in_pool) + spread("n2", 2))
    assert evicted == ["n2-1"]
    ignore = [tsc(nodeAffinityPolicy="Ignore")]
    evicted, _ = run(nodes, spread("n1", 2, prefix="sel", spec=in_pool, constraints=ignore)
                     + spread("n2", 2, constraints=ignore))
    assert evicted == ["n2-1"]


def _pool(extra_x: list[Any]) -> list[Any]:
    """Pool x (n1 zone a, n2 zone b, and `extra_x`) among six pool-y nodes, so the node label
    index narrows a pool-x selector to a few nodes."""
    return [zone_node("n1", "a", labels={"pool": "x"}), zone_node("n2", "b", labels={"pool": "x"}),
            *extra_x, *(zone_node(f"y{i}", "abc"[i % 3], labels={"pool": "y"}) for i in range(6))]


PIN_X = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [
        {"key": "pool", "operator": "In", "values": ["x"]},
        {"key": "disk", "operator": "NotIn", "values": ["hdd"]}]}]}}}}


@pytest.mark.parametrize(("extra_x", "expected"), [
    ([zone_node("n3", "c", labels={"pool": "x"})], ["n2-1"]),  # zone c: an empty domain
    ([zone_node("n3", "c", labels={"pool": "x", "disk": "hdd"})], []),  # NotIn excludes it
    ([zone_node("n3", "c", labels={"pool": "x"}, ready=False)], []),  # not among the nodes
], ids=["narrowed-node-admitted", "narrowed-node-excluded", "not-ready-node"])
def test_honored_affinity_through_the_node_index(extra_x: list[Any],
                                                 expected: list[str]) -> None:
    """Nodes admitted through the label index are still matched in full, and only those of the
    run's node list count: a pool-x node zone c adds an empty domain only when admitted."""
    pods = (spread("n1", 2, spec=PIN_X) + spread("n2", 2, spec=PIN_X))
    names, _ = run(_pool(extra_x), pods, {"topologyBalanceNodeFit": False})
    assert names == expected


def test_constraints_sharing_an_inclusion_policy_keep_their_own_domains() -> None:
    """Two workloads pinned alike, one spread by zone, one by hostname: the admitted nodes are
    shared, each groups them by its own topology key."""
    extra = [zone_node("n3", "a", labels={"pool": "x"})]
    by_host = [tsc(key="kubernetes.io/hostname", selector={"matchLabels": {"app": "db"}})]
    pods = (spread("n1", 2, spec=PIN_X) + spread("n2", 2, spec=PIN_X)
            + spread("n1", 2, prefix="db", labels={"app": "db"}, constraints=by_host,
                     spec=PIN_X))
    names, _ = run(_pool(extra), pods, {"topologyBalanceNodeFit": False})
    # zone: a (n1, n3) 2, b 2: balanced. hostname: n1 2, n2 0, n3 0: one moves.
    assert names == ["db-1"]


# -- validation and defaults ----------------------------------------------------------------------

def test_validate_constraints() -> None:
    a = args(RemovePodsViolatingTopologySpreadConstraintArgs,
             {"constraints": ["DoNotSchedule", "Sometimes"]})
    assert validate(a) == [
        "constraint Sometimes is not one of map[DoNotSchedule:{} ScheduleAnyway:{}]"]


def test_defaults() -> None:
    a = args(RemovePodsViolatingTopologySpreadConstraintArgs, {})
    default(a)
    assert a.constraints == ["DoNotSchedule"]
    assert a.topology_balance_node_fit is True
    b = args(RemovePodsViolatingTopologySpreadConstraintArgs,
             {"constraints": ["ScheduleAnyway"], "topologyBalanceNodeFit": False})
    default(b)
    assert b.constraints == ["ScheduleAnyway"]
    assert b.topology_balance_node_fit is False


def _policy(plugin_args: dict[str, Any] | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": PLUGIN}
    if plugin_args is not None:
        entry["args"] = plugin_args
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
            "profiles": [{"name": "p", "pluginConfig": [entry],
                          "plugins": {"balance": {"enabled": [PLUGIN]}}}]}


@pytest.mark.parametrize(("raw", "message"), [
    ({"constraints": ["Never"]},
     "constraint Never is not one of map[DoNotSchedule:{} ScheduleAnyway:{}]"),
    ({"namespaces": {"include": ["a"], "exclude": ["b"]}},
     "only one of Include/Exclude namespaces can be set"),
    ({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Bad"}]}},
     "failed to get label selectors from strategy's params: "
     '"Bad" is not a valid label selector operator'),
    ({"namespaces": {"include": ["a"], "exclude": ["b"]}, "constraints": ["X"]},
     "[only one of Include/Exclude namespaces can be set, "
     "constraint X is not one of map[DoNotSchedule:{} ScheduleAnyway:{}]]"),
])
def test_policy_validation_messages(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError) as info:
        policy_from_document("policy.yaml", _policy(raw), PLUGINS)
    assert str(info.value) == f"policy.yaml: in profile p: {message}"


def test_policy_without_args_is_valid_and_defaulted() -> None:
    policy = policy_from_document("policy.yaml", _policy(None), PLUGINS)
    a = policy.profiles[0].args[PLUGIN]
    assert a.constraints == ["DoNotSchedule"]
    assert a.topology_balance_node_fit is True


def test_unknown_arg_is_rejected() -> None:
    with pytest.raises(InputError, match="includeSoftConstraints"):
        policy_from_document("policy.yaml", _policy({"includeSoftConstraints": True}), PLUGINS)


# -- the example ---------------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / PLUGIN


def test_example_simulation() -> None:
    result = run_simulation(str(EXAMPLE / "policy.yaml"), [str(EXAMPLE / "cluster.yaml")], NOW,
                            1, False)
    evicted = [(d.namespace, d.pod, d.plugin) for d in result.evictions]
    # 5/1/0 over three zones, ideal 2: two pods towards zone-c, then one towards zone-b. The
    # bare web-debug pod is not evictable, so it is not counted.
    assert evicted == [("shop", "web-6c9f7-3", PLUGIN), ("shop", "web-6c9f7-4", PLUGIN),
                       ("shop", "web-6c9f7-2", PLUGIN)]
    assert all("topology.kubernetes.io/zone=zone-a has" in d.reason for d in result.evictions)
