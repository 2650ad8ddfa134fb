"""Memo tables stay bounded however many new values a long run meets."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import msgspec
import pytest

from desched.model import meta, quantity
from desched.model.pod import Pod
from desched.util.memo import remember


def test_remember_empties_a_full_table_and_keeps_the_new_entry() -> None:
    table: dict[int, str] = {}
    for i in range(10):
        assert remember(table, i, str(i), limit=4) == str(i)
        assert len(table) <= 4 and table[i] == str(i)
    assert table == {8: "8", 9: "9"}


def growth(step: Callable[[int], object], warm: int, then: int) -> int:
    """Bytes Python holds after `then` more steps than after `warm` steps (tracemalloc)."""
    tracemalloc.start()
    try:
        for i in range(warm):
            step(i)
        before = tracemalloc.get_traced_memory()[0]
        for i in range(warm, warm + then):
            step(i)
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_usage_quantities_of_a_long_run_do_not_grow_the_quantity_caches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Every scrape brings new usage figures ("123456789n", "2013241728"): a run of months
    # parses millions of distinct quantities. Past the tables' limit (1,000 here) memory stays
    # put; kept, 30,000 more quantities would hold some 10 MB.
    monkeypatch.setattr(quantity, "CACHE_LIMIT", 1_000)

    def step(i: int) -> None:
        assert quantity.resource_amount("cpu", f"{i}n") == (1 if i else 0)
        assert quantity.resource_amount("memory", str(i * 1024)) == i * 1024

    assert growth(step, 3_000, 30_000) < 1_000_000


def test_owner_uids_of_new_jobs_do_not_grow_the_shared_strings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A CronJob makes a Job, with a new name and UID, every few minutes, for as long as
    # desched runs: the UIDs and quantities decoded to shared instances (model/meta.py).
    monkeypatch.setattr("desched.util.memo.DEFAULT_LIMIT", 1_000)
    monkeypatch.setattr(quantity, "CACHE_LIMIT", 1_000)  # a quantity is checked as it is decoded
    decoder = msgspec.json.Decoder(Pod, dec_hook=meta.shared_hook)

    def step(i: int) -> None:
        pod = decoder.decode(msgspec.json.encode({
            "metadata": {"name": f"job-{i}-x", "namespace": "batch", "ownerReferences": [
                {"kind": "Job", "name": f"job-{i}", "uid": f"uid-{i}", "controller": True}]},
            "spec": {"containers": [{"name": "c", "resources": {
                "requests": {"cpu": f"{100 + i}m"}}}]}}))
        assert pod.metadata.owner_references[0].uid == f"uid-{i}"
        assert pod.spec.containers[0].resources.requests["cpu"] == f"{100 + i}m"

    assert growth(step, 3_000, 20_000) < 1_000_000
