"""`desched tune -o html` on the LowNodeUtilization example: every candidate a point linking to
its section, the recommendation, your policy and the floor marked, the page honest about what it
assumes, simulate's own report embedded for the front; and the page as chromium builds it."""

from __future__ import annotations

import dataclasses
import html
import re
import subprocess
import sys
from pathlib import Path

import pytest

from chromium import browser, console, screenshot
from desched.tune.goals import parse_goals
from desched.tune.html import render_html, section_id
from desched.tune.output import ASSUMES
from desched.tune.tuner import BASELINE, Report, Settings, Tuner, TuneResult

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "LowNodeUtilization"
POLICY, CLUSTER = str(EXAMPLE / "policy.yaml"), str(EXAMPLE / "cluster.yaml")
GOAL = "max cpu requests <= 60%"


def tuned(goals: list[str]) -> tuple[Tuner, TuneResult]:
    tuner = Tuner(POLICY, [CLUSTER], parse_goals(goals), [], Settings(floor_time_limit=10),
                  lambda _: None)
    return tuner, tuner.tune()


@pytest.fixture(scope="module")
def tuned_page() -> tuple[TuneResult, dict[Report, str], str]:
    tuner, result = tuned([GOAL])
    reports = tuner.reports(result)
    return result, reports, render_html(result, reports)


def _section(page: str, key: Report) -> str:
    start = page.index(f'id="{section_id(key)}"')
    return page[start:page.index("</section>", start)]


def _embedded(section: str) -> str:
    found = re.search(r'data-srcdoc="([^"]*)"', section)
    assert found is not None, "no embedded report"
    return html.unescape(found.group(1))


def test_every_valid_candidate_is_a_point_linking_to_its_section(
        tuned_page: tuple[TuneResult, dict[Report, str], str]) -> None:
    result, _, page = tuned_page
    valid = result.found.valid
    links = re.findall(r'<a class="point" data-kind="(\w+)" href="#([^"]+)">', page)
    assert sorted(href for _, href in links) == sorted(section_id(c.point) for c in valid)
    ids = set(re.findall(r'\sid="([^"]+)"', page))
    assert all(href in ids for _, href in links)
    # Shape and colour by verdict: the candidates that miss the goal are crosses, the rest meet.
    kinds = dict((href, kind) for kind, href in links)
    for c in valid:
        assert c.measured is not None
        assert kinds[section_id(c.point)] == ("meets" if c.measured.meets else "misses")
    assert "misses" in kinds.values() and "meets" in kinds.values()
    legend = page[page.index('class="plot-legend"'):]
    legend = legend[:legend.index("</div>")]
    for text in ("meets the goals", "misses a goal", "Pareto front", "recommended", "your policy",
                 "the floor"):
        assert text in legend


def test_the_recommendation_your_policy_the_goal_and_the_floor_are_marked(
        tuned_page: tuple[TuneResult, dict[Report, str], str]) -> None:
    result, _, page = tuned_page
    best = result.recommended
    assert best is not None and result.floor is not None and result.floor.moves == 2
    assert f'data-mark="best" href="#{section_id(best.point)}"' in page
    assert f'data-mark="yours" href="#{section_id(BASELINE)}"' in page
    floor = page[page.index('<g class="floor">'):]
    assert "floor: 2 move(s), a bound</text>" in floor[:floor.index("</g>")]
    assert f"goal: {html.escape(GOAL)}</text>" in page
    # The front joined: one point per front candidate on its line.
    line = re.search(r'<polyline class="front" points="([^"]+)"', page)
    assert line is not None and len(line.group(1).split()) == len(result.front)
    # The answer: the changed value in bold, the floor's gap, why it beat its neighbours.
    answer = page[page.index('id="recommended"'):page.index("Evictions against the goals")]
    assert "<b>55</b>" in answer and "0 evictions above it" in answer
    assert "meets the goals with 3 evictions (+1)" in answer
    assert html.escape("targetThresholds: {cpu: 55, memory: 50, pods: 50}") in page


def test_the_table_lists_every_candidate_as_the_search_ranks_them(
        tuned_page: tuple[TuneResult, dict[Report, str], str]) -> None:
    result, _, page = tuned_page
    table = page[page.index('id="candidates"'):page.index("</table>", page.index(
        'id="candidates"'))]
    rows = re.findall(r"<tr[ >]", table)[1:]
    assert len(rows) == len(result.found.candidates)
    best = result.recommended
    assert best is not None
    assert re.findall(r'<a href="#([^"]+)">1</a>', table) == [section_id(best.point)]
    invalid = [c for c in result.found.candidates.values() if c.measured is None]
    assert invalid and table.count("no valid policy:") == len(invalid)
    # The invalid come last.
    assert table.rindex('class="invalid"') > table.rindex("<a href=")


