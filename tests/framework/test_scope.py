"""What a plugin declares of what it reads and how it is scoped (PluginSpec.scope), and what
`simulate` and `explain` make of it (simulate/preflight.py): a plugin desched has never heard
of gets the same warnings as a built-in, with no edit anywhere else."""

from __future__ import annotations

from typing import Any

import pytest

from builders import NOW, RecordingExecutor, node, pod, snapshot
from desched.framework.policy import Policy, ProfileConfig
from desched.framework.registry import NamespaceScope, NodeScope, PluginSpec, Reads, Scope
from desched.framework.runner import Descheduler
from desched.framework.types import Clock
from desched.model.labels import parse_selector_string
from desched.simulate.preflight import needs, unmatched


class _Plugin:
    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def deschedule(self, nodes: list[Any]) -> None:
        pass


def _scope(args: dict[str, Any]) -> Scope:
    return Scope(
        reads=(Reads(("NodeMetric",), "UsageReader (node usage)"),),
        namespaces=(NamespaceScope("namespaces", include=("shop", "shpo")),),
        nodes=(NodeScope("nodeSelector", "pool=gpu", parse_selector_string("pool=gpu"),
                         "it sees no node"),))


SPEC = PluginSpec(name="UsageReader", extension_points=frozenset({"deschedule"}),
                  args_type=dict, factory=_Plugin, scope=_scope)


def test_preflight_asks_the_spec() -> None:
    snap = snapshot(node("n1"), node("n2"), pod("web", "n1", namespace="shop"))
    policy = Policy(path="policy.yaml", format="v1alpha2", plugins={"UsageReader": SPEC},
                    profiles=[ProfileConfig("default", args={"UsageReader": {}},
                                            enabled={"deschedule": ["UsageReader"]})])
    descheduler = Descheduler(policy, snap, RecordingExecutor(snap), Clock(NOW))
    assert needs(descheduler, []).uses == {"NodeMetric": {"UsageReader (node usage)": None}}
    assert [(u.text, u.plugin, u.namespaces) for u in unmatched(descheduler)] == [
        ('UsageReader nodeSelector "pool=gpu" matches 0 of 2 nodes: it sees no node',
         "UsageReader", None),
        ('UsageReader namespaces.include names "shpo", which no namespace in the snapshot has '
         '(did you mean "shop"?)', "UsageReader", frozenset({"shop", "shpo"}))]


def test_a_kind_desched_does_not_read_is_refused() -> None:
    with pytest.raises(ValueError, match="ConfigMap is not a kind desched reads"):
        Reads(("ConfigMap",), "X (its settings)")


@pytest.mark.parametrize(("scope", "inside", "outside"), [
    (NamespaceScope("namespaces", include=("a",)), "a", "b"),
    (NamespaceScope("evictableNamespaces", exclude=("a",)), "b", "a"),
    (NamespaceScope("namespaces", include=("a",), exclude=("a",)), "a", "b"),  # include wins
])
def test_namespace_scope(scope: NamespaceScope, inside: str, outside: str) -> None:
    assert scope.allows(inside) and not scope.allows(outside)
