"""DefaultEvictor: Filter and PreEvictionFilter, one case per protection and argument
."""

from __future__ import annotations

from typing import Any

import pytest

from builders import NOW, args, decode, handle_for, node, pod, snapshot
from desched.errors import InputError
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs

EVICT = "descheduler.alpha.kubernetes.io/evict"
PREFER_NO = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
MIRROR = "kubernetes.io/config.mirror"
SOURCE = "kubernetes.io/config.source"
CRITICAL = 2_000_000_000

EMPTY_DIR = {"volumes": [{"name": "scratch", "emptyDir": {}}]}
EMPTY_DIR_MEMORY = {"volumes": [{"name": "scratch", "emptyDir": {"medium": "Memory"}}]}
HOST_PATH = {"volumes": [{"name": "host", "hostPath": {"path": "/var/log"}}]}
CONFIG_MAP = {"volumes": [{"name": "cfg", "configMap": {"name": "cfg"}},
                          {"name": "proj", "projected": {"sources": []}}]}
PVC_DATA = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}
CLAIMS = {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]}
DS = ("DaemonSet", "ds-1")
TERMINATING = {"deletionTimestamp": "2026-11-22T11:59:00Z"}


def pvc(name: str, storage_class: str | None, namespace: str = "default") -> Any:
    spec = {} if storage_class is None else {"storageClassName": storage_class}
    return decode("PersistentVolumeClaim",
                  {"metadata": {"name": name, "namespace": namespace}, "spec": spec})


