"""`GET /cycles` and `GET /cycles.json` on the metrics listener of `desched run`: the cycles the
loop keeps, newest first, each rendered as `simulate --output html` / `--output json` render a
one-cycle simulation, plus what only a live run knows: the eviction requests sent and their
retries, the API errors met, why a cycle was skipped, whether it was a dry run. A standby
replica has no cycles: its page says who holds the Lease.

What the page shows is what the simulate report shows: pod, node and workload names, the
plugins' reasons and notes, utilization figures. Never a pod's spec, environment or annotations.
Every string is escaped (report_html); a Content-Security-Policy lets only the page's own script
run and forbids any request from the page. Read-only: the routes answer GET and HEAD (405 for
anything else).

Rendered on request, in a worker thread, one request at a time (its cost is in
docs/running.md), malloc's free pages given back after each: nothing rendered is kept between
requests. What a kept cycle holds is capped (live/cycle_facts.py)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from desched.framework.decisions import EVICTED_OUTCOMES, REFUSED_OUTCOMES, DecisionLog
from desched.live.allocator import release_free_memory
from desched.live.cycle_facts import (
    KEPT_CYCLES,
    MAX_API_ERRORS,
    MAX_DECISIONS,
    MAX_KEPT,
    MAX_NOTES,
    CycleReport,
)
from desched.live.health import Handler
from desched.model.meta import json_encoder
from desched.report.html import SCRIPT, html_page, report_body, table_data
from desched.report.render import to_json_obj
from desched.simulate import whatif
from desched.simulate.simulation import HELD_OUTCOMES, CycleSummary, Held, SimulationResult
from desched.snapshot.clock import SimulationClock

if TYPE_CHECKING:
    from aiohttp import web

T = TypeVar("T")

# Only the page's own script may run, and the page may load or send nothing.
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
HEADERS = {
    "Content-Security-Policy": (f"default-src 'none'; script-src 'sha256-{_SCRIPT_HASH}'; "
                                "style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; "
                                "frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_STYLE = """<style>
