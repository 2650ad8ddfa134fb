"""The deployment assets under deploy/, the Dockerfile and .dockerignore (docs/deploy.md).

Every YAML file under deploy/ except the Helm templates is parsed and checked for structure: the
CRDs against Koordinator's, RBAC against the verbs desched's features use, the kustomize workloads
against the `desched run` contract. The Helm chart is checked statically (Chart.yaml,
values.yaml, every `.Values.x` a template reads, balanced blocks, standard functions only) and
rendered by Helm's own engine (helm_engine.py) with several values sets; test_chart_parity.py
compares it with upstream's chart. `kubectl kustomize` builds the
overlays when kubectl is on PATH.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_engine
import pytest
import yaml

from desched.plugins.catalog import PLUGINS

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "desched"
TEMPLATES = CHART / "templates"
KUSTOMIZE = DEPLOY / "kustomize"
RBAC = DEPLOY / "rbac"
CRDS = DEPLOY / "crds"
OVERLAYS = ("job", "cronjob", "deployment")
# The image the kustomize workloads name: a placeholder the docs tell you to replace with where
# you pushed scripts/build-image's image. The Helm tests push there too.
PLACEHOLDER_IMAGE = "registry.example.com/desched"

POLICY_PATH = "/policy-dir/policy.yaml"
METRICS_PORT = 10258
HEALTH_PORT = 10259
NONROOT_UID = 65532

# `desched run` flags (and their upstream/Koordinator aliases), plus the runtime flags the
# deployment assets rely on (logging and the leader-election Lease).
RUN_FLAGS = {
    "--policy", "--policy-config-file", "--config", "--kubeconfig", "--context", "--once",
    "--interval", "--descheduling-interval", "--cron", "--dry-run", "--leader-elect",
    "--metrics-address", "--health-address",
}
RUNTIME_FLAGS = {
    "--log-format", "--leader-elect-resource-name", "--leader-elect-resource-namespace",
    "--leader-elect-lease-duration", "--leader-elect-renew-deadline", "--leader-elect-retry-period",
    # the chart's secure serving (docs/running.md, "The secure port")
    "--secure-port", "--delegate-auth", "--tls-cert-file", "--tls-private-key-file",
    "--authorization-always-allow-paths",
}

# Every (apiVersion, kind) the plain manifests may hold.
KNOWN_KINDS = {
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("apps/v1", "Deployment"),
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"),
    ("kustomize.config.k8s.io/v1alpha1", "Component"),
    ("descheduler/v1alpha2", "DeschedulerPolicy"),
}

# What the default ClusterRole grants: (apiGroup, resource) -> verbs. Exactly this, nothing more.
DEFAULT_RULES: dict[tuple[str, str], set[str]] = {
    **{("", r): {"get", "list", "watch"} for r in (
        "nodes", "namespaces", "pods", "persistentvolumeclaims", "replicationcontrollers",
        "services")},
    ("policy", "poddisruptionbudgets"): {"get", "list", "watch"},
    ("scheduling.k8s.io", "priorityclasses"): {"get", "list", "watch"},
    **{("apps", r): {"get", "list", "watch"} for r in (
        "replicasets", "deployments", "statefulsets", "daemonsets")},
    ("batch", "jobs"): {"get", "list", "watch"},
    ("", "pods/eviction"): {"create"},
    ("events.k8s.io", "events"): {"create"},
    ("metrics.k8s.io", "nodes"): {"get", "list"},
    ("metrics.k8s.io", "pods"): {"get", "list"},
    ("slo.koordinator.sh", "nodemetrics"): {"get", "list", "watch"},
    ("scheduling.koordinator.sh", "podmigrationjobs"): {"get", "list", "watch"},
    ("scheduling.koordinator.sh", "reservations"): {"get", "list", "watch"},
}
MIGRATION_RULES: dict[tuple[str, str], set[str]] = {
    ("scheduling.koordinator.sh", "podmigrationjobs"):
        {"get", "list", "watch", "create", "update", "patch", "delete"},
    ("scheduling.koordinator.sh", "reservations"):
        {"get", "list", "watch", "create", "update", "patch", "delete"},
    ("scheduling.koordinator.sh", "podmigrationjobs/status"): {"update", "patch"},
    ("scheduling.koordinator.sh", "reservations/status"): {"update", "patch"},
}
POD_DELETE_RULES: dict[tuple[str, str], set[str]] = {("", "pods"): {"delete", "patch"}}
# The chart's secure serving: desched's reviews, and who may read its pages.
AUTH_DELEGATION_RULES: dict[tuple[str, str], set[str]] = {
    ("authentication.k8s.io", "tokenreviews"): {"create"},
    ("authorization.k8s.io", "subjectaccessreviews"): {"create"}}
READER_URLS = {"/metrics": {"get"}, "/cycles": {"get"}, "/cycles.json": {"get"}}
LEASE_VERBS = {"create", "get", "update"}


# ------------------------------------------------------------------------------------ helpers
def yaml_files() -> list[Path]:
    """Every YAML file under deploy/ except the Helm templates (which are Go templates)."""
    files = sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml"))
    return [p for p in files if TEMPLATES not in p.parents]


def load_docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def load_one(path: Path) -> dict[str, Any]:
    docs = load_docs(path)
    assert len(docs) == 1, f"{path}: expected one document, found {len(docs)}"
    return docs[0]


def objects(paths: list[Path]) -> list[dict[str, Any]]:
    return [d for p in paths for d in load_docs(p)]


def is_plain_manifest(path: Path) -> bool:
    """Files holding Kubernetes objects (or kustomizations / policies): not the chart's metadata."""
    return path.parent != CHART


