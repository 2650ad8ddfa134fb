"""Replacements waiting for room, tried again as kube-scheduler tries them: each time an evicted
pod goes, every pending replacement, in the order they wait (scheduler/placement.py).

With thousands waiting and thousands of evicted pods going one after the other, trying each
replacement each time costs their product. For a replacement it found no node for, the model
says which nodes' pods its answer depends on and whether a pod coming to or leaving one of them
may let it in (`Wait`, from the model's `waiting`). Replacements the model answers alike (a
workload's) wait as one group, tried again only once something happened that may let it in: its
first member past the one tried last, in order, as trying every replacement would. When that
member finds no node the others would not either, and they wait for what happens next. A
replacement the model cannot say this of is tried each time.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Collection, Hashable, Iterable, Iterator
from typing import Protocol

from desched.model.pod import Pod

Event = tuple[Pod, str, bool]  # (the pod, its node, whether it came)


class Wait(Protocol):
    """What a replacement no node took waits on."""

    @property
    def key(self) -> Hashable:
        """Replacements with equal keys get equal answers."""
        ...

    def watched(self) -> Iterable[Collection[str]]:
        """The nodes where a pod coming or going may let it in, in parts (a part met again,
        the same object, is not read again)."""
        ...

    def wakes(self, pod: Pod, node: str, came: bool) -> bool:
        """Whether `pod` having come to (`came`) or left `node` may let it in now."""
        ...


class _Group:
    __slots__ = ("events", "members", "number", "wait", "watched")

    def __init__(self, number: int, wait: Wait | None) -> None:
        self.number = number
        self.wait = wait
        self.watched: dict[int, Collection[str]] = {}  # the parts indexed, by identity
        self.members: list[int] = []  # ascending
        # What happened since the group was last tried; None: try it whatever happened.
        self.events: list[Event] | None = None


class WaitingQueue:
    def __init__(self) -> None:
        self._groups: dict[Hashable, _Group] = {}
        self._numbered: list[_Group] = []
        self._of: dict[int, _Group] = {}
        self._by_node: dict[str, set[int]] = {}
        self._blind: set[int] = set()  # groups whose model cannot say what they wait on
        self._due: set[int] = set()  # groups something may have let in
        self._fresh: list[_Group] = []  # groups made due during a pass

    def indices(self) -> list[int]:
        """The replacements still waiting, in order."""
        return sorted(self._of)

    def add(self, index: int, wait: Wait | None) -> None:
        """A replacement no node took just now, after those already waiting."""
        key = wait.key if wait is not None else ("alone", index)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(len(self._numbered), wait)
            self._numbered.append(group)
            self._watch(group)
        group.members.append(index)
        self._of[index] = group
        self._failed(group, wait)

    def _failed(self, group: _Group, wait: Wait | None) -> None:
        """A member found no node just now: the others would not either."""
        if group.wait is None:
            group.events = None  # tried each time
            self._due.add(group.number)
            return
        group.events = []
        self._due.discard(group.number)
        if wait is not None and wait is not group.wait:
            group.wait = wait
            self._watch(group)

    def _watch(self, group: _Group) -> None:
        if group.wait is None:
            self._blind.add(group.number)
            return
        for part in group.wait.watched():
            if id(part) in group.watched:
                continue
            group.watched[id(part)] = part
            for name in part:
                self._by_node.setdefault(name, set()).add(group.number)

    def changed(self, pod: Pod, node: str, came: bool) -> None:
        """A pod came to or left `node`: the groups it may concern take note."""
        if not node:
            return
        for number in (*self._by_node.get(node, ()), *self._blind):
            group = self._numbered[number]
            if not group.members:
                continue
            if group.wait is None:
                group.events = None
            elif group.events is not None:
                group.events.append((pod, node, came))
            if number not in self._due:
                self._due.add(number)
                self._fresh.append(group)

    def placed(self, index: int) -> None:
        """The replacement tried last found a node (report the pod it brought: `changed`)."""
        group = self._of.pop(index)
        group.members.remove(index)

    def nowhere(self, index: int, wait: Wait | None) -> None:
        """The replacement tried last found no node: its group waits for what happens next."""
        group = self._of[index]
        self._failed(group, wait)
        if group.wait is None:
            self._due.discard(group.number)  # until the next pod comes or goes

    def due(self) -> Iterator[int]:
        """The replacements to try now, in order: per group something may have let in, its
        first member past the one tried last. Report each try (`placed` and `changed`, or
        `nowhere`) before taking the next."""
        heap = [(g.members[0], g.number) for g in map(self._numbered.__getitem__, self._due)
                if g.members]
        heapq.heapify(heap)
        self._fresh.clear()
        last = -1
        while heap:
            index, number = heapq.heappop(heap)
            group = self._numbered[number]
            if index <= last or self._of.get(index) is not group or number not in self._due:
                continue
            events = group.events
            if events is not None and group.wait is not None and not any(
                    group.wait.wakes(*e) for e in events):
                events.clear()  # nothing since its last try lets it in
                self._due.discard(number)
                continue
            last = index
            yield index
            fresh = [group, *self._fresh] if number in self._due else self._fresh
            for g in fresh:
                later = bisect.bisect_right(g.members, last)
                if later < len(g.members):
                    heapq.heappush(heap, (g.members[later], g.number))
            self._fresh = []
