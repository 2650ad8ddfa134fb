"""kubernetes-sigs/descheduler `DeschedulerPolicy` v1alpha2 (and v1alpha1, converted as v0.30 did).

Follows upstream's load order: top-level decoding is lenient and
case-sensitive, plugin args are strict; validation runs before defaulting and its errors are
aggregated; DefaultEvictor is injected into every profile; every enabled plugin must be
registered for its extension point and have a pluginConfig entry.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from desched.decoding.go import aggregate
from desched.decoding.unknown_fields import describe, unknown_fields
from desched.errors import quote, shown
from desched.framework.evictor import Limits
from desched.framework.moves import args as moves_args
from desched.framework.moves.args import MovesArgs
from desched.framework.policy import MetricsProvider, Policy, ProfileConfig
from desched.framework.registry import Plugins, PluginSpec
from desched.model.labels import SelectorError, parse_selector_string
from desched.model.pod import SYSTEM_CRITICAL_PRIORITY
from desched.policy_files.args import ArgsError, decode_args
from desched.policy_files.decoding import DecodingError, convert
from desched.policy_files.errors import DecodeError, PolicyError
from desched.policy_files.hints import did_you_mean, plugin_config_hint, plugin_hint
from desched.policy_files.unknown import plugin_args_fields

# Upstream's spelling of each extension point key, and how its profile error names it.
_EP_KEYS = {"deschedule": "deschedule", "balance": "balance", "filter": "filter",
            "preevictionfilter": "preEvictionFilter"}


class _PluginSet(msgspec.Struct):
    enabled: list[str] = []
    disabled: list[str] = []


class _Plugins(msgspec.Struct):
    presort: _PluginSet | None = None
    sort: _PluginSet | None = None
    deschedule: _PluginSet | None = None
    balance: _PluginSet | None = None
    filter: _PluginSet | None = None
    preevictionfilter: _PluginSet | None = None
    # Not a key upstream reads (its JSON tag is lower-case), but its README shows it: accepted.
    pre_eviction_filter: _PluginSet | None = msgspec.field(default=None, name="preEvictionFilter")


class _PluginConfig(msgspec.Struct):
    name: str = ""
    args: Any = None


class _Profile(msgspec.Struct, rename="camel"):
    name: str = ""
    plugin_config: list[_PluginConfig] = []
    plugins: _Plugins | None = None


class _SecretRef(msgspec.Struct):
    namespace: str = ""
    name: str = ""


class _AuthToken(msgspec.Struct, rename="camel"):
    secret_reference: _SecretRef | None = None


class _Prometheus(msgspec.Struct, rename="camel"):
    url: str = ""
    auth_token: _AuthToken | None = None


class _MetricsProvider(msgspec.Struct):
    source: str = ""
    prometheus: _Prometheus | None = None


class _MetricsCollector(msgspec.Struct):
    enabled: bool = False


class PolicySchema(msgspec.Struct, rename="camel"):
    profiles: list[_Profile] = []
    node_selector: str | None = None
    max_no_of_pods_to_evict_per_node: int | None = None
    max_no_of_pods_to_evict_per_namespace: int | None = None
    max_no_of_pods_to_evict_total: int | None = None
    eviction_failure_event_notification: bool | None = None
    metrics_collector: _MetricsCollector | None = None
    metrics_providers: list[_MetricsProvider] = []
    grace_period_seconds: int | None = None
    # desched's extension (framework/moves), strict where the rest of the top level is not.
    moves: MovesArgs | None = None


def _go_url_parse_error(url: str) -> str | None:
    """The error Go's url.Parse gives for `url` (the cases a Prometheus URL can hit), or None.

    Python's urlparse accepts what Go rejects (e.g. `http://example.com:-80`), so the checks
    are Go's: control characters, a leading ':' (no scheme), `]` and the port after the host.
    """
    quoted = json.dumps(url, ensure_ascii=False)  # Go's %q, which keeps the message one line
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return f"parse {quoted}: net/url: invalid control character in URL"
    if url.startswith(":"):
        return f"parse {quoted}: missing protocol scheme"
    rest = url.split("#", 1)[0]
    scheme = re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", rest)
    if scheme:
        rest = rest[scheme.end():].split("?", 1)[0]
    if not rest.startswith("//"):
        return None
    host = rest[2:].split("/", 1)[0].rpartition("@")[2]
    if host.startswith("["):
        end = host.rfind("]")
        if end < 0:
            return f"parse {quoted}: missing ']' in host"
        port = host[end + 1:]
    else:
        colon = host.rfind(":")
        port = host[colon:] if colon >= 0 else ""
    if port and (port[0] != ":" or any(c not in "0123456789" for c in port[1:])):
        return f"parse {quoted}: invalid port {json.dumps(port, ensure_ascii=False)} after host"
    return None


def _validate_top_level(pol: PolicySchema) -> list[str]:
    errs: list[str] = []
    # Upstream keys providers by source (the first of a source is kept), so a repeated source is
    # reported once and its later entries are not checked again.
    first: dict[str, _MetricsProvider] = {}
    for provider in pol.metrics_providers:
        if provider.source in first:
            errs.append(f"metric provider {provider.source!r} is already configured, each source "
                        f"can be configured only once".replace("'", '"'))
        else:
            first[provider.source] = provider
    enabled_collector = pol.metrics_collector is not None and pol.metrics_collector.enabled
    for provider in first.values():
        if provider.source == "KubernetesMetrics" and enabled_collector:
            errs.append("it is not allowed to combine metrics provider when metrics collector "
                        "is enabled")
        if provider.source == "Prometheus":
            prom = provider.prometheus
            if prom is None:
                errs.append("prometheus configuration is required when prometheus source is "
                            "enabled")
                continue
            if not prom.url:
                errs.append("prometheus URL is required when prometheus is enabled")
            else:
                url_err = _go_url_parse_error(prom.url)
                if url_err:
                    errs.append(f"error parsing prometheus URL: {url_err}")
            token = prom.auth_token
            if token is not None:
                ref = token.secret_reference
                if ref is None:
                    errs.append("prometheus authToken secret is expected to be set when "
                                "authToken field is")
                elif not ref.name or not ref.namespace:
                    errs.append("prometheus authToken secret reference does not set both "
                                "namespace and name")
    return errs


def _non_negative(path: str, name: str, value: int | None) -> int | None:
    if value is not None and value < 0:
        raise DecodeError(path, f"json: cannot unmarshal number {value} into Go struct field "
                                f"DeschedulerPolicy.{name} of type uint")
    return value


def check_default_evictor(args: Any) -> str | None:
    """What upstream finds wrong with DefaultEvictor args only after validation: a priority
    threshold value above system-critical (setDefaultEvictor, at load time) and a nodeSelector
    that does not parse (when the plugin is built). None if both are fine. A threshold given by
    class name is resolved against the snapshot when the plugin is built."""
    pt = getattr(args, "priority_threshold", None)
    if pt is not None and pt.value is not None and pt.value > SYSTEM_CRITICAL_PRIORITY:
        return f"priority threshold can't be greater than {SYSTEM_CRITICAL_PRIORITY}"
    node_selector = getattr(args, "node_selector", "")
    if node_selector:
        try:
            parse_selector_string(node_selector)
        except SelectorError as err:
            return f"DefaultEvictor nodeSelector: {err}"
    return None


def load_v1alpha2(path: str, doc: dict[str, Any], plugins: Plugins) -> Policy:
    try:
        pol = convert(doc, PolicySchema)
    except DecodingError as err:
        raise DecodeError(path, str(err)) from None
    limits = Limits(
        per_node=_non_negative(path, "maxNoOfPodsToEvictPerNode",
                               pol.max_no_of_pods_to_evict_per_node),
        per_namespace=_non_negative(path, "maxNoOfPodsToEvictPerNamespace",
                                    pol.max_no_of_pods_to_evict_per_namespace),
        total=_non_negative(path, "maxNoOfPodsToEvictTotal", pol.max_no_of_pods_to_evict_total),
    )

    # Decode every pluginConfig's args strictly (decode errors come before validation).
    decoded: list[list[tuple[str, Any, PluginSpec | None]]] = []
    for i, profile in enumerate(pol.profiles):
        entries: list[tuple[str, Any, PluginSpec | None]] = []
        for j, pc in enumerate(profile.plugin_config):
            spec = plugins.get(pc.name)
            if spec is None:
                entries.append((pc.name, pc.args, None))
                continue
            try:
                args = decode_args(spec.args_type, pc.args, spec.args_kind or f"{pc.name}Args",
                                   f"profiles[{i}].pluginConfig[{j}].args")
            except ArgsError as err:
                raise DecodeError(path, str(err)) from None
            entries.append((pc.name, args, spec))
        decoded.append(entries)

    # Validation, before defaulting, aggregated.
    errs: list[str] = []
    for profile, entries in zip(pol.profiles, decoded, strict=True):
        for name, args, spec in entries:
            if spec is None:
                errs.append(f"in profile {shown(profile.name)}: plugin {shown(name)} in "
                            f"pluginConfig not registered{did_you_mean(name, plugins)}")
                continue
            plugin_errs = spec.validate(args)
            if plugin_errs:
                errs.append(f"in profile {shown(profile.name)}: {aggregate(plugin_errs)}")
    errs.extend(_validate_top_level(pol))
    if pol.moves is not None:
        errs.extend(moves_args.validate(pol.moves))
    if errs:
        raise PolicyError(path, errs)

    profiles = [_build_profile(path, profile, entries, plugins)
                for profile, entries in zip(pol.profiles, decoded, strict=True)]

    node_selector = None
    if pol.node_selector:
        try:
            node_selector = parse_selector_string(pol.node_selector)
        except SelectorError as err:
            raise PolicyError(path, f"nodeSelector: {err}") from None
    providers = []
    for p in pol.metrics_providers:
        prom = p.prometheus
        ref = prom.auth_token.secret_reference if prom and prom.auth_token else None
        providers.append(MetricsProvider(
            source=p.source, prometheus_url=prom.url if prom else "",
            auth_token_secret=(ref.namespace, ref.name) if ref else None))
    return Policy(
        path=path, format="v1alpha2", profiles=profiles, plugins=plugins, limits=limits,
        node_selector=node_selector, node_selector_text=pol.node_selector or "",
        eviction_failure_event_notification=bool(pol.eviction_failure_event_notification),
        grace_period_seconds=pol.grace_period_seconds,
        metrics_collector_enabled=bool(pol.metrics_collector and pol.metrics_collector.enabled),
        metrics_providers=providers, moves=pol.moves,
        warnings=describe(path, unknown_fields(doc, PolicySchema, extra=("apiVersion", "kind"))
                          + plugin_args_fields(doc, plugins))
        + moves_warnings(path, pol.moves),
    )


def moves_warnings(path: str, moves: MovesArgs | None) -> list[str]:
    """The `moves` block's settings that do nothing, each naming the file."""
    if moves is None:
        return []
    return [f"{path}: {text}" for text in moves_args.warnings(moves)]