def rules_of(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    """A Role's rules as (apiGroup, resource) -> verbs; fails on wildcards and duplicates. A
    role of nonResourceURLs only has none (url_rules_of reads those); no role mixes both."""
    out: dict[tuple[str, str], set[str]] = {}
    if all("nonResourceURLs" in rule for rule in role["rules"]):
        return out
    for rule in role["rules"]:
        assert "nonResourceURLs" not in rule, f"{role['metadata']['name']}: mixed rules"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert "*" not in (group, resource), f"{role['metadata']['name']}: wildcard"
                assert "*" not in rule["verbs"], f"{role['metadata']['name']}: wildcard verb"
                key = (group, resource)
                out.setdefault(key, set()).update(rule["verbs"])
    return out


def url_rules_of(role: dict[str, Any]) -> dict[str, set[str]]:
    """A ClusterRole's nonResourceURLs rules as path -> verbs; only those, no wildcards."""
    out: dict[str, set[str]] = {}
    for rule in role["rules"]:
        assert set(rule) == {"nonResourceURLs", "verbs"}, rule
        for path in rule["nonResourceURLs"]:
            assert "*" not in path and "*" not in rule["verbs"], rule
            out.setdefault(path, set()).update(rule["verbs"])
    return out


def flags(args: list[str]) -> dict[str, str | None]:
    """`--flag=value` / bare `--flag` arguments as a dict (the manifests use the `=` form)."""
    out: dict[str, str | None] = {}
    for arg in args:
        assert arg.startswith("--"), f"unexpected positional argument {arg!r} in {args}"
        name, eq, value = arg.partition("=")
        out[name] = value if eq else None
    return out


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    if workload["kind"] == "CronJob":
        return workload["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return workload["spec"]["template"]["spec"]


def check_run_container(spec: dict[str, Any], *, mode: str) -> dict[str, str | None]:
    """The desched container of a pod spec follows the `desched run` contract; returns its flags."""
    containers = spec["containers"]
    assert len(containers) == 1
    c = containers[0]
    assert c.get("command", ["desched"]) == ["desched"]
    assert c["args"][0] == "run", c["args"]
    f = flags(c["args"][1:])
    unknown = set(f) - RUN_FLAGS - RUNTIME_FLAGS
    assert not unknown, f"flags outside the `desched run` contract: {sorted(unknown)}"
    policy_flags = [k for k in ("--policy", "--policy-config-file", "--config") if k in f]
    assert policy_flags and f[policy_flags[0]] == POLICY_PATH
    modes = [k for k in ("--once", "--interval", "--descheduling-interval", "--cron") if k in f]
    assert len(modes) == 1, f"exactly one of --once/--interval/--cron, got {modes}"
    assert modes[0] == mode
    if "--secure-port" in f:  # the chart's default: HTTPS, no plain /metrics
        assert f["--secure-port"] == str(METRICS_PORT) and "--metrics-address" not in f
    else:
        assert f["--metrics-address"] == f":{METRICS_PORT}"
    assert f["--health-address"] == f":{HEALTH_PORT}"

    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"metrics": METRICS_PORT, "health": HEALTH_PORT}
    probe = c["livenessProbe"]["httpGet"]
    assert probe["path"] == "/healthz" and probe["port"] in ("health", HEALTH_PORT)

    assert {"name": "POD_NAMESPACE",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in c["env"]

    requests = c["resources"]["requests"]
    assert requests == {"cpu": "500m", "memory": "256Mi"}

    sc = c["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert sc.get("privileged", False) is False
    assert sc.get("runAsUser", NONROOT_UID) != 0
    pod_sc = spec.get("securityContext", {})
    assert pod_sc.get("runAsNonRoot") is True and pod_sc.get("runAsUser") == NONROOT_UID

    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    policy_mount = mounts["/policy-dir"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "configMap" in volumes[policy_mount["name"]]
    assert spec["priorityClassName"] == "system-cluster-critical"
    return f


def policy_loads(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "desched", "validate", "--policy", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)


def project_version() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


# ------------------------------------------------------------------------------- all YAML files
def test_deploy_tree_exists() -> None:
    for path in (CRDS, RBAC, KUSTOMIZE / "base", CHART / "Chart.yaml", CHART / "values.yaml"):
        assert path.exists(), path
    assert len(yaml_files()) >= 20


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yaml_parses_into_known_kinds(path: Path) -> None:
    docs = load_docs(path)
    assert docs, f"{path} is empty"
    if not is_plain_manifest(path):
        return  # Chart.yaml / values.yaml: see the Helm tests
    for doc in docs:
        assert isinstance(doc, dict), path
        key = (doc.get("apiVersion"), doc.get("kind"))
        assert key in KNOWN_KINDS, f"{path}: unexpected {key}"
        if doc["kind"] not in ("Kustomization", "Component", "DeschedulerPolicy"):
            assert doc["metadata"]["name"]


# ------------------------------------------------------------------------------------------- CRDs
def walk_schema(node: dict[str, Any], where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    yield where, node
    for name, child in node.get("properties", {}).items():
        yield from walk_schema(child, f"{where}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk_schema(node["items"], f"{where}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk_schema(node["additionalProperties"], f"{where}{{}}")


def crd(name: str) -> dict[str, Any]:
    return load_one(CRDS / f"scheduling.koordinator.sh_{name}.yaml")


@pytest.mark.parametrize("name", ["podmigrationjobs", "reservations"])
def test_crd_schema_is_structural(name: str) -> None:
    """The API server accepts only structural schemas: every node has a type unless it preserves
    unknown fields or is int-or-string; no disallowed keywords (anchors are expanded)."""
    schema = crd(name)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for where, node in walk_schema(schema, name):
        if node.get("x-kubernetes-preserve-unknown-fields") or node.get(
                "x-kubernetes-int-or-string"):
            continue
        assert "type" in node, f"{where}: no type"
        if node["type"] == "object" and "properties" in node:
            for req in node.get("required", []):
                assert req in node["properties"], f"{where}: required {req} is not a property"
    text = (CRDS / f"scheduling.koordinator.sh_{name}.yaml").read_text()
    assert not re.search(r":\s+[&*][A-Za-z]", text), "YAML anchors: not every tool expands them"


def printer_columns(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    cols = doc["spec"]["versions"][0]["additionalPrinterColumns"]
    return [(c["name"], c["type"], c["jsonPath"]) for c in cols]


def test_podmigrationjob_crd_matches_koordinator() -> None:
    doc = crd("podmigrationjobs")
    assert doc["metadata"]["name"] == "podmigrationjobs.scheduling.koordinator.sh"
    spec = doc["spec"]
    assert spec["group"] == "scheduling.koordinator.sh"
    assert spec["scope"] == "Cluster"
    assert spec["names"] == {
        "kind": "PodMigrationJob", "listKind": "PodMigrationJobList",
        "plural": "podmigrationjobs", "singular": "podmigrationjob", "shortNames": ["pmj"]}
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    assert printer_columns(doc) == [
        ("Phase", "string", ".status.phase"),
        ("Status", "string", ".status.status"),
        ("Age", "date", ".metadata.creationTimestamp"),
        ("Node", "string", ".status.nodeName"),
        ("Reservation", "string", ".spec.reservationOptions.reservationRef.name"),
        ("PodNamespace", "string", ".spec.podRef.namespace"),
        ("Pod", "string", ".spec.podRef.name"),
        ("NewPod", "string", ".status.podRef.name"),
        ("TTL", "string", ".spec.ttl"),
    ]
    schema = version["schema"]["openAPIV3Schema"]["properties"]
    pmj_spec = schema["spec"]
    assert pmj_spec["required"] == ["podRef"]
    assert set(pmj_spec["properties"]) == {
        "paused", "ttl", "mode", "podRef", "reservationOptions", "deleteOptions"}
    template = pmj_spec["properties"]["reservationOptions"]["properties"]["template"]
    assert template == {**template, "x-kubernetes-preserve-unknown-fields": True}
    assert set(schema["status"]["properties"]) == {
        "phase", "status", "reason", "message", "nodeName", "podRef", "conditions",
        "preemptedPodsRef", "preemptedPodsReservation"}


def test_reservation_crd_matches_koordinator() -> None:
    doc = crd("reservations")
    assert doc["metadata"]["name"] == "reservations.scheduling.koordinator.sh"
    spec = doc["spec"]
    assert spec["group"] == "scheduling.koordinator.sh"
    assert spec["scope"] == "Cluster"
    assert spec["names"] == {"kind": "Reservation", "listKind": "ReservationList",
                             "plural": "reservations", "singular": "reservation"}
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    assert printer_columns(doc) == [
        ("Phase", "string", ".status.phase"),
        ("Age", "date", ".metadata.creationTimestamp"),
        ("Node", "string", ".status.nodeName"),
        ("TTL", "string", ".spec.ttl"),
        ("Expires", "string", ".spec.expires"),
    ]
    rsv = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert rsv["required"] == ["owners", "template"]
    props = rsv["properties"]
    assert props["template"].get("x-kubernetes-preserve-unknown-fields") is True
    assert props["owners"]["minItems"] == 1
    assert props["owners"]["items"]["minProperties"] == 1
    assert set(props["owners"]["items"]["properties"]) == {"object", "controller", "labelSelector"}
    assert props["ttl"]["default"] == "24h"
    assert props["allocateOnce"]["default"] is True
    assert props["allocatePolicy"]["enum"] == ["Aligned", "Restricted"]


def test_helm_chart_ships_the_same_crds() -> None:
    shipped = sorted(p.name for p in (CHART / "crds").glob("*.yaml"))
    assert shipped == sorted(p.name for p in CRDS.glob("*.yaml"))
    for name in shipped:
        assert (CHART / "crds" / name).read_bytes() == (CRDS / name).read_bytes(), name


# ------------------------------------------------------------------------------------------- RBAC
def rbac_objects(*parts: str) -> list[dict[str, Any]]:
    return objects(sorted(RBAC.joinpath(*parts).glob("*.yaml")))


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d.get("kind") == kind]


def test_default_clusterrole_grants_exactly_what_the_features_use() -> None:
    (role,) = by_kind(rbac_objects(), "ClusterRole")
    assert role["metadata"]["name"] == "desched"
    rules = rules_of(role)
    assert rules == DEFAULT_RULES
    assert "delete" not in rules.get(("", "pods"), set()), "pods delete belongs in pod-delete/"
    assert not any(r[0] == "coordination.k8s.io" for r in rules), "leases belong in a Role"


def test_default_rbac_binds_the_serviceaccount() -> None:
    docs = rbac_objects()
    (sa,) = by_kind(docs, "ServiceAccount")
    (binding,) = by_kind(docs, "ClusterRoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": "desched"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": sa["metadata"]["namespace"]}]
    kustomization = load_one(RBAC / "kustomization.yaml")
    assert sorted(kustomization["resources"]) == sorted(
        ["serviceaccount.yaml", "clusterrole.yaml", "clusterrolebinding.yaml"])


def check_bound(docs: list[dict[str, Any]], role_kind: str, binding_kind: str) -> dict[str, Any]:
    (role,) = by_kind(docs, role_kind)
    (binding,) = by_kind(docs, binding_kind)
    assert binding["roleRef"]["kind"] == role_kind
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "desched", "namespace": "kube-system"}]
    return role


DETECTOR_STATE_RULES = {("", "configmaps"): {"create", "get", "update"}}


def test_detector_state_is_a_namespaced_role_on_one_configmap() -> None:
    role = check_bound(rbac_objects("detector-state"), "Role", "RoleBinding")
    assert rules_of(role) == DETECTOR_STATE_RULES
    named = [r for r in role["rules"] if "resourceNames" in r]
    assert named and all(r["resourceNames"] == ["desched-state"] for r in named)
    assert "create" not in {v for r in named for v in r["verbs"]}
    for overlay in ("job", "cronjob"):
        resources = load_one(KUSTOMIZE / overlay / "kustomization.yaml")["resources"]
        assert "../../rbac/detector-state" in resources


def test_leader_election_is_a_namespaced_role_on_leases_only() -> None:
    role = check_bound(rbac_objects("leader-election"), "Role", "RoleBinding")
    rules = rules_of(role)
    assert set(rules) == {("coordination.k8s.io", "leases")}
    assert rules[("coordination.k8s.io", "leases")] == LEASE_VERBS
    named = [r for r in role["rules"] if "resourceNames" in r]
    assert named and all(r["resourceNames"] == ["desched"] for r in named)
    assert "create" not in {v for r in named for v in r["verbs"]}  # create cannot be name-limited


def test_migration_controller_clusterrole() -> None:
    role = check_bound(rbac_objects("migration-controller"), "ClusterRole", "ClusterRoleBinding")
    assert role["metadata"]["name"] == "desched-migration-controller"
    assert rules_of(role) == MIGRATION_RULES


def test_pod_delete_is_a_separate_optional_clusterrole() -> None:
    role = check_bound(rbac_objects("pod-delete"), "ClusterRole", "ClusterRoleBinding")
    assert "optional" in role["metadata"]["name"]
    assert rules_of(role) == POD_DELETE_RULES


def test_pods_delete_appears_only_in_the_optional_role() -> None:
    for path in yaml_files():
        if not is_plain_manifest(path):
            continue
        for doc in load_docs(path):
            if doc.get("kind") in ("ClusterRole", "Role") and "delete" in rules_of(doc).get(
                    ("", "pods"), set()):
                assert path.parent.name == "pod-delete", path


# ------------------------------------------------------------------------------------- kustomize
def overlay_workload(overlay: str) -> dict[str, Any]:
    kustomization = load_one(KUSTOMIZE / overlay / "kustomization.yaml")
    workloads = [d for r in kustomization["resources"] if r.endswith(".yaml")
                 for d in load_docs(KUSTOMIZE / overlay / r)]
    (workload,) = workloads
    return workload


def test_kustomize_base() -> None:
    base = load_one(KUSTOMIZE / "base" / "kustomization.yaml")
    assert base["namespace"] == "kube-system"
    assert "../../rbac" in base["resources"]
    (generator,) = base["configMapGenerator"]
    assert generator["name"] == "desched-policy"
    assert generator["files"] == ["policy.yaml"]
    assert load_one(KUSTOMIZE / "base" / "policy.yaml")["kind"] == "DeschedulerPolicy"


def test_kustomize_base_policy_is_valid() -> None:
    proc = policy_loads(KUSTOMIZE / "base" / "policy.yaml")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kustomize_overlay_workload(overlay: str) -> None:
    kustomization = load_one(KUSTOMIZE / overlay / "kustomization.yaml")
    assert kustomization["namespace"] == "kube-system"
    assert "../base" in kustomization["resources"]
    for ref in kustomization["resources"]:
        assert (KUSTOMIZE / overlay / ref).exists(), ref

    workload = overlay_workload(overlay)
    expected_kind = {"job": "Job", "cronjob": "CronJob", "deployment": "Deployment"}[overlay]
    assert workload["kind"] == expected_kind
    spec = pod_spec(workload)
    assert spec["serviceAccountName"] == "desched"
    image = spec["containers"][0]["image"]
    assert image == f"{PLACEHOLDER_IMAGE}:{project_version()}"
    mode = "--interval" if overlay == "deployment" else "--once"
    f = check_run_container(spec, mode=mode)
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["policy-volume"]["configMap"]["name"] == "desched-policy"

    if overlay == "cronjob":
        assert workload["spec"]["schedule"] == "*/2 * * * *"
        assert workload["spec"]["concurrencyPolicy"] == "Forbid"
    if overlay in ("job", "cronjob"):
        assert spec["restartPolicy"] == "Never"
        assert "--leader-elect" not in f
        assert "../../rbac/leader-election" not in kustomization["resources"]
    if overlay == "deployment":
        assert f["--interval"] == "5m"
        assert "--leader-elect" in f
        assert "../../rbac/leader-election" in kustomization["resources"]
        assert workload["spec"]["replicas"] >= 1
        readiness = spec["containers"][0]["readinessProbe"]["httpGet"]
        assert readiness["path"] == "/readyz" and readiness["port"] in ("health", HEALTH_PORT)
        assert "restartPolicy" not in spec or spec["restartPolicy"] == "Always"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kustomize_overlay_builds(overlay: str) -> None:
    proc = subprocess.run(["kubectl", "kustomize", str(KUSTOMIZE / overlay)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    kinds = sorted(d["kind"] for d in docs)
    expected = ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "ServiceAccount",
                {"job": "Job", "cronjob": "CronJob", "deployment": "Deployment"}[overlay]]
    # The Lease's Role (Deployment), or the detector-state ConfigMap's (Job, CronJob).
    expected += ["Role", "RoleBinding"]
    assert kinds == sorted(expected)
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding"}
    for d in docs:
        if d["kind"] not in cluster_scoped:
            assert d["metadata"]["namespace"] == "kube-system", d["kind"]
    (cm,) = by_kind(docs, "ConfigMap")
    assert set(cm["data"]) == {"policy.yaml"}
    (workload,) = [d for d in docs if d["kind"] in ("Job", "CronJob", "Deployment")]
    spec = pod_spec(workload)
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["policy-volume"]["configMap"]["name"] == cm["metadata"]["name"]
    check_run_container(spec, mode="--interval" if overlay == "deployment" else "--once")


def docs_overlay() -> str:
    """The overlay of your own that docs/deploy.md shows."""
    text = (REPO / "docs" / "deploy.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    (block,) = [b for b in blocks if b.startswith("# deploy/kustomize/mine/kustomization.yaml")]
    return block


def schedule_of(tmp_path: Path, args: list[str], policy_text: str) -> Any:
    """When `desched run ARGS` with this policy runs its cycles (desched's own resolution)."""
    from desched.live.config import RunConfig, resolve_schedule
    from desched.policy_files.loader import load_policy

    params = run_context(args).params
    path = tmp_path / "schedule-policy.yaml"
    path.write_text(policy_text)
    config = RunConfig(policy_path=str(path), once=params["once"], interval=params["interval"],
                       cron=params["cron"])
    return resolve_schedule(config, load_policy(str(path), PLUGINS))


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_kustomize_overlay_of_your_own_follows_a_migration_policy(tmp_path: Path) -> None:
    """The docs' overlay, with a MigrationController policy that sets deschedulingInterval 60s:
    the pushed image, the migration RBAC bound in the overlay's namespace, and cycles every 60s
    (the policy-interval component drops the deployment's --interval=5m)."""
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    mine = tmp_path / "deploy" / "kustomize" / "mine"
    mine.mkdir()
    overlay = docs_overlay()
    assert "REGISTRY/desched" in overlay
    (mine / "kustomization.yaml").write_text(
        overlay.replace("REGISTRY/desched", "registry.internal:5000/desched"))
    policy = (REPO / "examples" / "migration" / "policy.yaml").read_text()
    (mine / "policy.yaml").write_text(policy)
    proc = subprocess.run(["kubectl", "kustomize", str(mine)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]

    (workload,) = by_kind(docs, "Deployment")
    spec = pod_spec(workload)
    (container,) = spec["containers"]
    assert container["image"] == f"registry.internal:5000/desched:{project_version()}"
    assert not any(a.startswith("--interval") for a in container["args"])
    (cm,) = by_kind(docs, "ConfigMap")
    assert cm["data"]["policy.yaml"] == policy
    schedule = schedule_of(tmp_path, container["args"], cm["data"]["policy.yaml"])
    assert (schedule.kind, schedule.interval) == ("interval", 60.0)

    roles = {r["metadata"]["name"]: r for r in by_kind(docs, "ClusterRole")}
    assert rules_of(roles["desched-migration-controller"]) == MIGRATION_RULES
    bindings = {b["roleRef"]["name"]: b for b in by_kind(docs, "ClusterRoleBinding")}
    namespace = workload["metadata"]["namespace"]
    assert bindings["desched-migration-controller"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "desched", "namespace": namespace}]


# ------------------------------------------------------------------------------------ Helm chart
def chart_values() -> dict[str, Any]:
    return load_one(CHART / "values.yaml")


def template_sources() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(TEMPLATES.iterdir()) if p.is_file()}


def test_chart_metadata() -> None:
    chart = load_one(CHART / "Chart.yaml")
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "desched"
    assert chart["type"] == "application"
    assert re.fullmatch(r"\d+\.\d+\.\d+", str(chart["version"]))
    assert str(chart["appVersion"]) == project_version()
    assert not (CHART / "requirements.yaml").exists() and "dependencies" not in chart


def test_chart_values_keep_upstreams_keys() -> None:
    values = chart_values()
    assert values["kind"] == "CronJob"
    assert values["schedule"] == "*/2 * * * *"
    # Empty: the policy's own interval, else 5m (test_helm_deployment_honours_the_policy_interval).
    assert values["deschedulingInterval"] == ""
    # No public image exists: the chart requires the registry the image was pushed to.
    assert values["image"]["repository"] == ""
    assert set(values["leaderElection"]) >= {
        "enabled", "leaseDuration", "renewDeadline", "retryPeriod", "resourceName",
        "resourceNamespace"}
    assert values["leaderElection"]["enabled"] is False
    assert isinstance(values["cmdOptions"], dict)
    assert values["deschedulerPolicyAPIVersion"] == "descheduler/v1alpha2"
    assert isinstance(values["deschedulerPolicy"], dict)
    assert values["policyFile"] == ""
    assert values["priorityClassName"] == "system-cluster-critical"
    assert values["resources"]["requests"] == {"cpu": "500m", "memory": "256Mi"}
    for key in ("nodeSelector", "affinity", "tolerations", "serviceMonitor",
                "podDisruptionBudget", "service", "securityContext", "podSecurityContext"):
        assert key in values, key
    assert values["serviceMonitor"]["enabled"] is False
    assert values["podDisruptionBudget"]["enabled"] is False
    assert values["rbac"] == {"create": True, "migrationController": False, "podDelete": False,
                              "deploymentRestart": False, "nodeCordon": False}
    sc = values["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert values["ports"] == {"metrics": METRICS_PORT, "health": HEALTH_PORT}


def test_chart_default_policy_is_valid_and_matches_kustomize(tmp_path: Path) -> None:
    values = chart_values()
    policy = {"apiVersion": values["deschedulerPolicyAPIVersion"], "kind": "DeschedulerPolicy",
              **values["deschedulerPolicy"]}
    assert policy == load_one(KUSTOMIZE / "base" / "policy.yaml")
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    proc = policy_loads(path)
    assert proc.returncode == 0, proc.stderr


VALUES_REF = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def test_every_values_reference_exists() -> None:
    values = chart_values()
    missing = []
    for name, src in template_sources().items():
        for match in VALUES_REF.finditer(src):
            node: Any = values
            for part in match.group(1).lstrip(".").split("."):
                if not isinstance(node, dict) or part not in node:
                    missing.append(f"{name}: .Values{match.group(1)}")
                    break
                node = node[part]
    assert not missing, missing


ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.S)
BLOCK_OPENERS = {"if", "with", "range", "define", "block"}
# Go text/template builtins, the sprig functions and Helm's own that the chart may use.
STANDARD_FUNCTIONS = {
    # text/template
    "and", "or", "not", "eq", "ne", "lt", "le", "gt", "ge", "len", "index", "print", "printf",
    "println", "html", "js", "urlquery", "call", "slice",
    # helm
    "include", "required", "tpl", "toYaml", "fromYaml", "toJson", "fromJson", "toToml", "lookup",
    # sprig (subset in common use)
    "default", "empty", "coalesce", "ternary", "quote", "squote", "trim", "trimSuffix",
    "trimPrefix", "trunc", "lower", "upper", "title", "replace", "contains", "hasPrefix",
    "hasSuffix", "indent", "nindent", "toString", "int", "int64", "float64", "kindIs", "typeIs",
    "list", "dict", "has", "keys", "get", "set", "merge", "fail", "sha256sum", "b64enc",
    "join", "split", "splitList", "regexMatch", "semverCompare", "toStrings", "first", "last",
    "hasKey", "pluck", "uniq", "without", "until", "add", "sub", "mul", "div", "max", "min",
    "deepCopy", "omit", "fromJsonArray", "regexReplaceAll", "append",
}
KEYWORDS = {"if", "else", "end", "with", "range", "define", "template", "block", "true",
            "false", "nil"}


def actions(src: str) -> Iterator[str]:
    for match in ACTION.finditer(src):
        body = match.group(1)
        if not body.startswith("/*"):
            yield body


@pytest.mark.parametrize("name", sorted(template_sources()))
def test_template_blocks_balance(name: str) -> None:
    depth = 0
    for body in actions(template_sources()[name]):
        word = body.split(None, 1)[0] if body else ""
        if word in BLOCK_OPENERS:
            depth += 1
        elif word == "end":
            depth -= 1
            assert depth >= 0, f"{name}: unbalanced end"
    assert depth == 0, f"{name}: {depth} block(s) not closed"


@pytest.mark.parametrize("name", sorted(template_sources()))
def test_templates_use_standard_functions_only(name: str) -> None:
    strings = re.compile(r'"(?:[^"\\]|\\.)*"|`[^`]*`')
    unknown = set()
    for body in actions(template_sources()[name]):
        body = strings.sub('""', body)
        for word in re.findall(r"(?<![.$\w])([A-Za-z_][A-Za-z0-9_]*)", body):
            if word not in KEYWORDS and word not in STANDARD_FUNCTIONS:
                unknown.add(word)
    assert not unknown, f"{name}: not a standard template function: {sorted(unknown)}"


def test_chart_templates_cover_every_kind() -> None:
    names = set(template_sources())
    assert {"_helpers.tpl", "configmap.yaml", "cronjob.yaml", "deployment.yaml", "job.yaml",
            "serviceaccount.yaml", "clusterrole.yaml", "leader-election-role.yaml",
            "migration-controller-rbac.yaml", "pod-delete-rbac.yaml", "service.yaml",
            "servicemonitor.yaml", "poddisruptionbudget.yaml"} <= names


def template_rules(name: str) -> dict[tuple[str, str], set[str]]:
    """The `rules:` of a ClusterRole template (plain YAML between `rules:` and `---`)."""
    src = template_sources()[name]
    block = src.split("rules:\n", 1)[1].split("---", 1)[0]
    return rules_of({"metadata": {"name": name}, "rules": yaml.safe_load(block)})


def test_chart_rbac_rules_match_the_plain_manifests() -> None:
    assert template_rules("clusterrole.yaml") == DEFAULT_RULES
    assert template_rules("secure-serving-rbac.yaml") == AUTH_DELEGATION_RULES
    assert template_rules("migration-controller-rbac.yaml") == MIGRATION_RULES
    assert template_rules("pod-delete-rbac.yaml") == POD_DELETE_RULES


# ---------------------------------------------------- Helm chart rendered (Helm's own engine)
# Helm's Go SDK as a library (helm_engine.py, a test dependency): Helm itself, on every machine the
# suite runs on.

# Where the tests say the image was pushed (image.repository is required).
TEST_IMAGE = PLACEHOLDER_IMAGE


def with_image(values: dict[str, Any] | None) -> dict[str, Any]:
    """`values` with image.repository set to TEST_IMAGE unless they set it."""
    values = dict(values or {})
    values["image"] = {"repository": TEST_IMAGE, **values.get("image", {})}
    return values


def helm_template(tmp_path: Path, values: dict[str, Any] | None = None,
                  *, expect_failure: bool = False) -> list[dict[str, Any]] | str:
    """`helm template desched CHART --namespace kube-system [--values ...]`: the documents, or
    (expect_failure) the error."""
    if expect_failure:
        return helm_engine.render_error(CHART, with_image(values))
    return helm_engine.render(CHART, with_image(values))


def helm_notes(values: dict[str, Any] | None = None) -> str:
    return helm_engine.notes(CHART, with_image(values))


def rendered(tmp_path: Path, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    docs = helm_template(tmp_path, values)
    assert isinstance(docs, list)
    return docs


def named(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (doc,) = by_kind(docs, kind)
    return doc


def test_helm_lint() -> None:
    report = helm_engine.lint(CHART, with_image(None))
    assert report["errors"] == [] and not [
        m for m in report["messages"] if m["severity"] >= 2], report


def test_helm_default_renders_a_cronjob(tmp_path: Path) -> None:
    docs = rendered(tmp_path)
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["ClusterRole", "ClusterRole", "ClusterRole", "ClusterRoleBinding",
                     "ClusterRoleBinding", "ConfigMap", "CronJob", "Role", "RoleBinding",
                     "ServiceAccount"]
    assert rules_of(named(docs, "Role")) == DETECTOR_STATE_RULES
    cron = named(docs, "CronJob")
    assert cron["spec"]["schedule"] == "*/2 * * * *"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    spec = pod_spec(cron)
    f = check_run_container(spec, mode="--once")
    assert f["--log-format"] == "json"
    # Secure serving with auth delegation by default, on a self-signed certificate.
    assert f["--secure-port"] == str(METRICS_PORT) and "--delegate-auth" in f
    assert "--tls-cert-file" not in f
    assert spec["containers"][0]["image"] == f"{TEST_IMAGE}:{project_version()}"
    roles = {r["metadata"]["name"]: r for r in by_kind(docs, "ClusterRole")}
    assert rules_of(roles["desched"]) == DEFAULT_RULES
    assert rules_of(roles["desched-auth-delegation"]) == AUTH_DELEGATION_RULES
    assert url_rules_of(roles["desched-metrics-reader"]) == READER_URLS
    # desched's ServiceAccount may send the reviews; no reader is bound until one is named.
    bindings = {b["roleRef"]["name"]: b for b in by_kind(docs, "ClusterRoleBinding")}
    assert set(bindings) == {"desched", "desched-auth-delegation"}
    assert bindings["desched-auth-delegation"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "desched", "namespace": "kube-system"}]
    cm = named(docs, "ConfigMap")
    policy = yaml.safe_load(cm["data"]["policy.yaml"])
    assert policy == load_one(KUSTOMIZE / "base" / "policy.yaml")
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["policy-volume"]["configMap"]["name"] == cm["metadata"]["name"]
    sa = named(docs, "ServiceAccount")
    assert spec["serviceAccountName"] == sa["metadata"]["name"]


def test_helm_job(tmp_path: Path) -> None:
    docs = rendered(tmp_path, {"kind": "Job", "cmdOptions": {"dry-run": True}})
    job = named(docs, "Job")
    f = check_run_container(pod_spec(job), mode="--once")
    assert "--dry-run" in f and f["--dry-run"] is None
    assert not by_kind(docs, "CronJob") and not by_kind(docs, "Deployment")


def test_helm_deployment_with_everything(tmp_path: Path) -> None:
    docs = rendered(tmp_path, {
        "kind": "Deployment", "replicas": 2, "deschedulingInterval": "10m",
        "leaderElection": {"enabled": True, "leaseDuration": "30s", "resourceName": "ds"},
        "serviceMonitor": {"enabled": True}, "podDisruptionBudget": {"enabled": True},
        "rbac": {"migrationController": True, "podDelete": True},
        "secureServing": {"enabled": False},
    })
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted([
        "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding",
        "ClusterRoleBinding", "ConfigMap", "Deployment", "PodDisruptionBudget", "Role",
        "RoleBinding", "Service", "ServiceAccount", "ServiceMonitor"])
    dep = named(docs, "Deployment")
    assert dep["spec"]["replicas"] == 2
    f = check_run_container(pod_spec(dep), mode="--interval")
    assert f["--interval"] == "10m"
    assert "--leader-elect" in f
    assert f["--leader-elect-lease-duration"] == "30s"
    assert f["--leader-elect-resource-name"] == "ds"
    assert f["--leader-elect-resource-namespace"] == "kube-system"
    role = named(docs, "Role")
    assert rules_of(role) == {("coordination.k8s.io", "leases"): LEASE_VERBS}
    assert [r["resourceNames"] for r in role["rules"] if "resourceNames" in r] == [["ds"]]
    roles = {r["metadata"]["name"]: rules_of(r) for r in by_kind(docs, "ClusterRole")}
    assert sorted(roles.values(), key=len) == sorted(
        [DEFAULT_RULES, MIGRATION_RULES, POD_DELETE_RULES], key=len)
    svc = named(docs, "Service")
    assert svc["spec"]["ports"][0]["port"] == METRICS_PORT
    monitor = named(docs, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"]
    assert monitor["spec"]["endpoints"][0]["scheme"] == "http"


def test_helm_secure_serving_for_prometheus(tmp_path: Path) -> None:
    """The default secure serving on a Deployment with a ServiceMonitor: HTTPS on the metrics
    port, Prometheus' ServiceAccount bound to the reader role, the scrape https with its token;
    a TLS Secret, when named, is mounted and served."""
    docs = rendered(tmp_path, {
        "kind": "Deployment", "serviceMonitor": {"enabled": True},
        "secureServing": {"tlsSecretName": "desched-tls",
                          "alwaysAllowPaths": ["/healthz", "/readyz"],
                          "prometheus": {"serviceAccount": {"name": "prometheus-k8s",
                                                            "namespace": "monitoring"}}}})
    spec = pod_spec(named(docs, "Deployment"))
    f = check_run_container(spec, mode="--interval")
    assert f["--secure-port"] == str(METRICS_PORT) and "--delegate-auth" in f
    assert (f["--tls-cert-file"], f["--tls-private-key-file"]) == ("/tls/tls.crt",
                                                                    "/tls/tls.key")
    assert f["--authorization-always-allow-paths"] == "/healthz,/readyz"
    mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert mounts["tls"] == {"name": "tls", "mountPath": "/tls", "readOnly": True}
    assert volumes["tls"] == {"name": "tls", "secret": {"secretName": "desched-tls"}}
    # The probes stay on the plain health port (always allowed on the secure port too).
    assert spec["containers"][0]["readinessProbe"]["httpGet"]["port"] == "health"
    roles = {r["metadata"]["name"]: r for r in by_kind(docs, "ClusterRole")}
    bindings = {b["roleRef"]["name"]: b for b in by_kind(docs, "ClusterRoleBinding")}
    assert url_rules_of(roles["desched-metrics-reader"]) == READER_URLS
    assert bindings["desched-metrics-reader"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}]
    assert bindings["desched-metrics-reader"]["roleRef"]["kind"] == "ClusterRole"
    endpoint = named(docs, "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    assert endpoint["port"] == named(docs, "Service")["spec"]["ports"][0]["name"]
    # Without auth delegation: HTTPS only, no reviews, no reader role, no token in the scrape.
    docs = rendered(tmp_path, {"kind": "Deployment", "serviceMonitor": {"enabled": True},
                               "secureServing": {"delegateAuth": False}})
    f = flags(pod_spec(named(docs, "Deployment"))["containers"][0]["args"][1:])
    assert "--secure-port" in f and "--delegate-auth" not in f
    assert {r["metadata"]["name"] for r in by_kind(docs, "ClusterRole")} == {"desched"}
    assert "bearerTokenFile" not in named(docs, "ServiceMonitor")["spec"]["endpoints"][0]


def test_helm_policy_file_is_used_verbatim(tmp_path: Path) -> None:
    koord = (REPO / "examples" / "koordinator-policy.yaml").read_text()
    docs = rendered(tmp_path, {"policyFile": koord, "kind": "Deployment"})
    cm = named(docs, "ConfigMap")
    assert cm["data"]["policy.yaml"].strip() == koord.strip()


@pytest.mark.parametrize("values", [
    {"kind": "DaemonSet"},
    {"kind": "CronJob", "leaderElection": {"enabled": True}},
    {"kind": "Deployment", "replicas": 3},
])
def test_helm_rejects_inconsistent_values(tmp_path: Path, values: dict[str, Any]) -> None:
    helm_template(tmp_path, values, expect_failure=True)



def render_error(tmp_path: Path, values: dict[str, Any]) -> str:
    """The render's error: one line."""
    error = helm_template(tmp_path, values, expect_failure=True)
    assert isinstance(error, str)
    assert "\n" not in error.strip(), error
    return error


# --------------------------------------------------------- the image (issue 22: no public image)
def test_helm_requires_the_image_repository(tmp_path: Path) -> None:
    error = render_error(tmp_path, {"image": {"repository": ""}})
    assert ("image.repository is required: build the image with scripts/build-image and push it "
            "to your registry, then --set image.repository=REGISTRY/desched") in error


def test_helm_image_is_where_it_was_pushed_and_notes_say_so(tmp_path: Path) -> None:
    values = {"image": {"repository": "registry.internal:5000/tools/desched", "tag": "0.1.0-1"}}
    spec = pod_spec(named(rendered(tmp_path, values), "CronJob"))
    assert spec["containers"][0]["image"] == "registry.internal:5000/tools/desched:0.1.0-1"
    notes = helm_notes(values)
    assert ("Image:  registry.internal:5000/tools/desched:0.1.0-1 (built by scripts/build-image"
            in notes)


# --------------------------------------------- the chart follows the policy (issue 22, item 2)
def koordinator_policy(interval: str | None = "60s", evict: dict[str, Any] | None = None,
                       eviction_policy: str | None = None) -> str:
    """A Koordinator DeschedulerConfiguration with RemoveDuplicates; `evict` the profile's evict
    plugin set (None: Koordinator's default, MigrationController)."""
    profile: dict[str, Any] = {"name": "koord-descheduler",
                               "plugins": {"balance": {"enabled": [{"name": "RemoveDuplicates"}]}}}
    if evict is not None:
        profile["plugins"]["evict"] = evict
        profile["plugins"]["filter"] = evict
    if eviction_policy is not None:
        profile["pluginConfig"] = [{"name": "MigrationController", "args": {
            "apiVersion": "descheduler/v1alpha2", "kind": "MigrationControllerArgs",
            "evictionPolicy": eviction_policy}}]
    doc: dict[str, Any] = {"apiVersion": "descheduler/v1alpha2",
                           "kind": "DeschedulerConfiguration", "profiles": [profile]}
    if interval is not None:
        doc["deschedulingInterval"] = interval
    return yaml.safe_dump(doc, sort_keys=False)


DEFAULT_EVICTOR = {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]}
ONLY_MIGRATION = {"disabled": [{"name": "*"}], "enabled": [{"name": "MigrationController"}]}


def in_configmap(policy: str) -> str:
    """The policy wrapped in a ConfigMap, as koord-descheduler's chart keeps it."""
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "koord-descheduler-config"},
                           "data": {"koord-descheduler-config": policy}})


@pytest.mark.parametrize(("policy", "migration"), [
    pytest.param((REPO / "examples" / "migration" / "policy.yaml").read_text(), True,
                 id="example-koordinator-defaults"),
    pytest.param(koordinator_policy(evict=ONLY_MIGRATION), True, id="enabled-by-name"),
    pytest.param(in_configmap(koordinator_policy()), True, id="configmap"),
    pytest.param(koordinator_policy(evict={"disabled": [{"name": "MigrationController"}],
                                           "enabled": [{"name": "DefaultEvictor"}]}), False,
                 id="disabled-by-name"),
    pytest.param((REPO / "examples" / "koordinator-policy.yaml").read_text(), False,
                 id="default-evictor"),
    pytest.param(None, False, id="upstream-default-policy"),
])
def test_helm_grants_the_migration_rbac_the_policy_needs(tmp_path: Path, policy: str | None,
                                                          migration: bool) -> None:
    """A policy whose evict plugin is MigrationController gets the PodMigrationJob/Reservation
    write access without asking (else every job is a 403 at run time), as desched itself reads
    the policy; the CRDs ship in crds/, which Helm installs on the first install."""
    from desched.live.migration import migration_profiles
    from desched.policy_files.loader import load_policy

    values: dict[str, Any] = {"kind": "Deployment"}
    if policy is not None:
        values["policyFile"] = policy
    docs = rendered(tmp_path, values)
    cm = named(docs, "ConfigMap")
    path = tmp_path / "policy.yaml"
    path.write_text(cm["data"]["policy.yaml"])
    assert bool(migration_profiles(load_policy(str(path), PLUGINS))) is migration

    roles = {r["metadata"]["name"]: r for r in by_kind(docs, "ClusterRole")}
    notes = helm_notes(values)
    secure = {"desched-auth-delegation", "desched-metrics-reader"}  # secureServing's
    if not migration:
        assert set(roles) == {"desched", *secure}
        assert "MigrationController" not in notes
        return
    assert set(roles) == {"desched", "desched-migration-controller", *secure}
    assert rules_of(roles["desched-migration-controller"]) == MIGRATION_RULES
    (binding,) = [b for b in by_kind(docs, "ClusterRoleBinding")
                  if b["roleRef"]["name"] == "desched-migration-controller"]
    sa = named(docs, "ServiceAccount")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": "kube-system"}]
    assert ('MigrationController is the policy\'s evict plugin (profiles: "koord-descheduler")'
            in notes)
    assert "ClusterRole desched-migration-controller" in notes
    assert ("kubectl get crd podmigrationjobs.scheduling.koordinator.sh "
            "reservations.scheduling.koordinator.sh") in notes
    crds = {yaml.safe_load(text)["metadata"]["name"] for text in helm_engine.crds(CHART)}
    assert crds == {"podmigrationjobs.scheduling.koordinator.sh",
                    "reservations.scheduling.koordinator.sh"}


@pytest.mark.parametrize("eviction_policy", ["Delete", "SoftEviction"])
def test_helm_refuses_a_pod_delete_policy_without_rbac_pod_delete(tmp_path: Path,
                                                                   eviction_policy: str) -> None:
    """Delete and SoftEviction need `pods delete`/`patch`, which bypass PodDisruptionBudgets:
    never granted silently, the render says which value grants them."""
    values: dict[str, Any] = {"kind": "Deployment",
                              "policyFile": koordinator_policy(eviction_policy=eviction_policy)}
    error = render_error(tmp_path, values)
    assert (f'the policy\'s profile "koord-descheduler" has MigrationController evictionPolicy: '
            f"{eviction_policy}, which needs pods delete and patch (a delete bypasses "
            f"PodDisruptionBudgets): set rbac.podDelete=true") in error
    docs = rendered(tmp_path, {**values, "rbac": {"podDelete": True}})
    roles = {r["metadata"]["name"]: rules_of(r) for r in by_kind(docs, "ClusterRole")}
    assert roles["desched-optional-pod-delete"] == POD_DELETE_RULES
    assert roles["desched-migration-controller"] == MIGRATION_RULES


def test_helm_cronjob_refuses_a_policy_with_its_own_interval(tmp_path: Path) -> None:
    """The CronJob runs one cycle per schedule tick: the policy's 60s would silently become
    every 2 minutes. The render fails in one line naming both ways out."""
    koord = (REPO / "examples" / "koordinator-policy.yaml").read_text()
    error = render_error(tmp_path, {"policyFile": koord})
    assert ('the policy sets deschedulingInterval: 60s, which kind CronJob would replace with '
            'the schedule "*/2 * * * *": set kind=Deployment to run every 60s, or remove '
            "deschedulingInterval from the policy to run on the schedule") in error
    # Without its interval (or with a zero one, which desched ignores) the policy runs on the
    # schedule.
    for interval in (None, "0s"):
        docs = rendered(tmp_path, {"policyFile": koordinator_policy(interval=interval)})
        assert named(docs, "CronJob")["spec"]["schedule"] == "*/2 * * * *"


def test_helm_deployment_honours_the_policy_interval(tmp_path: Path) -> None:
    """kind Deployment runs every deschedulingInterval of the policy, as desched resolves it
    from the rendered arguments and ConfigMap; a different deschedulingInterval value fails."""
    koord = (REPO / "examples" / "koordinator-policy.yaml").read_text()

    def schedule(values: dict[str, Any]) -> Any:
        docs = rendered(tmp_path, values)
        (container,) = pod_spec(named(docs, values["kind"]))["containers"]
        return schedule_of(tmp_path, container["args"],
                           named(docs, "ConfigMap")["data"]["policy.yaml"])

    for values in ({"kind": "Deployment", "policyFile": koord},
                   {"kind": "Deployment", "policyFile": koord, "deschedulingInterval": "60s"}):
        s = schedule(values)
        assert (s.kind, s.interval) == ("interval", 60.0), values
    assert "every 60s (the policy's deschedulingInterval)" in helm_notes(
        {"kind": "Deployment", "policyFile": koord})
    # A policy without an interval: the value, else 5m.
    s = schedule({"kind": "Deployment"})
    assert (s.kind, s.interval) == ("interval", 300.0)
    s = schedule({"kind": "Deployment", "deschedulingInterval": "90s"})
    assert (s.kind, s.interval) == ("interval", 90.0)
    # A Job runs one cycle, and says the policy's interval is not used.
    assert schedule({"kind": "Job", "policyFile": koord}).kind == "once"
    assert "the policy's deschedulingInterval (60s) is not used by a Job" in helm_notes(
        {"kind": "Job", "policyFile": koord})

    error = render_error(tmp_path, {"kind": "Deployment", "policyFile": koord,
                                    "deschedulingInterval": "5m"})
    assert ("deschedulingInterval is 5m but the policy sets deschedulingInterval: 60s: leave "
            "the value empty to use the policy's, or change the policy") in error


def test_helm_refuses_a_policy_file_that_is_not_yaml(tmp_path: Path) -> None:
    error = render_error(tmp_path, {"kind": "Deployment", "policyFile": "profiles: [a"})
    assert "policyFile is not one YAML policy document" in error

# ------------------------------------------------------------- the flags exist in `desched run`
# Every flag the manifests and the chart can emit (the chart adds the lease timings and --dry-run
# only when asked).
EMITTED_FLAGS = sorted({
    "--policy", "--once", "--interval", "--leader-elect", "--metrics-address", "--health-address",
    "--secure-port", "--delegate-auth", "--tls-cert-file", "--tls-private-key-file",
    "--authorization-always-allow-paths",
    "--log-format", "--dry-run", "--leader-elect-resource-name",
    "--leader-elect-resource-namespace", "--leader-elect-lease-duration",
    "--leader-elect-renew-deadline", "--leader-elect-retry-period"})


def test_emitted_flags_are_known() -> None:
    assert set(EMITTED_FLAGS) <= RUN_FLAGS | RUNTIME_FLAGS


def test_desched_run_accepts_every_flag_the_assets_use() -> None:
    proc = subprocess.run([sys.executable, "-m", "desched", "run", "--help"],
                          capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0 and "No such command" in proc.stderr + proc.stdout:
        pytest.skip("`desched run` is not implemented yet")
    assert proc.returncode == 0, proc.stderr
    missing = [f for f in EMITTED_FLAGS if not re.search(rf"{re.escape(f)}\b(?!-)", proc.stdout)]
    assert not missing, f"`desched run --help` does not list {missing}"


# ---------------------------------------------------------------------- Dockerfile, .dockerignore
def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile() -> None:
    instructions = dockerfile_instructions()
    froms = [rest for word, rest in instructions if word == "FROM"]
    assert len(froms) >= 2, "multi-stage build"
    args = dict(rest.split("=", 1) for word, rest in instructions if word == "ARG" and "=" in rest)
    bases = {args.get(f.split()[0].strip("${}"), f.split()[0]) for f in froms}
    assert bases == {"python:3.11-slim"}
    runtime = instructions[max(i for i, (w, _) in enumerate(instructions) if w == "FROM"):]
    words = dict(runtime)
    assert words["USER"] == f"{NONROOT_UID}:{NONROOT_UID}"
    assert words["ENTRYPOINT"] == '["desched"]'
    assert words["CMD"].startswith('["run"')
    env = " ".join(rest for word, rest in runtime if word == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    runs = " ".join(rest for word, rest in instructions if word == "RUN")
    assert "pip install" in runs
    assert "[test]" not in runs and ".[" not in runs, "no dev dependencies in the image"
    assert not any(word == "RUN" for word, _ in runtime), "the runtime stage only copies"
    assert "COPY" in words and "--from=build" in words["COPY"]


def test_dockerignore_keeps_what_the_build_copies() -> None:
    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]

    def ignored(path: str) -> bool:
        verdict = False
        for pattern in patterns:
            negate = pattern.startswith("!")
            pat = pattern.lstrip("!").rstrip("/")
            regex = re.escape(pat).replace(r"\*\*/", "(?:.*/)?").replace(r"\*", "[^/]*")
            regex = regex.replace(r"\[", "[").replace(r"\]", "]")
            if re.fullmatch(f"{regex}(?:/.*)?", path):
                verdict = not negate
        return verdict

    copied = [rest.split()[:-1] for word, rest in dockerfile_instructions()
              if word == "COPY" and "--from" not in rest]
    for sources in copied:
        for source in sources:
            assert not ignored(source), f"{source} is copied but .dockerignore drops it"
    assert not ignored("src/desched/commands/cli.py")
    for path in (".venv/bin/python", ".git/HEAD", "tests/commands/test_cli.py", "bench/README.md",
                 "src/desched/__pycache__/cli.cpython-311.pyc"):
        assert ignored(path), path


# ------------------------------------------------- upstream's chart values, unchanged (issue 11)
# Upstream's chart as it ships (test data, test_chart_parity.py): its own values.yaml.
UPSTREAM_VALUES = Path(__file__).with_name("upstream-chart") / "values.yaml"


def run_context(args: list[str]) -> Any:
    """The rendered container args parsed by `desched run` itself (upstream's pflag spellings
    normalised as the command does): unknown flags and bad values fail here."""
    from desched.commands.cli import run as run_command

    assert args[0] == "run"
    return run_command.make_context("run", list(args[1:]))


@pytest.mark.parametrize("variant", ["CronJob", "Deployment"])
def test_upstream_chart_values_render_a_workload_desched_runs(tmp_path: Path,
                                                              variant: str) -> None:
    values = yaml.safe_load(UPSTREAM_VALUES.read_text())
    # Upstream's image cannot run desched (test_upstream_values_image_must_be_replaced): the
    # one value an upstream values file needs changed, as with --set image.repository=...
    values["image"]["repository"] = TEST_IMAGE
    if variant == "Deployment":
        values.update(kind="Deployment", replicas=2, leaderElection={
            "enabled": True, "leaseDuration": "15s", "renewDeadline": "10s",
            "retryPeriod": "2s", "resourceLock": "leases", "resourceName": "descheduler",
            "resourceNamescape": "descheduling"})
    docs = rendered(tmp_path, values)
    workload = named(docs, variant)
    spec = pod_spec(workload)
    (container,) = spec["containers"]
    args = container["args"]
    ctx = run_context(args)
    assert ctx.params["verbosity"] == 3  # cmdOptions {v: 3}
    assert ctx.params["policy_path"] == POLICY_PATH
    if variant == "CronJob":
        assert ctx.params["once"]
    else:
        assert ctx.params["interval"] == "5m" and ctx.params["leader_elect"]
        assert ctx.params["leader_elect_lease_duration"] == "15s"
        assert ctx.params["leader_elect_resource_name"] == "descheduler"
        # upstream's misspelt key is honoured
        assert ctx.params["leader_elect_resource_namespace"] == "descheduling"
        role = next(d for d in by_kind(docs, "Role")
                    if d["metadata"]["namespace"] == "descheduling")
        assert rules_of(role) == {("coordination.k8s.io", "leases"): LEASE_VERBS}
    # Upstream's HTTPS probe on 10258 is pointed at desched's plain-HTTP health port; upstream's
    # container-port list is kept, its port the metrics port, desched's health port added.
    assert container["image"] == f"{TEST_IMAGE}:{project_version()}"
    probe = container["livenessProbe"]
    assert probe["httpGet"] == {"path": "/healthz", "port": "health", "scheme": "HTTP"}
    assert probe["initialDelaySeconds"] == 5
    assert container["ports"] == [
        {"containerPort": METRICS_PORT, "protocol": "TCP"},
        {"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"}]
    assert ctx.params["secure_port"] == METRICS_PORT
    assert ctx.params["health_address"] == f":{HEALTH_PORT}"
    assert container["securityContext"]["runAsUser"] == 1000  # the user's choice is kept
    # The policy upstream's chart ships is valid for desched as it is.
    cm = named(docs, "ConfigMap")
    path = tmp_path / "policy.yaml"
    path.write_text(cm["data"]["policy.yaml"])
    from desched.framework.runner import check_policy
    from desched.policy_files.loader import load_policy

    check_policy(load_policy(str(path), PLUGINS))


def test_upstream_values_notes_say_what_was_adapted() -> None:
    values = yaml.safe_load(UPSTREAM_VALUES.read_text())
    values["image"]["repository"] = TEST_IMAGE
    notes = helm_notes(values)
    assert "ConfigMap desched-state" in notes


def test_upstream_values_image_must_be_replaced(tmp_path: Path) -> None:
    """Upstream's image runs the Go descheduler, which refuses desched's arguments: rendering
    says so in one line, and how to get desched's image."""
    error = helm_template(tmp_path, yaml.safe_load(UPSTREAM_VALUES.read_text()),
                          expect_failure=True)
    assert isinstance(error, str)
    assert ("image.repository is upstream descheduler's image, which cannot run desched: build "
            "the image with scripts/build-image and push it to your registry, then --set "
            "image.repository=REGISTRY/desched") in error
    assert "\n" not in error.strip()
