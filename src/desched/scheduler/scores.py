"""kube-scheduler's score plugins (v1.36), number for number.

kube-scheduler scores in int64 with Go's division, which truncates toward zero; `go_div` does the
same (Python's `//` floors, which differs for negative quotients). Each function is one plugin's
Score (raw, per node) or NormalizeScore (over the feasible nodes' raw scores); the model weighs
and sums them. MAX is framework.MaxNodeScore.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from desched.scheduler.profile import FitScoring, ShapePoint

MAX = 100
MAX_CUSTOM_PRIORITY = 10  # RequestedToCapacityRatio shape scores are 0-10
DEFAULT_MILLI_CPU = 100  # what NodeResourcesFit counts for a container requesting no cpu
DEFAULT_MEMORY = 200 * 1024 * 1024  # ... and no memory
_MB = 1024 * 1024
IMAGE_MIN = 23 * _MB
IMAGE_MAX_PER_CONTAINER = 1000 * _MB


def go_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def go_round(x: float) -> int:
    """Go's math.Round: half away from zero."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


# -- NodeResourcesFit ------------------------------------------------------------------------------

def _weighted(per_resource: Sequence[tuple[int, int]]) -> int:
    """Σ score×weight / Σ weight over the resources the node has, as Go divides."""
    total = weights = 0
    for score, weight in per_resource:
        total += score * weight
        weights += weight
    return go_div(total, weights) if weights else 0


def least_requested(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return go_div((capacity - requested) * MAX, capacity)


def most_requested(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return go_div(min(requested, capacity) * MAX, capacity)


def broken_linear(shape: Sequence[ShapePoint], utilization: int) -> int:
    """helper.BuildBrokenLinearFunction over a shape whose scores are already 0-100."""
    for i, point in enumerate(shape):
        if utilization <= point.utilization:
            if i == 0:
                return point.score
            prev = shape[i - 1]
            return prev.score + go_div(
                (point.score - prev.score) * (utilization - prev.utilization),
                point.utilization - prev.utilization)
    return shape[-1].score


def fit_score(strategy: FitScoring, requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """NodeResourcesFit's score: `requested` is the node's requests (non-zero defaults
    applied) plus the pod's, per resource of the strategy; a resource the node has none of is
    left out."""
    resources = strategy.resources
    if strategy.type == "RequestedToCapacityRatio":
        shape = [ShapePoint(p.utilization, p.score * (MAX // MAX_CUSTOM_PRIORITY))
                 for p in strategy.shape]
        total = weights = 0
        for spec, req, cap in zip(resources, requested, allocatable, strict=True):
            if cap == 0:
                continue
            score = broken_linear(shape, 100 if req > cap else go_div(req * 100, cap))
            if score > 0:
                total += score * spec.weight
                weights += spec.weight
        return go_round(total / weights) if weights else 0
    one = least_requested if strategy.type == "LeastAllocated" else most_requested
    return _weighted([(one(req, cap), spec.weight)
                      for spec, req, cap in zip(resources, requested, allocatable, strict=True)
                      if cap != 0])


# -- NodeResourcesBalancedAllocation ---------------------------------------------------------------

def balanced_resource_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """(1 - the standard deviation of the requested fractions) × 100, truncated; for two
    resources the deviation is half their difference."""
    fractions = [min(1.0, req / cap) for req, cap in zip(requested, allocatable, strict=True)
                 if cap != 0]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX)


def balanced_allocation(with_pod: Sequence[int], without_pod: Sequence[int],
                        allocatable: Sequence[int]) -> int:
    """v1.36's BalancedAllocation: how much the pod improves the node's balance, centred on 50
    (a pod that changes nothing scores 75)."""
    gain = balanced_resource_score(with_pod, allocatable) - balanced_resource_score(
        without_pod, allocatable)
    return MAX // 2 + go_div(MAX // 2 + gain, 2)


# -- normalizations --------------------------------------------------------------------------------

def default_normalize(raw: Mapping[str, int], reverse: bool) -> dict[str, int]:
    """helper.DefaultNormalizeScore: score × 100 / max (reverse: 100 minus that); all zero stays
    zero (reverse: all 100)."""
    top = max(raw.values(), default=0)
    if top == 0:
        return dict.fromkeys(raw, MAX if reverse else 0)
    out = {}
    for name, score in raw.items():
        scaled = go_div(MAX * score, top)
        out[name] = MAX - scaled if reverse else scaled
    return out


def min_max_normalize(raw: Mapping[str, int]) -> dict[str, int]:
    """InterPodAffinity's NormalizeScore: (score - min) / (max - min) × 100, truncated; all
    equal gives 0."""
    if not raw:
        return {}
    low, high = min(raw.values()), max(raw.values())
    if high == low:
        return dict.fromkeys(raw, 0)
    return {name: int(MAX * ((score - low) / (high - low))) for name, score in raw.items()}


def spread_normalize(raw: Mapping[str, int], ignored: frozenset[str] = frozenset()
                     ) -> dict[str, int]:
    """PodTopologySpread's NormalizeScore: 100 × (max + min - score) / max over the nodes not
    ignored (fewer matching pods scores higher); ignored nodes score 0; a max of 0 gives 100."""
    counted = [s for n, s in raw.items() if n not in ignored]
    low, high = min(counted, default=0), max(counted, default=0)
    out = {}
    for name, score in raw.items():
        if name in ignored:
            out[name] = 0
        elif high == 0:
            out[name] = MAX
        else:
            out[name] = go_div(MAX * (high + low - score), high)
    return out


# -- PodTopologySpread -----------------------------------------------------------------------------

def topology_weight(domains: int) -> float:
    """log(domains + 2): a constraint over many domains weighs each matching pod more."""
    return math.log(domains + 2)


def spread_part(count: int, max_skew: int, weight: float) -> float:
    """One constraint's share of a node's raw score (summed over constraints, then rounded)."""
    return count * weight + (max_skew - 1)


# -- ImageLocality ---------------------------------------------------------------------------------

def normalized_image(name: str) -> str:
    """An image reference with ':latest' added when it has no tag (as the kubelet reports it)."""
    return name if name.rfind(":") > name.rfind("/") else f"{name}:latest"


def image_locality(sizes: Sequence[tuple[int, int]], total_nodes: int, containers: int) -> int:
    """ImageLocality's score: `sizes` holds (image size, nodes that have it) for each of the
    pod's containers whose image this node has; scaled by how widely the image is spread, clamped
    between 23 MB and 1000 MB a container."""
    total = sum(int(size * (spread / total_nodes)) for size, spread in sizes)
    ceiling = IMAGE_MAX_PER_CONTAINER * containers
    if ceiling <= IMAGE_MIN:
        return 0
    total = min(max(total, IMAGE_MIN), ceiling)
    return go_div(MAX * (total - IMAGE_MIN), ceiling - IMAGE_MIN)

