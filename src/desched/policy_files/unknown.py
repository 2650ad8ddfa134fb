"""Warnings about a policy that loads but does less than it says: keys the decoder ignores in
plugin args (decoding/unknown_fields.py finds them), a policy that enables no plugin that evicts,
profiles sharing a name, an empty value set in the node selector, and each plugin's own warnings
about its args. These never change what loads.
"""

from __future__ import annotations

from typing import Any

from desched.decoding.unknown_fields import ARGS_TYPE_META, unknown_fields
from desched.errors import quote, shown
from desched.framework.policy import Policy
from desched.framework.registry import Plugins
from desched.model.labels import empty_set_warnings


def plugin_args_fields(doc: dict[str, Any], plugins: Plugins) -> list[tuple[str, str | None]]:
    """Unknown keys in each registered plugin's pluginConfig args (both v1alpha2 formats lay
    profiles out the same way): only the args' lenient sub-structs can hold any."""
    out: list[tuple[str, str | None]] = []
    profiles = doc.get("profiles")
    for i, profile in enumerate(profiles if isinstance(profiles, list) else []):
        configs = profile.get("pluginConfig") if isinstance(profile, dict) else None
        for j, pc in enumerate(configs if isinstance(configs, list) else []):
            if not isinstance(pc, dict):
                continue
            name = pc.get("name")
            spec = plugins.get(name) if isinstance(name, str) else None
            if spec is not None and isinstance(pc.get("args"), dict):
                out.extend(unknown_fields(pc["args"], spec.args_type,
                                          f"profiles[{i}].pluginConfig[{j}].args",
                                          ARGS_TYPE_META))
    return out


def idle_warning(policy: Policy) -> list[str]:
    """A warning when no profile enables a deschedule or balance plugin: nothing gets evicted."""
    if any(p.enabled.get("deschedule") or p.enabled.get("balance") for p in policy.profiles):
        return []
    text = f"{policy.path}: no deschedule or balance plugin is enabled; the policy evicts nothing"
    if any("MigrationController" in p.enabled.get("evict", ()) for p in policy.profiles):
        # `run` still carries out the PodMigrationJobs someone else creates.
        text += (" by itself (MigrationController only carries out PodMigrationJobs created by "
                 "others)")
    return [text]


def duplicate_profiles(policy: Policy) -> list[tuple[int, int, str]]:
    """(index, index of the first profile of the same name, the name) of each profile whose
    name an earlier profile has: upstream v0.36 accepts them, Koordinator's format refuses
    them (`Duplicate value`)."""
    first: dict[str, int] = {}
    found = []
    for i, profile in enumerate(policy.profiles):
        if profile.name in first:
            found.append((i, first[profile.name], profile.name))
        first.setdefault(profile.name, i)
    return found


def profile_name_warnings(policy: Policy) -> list[str]:
    """A warning per profile that repeats an earlier profile's name."""
    return [f"{policy.path}: profiles[{i}].name: {quote(name)} is also the name of "
            f"profiles[{earlier}]: upstream accepts it, but their evictions, events and metrics "
            f"cannot be told apart (Koordinator's format refuses it); give each profile its own "
            f"name" for i, earlier, name in duplicate_profiles(policy)]


def selector_warnings(policy: Policy) -> list[str]:
    """A warning when the policy's nodeSelector string writes an empty value set, `k in ()`."""
    return [f"{policy.path}: {w}"
            for w in empty_set_warnings("nodeSelector", policy.node_selector_text)]


def args_warnings(policy: Policy) -> list[str]:
    """Each enabled plugin's own warnings about its args (PingPongGuard's scheduler
    configuration), naming the file and the profile."""
    plugins = policy.plugins
    out: list[str] = []
    for profile in policy.profiles:
        enabled = {name for names in profile.enabled.values() for name in names}
        for name, args in profile.args.items():
            spec = plugins.get(name)
            if spec is not None and name in enabled:
                out.extend(f"{policy.path}: profile {shown(profile.name)}: {name}: {w}"
                           for w in spec.warnings(args))
    return out
