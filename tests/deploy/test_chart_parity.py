"""desched's chart against upstream descheduler's (issue 37 item 5), field by field.

Upstream's chart v0.36.0 lies under upstream-chart/ as it ships (test data, Apache-2.0: its
NOTICE). Each values set is rendered by Helm's engine (helm_engine.py) twice: through upstream's
chart, and through desched's as a user moving over would pass it (upstream's values.yaml as the
values file, the same set on top, and the one value desched needs changed, image.repository).
Every field of every object is compared; a field that differs must match a row of DIFFERENCES,
which says why (docs/deploy.md lists the same rows), and each row must be seen by some set, so the
list says exactly what differs.

The values sets: upstream's values.yaml alone; each test of upstream's own chart test suites
(upstream-chart/tests/*.yaml, helm-unittest: the suite's `set` and the test's; upstream's chart
has no ci/ values files); and desched's sets below, which give every value issue 37 names
(command, cronJobApiVersion, the workload annotations and labels, initContainers,
namespaceOverride, the ServiceAccount token values, service.ipFamily*, the ServiceMonitor's
apiVersion/insecureSkipVerify/serverName, ports in upstream's shape) a value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_engine
import pytest
import yaml
from test_manifests import CHART, TEST_IMAGE, by_kind, pod_spec, run_context

UPSTREAM_CHART = Path(__file__).with_name("upstream-chart")
# upstream's chart tests' release: the full name is "descheduler" in both charts (each keeps a
# release name that contains its chart's name), so the objects pair by kind and name.
RELEASE = "descheduler"
NAMESPACE = "kube-system"


# ------------------------------------------------------------------------------ the values sets
def upstream_values() -> dict[str, Any]:
    return yaml.safe_load((UPSTREAM_CHART / "values.yaml").read_text())


def merged(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """`top` over `base`, maps merged key by key, as Helm merges a --set over a values file."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def upstream_test_sets() -> Iterator[tuple[str, dict[str, Any]]]:
    """Each test of upstream's chart test suites: the suite's `set` with the test's over it."""
    for suite_path in sorted((UPSTREAM_CHART / "tests").glob("*.yaml")):
        suite = yaml.safe_load(suite_path.read_text())
        assert suite["release"]["name"] == RELEASE, suite_path
        for case in suite["tests"]:
            yield (f"{suite_path.stem}: {case['it']}",
                   merged(suite.get("set") or {}, case.get("set") or {}))


# The token mounted by hand, as upstream's values.yaml shows it (commented out there).
TOKEN_VOLUME = {"name": "kube-api-access", "projected": {"defaultMode": 0o444, "sources": [
    {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
    {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1",
                                             "fieldPath": "metadata.namespace"},
                                "path": "namespace"}]}},
    {"serviceAccountToken": {"expirationSeconds": 3600, "path": "token"}}]}}
TOKEN_MOUNT = {"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
               "name": "kube-api-access", "readOnly": True}

