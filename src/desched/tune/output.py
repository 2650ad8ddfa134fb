"""What `desched tune` prints: a summary for people (text), everything for scripts (json), the
recommended policy file (yaml)."""

from __future__ import annotations

from typing import Any

from desched.errors import InputError
from desched.simulate.frames import Balance
from desched.tune.evaluate import Measured
from desched.tune.floor import Floor
from desched.tune.goals import Goal
from desched.tune.search import Candidate, churn_text
from desched.tune.tuner import Settings, TuneResult, shown, values_text

ASSUMES = ("Figures are simulate's, on one snapshot time: evicted pods replaced by the scheduler "
           "model named above with its scheduler configuration, kube-scheduler's random ties "
           "broken by node name (one outcome of them); usage goals assume a pod's measured usage "
           "moves with it. The floor is a bound on pod moves, not a plan: the scheduler, not "
           "desched, places replacements.")


def scheduler_text(s: Settings) -> str:
    """The scheduler model and the configuration its profiles come from."""
    config = (f"the profiles of {s.scheduler_config_path}" if s.scheduler_config_path
              else "kube-scheduler's default profile")
    return (f"{s.scheduler} scheduler model ({config}; kube-scheduler's random ties broken by "
            f"node name, one outcome)")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def figure_name(goal: Goal) -> str:
    """What a goal measures, without its bound: "max cpu requests", "nodes over 80% cpu usage"."""
    if goal.stat == "over":
        return f"nodes over {goal.level:g}% {goal.series}"
    return f"{goal.stat} {goal.series}"


def figures_text(result: TuneResult, m: Measured) -> str:
    return "; ".join(f"{figure_name(g)} {'not measured' if v is None else g.shown(v)}"
                     for g, v in zip(result.goals, m.figures, strict=True))


def _verdict(result: TuneResult, m: Measured) -> str:
    limit = result.settings.max_evictions
    if not m.meets:
        return "misses the goals"
    if limit is not None and max(m.per_cycle, default=0) > limit:
        return f"meets the goals but evicts over --max-evictions {limit} in a cycle"
    return "meets the goals" + ("" if m.churn == 0 else f", with churn ({churn_text(m)})")


def run_line(result: TuneResult, m: Measured) -> str:
    cycles = "+".join(str(n) for n in m.per_cycle)
    text = f"{_plural(m.evictions, 'eviction')}"
    if len(m.per_cycle) > 1:
        text += f" ({cycles} by cycle)"
    if m.refused:
        text += f", {_plural(m.refused, 'pod')} refused"
    return f"{text}; {figures_text(result, m)} — {_verdict(result, m)}"


def balance_line(after: list[Balance]) -> str:
    return "; ".join(f"{b.series} max {b.max:.1f}% std {b.std:.1f}" for b in after)


def floor_line(lowest: Floor, best: Candidate | None, met_now: bool = False) -> str:
    """`met_now`: the cluster as it is meets the goals (else a floor of 0 moves is empty)."""
    head = {"optimal": "", "time limit": "at least "}.get(lowest.status, "")
    if lowest.status == "infeasible":
        return f"floor: no set of pod moves meets the goals ({lowest.reason})"
    if lowest.status == "not modelled":
        return f"floor: not computed ({lowest.reason})"
    moves = lowest.bound if lowest.status != "optimal" or lowest.moves is None else lowest.moves
    if moves == 0 and not met_now:
        return (f"floor: no useful bound ({lowest.status}; {lowest.solver}, {lowest.model}, "
                f"{lowest.seconds:.1f} s): it proves 0 moves, and the cluster as it is misses "
                f"the goals, so all it says is at least 1")
    how = (f"{lowest.status}; {lowest.solver}, {lowest.model}, {lowest.seconds:.1f} s"
           + (f"; best found {lowest.moves}" if lowest.status == "time limit"
              and lowest.moves is not None else ""))
    text = f"floor: {head}{_plural(moves, 'pod move')} ({how}), a bound: no descheduler meets " \
           f"the goals with fewer"
    if best is not None and best.measured is not None:
        gap = best.measured.evictions - moves
        text += f"; the recommendation is {_plural(gap, 'eviction')} above it"
    return text


def search_text(result: TuneResult) -> str:
    """How many candidates ran, of how many, how they were chosen, and how long it took."""
    found = result.found
    invalid = sum(1 for c in found.candidates.values() if c.measured is None)
    how = "the whole grid" if found.exhaustive else "a coarse grid, then a pattern search"
    return (f"{len(found.candidates)} of {found.grid} candidates ({how})"
            + (f", {invalid} of them no valid policy" if invalid else "")
            + f", {result.seconds:.1f} s")


