"""Progress lines: only on a terminal, only after a delay, cleared at the end."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import desched.util.progress as progress_module
from desched.snapshot.loader import read_batches
from desched.util.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_silent_when_not_a_terminal_or_quick(monkeypatch: pytest.MonkeyPatch) -> None:
    piped = io.StringIO()
    Progress("reading", piped).update(10)
    assert piped.getvalue() == ""
    quick = Terminal()
    shown = Progress("reading", quick)  # within the first second: nothing yet
    shown.update(10)
    shown.done()
    assert quick.getvalue() == ""


def test_counts_and_share_of_bytes_then_cleared(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.setattr(progress_module, "DELAY", 0.0)
    monkeypatch.setattr(progress_module, "EVERY", 0.0)
    pods = [{"metadata": {"name": f"p{i}", "namespace": "ns"}, "spec": {"nodeName": "n"}}
            for i in range(3)]
    path = tmp_path / "pods.jsonl"
    path.write_text("".join(json.dumps({"apiVersion": "v1", "kind": "PodList",
                                        "items": [p]}) + "\n" for p in pods))
    screen = Terminal()
    shown = Progress("reading pods.jsonl", screen)
    assert sum(len(b) for b in read_batches(str(path), progress=shown)) == 3
    text = screen.getvalue()
    assert "reading pods.jsonl: 1 objects" in text and "reading pods.jsonl: 3 objects" in text
    assert "(33%)" in text and f"of {path.stat().st_size} B (99%)" in text
    shown.done()
    assert screen.getvalue().endswith("\r\x1b[K")
