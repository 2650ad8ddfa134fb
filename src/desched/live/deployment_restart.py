"""A surge-first restart against the API server (framework/moves): the patch `kubectl rollout
restart` sends, a strategic merge patch of the Deployment's pod template annotation
`kubectl.kubernetes.io/restartedAt` to the cycle's time (RFC 3339).

The patch carries the Deployment's uid and resourceVersion as the cycle's snapshot saw them:
the API server refuses it (409) when the Deployment changed since, so a Deployment that started
a rollout of its own, or changed its strategy, is never restarted on stale facts; the next cycle
decides again. A request whose answer was lost is not sent twice blindly: the Deployment is read
back, and the annotation at this cycle's time means the earlier request took effect.

Retries follow the Eviction API executor's rules: throttling (429) after Retry-After, transport
failures and 5xx a bounded number of times with backoff.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from desched.errors import InputError
from desched.framework.evictor import ExecutionResult, RestartOrder
from desched.live.client import ApiClient, ApiError, ConnectionLost, Unreachable
from desched.util.backoff import Backoff

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
PATCH_TYPE = "application/strategic-merge-patch+json"
CHANGED = ("the Deployment changed since the cycle's snapshot (409 Conflict); the next cycle "
           "decides again")
_encoder = msgspec.json.Encoder()


def restarted_at(at: datetime) -> str:
    """The annotation's value as kubectl writes it: RFC 3339, whole seconds."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def deployment_path(namespace: str, name: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"


def restart_patch(order: RestartOrder) -> bytes:
    meta: dict[str, str] = {}
    if order.uid:
        meta["uid"] = order.uid
    if order.resource_version:
        meta["resourceVersion"] = order.resource_version
    return _encoder.encode({
        "metadata": meta,
        "spec": {"template": {"metadata": {"annotations": {
            RESTARTED_AT: restarted_at(order.at)}}}},
    })


async def restart(client: ApiClient, order: RestartOrder, *, attempts: int, timeout: float,
                  backoff: Backoff,
                  fence: Callable[[], str | None] | None = None) -> ExecutionResult:
    """`fence` is asked right before each request goes out, retries included (a leader that
    lost its lease meanwhile sends nothing): the Eviction API executor's rule."""
    path = deployment_path(order.namespace, order.name)
    what = f"restart deployment {order.namespace}/{order.name}"
    body = restart_patch(order)
    backoff.reset()
    error, uncertain, delay = "", False, 0.0
    for attempt in range(1, max(1, attempts) + 1):
        if attempt > 1:
            await asyncio.sleep(delay)
        delay = backoff.next()
        refusal = fence() if fence is not None else None
        if refusal:
            return ExecutionResult(False, "failed", refusal)
        try:
            response = await client.request("PATCH", path, what=what, body=body,
                                            timeout=timeout, content_type=PATCH_TYPE)
        except Unreachable as err:  # not sent
            error, uncertain = str(err), False
            continue
        except ConnectionLost as err:
            error, uncertain = f"cannot {err}", True
            continue
        except InputError as err:  # credentials
            return ExecutionResult(False, "failed", str(err))
        code = response.status_code
        if code < 300:
            return ExecutionResult(True, "restarted")
        problem = client.status_error(response, what)
        if code == 409:
            if uncertain and await _applied(client, order, timeout):
                return ExecutionResult(True, "restarted",
                                       "applied by an earlier request whose answer was lost")
            return ExecutionResult(False, "failed", CHANGED)
        if code == 404:
            return ExecutionResult(False, "failed", f"the Deployment is gone: {problem}")
        if isinstance(problem, ApiError) and problem.transient:
            error, uncertain = str(problem), code != 429
            if problem.retry_after is not None:
                delay = max(delay, min(problem.retry_after, backoff.maximum))
            continue
        return ExecutionResult(False, "failed", str(problem))
    if uncertain and await _applied(client, order, timeout):
        return ExecutionResult(True, "restarted",
                               "applied by an earlier request whose answer was lost")
    return ExecutionResult(False, "failed", f"{error} (gave up after {attempts} attempts)")


async def _applied(client: ApiClient, order: RestartOrder, timeout: float) -> bool:
    """Whether the Deployment (the same uid) carries this order's restartedAt."""
    try:
        code, found = await client.call("GET", deployment_path(order.namespace, order.name),
                                        dict[str, Any], what=f"get deployment {order.namespace}/"
                                        f"{order.name}", allow=(404,), timeout=timeout)
    except (ApiError, InputError, ConnectionLost):
        return False
    if code != 200 or found is None:
        return False
    meta = found.get("metadata") or {}
    if order.uid and meta.get("uid") != order.uid:
        return False
    template = ((found.get("spec") or {}).get("template") or {}).get("metadata") or {}
    return (template.get("annotations") or {}).get(RESTARTED_AT) == restarted_at(order.at)
