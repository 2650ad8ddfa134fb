"""A page rendered by a real browser (Debian's chromium, headless), for the tests of the pages
desched writes: its DOM after the page's script ran, its console, a screenshot."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         # The console (every frame's) on stderr: the lines holding ":CONSOLE".
         "--enable-logging=stderr", "--v=0"]


def browser(page: Path, *args: str, fragment: str = "") -> subprocess.CompletedProcess[str]:
    assert CHROMIUM, "chromium is not installed: scripts/test installs Debian's package"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={page.parent / 'profile'}",
                           *args, page.as_uri() + fragment],
                          capture_output=True, text=True, timeout=120, check=False)


def console(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """What the page's scripts wrote to the console, errors included."""
    return [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]


def screenshot(page: Path, width: int, height: int) -> bytes:
    """A PNG of the page's top `height` px at `width`."""
    shot = page.with_suffix(".png")
    proc = browser(page, f"--window-size={width},{height}", f"--screenshot={shot}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return data
