"""Reading a policy file in any accepted format."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from desched.decoding.document import one_document
from desched.errors import InputError, quote
from desched.framework.policy import Policy
from desched.framework.registry import Plugins
from desched.policy_files.decoding import type_meta_error
from desched.policy_files.errors import DecodeError
from desched.policy_files.koordinator import load_koordinator
from desched.policy_files.unknown import (
    args_warnings,
    idle_warning,
    profile_name_warnings,
    selector_warnings,
)
from desched.policy_files.upstream import load_v1alpha2
from desched.policy_files.v1alpha1 import load_v1alpha1

_ACCEPTED = ("descheduler/v1alpha2 DeschedulerPolicy, descheduler/v1alpha1 DeschedulerPolicy, "
             "descheduler/v1alpha2 DeschedulerConfiguration or a ConfigMap holding one")


def _load(path: str, text: str) -> Any:
    doc = one_document(path, text, "policy")
    bad = _non_finite(doc)
    if bad is not None:  # upstream converts YAML to JSON first, which has no NaN or infinity
        raise DecodeError(path, f"error converting YAML to JSON: json: unsupported value: {bad}")
    return doc


def _parse(path: str, text: str) -> dict[str, Any]:
    doc = _load(path, text)
    if not isinstance(doc, dict):
        raise InputError(path, f"expected a policy object, got {type(doc).__name__}")
    return doc


# The data key a ConfigMap holding a policy has among others (upstream's Helm chart and
# kustomize name it policy.yaml); a ConfigMap with one data key may name it anything.
POLICY_KEYS = ("policy.yaml", "policy.yml")
_EXPECTED_KEY = "policy.yaml (the key upstream's Helm chart and kustomize use)"


def _held(value: Any) -> str:
    """What a ConfigMap's data value holds instead of a policy, for a message."""
    if isinstance(value, str):
        shown = value if len(value) <= 40 else f"{value[:40]}..."
        return f"a string, {quote(shown)}" if value.strip() else "an empty string"
    if isinstance(value, list):
        return f"a list of {len(value)} item(s)"
    if isinstance(value, bool):
        return f"a boolean, {str(value).lower()}"
    if isinstance(value, int | float):
        return f"a number, {value}"
    return f"a {type(value).__name__}"


def _non_finite(doc: Any) -> str | None:
    """Go's name for the first NaN or infinite number in `doc`, else None."""
    stack, seen = [doc], set()
    while stack:
        value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return "NaN" if math.isnan(value) else "+Inf" if value > 0 else "-Inf"
        if isinstance(value, dict | list) and id(value) not in seen:
            seen.add(id(value))  # aliases share objects: each is walked once
            stack.extend(value.values() if isinstance(value, dict) else value)
    return None


_LOADERS = {
    ("descheduler/v1alpha2", "DeschedulerPolicy"): load_v1alpha2,
    ("descheduler/v1alpha1", "DeschedulerPolicy"): load_v1alpha1,
    ("descheduler/v1alpha2", "DeschedulerConfiguration"): load_koordinator,
}


def policy_from_document(path: str, doc: dict[str, Any], plugins: Plugins,
                         depth: int = 0) -> Policy:
    """The policy in `doc`, its plugins' args decoded against `plugins`."""
    problem = type_meta_error(doc)
    if problem:
        raise DecodeError(path, problem)
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if kind == "ConfigMap" and api_version == "v1" and depth == 0:
        data = doc.get("data") or {}
        if not isinstance(data, dict) or not data:
            raise InputError(path, f"ConfigMap has no data key holding a policy; expected the "
                                   f"policy under {_EXPECTED_KEY}")
        if len(data) > 1:
            keys = [k for k in data if k in POLICY_KEYS]
            if len(keys) != 1:
                raise InputError(path, f"ConfigMap has several data keys ({', '.join(data)}); "
                                       f"expected one holding the policy, named {_EXPECTED_KEY}")
            data = {keys[0]: data[keys[0]]}
        key, text = next(iter(data.items()))
        if not isinstance(text, str):  # its Python repr is no policy (and may be huge)
            raise InputError(path, f"data[{quote(key)}] must be a string, got "
                                   f"{type(text).__name__}")
        inner = _load(f"{path}[{key}]", text) if text.strip() else text
        if not isinstance(inner, dict):
            raise InputError(path, f"ConfigMap holds no policy: its data key {quote(key)} holds "
                                   f"{_held(inner)}; expected a DeschedulerPolicy or "
                                   f"DeschedulerConfiguration, as YAML, under {_EXPECTED_KEY} "
                                   f"or the ConfigMap's only data key")
        return policy_from_document(f"{path}[{key}]", inner, plugins, depth + 1)
    loader = (_LOADERS.get((api_version, kind))
              if isinstance(api_version, str) and isinstance(kind, str) else None)
    if loader is not None:
        policy = loader(path, doc, plugins)
        policy.warnings.extend(profile_name_warnings(policy))
        policy.warnings.extend(selector_warnings(policy))
        policy.warnings.extend(args_warnings(policy))
        policy.warnings.extend(idle_warning(policy))
        return policy
    if not kind or not api_version:
        raise DecodeError(path, f"Object 'Kind' is missing or 'apiVersion' is missing; expected "
                                f"{_ACCEPTED}")
    raise DecodeError(path, f'no kind "{kind}" is registered for version "{api_version}"; '
                            f"expected {_ACCEPTED}")


STDIN = "-"


def parse_policy(path: str, data: bytes, plugins: Plugins) -> Policy:
    """The policy in `data`, read from file `path` (errors name it)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(path, f"failed to read policy config file: {err}") from None
    return policy_from_document(path, _parse(path, text), plugins)


def read_policy(path: str) -> tuple[str, str]:
    """The name errors give file `path` (`-`: standard input, "<stdin>") and its text."""
    if path == STDIN:
        try:
            return "<stdin>", sys.stdin.buffer.read().decode("utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise InputError("<stdin>", f"failed to read policy config: {err}") from None
    try:
        return path, Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        detail = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise InputError("", f"failed to read policy config file {path!r}: {detail}"
                         .replace(f"'{path}'", f'"{path}"')) from None


def load_policy(path: str, plugins: Plugins) -> Policy:
    """The policy in file `path` (`-`: standard input)."""
    label, text = read_policy(path)
    return policy_from_document(label, _parse(label, text), plugins)
