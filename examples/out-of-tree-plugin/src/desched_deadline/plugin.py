"""RemovePodsPastDeadline (deschedule): evicts the pods whose `deadline.example.com/evict-after`
annotation names a time that has passed, or that comes within `leadTime`, earliest deadline
first across the cluster.

What it is for: a pod that must not outlive something it took at start (a short-lived
credential or certificate, a licence, a snapshot of configuration) says until when it is good,
and is replaced before then, through the Eviction API, within the policy's limits and the
pods' disruption budgets; a temporary pod (a debugging copy, a canary) says when it should go.
A pod whose annotation is not an RFC 3339 time is kept, and the report says why.

Everything it uses comes from desched.plugin_api, desched's public plugin API.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec

from desched.plugin_api import (
    DurationError,
    EvictionLimitError,
    Handle,
    LabelSelector,
    Namespaces,
    Node,
    PluginSpec,
    Pod,
    Scope,
    compile_selector,
    human_duration,
    namespace_allowed,
    namespace_scope,
    parse_duration,
    selector_is_empty,
    validate_label_selector,
    validate_namespaces,
)

NAME = "RemovePodsPastDeadline"
# The annotation a pod gives its deadline in. desched keeps only the annotations its plugins
# declare they read (PluginSpec.annotations) as it loads a cluster.
ANNOTATION = "deadline.example.com/evict-after"


class RemovePodsPastDeadlineArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """The plugin's args as a policy writes them (pluginConfig[].args); unknown keys are
    refused, as desched refuses them for every plugin."""

    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    # Evict this long before the deadline (a Go duration: 30m, 1h30m); 0s: once it has passed.
    lead_time: str = "0s"


def validate(args: RemovePodsPastDeadlineArgs) -> list[str]:
    """Every problem of the args, one message each (`desched validate` prints them, exit 2)."""
    errs = validate_namespaces(args.namespaces) + validate_label_selector(args.label_selector)
    try:
        lead = parse_duration(args.lead_time)
    except DurationError as err:
        errs.append(f"leadTime: {err}")
    else:
        if lead < 0:
            errs.append(f"leadTime: must not be negative, got {args.lead_time}")
    return errs


def judge(pod: Pod, now: datetime, lead: timedelta, lead_text: str) -> tuple[datetime | None, str]:
    """(its deadline, why the pod is due) when it is due; (None, why not) when it is not."""
    value = pod.metadata.annotations.get(ANNOTATION)
    if value is None:
        return None, f"pod has no {ANNOTATION} annotation"
    try:
        deadline = datetime.fromisoformat(value)
    except ValueError:
        return None, f"annotation {ANNOTATION} {value!r} is not an RFC 3339 time"
    if deadline.tzinfo is None:
        deadline = deadline.replace(tzinfo=UTC)
    left = (deadline - now).total_seconds()
    if left <= 0:
        return deadline, f"deadline {value} ({ANNOTATION}) passed {human_duration(-left)} ago"
    if deadline - lead <= now:
        return deadline, (f"deadline {value} ({ANNOTATION}) is {human_duration(left)} away, "
                          f"within leadTime {lead_text}")
    return None, f"deadline {value} ({ANNOTATION}) is {human_duration(left)} away"


class RemovePodsPastDeadline:
    """Built once per profile and cycle with its (validated, defaulted) args and its handle."""

    def __init__(self, args: RemovePodsPastDeadlineArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.lead = timedelta(seconds=parse_duration(args.lead_time))
        self.labels = None if selector_is_empty(args.label_selector) \
            else compile_selector(args.label_selector)

    def deschedule(self, nodes: list[Node]) -> None:
        handle, now = self.handle, self.handle.now
        candidates: list[tuple[datetime, str, Pod]] = []
        for node in nodes:
            for pod in handle.snapshot.pods_on_node(node.name):
                if ANNOTATION not in pod.metadata.annotations:
                    continue
                if not namespace_allowed(self.args.namespaces, pod.namespace):
                    continue
                if self.labels is not None and not self.labels(pod.metadata.labels):
                    continue
                deadline, why = judge(pod, now, self.lead, self.args.lead_time)
                if deadline is None:
                    if why.startswith("annotation"):  # a mistake: the report lists it as kept
                        handle.skip(pod, why)
                    continue
                # The profile's filters (DefaultEvictor's protections, PingPongGuard...).
                if not handle.filter(pod) or not handle.pre_eviction_filter(pod):
                    continue
                candidates.append((deadline, why, pod))
        candidates.sort(key=lambda c: (c[0], c[2].namespace, c[2].name))
        for _, reason, pod in candidates:
            try:
                handle.evict(pod, reason)
            except EvictionLimitError as err:
                if err.scope == "total":
                    return
                # A node or namespace limit only skips this pod.

    def verdict(self, pod: Pod, nodes: list[Node]) -> str | None:
        """Why the run passed the pod over (`desched explain`); its namespace is explain's to
        check (the spec's scope says it)."""
        if self.labels is not None and not self.labels(pod.metadata.labels):
            return "pod's labels do not match the plugin's labelSelector"
        deadline, why = judge(pod, self.handle.now, self.lead, self.args.lead_time)
        return why if deadline is None else None


SPEC = PluginSpec(
    name=NAME,
    extension_points=frozenset({"deschedule"}),
    args_type=RemovePodsPastDeadlineArgs,
    factory=RemovePodsPastDeadline,
    validate=validate,
    # A fresh pod is the point, wherever it lands.
    purpose="replace",
    # What `simulate` and `explain` are told of its scope: the namespaces it considers.
    scope=lambda args: Scope(namespaces=namespace_scope("namespaces", args.namespaces)),
    annotations=(ANNOTATION,),
)
