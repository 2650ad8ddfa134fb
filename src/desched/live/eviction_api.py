"""The live executor: evictions through the policy/v1 Eviction API.

The Evictor and the plugins are synchronous and run in a worker thread (desched.live.run), while
the API client lives on the event loop with the informers. `evict` therefore hands the request to
the loop (run_coroutine_threadsafe) and blocks the cycle until the answer is in: the cycle sees
each eviction's outcome before it picks the next pod, exactly as in a simulation.

Answers:
- 2xx: evicted; the pod leaves the cycle's snapshot so later plugins no longer consider it;
- 429 with a DisruptionBudget cause (or a budget message): refused by a PodDisruptionBudget,
  recorded as "pdb-blocked", not retried (upstream does not retry either);
- 429 "Eviction triggered evacuation" for a pod annotated request-evict-only: an eviction in
  background started (KubeVirt's live migration, framework/background.py), not retried;
- 429 without one (API priority and fairness throttling): retried after Retry-After;
- 404, or 409 from the UID precondition: the pod is already gone (or replaced), not counted;
- 5xx, timeouts and dropped connections: retried a bounded number of times with backoff. Such a
  request may have been carried out, so before each retry the pod is read back: gone, replaced
  or terminating means the earlier request worked, and it is not sent again. The UID
  precondition guarantees a retry can never evict a new pod that took the old one's name.

For moves (framework/moves) the same executor asks the budget without evicting (a dry-run
eviction, `?dryRun=All`) and restarts a Deployment (live/deployment_restart.py); for a plugin's
autoCordon it cordons and uncordons nodes (live/node_cordon.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import httpx2
import msgspec

from desched.errors import InputError
from desched.framework.evictor import ExecutionResult, RestartOrder
from desched.live import deployment_restart, node_cordon
from desched.live.assumed import EvictedPods
from desched.live.background import answered_in_background
from desched.live.client import ApiClient, ConnectionLost, PodState, Unreachable, run_on_loop
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot
from desched.util.backoff import Backoff

REQUESTED_BY = "desched"
ALREADY_GONE = "already gone"
DRY_RUN_WHAT = "dry-run evict pod "  # how a budget check names itself (not an eviction)


class _Cause(msgspec.Struct):
    type: str = ""
    message: str = ""


class _Details(msgspec.Struct):
    causes: list[_Cause] | None = None


class _Status(msgspec.Struct):
    code: int = 0
    reason: str = ""
    message: str = ""
    details: _Details | None = None


_status_decoder = msgspec.json.Decoder(_Status)
_NO_SECOND_REQUEST: dict[PodState, str] = {
    "gone": "the pod is gone after an earlier eviction request",
    "replaced": "the pod was replaced after an earlier eviction request",
    "terminating": "the pod is terminating after an earlier eviction request",
}
_encoder = msgspec.json.Encoder()


def _status(response: httpx2.Response) -> _Status:
    try:
        return _status_decoder.decode(response.content)
    except msgspec.DecodeError:
        text = " ".join(response.content.decode("utf-8", "replace").split())[:200]
        return _Status(response.status_code, response.reason_phrase, text)


def _budget_refusal(status: _Status) -> bool:
    causes = status.details.causes if status.details else None
    if causes and any(c.type == "DisruptionBudget" for c in causes):
        return True
    return "disruption budget" in status.message.lower()


def _refused_by_budget(code: int, status: _Status) -> bool:
    """A 429 naming a budget, or the 500 for a pod more than one budget covers."""
    if code == 429:
        return _budget_refusal(status)
    return code >= 500 and "PodDisruptionBudget" in status.message


def eviction_body(pod: Pod, profile: str, plugin: str, reason: str,
                  grace_period_seconds: int | None, dry_run: bool = False) -> bytes:
    """A policy/v1 Eviction, annotated as upstream annotates it (who asked, and why)."""
    delete_options: dict[str, Any] = {"preconditions": {"uid": str(pod.metadata.uid)}}
    if grace_period_seconds is not None:
        delete_options["gracePeriodSeconds"] = grace_period_seconds
    if dry_run:
        delete_options["dryRun"] = ["All"]
    return _encoder.encode({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {
            "name": str(pod.name),
            "namespace": str(pod.namespace),
            "annotations": {"reason": f"triggered by {profile}/{plugin}: {reason}",
                            "requested-by": REQUESTED_BY},
        },
        "deleteOptions": delete_options,
    })


class EvictionApiExecutor:
    """Evicts through the API server; one instance per cycle (it holds the cycle's snapshot)."""

    def __init__(self, client: ApiClient, loop: asyncio.AbstractEventLoop,
                 snapshot: ClusterSnapshot, *, grace_period_seconds: int | None = None,
                 attempts: int = 4, timeout: float = 10.0, backoff: Backoff | None = None,
                 fence: Callable[[], str | None] | None = None,
                 assumed: EvictedPods | None = None) -> None:
        self.client = client
        # Told of every pod evicted, so the next cycles see it terminating before the cache
        # does (live/assumed.py): a lagging watch must not lead to a second eviction.
        self.assumed = assumed
        # Asked right before every eviction request goes out, retries included (None: go on):
        # a leader paused past its lease between the cycle's check and the request, or during
        # a retry's backoff, must not send it once it resumes (tests/e2e/test_e2e_faults.py).
        self.fence = fence
        self.loop = loop
        self.snapshot = snapshot
        self.grace_period_seconds = grace_period_seconds
        self.attempts = max(1, attempts)
        self.timeout = timeout
        self.backoff = backoff or Backoff(initial=0.5, maximum=5.0)
        self.evicted: list[Pod] = []
        self.requests = 0  # eviction POSTs sent, retries included

    # -- the Executor protocol (called from the cycle's worker thread) ---------------------------
    def evict(self, pod: Pod, profile: str, plugin: str, reason: str) -> ExecutionResult:
        if self.snapshot.pods.get(pod.key) is not pod:
            return ExecutionResult(False, "failed", f'pods "{pod.name}" not found')
        result = self._on_loop(self.evict_async(pod, profile, plugin, reason))
        if result.ok or result.message.startswith(ALREADY_GONE):
            # Gone either way: later plugins in this cycle must not pick it again.
            self.snapshot.remove_pod(pod)
        if result.ok:
            self.evicted.append(pod)
            if self.assumed is not None:
                self.assumed.add(pod)
        return result

    def check_budget(self, pod: Pod) -> ExecutionResult:
        """A dry-run eviction: the API server's own budget check, nothing evicted."""
        return self._on_loop(self.check_budget_async(pod))

    def restart(self, order: RestartOrder) -> ExecutionResult:
        result = self._on_loop(deployment_restart.restart(
            self.client, order, attempts=self.attempts, timeout=self.timeout,
            backoff=self.backoff, fence=self.fence))
        if result.ok:
            # Being replaced: later plugins in this cycle must not pick them again.
            for pod in order.pods:
                self.snapshot.remove_pod(pod)
        return result

    def set_unschedulable(self, node: str, unschedulable: bool) -> ExecutionResult:
        """Cordon or uncordon the node (live/node_cordon.py); the cycle's snapshot follows, so
        later plugins of this cycle see the node as the API now has it."""
        result = self._on_loop(node_cordon.set_unschedulable(
            self.client, node, unschedulable, attempts=self.attempts, timeout=self.timeout,
            backoff=self.backoff, fence=self.fence))
        if result.ok:
            self.snapshot.set_unschedulable(node, unschedulable)
        return result

    def _on_loop(self, request: Coroutine[Any, Any, ExecutionResult]) -> ExecutionResult:
        """Run `request` on the event loop and wait for its answer: the cycle sees each
        outcome before it goes on, exactly as in a simulation."""
        return run_on_loop(self.loop, request,
                           "EvictionApiExecutor blocks until the API answers: call it from a "
                           "worker thread, or await its *_async methods on the loop")

    async def check_budget_async(self, pod: Pod) -> ExecutionResult:
        path = (f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction?dryRun=All")
        what = f"{DRY_RUN_WHAT}{pod.namespace}/{pod.name}"
        body = eviction_body(pod, "", "", "budget check before a restart",
                             self.grace_period_seconds, dry_run=True)
        error = ""
        for attempt in range(self.attempts):
            if attempt:
                await asyncio.sleep(self.backoff.next())
            try:
                response = await self._request("POST", path, what, body)
            except (Unreachable, ConnectionLost) as err:  # a dry run changes nothing: retry
                error = str(err)
                continue
            except InputError as err:
                return ExecutionResult(False, "failed", str(err))
            if response.status_code < 300:
                return ExecutionResult(True)
            status = _status(response)
            if _refused_by_budget(response.status_code, status):
                return ExecutionResult(False, "pdb-blocked", status.message)
            error = f"{response.status_code} {status.message or response.reason_phrase}"
            if response.status_code != 429 and response.status_code < 500:
                return ExecutionResult(False, "failed", error)
        return ExecutionResult(False, "failed",
                               f"{error} (gave up after {self.attempts} attempts)")

    # -- the request (on the event loop) ---------------------------------------------------------
    async def evict_async(self, pod: Pod, profile: str, plugin: str,
                          reason: str) -> ExecutionResult:
        uid = pod.metadata.uid
        if not uid:
            return ExecutionResult(False, "failed", "the pod has no UID")
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction"
        what = f"evict pod {pod.namespace}/{pod.name}"
        body = eviction_body(pod, profile, plugin, reason, self.grace_period_seconds)
        self.backoff.reset()
        error = ""
        uncertain = False  # the last attempt may have been carried out
        delay = 0.0
        for attempt in range(1, self.attempts + 1):
            if attempt > 1:
                await asyncio.sleep(delay)
                if uncertain:
                    state = await self._pod_state(pod)
                    if state in _NO_SECOND_REQUEST:
                        return ExecutionResult(True, "evicted", _NO_SECOND_REQUEST[state])
                    if state != "there":
                        # Unreadable (throttled, unreachable): a request sent now could be
                        # the pod's second eviction. Read again after the next backoff.
                        delay = self.backoff.next()
                        continue
                    uncertain = False
            delay = self.backoff.next()
            refusal = self.fence() if self.fence is not None else None
            if refusal:
                return ExecutionResult(False, "failed", refusal)
            try:
                self.requests += 1
                response = await self._request("POST", path, what, body)
            except Unreachable as err:  # not sent: retrying cannot evict twice
                error, uncertain = str(err), False
                continue
            except ConnectionLost as err:
                error, uncertain = f"cannot {err}", True
                continue
            except InputError as err:  # credentials (an exec plugin failed)
                return ExecutionResult(False, "failed", str(err))
            code = response.status_code
            if code < 300:
                return ExecutionResult(True)
            status = _status(response)
            message = status.message or response.reason_phrase
            if _refused_by_budget(code, status):
                return ExecutionResult(False, "pdb-blocked", message)
            if answered_in_background(pod, code, message):
                # The pod's controller evicts it over time (a live migration): not retried,
                # the Evictor counts it in progress (framework/background.py).
                return ExecutionResult(False, "background", f"{code} {message}")
            if code == 429:
                # Throttled (API priority and fairness): not carried out, retry when told.
                error, uncertain = f"429 {message}", False
                retry_after = response.headers.get("Retry-After", "")
                if retry_after.isdigit():
                    delay = max(delay, min(float(retry_after), self.backoff.maximum))
                continue
            if code == 404:
                return ExecutionResult(False, "failed", f"{ALREADY_GONE}: {message}")
            if code == 409:
                return ExecutionResult(False, "failed",
                                       f"{ALREADY_GONE} (replaced by a new pod): {message}")
            if code >= 500:
                error, uncertain = f"{code} {status.reason or response.reason_phrase}: " \
                                   f"{message}", True
                continue
            return ExecutionResult(False, "failed", f"{code} {status.reason}: {message}".strip())
        if uncertain:
            # The last request may have been carried out. Count it as done unless the pod is
            # known to be still there: a second request, or a limit overrun, is worse.
            state = await self._pod_state(pod)
            if state != "there":
                return ExecutionResult(True, "evicted", _NO_SECOND_REQUEST.get(state) or (
                    f"{error} (outcome unknown: counted as evicted, not retried)"))
        return ExecutionResult(False, "failed",
                               f"{error} (gave up after {self.attempts} attempts)")

    async def _pod_state(self, pod: Pod) -> PodState:
        return await self.client.pod_state(pod.namespace, pod.name, str(pod.metadata.uid),
                                           timeout=self.timeout)

    async def _request(self, method: str, path: str, what: str,
                       body: bytes | None = None) -> httpx2.Response:
        return await self.client.request(method, path, what=what, body=body,
                                         timeout=self.timeout)
