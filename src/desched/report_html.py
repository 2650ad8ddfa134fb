"""`simulate --output html`: one self-contained page (no network) that stays readable and fast
at 5,000 nodes: aggregates first (summary, balance per cycle, utilization histograms before and
after as inline SVG, evictions by plugin and node), details on demand (searchable, paged tables
built by a small script from the data embedded in the page)."""

from __future__ import annotations

import html
import json
from collections import Counter
from typing import Any

from desched.framework.decisions import EVICTED_OUTCOMES, REFUSED_OUTCOMES, Decision
from desched.simulation import SimulationResult
from desched.utilization import SERIES, Balance, Frame, balance, thresholds

_BUCKETS = 10  # histogram buckets of 10 percentage points; the last holds 90% and above
_W, _H, _PAD = 360, 150, 24

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
.cards{display:flex;gap:1em;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:6px;
padding:.6em 1em;min-width:9em}.card b{display:block;font-size:1.5em}
table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:left;font-size:.92em;vertical-align:top}th{background:#f4f4f4}
td.n{text-align:right}.plots{display:flex;flex-wrap:wrap;gap:1em}
figure{margin:0}figcaption{font-size:.9em;text-align:center}
.none{color:#777;font-style:italic}input{padding:4px;width:22em}
.pager button{margin:0 .3em}.legend span{display:inline-block;width:.8em;height:.8em;
margin:0 .3em 0 1em}.muted{color:#666;font-size:.9em}
"""

_SCRIPT = """
(function(){
const data = JSON.parse(document.getElementById('report-data').textContent);
function esc(s){return String(s).replace(/[&<>"']/g, c => ({'&':'&amp;','<':'&lt;',
  '>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));}
function table(id, rows, cols){
  const root = document.getElementById(id); if(!root) return;
  if(!rows.length){root.innerHTML = '<p class="none">none</p>'; return;}
  const state = {q:'', page:0}; const size = 100;
  root.innerHTML = '<input type="search" placeholder="search ' + rows.length +
    ' rows"><table><thead><tr>' + cols.map(c => '<th>' + esc(c) + '</th>').join('') +
    '</tr></thead><tbody></tbody></table><div class="pager"></div>';
  const body = root.querySelector('tbody'), pager = root.querySelector('.pager');
  function draw(){
    const q = state.q.toLowerCase();
    const hits = q ? rows.filter(r => r.join(' ').toLowerCase().includes(q)) : rows;
    const pages = Math.max(1, Math.ceil(hits.length / size));
    state.page = Math.min(state.page, pages - 1);
    body.innerHTML = hits.slice(state.page * size, (state.page + 1) * size).map(r =>
      '<tr>' + r.map(v => '<td>' + esc(v) + '</td>').join('') + '</tr>').join('');
    pager.innerHTML = hits.length + ' row(s)' + (pages > 1 ? ' · page ' + (state.page + 1) +
      ' of ' + pages + ' <button data-d="-1">previous</button><button data-d="1">next</button>'
      : '');
  }
  root.querySelector('input').addEventListener('input', e => {state.q = e.target.value;
    state.page = 0; draw();});
  pager.addEventListener('click', e => {const d = e.target.dataset.d;
    if(d){state.page = Math.max(0, state.page + Number(d)); draw();}});
  draw();
}
for(const [id, spec] of Object.entries(data.tables)) table(id, spec.rows, spec.columns);
document.body.dataset.ready = '1';
})();
"""


def _histogram(values: list[float]) -> list[int]:
    counts = [0] * _BUCKETS
    for v in values:
        counts[min(_BUCKETS - 1, max(0, int(v // 10)))] += 1
    return counts


def _svg(series: str, before: list[float], after: list[float]) -> str:
    """Grouped bars: how many nodes sit in each 10-point utilization band, before and after."""
    hb, ha = _histogram(before), _histogram(after)
    top = max(max(hb), max(ha), 1)
    band = (_W - 2 * _PAD) / _BUCKETS
    bars = []
    for i in range(_BUCKETS):
        for j, (counts, color) in enumerate(((hb, "#9bb7d4"), (ha, "#2b6cb0"))):
            h = (_H - 2 * _PAD) * counts[i] / top
            x = _PAD + i * band + 2 + j * (band - 4) / 2
            y = _H - _PAD - h
            bars.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{(band - 4) / 2:.1f}" '
                        f'height="{h:.1f}" fill="{color}"><title>{"before" if j == 0 else "after"}'
                        f': {counts[i]} node(s) at {i * 10}-{i * 10 + 10}%</title></rect>')
    ticks = "".join(f'<text x="{_PAD + i * band:.1f}" y="{_H - 6}" font-size="9">{i * 10}'
                    f'</text>' for i in range(0, _BUCKETS, 2))
    return (f'<figure><svg width="{_W}" height="{_H}" role="img" aria-label="{series}">'
            f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" '
            f'stroke="#999"/>{"".join(bars)}{ticks}<text x="{_PAD}" y="12" font-size="10">'
            f'{top} node(s)</text></svg><figcaption>{html.escape(series)} (% of allocatable)'
            f'</figcaption></figure>')


def _balance_rows(frames: list[Frame], limits: dict[str, float]) -> str:
    """A row per frame, a column per series: standard deviation, maximum and nodes over the
    threshold (percentage points of allocatable)."""
    table = [(frame.label, {b.series: b for b in balance(frame, limits)}) for frame in frames]
    shown = [s for s in SERIES if any(s in row for _, row in table)]
    if not shown:
        return '<p class="none">no nodes</p>'

    def cell(b: Balance | None) -> str:
        if b is None:
            return "<td></td>"
        over = "" if b.over is None else f" · <b>{b.over}</b> over {limits[b.series]:g}%"
        return f"<td>std {b.std:.1f} · max {b.max:.1f}%{over}</td>"

    head = "".join(f"<th>{html.escape(s)}</th>" for s in shown)
    rows = "".join(f"<tr><td>{html.escape(label)}</td>{''.join(cell(row.get(s)) for s in shown)}"
                   f"</tr>" for label, row in table)
    return f"<table><tr><th>when</th>{head}</tr>{rows}</table>"


def _counts(title: str, counter: Counter[str], limit: int = 15) -> str:
    if not counter:
        return f'<h3>{title}</h3><p class="none">none</p>'
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td class=n>{n}</td></tr>"
                   for k, n in counter.most_common(limit))
    more = (f'<p class="muted">and {len(counter) - limit} more (search the table of '
            f'evictions)</p>' if len(counter) > limit else "")
    return f"<h3>{title}</h3><table><tr><th></th><th>pods</th></tr>{rows}</table>{more}"


def _tables(result: SimulationResult, evictions: list[Decision],
            refusals: list[Decision]) -> dict[str, dict[str, Any]]:
    log = result.log
    first, last = (result.frames[0], result.frames[-1]) if result.frames else (None, None)
    node_rows = []
    if first is not None and last is not None:
        names = sorted(first.values["cpu requests"])
        shown = [s for s in SERIES if first.values.get(s)]
        for name in names:
            row: list[Any] = [name]
            for s in shown:
                b, a = first.values[s].get(name), last.values[s].get(name)
                row.append("" if b is None else f"{b:.1f} → {a if a is None else round(a, 1)}")
            node_rows.append(row)
        node_columns = ["node", *(f"{s} % (before → after)" for s in shown)]
    else:
        node_columns = ["node"]
    return {
        "evictions": {"columns": ["cycle", "pod", "node", "plugin", "reason"], "rows": [
            [d.cycle, f"{d.namespace}/{d.pod}", d.node, f"{d.profile}/{d.plugin}", d.reason]
            for d in evictions]},
        "refusals": {"columns": ["cycle", "outcome", "pod", "node", "plugin", "reason"],
                     "rows": [[d.cycle, d.outcome, f"{d.namespace}/{d.pod}", d.node,
                               f"{d.profile}/{d.plugin}", d.reason] for d in refusals]},
        "notes": {"columns": ["cycle", "node", "plugin", "note"], "rows": [
            [n.cycle, n.node or "(run)", f"{n.profile}/{n.plugin}", n.text] for n in log.notes]},
        "placements": {"columns": ["cycle", "replacement", "node"], "rows": [
            [s.cycle, key, node or "pending: no node fits"] for s in result.summaries
            for key, node in s.placements]},
        "kept": {"columns": ["cycle", "pods", "plugin", "reason"], "rows": [
            [cycle, n, f"{profile}/{plugin}", reason]
            for (cycle, profile, plugin, reason), n in sorted(log.kept.items())]},
        "nodes": {"columns": node_columns, "rows": node_rows},
    }


def render_html(result: SimulationResult) -> str:
    evictions = [d for d in result.log.decisions if d.outcome in EVICTED_OUTCOMES]
    refusals = [d for d in result.log.decisions if d.outcome in REFUSED_OUTCOMES]
    limits = thresholds(result.policy)
    plots = ""
    if len(result.frames) >= 2:
        first, last = result.frames[0], result.frames[-1]
        plots = "".join(_svg(s, list(first.values[s].values()), list(last.values[s].values()))
                        for s in SERIES if first.values.get(s))
    placed = sum(len(s.placements) for s in result.summaries)
    cards = "".join(f'<div class="card"><b>{value}</b>{label}</div>' for value, label in (
        (result.nodes, "nodes"), (result.pods, "pods"), (result.cycles, "cycle(s)"),
        (len(evictions), "evicted"), (len(refusals), "refused"), (placed, "replacements placed")))
    data = json.dumps({"tables": _tables(result, evictions, refusals)}, separators=(",", ":"))
    # Embedded in a script element: no "<" at all, so no tag can end or open inside it.
    data = data.replace("<", "\\u003c")
    title = html.escape(f"desched simulation: {result.policy.path}")
    sections = [
        ("Evictions", '<div id="evictions"></div>'),
        ("Refused evictions", '<div id="refusals"></div>'),
        ("Notes: why plugins did what they did", '<div id="notes"></div>'),
        ("Replacements placed", '<div id="placements"></div>'),
        ("Kept pods per cycle", '<div id="kept"></div>'),
        ("Every node", '<div id="nodes"></div>'),
    ]
    details = "".join(f"<details{' open' if i < 2 else ''}><summary><h2 style=display:inline>"
                      f"{name}</h2></summary>{body}</details>"
                      for i, (name, body) in enumerate(sections))
    by_plugin = Counter(f"{d.profile}/{d.plugin}" for d in evictions)
    by_node = Counter(d.node for d in evictions)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{_STYLE}</style></head>
<body><h1>{title}</h1>
<p class="muted">snapshot {html.escape(", ".join(result.snapshot_files))} · clock
{html.escape(result.clock.describe())} · policy format {html.escape(result.policy.format)}</p>
<div class="cards">{cards}</div>
<h2>Balance per cycle</h2>{_balance_rows(result.frames, limits)}
<h2>Utilization before and after</h2>
<p class="legend">nodes per band of utilization:<span style="background:#9bb7d4"></span>before
<span style="background:#2b6cb0"></span>after the last cycle</p>
<div class="plots">{plots or '<p class="none">no utilization data</p>'}</div>
<h2>Evictions by plugin and by node</h2>
<div class="plots"><div>{_counts("by plugin", by_plugin)}</div>
<div>{_counts("by node", by_node)}</div></div>
{details}
<script type="application/json" id="report-data">{data}</script>
<script>{_SCRIPT}</script>
</body></html>
"""