DESCHED_SETS: dict[str, dict[str, Any]] = {
    "CronJob, every value": {
        "cronJobApiVersion": "batch/v1", "namespaceOverride": "descheduling",
        "cronJobAnnotations": {"description": "test cronjob"},
        "cronJobLabels": {"team": "platform"},
        "jobAnnotations": {"sidecar.istio.io/inject": "false"},
        "jobLabels": {"job-type": "maintenance"},
        "podAnnotations": {"pod-annotation": "pod-value"}, "podLabels": {"pod-label": "x"},
        "commonLabels": {"tier": "ops"},
        "suspend": True, "startingDeadlineSeconds": 200, "successfulJobsHistoryLimit": 5,
        "failedJobsHistoryLimit": 2, "ttlSecondsAfterFinished": 600,
        "activeDeadlineSeconds": 60, "timeZone": "Etc/UTC",
        "initContainers": [{"name": "init-wait", "image": "busybox:1.36",
                            "command": ["sh", "-c", "sleep 1"]}],
        "serviceAccount": {"automountServiceAccountToken": False,
                           "annotations": {"owner": "ops"}},
        "automountServiceAccountToken": False,
        "extraServiceAccountVolumes": [TOKEN_VOLUME],
        "extraServiceAccountVolumeMounts": [TOKEN_MOUNT],
        "imagePullSecrets": [{"name": "registry"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "management", "operator": "Equal", "value": "tool",
                         "effect": "NoSchedule"}],
        "dnsConfig": {"options": [{"name": "ndots", "value": "2"}]},
        "podSecurityContext": {"fsGroup": 1000},
        "cmdOptions": {"v": 4, "dry-run": None},
        # the policy goes through tpl in both charts
        "deschedulerPolicy": {"nodeSelector": "node-role.kubernetes.io/{{ .Release.Name }}=true",
                              "maxNoOfPodsToEvictPerNode": 10},
    },
    "Deployment, every value": {
        "kind": "Deployment", "namespaceOverride": "descheduling", "replicas": 2,
        "deploymentAnnotations": {"reloader.stakater.com/auto": "true"},
        "leaderElection": {"enabled": True, "leaseDuration": "15s", "renewDeadline": "10s",
                           "retryPeriod": "2s", "resourceLock": "leases",
                           "resourceName": "descheduler", "resourceNamespace": "descheduling"},
        "ports": [{"name": "metrics", "containerPort": 10300, "protocol": "TCP"}],
        "service": {"enabled": True, "ipFamilyPolicy": "PreferDualStack",
                    "ipFamilies": ["IPv6", "IPv4"]},
        "serviceMonitor": {"enabled": True, "apiVersion": "azmonitoring.coreos.com/v1",
                           "namespace": "monitoring", "additionalLabels": {"release": "kps"},
                           "interval": "30s", "insecureSkipVerify": False,
                           "serverName": "descheduler.descheduling.svc",
                           "metricRelabelings": [{"action": "keep", "regex": "descheduler_.*",
                                                  "sourceLabels": ["__name__"]}],
                           "relabelings": [{"targetLabel": "cluster", "replacement": "a"}]},
        "automountServiceAccountToken": True,
        # not rendered by either chart: the token is mounted automatically
        "extraServiceAccountVolumes": [TOKEN_VOLUME],
        "extraServiceAccountVolumeMounts": [TOKEN_MOUNT],
        "initContainers": [{"name": "init-wait", "image": "busybox:1.36"}],
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                       "whenUnsatisfiable": "DoNotSchedule"}],
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchExpressions": [
                {"key": "app.kubernetes.io/name", "operator": "In",
                 "values": ["descheduler"]}]}}]}},
    },
    "Deployment, a wrapper command": {
        "kind": "Deployment", "command": ["/usr/bin/tini", "--", "desched"],
        "serviceAccount": {"create": False, "name": "existing"},
    },
}


def value_sets() -> list[tuple[str, dict[str, Any]]]:
    return [("upstream values.yaml", {}), *upstream_test_sets(), *DESCHED_SETS.items()]


# ------------------------------------------------------------------- the differences, and why
@dataclass(frozen=True)
class Difference:
    kind: str  # a regular expression over the object's kind
    path: str  # a regular expression over the field's path (see `fields`), matched from its start
    reason: str


