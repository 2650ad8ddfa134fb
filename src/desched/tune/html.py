"""`desched tune --output html`: one self-contained page (no network) in the look of simulate's
report: the inputs and what the figures assume, the recommendation and why, the trade-off plot
(evictions against each goal's figure, every candidate a point linking to its section), every
candidate in the search's order, and simulate's own report of your policy, the recommendation
and the Pareto front's candidates, embedded in their sections and loaded when opened."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from desched.report.html import esc, html_page
from desched.tune.evaluate import Measured
from desched.tune.goals import Goal
from desched.tune.output import (
    ASSUMES,
    balance_line,
    figure_name,
    floor_line,
    knob_text,
    run_line,
    scheduler_text,
    search_text,
    short_names,
)
from desched.tune.search import Candidate, churn_text, meets, rank
from desched.tune.tuner import BASELINE, Report, TuneResult, shown, values_text

# What a point is, by its glyph and colour (the legend names both): colour alone tells none.
_KINDS = {
    "meets": ("circle", "#2f855a", "meets the goals"),
    "churn": ("triangle", "#d69e2e", "meets the goals, with churn"),
    "over": ("diamond", "#805ad5", "meets the goals, over --max-evictions in a cycle"),
    "misses": ("cross", "#c53030", "misses a goal"),
}
_YOURS, _BEST, _FRONT, _GOAL, _FLOOR = "#2b6cb0", "#22543d", "#4a6fa5", "#c53030", "#4a5568"
_FONT = 11
_HALO = 'stroke="#fff" stroke-width="3" paint-order="stroke"'

_STYLE = """<style>
dl.inputs{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em;margin:.5em 0}
dl.inputs dt{font-weight:600}dl.inputs dd{margin:0}
.assumes{border-left:6px solid #2b6cb0;background:#f0f5fb;padding:.5em 1em;border-radius:4px}
.tag{font-size:.75em;border-radius:3px;padding:1px 5px;margin-left:.5em;color:#fff;
vertical-align:middle;font-weight:normal}.tag.best{background:#22543d}.tag.yours{background:#2b6cb0}
.tag.front{background:#4a6fa5}
section.candidate{border:1px solid #ddd;border-radius:6px;padding:.3em 1em;margin:.6em 0}
section.candidate:target{outline:3px solid #2b6cb0}section.candidate h3{margin:.4em 0}
iframe.report{width:100%;height:80vh;border:1px solid #ddd}
pre.policy{background:#f7f7f7;border:1px solid #ddd;padding:.6em;overflow-x:auto;
user-select:all}tr.best td{background:#f0fff4}tr.yours td:first-child{border-left:4px solid #2b6cb0}
.plot-legend{display:flex;flex-wrap:wrap;gap:.2em 1.2em;font-size:.9em;align-items:center}
.plot-legend svg{vertical-align:middle;margin-right:.3em}
svg a:hover>*{opacity:.6}
</style>"""

# Opening a candidate (a point's link, a row's, an address ending in #candidate-...) opens its
# embedded report; a report is loaded only when opened: at 5,000 nodes each is megabytes.
_SCRIPT = """<script>
(function(){
function load(d){const f = d.querySelector('iframe[data-srcdoc]');
  if(f && !f.hasAttribute('srcdoc')) f.srcdoc = f.dataset.srcdoc;}
document.querySelectorAll('details.report').forEach(d =>
  d.addEventListener('toggle', () => { if(d.open) load(d); }));
function follow(){
  const id = decodeURIComponent(location.hash.slice(1));
  if(!id.startsWith('candidate-')) return;
  const s = document.getElementById(id), d = s && s.querySelector('details.report');
  if(d){ d.open = true; load(d); }
}
window.addEventListener('hashchange', follow); follow();
document.querySelectorAll('button.copy').forEach(b => b.addEventListener('click', () => {
  const pre = document.getElementById(b.dataset.for);
  function select(){ const r = document.createRange(); r.selectNodeContents(pre);
    const s = getSelection(); s.removeAllRanges(); s.addRange(r); }
  if(navigator.clipboard) navigator.clipboard.writeText(pre.textContent).then(
    () => { b.textContent = 'copied'; }, select);
  else select();
}));
})();
</script>"""



def section_id(key: Report) -> str:
    """The id of a candidate's section: candidate-baseline, candidate-3-10 (its value indices)."""
    return "candidate-" + (key if isinstance(key, str) else "-".join(map(str, key)))


def _kind(m: Measured, max_evictions: int | None) -> str:
    if not m.meets:
        return "misses"
    if not meets(m, max_evictions):
        return "over"
    return "churn" if m.churn else "meets"


def _glyph(kind: str, x: float, y: float) -> str:
    shape, color, _ = _KINDS[kind]
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{color}" stroke="#fff"/>'
    if shape == "triangle":
        return (f'<path d="M{x:.1f} {y - 6:.1f}L{x + 5.5:.1f} {y + 4:.1f}L{x - 5.5:.1f} '
                f'{y + 4:.1f}Z" fill="{color}" stroke="#fff"/>')
    if shape == "diamond":
        return (f'<path d="M{x:.1f} {y - 6:.1f}L{x + 6:.1f} {y:.1f}L{x:.1f} {y + 6:.1f}L'
                f'{x - 6:.1f} {y:.1f}Z" fill="{color}" stroke="#fff"/>')
    # A cross, with a round target under it a pointer can hit.
    return (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6" fill="none" pointer-events="all"/>'
            f'<path d="M{x - 4:.1f} {y - 4:.1f}L{x + 4:.1f} {y + 4:.1f}M{x + 4:.1f} {y - 4:.1f}'
            f'L{x - 4:.1f} {y + 4:.1f}" stroke="{color}" stroke-width="2.2"/>')


def _legend_glyph(kind: str) -> str:
    return f'<svg width="16" height="16" aria-hidden="true">{_glyph(kind, 8, 8)}</svg>'


def _ring(color: str, radius: float, width: float) -> str:
    return (f'<svg width="26" height="26" aria-hidden="true"><circle cx="13" cy="13" '
            f'r="{radius}" fill="none" stroke="{color}" stroke-width="{width}"/></svg>')


def _tick_step(span: float, count: int = 5) -> float:
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


@dataclass(frozen=True)
class _Dot:
    key: Report
    evictions: int
    figure: float
    kind: str
    tip: str
    order: int  # within points that coincide: the lowest is drawn at the true position


def _dots(result: TuneResult, index: int, candidates: list[Candidate]) -> list[_Dot]:
    """Each valid candidate whose figure for goal `index` is known, in the search's order."""
    limit = result.settings.max_evictions
    out = []
    for order, c in enumerate(candidates):
        m = c.measured
        if m is None or m.figures[index] is None:
            continue
        figure = m.figures[index]
        assert figure is not None
        out.append(_Dot(c.point, m.evictions, figure, _kind(m, limit),
                        f"{values_text(result.knobs, c.values)}: {run_line(result, m)}", order))
    return out


_ROW = 7  # coinciding points side by side, this many to a row
_GAP = 9.0  # px between them


def _spread(dots: list[_Dot], at: dict[Report, tuple[float, float]]) -> dict[Report, tuple[float,
                                                                                         float]]:
    """Candidates with equal figures would hide one another: the first (in the search's order)
    stays where it is, the others go alternately right and left of it, a few px apart (the
    x axis counts pods, whole numbers, so a sideways step reads as the same count); beyond
    _ROW of them, rows below and above."""
    groups: dict[tuple[float, float], list[_Dot]] = {}
    for d in dots:
        groups.setdefault(at[d.key], []).append(d)
    out = {}
    for (x, y), members in groups.items():
        for k, d in enumerate(sorted(members, key=lambda d: d.order)):
            row, place = divmod(k, _ROW)
            side = (place + 1) // 2 * (1 if place % 2 else -1)
            rise = (row + 1) // 2 * (1 if row % 2 else -1)
            out[d.key] = (x + side * _GAP, y + rise * _GAP)
    return out


def _floor_at(result: TuneResult) -> int | None:
    """The floor's moves as the plot draws them: the optimum, or the bound the solver proved
    when it stopped early; None when there is none to draw."""
    lowest = result.floor
    if lowest is None or lowest.status in ("infeasible", "not modelled"):
        return None
    at = (lowest.moves if lowest.status == "optimal" and lowest.moves is not None
          else lowest.bound)
    # 0 moves while the cluster as it is misses the goals: an empty bound, not drawn.
    return None if at == 0 and not result.met_now else at


def _plot(result: TuneResult, index: int, goal: Goal, candidates: list[Candidate],
          width: int) -> str:
    """Evictions (x) against goal `index`'s figure (y): every valid candidate a point linking
    to its section, the goal's bound across, the Pareto front joined, your policy and the
    recommendation ringed, the floor's moves a vertical line."""
    dots = _dots(result, index, candidates)
    if not dots:
        return (f'<p class="none">No candidate has a figure for {esc(goal.text)}: the snapshot '
                f'does not give {esc(goal.series)}.</p>')
    best = result.recommended
    base = result.baseline.figures[index]
    lowest = result.floor
    floor_at = _floor_at(result)
    xs = [d.evictions for d in dots] + [result.baseline.evictions]
    ys = [d.figure for d in dots] + ([base] if base is not None else []) + [goal.bound]
    x_hi = max(*xs, floor_at or 0, 1)
    y_lo, y_hi = min(0.0, *ys), max(*ys, 1.0)
    x_step = max(1, math.ceil(_tick_step(x_hi)))
    y_step = _tick_step(y_hi - y_lo)
    x_hi = math.ceil(x_hi * 1.04 / x_step) * x_step
    y_hi = math.ceil(y_hi * 1.04 / y_step) * y_step
    left, right, top, bottom = 58, 24, 26, 44
    height = 380
    plot_w, plot_h = width - left - right, height - top - bottom

    pad = _ROW // 2 * _GAP + 8  # px: a row of points at 0 clear of the y axis and its labels

    def px(v: float) -> float:
        return left + pad + (plot_w - pad) * v / x_hi

    def py(v: float) -> float:
        return top + plot_h - plot_h * (v - y_lo) / (y_hi - y_lo)

    parts = []
    for i in range(int(x_hi // x_step) + 1):
        x = px(i * x_step)
        parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" '
                     f'stroke="#eee"/><text x="{x:.1f}" y="{top + plot_h + 15}" '
                     f'font-size="{_FONT}" text-anchor="middle">{i * x_step}</text>')
    tick = math.ceil(y_lo / y_step) * y_step
    while tick <= y_hi + 1e-9:
        y = py(tick)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
                     f'stroke="#eee"/><text x="{left - 5}" y="{y + 4:.1f}" font-size="{_FONT}" '
                     f'text-anchor="end">{tick:g}</text>')
        tick += y_step
    unit = {"std": "percentage points", "over": "nodes"}.get(goal.stat, "% of allocatable")
    parts.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        f'stroke="#999"/><line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" '
        f'stroke="#999"/><text x="{left + plot_w / 2:.1f}" y="{height - 6}" font-size="{_FONT}" '
        f'text-anchor="middle">pods evicted over {result.settings.cycles} cycle(s)</text>'
        f'<text transform="translate(13 {top + plot_h / 2:.1f}) rotate(-90)" '
        f'font-size="{_FONT}" text-anchor="middle">{esc(figure_name(goal))} ({unit})</text>')
    # The goal's bound across the plot, its text above the line at the right.
    gy = py(goal.bound)
    parts.append(f'<g class="goal"><line x1="{left}" y1="{gy:.1f}" x2="{left + plot_w}" '
                 f'y2="{gy:.1f}" stroke="{_GOAL}" stroke-width="1.5" stroke-dasharray="6 3"/>'
                 f'<text x="{left + plot_w - 4}" y="{gy - 5:.1f}" font-size="{_FONT}" '
                 f'fill="{_GOAL}" text-anchor="end" {_HALO}>goal: {esc(goal.text)}</text></g>')
    if floor_at is not None and lowest is not None:
        fx = px(floor_at)
        label = (f"floor: {floor_at} move(s), a bound" if lowest.status == "optimal"
                 else f"floor: at least {floor_at} move(s), a bound")
        anchor, dx = ("start", 4) if fx < left + plot_w - 150 else ("end", -4)
        title = esc(floor_line(lowest, best, result.met_now))
        parts.append(f'<g class="floor"><title>{title}</title>'
                     f'<line x1="{fx:.1f}" y1="{top}" x2="{fx:.1f}" y2="{top + plot_h}" '
                     f'stroke="{_FLOOR}" stroke-width="1.5" stroke-dasharray="2 3"/>'
                     f'<text x="{fx + dx:.1f}" y="{top + 11}" font-size="{_FONT}" '
                     f'fill="{_FLOOR}" text-anchor="{anchor}" {_HALO}>{esc(label)}</text></g>')
    true_at = {d.key: (px(d.evictions), py(d.figure)) for d in dots}
    at = _spread(dots, true_at)
    front = [c for c in result.front if c.point in at]
    if len(front) > 1:
        line = " ".join(f"{at[c.point][0]:.1f},{at[c.point][1]:.1f}" for c in front)
        parts.append(f'<polyline class="front" points="{line}" fill="none" stroke="{_FRONT}" '
                     f'stroke-width="1.5" stroke-dasharray="4 2"/>')
    for d in dots:
        x, y = at[d.key]
        parts.append(f'<a class="point" data-kind="{d.kind}" href="#{section_id(d.key)}">'
                     f'<title>{esc(d.tip)}</title>{_glyph(d.kind, x, y)}</a>')
    edge = left + plot_w - 110  # a label right of this goes left of its ring
    if best is not None and best.point in at:
        parts.append(_mark("best", at[best.point], edge, f"recommended: "
                           f"{values_text(result.knobs, best.values)}", section_id(best.point)))
    if base is not None:
        parts.append(_mark("yours", (px(result.baseline.evictions), py(base)), edge,
                           f"your policy ({values_text(result.knobs, result.baseline_values)}):"
                           f" {run_line(result, result.baseline)}", section_id(BASELINE)))
    missing = sum(1 for c in candidates if c.measured is not None
                  and c.measured.figures[index] is None)
    note = f" · {missing} candidate(s) without this figure (not measured)" if missing else ""
    return (f'<figure style="max-width:{width}px"><svg class="tradeoff" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="evictions against {esc(figure_name(goal))}" '
            f'font-family="system-ui,sans-serif">{"".join(parts)}'
            f'</svg><figcaption><b>{esc(figure_name(goal))}</b> against evictions: '
            f'{len(dots)} candidate(s){note}; a point opens its candidate</figcaption></figure>')


# How the recommendation and your policy are ringed: colour, radius, stroke, label, the label's
# offset (the recommendation's above, yours below, when they coincide).
_MARKS = {"best": (_BEST, 11.0, 2.5, "recommended", -13.0),
          "yours": (_YOURS, 8.0, 2.0, "your policy", 20.0)}


def _mark(which: str, at: tuple[float, float], edge: float, tip: str, href: str) -> str:
    color, radius, stroke, label, dy = _MARKS[which]
    x, y = at
    anchor, dx = ("start", radius + 3) if x < edge else ("end", -radius - 3)
    return (f'<a class="mark" data-mark="{which}" href="#{href}"><title>{esc(tip)}</title>'
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{radius}" fill="none" stroke="{color}" '
            f'stroke-width="{stroke}"/><text x="{x + dx:.1f}" y="{y + dy:.1f}" '
            f'font-size="{_FONT}" font-weight="600" fill="{color}" text-anchor="{anchor}" '
            f'{_HALO}>{label}</text></a>')


def _legend(result: TuneResult) -> str:
    kinds = ["meets", "churn", *(["over"] if result.settings.max_evictions is not None else []),
             "misses"]
    items = [f"<span>{_legend_glyph(k)}{esc(_KINDS[k][2])}</span>" for k in kinds]
    if result.recommended is not None:
        items.append(f"<span>{_ring(_BEST, 8, 2.5)}recommended</span>")
    items += [f"<span>{_ring(_YOURS, 6, 2)}your policy</span>",
              f'<span><svg width="26" height="10" aria-hidden="true"><line x1="0" y1="5" x2="26" '
              f'y2="5" stroke="{_FRONT}" stroke-width="1.5" stroke-dasharray="4 2"/></svg>'
              f"Pareto front</span>",
              f'<span><svg width="26" height="10" aria-hidden="true"><line x1="0" y1="5" x2="26" '
              f'y2="5" stroke="{_GOAL}" stroke-width="1.5" stroke-dasharray="6 3"/></svg>'
              f"the goal's bound</span>"]
    if _floor_at(result) is not None:
        items.append(f'<span><svg width="10" height="20" aria-hidden="true"><line x1="5" y1="0" '
                     f'x2="5" y2="20" stroke="{_FLOOR}" stroke-width="1.5" '
                     f'stroke-dasharray="2 3"/></svg>the floor: fewest moves any descheduler '
                     f'could meet the goals with (a bound)</span>')
    return f'<div class="plot-legend">{"".join(items)}</div>'


def _reschedule(result: TuneResult) -> str:
    s = result.settings
    if not s.reschedule:
        return ("no (--no-reschedule): evicted pods are gone, not replaced: an optimistic "
                "reading")
    return f"yes: evicted pods replaced by the {scheduler_text(s)}"


def _inputs(result: TuneResult) -> str:
    s = result.settings
    rows = [
        ("policy", result.policy_path),
        ("snapshot", ", ".join(result.snapshot_paths)),
        ("cluster", f"{result.nodes:,} nodes, {result.pods:,} pods"),
        ("snapshot time", f"{result.clock}: every candidate runs at this one time"),
        ("cycles", f"{s.cycles} per candidate"),
        ("reschedule", _reschedule(result)),
        ("outcomes", "1: kube-scheduler's random choice among equally scored nodes broken by "
                     "node name (simulate --outcomes 1)"),
        ("goals", "; ".join(g.text for g in result.goals)
         + (f"; at most {s.max_evictions} evictions a cycle"
            if s.max_evictions is not None else "")),
        ("varied", "; ".join(knob_text(k) for k in result.knobs)),
        ("searched", search_text(result)),
    ]
    if s.group_by:
        rows.append(("grouped by", f"node label {s.group_by}"))
    body = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows)
    usage = [g.text for g in result.goals if g.usage]
    note = (f" Usage goals here ({'; '.join(usage)}): the measured usage of a pod is assumed "
            f"to move with it to its new node, the node's own usage to stay." if usage else "")
    warnings = ("" if not result.warnings else
                '<div class="warn" id="warnings"><b>Warnings</b><ul>'
                + "".join(f"<li>{esc(w)}</li>" for w in result.warnings) + "</ul></div>")
    return (f'{warnings}<dl class="inputs" id="inputs">{body}</dl>'
            f'<p class="assumes" id="assumes">{esc(ASSUMES)}{esc(note)}</p>')


def _balance_table(result: TuneResult, best: Measured) -> str:
    mine = {b.series: b for b in result.baseline.after}
    rows = "".join(
        f"<tr><td>{esc(b.series)}</td>"
        + (f'<td class="n">{mine[b.series].max:.1f}%</td><td class="n">'
           f'{mine[b.series].std:.1f}</td>' if b.series in mine else "<td></td><td></td>")
        + f'<td class="n">{b.max:.1f}%</td><td class="n">{b.std:.1f}</td></tr>'
        for b in best.after)
    return ('<table class="balance-after"><tr><th rowspan="2">balance after</th><th colspan="2">'
            'your policy</th><th colspan="2">recommended</th></tr><tr><th>max</th><th>std</th>'
            f'<th>max</th><th>std</th></tr>{rows}</table>')


def _recommendation(result: TuneResult) -> str:
    best = result.recommended
    lowest = ("" if result.floor is None
              else f'<p id="floor">{esc(floor_line(result.floor, best, result.met_now))}</p>')
    if best is None or best.measured is None:
        return (f'<div class="warn" id="unreachable"><b>No candidate meets the goals:</b> '
                f'{esc(result.unreachable or "")}</div>{lowest}')
    values = "".join(
        f"<tr><td>{esc(k.text)}</td><td class=n>{esc(shown(mine))}</td><td class=n>"
        + (f"<b>{esc(shown(v))}</b>" if v != mine else esc(shown(v))) + "</td></tr>"
        for k, mine, v in zip(result.knobs, result.baseline_values, best.values, strict=True))
    why = "".join(f"<li>{esc(c.knob)} {esc(shown(c.other))} (instead of {esc(shown(c.value))}) "
                  f"{esc(c.verdict)}</li>" for c in result.contrasts)
    return (f'<div id="recommended"><p><b>Recommended</b> '
            f'(<a href="#{section_id(best.point)}">its section</a>): '
            f'{esc(run_line(result, best.measured))}</p><p>your policy '
            f'(<a href="#{section_id(BASELINE)}">its section</a>): '
            f'{esc(run_line(result, result.baseline))}</p><div class="plots"><table><tr><th>'
            f'setting</th><th>your policy</th><th>recommended</th></tr>{values}</table>'
            f'{_balance_table(result, best.measured)}</div>'
            + (f'<h3>Why it beat its neighbours</h3><ul id="why">{why}</ul>' if why else "")
            + f"{lowest}</div>")


def _policy_file(result: TuneResult) -> str:
    if result.written is None:
        return ""
    return ('<h2>The recommended policy file</h2><p class="muted">In your file\'s own format, '
            'comments kept where it allows; the same as <code>-o yaml</code>. A click selects '
            'it all. <button class="copy" data-for="policy-file">copy</button></p>'
            f'<pre class="policy" id="policy-file">{esc(result.written)}</pre>')


def _ordered(result: TuneResult) -> list[Candidate]:
    key = rank(result.goals, result.settings.max_evictions, result.found.start)
    return sorted(result.found.candidates.values(), key=key)


def _tags(result: TuneResult, c: Candidate, front: set[tuple[int, ...]]) -> str:
    best = result.recommended
    tags = []
    if best is not None and c.point == best.point:
        tags.append('<span class="tag best">recommended</span>')
    if c.point == result.found.start:
        tags.append('<span class="tag yours">your values</span>')
    if c.point in front:
        tags.append('<span class="tag front">Pareto front</span>')
    return "".join(tags)


def _table(result: TuneResult, ordered: list[Candidate]) -> str:
    """Every candidate, as the search ranks them (the recommendation first)."""
    names = short_names(result)
    front = {c.point for c in result.front}
    best = result.recommended
    head = "".join(f"<th>{esc(h)}</th>" for h in [
        "#", *names, "evictions", "by cycle", "refused", "churn",
        *(figure_name(g) for g in result.goals), "verdict"])
    rows = []
    for i, c in enumerate(ordered, 1):
        values = "".join(f"<td class=n>{esc(shown(v))}</td>" for v in c.values)
        m = c.measured
        if m is None:
            rows.append(f'<tr class="invalid"><td class=n>{i}</td>{values}<td colspan="'
                        f'{4 + len(result.goals) + 1}">no valid policy: {esc(c.invalid)}</td></tr>')
            continue
        figures = "".join(f"<td class=n>{'-' if v is None else esc(g.shown(v))}</td>"
                          for g, v in zip(result.goals, m.figures, strict=True))
        cls = ("best " if best is not None and c.point == best.point else "") + (
            "yours" if c.point == result.found.start else "")
        verdict = _KINDS[_kind(m, result.settings.max_evictions)][2]
        rows.append(f'<tr class="{cls.strip()}"><td class=n><a href="#{section_id(c.point)}">'
                    f'{i}</a></td>{values}<td class=n>{m.evictions}</td><td class=n>'
                    f'{"+".join(map(str, m.per_cycle))}</td><td class=n>{m.refused}</td>'
                    f'<td class=n>{m.churn}</td>{figures}<td>{esc(verdict)}'
                    f'{_tags(result, c, front)}</td></tr>')
    return (f'<div class="scroll"><table id="candidates"><tr>{head}</tr>{"".join(rows)}'
            f'</table></div>')


def _groups(m: Measured) -> str:
    if not m.groups:
        return ""
    rows = "".join(f"<tr><td>{esc(g.value)}</td><td class=n>{g.nodes}</td><td>"
                   f"{esc(balance_line(g.after))}</td></tr>" for g in m.groups)
    return f"<table><tr><th>group</th><th>nodes</th><th>balance after</th></tr>{rows}</table>"


def _report(key: Report, reports: Mapping[Report, str]) -> str:
    page = reports.get(key)
    if page is None:
        return ""
    # The report stays data (an attribute) until opened; the script makes it the frame's page.
    return ('<details class="report"><summary>simulate report of this candidate (the page '
            '<code>desched simulate -o html</code> gives with these values)</summary>'
            f'<iframe class="report" title="simulate report" loading="lazy" '
            f'data-srcdoc="{esc(page)}"></iframe></details>')


def _section(result: TuneResult, key: Report, title: str, m: Measured, tags: str,
             reports: Mapping[Report, str]) -> str:
    held = ("" if not m.held_by else "<p class=muted>held back: " + esc(", ".join(
        f"{by} ({n})" for by, n in sorted(m.held_by.items(), key=lambda kv: (-kv[1], kv[0]))))
        + "</p>")
    churn = f"<p class=muted>churn: {esc(churn_text(m))}</p>" if m.churn else ""
    return (f'<section class="candidate" id="{section_id(key)}"><h3>{esc(title)}{tags}</h3>'
            f'<p>{esc(run_line(result, m))}</p><p class="muted">balance after: '
            f'{esc(balance_line(m.after))}</p>{churn}{held}{_groups(m)}'
            f'{_report(key, reports)}</section>')


def _sections(result: TuneResult, ordered: list[Candidate],
              reports: Mapping[Report, str]) -> str:
    front = {c.point for c in result.front}
    out = [_section(result, BASELINE, "your policy: " + values_text(result.knobs,
                                                                      result.baseline_values),
                    result.baseline, '<span class="tag yours">your policy</span>', reports)]
    # Numbered as in the table of every candidate.
    out += [_section(result, c.point, f"#{i} " + values_text(result.knobs, c.values),
                     c.measured, _tags(result, c, front), reports)
            for i, c in enumerate(ordered, 1) if c.measured is not None]
    return "".join(out)


def render_html(result: TuneResult, reports: Mapping[Report, str] | None = None) -> str:
    """The page; `reports`: simulate's html report per candidate (Tuner.reports), embedded in
    their sections."""
    reports = reports or {}
    ordered = _ordered(result)
    width = 760 if len(result.goals) == 1 else 580
    plots = "".join(_plot(result, i, g, ordered, width) for i, g in enumerate(result.goals))
    title = f"desched tune: {result.policy_path}"
    body = f"""<h1>{esc(title)}</h1>
{_inputs(result)}
<h2>The answer</h2>{_recommendation(result)}
<h2>Evictions against the goals</h2>{_legend(result)}<div class="plots" id="tradeoff">{plots}</div>
{_policy_file(result)}
<h2>Every candidate</h2><p class="muted">As the search ranks them: meeting the goals without
churn first, then fewest evictions; a number opens the candidate.</p>{_table(result, ordered)}
<h2>The candidates</h2><p class="muted">Your policy, the recommendation and the Pareto front's
candidates nearest it carry simulate's own report; the others, their figures.</p>
{_sections(result, ordered, reports)}
{_SCRIPT}"""
    return html_page(title, body, {}, head=_STYLE)
