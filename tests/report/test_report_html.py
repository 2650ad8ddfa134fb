"""The HTML report, rendered by a real browser (Debian's chromium, headless): the page's
script builds its tables without an error, the plots are there, and a screenshot is taken."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml

from desched.simulate.whatif import NOT_REPLACED

pytestmark = pytest.mark.browser

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "lownodeload-hotspot"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def render(policy: Path, snapshot: Path, out: Path, *args: str) -> Path:
    """`desched simulate -o html --out OUT`, which must succeed."""
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "simulate", "--policy", str(policy), "--snapshot",
         str(snapshot), "--output", "html", "--out", str(out), *args],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render(EXAMPLES / "policy.yaml", EXAMPLES / "cluster.yaml",
                  tmp_path_factory.mktemp("report") / "report.html", "--cycles", "14",
                  "--reschedule")


def browser(page: Path, *args: str, fragment: str = "") -> subprocess.CompletedProcess[str]:
    assert CHROMIUM, "chromium is not installed: scripts/test installs Debian's package"
    profile = page.parent / "profile"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args,
                           page.as_uri() + fragment], capture_output=True, text=True,
                          timeout=120, check=False)


def dom(page: Path, fragment: str = "") -> str:
    """The page as the browser built it (its script run)."""
    proc = browser(page, "--virtual-time-budget=5000", "--dump-dom", fragment=fragment)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'data-ready="1"' in proc.stdout, "the page's script did not finish"
    return proc.stdout


def test_the_page_is_self_contained(page: Path) -> None:
    text = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", text)
    assert "<svg" in text and "report-data" in text


def test_the_browser_builds_every_table(page: Path) -> None:
    proc = browser(page, "--virtual-time-budget=5000", "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert 'data-ready="1"' in dom, "the page's script did not finish"
    evictions = dom[dom.index('id="evictions"'):dom.index('id="refusals"')]
    # The ping-pong: the same workload evicted in cycles 6 and 12, both rows present.
    assert len(re.findall(r'<tr><td class="n">(6|12)</td><td>default/stress-demo', evictions)) == 2
    assert "2 row(s)" in evictions
    assert dom.count("<svg") == 5  # cpu/memory requests, pods, cpu/memory usage
    notes = dom[dom.index('id="notes"'):dom.index('id="placements"')]
    assert "consecutive pass(es)" in notes


def test_a_screenshot_shows_the_page(page: Path) -> None:
    shot = page.parent / "report.png"
    proc = browser(page, "--window-size=1200,1250", f"--screenshot={shot}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # a rendered page, not a blank one


def test_names_cannot_break_out_of_the_page(tmp_path: Path) -> None:
    """A pod name is whatever the snapshot holds: it stays text, in the tables and the data."""
    hostile = "x</script><script>alert(1)</script><b>"
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
         "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}
        for i in (1, 2)] + [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": hostile, "namespace": "default", "uid": "u1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "rs",
                                 "controller": True}]},
         "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
         "status": {"phase": "Running"}}]}))
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n"
                      "- name: p\n  pluginConfig:\n  - name: PodLifeTime\n"
                      "    args: {maxPodLifeTimeSeconds: 60}\n"
                      "  plugins:\n    deschedule: {enabled: [PodLifeTime]}\n")
    out = render(policy, cluster, tmp_path / "report.html", "--now", "2026-11-22T12:00:00Z")
    text = out.read_text()
    assert text.count("<script") == 2  # the data and the page's own script
    assert "alert(1)" in text  # kept as data...
    dom = browser(out, "--virtual-time-budget=5000", "--dump-dom").stdout
    assert 'data-ready="1"' in dom
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in dom  # ...and shown as text


# Generated clusters: 4-cpu nodes whose pods request the given percent of cpu (a node over 100 %
# holds four pods, so LowNodeUtilization can move some), alternating between pools a and b.
OVERCOMMITTED = [403.0, 95.0, 9.0] + [10.0 + (i * 7) % 70 for i in range(3, 40)]
LOW_NODE_UTILIZATION = (
    "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n"
    "  pluginConfig:\n  - name: LowNodeUtilization\n"
    "    args: {thresholds: {cpu: 20}, targetThresholds: {cpu: 50}}\n"
    "  plugins:\n    balance: {enabled: [LowNodeUtilization]}\n")


def cluster(percents: list[float]) -> dict[str, object]:
    items: list[dict[str, object]] = []
    for i, percent in enumerate(percents):
        name = f"n{i:02d}"
        items.append({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"kubernetes.io/hostname": name, "pool": "ab"[i % 2]}},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}})
        shares = 4 if percent > 100 else 1
        items += [{"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"w-{name}-{k}", "namespace": "default", "uid": f"u-{name}-{k}",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": f"rs-{name}", "uid": f"rs-{name}", "controller": True}]},
            "spec": {"nodeName": name, "containers": [{"name": "c", "image": "i", "resources": {
                "requests": {"cpu": f"{round(percent * 40 / shares)}m", "memory": "1Gi"}}}]},
            "status": {"phase": "Running"}} for k in range(shares)]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def simulate(where: Path, percents: list[float], *args: str) -> Path:
    """`desched simulate -o html` of LowNodeUtilization (cpu 20 → 50 %) over a generated
    cluster, without --reschedule unless `args` say so."""
    (where / "cluster.json").write_text(json.dumps(cluster(percents)))
    (where / "policy.yaml").write_text(LOW_NODE_UTILIZATION)
    return render(where / "policy.yaml", where / "cluster.json", where / "report.html",
                  "--now", "2026-11-22T12:00:00Z", *args)


@pytest.fixture(scope="module")
def overcommitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 nodes (a histogram), n00 at 403 % of its cpu, evictions not replaced, by pool."""
    return simulate(tmp_path_factory.mktemp("overcommitted"), OVERCOMMITTED, "--group-by", "pool")