WORKLOAD = "CronJob|Deployment"
POD = r"(spec\.jobTemplate\.spec\.template|spec\.template)\."
CONTAINER = POD + r"spec\.containers\[0\]\."
DIFFERENCES = [
    Difference(".*", r"(.*\.)?(labels|matchLabels|selector)\[\"(app\.kubernetes\.io/name|"
               r"helm\.sh/chart|app\.kubernetes\.io/version)\"\]$",
               "the chart's own name and version (desched 0.1.0, not descheduler 0.36.0)"),
    Difference(WORKLOAD, CONTAINER + r"name$", "the container is named for what it runs"),
    Difference(WORKLOAD, CONTAINER + r"image$",
               "desched's image (scripts/build-image, pushed to image.repository); upstream's "
               "runs the Go descheduler and is refused"),
    Difference(WORKLOAD, CONTAINER + r"command\[0\]$",
               "a Python binary: upstream's /bin/descheduler becomes desched"),
    Difference(WORKLOAD, CONTAINER + r"args\[",
               "`desched run`'s arguments (upstream's flags are accepted, test_manifests.py runs "
               "them through desched run): --policy, --once or --interval, the secure and health "
               "ports, the leader election always with its Lease's name and namespace"),
    Difference(WORKLOAD, CONTAINER + r"env\[name=POD_NAMESPACE\]",
               "the default namespace of desched's leader-election Lease and detector state"),
    Difference(WORKLOAD, CONTAINER + r"ports\[(\d|name=health)\]\.(name|containerPort|protocol)$",
               "desched's plain-HTTP health port (10259) is added to upstream's list of ports"),
    Difference(WORKLOAD, CONTAINER + r"livenessProbe\.httpGet\.(port|scheme)$",
               "the probe asks desched's plain-HTTP health port, independent of the certificate "
               "(the rest of upstream's probe is kept)"),
    Difference("Deployment", CONTAINER + r"readinessProbe\.",
               "desched says when it is ready (/readyz): a Deployment rolls on it"),
    Difference(WORKLOAD, CONTAINER + r"securityContext\.runAsGroup$",
               "desched's default (group 65532), which a values file that does not set it keeps"),
    Difference(WORKLOAD, POD + r"spec\.securityContext\.(runAsNonRoot|runAsUser|runAsGroup|"
               r"seccompProfile\.type)$",
               "desched's default pod security context (non-root 65532, RuntimeDefault seccomp), "
               "which upstream's empty podSecurityContext does not remove (Helm keeps a chart's "
               "map defaults under an empty map)"),
    Difference(WORKLOAD, CONTAINER + r"volumeMounts\[name=(policy-volume\]\.readOnly|tmp\])",
               "the policy is mounted read-only; /tmp is writable under readOnlyRootFilesystem"),
    Difference(WORKLOAD, POD + r"spec\.volumes\[name=tmp\]", "the writable /tmp"),
    Difference(WORKLOAD, POD + r"metadata\.annotations\[\"checksum/config\"\]$",
               "the hash of the ConfigMap's text, which desched lays out its own way (the policy "
               "in it is compared key by key and is the same)"),
    Difference("CronJob", r"spec\.jobTemplate\.spec\.backoffLimit$",
               "no retry within a run: a failed cycle waits for the next schedule tick"),
    Difference("ClusterRole", r"rules",
               "desched's rules (docs/deploy.md, RBAC): no pods delete, reads of the owners and "
               "metrics, events create only; the Lease in a Role of its own"),
    Difference("Service", r"spec\.clusterIP$",
               "a Service with a cluster IP, so that service.type may be NodePort or "
               "LoadBalancer; upstream's is headless"),
    Difference("Service", r"spec\.ports\[name=http-metrics\]\.(port|targetPort)$",
               "desched's Service follows the metrics port (ports); upstream's says 10258 "
               "whatever its ports say"),
    Difference("ServiceMonitor", r"spec\.endpoints\[0\]\.(path|bearerTokenFile)$",
               "the scrape sends Prometheus' token: desched checks it (secureServing.delegateAuth;"
               " upstream's port has no authentication)"),
]
EXTRA_OBJECTS = {
    ("ClusterRole", "descheduler-auth-delegation"):
        "desched checks the scraper's token (TokenReview, SubjectAccessReview)",
    ("ClusterRoleBinding", "descheduler-auth-delegation"): "the same, for desched",
    ("ClusterRole", "descheduler-metrics-reader"):
        "who may read desched's pages (bound to secureServing.prometheus.serviceAccount)",
    ("Role", "descheduler-detector-state"):
        "a CronJob's runs keep LowNodeLoad's anomaly counts in one ConfigMap",
    ("RoleBinding", "descheduler-detector-state"): "the same, for desched",
    ("Role", "descheduler-leader-election"):
        "the Lease in its namespace only (upstream grants it cluster-wide in its ClusterRole)",
    ("RoleBinding", "descheduler-leader-election"): "the same, for desched",
    ("Service", "descheduler"):
        "with serviceMonitor.enabled alone: a ServiceMonitor finds its targets through a Service, "
        "which upstream's chart renders only with service.enabled",
}


# -------------------------------------------------------------------------- the comparison
def key_part(key: str) -> str:
    return f".{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key) else f'["{key}"]'


