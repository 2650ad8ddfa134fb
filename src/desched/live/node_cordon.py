"""Cordoning and uncordoning a node against the API server (CustomPriority's autoCordon): the
strategic merge patch `kubectl cordon` sends, `spec.unschedulable` true (or false).

The patch is idempotent, so a request whose answer was lost may be sent again: no read-back
is needed, unlike an eviction. Retries follow the Eviction API executor's rules: throttling
(429) after Retry-After, transport failures and 5xx a bounded number of times with backoff;
`fence` is asked before each request (a leader that lost its lease sends nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec

from desched.errors import InputError
from desched.framework.evictor import ExecutionResult
from desched.live.client import ApiClient, ApiError, ConnectionLost, Unreachable
from desched.util.backoff import Backoff

PATCH_TYPE = "application/strategic-merge-patch+json"
_encoder = msgspec.json.Encoder()


def cordon_patch(unschedulable: bool) -> bytes:
    return _encoder.encode({"spec": {"unschedulable": unschedulable}})


async def set_unschedulable(client: ApiClient, node: str, unschedulable: bool, *,
                            attempts: int, timeout: float, backoff: Backoff,
                            fence: Callable[[], str | None] | None = None) -> ExecutionResult:
    path = f"/api/v1/nodes/{node}"
    what = f"{'cordon' if unschedulable else 'uncordon'} node {node}"
    body = cordon_patch(unschedulable)
    backoff.reset()
    error, delay = "", 0.0
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
        except (Unreachable, ConnectionLost) as err:  # idempotent: sent again either way
            error = str(err)
            continue
        except InputError as err:  # credentials
            return ExecutionResult(False, "failed", str(err))
        if response.status_code < 300:
            return ExecutionResult(True)
        problem = client.status_error(response, what)
        if isinstance(problem, ApiError) and problem.transient:
            error = str(problem)
            if problem.retry_after is not None:
                delay = max(delay, min(problem.retry_after, backoff.maximum))
            continue
        return ExecutionResult(False, "failed", str(problem))
    return ExecutionResult(False, "failed", f"{error} (gave up after {attempts} attempts)")
