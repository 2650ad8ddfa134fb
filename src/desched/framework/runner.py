"""Building profiles from a policy and running descheduling cycles (upstream's run order:
every profile's deschedule plugins, then every profile's balance plugins)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NoReturn

from desched.errors import InputError
from desched.framework.background import InBackground
from desched.framework.decisions import DecisionLog
from desched.framework.evictor import (
    Evictor,
    EvictPlugin,
    ExecutionResult,
    Executor,
    ProfileEvictor,
)
from desched.framework.moves import MovePlanner, MoveTracker
from desched.framework.policy import Policy, ProfileConfig
from desched.framework.types import (
    BalancePlugin,
    Clock,
    DeschedulePlugin,
    FilterPlugin,
    Handle,
    UsageQueries,
)
from desched.framework.verdicts import ask_node_roles, ask_protections, ask_verdicts
from desched.model.labels import Matcher
from desched.model.node import Node
from desched.snapshot.cluster import ClusterSnapshot

SKIP_FEW_NODES = "Skipping descheduling cycle: requires >=2 nodes"
# Who the cycle's note on the evictions in background in progress is from (upstream's gate).
BACKGROUND_NOTE = "EvictionsInBackground"
# How the note of a plugin run that evicted nothing and said nothing starts (_says_why).
IDLE = "evicted nothing: "


@dataclass
class Profile:
    name: str
    evictor: ProfileEvictor
    node_selector: Matcher | None = None
    deschedule: list[tuple[str, DeschedulePlugin]] = field(default_factory=list)
    balance: list[tuple[str, BalancePlugin]] = field(default_factory=list)
    # Every plugin instance by name, whatever its extension points (evict and filter plugins
    # included): what it declares beyond them (framework.types) is asked of these.
    plugins: dict[str, object] = field(default_factory=dict)


def build_profile(cfg: ProfileConfig, snapshot: ClusterSnapshot, evictor: Evictor, clock: Clock,
                  log: DecisionLog, policy: Policy,
                  queries: UsageQueries | None = None) -> Profile:
    """Each distinct plugin is built once per profile, shared by the extension points it is
    enabled in. `queries`: how its usage sources query a metrics server (None: they cannot)."""
    specs = policy.plugins
    pe = ProfileEvictor(evictor, cfg.name)
    instances: dict[str, object] = {}

    def instance(name: str) -> object:
        if name not in instances:
            handle = Handle(snapshot, pe, clock, log, cfg.name, name, policy, queries)
            instances[name] = specs[name].factory(cfg.args[name], handle)
        return instances[name]

    def filters(point: str) -> list[FilterPlugin]:
        found = [instance(n) for n in cfg.enabled.get(point, [])]
        return [p if isinstance(p, FilterPlugin) else _lacks(p, point) for p in found]

    pe.plugins = instances
    pe.filters = filters("filter")
    pe.pre_eviction_filters = filters("preevictionfilter")
    evict_plugins = cfg.enabled.get("evict", [])
    if evict_plugins:
        # Koordinator: the profile's one evict plugin decides (DefaultEvictor has no evict
        # method of its own: the plain path).
        chosen = instance(evict_plugins[0])
        if isinstance(chosen, EvictPlugin):
            pe.evict_plugin = chosen
    deschedule = [(n, instance(n)) for n in cfg.enabled.get("deschedule", [])]
    balance = [(n, instance(n)) for n in cfg.enabled.get("balance", [])]
    return Profile(
        name=cfg.name, evictor=pe, node_selector=cfg.node_selector,
        deschedule=[(n, p if isinstance(p, DeschedulePlugin) else _lacks(p, "deschedule"))
                    for n, p in deschedule],
        balance=[(n, p if isinstance(p, BalancePlugin) else _lacks(p, "balance"))
                 for n, p in balance],
        plugins=instances,
    )


# A hook around every plugin run of a cycle, given (profile, plugin, extension point): the
# context it returns is entered just before the plugin's deschedule or balance and left just
# after, however that ends. `desched run` times the runs with one (live/plugin_timing.py);
# simulate registers none.
PluginRunHook = Callable[[str, str, str], AbstractContextManager[object]]


def _lacks(plugin: object, point: str) -> NoReturn:
    """A plugin enabled at an extension point it does not implement: its PluginSpec's
    extension points, which the policy loaders check, are wrong."""
    raise TypeError(f"{type(plugin).__name__} does not implement the {point} extension point")


@dataclass
class Descheduler:
    """A policy bound to a snapshot and an executor; `run_cycle` may be called repeatedly and
    plugin state (e.g. anomaly detectors) carries over."""

    policy: Policy
    snapshot: ClusterSnapshot
    executor: Executor
    clock: Clock
    log: DecisionLog = field(default_factory=DecisionLog)
    profiles: list[Profile] = field(default_factory=list)
    # What moves carry across cycles (framework/moves): a live run hands its own to each
    # cycle's Descheduler; otherwise one lives as long as this Descheduler.
    moves: MoveTracker = field(default_factory=MoveTracker)
    # Around each plugin run, in registration order (see PluginRunHook).
    hooks: list[PluginRunHook] = field(default_factory=list)
    # How the plugins' usage sources query a metrics server (`desched run`'s live layer);
    # None: they cannot (simulate makes no network requests).
    queries: UsageQueries | None = None
    # The evictions in background in progress, observed on the snapshot at each cycle's start
    # (framework/background.py); None: not tracked (upstream's gate off).
    background: InBackground | None = None
    evictor: Evictor = field(init=False)

    def __post_init__(self) -> None:
        self.evictor = Evictor(self.policy.limits, self.executor, self.log,
                               dry_run=self.policy.dry_run, background=self.background)
        if self.policy.moves is not None and self.policy.plans_moves:
            self.evictor.moves = MovePlanner(self.policy.moves, self.evictor, self.snapshot,
                                             self.clock, self.log, self.moves)
        self.profiles = [build_profile(cfg, self.snapshot, self.evictor, self.clock, self.log,
                                       self.policy, self.queries)
                         for cfg in self.policy.profiles]

    def use_executor(self, executor: Executor) -> None:
        """Carry evictions out through `executor` from now on: the Evictor behind every
        profile (and the moves it plans) holds it too."""
        self.executor = self.evictor.executor = executor

    def register_hook(self, hook: PluginRunHook) -> None:
        """Wrap every plugin run from now on in `hook` (the profiles' lists stay as built)."""
        self.hooks.append(hook)

    def _hooked(self, profile: str, plugin: str, point: str) -> AbstractContextManager[object]:
        return self._in_hooks(profile, plugin, point) if self.hooks else nullcontext()

    @contextmanager
    def _in_hooks(self, profile: str, plugin: str, point: str) -> Iterator[None]:
        with ExitStack() as stack:
            for hook in self.hooks:
                stack.enter_context(hook(profile, plugin, point))
            yield

    def nodes(self) -> list[Node]:
        return list(self.snapshot.ready_nodes(self.policy.node_selector))

    def run_cycle(self, cycle: int) -> str | None:
        """One descheduling cycle; returns why it was skipped, if it was.

        The cyclic garbage collector is paused meanwhile: a cycle over 150k pods allocates
        millions of short-lived containers, and the collector's passes over them cost ~7% of
        the cycle while finding next to nothing (a cycle creates few reference cycles)."""
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run_cycle(cycle)
        finally:
            if was_enabled:
                gc.enable()

    def _run_cycle(self, cycle: int) -> str | None:
        log = self.log
        log.cycle = cycle
        self.evictor.new_cycle()
        background = self.background
        if background is not None:
            background.observe(self.snapshot.pods)
            if background.total:
                log.note("", "", BACKGROUND_NOTE, background.describe())
        nodes = self.nodes()
        if len(nodes) < 2:
            return SKIP_FEW_NODES
        if log.explaining:  # a protection is told first, whichever plugins ask about the pod
            for profile in self.profiles:
                ask_protections(log, self.snapshot, profile.evictor)

        def scoped(profile: Profile) -> list[Node]:
            sel = profile.node_selector
            return nodes if sel is None else [n for n in nodes if sel(n.metadata.labels)]

        for profile in self.profiles:
            profile_nodes = scoped(profile)
            for name, plugin in profile.deschedule:
                with self._says_why(cycle, profile.name, name, plugin, profile_nodes), \
                        self._moves(), self._hooked(profile.name, name, "deschedule"):
                    plugin.deschedule(profile_nodes)
        for profile in self.profiles:
            profile_nodes = scoped(profile)
            for name, balancer in profile.balance:
                with self._says_why(cycle, profile.name, name, balancer, profile_nodes), \
                        self._moves(), self._hooked(profile.name, name, "balance"):
                    balancer.balance(profile_nodes)
        return None

    @contextmanager
    def _moves(self) -> Iterator[None]:
        """The moves a plugin's run planned are carried out once it ends (framework/moves);
        a run that fails leaves them undone."""
        try:
            yield
        except BaseException:
            self.evictor.drop_moves()
            raise
        self.evictor.flush_moves()

    @contextmanager
    def _says_why(self, cycle: int, profile: str, plugin: str, instance: object,
                  nodes: list[Node]) -> Iterator[None]:
        """A plugin run that evicted nothing and said nothing gets a note saying so, with what
        it kept and why (a plugin that had a reason of its own has recorded it). Under
        `explain`, the plugin's verdict on each explained pod it said nothing about."""
        log = self.log
        decisions, notes = len(log.decisions), len(log.notes)
        yield
        if log.explaining:
            ask_verdicts(log, self.snapshot, profile, plugin, instance, nodes, decisions)
            ask_node_roles(log, profile, plugin, instance, nodes)
        if any(d.plugin == plugin and d.profile == profile and d.outcome != "filtered"
               for d in log.decisions[decisions:]):
            return
        if any(n.plugin == plugin and n.profile == profile for n in log.notes[notes:]):
            return
        kept = log.kept_by(cycle, profile, plugin)
        if not kept:
            log.note("", profile, plugin, f"{IDLE}no pod met its criteria")
            return
        shown = "; ".join(f"{reason} ({n})" for reason, n in kept.most_common(3))
        more = f"; and {len(kept) - 3} other reason(s)" if len(kept) > 3 else ""
        log.note("", profile, plugin, f"{IDLE}the {sum(kept.values())} pod(s) it considered "
                                      f"were kept: {shown}{more}")


class _BuildOnly:
    """check_policy's executor: its profiles are built and never run."""

    def evict(self, pod: object, profile: str, plugin: str, reason: str) -> ExecutionResult:
        return ExecutionResult(False, "failed", "the policy is only being checked")


def check_policy(policy: Policy) -> None:
    """Build every profile's plugins without a cluster, so the errors a plugin raises when it
    is built (argument combinations its validator does not see) surface before any cycle.
    Raises InputError."""
    snapshot = ClusterSnapshot(placeholder=True)
    try:
        Descheduler(policy, snapshot, _BuildOnly(), Clock(datetime.now(UTC)))
    except InputError as err:
        if err.source or not policy.path:
            raise
        raise InputError(policy.path, err.message) from None
