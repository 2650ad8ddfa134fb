"""desched run sets glibc's malloc for a long run, unless the operator's environment did."""

from __future__ import annotations

import platform

import pytest

from desched.live import allocator
from desched.live.allocator import tune_allocator

ON_GLIBC = platform.libc_ver()[0] == "glibc"


def test_both_settings_applied_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    expected = {"MALLOC_ARENA_MAX": 2, "MALLOC_MMAP_THRESHOLD_": 128 * 1024}
    assert tune_allocator() == (expected if ON_GLIBC else {})


def test_what_the_environment_sets_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    applied = tune_allocator()
    assert "MALLOC_ARENA_MAX" not in applied
    assert set(applied) == ({"MALLOC_MMAP_THRESHOLD_"} if ON_GLIBC else set())


def test_nothing_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator, "LIBC", None)
    assert tune_allocator() == {}
    assert allocator.release_free_memory() is False


def test_free_pages_are_released_after_a_cycle() -> None:
    held = [bytearray(4096) for _ in range(20_000)]  # ~80 MB, then freed
    del held
    assert allocator.release_free_memory() is ON_GLIBC
