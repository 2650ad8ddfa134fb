"""The HTML report, rendered by a real browser (Debian's chromium, headless): the page's
script builds its tables without an error, the plots are there, and a screenshot is taken."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "lownodeload-hotspot"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "simulate", "--policy", str(EXAMPLES / "policy.yaml"),
         "--snapshot", str(EXAMPLES / "cluster.yaml"), "--cycles", "14", "--reschedule",
         "--output", "html", "--out", str(out)], capture_output=True, text=True, timeout=60,
        check=False)
    assert proc.returncode == 0, proc.stderr
    return out


def browser(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM, "chromium is not installed: scripts/test installs Debian's package"
    profile = page.parent / "profile"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args,
                           page.as_uri()], capture_output=True, text=True, timeout=120,
                          check=False)


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
    out = tmp_path / "report.html"
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "simulate", "--policy", str(policy), "--snapshot",
         str(cluster), "--now", "2026-11-22T12:00:00Z", "--output", "html", "--out", str(out)],
        capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert text.count("<script") == 2  # the data and the page's own script
    assert "alert(1)" in text  # kept as data...
    dom = browser(out, "--virtual-time-budget=5000", "--dump-dom").stdout
    assert 'data-ready="1"' in dom
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in dom  # ...and shown as text
