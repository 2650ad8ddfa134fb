"""Koordinator's `DeschedulerConfiguration` (descheduler/v1alpha2), decoded strictly as
koord-descheduler does, with its defaults and plugin-set merging."""

from __future__ import annotations

import ipaddress
from typing import Any

import msgspec

from desched.decoding.go import aggregate
from desched.decoding.plugin_set import merge_plugin_set
from desched.decoding.unknown_fields import describe, unknown_fields
from desched.errors import quote, shown
from desched.framework.evictor import Limits
from desched.framework.moves import args as moves_args
from desched.framework.moves.args import MovesArgs
from desched.framework.policy import Policy, ProcessSettings, ProfileConfig
from desched.framework.registry import Plugins
from desched.model.labels import SelectorError, compile_selector, selector_is_empty
from desched.model.meta import LabelSelector
from desched.policy_files.args import ArgsError, decode_args
from desched.policy_files.decoding import DecodingError, convert
from desched.policy_files.errors import DecodeError, PolicyError
from desched.policy_files.hints import did_you_mean, plugin_hint
from desched.policy_files.unknown import plugin_args_fields
from desched.policy_files.upstream import check_default_evictor, moves_warnings
from desched.util.duration import Duration, parse_duration

DEFAULT_PROFILE = "koord-descheduler"
# Koordinator's default plugins: MigrationController evicts and filters.
_DEFAULTS = {"evict": ["MigrationController"], "filter": ["MigrationController"],
             "deschedule": [], "balance": []}


class _Named(msgspec.Struct, forbid_unknown_fields=True):
    name: str = ""


class _PluginSet(msgspec.Struct, forbid_unknown_fields=True):
    enabled: list[_Named] = []
    disabled: list[_Named] = []


class _Plugins(msgspec.Struct, forbid_unknown_fields=True):
    deschedule: _PluginSet | None = None
    balance: _PluginSet | None = None
    evict: _PluginSet | None = None
    filter: _PluginSet | None = None


class _PluginConfig(msgspec.Struct, forbid_unknown_fields=True):
    name: str = ""
    args: Any = None


