"""Eviction policies (docs/migration.md): which one a pod gets, and the SoftEviction
annotation."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest

from builders import pod
from desched.migration.policies import (
    DELETE,
    EVICT_POLICY_LABEL,
    EVICTION,
    SOFT_EVICTION,
    SOFT_EVICTION_ANNOTATION,
    DeleteOptions,
    eviction_policy_for,
    go_json,
    rfc3339,
    soft_eviction_annotation,
    soft_eviction_patch,
    trigger_and_reason,
)

NOW = datetime(2026, 11, 22, 12, 0, 5, 123456, tzinfo=UTC)


@pytest.mark.parametrize(("pod_label", "job_label", "default", "expected"), [
    (None, None, EVICTION, EVICTION),
    (None, None, DELETE, DELETE),
    (DELETE, None, EVICTION, DELETE),
    (SOFT_EVICTION, DELETE, EVICTION, SOFT_EVICTION),  # the pod's label wins
    ("", DELETE, EVICTION, DELETE),  # an empty label is no label
    (None, SOFT_EVICTION, EVICTION, SOFT_EVICTION),
    ("Nonsense", DELETE, EVICTION, EVICTION),  # unknown: the default, not the job's label
    (None, "Nonsense", SOFT_EVICTION, SOFT_EVICTION),
    ("eviction", None, DELETE, DELETE),  # names are case-sensitive
])
def test_eviction_policy_for(pod_label: str | None, job_label: str | None, default: str,
                             expected: str) -> None:
    labels = {} if pod_label is None else {EVICT_POLICY_LABEL: pod_label}
    job_labels = None if job_label is None else {EVICT_POLICY_LABEL: job_label}
    subject = pod("p", labels=labels)
    assert eviction_policy_for(subject, default, job_labels) == expected


@pytest.mark.parametrize(("annotations", "expected"), [
    ({}, ("", "NotSet")),
    ({"koordinator.sh/evict-trigger": "LowNodeLoad"}, ("LowNodeLoad", "LowNodeLoad")),
    ({"koordinator.sh/evict-trigger": "LowNodeLoad",
      "koordinator.sh/evict-reason": "node is hot"}, ("LowNodeLoad", "node is hot")),
    ({"koordinator.sh/evict-reason": "why"}, ("", "why")),
])
def test_trigger_and_reason(annotations: dict[str, str], expected: tuple[str, str]) -> None:
    assert trigger_and_reason(annotations) == expected


def test_soft_eviction_annotation_format() -> None:
    options = msgspec.convert({"propagationPolicy": "Background", "gracePeriodSeconds": 30},
                              DeleteOptions)
    value = soft_eviction_annotation(NOW, "LowNodeLoad", "node is hot", options)
    # Go's field order: timestamp, deleteOptions (its own declaration order), initiator, reason.
    assert value == ('{"timestamp":"2026-11-22T12:00:05Z","deleteOptions":'
                     '{"gracePeriodSeconds":30,"propagationPolicy":"Background"},'
                     '"initiator":"LowNodeLoad","reason":"node is hot"}')


def test_soft_eviction_annotation_omits_empty_fields() -> None:
    assert soft_eviction_annotation(NOW, "", "") == '{"timestamp":"2026-11-22T12:00:05Z"}'


def test_soft_eviction_annotation_escapes_as_go_does() -> None:
    value = soft_eviction_annotation(NOW, "LowNodeLoad",
                                     "node cpu usage(80.00%)>threshold(75.00%) & <ok> é")
    assert "\\u003ethreshold" in value and "\\u0026 \\u003cok\\u003e é" in value
    assert json.loads(value)["reason"] == "node cpu usage(80.00%)>threshold(75.00%) & <ok> é"


def test_soft_eviction_patch_from_a_job() -> None:
    patch = soft_eviction_patch({"koordinator.sh/evict-trigger": "RemoveDuplicates"}, NOW)
    assert patch == {SOFT_EVICTION_ANNOTATION: '{"timestamp":"2026-11-22T12:00:05Z",'
                                               '"initiator":"RemoveDuplicates",'
                                               '"reason":"RemoveDuplicates"}'}


def test_rfc3339_is_utc_seconds() -> None:
    plus2 = timezone(timedelta(hours=2))
    assert rfc3339(datetime(2026, 1, 2, 5, 4, 3, 999, tzinfo=plus2)) == "2026-01-02T03:04:03Z"
    assert rfc3339(datetime(2026, 1, 2, 5, 4, 3)) == "2026-01-02T05:04:03Z"


def test_delete_options_decode_strictly() -> None:
    with pytest.raises(msgspec.ValidationError, match="unknown field `grace`"):
        msgspec.convert({"grace": 1}, DeleteOptions)


def test_go_json_is_compact() -> None:
    assert go_json({"a": [1, 2], "b": "x"}) == '{"a":[1,2],"b":"x"}'