def render_text(result: TuneResult) -> str:
    s = result.settings
    lines = [f"desched tune: {result.policy_path} on {', '.join(result.snapshot_paths)}",
             f"  {result.nodes} nodes, {result.pods} pods; clock {result.clock}; each candidate "
             f"{_plural(s.cycles, 'cycle')}"
             + (f", evicted pods replaced by the {scheduler_text(s)}" if s.reschedule else
                ", evicted pods removed (not replaced)"),
             "goals: " + "; ".join(g.text for g in result.goals)
             + (f"; at most {s.max_evictions} evictions a cycle"
                if s.max_evictions is not None else ""),
             "the cluster now: " + "; ".join(
                 f"{figure_name(g)} {'not measured' if v is None else g.shown(v)}"
                 for g, v in zip(result.goals, result.now, strict=True))
             + (" — meets the goals" if result.met_now else " — misses the goals"),
             "varied: " + "; ".join(knob_text(k) for k in result.knobs)]
    lines.append(f"searched: {search_text(result)}")
    lines.append("")
    lines.append(f"your policy ({values_text(result.knobs, result.baseline_values)}): "
                 f"{run_line(result, result.baseline)}")
    best = result.recommended
    if best is not None and best.measured is not None:
        lines.append(f"recommended ({values_text(result.knobs, best.values)}): "
                     f"{run_line(result, best.measured)}")
        lines.append(f"  balance after: {balance_line(best.measured.after)}")
        if result.contrasts:
            lines.append("  why it beat its neighbours:")
            lines.extend(f"    {c.knob} {shown(c.other)} (instead of {shown(c.value)}) "
                         f"{c.verdict}" for c in result.contrasts)
    else:
        lines.append(f"no candidate meets the goals: {result.unreachable}")
    if result.floor is not None:
        lines.append(floor_line(result.floor, best, result.met_now))
    if result.front:
        lines.append("")
        lines.append("Pareto front (no other candidate has fewer evictions and better figures):")
        header = ["evictions", *(figure_name(g) for g in result.goals),
                  *short_names(result)]
        rows = [[str(c.measured.evictions),
                 *("-" if v is None else g.shown(v)
                   for g, v in zip(result.goals, c.measured.figures, strict=True)),
                 *(shown(v) for v in c.values)]
                for c in result.front if c.measured is not None]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            lines.append("  " + "  ".join(cell.rjust(w) for cell, w in zip(row, widths,
                                                                            strict=True)))
    lines.append("")
    if best is not None:
        lines.append("Write the recommended policy with -o yaml (and --out FILE).")
    lines.append(ASSUMES)
    return "\n".join(lines) + "\n"


def short_names(result: TuneResult) -> list[str]:
    """The knobs' names for a table's header: without the plugin when one plugin has them all."""
    plugins = {k.plugin for k in result.knobs}
    if len(plugins) == 1 and "" not in plugins:
        return [k.text.split(".", 1)[1] for k in result.knobs]
    return [k.text for k in result.knobs]


def knob_text(knob: Any) -> str:
    return f"{knob.text} {shown(knob.low)}..{shown(knob.high)} step {shown(knob.step)}"


def _measured_json(result: TuneResult, m: Measured) -> dict[str, Any]:
    return {
        "evictions": m.evictions, "evictionsPerCycle": list(m.per_cycle),
        "refusedPods": m.refused, "heldBy": m.held_by,
        "churn": {"backOnSource": m.back_on_source, "workloadsEvictedAgain": m.repeated,
                  "idleCycles": m.idle_cycles},
        "goals": [{"goal": g.text, "figure": v, "met": ok}
                  for g, v, ok in zip(result.goals, m.figures, m.met, strict=True)],
        "balanceAfter": [_balance_json(b) for b in m.after],
        "groups": [{"value": g.value, "nodes": g.nodes,
                    "balanceAfter": [_balance_json(b) for b in g.after]} for g in m.groups],
    }


def _balance_json(b: Balance) -> dict[str, Any]:
    return {"series": b.series, "nodes": b.nodes, "mean": b.mean, "std": b.std, "max": b.max,
            "over": b.over}


def _candidate_json(result: TuneResult, c: Candidate) -> dict[str, Any]:
    out: dict[str, Any] = {"values": {k.text: v for k, v in zip(result.knobs, c.values,
                                                                 strict=True)}}
    if c.measured is None:
        out["invalid"] = c.invalid
    else:
        out.update(_measured_json(result, c.measured))
    return out


def to_json_obj(result: TuneResult) -> dict[str, Any]:
    s = result.settings
    best = result.recommended
    lowest = result.floor
    return {
        "policy": result.policy_path, "snapshots": result.snapshot_paths,
        "nodes": result.nodes, "pods": result.pods, "clock": result.clock,
        "cycles": s.cycles, "reschedule": s.reschedule, "scheduler": s.scheduler,
        "schedulerConfig": s.scheduler_config_path, "outcomes": 1,
        "goals": [g.text for g in result.goals], "maxEvictions": s.max_evictions,
        "now": [{"goal": g.text, "figure": v, "met": v is not None and g.met(v)}
                for g, v in zip(result.goals, result.now, strict=True)],
        "knobs": [{"knob": k.text, "low": k.low, "high": k.high, "step": k.step}
                  for k in result.knobs],
        "search": {"grid": result.found.grid, "ran": len(result.found.candidates),
                   "exhaustive": result.found.exhaustive, "seconds": result.seconds},
        "yourPolicy": {"values": {k.text: v for k, v in zip(result.knobs,
                                                             result.baseline_values,
                                                             strict=True)},
                       **_measured_json(result, result.baseline)},
        "recommended": _candidate_json(result, best) if best is not None else None,
        "why": [{"knob": c.knob, "value": c.value, "neighbour": c.other, "verdict": c.verdict}
                for c in result.contrasts],
        "unreachable": result.unreachable,
        "floor": None if lowest is None else {
            "moves": lowest.moves, "bound": lowest.bound, "status": lowest.status,
            "reason": lowest.reason, "solver": lowest.solver, "model": lowest.model,
            "seconds": lowest.seconds},
        "pareto": [_candidate_json(result, c) for c in result.front],
        "candidates": [_candidate_json(result, c) for c in result.found.candidates.values()],
        "policyFile": result.written,
        "assumes": ASSUMES,
    }


def render_policy(result: TuneResult) -> str:
    """The recommended policy file; InputError (one line, exit 2) naming why when no candidate
    meets the goals: there is nothing to write."""
    if result.written is None:
        raise InputError("--goal", f"no candidate meets the goals: {result.unreachable}")
    return result.written
