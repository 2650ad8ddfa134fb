"""`simulate --output html`: one self-contained page (no network) that stays readable and fast
at 5,000 nodes: aggregates first (summary, churn, balance per cycle, utilization before and after
as inline SVG, balance per node group, evictions by plugin and node), details on demand
(searchable, sortable, paged tables built by a small script from the data embedded in the page).

The page tells the truth about its "after": without --reschedule the evicted pods are gone and
not replaced, and every after figure says so; churn (replacements back on their source node,
workloads evicted again, evictions that changed nothing) is flagged with its remedy."""

from __future__ import annotations

import html
import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from desched.framework.decisions import EVICTED_OUTCOMES, REFUSED_OUTCOMES, Decision
from desched.framework.registry import RoleThreshold
from desched.model.labels import compile_selector
from desched.simulate import whatif
from desched.simulate.frames import SERIES, Balance, balance, role_thresholds, thresholds
from desched.simulate.simulation import SimulationResult

_BANDS = 10  # bands of 10 percentage points up to 100 % (100 in the last); then one overflow band
_PER_NODE = 30  # clusters this small get a bar pair per node instead of a histogram
_TOP_NODES = 15
_W = 372  # three plots side by side in the page's 1200 px
_FONT = 11
_BEFORE, _AFTER, _LIMIT, _LOW = "#9bb7d4", "#2b6cb0", "#c53030", "#2f855a"
UNPLACED = "where replacements land is known only with --reschedule"
# A live cycle (report_body's `live`): the cluster's scheduler places the replacements.
LIVE_UNPLACED = "where the scheduler put the replacements shows in the next cycle's before"
LIVE_NOT_REPLACED = ("the cycle's evicted pods gone, their replacements not counted: "
                     "optimistic; where the scheduler put them shows in the next cycle's before")

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;color:#222;padding:0 1em}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
h3{font-size:1em;margin:.8em 0 .3em}
.cards{display:flex;gap:.6em;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:6px;
padding:.5em .8em;flex:1 1 0;min-width:5em}.card b{display:block;font-size:1.5em}
.card.warn{border-color:#d69e2e;background:#fffaf0}
.warn{border:1px solid #d69e2e;border-left:6px solid #d69e2e;background:#fffaf0;
padding:.5em 1em;border-radius:4px}.warn li{margin:.3em 0}.remedy{color:#555}
.ok{color:#276749}.scroll{overflow-x:auto}.balance span,.balance td:first-child{white-space:nowrap}
table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:left;font-size:.92em;vertical-align:top}th{background:#f4f4f4}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}td.hot{background:#fde8e8}
th[data-i]{cursor:pointer;user-select:none}th[data-i]:hover{background:#e8eef6}
th[aria-sort=none] .arrow::after{content:"\\A0\\21C5";color:#bbb}
.plots{display:flex;flex-wrap:wrap;gap:1em}
figure{margin:0}figcaption{font-size:.9em;text-align:center}
.none{color:#777;font-style:italic}input{padding:4px;width:22em}
.pager button{margin:0 .3em}.legend span{display:inline-block;width:.8em;height:.8em;
margin:0 .3em 0 1em}.legend span.line{width:1.4em;height:0;border-top:2px dashed #c53030;
vertical-align:middle}.legend span.low{border-top:2px dotted #2f855a}
.muted{color:#666;font-size:.9em}
"""

# Sortable tables: a click on a header sorts by that column (numbers as numbers, empty cells
# last), again reverses; the URL fragment "#sort=TABLE:COLUMN:asc|desc" (several joined by "&")
# sorts at load and follows the clicks, so a sorted view can be shared. A cell is a value or
# [text shown, value sorted by].
SCRIPT = """
(function(){
const data = JSON.parse(document.getElementById('report-data').textContent);
const coll = new Intl.Collator(undefined, {numeric: true});
function esc(s){return String(s).replace(/[&<>"']/g, c => ({'&':'&amp;','<':'&lt;',
  '>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));}
const shown = v => Array.isArray(v) ? v[0] : v, key = v => Array.isArray(v) ? v[1] : v;
const empty = v => v === null || v === undefined || v === '';
const sorts = {};
function readHash(){
  let h = location.hash.slice(1);
  try { h = decodeURIComponent(h); } catch(e) {}
  for(const part of h.split('&')){
    if(!part.startsWith('sort=')) continue;
    const bits = part.slice(5).split(':');
    let dir = 1;
    if(bits.length > 2 && /^(asc|desc)$/.test(bits[bits.length - 1]))
      dir = bits.pop() === 'desc' ? -1 : 1;
    const id = bits.shift(), spec = data.tables[id];
    const i = spec ? spec.columns.indexOf(bits.join(':')) : -1;
    if(i >= 0) sorts[id] = [i, dir];
  }
}
function writeHash(){
  const parts = Object.entries(sorts).map(([id, s]) => 'sort=' + encodeURIComponent(id) + ':' +
    encodeURIComponent(data.tables[id].columns[s[0]]) + ':' + (s[1] < 0 ? 'desc' : 'asc'));
  try { history.replaceState(null, '', '#' + parts.join('&')); } catch(e) {}
}
function table(id, spec){
  const root = document.getElementById(id); if(!root) return;
  const rows = spec.rows, cols = spec.columns, dec = spec.decimals || [], over = spec.over || [];
  if(!rows.length){root.innerHTML = '<p class="none">none</p>'; return;}
  const state = {q:'', page:0}, size = spec.page || 100;
  const text = rows.map(r => r.map(v => empty(shown(v)) ? '' : shown(v)).join(' ').toLowerCase());
  const numeric = cols.map((_, i) => { const r = rows.find(r => !empty(key(r[i])));
    return r !== undefined && typeof key(r[i]) === 'number'; });
  root.innerHTML = '<input type="search" placeholder="search ' + rows.length +
    ' rows"><div class="scroll"><table><thead><tr>' + cols.map((c, i) => '<th data-i="' + i +
    '" title="sort by ' + esc(c) + '">' + esc(c) + '<span class="arrow"></span></th>').join('') +
    '</tr></thead><tbody></tbody></table></div><div class="pager"></div>';
  const body = root.querySelector('tbody'), pager = root.querySelector('.pager');
  const heads = Array.from(root.querySelectorAll('th'));
  let order = rows.map((_, i) => i);
  function arrange(){
    const s = sorts[id];
    heads.forEach((th, i) => { const on = s !== undefined && s[0] === i;
      th.setAttribute('aria-sort', on ? (s[1] < 0 ? 'descending' : 'ascending') : 'none');
      th.lastChild.textContent = on ? (s[1] < 0 ? '\\u00A0\\u25BC' : '\\u00A0\\u25B2') : ''; });
    order = rows.map((_, i) => i);
    if(s === undefined) return;
    const [c, d] = s;
    order.sort((x, y) => { const a = key(rows[x][c]), b = key(rows[y][c]);
      const ea = empty(a), eb = empty(b);
      if(ea || eb) return ea - eb;
      return d * (typeof a === 'number' && typeof b === 'number' ? a - b
                  : coll.compare(String(a), String(b))); });
  }
  function cell(v, i){
    let t = shown(v); const k = key(v);
    if(empty(t)) t = ''; else if(typeof t === 'number' && dec[i] != null) t = t.toFixed(dec[i]);
    const cls = [typeof k === 'number' ? 'n' : '',
                 over[i] != null && typeof k === 'number' && k > over[i] ? 'hot' : '']
                .filter(Boolean).join(' ');
    return '<td' + (cls ? ' class="' + cls + '"' : '') + '>' + esc(t) + '</td>';
  }
  function draw(){
    const q = state.q.toLowerCase();
    const hits = q ? order.filter(i => text[i].includes(q)) : order;
    const pages = Math.max(1, Math.ceil(hits.length / size));
    state.page = Math.min(state.page, pages - 1);
    body.innerHTML = hits.slice(state.page * size, (state.page + 1) * size).map(i =>
      '<tr>' + rows[i].map(cell).join('') + '</tr>').join('');
    pager.innerHTML = hits.length + ' row(s)' + (pages > 1 ? ' · page ' + (state.page + 1) +
      ' of ' + pages + ' <button data-d="-1">previous</button><button data-d="1">next</button>'
      : '');
  }
  root.querySelector('input').addEventListener('input', e => {state.q = e.target.value;
    state.page = 0; draw();});
  pager.addEventListener('click', e => {const d = e.target.dataset.d;
    if(d){state.page = Math.max(0, state.page + Number(d)); draw();}});
  root.querySelector('thead').addEventListener('click', e => {
    const th = e.target.closest('th'); if(!th) return;
    const i = Number(th.dataset.i), s = sorts[id];
    // Numbers largest first on the first click: the hot nodes, the busy cycles.
    sorts[id] = [i, s !== undefined && s[0] === i ? -s[1] : (numeric[i] ? -1 : 1)];
    arrange(); state.page = 0; draw(); writeHash();});
  arrange(); draw();
  const details = root.closest('details');
  if(sorts[id] !== undefined && details) details.open = true;
}
readHash();
for(const [id, spec] of Object.entries(data.tables)) table(id, spec);
document.body.dataset.ready = '1';
})();
"""


def esc(text: object) -> str:
    """`text` as HTML text (quotes escaped too, so it is safe in an attribute)."""
    return html.escape(str(text))


def _after_label(result: SimulationResult) -> str:
    return "after the last cycle" + (" (not replaced)" if result.optimistic else "")


# Plots --------------------------------------------------------------------------------------


def _band(v: float) -> int:
    return _BANDS if v > 100 else min(_BANDS - 1, max(0, int(v // 10)))


# A threshold drawn on a plot: the low ones dotted green, the high ones dashed red.
_MARK_STYLE = {"low": (_LOW, "2 2"), "high": (_LIMIT, "5 3")}
# The px a character of an 11 px label takes (DejaVu Sans, chromium's system-ui here): digits
# and "." as drawn, other characters at most about.
_WIDTHS = {**dict.fromkeys("0123456789", 7.0), ".": 3.5, " ": 3.5, "%": 10.5}


def _width(text: str) -> float:
    return sum(_WIDTHS.get(c, 6.6) for c in text)


_LINE = 14  # px between stacked threshold labels


@dataclass(frozen=True)
class _Mark:
    """A threshold as a plot draws it: where, its label, and the nodes it applies to (None:
    every node the plot shows)."""

    threshold: RoleThreshold
    nodes: frozenset[str] | None

    @property
    def label(self) -> str:
        t = self.threshold
        return f"{t.pool + ' ' if t.pool else ''}{t.role} {t.percent:g}%"


def _marks(result: SimulationResult) -> dict[str, list[_Mark]]:
    """Every threshold that decides a node's role, by series; a node pool's own applies to
    the nodes its selector matches (all of them when the snapshot's nodes are not at hand)."""
    snapshot = result.descheduler.snapshot if result.descheduler is not None else None
    out: dict[str, list[_Mark]] = {}
    for t in role_thresholds(result.policy):
        nodes = None
        if t.node_selector is not None and snapshot is not None:
            matches = compile_selector(t.node_selector)
            nodes = frozenset(name for name, node in snapshot.nodes.items()
                              if matches(node.metadata.labels))
        out.setdefault(t.series, []).append(_Mark(t, nodes))
    for marks in out.values():
        marks.sort(key=lambda m: (m.threshold.percent, m.threshold.role, m.threshold.pool))
    return out


def _stack(marks: list[tuple[float, str]]) -> tuple[list[tuple[str, int]], int]:
    """Each label's anchor and line above the plot (0 the nearest), for thresholds at x, each
    label right of its threshold (left of it at the plot's right edge) and joined to it by the
    threshold's line rising to it: side by side where they fit, else further up, so that no
    label overlaps another and no rising line crosses a label (but one reaching left from the
    right edge). Placed right to left: a label then covers only thresholds already placed.
    Returned in the order given, with the number of lines used."""
    placed: dict[int, tuple[str, int, float, float]] = {}  # index -> anchor, line, extent
    for i in sorted(range(len(marks)), key=lambda k: -marks[k][0]):
        x, text = marks[i]
        width = _width(text)
        anchor, start = ("end", x - 3 - width) if x + 3 + width > _W - 2 else ("start", x + 3)
        lo, hi = start - 3, start + width + 3
        # At or above the labels of the thresholds it covers (their lines rise that far).
        line = max((placed[j][1] for j in placed if lo <= marks[j][0] <= hi), default=0)
        while any(other == line and not (hi <= a or lo >= b)
                  for _, other, a, b in placed.values()):
            line += 1
        placed[i] = (anchor, line, lo, hi)
    lines = max((line for _, line, _, _ in placed.values()), default=-1) + 1
    return [(placed[i][0], placed[i][1]) for i in range(len(marks))], lines


def _threshold(mark: _Mark, x: float, top: float, row: int, anchor: str,
               segments: list[tuple[float, float]]) -> str:
    """The threshold's line over `segments` (y ranges of the plot), its label on line `row`
    above the plot, joined to it by the line."""
    color, dash = _MARK_STYLE[mark.threshold.role]
    label_y = top - 5 - row * _LINE
    rise = label_y - 9
    lines = [(rise, top), *segments]
    drawn = "".join(f'<line x1="{x:.1f}" y1="{y0:.1f}" x2="{x:.1f}" y2="{y1:.1f}" '
                    f'stroke="{color}" stroke-width="1.5" stroke-dasharray="{dash}"/>'
                    for y0, y1 in lines)
    dx = -3 if anchor == "end" else 3
    t = mark.threshold
    return (f'<g class="threshold" data-role="{t.role}"><title>{esc(t.plugin)} {esc(t.arg)}'
            f'{esc(" (node pool " + t.pool + ")") if t.pool else ""}: {t.percent:g}%</title>'
            f'{drawn}<text x="{x + dx:.1f}" y="{label_y:.1f}" font-size="{_FONT}" '
            f'fill="{color}" text-anchor="{anchor}">{esc(mark.label)}</text></g>')


def _figure(series: str, width: int, height: int, body: str, caption: str) -> str:
    return (f'<figure style="max-width:{width}px"><svg width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" '
            f'role="img" aria-label="{esc(series)}" font-family="system-ui,sans-serif">{body}'
            f'</svg><figcaption>{caption}</figcaption></figure>')


def _histogram(series: str, before: list[float], after: list[float], marks: list[_Mark],
               after_label: str) -> str:
    """Grouped bars: how many nodes sit in each 10-point band of utilization, before and after;
    an overflow band holds the nodes above 100 % (requests can be overcommitted, usage can
    burst), with the real maximum under it. Thresholds are drawn across (one above 100 %
    opens the overflow band)."""
    top_value = max((*before, *after), default=0.0)
    overflow = top_value > 100
    bands = _BANDS + overflow
    counts = [[0] * bands, [0] * bands]
    for j, values in enumerate((before, after)):
        for v in values:
            counts[j][_band(v)] += 1
    left, right, bottom = 52, 10, 46
    band = (_W - left - right) / bands
    xs = [left + min(m.threshold.percent, 100.0) / 10 * band for m in marks]
    placed, lines = _stack([(x, m.label) for x, m in zip(xs, marks, strict=True)])
    top = 12 + lines * _LINE
    height = top + 140 + bottom
    plot_w, plot_h = _W - left - right, height - top - bottom
    peak = max(*counts[0], *counts[1], 1)
    parts = [f'<line x1="{left}" y1="{top + plot_h}" x2="{_W - right}" y2="{top + plot_h}" '
             f'stroke="#999"/>']
    for tick in sorted({0, peak // 2, peak}):
        y = top + plot_h - plot_h * tick / peak
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{_W - right}" y2="{y:.1f}" '
                     f'stroke="#eee"/><text x="{left - 4}" y="{y + 4:.1f}" font-size="{_FONT}" '
                     f'text-anchor="end">{tick}</text>')
    if overflow:
        x = left + _BANDS * band
        parts.append(f'<rect class="overflow" x="{x:.1f}" y="{top}" width="{band:.1f}" '
                     f'height="{plot_h}" fill="#fbeaea"/>')
    names = ("before", after_label)
    for i in range(bands):
        for j, (color, values) in enumerate(((_BEFORE, before), (_AFTER, after))):
            n = counts[j][i]
            span = (f"{i * 10}–{i * 10 + 10}%" if i < _BANDS
                    else f"above 100% (up to {max(values, default=0):.0f}%)")
            h = max(plot_h * n / peak, 2.0 if n else 0.0)  # one node of 5,000 stays visible
            w = (band - 4) / 2
            parts.append(f'<rect x="{left + i * band + 2 + j * w:.1f}" y="{top + plot_h - h:.1f}" '
                         f'width="{w:.1f}" height="{h:.1f}" fill="{color}"><title>{esc(names[j])}'
                         f': {n} node(s) at {span}</title></rect>')
    # The overflow band's own label replaces 100's, which would run into it.
    for i in range(0, _BANDS + 1 - overflow, 2):
        parts.append(f'<text x="{left + i * band:.1f}" y="{top + plot_h + 14}" '
                     f'font-size="{_FONT}" text-anchor="middle">{i * 10}</text>')
    if overflow:
        x = left + (_BANDS + 0.5) * band
        parts.append(f'<text class="overflow-label" x="{x:.1f}" y="{top + plot_h + 14}" '
                     f'font-size="{_FONT}" text-anchor="middle" fill="{_LIMIT}">&gt;100</text>'
                     f'<text x="{x:.1f}" y="{top + plot_h + 27}" font-size="{_FONT}" '
                     f'text-anchor="middle" fill="{_LIMIT}">max {top_value:.0f}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" font-size="{_FONT}" '
                 f'text-anchor="middle">% of allocatable</text>'
                 f'<text transform="translate(12 {top + plot_h / 2:.1f}) rotate(-90)" '
                 f'font-size="{_FONT}" text-anchor="middle">nodes</text>')
    for x, mark, (anchor, row) in zip(xs, marks, placed, strict=True):
        parts.append(_threshold(mark, x, top, row, anchor, [(top, top + plot_h)]))
    return _figure(series, _W, height, "".join(parts), _caption(series, marks))


def _caption(series: str, marks: list[_Mark]) -> str:
    """The series and its thresholds; by plugin when several plugins draw on it."""
    plugins = dict.fromkeys(m.threshold.plugin for m in marks)
    if len(plugins) < 2:
        return "".join([f"<b>{esc(series)}</b>", *(f" · {esc(m.label)}" for m in marks)])
    return "".join([f"<b>{esc(series)}</b>", *(
        f" · {esc(plugin)}: " + ", ".join(esc(m.label) for m in marks
                                         if m.threshold.plugin == plugin)
        for plugin in plugins)])


def _short(name: str, room: int = 22) -> str:
    """A node name that fits its column: both ends kept, they tell nodes apart."""
    if len(name) <= room:
        return name
    half = (room - 1) // 2
    return f"{name[:half]}…{name[-(room - 1 - half):]}"


def _common_start(texts: list[str]) -> str:
    first, last = min(texts), max(texts)  # the others share at least what these two share
    size = next((i for i, (a, b) in enumerate(zip(first, last, strict=False))
                 if a != b), len(first))
    return first[:size]


def bar_labels(names: list[str], room: int = 22) -> dict[str, str]:
    """The per-node bars' labels: node names that fit their column and still tell the nodes
    apart. What every name shares at its end (".ec2.internal"), then at its start
    ("gke-prod-"), cut at a "." or "-" and marked "…", as far as needed; then both ends of
    what is left are kept."""
    if len(names) < 2 or all(len(n) <= room for n in names):
        return {n: _short(n, room) for n in names}
    prefix = _common_start(names)
    suffix = _common_start([n[::-1] for n in names])[::-1]
    start = max(prefix.rfind("."), prefix.rfind("-")) + 1
    end = len(suffix) - min((i for i in (suffix.find("."), suffix.find("-")) if i >= 0),
                            default=len(suffix))
    for cut_start, cut_end in ((0, end), (start, end)):
        cores = {n: ("…" if cut_start else "") + n[cut_start:len(n) - cut_end]
                 + ("…" if cut_end else "") for n in names}
        if all(len(c) <= room for c in cores.values()):
            break
    return {n: _short(c, room) for n, c in cores.items()}


def _step(span: float) -> int:
    return 20 if span <= 100 else 50 if span <= 250 else 100 if span <= 600 else 200


def _node_bars(series: str, before: dict[str, float], after: dict[str, float],
               marks: list[_Mark], after_label: str) -> str:
    """A small cluster: one bar pair per node (before, after), named, on a scale that reaches
    the largest value (100 % at least), each threshold drawn across the nodes it applies to
    and labelled above the plot, the values in legible type over the lines."""
    names = sorted(before)
    values = [*before.values(), *after.values(), *(m.threshold.percent for m in marks)]
    span = max(100.0, *values)
    step = _step(span)
    span = math.ceil(span / step) * step
    labels = bar_labels(names)
    # The names' column as wide as the longest name needs (about 6.5 px a character).
    left = min(150, max(60, 12 + round(6.5 * max(map(len, labels.values())))))
    right, row, bar, bottom = 40, 34, 12, 34
    plot_w = _W - left - right

    def x(v: float) -> float:
        return left + plot_w * v / span

    xs = [x(m.threshold.percent) for m in marks]
    placed, lines = _stack([(at, m.label) for at, m in zip(xs, marks, strict=True)])
    top = 8 + lines * _LINE
    height = top + row * len(names) + bottom
    parts = []
    for tick in range(0, int(span) + 1, step):
        parts.append(f'<line x1="{x(tick):.1f}" y1="{top}" x2="{x(tick):.1f}" '
                     f'y2="{height - bottom}" stroke="#eee"/><text x="{x(tick):.1f}" '
                     f'y="{height - bottom + 14}" font-size="{_FONT}" '
                     f'text-anchor="middle">{tick}</text>')
    values_text = []
    for i, name in enumerate(names):
        y = top + i * row
        parts.append(f'<text x="{left - 6}" y="{y + row / 2 + 4:.1f}" font-size="{_FONT}" '
                     f'text-anchor="end"><title>{esc(name)}</title>{esc(labels[name])}</text>')
        for j, (value, color, label) in enumerate(((before.get(name), _BEFORE, "before"),
                                                   (after.get(name), _AFTER, after_label))):
            if value is None:
                continue
            by = y + 4 + j * (bar + 1)
            parts.append(f'<rect x="{left}" y="{by}" width="{x(value) - left:.1f}" '
                         f'height="{bar}" fill="{color}"><title>{esc(name)} {esc(label)}: '
                         f'{value:.1f}%</title></rect>')
            crossing = [at for at, m in zip(xs, marks, strict=True)
                        if m.nodes is None or name in m.nodes]
            values_text.append(_value(f"{value:.1f}", x(value), left, by + bar - 2, crossing,
                                      "#fff" if color == _AFTER else "#1a202c"))
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" '
                 f'stroke="#999"/><text x="{left + plot_w / 2:.1f}" y="{height - 4}" '
                 f'font-size="{_FONT}" text-anchor="middle">% of allocatable</text>')
    for at, mark, (anchor, line) in zip(xs, marks, placed, strict=True):
        parts.append(_threshold(mark, at, top, line, anchor, _rows(names, mark.nodes, top, row)))
    parts.extend(values_text)
    return _figure(series, _W, height, "".join(parts), _caption(series, marks))


def _value(text: str, end: float, left: float, y: float, lines: list[float],
           inside: str) -> str:
    """A bar's value, where no threshold's line runs through it: right of the bar's end, else
    inside the bar (in `inside`, a colour that reads on it); else right of the end, over the
    line, a white halo keeping it legible."""
    width = _width(text)

    def clear(lo: float) -> bool:
        return not any(lo - 0.5 <= at <= lo + width + 0.5 for at in lines)

    if not clear(end + 3) and end - left >= width + 6 and clear(end - 3 - width):
        return (f'<text x="{end - 3:.1f}" y="{y}" font-size="{_FONT}" fill="{inside}" '
                f'text-anchor="end">{text}</text>')
    return (f'<text x="{end + 3:.1f}" y="{y}" font-size="{_FONT}" fill="#333" stroke="#fff" '
            f'stroke-width="3" paint-order="stroke">{text}</text>')


def _rows(names: list[str], nodes: frozenset[str] | None, top: float,
          row: int) -> list[tuple[float, float]]:
    """The y ranges of the rows of `nodes` (every row for None), runs of rows joined."""
    out: list[tuple[float, float]] = []
    for i, name in enumerate(names):
        if nodes is not None and name not in nodes:
            continue
        y0, y1 = top + i * row, top + (i + 1) * row
        if out and out[-1][1] == y0:
            out[-1] = (out[-1][0], y1)
        else:
            out.append((y0, y1))
    return out


def _plots(result: SimulationResult) -> str:
    if len(result.frames) < 2:
        return '<p class="none">no utilization data</p>'
    first, last = result.frames[0], result.frames[-1]
    after_label = _after_label(result)
    small = result.nodes <= _PER_NODE
    marks = _marks(result)
    out = []
    drawn: dict[tuple[str, str, str], None] = {}  # (role, plugin, arg) of every mark drawn
    for s in SERIES:
        before, after = first.values.get(s), last.values.get(s, {})
        if not before:
            continue
        shown = marks.get(s, [])
        drawn.update(dict.fromkeys((m.threshold.role, m.threshold.plugin, m.threshold.arg)
                                   for m in shown))
        if small:
            out.append(_node_bars(s, before, after, shown, after_label))
        else:
            out.append(_histogram(s, list(before.values()), list(after.values()), shown,
                                  after_label))
    kind = ("per node" if small else "nodes per band of 10 points; nodes above 100% in the "
            "last band")
    # The legend names only what the plots draw: a policy without thresholds gets no line.
    keys, named = [], set()
    for role, plugin, arg in sorted(drawn, key=lambda k: (k[1], k[0] != "low", k[2])):
        keys.append(f'<span class="line {role}"></span>{role}: '
                    f'{"" if plugin in named else esc(plugin) + " "}{esc(arg)}')
        named.add(plugin)
    legend = (f'<p class="legend">{kind}:<span style="background:{_BEFORE}"></span>before'
              f'<span style="background:{_AFTER}"></span>{esc(after_label)}{"".join(keys)}</p>')
    return f'{legend}<div class="plots">{"".join(out)}</div>'


# Aggregates ---------------------------------------------------------------------------------


def _balance_rows(result: SimulationResult, limits: dict[str, float],
                  not_replaced: str | None = None) -> str:
    """A row per frame, a column per series: standard deviation, maximum and nodes over the
    threshold (percentage points of allocatable)."""
    suffix = " (not replaced)" if result.optimistic else ""
    table = [{b.series: b for b in balance(frame, limits)} for frame in result.frames]
    shown = [s for s in SERIES if any(s in row for row in table)]
    if not shown:
        return '<p class="none">no nodes</p>'

    def cell(b: Balance | None) -> str:
        if b is None:
            return "<td></td>"
        # Lines break between the figures, never inside one.
        over = ("" if b.over is None
                else f" · <span><b>{b.over}</b> over {limits[b.series]:g}%</span>")
        return f"<td><span>std {b.std:.1f}</span> · <span>max {b.max:.1f}%</span>{over}</td>"

    head = "".join(f"<th>{esc(s)}</th>" for s in shown)
    cells = ["".join(cell(row.get(s)) for s in shown) for row in table]
    # Cycles in a row that left the same figures share a row: fourteen equal rows hide what
    # changed (and that nothing did is itself the news).
    rows = [(result.frames[0].label, cells[0])] if cells else []
    i = 1
    while i < len(cells):
        j = i
        while j + 1 < len(cells) and cells[j + 1] == cells[i]:
            j += 1
        label = result.frames[i].label if i == j else f"after cycles {i}–{j}"
        rows.append((label + suffix, cells[i]))
        i = j + 1
    body = "".join(f"<tr><td>{esc(label)}</td>{shown_cells}</tr>" for label, shown_cells in rows)
    banner = (f'<p class="warn" id="not-replaced"><b>Every "after" on this page:</b> '
              f'{esc(not_replaced or whatif.NOT_REPLACED)}.</p>' if suffix else "")
    return (f'{banner}<div class="scroll"><table class="balance"><tr><th>when</th>{head}</tr>'
            f'{body}</table></div>')


def _counts(title: str, counter: Counter[str], limit: int = _TOP_NODES) -> str:
    if not counter:
        return f'<h3>{title}</h3><p class="none">none</p>'
    rows = "".join(f"<tr><td>{esc(k)}</td><td class=n>{n}</td></tr>"
                   for k, n in counter.most_common(limit))
    more = (f'<p class="muted">and {len(counter) - limit} more (search the table of '
            f'evictions)</p>' if len(counter) > limit else "")
    return f"<h3>{title}</h3><table><tr><th></th><th>pods</th></tr>{rows}</table>{more}"


def _spread(by_node: Counter[str], nodes: int) -> str:
    """How many nodes lost 0, 1, 2, ... pods: the shape a top list cannot show."""
    if not by_node:
        return ""
    per = Counter(by_node.values())
    per[0] = nodes - len(by_node)
    rows = "".join(f"<tr><td class=n>{k}</td><td class=n>{per[k]}</td></tr>"
                   for k in sorted(per) if per[k])
    return (f"<h3>nodes by evictions</h3><table><tr><th>pods evicted</th><th>nodes</th></tr>"
            f"{rows}</table>")


def _churn(result: SimulationResult, churn: whatif.Churn, live: bool = False) -> str:
    if not churn:
        if not any(s.evicted for s in result.summaries):
            return '<p class="ok" id="churn">no churn (nothing was evicted)</p>'
        unknown = ("" if result.replaced else f"; {LIVE_UNPLACED if live else UNPLACED}")
        return f'<p class="ok" id="churn">no churn{unknown}</p>'
    items = []
    if churn.back_on_source:
        items.append((len(churn.back_on_source), "replacement(s) placed back on the node their "
                      "pod was evicted from", whatif.REMEDY_BACK))
    if churn.repeated:
        items.append((len(churn.repeated), "workload(s) whose replacement was evicted again",
                      whatif.REMEDY_REPEATED))
    if churn.idle:
        cycles = ", ".join(str(i.cycle) for i in churn.idle)
        items.append((sum(i.evictions for i in churn.idle),
                      f"eviction(s) by a balancing plugin that changed no balance figure "
                      f"(cycle(s) {cycles})", whatif.REMEDY_IDLE))
    lis = "".join(f'<li><b>{n}</b> {esc(what)}. <span class="remedy">Remedy: {esc(fix)}.</span>'
                  f'</li>' for n, what, fix in items)
    tables = ""
    if churn.back_on_source:
        tables += '<h3>Replacements back on their source node</h3><div id="back"></div>'
    if churn.repeated:
        tables += '<h3>Workloads whose replacement was evicted again</h3><div id="repeated"></div>'
    return f'<div class="warn" id="churn"><ul>{lis}</ul></div>{tables}'


def _paced(story: whatif.Story) -> str:
    """The workloads a budget or a limit drained over several cycles: told, not flagged."""
    if not story.paced:
        return ""
    return (f'<h3>Paced, not churn</h3><p id="paced-note"><b>{story.paced_pods:,}</b> of the '
            f'evicted pods, of <b>{len(story.paced):,}</b> workload(s), were evicted in a later '
            f'cycle than one that held their workload back (a budget, a limit, the policy\'s '
            f'moves): {esc(whatif.PACED)}.</p><div id="paced"></div>')


def _groups(result: SimulationResult, limits: dict[str, float]) -> tuple[str, dict[str, Any]]:
    """The "By LABEL" section and its table: per group, each series' mean, max and nodes over
    the threshold, before → after (sorted by the after value)."""
    groups = whatif.group_balance(result)
    if not groups:
        return "", {}
    shown = [s for s in SERIES if any(b.series == s for g in groups for b, _ in g.pairs())]
    columns = [str(result.group_label), "nodes"]
    for s in shown:
        columns += [f"{s} mean %", f"{s} max %"]
        if s in limits:
            columns.append(f"{s} over {limits[s]:g}%")
    rows = []
    for g in groups:
        pairs = {b.series: (b, a) for b, a in g.pairs()}
        row: list[Any] = [g.name, g.nodes]
        for s in shown:
            pair = pairs.get(s)
            if pair is None:
                row += [None] * (3 if s in limits else 2)
                continue
            b, a = pair
            row += [_arrow(b.mean, a.mean), _arrow(b.max, a.max)]
            if s in limits:
                row.append(_arrow(b.over, a.over))
        rows.append(row)
    after = " (not replaced)" if result.optimistic else ""
    body = (f'<h2>By {esc(result.group_label)}</h2><p class="muted">{len(groups)} group(s) of '
            f'nodes by their label {esc(result.group_label)}: before → after{esc(after)}; a '
            f'column sorts by its after value.</p><div id="groups"></div>')
    # 20 rows a page: the section is an aggregate, it must not push the plots' neighbours away.
    return body, {"columns": columns, "rows": rows, "page": 20}


def _arrow(b: float | None, a: float | None) -> list[Any] | None:
    if b is None or a is None:
        return None
    if isinstance(b, int) and isinstance(a, int):
        return [f"{b} → {a}", a]
    return [f"{b:.1f} → {a:.1f}", round(a, 1)]


# Tables -------------------------------------------------------------------------------------


def _node_table(result: SimulationResult, limits: dict[str, float]) -> dict[str, Any]:
    """Numbers stay numbers (sorting): a before and an after column per series."""
    if not result.frames:
        return {"columns": ["node"], "rows": []}
    first, last = result.frames[0], result.frames[-1]
    after = "after (not replaced)" if result.optimistic else "after"
    shown = [s for s in SERIES if first.values.get(s)]
    label = result.group_label
    columns = ["node", *([label] if label is not None else [])]
    over: list[float | None] = [None] * len(columns)
    for s in shown:
        columns += [f"{s} % before", f"{s} % {after}"]
        over += [limits.get(s)] * 2
    rows = []
    for name in sorted(first.values["cpu requests"]):
        row: list[Any] = [name]
        if label is not None:
            row.append(result.groups.get(name) or "(no label)")
        for s in shown:
            row += [_round(first.values[s].get(name)), _round(last.values[s].get(name))]
        rows.append(row)
    decimals = [None] * (len(columns) - 2 * len(shown)) + [1] * (2 * len(shown))
    return {"columns": columns, "rows": rows, "decimals": decimals, "over": over}


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


def _tables(result: SimulationResult, evictions: list[Decision], refusals: list[Decision],
            churn: whatif.Churn, story: whatif.Story,
            limits: dict[str, float]) -> dict[str, dict[str, Any]]:
    log = result.log
    back = {b.replacement for b in churn.back_on_source}
    return {
        "back": {"columns": ["cycle", "replacement", "replaces", "node"], "rows": [
            [b.cycle, b.replacement, b.replaces, b.node] for b in churn.back_on_source]},
        "repeated": {"columns": ["workload", "cycles", "evictions",
                                 "replacements evicted again"], "rows": [
            [r.workload, ", ".join(str(c) for c in r.cycles), r.evictions,
             ", ".join(r.replacements)] for r in churn.repeated]},
        "paced": {"columns": ["workload", "held back by", "cycles", "pods evicted after"],
                  "rows": [[p.workload, ", ".join(p.by), ", ".join(str(c) for c in p.cycles),
                            p.pods] for p in story.paced], "page": 10},
        "evictions": {"columns": ["cycle", "pod", "node", "plugin", "reason"], "rows": [
            [d.cycle, f"{d.namespace}/{d.pod}", d.node, f"{d.profile}/{d.plugin}", d.reason]
            for d in evictions]},
        "refusals": {"columns": ["cycle", "outcome", "pod", "node", "plugin", "reason"],
                     "rows": [[d.cycle, d.outcome, f"{d.namespace}/{d.pod}", d.node,
                               f"{d.profile}/{d.plugin}", d.reason] for d in refusals]},
        "notes": {"columns": ["cycle", "node", "plugin", "note"], "rows": [
            [n.cycle, n.node or "(run)", f"{n.profile}/{n.plugin}", n.text] for n in log.notes]},
        "placements": {"columns": ["cycle", "replacement", "replaces", "node",
                                   "back on source node"], "rows": [
            [s.cycle, key, s.replaces.get(key, ""), node or "pending: no node fits",
             "yes" if key in back else ""]
            for s in result.summaries for key, node in s.placements]},
        "kept": {"columns": ["cycle", "pods", "plugin", "reason"], "rows": [
            [cycle, n, f"{profile}/{plugin}", reason]
            for (cycle, profile, plugin, reason), n in sorted(log.kept.items())]},
        "nodes": _node_table(result, limits),
    }


def _move_tables(result: SimulationResult,
                 evictions: list[Decision]) -> dict[str, dict[str, Any]]:
    """With `moves`: each move with its mode, the restarts, the deferrals."""
    log = result.log
    return {
        "evictions": {"columns": ["cycle", "mode", "pod", "node", "plugin", "reason"], "rows": [
            [d.cycle, "restart" if d.outcome == "restarted" else "evict",
             f"{d.namespace}/{d.pod}", d.node, f"{d.profile}/{d.plugin}", d.reason]
            for d in evictions]},
        "restarts": {"columns": ["cycle", "deployment", "pods", "plugin", "restart"], "rows": [
            [r.cycle, f"{r.namespace}/{r.name}", len(r.pods), f"{r.profile}/{r.plugin}",
             r.reason] for r in log.restarts]},
        "deferred": {"columns": ["cycle", "pod", "node", "plugin", "reason"], "rows": [
            [d.cycle, f"{d.namespace}/{d.pod}", d.node, f"{d.profile}/{d.plugin}", d.reason]
            for d in log.of_outcome("deferred")]},
    }


# What a card's figure counts, where its label alone is too short to say it (a tooltip).
_CARD_TITLES = {
    "refused": "pods whose every eviction a budget, a limit or an error refused: still on their "
               "node (one pod once, however many cycles tried it)",
    "paced": "evicted pods whose workload a budget or a limit held back in an earlier cycle: "
             "the drain paced over cycles, not churn",
    "kept": "pods a plugin considered and did not evict (its filters, its criteria), each once",
}


def _cards(items: Iterable[tuple[int, str, bool]]) -> str:
    out = []
    for value, label, warn in items:
        title = _CARD_TITLES.get(label.split(" (")[0])
        hover = f' title="{esc(title)}"' if title else ""
        out.append(f'<div class="card{" warn" if warn else ""}"{hover}><b>{value:,}</b>'
                   f'{esc(label)}</div>')
    return "".join(out)


def render_html(result: SimulationResult) -> str:
    title = f"desched simulation: {result.policy.path}"
    intro = (f'<p class="muted">snapshot {esc(", ".join(result.snapshot_files))} · clock\n'
             f'{esc(result.clock.describe())} · policy format {esc(result.policy.format)} · tables '
             f'sort by a\nclick on a column header; #sort=TABLE:COLUMN:desc in the address sorts '
             f'at load</p>\n')
    body, tables = report_body(result)
    return html_page(title, f"<h1>{esc(title)}</h1>\n{intro}{body}", tables)


def report_body(result: SimulationResult, id_prefix: str = "",
                live: bool = False) -> tuple[str, dict[str, Any]]:
    """The report below its title: the HTML, and the tables the page's script builds (by the
    id of the element each fills). `id_prefix` prefixes every id, so that several reports
    share one page (`desched run`'s /cycles) and one script. `live`: the report of one cycle
    of `desched run`, whose replacements the cluster's scheduler places where this report
    does not see (no placements, no cycle count, the "after" worded for that)."""
    log = result.log
    moves = result.policy.plans_moves
    evictions = [d for d in log.decisions if d.outcome in EVICTED_OUTCOMES
                 and (moves or d.outcome != "restarted")]
    refusals = [d for d in log.decisions if d.outcome in REFUSED_OUTCOMES]
    limits = thresholds(result.policy)
    churn = whatif.churn(result)
    story = whatif.story(result)
    flagged = len(churn.flagged)
    placed = sum(len(s.placements) for s in result.summaries)
    restarted = sum(1 for d in evictions if d.outcome == "restarted")
    # With `moves`: the pods restarts moved, the restarts and the deferrals (docs/moves.md).
    move_cards = [(len(evictions) - restarted, "evicted", False),
                  (restarted, f"moved by {len(log.restarts)} restart(s)", False),
                  (len(log.of_outcome("deferred")), "deferred", False)] if moves else [
        (len(evictions), "evicted", False)]
    cards = _cards(card for card in (
        (result.nodes, "nodes", False), (result.pods, "pods", False),
        (result.cycles, "cycle(s)", False), *move_cards,
        (story.refused_pods, "refused" + (f" ({story.refused_attempts:,} attempts)"
                                          if story.refused_attempts else ""), False),
        (story.paced_pods, "paced", False),
        (story.kept, "kept", False), (placed, "replacements placed", False),
        (flagged, "flagged as churn", flagged > 0))
        if not live or card[1] not in ("cycle(s)", "replacements placed"))
    group_section, group_table = _groups(result, limits)
    tables = _tables(result, evictions, refusals, churn, story, limits)
    if moves:
        tables.update(_move_tables(result, evictions))
    if group_table:
        tables["groups"] = group_table
    sections = [
        ("Evictions" if not moves else "Moves: evictions and restarts",
         '<div id="evictions"></div>'),
        *([("Restarts", '<div id="restarts"></div>'),
           ("Deferred moves", '<div id="deferred"></div>')] if moves else []),
        ("Refused evictions", '<div id="refusals"></div>'),
        ("Notes: why plugins did what they did", '<div id="notes"></div>'),
        *([] if live else [("Replacements placed", '<div id="placements"></div>')]),
        ("Kept pods per cycle", '<div id="kept"></div>'),
        ("Every node", '<div id="nodes"></div>'),
    ]
    details = "".join(f"<details{' open' if i < 2 else ''}><summary><h2 style=display:inline>"
                      f"{name}</h2></summary>{body}</details>"
                      for i, (name, body) in enumerate(sections))
    by_plugin = Counter(f"{d.profile}/{d.plugin}" for d in evictions)
    by_node = Counter(d.node for d in evictions)
    # What the snapshot lacks and the selectors that match nothing: read before the figures.
    warnings = ("" if not result.warnings else
                '<div class="warn" id="warnings"><b>Warnings</b><ul>'
                + "".join(f"<li>{esc(line)}</li>" for line in result.warnings) + "</ul></div>")
    body = f"""{warnings}<div class="cards">{cards}</div>
<h2>Churn</h2>{_churn(result, churn, live)}{_paced(story)}
<h2>Balance per cycle</h2>{_balance_rows(result, limits, LIVE_NOT_REPLACED if live else None)}
<h2>Utilization before and after</h2>{_plots(result)}
{group_section}
<h2>Evictions by plugin and by node</h2>
<div class="plots"><div>{_counts("by plugin", by_plugin)}</div>
<div>{_counts(f"by node (top {_TOP_NODES})", by_node)}</div>
<div>{_spread(by_node, result.nodes)}</div></div>
{details}
"""
    if id_prefix:
        # Every string in the body is escaped ('"' included), so `id="` is only ever ours.
        body = _ID.sub(lambda m: f'id="{id_prefix}{m.group(1)}"', body)
        tables = {f"{id_prefix}{name}": spec for name, spec in tables.items()}
    return body, tables


_ID = re.compile(r'(?<=\s)id="([^"]*)"')


def table_data(tables: dict[str, Any]) -> str:
    """The tables as the members of a JSON object ("id":{...},...), as html_page embeds them:
    several reports' members joined by "," make one page's data, each serialised on its own."""
    # Embedded in a script element: no "<" at all, so no tag can end or open inside it.
    return json.dumps(tables, separators=(",", ":"))[1:-1].replace("<", "\\u003c")


def html_page(title: str, body: str, tables: dict[str, Any] | str, head: str = "") -> str:
    """One self-contained page: the style, `body`, the tables' data (or their table_data) and
    the script that builds them. `head`: more for the page's <head> (a page's own style)."""
    members = tables if isinstance(tables, str) else table_data(tables)
    data = '{"tables":{' + members + "}}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>{_STYLE}</style>{head}</head>
<body>{body}<script type="application/json" id="report-data">{data}</script>
<script>{SCRIPT}</script>
</body></html>
"""