def between(text: str, start: str, end: str) -> str:
    at = text.index(start)
    return text[at:text.index(end, at)]


def rows(section: str) -> list[list[str]]:
    """The cells of a built table's body rows."""
    body = between(section, "<tbody>", "</tbody>")
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>.*?</tr>", body)]


def svg(text: str, series: str) -> str:
    return between(text, f'aria-label="{series}"', "</svg>")


def test_churn_is_flagged_with_its_remedies(page: Path) -> None:
    """The hotspot example's ping-pong: the replacement lands back on the node its pod left,
    twice, and the same workload is evicted in cycles 6 and 12."""
    text = dom(page)
    box = between(text, 'id="churn"', "</div>")
    assert 'class="warn"' in text[text.index('id="churn"') - 30:text.index('id="churn"')]
    assert ("<b>2</b> replacement(s) placed back on the node their pod was evicted from" in box)
    assert "<b>1</b> workload(s) whose replacement was evicted again" in box
    assert "Remedy: enable PingPongGuard" in box
    assert re.search(r'class="card warn"><b>2</b>flagged as churn', text)
    back = rows(between(text, 'id="back"', 'class="pager"'))
    assert [r[0] for r in back] == ["6", "12"]
    assert all(r[3] == "cn-beijing.10.0.0.53" for r in back)
    repeated = rows(between(text, 'id="repeated"', 'class="pager"'))
    assert repeated == [["Deployment default/stress-demo", "6, 12", "2",
                         "default/stress-demo-588f9646cf-s7x2k-r6"]]
    # Churn comes before the figures it qualifies.
    assert text.index('id="churn"') < text.index("Balance per cycle")


def test_placements_name_the_pod_replaced_and_flag_back_on_source(page: Path) -> None:
    text = dom(page)
    placements = between(text, 'id="placements"', 'class="pager"')
    assert ">replaces<" in placements and ">back on source node<" in placements
    placed = rows(placements)
    assert placed[0][2] == "default/stress-demo-588f9646cf-s7x2k"
    assert [r[4] for r in placed] == ["yes", "yes"]


def test_an_after_without_reschedule_says_not_replaced(overcommitted: Path,
                                                        page: Path) -> None:
    text = dom(overcommitted)
    banner = between(text, 'id="not-replaced"', "</p>")
    assert html.escape(NOT_REPLACED) in banner
    assert text.index('id="not-replaced"') < text.index("<td>before</td>")
    assert "<td>after cycle 1 (not replaced)</td>" in text  # the balance table
    assert "</span>after the last cycle (not replaced)<span" in text  # the plots' legend
    assert ">cpu requests % after (not replaced)<" in text  # the node table
    assert "(not replaced)" not in dom(page)  # --reschedule placed the replacements


def test_the_histogram_has_an_overflow_band_and_the_threshold(overcommitted: Path) -> None:
    cpu = svg(overcommitted.read_text(), "cpu requests")
    # 403 % is not "90-100 %": that band holds the node at 95 % only.
    assert "before: 1 node(s) at 90–100%" in cpu
    assert "before: 1 node(s) at above 100% (up to 403%)" in cpu
    assert 'class="overflow"' in cpu and "&gt;100</text>" in cpu and "max 403</text>" in cpu
    assert 'class="threshold"' in cpu and ">high 50%</text>" in cpu and ">low 20%</text>" in cpu
    memory = svg(overcommitted.read_text(), "memory requests")
    assert 'class="overflow"' not in memory and 'class="threshold"' not in memory
    text = dom(overcommitted)
    assert text.count("<svg") == 3  # cpu and memory requests, pods: no usage measured


