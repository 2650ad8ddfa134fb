"""Koordinator's podFilter, built the same way by its balance plugins (LowNodeLoad,
CustomPriority): evictableNamespaces (the include list, then the exclude list), the profile's
evict filter, then the podSelectors (a pod passes when any matches; none given passes every
pod). Each pod left out is recorded with why, for the reports and `explain`."""

from __future__ import annotations

from collections.abc import Iterable

from desched.framework.types import Handle
from desched.model.labels import compile_selector
from desched.model.meta import LabelSelector
from desched.model.pod import Pod
from desched.policy_files.args import Namespaces


class PodFilter:
    def __init__(self, handle: Handle, namespaces: Namespaces | None,
                 selectors: Iterable[LabelSelector | None]) -> None:
        self.handle = handle
        self.include = frozenset(namespaces.include) if namespaces is not None else frozenset()
        self.exclude = frozenset(namespaces.exclude) if namespaces is not None else frozenset()
        # A podSelector without a selector selects nothing and is left out, as Koordinator's.
        self.matchers = [compile_selector(s) for s in selectors if s is not None]

    def passes(self, pod: Pod) -> bool:
        handle = self.handle
        namespace = pod.namespace
        if (self.include and namespace not in self.include) or namespace in self.exclude:
            handle.skip(pod, f"namespace {namespace} is not evictable (evictableNamespaces)")
            return False
        if not handle.filter(pod):
            return False
        if self.matchers and not any(m(pod.metadata.labels) for m in self.matchers):
            handle.skip(pod, "labels match none of the podSelectors")
            return False
        return True
