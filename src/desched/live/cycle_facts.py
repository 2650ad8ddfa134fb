"""What `desched run` keeps of each cycle beyond its decisions, for the /cycles page
(live/cycles_page.py): when it ran and for how long, the utilization before and after it, the
workloads its evictions hit, the eviction requests it sent (retries included) and the API errors
it met, and why a cycle was skipped. And the caps that bound what a kept cycle holds.

Nothing here refers to the cycle's snapshot once the cycle is over: names, numbers and texts
only (tests/live/test_report_memory.py)."""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from desched.framework.decisions import EVICTED_OUTCOMES, DecisionLog
from desched.framework.policy import Policy
from desched.live import logging as desched_logging
from desched.live.eviction_api import EvictionApiExecutor
from desched.model.pod import Pod
from desched.simulate.frames import SERIES, Frame, MeasuredUsage, take_frame
from desched.simulate.simulation import Evicted, workload_name
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.workloads import WorkloadResolver

T = TypeVar("T")
logger = desched_logging.get_logger("desched.run")

KEPT_CYCLES = 10  # the loop keeps its most recent cycles, no more
# What one kept cycle holds at most; the rest is counted (the log lines have every decision).
MAX_DECISIONS = 2_000  # evictions first, then refusals: a limit refuses every pod beyond it
MAX_NOTES = 500
MAX_KEPT = 500  # (profile, plugin, reason) counts of the pods plugins kept
MAX_API_ERRORS = 50
# Refusals after evictions, a limit's after the rest: what is dropped first when over the cap.
_KEEP_ORDER = {"evicted": 0, "dry-run": 0, "restarted": 0, "pdb-blocked": 1, "failed": 1,
               "deferred": 1, "limited": 2}


@dataclass(frozen=True)
class CompactFrame:
    """A utilization frame at 4 bytes a figure: the node names once per cycle, each series an
    array of float32 (NaN where a node was not measured). A dict per series would take about
    25 times as much at 5,000 nodes."""

    label: str
    names: tuple[str, ...]
    series: dict[str, array]

    @classmethod
    def of(cls, frame: Frame, names: tuple[str, ...]) -> CompactFrame:
        packed = {}
        for s in SERIES:
            values = frame.values.get(s)
            if values:
                packed[s] = array("f", (values.get(n, math.nan) for n in names))
        return cls(frame.label, names, packed)

    def frame(self) -> Frame:
        return Frame(self.label, {s: {n: v for n, v in zip(self.names, values, strict=True)
                                      if not math.isnan(v)}
                                  for s, values in self.series.items()})

    def nbytes(self) -> int:
        return sum(a.itemsize * len(a) for a in self.series.values())


@dataclass
class CycleReport:
    """A cycle the loop keeps (its ten most recent): the decisions, and the facts the page adds
    (None for a cycle that ended before it had any)."""

    number: int
    result: str  # completed | skipped | stale | interrupted | failed
    evicted: int
    failed: int
    log: DecisionLog
    facts: CycleFacts | None = None