def test_a_small_cluster_gets_a_bar_pair_per_node(tmp_path: Path) -> None:
    text = dom(simulate(tmp_path, [403.0, 95.0, 9.0]))
    cpu = svg(text, "cpu requests")
    for name in ("n00", "n01", "n02"):
        assert f"<title>{name}</title>{name}</text>" in cpu
    assert "n00 before: 403.0%" in cpu and "n02 before: 9.0%" in cpu
    assert ">500</text>" in cpu  # the scale reaches the largest value
    assert 'class="threshold"' in cpu and "node(s) at" not in cpu
    assert '<p class="ok" id="churn">no churn' in text


def test_evictions_by_node_show_the_top_and_the_distribution(tmp_path: Path) -> None:
    """60 overcommitted nodes of 600: the top 15 and how many nodes lost 0, 1, 2, ... pods."""
    percents = [403.0 if i % 10 == 0 else 5.0 + i % 10 for i in range(600)]
    text = dom(simulate(tmp_path, percents))
    top = between(text, "<h3>by node (top 15)</h3>", "</table>")
    assert top.count("<tr>") == 16  # header and 15 nodes
    spread = rows("<tbody>" + between(text, "<h3>nodes by evictions</h3>", "</table>")
                  .split("</tr>", 1)[1] + "</tbody>")
    counts = {int(k): int(n) for k, n in spread}
    assert sum(counts.values()) == 600 and counts[0] >= 540
    evicted = 600 - counts[0]
    assert evicted > 15 and f"and {evicted - 15} more" in text


def test_a_fragment_sorts_a_table_numerically(overcommitted: Path) -> None:
    """#sort=TABLE:COLUMN:DIR sorts at load: numbers as numbers (a string sort puts 95 before
    9 before 403), the column marked."""
    column = "cpu requests % before"
    text = dom(overcommitted, "#sort=" + quote(f"nodes:{column}:desc"))
    nodes = between(text, 'id="nodes"', 'class="pager"')
    assert re.search(rf'aria-sort="descending"[^>]*>{re.escape(column)}'
                     r'<span class="arrow">&nbsp;▼</span>', nodes)
    values = [float(r[2]) for r in rows(nodes)]
    assert values[:2] == [403.0, 95.0] and values[-1] == 9.0
    assert values == sorted(values, reverse=True)
    ascending = dom(overcommitted, "#sort=" + quote(f"nodes:{column}:asc"))
    values = [float(r[2]) for r in rows(between(ascending, 'id="nodes"', 'class="pager"'))]
    assert values[0] == 9.0 and values[-1] == 403.0


def test_group_by_gives_a_section_and_a_node_column(overcommitted: Path) -> None:
    text = dom(overcommitted, "#sort=nodes:pool:desc")
    assert "<h2>By pool</h2>" in text
    groups = rows(between(text, 'id="groups"', 'class="pager"'))
    assert [(g[0], g[1]) for g in groups] == [("a", "20"), ("b", "20")]
    assert groups[0][3] == "403.0 → 100.8"  # pool a's cpu requests max, before → after
    nodes = rows(between(text, 'id="nodes"', 'class="pager"'))
    assert [r[1] for r in nodes[:20]] == ["b"] * 20 and nodes[0][0] == "n01"


def test_5000_nodes_stay_small_and_paged(tmp_path: Path) -> None:
    """Self-contained and light at 5,000 nodes: aggregates in SVG, the node table's rows paged
    100 at a time, sorted by the fragment over all of them."""
    percents = [403.0 if i % 100 == 0 else 10.0 + (i * 7) % 70 for i in range(5000)]
    page = simulate(tmp_path, percents, "--group-by", "pool")
    assert page.stat().st_size < 1_000_000
    text = dom(page, "#sort=" + quote("nodes:cpu requests % before:desc"))
    nodes = between(text, 'id="nodes"', "</div></details>")
    assert "5000 row(s) · page 1 of 50" in nodes
    shown = rows(nodes)
    assert len(shown) == 100
    assert [r[2] for r in shown[49:51]] == ["403.0", "73.0"]  # every 100th node is at 403 %


