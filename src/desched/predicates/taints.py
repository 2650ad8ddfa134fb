"""Taints and tolerations, matched as k8s.io/api core/v1 Toleration.ToleratesTaint does."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from desched.model.node import Taint
from desched.model.pod import Toleration

# The effects the scheduler filters on; PreferNoSchedule only affects scoring.
SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def describe_taint(taint: Taint) -> str:
    """key=value:effect, as kubectl prints a taint (key:effect without a value)."""
    return f"{taint.key}={taint.value}:{taint.effect}" if taint.value \
        else f"{taint.key}:{taint.effect}"


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether one toleration tolerates one taint.

    An empty effect matches every effect and an empty key every key. The key rule follows the
    upstream code, not its doc comment: an empty key is a wildcard whatever the operator, so an
    (API-invalid) empty-key Equal toleration still compares values.
    """
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    operator = toleration.operator
    if operator == "Exists":
        return True
    if operator in ("", "Equal"):
        return toleration.value == taint.value
    return False  # an operator this version does not know tolerates nothing


def tolerates_taint(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    """Whether any of the tolerations tolerates the taint (upstream TolerationsTolerateTaint)."""
    # A loop, not any(): NodeFit and the taint plugins ask this per pod and node.
    for toleration in tolerations:  # noqa: SIM110
        if tolerates(toleration, taint):
            return True
    return False


def first_untolerated(
    taints: Iterable[Taint],
    tolerations: Sequence[Toleration],
    effects: frozenset[str] | None = None,
) -> Taint | None:
    """The first taint with an effect in `effects` (None: any effect) that no toleration
    tolerates, or None when all of them are tolerated."""
    for taint in taints:
        if effects is not None and taint.effect not in effects:
            continue
        if not tolerates_taint(tolerations, taint):
            return taint
    return None