def _build_profile(path: str, profile: _Profile,
                   entries: list[tuple[str, Any, PluginSpec | None]],
                   plugins: Plugins) -> ProfileConfig:
    cfg = ProfileConfig(name=profile.name)
    for name, args, spec in entries:
        if spec is not None and name not in cfg.args:  # the first entry of a name wins
            cfg.args[name] = args
    ps = profile.plugins or _Plugins()
    pef = list((ps.preevictionfilter or _PluginSet()).enabled)
    for extra in (ps.pre_eviction_filter or _PluginSet()).enabled:
        if extra not in pef:
            pef.append(extra)
    cfg.enabled = {
        "deschedule": list((ps.deschedule or _PluginSet()).enabled),
        "balance": list((ps.balance or _PluginSet()).enabled),
        "filter": list((ps.filter or _PluginSet()).enabled),
        "preevictionfilter": pef,
    }
    # DefaultEvictor is always a filter and a preEvictionFilter (prepended when missing), and gets
    # a zero-value pluginConfig when it has none.
    for ep in ("filter", "preevictionfilter"):
        if "DefaultEvictor" not in cfg.enabled[ep]:
            cfg.enabled[ep].insert(0, "DefaultEvictor")
    if "DefaultEvictor" not in cfg.args:
        spec = plugins["DefaultEvictor"]
        cfg.args["DefaultEvictor"] = decode_args(spec.args_type, {}, "DefaultEvictorArgs")
    for name, args in cfg.args.items():
        plugins[name].default(args)
    problem = check_default_evictor(cfg.args["DefaultEvictor"])
    if problem:
        raise PolicyError(path, f"in profile {shown(profile.name)}: {problem}")

    # Profile construction checks (upstream NewProfile).
    for ep, key in _EP_KEYS.items():
        missing = [n for n in cfg.enabled[ep]
                   if n not in plugins or ep not in plugins[n].extension_points]
        if missing:
            listed = "[" + " ".join(shown(n) for n in missing) + "]"
            hints = [h for n in missing if (h := plugin_hint(n, plugins, tuple(_EP_KEYS)))]
            raise PolicyError(path, f"unable to create {quote(profile.name)} profile: profile "
                                    f"{quote(profile.name)} configures {key} extension point of "
                                    f"non-existing plugins: {listed}"
                                    + "".join(f"; {h}" for h in hints))
    for ep in _EP_KEYS:
        for name in cfg.enabled[ep]:
            if name not in cfg.args:
                spec = plugins[name]
                empty = spec.validate(decode_args(spec.args_type, {},
                                                  spec.args_kind or f"{name}Args"))
                raise PolicyError(path, f"unable to create {quote(profile.name)} profile: unable "
                                        f"to build {shown(name)} plugin: unable to find "
                                        f"{quote(name)} plugin config; "
                                        f"{plugin_config_hint(name, profile.name, empty)}")
    return cfg
