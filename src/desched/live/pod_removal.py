"""How a PodMigrationJob's pod is removed, by eviction policy (docs/migration.md):
`Eviction` through the policy/v1 Eviction API (PodDisruptionBudgets apply), `Delete` with the
pod's UID as a precondition, `SoftEviction` as an annotation another agent acts on.

`remove` answers None when the pod was removed (or annotated), else the error; an error starting
with ALREADY_GONE means the pod went (or was replaced) by other means. When the answer to a
Delete or a SoftEviction is lost, the pod is read back: what took effect counts; what cannot be
told is reported as a failure, and the next pass reads the pod again before sending anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec

from desched.live.client import ApiClient, ApiError, ConnectionLost, Unreachable
from desched.live.eviction_api import ALREADY_GONE, EvictionApiExecutor
from desched.migration import jobdoc as doc
from desched.migration.args import MigrationControllerArgs
from desched.migration.jobdoc import EVICT_TRIGGER
from desched.migration.policies import (
    DELETE,
    EVICTION,
    SOFT_EVICTION,
    SOFT_EVICTION_ANNOTATION,
    DeleteOptions,
    eviction_policy_for,
    soft_eviction_patch,
)
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot
from desched.util.backoff import Backoff

MERGE_PATCH = "application/merge-patch+json"


def error_text(response_code: int, body: bytes) -> str:
    try:
        status = msgspec.json.decode(body)
    except msgspec.DecodeError:
        status = None
    if isinstance(status, dict) and status.get("message"):
        return f"{response_code} {status.get('reason') or ''}: {status['message']}"
    return f"{response_code} {' '.join(body.decode('utf-8', 'replace').split())[:200]}"


class PodRemoval:
    """The eviction policies of one MigrationController."""

    def __init__(self, client: ApiClient, args: MigrationControllerArgs,
                 clock: Callable[[], datetime], *, attempts: int,
                 backoff: Backoff) -> None:
        self.client = client
        self.args = args
        self.clock = clock
        self.eviction_attempts = attempts
        self.backoff = backoff

    async def remove(self, policy: str, job: dict[str, Any], pod: Pod, raw: dict[str, Any],
                     reason: str) -> str | None:
        if policy == DELETE:
            return await self._delete(job, pod)
        if policy == SOFT_EVICTION:
            return await self._soft_evict(job, pod, raw)
        return await self._eviction_api(job, pod, reason)

    def policy(self, pod: Pod, job: dict[str, Any]) -> str:
        """The job's eviction policy: the pod's label, the job's, then evictionPolicy."""
        labels = (job.get("metadata") or {}).get("labels") or {}
        return eviction_policy_for(pod, self.args.eviction_policy or EVICTION, labels)

    async def _eviction_api(self, job: dict[str, Any], pod: Pod, reason: str) -> str | None:
        """The Eviction policy: None when evicted, else the error (or "already gone ...")."""
        trigger = doc.annotations_of(job).get(EVICT_TRIGGER) or "MigrationController"
        executor = EvictionApiExecutor(
            self.client, asyncio.get_running_loop(), ClusterSnapshot(),
            grace_period_seconds=self.grace_period(job), attempts=self.eviction_attempts,
            backoff=self.backoff)
        result = await executor.evict_async(pod, "MigrationController", trigger, reason)
        if result.ok:
            return None
        if result.message.startswith(ALREADY_GONE):
            return result.message
        return f"{result.outcome}: {result.message}"

    async def _delete(self, job: dict[str, Any], pod: Pod) -> str | None:
        """The Delete policy: pods.delete with the job's deleteOptions and the pod's UID as a
        precondition, so a pod recreated under the same name is never deleted."""
        options = self.delete_options(job)
        preconditions = {**(options.get("preconditions") or {}), "uid": str(pod.metadata.uid)}
        body = {"kind": "DeleteOptions", "apiVersion": "v1", **options,
                "preconditions": preconditions}
        what = f"delete pod {pod.key}"
        try:
            response = await self.client.request(
                "DELETE", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}", what=what,
                body=msgspec.json.encode(body))
        except Unreachable as err:
            return str(err)
        except ConnectionLost as err:  # the delete may have been carried out: look
            known, after = await self._read_back(pod)
            if known and (after is None or (after.get("metadata") or {}).get("deletionTimestamp")):
                return None
            return str(err)
        code = response.status_code
        if code < 300:
            return None
        if code in (404, 409):  # gone, or replaced (the UID precondition failed)
            return f"{ALREADY_GONE}: {code}"
        return error_text(code, response.content)

    async def _soft_evict(self, job: dict[str, Any], pod: Pod,
                          raw: dict[str, Any]) -> str | None:
        """The SoftEviction policy: the scheduling.koordinator.sh/soft-eviction annotation on
        the pod, by a JSON merge patch; nothing is deleted. The patch carries the pod's UID:
        the API server refuses it (409) for a pod replaced under the same name."""
        options = self.delete_options(job)
        try:
            typed = msgspec.convert(options, DeleteOptions) if options else None
        except msgspec.ValidationError:
            typed = None
        meta = raw.get("metadata") or {}
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        patch = {"metadata": {"uid": meta.get("uid", ""), "annotations": soft_eviction_patch(
            doc.annotations_of(job), self.clock(), typed)}}
        what = f"annotate pod {namespace}/{name} for soft eviction"
        try:
            response = await self.client.request(
                "PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}", what=what,
                body=msgspec.json.encode(patch), content_type=MERGE_PATCH)
        except Unreachable as err:
            return str(err)
        except ConnectionLost as err:  # the patch may have been applied: look
            known, after = await self._read_back(pod)
            if known and after is None:
                return f"{ALREADY_GONE}: {err}"
            if known and SOFT_EVICTION_ANNOTATION in doc.annotations_of(after or {}):
                return None
            return str(err)
        code = response.status_code
        if code < 300:
            return None
        if code in (404, 409):  # gone, or replaced (the UID no longer matches)
            return f"{ALREADY_GONE}: {code}"
        return error_text(code, response.content)

    def delete_options(self, job: dict[str, Any]) -> dict[str, Any]:
        """spec.deleteOptions, or args.defaultDeleteOptions."""
        options = (job.get("spec") or {}).get("deleteOptions")
        if isinstance(options, dict):
            return options
        default = self.args.default_delete_options
        return msgspec.to_builtins(default) if default is not None else {}

    def grace_period(self, job: dict[str, Any]) -> int | None:
        value = self.delete_options(job).get("gracePeriodSeconds")
        return int(value) if isinstance(value, int) else None

    async def _read_back(self, pod: Pod) -> tuple[bool, dict[str, Any] | None]:
        """(whether it could be read, the pod or None when gone or replaced) after a request
        whose answer was lost. Unreadable, the outcome stays unknown: the caller reports a
        failure, and the next pass reads the pod again before anything is sent."""
        try:
            read = await self.client.read_pod(pod.namespace, pod.name, pod.metadata.uid)
            return True, read.raw if read is not None else None
        except (ApiError, Unreachable, ConnectionLost):
            return False, None
