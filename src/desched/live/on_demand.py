"""`POST /cycles/run`: a cycle now, for an authenticated and authorized caller (issue 37 item 10,
upstream #1857).

Served on `--secure-port` with `--delegate-auth` only: the listener's guard (live/serving.py)
has already asked the API server who the bearer token belongs to and whether that user may
`post` the non-resource path /cycles/run (a SubjectAccessReview), and hands the user's name on.
Anywhere else (plain HTTP, or HTTPS without delegation, which anyone who reaches it could use)
the path answers 403 saying so: running a cycle evicts pods.

The cycle is the loop's (live/triggers.py: one at a time, bounded per minute). The answer waits
for it to end: 200 with when it ran, its result and the link to its /cycles entry; `?wait=false`
answers 202 as soon as it has started. Refusals are Kubernetes `Status` objects, as the guard's:
409 (a cycle runs or waits), 429 with `Retry-After` (the bound), 503 (not leading, not ready,
the cache not current, which the cycle would wait for, stopping), 403 (not here, or no
authenticated user)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from desched.live import logging as desched_logging
from desched.live.health import Handler
from desched.live.serving import user_key
from desched.live.triggers import Closed, Refusal, Triggers

if TYPE_CHECKING:
    from aiohttp import web

log = desched_logging.get_logger("desched.run")

PATH = "/cycles/run"
INSECURE = (f"cycles on request are served only on --secure-port with --delegate-auth, to a "
            f"caller the API server allows to post {PATH}; this listener runs none")
_REASONS = {403: "Forbidden", 409: "Conflict", 429: "TooManyRequests",
            503: "ServiceUnavailable", 400: "BadRequest"}


def _stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def status(code: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    from aiohttp import web

    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": _REASONS.get(code, "InternalError"), "code": code}
    return web.json_response(body, status=code, headers=headers)


class OnDemand:
    """The route. `why_not`: why the loop takes no request now (None: it does); `page`: whether
    /cycles is served beside it (the answer links the cycle's entry)."""

    def __init__(self, triggers: Triggers, why_not: Callable[[], str | None],
                 page: bool) -> None:
        self.triggers = triggers
        self.why_not = why_not
        self.page = page

    def routes(self, authenticated: bool) -> dict[str, Handler]:
        """On a listener whose guard authenticates and authorizes, the route; else a refusal."""
        return {f"POST {PATH}": self.handle if authenticated else self.refuse}

    async def refuse(self, _: web.Request) -> web.StreamResponse:
        return status(403, INSECURE)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        user = request.get(user_key())
        if not user:  # the path was let through without a token
            return status(403, f"a cycle on request needs an authenticated caller: take {PATH} "
                               f"out of --authorization-always-allow-paths")
        wait = request.query.get("wait", "true").lower()
        if wait not in ("true", "false"):
            return status(400, f"wait must be true or false, got {wait!r}")
        why = self.why_not()
        if why is not None:
            return status(503, f"no cycle on request now: {why}")
        asked = self.triggers.request(str(user))
        if isinstance(asked, Refusal):
            headers = ({"Retry-After": str(math.ceil(asked.retry_after))}
                       if asked.retry_after else None)
            return status(asked.status, asked.message, headers)
        log.info("cycle requested", user=user)
        try:
            # Shielded: a caller that hangs up does not cancel the cycle it asked for.
            number, started = await asyncio.shield(asked.started)
            if wait == "false":
                return self._answer(202, {
                    "cycle": number, "cause": f"request by {user}",
                    "startedAt": _stamp(started), **self._links(request, number)})
            report = await asyncio.shield(asked.finished)
        except Closed as err:
            return status(503, f"no cycle on request: {err}")
        facts = report.facts
        if facts is not None:
            started = facts.started  # the time /cycles shows
        body: dict[str, Any] = {"cycle": number, "cause": f"request by {user}",
                                "startedAt": _stamp(started), "result": report.result,
                                "evicted": report.evicted, "failed": report.failed}
        if facts is not None:
            body.update({"seconds": round(facts.seconds, 3), "dryRun": facts.dry_run,
                         "why": facts.why})
        body.update(self._links(request, number))
        return self._answer(200, body)

    def _links(self, request: web.Request, number: int) -> dict[str, str | None]:
        if not self.page:
            return {"page": None, "json": None}
        base = request.url.with_query(None)
        return {"page": str(base.with_path("/cycles").with_fragment(f"cycle-{number}")),
                "json": str(base.with_path("/cycles.json"))}

    @staticmethod
    def _answer(code: int, body: dict[str, Any]) -> web.Response:
        from aiohttp import web

        log.info("cycle on request answered", code=code, cycle=body["cycle"],
                 cause=body["cause"], result=body.get("result", "started"))
        return web.json_response(body, status=code)
