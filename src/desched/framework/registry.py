"""What a plugin declares: its name, args type, defaulting, validation, extension points and
factory, and what it reads and how it is scoped (Scope). The plugins themselves sit above the
framework; the catalog lists them (desched.plugins.catalog: the built-ins and the installed
packages' plugins alike)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from desched.framework.types import Handle
from desched.model.labels import Matcher
from desched.model.meta import LabelSelector
from desched.model.resources import BY_KIND

# What a plugin's evictions exist for, by which a report judges them (churn, docs/report.md):
# - "balance": spread or pack utilization (LowNodeUtilization, HighNodeUtilization,
#   LowNodeLoad): an eviction that moved no balance figure bought nothing, a replacement back
#   on its node undid the eviction;
# - "relocate": take the pod off a node it must not be on (a taint, an affinity, a spread): a
#   replacement placed back there brings the violation back;
# - "replace": a fresh pod instead of an old, failed or crash-looping one, wherever it lands.
Purpose = Literal["balance", "relocate", "replace"]


@dataclass(frozen=True)
class RoleThreshold:
    """A threshold that decides a node's role in a utilization plugin's run (source, target),
    in percent of allocatable, on a series of the reports ("cpu requests", "memory usage",
    "pods"): LowNodeUtilization's `thresholds` (low) and `targetThresholds` (high)."""

    series: str
    percent: float
    role: Literal["low", "high"]
    arg: str  # the args' field that sets it: "thresholds", "targetThresholds", ...
    # A node pool's name (LowNodeLoad's nodePools) and the nodes it applies to; "" and None:
    # every node the plugin reads.
    pool: str = ""
    node_selector: LabelSelector | None = None
    plugin: str = ""  # the plugin's name (utilization.role_thresholds sets it)


@dataclass(frozen=True)
class Reads:
    """Kinds a configured plugin reads from the cluster beyond nodes and pods, and who reads them
    for what, in a few words: a snapshot that lacks one is warned of, naming `who` ("LowNodeLoad
    (node and pod usage)"). The kinds are those desched reads (model/resources.py)."""

    kinds: tuple[str, ...]
    who: str

    def __post_init__(self) -> None:
        unknown = [kind for kind in self.kinds if kind not in BY_KIND]
        if unknown:
            raise ValueError(f"Reads({self.who!r}): {', '.join(unknown)} is not a kind desched "
                             f"reads: one of {', '.join(sorted(BY_KIND))}")


@dataclass(frozen=True)
class NamespaceScope:
    """A namespace include or exclude of the args: the plugin considers no pod outside it.
    `field` is the key a policy writes ("namespaces", "evictableNamespaces")."""

    field: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def allows(self, namespace: str) -> bool:
        """Whether a pod of `namespace` is inside (upstream: include wins, then exclude)."""
        if self.include:
            return namespace in self.include
        return namespace not in self.exclude


@dataclass(frozen=True)
class NodeScope:
    """A node selector of the args: the plugin works on (or, per `unmatched`, looks at) no node
    outside it. `field` is how a policy names it ("nodeSelector", 'nodePools "gpu"
    nodeSelector'), `selector` its text as kubectl writes one; `unmatched`, when not "", says
    what matching no node at all means for the plugin ("its nodeFit finds no other node")."""

    field: str
    selector: str
    matcher: Matcher
    unmatched: str = ""


@dataclass(frozen=True)
class Scope:
    """What one configured plugin reads and how it is scoped, from its args: `simulate` warns
    of a kind the snapshot lacks and of a selector or namespace include that matches nothing;
    `explain` says when a pod is outside the plugin's namespaces."""

    reads: tuple[Reads, ...] = ()
    namespaces: tuple[NamespaceScope, ...] = ()
    nodes: tuple[NodeScope, ...] = ()


def no_scope(args: Any) -> Scope:
    """A plugin that reads nothing beyond nodes and pods and has no namespace or node scope."""
    return Scope()


@dataclass(frozen=True)
class PluginSpec:
    name: str
    extension_points: frozenset[str]
    args_type: type
    factory: Callable[[Any, Handle], object]
    validate: Callable[[Any], list[str]] = lambda args: []
    # Notes about args that are valid but may not do what the user means, one line each: the
    # policy loader adds them to the policy's warnings.
    warnings: Callable[[Any], list[str]] = lambda args: []
    default: Callable[[Any], None] = lambda args: None
    # Koordinator decodes args of its own plugins by the kind "<Name>Args"; upstream names them too.
    args_kind: str = ""
    # Every threshold its args set that decides a node's role, low and high, per series and
    # node pool, for the reports' balance figures and plots; none when they are relative
    # (deviation thresholds) or the plugin has none.
    role_thresholds: Callable[[Any], list[RoleThreshold]] = lambda args: []
    # What its evictions exist for (see Purpose). Unknown plugins are taken to relocate.
    purpose: Purpose = "relocate"
    # What the configured plugin reads and how it is scoped (see Scope), from its defaulted,
    # validated args. `simulate`, `explain` and `run` ask this, never the plugin's class or name.
    scope: Callable[[Any], Scope] = no_scope
    # An evict plugin that evicts through PodMigrationJobs (MigrationController): `desched run`
    # creates a job per eviction and runs the migration controller for its profile. Its args
    # are then a desched.migration.args.MigrationControllerArgs (the controller's settings).
    evicts_through_migration_jobs: bool = False
    # Annotation keys (or prefixes: "example.com/") its decisions read. Others are dropped as
    # objects are loaded (model/meta.py): a plugin reading one must declare it.
    annotations: tuple[str, ...] = ()


# Plugin name -> spec: what a policy is decoded against and its profiles are built from
# (desched.plugins.catalog.PLUGINS is every plugin desched has).
Plugins = Mapping[str, PluginSpec]