def pdb(name: str, match: dict[str, str], namespace: str = "default") -> Any:
    return decode("PodDisruptionBudget", {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": match}}})


def priority_class(name: str, value: int) -> Any:
    return decode("PriorityClass", {"metadata": {"name": name}, "value": value})


def namespace(name: str, labels: dict[str, str]) -> Any:
    return decode("Namespace", {"metadata": {"name": name, "labels": labels}})


def evictor(raw: dict[str, Any], *objects: Any) -> DefaultEvictor:
    """A DefaultEvictor over a snapshot of two Ready nodes plus `objects`."""
    objs = list(objects)
    if not any(type(o).__name__ == "Node" for o in objs):
        objs = [node("n1"), node("n2"), *objs]
    handle, _ = handle_for(snapshot(*objs))
    return DefaultEvictor(args(DefaultEvictorArgs, raw), handle)


def verdict(raw: dict[str, Any], subject: Any, *extra: Any) -> str | None:
    """Filter's verdict (None = evictable) for `subject`, with `extra` objects in the snapshot."""
    return evictor(raw, subject, *extra).filter(subject)


# --- Filter: one row per protection or argument -----------------------------------------------
# (id, DefaultEvictor args, pod, extra snapshot objects, evictable?)
FILTER_CASES: list[tuple[str, dict[str, Any], Any, list[Any], bool]] = [
    ("owned running pod", {}, pod("p"), [], True),
    # Mirror, static and terminating pods.
    ("mirror pod", {}, pod("p", annotations={MIRROR: "abc"}), [], False),
    ("static pod from file", {}, pod("p", annotations={SOURCE: "file"}), [], False),
    ("static pod from http", {}, pod("p", annotations={SOURCE: "http"}), [], False),
    ("config.source api is not static", {}, pod("p", annotations={SOURCE: "api"}), [], True),
    ("terminating pod", {}, pod("p", meta=TERMINATING), [], False),
    # The evict annotation bypasses every Filter check, whatever its value.
    ("evict annotation: mirror", {}, pod("p", annotations={EVICT: "", MIRROR: "x"}), [], True),
    ("evict annotation: static", {}, pod("p", annotations={EVICT: "", SOURCE: "file"}), [], True),
    ("evict annotation: terminating", {}, pod("p", annotations={EVICT: ""}, meta=TERMINATING),
     [], True),
    ("evict annotation value false still bypasses", {},
     pod("p", annotations={EVICT: "false", MIRROR: "x"}), [], True),
    ("evict annotation: bare + critical + local storage", {},
     pod("p", owner=None, priority=CRITICAL, spec=EMPTY_DIR, annotations={EVICT: "true"}), [],
     True),
    ("evict annotation: daemonset", {}, pod("p", owner=DS, annotations={EVICT: "x"}), [], True),
    ("evict annotation: priority threshold", {"priorityThreshold": {"value": 10}},
     pod("p", priority=50, annotations={EVICT: "x"}), [], True),
    ("evict annotation: label selector", {"labelSelector": {"matchLabels": {"app": "web"}}},
     pod("p", labels={"app": "db"}, annotations={EVICT: "x"}), [], True),
    ("evict annotation: minPodAge", {"minPodAge": "1h"},
     pod("p", created="2026-11-22T11:59:00Z", annotations={EVICT: "x"}), [], True),
    ("evict annotation beats Mandatory no-eviction", {"noEvictionPolicy": "Mandatory"},
     pod("p", annotations={EVICT: "false", PREFER_NO: "true"}), [], True),
    # noEvictionPolicy.
    ("Mandatory + prefer-no-eviction", {"noEvictionPolicy": "Mandatory"},
     pod("p", annotations={PREFER_NO: "true"}), [], False),
    ("Mandatory + prefer-no-eviction with any value", {"noEvictionPolicy": "Mandatory"},
     pod("p", annotations={PREFER_NO: "false"}), [], False),
    ("Mandatory without the annotation", {"noEvictionPolicy": "Mandatory"}, pod("p"), [], True),
    ("Preferred + prefer-no-eviction", {"noEvictionPolicy": "Preferred"},
     pod("p", annotations={PREFER_NO: "true"}), [], True),
    ("unset policy + prefer-no-eviction", {}, pod("p", annotations={PREFER_NO: "true"}), [], True),
    # PodsWithLocalStorage (default on).
    ("emptyDir protected", {}, pod("p", spec=EMPTY_DIR), [], False),
    ("emptyDir of medium Memory protected", {}, pod("p", spec=EMPTY_DIR_MEMORY), [], False),
    ("hostPath protected", {}, pod("p", spec=HOST_PATH), [], False),
    ("configMap and projected volumes are not local storage", {}, pod("p", spec=CONFIG_MAP), [],
     True),
    ("evictLocalStoragePods", {"evictLocalStoragePods": True}, pod("p", spec=EMPTY_DIR), [],
     True),
    ("defaultDisabled PodsWithLocalStorage",
     {"podProtections": {"defaultDisabled": ["PodsWithLocalStorage"]}},
     pod("p", spec=HOST_PATH), [], True),
    # DaemonSetPods (default on).
    ("daemonset pod protected", {}, pod("p", owner=DS), [], False),
    ("daemonset as a second ownerRef protected", {},
     pod("p", meta={"ownerReferences": [
         {"kind": "ReplicaSet", "name": "rs", "uid": "u-rs"},
         {"kind": "DaemonSet", "name": "ds", "uid": "u-ds"}]}), [], False),
    ("evictDaemonSetPods", {"evictDaemonSetPods": True}, pod("p", owner=DS), [], True),
    ("defaultDisabled DaemonSetPods", {"podProtections": {"defaultDisabled": ["DaemonSetPods"]}},
     pod("p", owner=DS), [], True),
    # SystemCriticalPods (default on) and priorityThreshold.
    ("system-critical priority protected", {}, pod("p", priority=CRITICAL), [], False),
    ("just below system-critical evictable", {}, pod("p", priority=CRITICAL - 1), [], True),
    ("evictSystemCriticalPods", {"evictSystemCriticalPods": True},
     pod("p", priority=CRITICAL + 1000), [], True),
    ("defaultDisabled SystemCriticalPods",
     {"podProtections": {"defaultDisabled": ["SystemCriticalPods"]}},
     pod("p", priority=CRITICAL), [], True),
    ("priorityThreshold value: equal priority protected", {"priorityThreshold": {"value": 100}},
     pod("p", priority=100), [], False),
    ("priorityThreshold value: lower priority evictable", {"priorityThreshold": {"value": 100}},
     pod("p", priority=99), [], True),
    ("priorityThreshold value: nil priority evictable", {"priorityThreshold": {"value": 100}},
     pod("p"), [], True),
    ("evictSystemCriticalPods disables priorityThreshold",
     {"evictSystemCriticalPods": True, "priorityThreshold": {"value": 100}},
     pod("p", priority=5000), [], True),
    ("defaultDisabled SystemCriticalPods disables priorityThreshold",
     {"podProtections": {"defaultDisabled": ["SystemCriticalPods"]},
      "priorityThreshold": {"value": 100}}, pod("p", priority=5000), [], True),
    ("priorityThreshold by name: equal priority protected", {"priorityThreshold": {"name": "hi"}},
     pod("p", priority=1000), [priority_class("hi", 1000)], False),
    ("priorityThreshold by name: lower priority evictable", {"priorityThreshold": {"name": "hi"}},
     pod("p", priority=999), [priority_class("hi", 1000)], True),
    # FailedBarePods (default on) and evictFailedBarePods.
    ("bare running pod protected", {}, pod("p", owner=None), [], False),
    ("bare failed pod protected by default", {}, pod("p", owner=None, phase="Failed"), [], False),
    ("evictFailedBarePods: failed bare pod evictable", {"evictFailedBarePods": True},
     pod("p", owner=None, phase="Failed"), [], True),
    ("evictFailedBarePods: running bare pod still protected", {"evictFailedBarePods": True},
     pod("p", owner=None), [], False),
    ("evictFailedBarePods: succeeded bare pod still protected", {"evictFailedBarePods": True},
     pod("p", owner=None, phase="Succeeded"), [], False),
    ("defaultDisabled FailedBarePods: failed bare pod evictable",
     {"podProtections": {"defaultDisabled": ["FailedBarePods"]}},
     pod("p", owner=None, phase="Failed"), [], True),
    ("defaultDisabled FailedBarePods: running bare pod protected",
     {"podProtections": {"defaultDisabled": ["FailedBarePods"]}}, pod("p", owner=None), [],
     False),
    # PodsWithPVC (extra).
    ("PVC pod evictable by default", {}, pod("p", spec=PVC_DATA), [], True),
    ("ignorePvcPods", {"ignorePvcPods": True}, pod("p", spec=PVC_DATA), [], False),
    ("ignorePvcPods: pod without PVC", {"ignorePvcPods": True}, pod("p"), [], True),
    ("extraEnabled PodsWithPVC", {"podProtections": {"extraEnabled": ["PodsWithPVC"]}},
     pod("p", spec=PVC_DATA), [], False),
    ("protectedStorageClasses: claim of a listed class protected",
     {"podProtections": {"extraEnabled": ["PodsWithPVC"], "config": {
         "PodsWithPVC": {"protectedStorageClasses": [{"name": "local"}, {"name": "fast"}]}}}},
     pod("p", spec=PVC_DATA), [pvc("data", "fast")], False),
    ("protectedStorageClasses: claim of another class evictable",
     {"podProtections": {"extraEnabled": ["PodsWithPVC"], "config": {
         "PodsWithPVC": {"protectedStorageClasses": [{"name": "fast"}]}}}},
     pod("p", spec=PVC_DATA), [pvc("data", "standard")], True),
    ("protectedStorageClasses: claim in another namespace does not resolve",
     {"podProtections": {"extraEnabled": ["PodsWithPVC"], "config": {
         "PodsWithPVC": {"protectedStorageClasses": [{"name": "fast"}]}}}},
     pod("p", spec=PVC_DATA), [pvc("data", "standard", namespace="other")], False),
    ("protectedStorageClasses: unresolvable claim stays protected",
     {"podProtections": {"extraEnabled": ["PodsWithPVC"], "config": {
         "PodsWithPVC": {"protectedStorageClasses": [{"name": "fast"}]}}}},
     pod("p", spec=PVC_DATA), [], False),
    ("protectedStorageClasses: claim without a class stays protected",
     {"podProtections": {"extraEnabled": ["PodsWithPVC"], "config": {
         "PodsWithPVC": {"protectedStorageClasses": [{"name": "fast"}]}}}},
     pod("p", spec=PVC_DATA), [pvc("data", None)], False),
    ("protectedStorageClasses: empty list protects every PVC pod",
     {"podProtections": {"extraEnabled": ["PodsWithPVC"], "config": {
         "PodsWithPVC": {"protectedStorageClasses": []}}}},
     pod("p", spec=PVC_DATA), [pvc("data", "standard")], False),
    ("protectedStorageClasses alone does not switch PodsWithPVC on",
     {"podProtections": {"config": {
         "PodsWithPVC": {"protectedStorageClasses": [{"name": "fast"}]}}}},
     pod("p", spec=PVC_DATA), [pvc("data", "fast")], True),
    ("ignorePvcPods + protectedStorageClasses: other class evictable",
     {"ignorePvcPods": True, "podProtections": {"config": {
         "PodsWithPVC": {"protectedStorageClasses": [{"name": "fast"}]}}}},
     pod("p", spec=PVC_DATA), [pvc("data", "standard")], True),
    ("ignorePvcPods + protectedStorageClasses: listed class protected",
     {"ignorePvcPods": True, "podProtections": {"config": {
         "PodsWithPVC": {"protectedStorageClasses": [{"name": "fast"}]}}}},
     pod("p", spec=PVC_DATA), [pvc("data", "fast")], False),
    # PodsWithoutPDB (extra).
    ("pod without PDB evictable by default", {}, pod("p", labels={"app": "web"}), [], True),
    ("ignorePodsWithoutPDB: no PDB", {"ignorePodsWithoutPDB": True},
     pod("p", labels={"app": "web"}), [], False),
    ("ignorePodsWithoutPDB: covered", {"ignorePodsWithoutPDB": True},
     pod("p", labels={"app": "web"}), [pdb("web", {"app": "web"})], True),
    ("ignorePodsWithoutPDB: PDB selects other pods", {"ignorePodsWithoutPDB": True},
     pod("p", labels={"app": "web"}), [pdb("db", {"app": "db"})], False),
    ("ignorePodsWithoutPDB: PDB in another namespace", {"ignorePodsWithoutPDB": True},
     pod("p", labels={"app": "web"}), [pdb("web", {"app": "web"}, namespace="other")], False),
    ("extraEnabled PodsWithoutPDB: no PDB",
     {"podProtections": {"extraEnabled": ["PodsWithoutPDB"]}}, pod("p"), [], False),
    ("extraEnabled PodsWithoutPDB: covered",
     {"podProtections": {"extraEnabled": ["PodsWithoutPDB"]}},
     pod("p", labels={"app": "web"}), [pdb("web", {"app": "web"})], True),
    # PodsWithResourceClaims (extra, new style only).
    ("resource claims evictable by default", {}, pod("p", spec=CLAIMS), [], True),
    ("extraEnabled PodsWithResourceClaims",
     {"podProtections": {"extraEnabled": ["PodsWithResourceClaims"]}},
     pod("p", spec=CLAIMS), [], False),
    ("extraEnabled PodsWithResourceClaims: pod without claims",
     {"podProtections": {"extraEnabled": ["PodsWithResourceClaims"]}}, pod("p"), [], True),
    # The new style keeps the defaults it does not disable.
    ("extraEnabled keeps default protections",
     {"podProtections": {"extraEnabled": ["PodsWithPVC"]}}, pod("p", owner=DS), [], False),
    ("defaultDisabled one keeps the others",
     {"podProtections": {"defaultDisabled": ["DaemonSetPods"]}},
     pod("p", owner=DS, spec=EMPTY_DIR), [], False),
    # labelSelector.
    ("labelSelector matches", {"labelSelector": {"matchLabels": {"app": "web"}}},
     pod("p", labels={"app": "web", "tier": "fe"}), [], True),
    ("labelSelector does not match", {"labelSelector": {"matchLabels": {"app": "web"}}},
     pod("p", labels={"app": "db"}), [], False),
    ("labelSelector matchExpressions NotIn",
     {"labelSelector": {"matchExpressions": [
         {"key": "app", "operator": "NotIn", "values": ["db"]}]}},
     pod("p", labels={"app": "db"}), [], False),
    ("empty labelSelector is ignored", {"labelSelector": {}}, pod("p", labels={"app": "db"}), [],
     True),
    # minReplicas: counts every pod with the same owner UID.
    ("minReplicas 1 is ignored", {"minReplicas": 1}, pod("p"), [], True),
    ("minReplicas 3 with 2 pods protected", {"minReplicas": 3}, pod("p"),
     [pod("sib", node_name="n2")], False),
    ("minReplicas 3 with 3 pods (any phase, any node) evictable", {"minReplicas": 3}, pod("p"),
     [pod("sib", node_name="n2"), pod("done", node_name="n2", phase="Succeeded")], True),
    ("minReplicas: pods of another owner do not count", {"minReplicas": 3}, pod("p"),
     [pod("a", owner=("ReplicaSet", "other")), pod("b", owner=("ReplicaSet", "other"))], False),
    ("minReplicas: pod with two ownerRefs passes", {"minReplicas": 3},
     pod("p", meta={"ownerReferences": [{"kind": "ReplicaSet", "name": "a", "uid": "ua"},
                                        {"kind": "Job", "name": "b", "uid": "ub"}]}), [], True),
    # minPodAge: uses status.startTime, not creationTimestamp.
    ("minPodAge: started long ago", {"minPodAge": "5m"},
     pod("p", created="2026-11-22T11:50:00Z"), [], True),
    ("minPodAge: started recently", {"minPodAge": "5m"},
     pod("p", created="2026-11-22T11:58:00Z"), [], False),
    ("minPodAge: old creationTimestamp, recent startTime", {"minPodAge": "5m"},
     pod("p", created="2026-11-01T00:00:00Z", status={"startTime": "2026-11-22T11:58:00Z"}), [],
     False),
    ("minPodAge: recent creationTimestamp, old startTime", {"minPodAge": "5m"},
     pod("p", created="2026-11-22T11:59:00Z", status={"startTime": "2026-11-22T11:00:00Z"}), [],
     True),
    ("minPodAge: nil startTime protected", {"minPodAge": "5m"},
     pod("p", created="2026-11-01T00:00:00Z", status={"startTime": None}), [], False),
    ("no minPodAge: nil startTime evictable", {},
     pod("p", status={"startTime": None}), [], True),
]


@pytest.mark.parametrize(("raw", "subject", "extra", "evictable"),
                         [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES])
def test_filter(raw: dict[str, Any], subject: Any, extra: list[Any], evictable: bool) -> None:
    reason = verdict(raw, subject, *extra)
    if evictable:
        assert reason is None
    else:
        assert reason  # a non-empty reason


@pytest.mark.parametrize(("subject", "expected"), [
    (pod("p", annotations={MIRROR: "x"}), "pod is a mirror pod"),
    (pod("p", annotations={SOURCE: "file"}), "pod is a static pod"),
    (pod("p", meta=TERMINATING), "pod is terminating"),
    (pod("p", owner=None), "pod does not have any ownerRefs"),
])
def test_filter_reason_text(subject: Any, expected: str) -> None:
    reason = verdict({}, subject)
    assert reason is not None
    assert expected in reason


def test_failed_bare_reason_when_protection_disabled() -> None:
    reason = verdict({"evictFailedBarePods": True}, pod("p", owner=None))
    assert reason is not None
    assert "pod does not have any ownerRefs and is not in failed phase" in reason


def test_filter_collects_every_failing_check() -> None:
    subject = pod("p", owner=None, annotations={MIRROR: "x"}, meta=TERMINATING, spec=EMPTY_DIR)
    reason = verdict({}, subject)
    assert reason is not None
    for part in ("pod is a mirror pod", "pod is terminating", "ownerRefs"):
        assert part in reason
    # Four distinct failures: mirror, terminating, bare, local storage.
    assert len(reason.split("; ")) == 4


def test_priority_threshold_name_missing_raises() -> None:
    with pytest.raises(InputError, match="nope"):
        evictor({"priorityThreshold": {"name": "nope"}})


def test_priority_threshold_above_system_critical_raises() -> None:
    with pytest.raises(InputError, match="can't be greater than 2000000000"):
        evictor({"priorityThreshold": {"value": CRITICAL + 1}})


def test_priority_threshold_not_resolved_when_system_critical_protection_is_off() -> None:
    # The threshold belongs to the SystemCriticalPods protection: with it off, the class is never
    # looked up, so a missing class is no error and a high-priority pod is evictable.
    de = evictor({"evictSystemCriticalPods": True, "priorityThreshold": {"name": "nope"}})
    assert de.filter(pod("p", priority=CRITICAL)) is None


def test_min_replicas_counts_live_snapshot() -> None:
    """The count is taken at Filter time: an eviction removing a sibling drops it below."""
    a, b, c = pod("a"), pod("b", node_name="n2"), pod("c", node_name="n2")
    snap = snapshot(node("n1"), node("n2"), a, b, c)
    handle, _ = handle_for(snap)
    de = DefaultEvictor(args(DefaultEvictorArgs, {"minReplicas": 3}), handle)
    assert de.filter(a) is None
    snap.remove_pod(c)
    assert de.filter(a) is not None


def test_min_pod_age_uses_handle_clock() -> None:
    subject = pod("p", created="2026-11-22T11:00:00Z")  # started one hour before NOW
    snap = snapshot(node("n1"), node("n2"), subject)
    handle, _ = handle_for(snap)
    de = DefaultEvictor(args(DefaultEvictorArgs, {"minPodAge": "59m"}), handle)
    assert de.filter(subject) is None
    de = DefaultEvictor(args(DefaultEvictorArgs, {"minPodAge": "61m"}), handle)
    assert de.filter(subject) is not None
    assert handle.now == NOW


# --- PreEvictionFilter: nodeFit and namespaceLabelSelector -------------------------------------
TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}

# (id, args, nodes, pod, evictable?)
PRE_EVICTION_CASES: list[tuple[str, dict[str, Any], list[Any], Any, bool]] = [
    ("nodeFit off: fits nowhere else, still fine", {},
     [node("n1"), node("n2", unschedulable=True)], pod("p"), True),
    ("nodeFit: another node fits", {"nodeFit": True},
     [node("n1"), node("n2")], pod("p"), True),
    ("nodeFit: other node unschedulable", {"nodeFit": True},
     [node("n1"), node("n2", unschedulable=True)], pod("p"), False),
    ("nodeFit: other node tainted", {"nodeFit": True},
     [node("n1"), node("n2", taints=[TAINT])], pod("p"), False),
    ("nodeFit: taint tolerated", {"nodeFit": True},
     [node("n1"), node("n2", taints=[TAINT])],
     pod("p", spec={"tolerations": [{"key": "dedicated", "operator": "Exists"}]}), True),
    ("nodeFit: other node too small", {"nodeFit": True},
     [node("n1"), node("n2", cpu="50m")], pod("p", cpu="100m"), False),
    ("nodeFit: other node not Ready", {"nodeFit": True},
     [node("n1"), node("n2", ready=False)], pod("p"), False),
    ("nodeFit: nodeSelector of the pod matches only its own node", {"nodeFit": True},
     [node("n1", labels={"pool": "a"}), node("n2", labels={"pool": "b"})],
     pod("p", spec={"nodeSelector": {"pool": "a"}}), False),
    ("nodeFit: args.nodeSelector excludes the only node that fits",
     {"nodeFit": True, "nodeSelector": "pool=a"},
     [node("n1", labels={"pool": "a"}), node("n2", labels={"pool": "b"}),
      node("n3", labels={"pool": "a"}, unschedulable=True)], pod("p"), False),
    ("nodeFit: args.nodeSelector includes a node that fits",
     {"nodeFit": True, "nodeSelector": "pool=a"},
     [node("n1", labels={"pool": "a"}), node("n2", labels={"pool": "b"}),
      node("n3", labels={"pool": "a"})], pod("p"), True),
    ("nodeFit: evict annotation does not bypass PreEvictionFilter", {"nodeFit": True},
     [node("n1"), node("n2", unschedulable=True)], pod("p", annotations={EVICT: "true"}), False),
    # namespaceLabelSelector.
    ("namespaceLabelSelector matches", {"namespaceLabelSelector": {"matchLabels": {"env": "dev"}}},
     [node("n1"), node("n2"), namespace("dev", {"env": "dev"})], pod("p", namespace="dev"), True),
    ("namespaceLabelSelector does not match",
     {"namespaceLabelSelector": {"matchLabels": {"env": "dev"}}},
     [node("n1"), node("n2"), namespace("prod", {"env": "prod"})], pod("p", namespace="prod"),
     False),
    ("namespaceLabelSelector: namespace without labels",
     {"namespaceLabelSelector": {"matchLabels": {"env": "dev"}}},
     [node("n1"), node("n2")], pod("p", namespace="misc"), False),
    ("namespaceLabelSelector: evict annotation does not bypass",
     {"namespaceLabelSelector": {"matchLabels": {"env": "dev"}}},
     [node("n1"), node("n2"), namespace("prod", {"env": "prod"})],
     pod("p", namespace="prod", annotations={EVICT: "true"}), False),
    ("namespaceLabelSelector matchExpressions",
     {"namespaceLabelSelector": {"matchExpressions": [
         {"key": "env", "operator": "In", "values": ["dev", "test"]}]}},
     [node("n1"), node("n2"), namespace("test", {"env": "test"})], pod("p", namespace="test"),
     True),
]


@pytest.mark.parametrize(("raw", "nodes", "subject", "evictable"),
                         [c[1:] for c in PRE_EVICTION_CASES],
                         ids=[c[0] for c in PRE_EVICTION_CASES])
def test_pre_eviction_filter(raw: dict[str, Any], nodes: list[Any], subject: Any,
                             evictable: bool) -> None:
    de = evictor(raw, *nodes, subject)
    reason = de.pre_eviction_filter(subject)
    if evictable:
        assert reason is None
    else:
        assert reason


def test_filter_does_not_check_node_fit_or_namespace() -> None:
    """nodeFit and namespaceLabelSelector are PreEvictionFilter only, not Filter."""
    subject = pod("p", namespace="prod")
    de = evictor({"nodeFit": True, "namespaceLabelSelector": {"matchLabels": {"env": "dev"}}},
                 node("n1"), node("n2", unschedulable=True), namespace("prod", {"env": "prod"}),
                 subject)
    assert de.filter(subject) is None
    assert de.pre_eviction_filter(subject) is not None


def test_node_fit_counts_pods_already_on_the_other_node() -> None:
    subject = pod("p", cpu="1")
    busy = pod("busy", node_name="n2", cpu="3500m")
    de = evictor({"nodeFit": True}, node("n1"), node("n2", cpu="4"), subject, busy)
    assert de.pre_eviction_filter(subject) is not None
    de.handle.snapshot.remove_pod(busy)
    assert de.pre_eviction_filter(subject) is None


def test_filter_rejection_is_counted_in_the_decision_log() -> None:
    subject = pod("p", annotations={MIRROR: "x"})
    snap = snapshot(node("n1"), node("n2"), subject)
    setup, _ = handle_for(snap)
    de = DefaultEvictor(args(DefaultEvictorArgs, {}), setup)
    handle, executor = handle_for(snap, plugin="Probe", filters=[de])
    assert handle.filter(subject) is False
    counts = handle.log.filtered_counts
    assert sum(n for (profile, plugin, _), n in counts.items()
               if plugin == "Probe" and profile == "default") == 1
    assert executor.evicted == []


def test_two_profiles_evictors_keep_their_own_verdicts_on_shared_pods() -> None:
    """Each profile has its own DefaultEvictor; a pod keeps one verdict slot, the second
    evictor keeps its verdicts aside: both stay right when asked in turn."""
    subject = pod("p", spec=EMPTY_DIR)
    snap = snapshot(node("n1"), node("n2"), subject)
    strict = DefaultEvictor(args(DefaultEvictorArgs, {}), handle_for(snap)[0])
    loose = DefaultEvictor(args(DefaultEvictorArgs, {"podProtections": {
        "defaultDisabled": ["PodsWithLocalStorage"]}}), handle_for(snap)[0])
    for _ in range(3):
        assert strict.filter(subject) is not None
        assert loose.filter(subject) is None