def fields(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) of every leaf: `spec.template.metadata.labels["app.kubernetes.io/name"]`,
    list items by their `name` when each has a distinct one (`volumes[name=tmp]`), else by
    index (`containers[0]`, whose names differ on purpose). An empty map or list is a leaf."""
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from fields(value, path + key_part(str(key)))
    elif isinstance(node, list) and node:
        names = [item.get("name") for item in node if isinstance(item, dict)]
        by_name = (not path.endswith("containers") and len(names) == len(node)
                   and None not in names and len(set(names)) == len(names))
        for index, item in enumerate(node):
            yield from fields(item, f"{path}[name={item['name']}]" if by_name
                              else f"{path}[{index}]")
    else:
        yield path.lstrip("."), node


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """The object, its ConfigMap's policy parsed: compared key by key, not as text."""
    if doc["kind"] == "ConfigMap" and "policy.yaml" in doc.get("data", {}):
        doc = {**doc, "data": {**doc["data"],
                               "policy.yaml": yaml.safe_load(doc["data"]["policy.yaml"])}}
    return doc


def render_both(values: dict[str, Any]) -> tuple[dict[tuple[str, str], Any],
                                                 dict[tuple[str, str], Any]]:
    upstream = helm_engine.render(UPSTREAM_CHART, values, release=RELEASE, namespace=NAMESPACE)
    mine = merged(upstream_values(), values)
    mine = merged(mine, {"image": {"repository": TEST_IMAGE}})
    desched = helm_engine.render(CHART, mine, release=RELEASE, namespace=NAMESPACE)

    def index(docs: list[dict[str, Any]]) -> dict[tuple[str, str], Any]:
        out = {(d["kind"], d["metadata"]["name"]): comparable(d) for d in docs}
        assert len(out) == len(docs), "two objects of one kind and name"
        return out

    return index(upstream), index(desched)


def unexplained(values: dict[str, Any], seen: set[int]) -> list[str]:
    """Each field that differs and no row of DIFFERENCES explains; the rows used go in `seen`."""
    upstream, desched = render_both(values)
    problems = [f"{kind} {name}: only in upstream's rendering"
                for kind, name in upstream.keys() - desched.keys()]
    problems += [f"{kind} {name}: only in desched's rendering, not in EXTRA_OBJECTS"
                 for kind, name in desched.keys() - upstream.keys()
                 if (kind, name) not in EXTRA_OBJECTS]
    for key in upstream.keys() & desched.keys():
        theirs, ours = dict(fields(upstream[key])), dict(fields(desched[key]))
        for path in sorted(theirs.keys() | ours.keys()):
            if path in theirs and path in ours and theirs[path] == ours[path]:
                continue
            rows = [i for i, row in enumerate(DIFFERENCES)
                    if re.fullmatch(row.kind, key[0]) and re.match(row.path, path)]
            if rows:
                seen.update(rows)
                continue
            problems.append(f"{key[0]} {key[1]}: {path}: upstream "
                            f"{theirs.get(path, '<absent>')!r}, desched "
                            f"{ours.get(path, '<absent>')!r}")
    return problems


@pytest.mark.parametrize(("name", "values"), value_sets(), ids=[n for n, _ in value_sets()])
def test_desched_renders_upstreams_values_as_upstream(name: str, values: dict[str, Any]) -> None:
    problems = unexplained(values, set())
    assert not problems, "\n".join(problems)
    # The arguments, the one part compared by meaning: `desched run` takes them as they are.
    _, desched = render_both(values)
    (workload,) = [doc for (kind, _), doc in desched.items() if kind in ("CronJob", "Deployment")]
    ctx = run_context(pod_spec(workload)["containers"][0]["args"])
    assert ctx.params["policy_path"] == "/policy-dir/policy.yaml"


def test_every_listed_difference_is_seen() -> None:
    """A row no values set needs is not a difference any more: the list must say what differs."""
    seen: set[int] = set()
    for _, values in value_sets():
        unexplained(values, seen)
    unused = [row.path for i, row in enumerate(DIFFERENCES) if i not in seen]
    assert not unused, unused


def test_every_set_gives_the_objects_upstream_gives() -> None:
    """The sets reach what the comparison is for: each kind of upstream's chart is rendered."""
    kinds: set[str] = set()
    for _, values in value_sets():
        upstream, _ = render_both(values)
        kinds |= {kind for kind, _ in upstream}
    assert kinds == {"ClusterRole", "ClusterRoleBinding", "ConfigMap", "CronJob", "Deployment",
                     "Service", "ServiceAccount", "ServiceMonitor"}


