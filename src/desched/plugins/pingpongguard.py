"""PingPongGuard (desched's own, docs/scheduler.md): refuses an eviction whose replacement
would come straight back.

Enabled as a filter (upstream `preEvictionFilter` or `filter`, Koordinator `filter`). Before a
pod is evicted it asks a scheduler model where the pod's replacement would land, the pod itself
gone: on the pod's own node, the eviction gains nothing and is refused; on a node the evicting
plugin would itself find over its thresholds after the placement (LowNodeLoad's high thresholds
on measured usage, LowNodeUtilization's targetThresholds), it only moves the hotspot and is
refused too. A pod that fits nowhere else is
let through: whether it may be evicted then is the evicting plugin's own nodeFit question.

Args: `scheduler` (the model: kube-default or koord-load-aware) and `schedulerConfig`, the path
of the scheduler's KubeSchedulerConfiguration (scheduler/config/; absolute, or relative
to the working directory), whose profiles the model runs; empty: kube-scheduler's default
profile.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from desched.framework.registry import PluginSpec, Scope
from desched.framework.types import ChecksThresholds, Handle
from desched.model.pod import Pod
from desched.plugins.scheduler_config_arg import config_of, problems, warnings_of
from desched.scheduler.by_name import model_reads, scheduler_model
from desched.scheduler.model import KUBE_DEFAULT, MODELS, lands_back
from desched.scheduler.profile import SchedulerConfig


class PingPongGuardArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    scheduler: str = KUBE_DEFAULT
    scheduler_config: str = ""  # a KubeSchedulerConfiguration file; "": the default profile


def scheduler_config(args: PingPongGuardArgs) -> SchedulerConfig:
    return config_of(args.scheduler_config)


def validate(args: PingPongGuardArgs) -> list[str]:
    errs = []
    if args.scheduler not in MODELS:
        supported = ", ".join(f'"{m}"' for m in MODELS)
        errs.append(f'scheduler: Unsupported value: "{args.scheduler}": supported values: '
                    f'{supported}')
    return errs + problems(args.scheduler_config)


def warnings(args: PingPongGuardArgs) -> list[str]:
    """The scheduler configuration's warnings, for the policy's."""
    return warnings_of(args.scheduler_config)


class PingPongGuard:
    def __init__(self, args: PingPongGuardArgs, handle: Handle) -> None:
        self.handle = handle
        self.model = scheduler_model(args.scheduler, scheduler_config(args))
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
        back = lands_back(pod, placement, self.model.name)
        if back is not None:
            return back
        plugin = handle.evictor.plugins.get(asking)
        if isinstance(plugin, ChecksThresholds):
            hot = plugin.over_thresholds_after(target, pod)
            if hot is not None:
                return f"replacement would land on {target} ({self.model.name}), where {hot}"
        return None


SPEC = PluginSpec(
    name="PingPongGuard",
    extension_points=frozenset({"filter", "preevictionfilter"}),
    args_type=PingPongGuardArgs,
    factory=PingPongGuard,
    validate=validate,
    warnings=warnings,
    # What its scheduler model reads (default spreading's selectors, koord-load-aware's usage).
    scope=lambda args: Scope(reads=model_reads(args.scheduler, scheduler_config(args),
                                               "PingPongGuard")),
)