def test_the_page_says_what_the_figures_assume(
        tuned_page: tuple[TuneResult, dict[Report, str], str]) -> None:
    result, _, page = tuned_page
    inputs = page[page.index('id="inputs"'):page.index('id="recommended"')]
    assert "2026-11-20T08:00:00+00:00 (newest timestamp in the snapshot" in inputs
    assert "kube-default scheduler model (kube-scheduler&#x27;s default profile" in inputs
    assert "<dt>outcomes</dt><dd>1: kube-scheduler&#x27;s random choice" in inputs
    assert html.escape(ASSUMES) in inputs and "usage moves with it" in inputs
    # A scheduler configuration file is named; a usage goal gets the assumption spelled out.
    other = dataclasses.replace(
        result, goals=parse_goals(["max cpu usage <= 60%"]),
        settings=dataclasses.replace(result.settings, scheduler_config_path="sched.yaml"))
    page = render_html(other)
    assert "default profile" not in page and "the profiles of sched.yaml" in page
    assert ("Usage goals here (max cpu usage &lt;= 60%): the measured usage of a pod is assumed "
            "to move with it to its new node") in page


def test_simulate_s_report_is_embedded_for_your_policy_the_recommendation_and_the_front(
        tuned_page: tuple[TuneResult, dict[Report, str], str]) -> None:
    result, reports, page = tuned_page
    best = result.recommended
    assert best is not None
    assert set(reports) == {BASELINE, best.point, *(c.point for c in result.front)}
    for key in reports:
        report = _embedded(_section(page, key))
        assert report == reports[key] and report.startswith("<!doctype html>")
    # Each report is its own candidate's run: the recommendation's draws its target 55 %.
    assert "high 55%" in _embedded(_section(page, best.point))
    assert "high 50%" in _embedded(_section(page, BASELINE))
    others = [c for c in result.found.valid if c.point not in reports]
    assert others and all("data-srcdoc" not in _section(page, c.point) for c in others)


def test_an_unreachable_goal_gets_its_reason_and_no_policy_file() -> None:
    _, result = tuned(["max cpu requests <= 10%"])
    page = render_html(result)
    assert result.unreachable is not None and result.written is None
    assert f"<b>No candidate meets the goals:</b> {html.escape(result.unreachable)}" in page
    assert 'id="policy-file"' not in page and 'data-mark="best"' not in page
    assert 'data-mark="yours"' in page


def test_without_a_floor_or_a_figure_the_page_draws_neither(
        tuned_page: tuple[TuneResult, dict[Report, str], str]) -> None:
    result, _, _ = tuned_page
    page = render_html(dataclasses.replace(result, floor=None))
    assert '<g class="floor">' not in page and "the floor: fewest moves" not in page
    assert 'id="floor"' not in page and '<a class="point"' in page
    # The example measures no usage: no point to draw, and the page says why.
    _, unmeasured = tuned(["max cpu usage <= 60%"])
    page = render_html(unmeasured)
    assert '<a class="point"' not in page and "<svg class=\"tradeoff\"" not in page
    assert "No candidate has a figure for max cpu usage &lt;= 60%" in page


def test_what_the_user_wrote_stays_text(
        tuned_page: tuple[TuneResult, dict[Report, str], str]) -> None:
    result, reports, _ = tuned_page
    hostile = 'p"><script>alert(1)</script>'
    page = render_html(dataclasses.replace(result, policy_path=hostile, warnings=[hostile],
                                           written=hostile), reports)
    assert "<script>alert(1)" not in page
    assert page.count("&lt;script&gt;alert(1)") == 5  # title, heading, inputs, warning, file
    assert page.count("<script") == 3  # the data, the page's script, the tune page's own


@pytest.fixture(scope="module")
def page_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page as `desched tune -o html --out FILE` writes it."""
    out = tmp_path_factory.mktemp("tune") / "tune.html"
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "tune", "--policy", POLICY, "--snapshot", CLUSTER,
         "--goal", GOAL, "--floor-time-limit", "10", "-o", "html", "--out", str(out)],
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.browser
def test_chromium_draws_the_points_and_opens_a_candidate_to_its_report(page_file: Path) -> None:
    text = page_file.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", text)
    points = text.count('<a class="point"')
    assert points > 10
    proc = browser(page_file, "--virtual-time-budget=5000", "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'data-ready="1"' in proc.stdout
    assert proc.stdout.count('<a class="point"') == points
    assert " srcdoc=" not in proc.stdout  # reports load when opened, not before
    assert console(proc) == []
    best = re.search(r'data-mark="best" href="#([^"]+)"', text)
    assert best is not None
    opened = browser(page_file, "--virtual-time-budget=5000", "--dump-dom",
                     fragment="#" + best.group(1))
    dom = opened.stdout
    section = dom[dom.index(f'id="{best.group(1)}"'):]
    section = section[:section.index("</section>")]
    assert '<details class="report" open="">' in section and " srcdoc=" in section
    assert console(opened) == []  # the embedded report's script ran without an error too


@pytest.mark.browser
def test_a_screenshot_shows_the_page(page_file: Path) -> None:
    assert len(screenshot(page_file, 1200, 1600)) > 40_000  # a rendered page, not a blank one