class _Profile(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    name: str = ""
    plugin_config: list[_PluginConfig] = []
    plugins: _Plugins | None = None
    node_selector: LabelSelector | None = None


class _LeaderElection(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    leader_elect: bool | None = None
    # metav1.Duration fields: unused here, but Koordinator refuses the file over a bad one.
    lease_duration: Duration | None = None
    renew_deadline: Duration | None = None
    retry_period: Duration | None = None
    resource_lock: str | None = None
    resource_name: str | None = None
    resource_namespace: str | None = None


class _ClientConnection(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    kubeconfig: str = ""
    accept_content_types: str = ""
    content_type: str = ""
    qps: float | None = None
    burst: int | None = None


class DeschedulerConfiguration(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """The schema of koord-descheduler's file (descheduler/v1alpha2 DeschedulerConfiguration):
    what this loader decodes, before profiles are built from it."""

    api_version: str = ""
    kind: str = ""
    leader_election: _LeaderElection | None = None
    client_connection: _ClientConnection | None = None
    enable_profiling: bool | None = None
    enable_contention_profiling: bool | None = None
    healthz_bind_address: str | None = None
    metrics_bind_address: str | None = None
    descheduling_interval: Duration | None = None
    dry_run: bool = False
    profiles: list[_Profile] = []
    node_selector: LabelSelector | None = None
    max_no_of_pods_to_evict_per_node: int | None = None
    max_no_of_pods_to_evict_per_namespace: int | None = None
    max_no_of_pods_to_evict_total: int | None = None
    # desched's extension (framework/moves); koord-descheduler would refuse the key.
    moves: MovesArgs | None = None


def _merge(defaults: list[str], user: _PluginSet | None) -> list[str]:
    """The profile's plugins at one extension point: kube-scheduler's mergePluginSet of the
    defaults and the user's set (decoding/plugin_set.py); no set keeps the defaults."""
    if user is None:
        return list(defaults)
    return merge_plugin_set(defaults, [p.name for p in user.enabled],
                            {p.name for p in user.disabled}, str)


def _bind_address(value: str | None, field: str, errs: list[str]) -> None:
    """Koordinator's check, after its defaulting has given a bare IP port 10251."""
    if value is None or _is_ip(value):
        return
    _, sep, port = value.rpartition(":")
    if not sep or not port or not port.isdigit():
        errs.append(f"{field}: Invalid value: {value!r}: must be a valid host:port"
                    .replace("'", '"'))


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def load_koordinator(path: str, doc: dict[str, Any], plugins: Plugins) -> Policy:
    try:
        cfg = convert(doc, DeschedulerConfiguration)
    except DecodingError as err:
        raise DecodeError(path, str(err)) from None
    errs: list[str] = []

    profiles_in = cfg.profiles or [_Profile(name=DEFAULT_PROFILE)]
    if len(profiles_in) == 1 and not profiles_in[0].name:
        profiles_in[0].name = DEFAULT_PROFILE
    seen: set[str] = set()
    for i, profile in enumerate(profiles_in):
        if not profile.name:
            errs.append(f"profiles[{i}].name: Required value")
        elif profile.name in seen:
            errs.append(f"profiles[{i}].name: Duplicate value: {quote(profile.name)}")
        seen.add(profile.name)
        names: set[str] = set()
        for j, pc in enumerate(profile.plugin_config):
            if pc.name in names:
                errs.append(f'profiles[{i}].pluginConfig[{j}]: Duplicate value: "{pc.name}"')
            names.add(pc.name)
    _bind_address(cfg.healthz_bind_address, "healthzBindAddress", errs)
    _bind_address(cfg.metrics_bind_address, "metricsBindAddress", errs)
    node_selector = None
    if cfg.node_selector is not None and not selector_is_empty(cfg.node_selector):
        try:
            node_selector = compile_selector(cfg.node_selector, validate=True)
        except SelectorError as err:
            errs.append(f"nodeSelector: Invalid value: {err}")
    interval = parse_duration(cfg.descheduling_interval) if cfg.descheduling_interval else 0.0
    if cfg.moves is not None:
        errs.extend(moves_args.validate(cfg.moves))
    if errs:
        raise PolicyError(path, errs)

    profiles = [_build_profile(path, i, p, plugins) for i, p in enumerate(profiles_in)]
    for value, name in ((cfg.max_no_of_pods_to_evict_per_node, "maxNoOfPodsToEvictPerNode"),
                        (cfg.max_no_of_pods_to_evict_per_namespace,
                         "maxNoOfPodsToEvictPerNamespace"),
                        (cfg.max_no_of_pods_to_evict_total, "maxNoOfPodsToEvictTotal")):
        if value is not None and value < 0:
            raise DecodeError(path, f"json: cannot unmarshal number {value} into Go struct field "
                                    f"DeschedulerConfiguration.{name} of type uint")
    return Policy(
        path=path, format="koordinator", profiles=profiles, plugins=plugins,
        limits=Limits(per_node=cfg.max_no_of_pods_to_evict_per_node,
                      per_namespace=cfg.max_no_of_pods_to_evict_per_namespace,
                      total=cfg.max_no_of_pods_to_evict_total),
        node_selector=node_selector, dry_run=cfg.dry_run, descheduling_interval=interval,
        process=_process_settings(cfg),
        moves=cfg.moves,
        # Decoding is strict: only the label selectors (lenient) can hold unknown keys.
        warnings=describe(path, unknown_fields(doc, DeschedulerConfiguration)
                          + plugin_args_fields(doc, plugins))
        + moves_warnings(path, cfg.moves) + _migrating_moves(path, cfg.moves, profiles),
    )


def _process_settings(cfg: DeschedulerConfiguration) -> ProcessSettings:
    election = cfg.leader_election or _LeaderElection()
    client = cfg.client_connection or _ClientConnection()
    return ProcessSettings(
        leader_elect=election.leader_elect,
        lease_duration=election.lease_duration, renew_deadline=election.renew_deadline,
        retry_period=election.retry_period, resource_lock=election.resource_lock or None,
        resource_name=election.resource_name or None,
        resource_namespace=election.resource_namespace or None,
        kubeconfig=client.kubeconfig or None, qps=client.qps, burst=client.burst,
        content_type=client.content_type or None,
        accept_content_types=client.accept_content_types or None,
        healthz_bind_address=cfg.healthz_bind_address,
        metrics_bind_address=cfg.metrics_bind_address,
        enable_profiling=cfg.enable_profiling,
        enable_contention_profiling=cfg.enable_contention_profiling)


def _migrating_moves(path: str, moves: MovesArgs | None,
                     profiles: list[ProfileConfig]) -> list[str]:
    """MigrationController paces its own jobs: `moves` leaves the profiles it evicts for."""
    if moves is None or not moves.active:
        return []
    named = [p.name for p in profiles if "MigrationController" in p.enabled.get("evict", [])]
    if not named:
        return []
    return [f"{path}: moves: profile(s) {', '.join(named)} evict through MigrationController, "
            f"whose own limits (maxMigratingPerWorkload, maxUnavailablePerWorkload) pace its "
            f"PodMigrationJobs; moves applies to the profiles that evict with DefaultEvictor"]


def _build_profile(path: str, index: int, profile: _Profile,
                   plugins: Plugins) -> ProfileConfig:
    ps = profile.plugins or _Plugins()
    enabled = {
        "deschedule": _merge(_DEFAULTS["deschedule"], ps.deschedule),
        "balance": _merge(_DEFAULTS["balance"], ps.balance),
        "evict": _merge(_DEFAULTS["evict"], ps.evict),
        "filter": _merge(_DEFAULTS["filter"], ps.filter),
    }
    where = f"profile {quote(profile.name)}"
    for ep, names in enabled.items():
        for i, name in enumerate(names):
            # mergePluginSet keeps repeated names; the framework then refuses them.
            if name in names[:i]:
                raise PolicyError(path, f'{where}: plugin {quote(name)} already registered as '
                                        f'"{ep}"')
            spec = plugins.get(name)
            if spec is None:
                raise PolicyError(path, f"{where}: {ep} plugin {quote(name)} is not registered"
                                        f"{did_you_mean(name, plugins)}")
            if ep not in spec.extension_points:
                hint = plugin_hint(name, plugins, ("deschedule", "balance", "evict", "filter"))
                raise PolicyError(path, f"{where}: plugin {quote(name)} does not extend {ep}"
                                        + (f"; {hint}" if hint else ""))
    if not enabled["evict"]:
        raise PolicyError(path, f"{where}: no evict plugin is enabled")
    if len(enabled["evict"]) > 1:
        raise PolicyError(path, f"{where}: only one evict plugin can be enabled")

    cfg = ProfileConfig(name=profile.name, enabled=enabled)
    # Filters double as preEvictionFilters (Koordinator ANDs both over the filter plugins).
    cfg.enabled["preevictionfilter"] = list(enabled["filter"])
    raw_args = {pc.name: pc.args for pc in profile.plugin_config}
    places = {pc.name: f"profiles[{index}].pluginConfig[{j}].args"
              for j, pc in enumerate(profile.plugin_config)}
    wanted = {n for names in enabled.values() for n in names} | set(raw_args)
    errs: list[str] = []
    for name in sorted(wanted, key=lambda n: (n not in raw_args, n)):
        spec = plugins.get(name)
        if spec is None:
            raise PolicyError(path, f"{where}: plugin {shown(name)} in pluginConfig not "
                                    f"registered{did_you_mean(name, plugins)}")
        try:
            args = decode_args(spec.args_type, raw_args.get(name), spec.args_kind or f"{name}Args",
                               places.get(name, ""))
        except ArgsError as err:
            raise DecodeError(path, str(err)) from None
        spec.default(args)
        plugin_errs = spec.validate(args)
        if plugin_errs:
            errs.append(f"{where}: {shown(name)}: {aggregate(plugin_errs)}")
        cfg.args[name] = args
    if "DefaultEvictor" in cfg.args:
        problem = check_default_evictor(cfg.args["DefaultEvictor"])
        if problem:
            errs.append(f"{where}: {problem}")
    if errs:
        raise PolicyError(path, errs)
    if profile.node_selector is not None and not selector_is_empty(profile.node_selector):
        try:
            cfg.node_selector = compile_selector(profile.node_selector, validate=True)
        except SelectorError as err:
            raise PolicyError(path, f"{where}: nodeSelector: {err}") from None
    return cfg
