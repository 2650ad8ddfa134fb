"""How a migration removes its pod (docs/migration.md), as data: the policy chosen
for a pod and the SoftEviction annotation. The simulation removes the pod whatever the policy;
the live executor reads these to pick the Eviction API, a Delete, or the annotation patch."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Final

import msgspec

from desched.migration.jobdoc import EVICT_REASON, EVICT_TRIGGER, rfc3339
from desched.model.pod import Pod

EVICTION: Final = "Eviction"  # the policy/v1 Eviction subresource: PDBs apply
DELETE: Final = "Delete"  # pods.delete
SOFT_EVICTION: Final = "SoftEviction"  # annotate only; another agent removes the pod
POLICIES = (EVICTION, DELETE, SOFT_EVICTION)

EVICT_POLICY_LABEL: Final = "koordinator.sh/evict-policy"
SOFT_EVICTION_ANNOTATION: Final = "scheduling.koordinator.sh/soft-eviction"


class Preconditions(msgspec.Struct, rename="camel", forbid_unknown_fields=True,
                    omit_defaults=True):
    uid: str | None = None
    resource_version: str | None = None


class DeleteOptions(msgspec.Struct, rename="camel", forbid_unknown_fields=True,
                    omit_defaults=True):
    """metav1.DeleteOptions, fields in Go's declaration order (the order json.Marshal writes)."""

    kind: str | None = None
    api_version: str | None = None
    grace_period_seconds: int | None = None
    preconditions: Preconditions | None = None
    orphan_dependents: bool | None = None
    propagation_policy: str | None = None
    dry_run: list[str] | None = None
    ignore_store_read_error_with_cluster_breaking_potential: bool | None = None


def _custom_policy(labels: Mapping[str, str] | None) -> str:
    return (labels or {}).get(EVICT_POLICY_LABEL, "")


def eviction_policy_for(pod: Pod, default: str = EVICTION,
                        job_labels: Mapping[str, str] | None = None) -> str:
    """The pod's `koordinator.sh/evict-policy` label when set and not empty, else the
    PodMigrationJob's label of the same key, else `default` (args.evictionPolicy). A named
    policy that does not exist falls back to the default; an unknown pod label is not
    overridden by the job's."""
    chosen = _custom_policy(pod.metadata.labels) or _custom_policy(job_labels)
    return chosen if chosen in POLICIES else default


def trigger_and_reason(job_annotations: Mapping[str, str]) -> tuple[str, str]:
    """GetEvictionTriggerAndReason: the PodMigrationJob's evict-trigger, and its evict-reason
    (or the trigger, or "NotSet")."""
    trigger = job_annotations.get(EVICT_TRIGGER, "")
    reason = job_annotations.get(EVICT_REASON, "") or trigger or "NotSet"
    return trigger, reason


def go_json(value: object) -> str:
    """encoding/json.Marshal's text: compact, non-ASCII kept, and <, >, & and the JavaScript
    line separators escaped as Go does by default."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text


def soft_eviction_annotation(now: datetime, initiator: str, reason: str,
                             delete_options: DeleteOptions | None = None) -> str:
    """The value of scheduling.koordinator.sh/soft-eviction (extension.SoftEvictionSpec):
    {"timestamp", "deleteOptions", "initiator", "reason"}, empty ones omitted."""
    spec: dict[str, object] = {"timestamp": rfc3339(now)}
    if delete_options is not None:
        spec["deleteOptions"] = msgspec.to_builtins(delete_options)
    if initiator:
        spec["initiator"] = initiator
    if reason:
        spec["reason"] = reason
    return go_json(spec)


def soft_eviction_patch(job_annotations: Mapping[str, str], now: datetime,
                        delete_options: DeleteOptions | None = None) -> dict[str, str]:
    """The pod annotations a SoftEviction writes for a PodMigrationJob (evictor_soft.go)."""
    trigger, reason = trigger_and_reason(job_annotations)
    return {SOFT_EVICTION_ANNOTATION: soft_eviction_annotation(now, trigger, reason,
                                                                 delete_options)}
