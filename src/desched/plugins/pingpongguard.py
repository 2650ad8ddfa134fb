"""PingPongGuard (desched's own, DESIGN §1.5): refuses an eviction whose replacement would come
straight back.

Enabled as a filter (upstream `preEvictionFilter` or `filter`, Koordinator `filter`). Before a
pod is evicted it asks a scheduler model where the pod's replacement would land, the pod itself
gone: on the pod's own node, the eviction gains nothing and is refused; on a node the evicting
plugin would itself find over its thresholds after the placement (LowNodeLoad's high thresholds
on measured usage, LowNodeUtilization's targetThresholds), it only moves the hotspot and is
refused too. A pod that fits nowhere else is
let through: whether it may be evicted then is the evicting plugin's own nodeFit question.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from desched.framework.registry import PluginSpec, register
from desched.framework.types import Handle
from desched.model.pod import Pod
from desched.scheduler.model import KUBE_DEFAULT, MODELS, scheduler_model

# The most equally scored nodes among which the pod's own node still refuses the eviction.
_MAX_TIED = 2


class PingPongGuardArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    scheduler: str = KUBE_DEFAULT


def validate(args: PingPongGuardArgs) -> list[str]:
    if args.scheduler not in MODELS:
        supported = ", ".join(f'"{m}"' for m in MODELS)
        return [f'scheduler: Unsupported value: "{args.scheduler}": supported values: '
                f'{supported}']
    return []


class PingPongGuard:
    def __init__(self, args: PingPongGuardArgs, handle: Handle) -> None:
        self.handle = handle
        self.model = scheduler_model(args.scheduler)
        # One verdict per pod per cycle: plugins ask both filter extension points, often twice.
        self._verdicts: dict[tuple[str, datetime, str, int, int], str | None] = {}

    def filter(self, pod: Pod) -> str | None:
        return self._verdict(pod)

    def pre_eviction_filter(self, pod: Pod) -> str | None:
        return self._verdict(pod)

    def _verdict(self, pod: Pod) -> str | None:
        handle = self.handle
        asking = handle.evictor.asking
        snapshot = handle.snapshot  # a pod added or removed since may change the answer
        key = (pod.key, handle.now, asking, snapshot.additions, len(snapshot.pods))
        if key in self._verdicts:
            return self._verdicts[key]
        if len(self._verdicts) > 10_000:
            self._verdicts.clear()
        verdict = self._judge(pod, asking)
        self._verdicts[key] = verdict
        return verdict

    def _judge(self, pod: Pod, asking: str) -> str | None:
        handle = self.handle
        if not pod.node_name:
            return None
        nodes = handle.snapshot.ready_nodes()
        placement = self.model.place(pod, nodes, handle.snapshot, handle.now)
        target = placement.node
        if target is None:
            return None
        if target == pod.node_name and len(placement.tied) <= 1:
            return f"replacement would land on {target} again ({self.model.name})"
        if pod.node_name in placement.tied and len(placement.tied) <= _MAX_TIED:
            # kube-scheduler picks among equal scores at random: back on the node at even odds
            # or worse is a ping-pong as much as a certain one.
            return (f"replacement would land on {pod.node_name} again with probability "
                    f"1/{len(placement.tied)} ({self.model.name}: {len(placement.tied)} nodes "
                    f"score the same)")
        plugin: Any = handle.evictor.plugins.get(asking)
        check = getattr(plugin, "over_thresholds_after", None)
        if check is not None:
            hot = check(target, pod)
            if hot is not None:
                return f"replacement would land on {target} ({self.model.name}), where {hot}"
        return None


register(PluginSpec(
    name="PingPongGuard",
    extension_points=frozenset({"filter", "preevictionfilter"}),
    args_type=PingPongGuardArgs,
    factory=PingPongGuard,
    validate=validate,
))
