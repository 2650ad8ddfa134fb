"""A small mixed-integer model (columns, rows of sparse terms) and its solve by HiGHS.

The floor (tune/floor.py) states its model here rather than in a solver's API, so the model
can be counted, re-solved with constraint families left out, and benchmarked against another
solver (bench/floor_solvers.py). HiGHS was chosen by measurement: see docs/tune.md.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import time
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import highspy

INF = math.inf
# Columns above which HiGHS runs without presolve.
_PRESOLVE_UP_TO = 100_000
# Rows whose coefficients exceed this are scaled down (memory in bytes).
_SCALE_ABOVE = 1024.0


@dataclass
class Model:
    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    row_lower: list[float] = field(default_factory=list)
    row_upper: list[float] = field(default_factory=list)
    # Rows as CSR: row i's terms are index/value[starts[i]:starts[i + 1]]. Typed arrays, not
    # lists: at 5,000 nodes a model has millions of terms, 12 bytes each here against about 70
    # as Python objects in lists (docs/tune.md).
    starts: array[int] = field(default_factory=lambda: array("q", [0]))
    index: array[int] = field(default_factory=lambda: array("i"))
    value: array[float] = field(default_factory=lambda: array("d"))
    # The unit each row was divided by (rows in bytes are scaled down; 1 for the others).
    row_unit: list[float] = field(default_factory=list)
    # Rows by family (e.g. "budgets"), for counting.
    families: dict[str, int] = field(default_factory=dict)

    @property
    def columns(self) -> int:
        return len(self.lower)

    @property
    def rows(self) -> int:
        return len(self.row_lower)

    def var(self, lower: float, upper: float, cost: float = 0.0, integer: bool = True) -> int:
        self.lower.append(lower)
        self.upper.append(upper)
        self.cost.append(cost)
        self.integer.append(integer)
        return len(self.lower) - 1

    def row(self, terms: dict[int, float], lower: float = -INF, upper: float = INF,
            family: str = "") -> None:
        """lower <= sum(coef * x[i]) <= upper. A row without terms is checked at once: an
        unmet constant is kept as an empty row the solver reports infeasible."""
        kept = {i: c for i, c in terms.items() if c != 0.0}
        largest = max((abs(c) for c in kept.values()), default=1.0)
        unit = 1.0
        if largest > _SCALE_ABOVE:
            # Bytes: a row in units of a power of two near its largest coefficient reads the
            # same (exactly, in binary floating point) and keeps the solver's tolerances sane.
            unit = 2.0 ** math.floor(math.log2(largest))
            kept = {i: c / unit for i, c in kept.items()}
            lower, upper = lower / unit, upper / unit
        self.row_lower.append(lower)
        self.row_upper.append(upper)
        self.row_unit.append(unit)
        self.index.extend(kept)
        self.value.extend(kept.values())
        self.starts.append(len(self.index))
        if family:
            self.families[family] = self.families.get(family, 0) + 1

    def bounds_of(self, terms: dict[int, float]) -> tuple[float, float]:
        """The least and greatest value the terms can take within the columns' bounds."""
        low = high = 0.0
        for i, c in terms.items():
            a, b = c * self.lower[i], c * self.upper[i]
            low += min(a, b)
            high += max(a, b)
        return low, high

    def size(self) -> str:
        ints = sum(self.integer)
        return (f"{self.columns:,} variables ({ints:,} integer), {self.rows:,} constraints, "
                f"{len(self.index):,} nonzeros")


@dataclass
class Solution:
    status: str  # "optimal" | "time limit" | "infeasible"
    objective: float | None  # the best solution's, None when none was found
    bound: float  # the proven lower bound on the objective (minimizing)
    seconds: float
    values: list[float] = field(default_factory=list)


_BANNER_SHOWN = [False]


def available() -> bool:
    """HiGHS is installed: the `tune` extra (`pip install 'desched[tune]'`), left out of the
    image `desched run` ships in (docs/tune.md)."""
    return importlib.util.find_spec("highspy") is not None


def _highs() -> highspy.Highs:
    """A HiGHS instance; the first one made in a process prints a banner to file descriptor 1,
    which a `-o json` reader must not get: sent to /dev/null."""
    import highspy

    if _BANNER_SHOWN[0]:
        return highspy.Highs()  # type: ignore[no-untyped-call]
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            highs = highspy.Highs()  # type: ignore[no-untyped-call]
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    _BANNER_SHOWN[0] = True
    return highs


def solve(model: Model, time_limit: float, continuous: bool = False) -> Solution:
    """Minimize the model's cost with HiGHS within `time_limit` seconds; `continuous`: its
    linear relaxation (integrality left out)."""
    import highspy
    import numpy as np

    started = time.monotonic()
    if not model.columns:
        # Nothing can move: the rows are constants, met or not (HiGHS calls this model empty).
        met = all(lo <= 0.0 <= hi for lo, hi in zip(model.row_lower, model.row_upper,
                                                       strict=True))
        return (Solution("optimal", 0.0, 0.0, 0.0) if met
                else Solution("infeasible", None, INF, 0.0))
    highs = _highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("time_limit", max(0.01, float(time_limit)))
    if model.columns > _PRESOLVE_UP_TO:
        # Measured (docs/tune.md): on 245,000 columns HiGHS's presolve probing took the whole
        # time limit, leaving no bound; without presolve the root gives one in seconds.
        highs.setOptionValue("presolve", "off")
    if all(c == int(c) for c in model.cost):
        # An integer objective: a solution within less than 1 of the bound is optimal.
        highs.setOptionValue("mip_abs_gap", 1.0 - 1e-6)
    lp = highspy.HighsLp()
    lp.num_col_ = model.columns
    lp.num_row_ = model.rows
    lp.col_cost_ = np.array(model.cost, dtype=np.float64)
    lp.col_lower_ = np.array(model.lower, dtype=np.float64)
    lp.col_upper_ = np.array(model.upper, dtype=np.float64)
    lp.row_lower_ = np.array(model.row_lower, dtype=np.float64)
    lp.row_upper_ = np.array(model.row_upper, dtype=np.float64)
    matrix = lp.a_matrix_
    matrix.format_ = highspy.MatrixFormat.kRowwise
    matrix.start_ = np.frombuffer(model.starts, dtype=np.int64).astype(np.int32)
    matrix.index_ = np.frombuffer(model.index, dtype=np.int32)
    matrix.value_ = np.frombuffer(model.value, dtype=np.float64)
    matrix.num_col_ = model.columns
    matrix.num_row_ = model.rows
    lp.a_matrix_ = matrix
    integer = any(model.integer) and not continuous
    if integer:
        lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                           for i in model.integer]
    highs.passModel(lp)
    highs.run()
    status = highs.getModelStatus()
    info = highs.getInfo()
    seconds = time.monotonic() - started
    statuses = highspy.HighsModelStatus
    if status in (statuses.kInfeasible, statuses.kUnboundedOrInfeasible):
        return Solution("infeasible", None, INF, seconds)
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    values = list(highs.getSolution().col_value) if has_solution else []
    objective = info.objective_function_value if has_solution else None
    if status == statuses.kOptimal:
        return Solution("optimal", objective, objective if objective is not None else 0.0,
                        seconds, values)
    bound = info.mip_dual_bound if integer else -INF
    if not math.isfinite(bound):
        bound = 0.0
    return Solution("time limit", objective, bound, seconds, values)