@dataclass
class CycleFacts:
    """A cycle as the page tells it, beside its decisions (the CycleReport's log)."""

    started: datetime
    dry_run: bool
    policy: Policy
    cause: str = "schedule"  # or the node events, or who requested it (live/triggers.py)
    seconds: float = 0.0
    nodes: int = 0
    pods: int = 0
    why: str = ""  # why a cycle was skipped, stopped or failed
    frames: tuple[CompactFrame, CompactFrame] | None = None
    evicted: dict[str, Evicted] = field(default_factory=dict)  # pod key -> node, workload
    requests: int = 0  # eviction requests sent, retries included
    retries: int = 0
    api_errors: list[str] = field(default_factory=list)  # the first MAX_API_ERRORS
    api_error_count: int = 0
    events_failed: int = 0
    dropped: Counter[str] = field(default_factory=Counter)  # what the caps left out, by kind
    # Each eviction request's answer per pod, in order: None for a success, else the error.
    _answers: dict[str, list[str | None]] = field(default_factory=dict, repr=False)

    def watch(self, snapshot: ClusterSnapshot, now: datetime,
              run: Callable[[], T]) -> Callable[[], T]:
        """`run` (the cycle, in its worker thread) with the utilization taken before and after
        it: after, the evicted pods are gone from the snapshot, not replaced."""

        def observed() -> T:
            names = tuple(snapshot.nodes)
            try:
                measured = MeasuredUsage(snapshot, now)
                before = CompactFrame.of(take_frame(snapshot, "before", now, measured), names)
            except Exception:  # the page's figures never stop a cycle
                logger.exception("cannot take the utilization before the cycle for /cycles")
                return run()
            try:
                return run()
            finally:
                try:
                    after = take_frame(snapshot, "after", now, measured)
                    self.frames = (before, CompactFrame.of(after, names))
                except Exception:
                    logger.exception("cannot take the utilization after the cycle for /cycles")

        return observed

    def answer(self, pod: str, error: str | None) -> None:
        self._answers.setdefault(pod, []).append(error)

    def settle(self, log: DecisionLog, pods: Mapping[str, Pod],
               snapshot: ClusterSnapshot) -> None:
        """At the end of the cycle: the requests and their errors, the workloads evicted, and
        the caps applied to the cycle's log (which the kept report holds)."""
        final = {f"{d.namespace}/{d.pod}": d for d in log.decisions}
        for key, answers in self._answers.items():
            self.requests += len(answers)
            self.retries += len(answers) - 1
            decision = final.get(key)
            if decision is not None and answers[-1] is not None and (
                    decision.outcome == "pdb-blocked" or decision.reason.startswith(
                        "already gone")):
                # The budget's refusal, the pod already gone: the decision tells it, among the
                # refusals; not an error of the server or the network.
                answers = answers[:-1]
            for attempt, error in enumerate(answers, 1):
                if error is not None:
                    self.api_error_count += 1
                    if len(self.api_errors) < MAX_API_ERRORS:
                        self.api_errors.append(f"{key}: attempt {attempt}: {error}")
        self._answers = {}
        resolver = WorkloadResolver(snapshot)
        try:
            for d in log.decisions:
                pod = pods.get(f"{d.namespace}/{d.pod}")
                if d.outcome in EVICTED_OUTCOMES and pod is not None:
                    self.evicted[pod.key] = Evicted(d.node, workload_name(resolver, pod))
        except Exception:  # what the page tells about churn never stops the loop
            logger.exception("cannot resolve the evicted pods' workloads for /cycles")
        cap(log, self.dropped)


def cap(log: DecisionLog, dropped: Counter[str]) -> None:
    """Bound what a kept cycle's log holds (MAX_DECISIONS, MAX_NOTES, MAX_KEPT), counting what
    is left out in `dropped`."""
    decisions = log.decisions
    if len(decisions) > MAX_DECISIONS:
        ranked = sorted(range(len(decisions)),
                        key=lambda i: (_KEEP_ORDER.get(decisions[i].outcome, 3), i))
        keep = set(ranked[:MAX_DECISIONS])
        dropped.update(d.outcome for i, d in enumerate(decisions) if i not in keep)
        log.decisions = [d for i, d in enumerate(decisions) if i in keep]
    if len(log.notes) > MAX_NOTES:
        dropped["notes"] += len(log.notes) - MAX_NOTES
        log.notes = log.notes[:MAX_NOTES]
    if len(log.kept) > MAX_KEPT:
        dropped["kept reasons"] += len(log.kept) - MAX_KEPT
        log.kept = Counter(dict(log.kept.most_common(MAX_KEPT)))
    # Only explain reads these; a live cycle records none, but nothing unbounded is kept.
    log.verdicts, log.protections, log.node_roles = {}, {}, {}
    log.compact_kept()


class RecordedEvictions(EvictionApiExecutor):
    """The Eviction API executor, telling `facts` each eviction request's answer: None for a
    success, else the error (the status the server gave, or what the network did)."""

    def __init__(self, *args: Any, facts: CycleFacts, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.facts = facts

    async def _request(self, method: str, path: str, what: str,
                       body: bytes | None = None) -> Any:
        if method != "POST" or not what.startswith("evict pod "):
            # Reading a pod back, a dry-run budget check: not an eviction request.
            return await super()._request(method, path, what, body)
        pod = what.removeprefix("evict pod ")
        try:
            response = await super()._request(method, path, what, body)
        except Exception as err:  # a timeout, a dropped connection, no credentials
            self.facts.answer(pod, str(err))
            raise
        code = response.status_code
        self.facts.answer(pod, None if code < 300 else str(self.client.status_error(response,
                                                                                    what)))
        return response