def test_warnings_come_first_on_the_page(tmp_path: Path) -> None:
    """What the snapshot lacks and what matches nothing is read before the figures: a
    namespace include naming no namespace is on the page, above the cards."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n"
                      "- name: p\n  pluginConfig:\n  - name: RemoveDuplicates\n"
                      "    args: {namespaces: {include: [shopp]}}\n"
                      "  plugins: {balance: {enabled: [RemoveDuplicates]}}\n")
    out = render(policy, EXAMPLES.parent / "cluster.yaml", tmp_path / "report.html")
    dom = browser(out, "--virtual-time-budget=5000", "--dump-dom").stdout
    assert 'data-ready="1"' in dom
    box = dom[dom.index('id="warnings"'):dom.index('class="cards"')]
    assert "namespaces.include names" in box and "shopp" in box


def test_per_node_bars_tell_long_similar_names_apart() -> None:
    """EC2- and GKE-style names share long starts and ends: the bars' labels drop what all
    share, not what tells them apart."""
    from desched.report.html import bar_labels

    ec2 = ["ip-10-0-1-17.ec2.internal", "ip-10-0-1-18.ec2.internal",
           "ip-10-0-2-117.ec2.internal"]
    gke = ["gke-prod-default-pool-1a2b3c4d-x7k2", "gke-prod-default-pool-1a2b3c4d-q9z1"]
    for names in (ec2, gke):
        labels = bar_labels(names)
        assert len(set(labels.values())) == len(names)
        assert all(len(label) <= 22 for label in labels.values())
    assert bar_labels(ec2)["ip-10-0-1-17.ec2.internal"] == "ip-10-0-1-17…"


# Every text of every plot and every threshold line, as the browser lays them out (getBBox).
MEASURE = """<script>
const found = [];
document.querySelectorAll('svg').forEach((svg, plot) => {
  svg.querySelectorAll('text').forEach(t => { const b = t.getBBox();
    found.push({plot, kind: 'text', text: t.textContent,
                threshold: !!t.closest('g.threshold'), size: getComputedStyle(t).fontSize,
                // Drawn over every threshold's line with a white halo: legible where one runs.
                halo: t.getAttribute('paint-order') === 'stroke'
                      && t.getAttribute('stroke') === '#fff'
                      && [...svg.querySelectorAll('g.threshold')].every(g =>
                           g.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING),
                x: b.x, y: b.y, w: b.width, h: b.height}); });
  svg.querySelectorAll('g.threshold').forEach((g, mark) => g.querySelectorAll('line')
    .forEach(l => found.push({plot, kind: 'line', mark, label: g.querySelector('text')
      .textContent, x: +l.getAttribute('x1'), y0: +l.getAttribute('y1'),
      y1: +l.getAttribute('y2')})));
});
const pre = document.createElement('pre'); pre.id = 'measured';
pre.textContent = JSON.stringify(found); document.body.appendChild(pre);
</script>"""


def measured(page: Path) -> list[dict[str, Any]]:
    """The plots' texts (their boxes) and threshold lines as the browser drew them."""
    copy = page.with_name(page.stem + "-measured.html")
    copy.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    text = dom(copy)
    start = '<pre id="measured">'
    found: list[dict[str, Any]] = json.loads(html.unescape(between(text, start, "</pre>")
                                                           [len(start):]))
    return found


def collisions(found: list[dict[str, Any]]) -> list[str]:
    """Texts of one plot whose boxes overlap (1 px of slack), and threshold lines that run
    through a text (but their own label, or a text drawn over them with a white halo)."""
    texts = [t for t in found if t["kind"] == "text"]
    out = []
    for i, a in enumerate(texts):
        for b in texts[i + 1:]:
            if a["plot"] == b["plot"] and (
                    a["x"] + 1 < b["x"] + b["w"] and b["x"] + 1 < a["x"] + a["w"]
                    and a["y"] + 1 < b["y"] + b["h"] and b["y"] + 1 < a["y"] + a["h"]):
                out.append(f"plot {a['plot']}: {a['text']!r} over {b['text']!r}")
    for line in (f for f in found if f["kind"] == "line"):
        for t in texts:
            if (t["plot"] == line["plot"] and t["text"] != line["label"] and not t["halo"]
                    and t["x"] < line["x"] < t["x"] + t["w"]
                    and min(line["y0"], line["y1"]) < t["y"] + t["h"]
                    and t["y"] < max(line["y0"], line["y1"])):
                out.append(f"plot {line['plot']}: the {line['label']!r} line through "
                           f"{t['text']!r}")
    return out