# ------------------------------------------------------ what only desched's chart has, or refuses
def desched_render(values: dict[str, Any]) -> list[dict[str, Any]]:
    return helm_engine.render(CHART, merged(values, {"image": {"repository": TEST_IMAGE}}),
                              release=RELEASE, namespace=NAMESPACE)


def test_a_job_carries_job_annotations_and_labels() -> None:
    """kind: Job (desched's one-cycle-now kind) is the Job a CronJob would create."""
    (job,) = by_kind(desched_render({"kind": "Job", "jobAnnotations": {"a": "1"},
                                     "jobLabels": {"job-type": "maintenance"}}), "Job")
    assert job["metadata"]["annotations"] == {"a": "1"}
    assert job["metadata"]["labels"]["job-type"] == "maintenance"
    assert job["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE


def test_namespace_override_moves_every_namespaced_object_but_the_servicemonitor() -> None:
    docs = desched_render({
        "kind": "Deployment", "namespaceOverride": "descheduling", "replicas": 2,
        "leaderElection": {"enabled": True}, "serviceMonitor": {"enabled": True},
        "podDisruptionBudget": {"enabled": True}, "grafanaDashboard": {"enabled": True},
        "rbac": {"migrationController": True, "deploymentRestart": True}})
    namespaces = {(d["kind"], d["metadata"]["name"]): d["metadata"].get("namespace")
                  for d in docs}
    # upstream's chart puts its ServiceMonitor in the release namespace (serviceMonitor.namespace)
    assert namespaces.pop(("ServiceMonitor", "descheduler-servicemonitor")) == NAMESPACE
    assert {ns for ns in namespaces.values() if ns is not None} == {"descheduling"}
    subjects = [s for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")
                for s in d["subjects"] if s["name"] == RELEASE]
    assert subjects and {s["namespace"] for s in subjects} == {"descheduling"}
    (deployment,) = by_kind(docs, "Deployment")
    args = pod_spec(deployment)["containers"][0]["args"]
    assert "--leader-elect-resource-namespace=descheduling" in args


def test_a_token_mounted_by_hand_is_mounted_only_without_the_automatic_one() -> None:
    extra = {"extraServiceAccountVolumes": [TOKEN_VOLUME],
             "extraServiceAccountVolumeMounts": [TOKEN_MOUNT]}
    for automount, mounted in ((None, True), (False, True), (True, False)):
        (cron,) = by_kind(desched_render({**extra, "automountServiceAccountToken": automount}),
                          "CronJob")
        spec = pod_spec(cron)
        assert spec.get("automountServiceAccountToken") == automount
        assert (TOKEN_VOLUME in spec["volumes"]) is mounted
        assert (TOKEN_MOUNT in spec["containers"][0]["volumeMounts"]) is mounted


@pytest.mark.parametrize(("values", "message"), [
    ({"ports": []}, "ports is an empty list: give upstream's list of container ports (the first "
                    "is the metrics port) or desched's {metrics: 10258, health: 10259}"),
    ({"ports": [{"name": "metrics", "protocol": "TCP"}]},
     'ports: every item of the list needs a containerPort, as a container port does: '
     '{"name":"metrics","protocol":"TCP"}'),
    ({"command": "desched"}, 'command must be a list, as a container\'s command is, not "desched"'),
])
def test_values_desched_cannot_render_are_refused(values: dict[str, Any], message: str) -> None:
    error = helm_engine.render_error(CHART, merged(values, {"image": {"repository": TEST_IMAGE}}))
    assert message in error
    assert "\n" not in error.strip()


def test_upstream_ports_name_the_metrics_and_health_listeners() -> None:
    """The list's first port is the metrics listener; a port named health is the health one."""
    (deployment,) = by_kind(desched_render({"kind": "Deployment", "ports": [
        {"containerPort": 10300, "protocol": "TCP"},
        {"name": "health", "containerPort": 10301, "protocol": "TCP"}]}), "Deployment")
    container = pod_spec(deployment)["containers"][0]
    assert container["ports"] == [{"containerPort": 10300, "protocol": "TCP"},
                                  {"name": "health", "containerPort": 10301, "protocol": "TCP"}]
    ctx = run_context(container["args"])
    assert (ctx.params["secure_port"], ctx.params["health_address"]) == (10300, ":10301")
