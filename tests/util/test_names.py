"""The known name a mistyped one most likely means (util/names.py), as explain, preflight and
the policy loaders suggest it."""

from __future__ import annotations

from desched.util.names import nearest


def test_the_same_name_in_another_case_wins() -> None:
    assert nearest("LowNodeutilization", ["HighNodeUtilization", "LowNodeUtilization"]) == \
        "LowNodeUtilization"


def test_the_nearest_name_among_many_pods() -> None:
    # 150,000 pods of one namespace: only the names sorting next to it (forwards or read
    # backwards) are compared, and a typo early or late in the name is still found.
    names = [f"default/app{i % 500}-{i:06d}-x7k2p" for i in range(150_000)]
    for typo in ("default/app234-001234-x7k2q", "dfault/app234-001234-x7k2p",
                 "default/ap234-001234-x7k2p"):
        assert nearest(typo, names) == "default/app234-001234-x7k2p"
    assert nearest("kube-system/coredns", names) is None