PLUGINS = EXAMPLES.parent / "plugins"


@pytest.fixture(scope="module")
def low_node_utilization(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example docs/report.md shows with the worker nodes' bars: thresholds 20 and 50."""
    example = PLUGINS / "LowNodeUtilization"
    return render(example / "policy.yaml", example / "cluster.yaml",
                  tmp_path_factory.mktemp("lnu") / "report.html", "--reschedule")


def test_both_thresholds_that_decide_a_role_are_drawn_and_labelled(
        low_node_utilization: Path) -> None:
    """LowNodeUtilization's `thresholds` (the nodes that receive pods) and `targetThresholds`
    (those that shed them), on each series they bound, and the legend names both."""
    text = low_node_utilization.read_text()
    for series in ("cpu requests", "memory requests", "pods"):
        plot = svg(text, series)
        assert re.findall(r'data-role="(\w+)"', plot) == ["low", "high"]
        assert ">low 20%</text>" in plot and ">high 50%</text>" in plot
    legend = between(text, '<p class="legend">', "</p>")
    assert ('<span class="line low"></span>low: LowNodeUtilization thresholds' in legend
            and '<span class="line high"></span>high: targetThresholds' in legend)
    assert "the policy's threshold" not in text


def test_a_policy_without_thresholds_gets_no_threshold_in_the_legend(tmp_path: Path) -> None:
    example = PLUGINS / "RemoveFailedPods"
    text = render(example / "policy.yaml", example / "cluster.yaml", tmp_path / "report.html",
                  "--reschedule").read_text()
    legend = between(text, '<p class="legend">', "</p>")
    assert "threshold" not in legend and 'class="line' not in legend
    assert 'class="threshold"' not in text
    # RemoveFailedPods removed two Failed pods, as it exists to: no churn flagged.
    assert re.search(r'class="card"[^>]*><b>0</b>flagged as churn', text)


def test_labels_do_not_collide_and_are_legible(low_node_utilization: Path,
                                               overcommitted: Path) -> None:
    """No text of a plot runs into another (the 50 % label and the 44.5 and 42.5 values were
    drawn over each other), no threshold's line through another's label, and every text is
    at least 11 px."""
    for page in (low_node_utilization, overcommitted):
        found = measured(page)
        assert any(t["kind"] == "line" for t in found)
        assert collisions(found) == []
        sizes = {t["size"] for t in found if t["kind"] == "text"}
        assert all(float(size.removesuffix("px")) >= 11 for size in sizes), sizes
    values = [t["text"] for t in measured(low_node_utilization)
              if t.get("text") in ("44.5", "42.5")]
    assert sorted(values) == ["42.5", "44.5"]


def test_each_node_pool_s_thresholds_are_drawn_on_its_nodes(tmp_path: Path) -> None:
    """LowNodeLoad with a node pool of its own thresholds: the pool's low and high drawn across
    its nodes' rows only and labelled with its name, the default pool's across every node, no
    label over another."""
    policy = yaml.safe_load((EXAMPLES / "policy.yaml").read_text())
    args = policy["profiles"][0]["pluginConfig"][0]["args"]
    args["nodePools"] = [{"name": "big", "nodeSelector": {"matchExpressions": [{
        "key": "kubernetes.io/hostname", "operator": "In",
        "values": ["cn-beijing.10.0.0.53", "cn-beijing.10.0.0.215"]}]},
        "lowThresholds": {"cpu": 25, "memory": 30}, "highThresholds": {"cpu": 55, "memory": 58}}]
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    page = render(tmp_path / "policy.yaml", EXAMPLES / "cluster.yaml", tmp_path / "report.html")
    cpu = svg(page.read_text(), "cpu usage")
    labels = re.findall(r'<text [^>]*>([^<]*)</text></g>', cpu)
    assert labels == ["low 20%", "big low 25%", "high 50%", "big high 55%"]
    found = measured(page)
    assert collisions(found) == []
    # The default pool's high across the three rows, the pool's across its two (the row of
    # cn-beijing.10.0.0.100, first by name, left out).
    rows = {mark["label"]: sorted((line["y0"], line["y1"]) for line in found
                                  if line["kind"] == "line" and line["label"] == mark["label"]
                                  and line["plot"] == mark["plot"])
            for mark in found if mark["kind"] == "line" and mark["plot"] == 3}
    top = min(y0 for y0, _ in rows["high 50%"][1:])
    assert rows["high 50%"][1:] == [(top, top + 3 * 34)]
    assert rows["big high 55%"][1:] == [(top + 34, top + 3 * 34)]
