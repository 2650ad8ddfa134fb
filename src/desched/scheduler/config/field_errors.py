"""kube-scheduler's error wording: apimachinery's field.Error (`path: Invalid value: v:
detail`), and msgspec's decode errors rewritten to name the place the same way."""

from __future__ import annotations

import json
from collections.abc import Iterable

import msgspec

# A node selector requirement's operators (core/v1), for a decode error that names one.
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def go(value: object) -> str:
    """A bad value as field.Error prints it: numbers and booleans bare, strings quoted, the rest
    as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def invalid(path: str, value: object, detail: str) -> str:
    return f"{path}: Invalid value: {go(value)}: {detail}"


def unsupported(path: str, value: object, supported: Iterable[str]) -> str:
    return (f"{path}: Unsupported value: {go(value)}: supported values: "
            + ", ".join(go(s) for s in supported))


def required(path: str, detail: str = "") -> str:
    return f"{path}: Required value" + (f": {detail}" if detail else "")


def forbidden(path: str, detail: str) -> str:
    return f"{path}: Forbidden: {detail}"


def duplicate(path: str, value: object) -> str:
    return f"{path}: Duplicate value: {go(value)}"


def msgspec_error(err: msgspec.ValidationError, where: str) -> str:
    """msgspec's `Expected ... - at `$.a.b`` as `where.a.b: Expected ...`; a node selector
    operator it does not know in kube-scheduler's words."""
    body, sep, at = str(err).partition(" - at `$")
    path = (where + at.rstrip("`")).lstrip(".") if sep else where
    bad_enum = body.startswith("Invalid enum value '")
    if bad_enum and path.endswith(".operator"):
        return unsupported(path, body.removeprefix("Invalid enum value '")[:-1], _OPERATORS)
    return f"{path}: {body}" if path else body
