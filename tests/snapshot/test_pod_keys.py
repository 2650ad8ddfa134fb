"""A pod's key ("namespace/name") is the string the snapshot indexes it by once added; before,
it is worked out from its metadata."""

from __future__ import annotations

from builders import node, pod, snapshot


def test_the_key_is_the_snapshots_own() -> None:
    loose = pod("a", "n1", namespace="")
    assert loose.key == "/a"  # not added anywhere: read off the metadata as it is
    snap = snapshot(node("n1"), loose)
    assert loose.key == "default/a"  # added: the namespace defaulted, the indexed key kept
    [indexed] = snap.pods
    assert loose.key is indexed
    assert snap.pods.get(loose.key) is loose
    snap.remove_pod(loose)
    assert snap.pods.get(loose.key) is None