.cycle{border-top:3px solid #2b6cb0;margin-top:2em}.cycle>h2{border:0}
.dry{background:#ebf4ff;border:1px solid #90cdf4;border-radius:4px;padding:0 .4em}
table.cycles td:first-child a{font-weight:bold}.facts li{margin:.2em 0}
</style>"""


@dataclass(frozen=True)
class PageState:
    """What the page says, taken on the event loop (a consistent copy), rendered off it."""

    identity: str
    leader_election: bool
    leading: bool
    holder: str  # the Lease's holder as last read ("" when not known)
    lease: str  # namespace/name
    dry_run: bool
    schedule: str
    policy: str
    reports: tuple[CycleReport, ...]


def _mode(report: CycleReport) -> str:
    return "dry run" if report.facts is not None and report.facts.dry_run else "live"


def cycle_result(report: CycleReport) -> SimulationResult | None:
    """The cycle as a one-cycle simulation (what the simulate renderers take); None for a cycle
    kept without facts."""
    facts = report.facts
    if facts is None:
        return None
    skipped = facts.why if report.result in ("skipped", "stale") else None
    frames = []
    if facts.frames is not None:
        for compact, when in zip(facts.frames, ("before", "after"), strict=True):
            frame = compact.frame()
            frame.label = f"{when} cycle {report.number}"
            frames.append(frame)
    return SimulationResult(
        facts.policy, [], facts.nodes, facts.pods, 1, report.log,
        [CycleSummary(report.number, skipped, evicted=dict(facts.evicted))],
        SimulationClock(facts.started, "the cycle's start"), frames=frames)


def _outcomes(log: DecisionLog) -> dict[str, int]:
    counts: dict[str, int] = {}
    for d in log.decisions:
        if d.outcome in EVICTED_OUTCOMES or d.outcome in REFUSED_OUTCOMES \
                or d.outcome in ("deferred", "background"):
            counts[d.outcome] = counts.get(d.outcome, 0) + 1
    return counts


def _moves(report: CycleReport) -> str:
    """" · 3 moved by 1 restart(s) · 2 deferred" (framework/moves), or ""."""
    log = report.log
    restarted = sum(1 for d in log.decisions if d.outcome == "restarted")
    deferred = sum(1 for d in log.decisions if d.outcome == "deferred")
    return ((f" · {restarted} moved by {len(log.restarts)} restart(s)" if log.restarts else "")
            + (f" · {deferred} deferred" if deferred else ""))


def live_json(report: CycleReport) -> dict[str, Any]:
    """What only the live run knows about a cycle."""
    out: dict[str, Any] = {"result": report.result, "mode": _mode(report),
                           "evicted": report.evicted, "failed": report.failed}
    facts = report.facts
    if facts is None:
        return out
    out.update({
        "startedAt": facts.started.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "seconds": round(facts.seconds, 3), "nodes": facts.nodes, "pods": facts.pods,
        "why": facts.why, "cause": facts.cause,
        "evictionRequests": {"sent": facts.requests, "retries": facts.retries,
                             "outcomes": _outcomes(report.log)},
        "apiErrors": {"count": facts.api_error_count, "first": list(facts.api_errors)},
        "eventsNotPosted": facts.events_failed,
        "notKept": dict(facts.dropped),
    })
    if facts.policy.plans_moves:
        log = report.log
        out["moves"] = {"evict": report.evicted,
                        "restart": sum(1 for d in log.decisions if d.outcome == "restarted"),
                        "restarts": len(log.restarts),
                        "deferred": sum(1 for d in log.decisions if d.outcome == "deferred")}
    return out


def cycle_json(report: CycleReport) -> dict[str, Any]:
    """The `simulate --output json` object of the cycle, its number and its live facts."""
    result = cycle_result(report)
    report_obj = to_json_obj(result) if result is not None else {}
    for entry in report_obj.get("balance", ()):
        entry["cycle"] = report.number  # the one-cycle simulation counts from 1
    return {"cycle": report.number, **report_obj, "live": live_json(report)}


def instance_json(state: PageState) -> dict[str, Any]:
    return {
        "identity": state.identity,
        "leaderElection": {"enabled": state.leader_election, "leading": state.leading,
                           "lease": state.lease, "holder": state.holder},
        "dryRun": state.dry_run, "schedule": state.schedule, "policy": state.policy,
        "kept": {"cycles": len(state.reports), "max": KEPT_CYCLES,
                 "perCycle": {"decisions": MAX_DECISIONS, "notes": MAX_NOTES,
                              "keptReasons": MAX_KEPT, "apiErrors": MAX_API_ERRORS}},
    }


def render_json(state: PageState) -> bytes:
    # A cycle at a time: one cycle's objects alive at once, not every kept cycle's (a page
    # fetched every cycle must not raise the heap's high-water mark ten cycles' worth).
    cycles = b",".join(json_encoder.encode(cycle_json(r)) for r in reversed(state.reports))
    return (b'{"instance":' + json_encoder.encode(instance_json(state)) + b',"cycles":['
            + cycles + b"]}")


# -- the HTML page ---------------------------------------------------------------------------


def _e(text: object) -> str:
    return html.escape(str(text))


def _leadership(state: PageState) -> str:
    if not state.leader_election:
        return ""
    if state.leading:
        return (f'<p class="ok">This instance leads: it holds the Lease {_e(state.lease)} and '
                f'runs the cycles.</p>')
    holder = (f"is held by <b>{_e(state.holder)}</b>" if state.holder
              else "has no holder this instance knows of")
    return (f'<p class="warn" id="standby"><b>This instance does not lead.</b> Only the leader '
            f'runs cycles; the Lease {_e(state.lease)} {holder}. Open the leader\'s /cycles for '
            f'its cycles.</p>')


def _refused(report: CycleReport) -> int:
    return sum(1 for d in report.log.decisions if d.outcome in REFUSED_OUTCOMES)


def _overview(reports: Sequence[CycleReport]) -> str:
    if not reports:
        return '<p class="none" id="no-cycles">no cycle has run here yet</p>'
    head = ("<tr><th>cycle</th><th>started (UTC)</th><th>cause</th><th>mode</th><th>result</th>"
            "<th>evicted</th><th>refused</th><th>eviction requests</th><th>retries</th>"
            "<th>API errors</th><th>seconds</th><th>why</th></tr>")
    rows = []
    for r in reports:
        f = r.facts
        started = f.started.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if f else ""
        mode = _mode(r)
        cells = [f'<a href="#cycle-{r.number}">{r.number}</a>', _e(started),
                 _e(f.cause if f else ""),
                 f'<span class="dry">{mode}</span>' if mode == "dry run" else mode,
                 _e(r.result), str(r.evicted), str(_refused(r)),
                 str(f.requests if f else ""), str(f.retries if f else ""),
                 str(f.api_error_count if f else ""), f"{f.seconds:.2f}" if f else "",
                 _e(f.why if f else "")]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return (f'<div class="scroll"><table class="cycles" id="cycles">{head}{"".join(rows)}'
            f'</table></div>')


def _churn(reports: Sequence[CycleReport]) -> str:
    """Workloads evicted in more than one kept cycle: churn no single cycle shows (but those
    whose pods a budget, a limit or `moves` held back in an earlier one: paced on purpose)."""
    # Only evicted pods have their workload resolved: a pod held back, then evicted, tells it.
    workloads = {key: e.workload for r in reports if r.facts is not None
                 for key, e in r.facts.evicted.items()}
    summaries = [CycleSummary(r.number, evicted=dict(r.facts.evicted), held={
        key: Held(d.outcome, "", workloads[key]) for d in r.log.decisions
        if d.outcome in HELD_OUTCOMES and (key := f"{d.namespace}/{d.pod}") in workloads})
        for r in reports if r.facts is not None]
    if not summaries:
        return ""
    repeated = whatif.workloads_in_several_cycles(sorted(summaries, key=lambda s: s.cycle))
    if not repeated:
        return ""
    items = "".join(f"<li>{_e(r.workload)}: cycles {_e(', '.join(map(str, r.cycles)))}</li>"
                    for r in repeated[:20])
    more = f"<li>and {len(repeated) - 20} more</li>" if len(repeated) > 20 else ""
    return (f'<div class="warn" id="repeated-workloads"><b>{len(repeated)} workload(s) '
            f'evicted in more than one of these cycles.</b> <span class="remedy">Remedy: '
            f'{_e(whatif.REMEDY_REPEATED)}.</span><ul>{items}{more}</ul></div>')


def _facts(report: CycleReport) -> str:
    f = report.facts
    if f is None:
        return ""
    items = []
    if f.cause != "schedule":  # events or a request started it (live/triggers.py)
        items.append(f"<b>Started by</b> {_e(f.cause)}, not by the schedule.")
    if f.dry_run:
        items.append("<b>Dry run</b>: nothing was evicted; the evictions below are those a live "
                     "run would have made, PodDisruptionBudgets and limits applied.")
    if f.why:
        items.append(f"<b>{_e(report.result)}</b>: {_e(f.why)}")
    outcomes = ", ".join(f"{n} {_e(o)}" for o, n in sorted(_outcomes(report.log).items()))
    items.append(f"{f.requests} eviction request(s) sent, {f.retries} of them retries"
                 + (f"; decisions: {outcomes}" if outcomes else ""))
    if f.api_error_count:
        shown = "".join(f"<li>{_e(e)}</li>" for e in f.api_errors)
        more = (f"<li>and {f.api_error_count - len(f.api_errors)} more</li>"
                if f.api_error_count > len(f.api_errors) else "")
        items.append(f"{f.api_error_count} API error(s) on eviction requests:<ul>{shown}{more}"
                     f"</ul>")
    if f.events_failed:
        items.append(f"{f.events_failed} event(s) not posted")
    if f.dropped:
        left = ", ".join(f"{n} {_e(k)}" for k, n in sorted(f.dropped.items()))
        items.append(f"not kept (over the page's caps; the log lines have them): {left}")
    return '<ul class="facts">' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _cycle(report: CycleReport, opened: bool) -> tuple[str, dict[str, Any]]:
    f = report.facts
    started = f.started.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if f else ""
    dry = ' <span class="dry">dry run</span>' if f is not None and f.dry_run else ""
    head = (f'<h2>Cycle {report.number} · {_e(report.result)}{dry} · {report.evicted} '
            f'evicted{_e(_moves(report))} · {_e(started)}</h2>')
    result = cycle_result(report)
    body = ""
    tables: dict[str, Any] = {}
    if result is not None and report.result not in ("skipped", "stale"):
        report_html, tables = report_body(result, f"c{report.number}-", live=True)
        body = (f"<details{' open' if opened else ''}><summary>the cycle's report</summary>"
                f"{report_html}</details>")
    section = (f'<section class="cycle" id="cycle-{report.number}">{head}{_facts(report)}'
               f'{body}</section>')
    return section, tables


def render_html(state: PageState) -> str:
    newest_first = list(reversed(state.reports))
    # The report opened: the newest cycle that did something, else the newest.
    shown = next((r for r in newest_first if r.evicted or r.failed or _refused(r)),
                 newest_first[0] if newest_first else None)
    sections: list[str] = []
    tables: list[str] = []  # each cycle's, serialised at once (see render_json)
    for report in newest_first:
        section, cycle_tables = _cycle(report, opened=report is shown)
        sections.append(section)
        if cycle_tables:
            tables.append(table_data(cycle_tables))
    mode = "dry run" if state.dry_run else "live"
    intro = (f'<p class="muted">{_e(state.identity)} · policy {_e(state.policy)} · '
             f'{_e(state.schedule)} · {mode} · {len(state.reports)} of at most {KEPT_CYCLES} '
             f'cycles kept · {datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")} · the same '
             f'as JSON: <a href="cycles.json">cycles.json</a></p>')
    body = (f"<h1>desched: the last cycles</h1>{intro}{_leadership(state)}"
            f"<h2>Cycles, newest first</h2>{_overview(newest_first)}{_churn(newest_first)}"
            f"{''.join(sections)}")
    return html_page("desched: the last cycles", body, ",".join(tables), head=_STYLE)


class CyclesPage:
    """The two routes; `state` is called on the event loop, the rendering runs off it."""

    def __init__(self, state: Callable[[], PageState]) -> None:
        self.state = state
        self._lock = asyncio.Lock()  # one rendering at a time: its memory, not several

    def routes(self) -> dict[str, Handler]:
        return {"/cycles": self.handle_html, "/cycles.json": self.handle_json}

    async def _render(self, render: Callable[[PageState], T]) -> T:
        state = self.state()
        async with self._lock:
            return await asyncio.to_thread(_trimmed, render, state)

    async def handle_html(self, _: web.Request) -> web.StreamResponse:
        from aiohttp import web

        text = await self._render(render_html)
        return _compressed(web.Response(text=text, content_type="text/html", charset="utf-8",
                                        headers=HEADERS))

    async def handle_json(self, _: web.Request) -> web.StreamResponse:
        from aiohttp import web

        body = await self._render(render_json)
        return _compressed(web.Response(body=body, content_type="application/json",
                                        headers=HEADERS))


def _compressed(response: web.Response) -> web.Response:
    # Several MiB at 5,000 nodes, a tenth of that gzipped (when the client accepts it); aiohttp
    # compresses a body this large in a worker thread, not on the loop.
    response.enable_compression()
    return response


def _trimmed(render: Callable[[PageState], T], state: PageState) -> T:
    """Render, then give malloc's free pages back: a page is many short-lived objects, and a
    page fetched every cycle must not leave the process's resident memory higher each time."""
    try:
        return render(state)
    finally:
        release_free_memory()
