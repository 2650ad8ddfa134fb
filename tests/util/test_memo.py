"""Memo tables stay bounded however many new values a long run meets."""

from __future__ import annotations

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


def test_usage_quantities_of_a_long_run_do_not_grow_the_quantity_caches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Every scrape brings new usage figures ("123456789n", "2013241728"): a run of months
    # parses millions of distinct quantities.
    monkeypatch.setattr(quantity, "_LIMIT", 1_000)
    for i in range(5_000):
        assert quantity.resource_amount("cpu", f"{i}n") == (1 if i else 0)
        assert quantity.resource_amount("memory", str(i * 1024)) == i * 1024
    assert len(quantity._cache) <= 1_000
    assert len(quantity._milli_cache) <= 1_000
    assert len(quantity._value_cache) <= 1_000


def test_owner_uids_of_new_jobs_do_not_grow_the_shared_strings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A CronJob makes a Job, with a new name and UID, every few minutes, for as long as
    # desched runs.
    monkeypatch.setattr("desched.util.memo.DEFAULT_LIMIT", 1_000)
    decoder = msgspec.json.Decoder(Pod, dec_hook=meta.shared_hook)
    for i in range(5_000):
        pod = decoder.decode(msgspec.json.encode({
            "metadata": {"name": f"job-{i}-x", "namespace": "batch", "ownerReferences": [
                {"kind": "Job", "name": f"job-{i}", "uid": f"uid-{i}", "controller": True}]},
            "spec": {"containers": [{"name": "c", "resources": {
                "requests": {"cpu": f"{100 + i}m"}}}]}}))
        assert pod.metadata.owner_references[0].uid == f"uid-{i}"
        assert pod.requests["cpu"] == 100 + i
    assert len(meta._shared) <= 1_000
    assert len(meta._quantities) <= 1_000
