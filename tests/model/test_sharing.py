"""Replicas share their equal parts; nothing that differs is ever shared."""

from __future__ import annotations

import msgspec

from desched.model.kinds import JSON_DECODERS
from desched.model.pod import Pod
from desched.model.sharing import detach


def _pod(name: str, owner: str = "rs-1", cpu: str = "100m", team: str = "a",
         restarts: int = 0) -> Pod:
    body = {
        "metadata": {"name": name, "namespace": "d", "labels": {"app": "web", "team": team},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": owner, "uid": owner, "controller": True}]},
        "spec": {"nodeName": f"node-{name}",
                 "containers": [{"image": "web:1", "resources": {"requests": {"cpu": cpu}}}],
                 "volumes": [{"name": "tmp", "emptyDir": {}}],
                 "tolerations": [{"key": "pool", "operator": "Exists"}],
                 "nodeSelector": {"pool": "blue"}},
        "status": {"phase": "Running", "containerStatuses": [{"restartCount": restarts}]},
    }
    pod: Pod = JSON_DECODERS["Pod"].decode(msgspec.json.encode(body))
    return pod


def test_replicas_share_equal_parts() -> None:
    first, second = _pod("a", owner="rs-share"), _pod("b", owner="rs-share")
    assert first.spec.containers is not second.spec.containers
    detach([first, second])
    assert second.metadata.labels is first.metadata.labels
    assert second.metadata.owner_references is first.metadata.owner_references
    assert second.spec.containers is first.spec.containers
    assert second.spec.volumes is first.spec.volumes
    assert second.spec.tolerations is first.spec.tolerations
    assert second.spec.node_selector is first.spec.node_selector
    assert second.status.container_statuses is first.status.container_statuses
    # What makes a pod itself stays its own.
    assert second.spec.node_name == "node-b" and second.metadata.name == "b"


def test_parts_that_differ_are_not_shared() -> None:
    first = _pod("a", owner="rs-differ")
    other = _pod("b", owner="rs-differ", cpu="200m", team="b", restarts=3)
    detach([first, other])
    assert other.spec.containers is not first.spec.containers
    assert other.requests["cpu"] == 200 and first.requests["cpu"] == 100
    assert other.metadata.labels["team"] == "b" and first.metadata.labels["team"] == "a"
    assert other.status.container_statuses[0].restart_count == 3
    assert other.spec.volumes is first.spec.volumes  # still equal: shared


def test_pods_of_other_owners_are_not_compared() -> None:
    a, b = _pod("a", owner="rs-x"), _pod("b", owner="rs-y")
    detach([a, b])
    assert a.spec.containers is not b.spec.containers
    assert a.spec.containers == b.spec.containers
