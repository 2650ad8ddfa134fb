"""`desched convert`: any accepted policy as the descheduler/v1alpha2 DeschedulerPolicy desched
runs, so the historic and Koordinator formats can be read, reviewed and kept in the current one.

The output is built from the loaded policy (enabled plugins per extension point, after upstream's
v1alpha1 conversion, Koordinator's plugin-set merging and the DefaultEvictor upstream injects)
and the args as written, so loading it back gives the same profiles and limits. What a v1alpha2
policy cannot hold is refused when it changes decisions (an evict plugin other than
DefaultEvictor, a profile without DefaultEvictor among its filters, per-profile node selectors,
Koordinator's dryRun) and otherwise named in notes: run-time settings, with the `desched run`
flag that takes their place.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import yaml

from desched.decoding.document import one_document
from desched.errors import InputError, quote
from desched.framework.policy import Policy, ProfileConfig
from desched.framework.registry import Plugins
from desched.model.meta import LabelSelector
from desched.policy_files.loader import POLICY_KEYS, STDIN, load_policy, parse_policy
from desched.policy_files.upstream import PolicySchema as _V1alpha2Schema
from desched.policy_files.v1alpha1 import (
    BALANCE_STRATEGIES,
    DESCHEDULE_STRATEGIES,
    convert_v1alpha1,
)

API_VERSION = "descheduler/v1alpha2"
_FORMATS = {"v1alpha1": "descheduler/v1alpha1 DeschedulerPolicy",
            "v1alpha2": "descheduler/v1alpha2 DeschedulerPolicy",
            "koordinator": "Koordinator DeschedulerConfiguration"}
# Extension points in the order upstream lists them, under the keys its decoder reads.
_EXTENSION_POINTS = ("deschedule", "balance", "filter", "preevictionfilter")
# Every top-level key a v1alpha2 DeschedulerPolicy holds, in its schema's order.
_TOP_KEYS = tuple(f.encode_name for f in msgspec.structs.fields(_V1alpha2Schema))
_UPSTREAM_PLUGINS = BALANCE_STRATEGIES | DESCHEDULE_STRATEGIES | {"DefaultEvictor"}
# Koordinator's settings of the descheduler process, not of descheduling: the `desched run`
# flag that takes each one's place.
_RUN_FLAGS = {
    "deschedulingInterval": "--interval",
    "leaderElection.leaderElect": "--leader-elect",
    "leaderElection.resourceName": "--leader-elect-resource-name",
    "leaderElection.resourceNamespace": "--leader-elect-resource-namespace",
    "leaderElection.leaseDuration": "--leader-elect-lease-duration",
    "leaderElection.renewDeadline": "--leader-elect-renew-deadline",
    "leaderElection.retryPeriod": "--leader-elect-retry-period",
    "metricsBindAddress": "--metrics-address",
    "healthzBindAddress": "--health-address",
    "clientConnection.kubeconfig": "--kubeconfig",
}
_LIMIT_KEYS = ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace",
               "maxNoOfPodsToEvictTotal")
# The keys of a DeschedulerConfiguration the conversion reads (or refuses).
_KOORDINATOR_POLICY_KEYS = ("apiVersion", "kind", "profiles", "nodeSelector", "dryRun",
                            "moves", *_LIMIT_KEYS)


@dataclass
class Converted:
    policy: Policy  # the policy as loaded from the input
    document: dict[str, Any]
    # What the input says that the document does not hold, one line each.
    notes: list[str] = field(default_factory=list)


def convert_policy(path: str, plugins: Plugins) -> Converted:
    """The v1alpha2 DeschedulerPolicy for the policy in file `path` (`-`: standard input), its
    plugins' args decoded against `plugins`.
    Raises InputError for an invalid policy, or one a v1alpha2 policy cannot express."""
    from desched.framework.runner import check_policy

    if path == STDIN:
        data = sys.stdin.buffer.read()
        policy = parse_policy("<stdin>", data, plugins)
    else:
        policy = load_policy(path, plugins)
        data = Path(path).read_bytes()
    check_policy(policy)  # the errors `validate` gives, before anything is printed
    doc = _policy_document("<stdin>" if path == STDIN else path, data.decode("utf-8"))
    if policy.format == "koordinator":
        return _from_koordinator(policy, doc)
    source = convert_v1alpha1(policy.path, doc, plugins) if policy.format == "v1alpha1" else doc
    converted = Converted(policy, _document(policy, source, {k: source.get(k) for k in _TOP_KEYS
                                                             if k != "profiles"}))
    converted.notes.extend(_own_plugins(policy))
    return converted


def _policy_document(label: str, text: str) -> dict[str, Any]:
    """The policy document in `text` (a ConfigMap's one policy key unwrapped), which has
    already loaded without errors."""
    doc = one_document(label, text, "policy")
    if doc.get("kind") == "ConfigMap":
        data = doc["data"]
        key = next(iter(data)) if len(data) == 1 else next(
            k for k in data if k in POLICY_KEYS)
        doc = one_document(f"{label}[{key}]", data[key], "policy")
    return dict(doc)


def _document(policy: Policy, source: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """The DeschedulerPolicy: `top`'s set keys, then each loaded profile with the args written
    for it in `source` (a v1alpha2-shaped document), or, from Koordinator, the args as
    defaulted: Koordinator validates args after defaulting them, upstream before, so args
    Koordinator completes (MigrationController's) would not load as written."""
    raw = source.get("profiles") or []
    profiles = []
    for i, cfg in enumerate(policy.profiles):
        written: dict[str, Any] = {}
        for entry in (raw[i] if i < len(raw) else {}).get("pluginConfig") or []:
            written.setdefault(entry.get("name"), entry.get("args"))  # the first entry wins
        if policy.format == "koordinator":
            written = {name: _set_fields(msgspec.to_builtins(args))
                       for name, args in cfg.args.items()}
        profiles.append(_profile(cfg, written))
    return {"apiVersion": API_VERSION, "kind": "DeschedulerPolicy",
            **{k: v for k, v in top.items() if v is not None}, "profiles": profiles}


def _set_fields(value: Any) -> Any:
    """`value` without the keys whose value is None (an unset optional field)."""
    if isinstance(value, dict):
        return {k: _set_fields(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_set_fields(item) for item in value]
    return value


def _profile(cfg: ProfileConfig, written: dict[str, Any]) -> dict[str, Any]:
    configs = []
    # DefaultEvictor first: every profile has it, and it decides what the others may evict.
    for name in sorted(cfg.args, key=lambda n: n != "DefaultEvictor"):
        args = written.get(name)
        configs.append({"name": name} if args is None else {"name": name, "args": args})
    plugins = {ep: {"enabled": list(cfg.enabled[ep])} for ep in _EXTENSION_POINTS
               if cfg.enabled.get(ep)}
    return {"name": cfg.name, "pluginConfig": configs, "plugins": plugins}


def _own_plugins(policy: Policy) -> list[str]:
    names = sorted({n for p in policy.profiles for names in p.enabled.values() for n in names}
                   - _UPSTREAM_PLUGINS)
    if not names:
        return []
    return [f"{', '.join(names)}: not a plugin of upstream's descheduler, which would refuse "
            f"this file; desched runs it"]


def _from_koordinator(policy: Policy, doc: dict[str, Any]) -> Converted:
    for cfg in policy.profiles:
        _check_koordinator_profile(policy.path, cfg)
    if doc.get("dryRun"):
        raise InputError(policy.path, "dryRun: true has no v1alpha2 DeschedulerPolicy key, and "
                                      "dropping it would make the policy evict; remove it and "
                                      "run the converted policy with `desched run --dry-run`")
    top = {k: doc.get(k) for k in (*_LIMIT_KEYS, "moves")}
    selector = doc.get("nodeSelector")
    if selector:
        top = {"nodeSelector": _selector_text(policy.path, selector) or None, **top}
    converted = Converted(policy, _document(policy, doc, top))
    for key, value in _flatten({k: v for k, v in doc.items()
                                if k not in _KOORDINATOR_POLICY_KEYS}):
        flag = _RUN_FLAGS.get(key)
        shown = json.dumps(value)
        if flag is None:
            converted.notes.append(f"{key}: {shown} is a setting of koord-descheduler's process "
                                   f"that desched has no equivalent for; not carried over")
        elif value is not False:
            usage = flag if value is True else f"{flag} {value}"
            converted.notes.append(
                f"{key}: {shown} is not a policy key in v1alpha2: run `desched run {usage}`"
                + ("; `simulate --cycles N` runs the cycles of the converted policy at one "
                   "moment, not an interval apart" if key == "deschedulingInterval" else ""))
    converted.notes.extend(_own_plugins(policy))
    return converted


def _check_koordinator_profile(path: str, cfg: ProfileConfig) -> None:
    where = f"profile {quote(cfg.name)}"
    evict = cfg.enabled.get("evict") or []
    if evict != ["DefaultEvictor"]:
        raise InputError(path, f"{where}: evict plugin {', '.join(evict)} has no v1alpha2 "
                               f"equivalent (a DeschedulerPolicy evicts through the Eviction "
                               f"API); to convert, evict with DefaultEvictor (evict: {{disabled: "
                               f'[{{name: "*"}}], enabled: [{{name: DefaultEvictor}}]}})')
    if "DefaultEvictor" not in cfg.enabled.get("filter", []):
        raise InputError(path, f"{where}: its filters leave DefaultEvictor out, which a "
                               f"v1alpha2 profile always filters with; to convert, add "
                               f"{{name: DefaultEvictor}} to plugins.filter.enabled")
    if cfg.node_selector is not None:
        raise InputError(path, f"{where}: a nodeSelector per profile has no v1alpha2 "
                               f"equivalent (its nodeSelector is the whole policy's); to "
                               f"convert, move it to the top-level nodeSelector")


def _flatten(doc: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, value) of each leaf of `doc`'s nested mappings."""
    out: list[tuple[str, Any]] = []
    for key, value in doc.items():
        if isinstance(value, dict) and value:
            out.extend(_flatten(value, f"{prefix}{key}."))
        else:
            out.append((f"{prefix}{key}", value))
    return out


def _selector_text(path: str, raw: dict[str, Any]) -> str:
    """A metav1.LabelSelector (already validated) as the selector string upstream's
    nodeSelector holds."""
    selector = msgspec.convert(raw, LabelSelector)
    parts = [f"{key}={value}" for key, value in (selector.match_labels or {}).items()]
    for req in selector.match_expressions or []:
        if "" in req.values:  # `k in (a,)` does not parse: a selector string cannot say it
            raise InputError(path, f"nodeSelector: the empty value of {quote(req.key)} "
                                   f"{req.operator} cannot be written as a v1alpha2 selector "
                                   f"string")
        values = ",".join(req.values)
        parts.append({"In": f"{req.key} in ({values})", "NotIn": f"{req.key} notin ({values})",
                      "Exists": req.key}.get(req.operator, f"!{req.key}"))
    return ",".join(parts)


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # args shared through YAML anchors are written out in full


def _list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    """Lists of names on one line (`enabled: [PodLifeTime]`), as upstream's examples write
    them; mappings stay in block style, one key a line."""
    flow = all(not isinstance(item, dict | list) for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _list)


class _BlockTextDumper(_Dumper):
    pass


def _text(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    """Multi-line text as a literal block (a ConfigMap's policy stays readable)."""
    return dumper.represent_scalar("tag:yaml.org,2002:str", data,
                                   style="|" if "\n" in data else None)


_BlockTextDumper.add_representer(str, _text)


def render(converted: Converted, output: str) -> str:
    """The document as YAML (the notes as comment lines above it) or JSON (no notes: the caller
    prints them on stderr)."""
    doc = converted.document
    if output == "json":
        return json.dumps(doc, indent=2, default=str) + "\n"
    policy = converted.policy
    lines = [f"# {policy.path} ({_FORMATS[policy.format]}) as the descheduler/v1alpha2 "
             f"DeschedulerPolicy desched runs", *(f"# note: {n}" for n in converted.notes)]
    return "\n".join(lines) + "\n" + dump_yaml(doc)


def dump_yaml(doc: Any, block_text: bool = False) -> str:
    """`doc` as YAML the way desched writes policies: keys in their order, lists of names on
    one line, anchors written out; with `block_text`, multi-line strings as literal blocks."""
    return yaml.dump(doc, Dumper=_BlockTextDumper if block_text else _Dumper, sort_keys=False,
                     allow_unicode=True, width=4096)
