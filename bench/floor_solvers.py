"""The floor's model (tune/floor.py) on a snapshot: its size, and the solve by HiGHS; with
--dump FILE the model is also written (numpy .npz) for `--cp-sat FILE`, which solves it with
OR-Tools CP-SAT in a Python that has ortools (not a desched dependency):

    PYTHONPATH=src python bench/floor_solvers.py SNAPSHOT POLICY "max cpu requests <= 70%" \\
        --cycles 3 --time-limit 60 --dump /tmp/model.npz
    python bench/floor_solvers.py --cp-sat /tmp/model.npz --time-limit 60

CP-SAT takes integer coefficients only: the requests goals (whole millicores, bytes, pods)
are; mean and std rows are not, and such a model is refused.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from typing import Any


def highs(args: argparse.Namespace) -> None:
    import numpy as np

    from desched.plugins.catalog import PLUGINS
    from desched.policy_files.loader import load_policy
    from desched.snapshot.loader import load_snapshot
    from desched.tune import floor as floor_module
    from desched.tune.goals import parse_goals
    from desched.tune.milp import solve

    started = time.monotonic()
    snapshot = load_snapshot([args.snapshot])
    print(f"load: {time.monotonic() - started:.1f} s, {len(snapshot.nodes):,} nodes, "
          f"{len(snapshot.pods):,} pods")
    policy = load_policy(args.policy, PLUGINS)
    now = snapshot.captured_at or datetime.now(UTC)
    goals = parse_goals(args.goal)
    started = time.monotonic()
    left_out = set(args.leave_out.split(",")) if args.leave_out else set()
    relax = floor_module.Relax(budgets="budgets" in left_out,
                               protections="protections" in left_out,
                               placement="placement" in left_out)
    cluster = floor_module.read_cluster(snapshot, policy, goals, args.cycles, now,
                                    any(g.usage for g in goals), relax)
    model, text = floor_module.build(cluster, goals, relax)
    print(f"model: {time.monotonic() - started:.1f} s; {text}")
    solution = solve(model, args.time_limit)
    print(f"HiGHS: {solution.status}, moves {solution.objective}, bound {solution.bound}, "
          f"{solution.seconds:.1f} s")
    if args.dump:
        np.savez(args.dump, lower=model.lower, upper=model.upper, cost=model.cost,
                 integer=model.integer, row_lower=model.row_lower, row_upper=model.row_upper,
                 row_unit=model.row_unit,
                 starts=model.starts, index=model.index, value=model.value)
    if left_out:
        return
    started = time.monotonic()
    found = floor_module.floor(snapshot, policy, goals, cycles=args.cycles, now=now,
                               time_limit=args.time_limit)
    print(f"floor(): {found.status}, moves {found.moves}, bound {found.bound}, "
          f"{time.monotonic() - started:.1f} s, reason {found.reason}")


def cp_sat(args: argparse.Namespace) -> None:
    import numpy as np
    from ortools.sat.python import cp_model

    data: Any = np.load(args.cp_sat)
    model = cp_model.CpModel()
    big = 2**40
    columns = []
    for low, high, integer in zip(data["lower"], data["upper"], data["integer"], strict=True):
        if not integer:
            raise SystemExit("a continuous column: CP-SAT takes integer models only")
        columns.append(model.new_int_var(int(max(low, -big)), int(min(high, big)), ""))
    starts, index, value = data["starts"], data["index"], data["value"]
    units = data["row_unit"]
    for row, (low, high) in enumerate(zip(data["row_lower"], data["row_upper"], strict=True)):
        span = range(starts[row], starts[row + 1])
        unit = units[row]  # the scaled rows back in whole units (bytes)
        low, high = low * unit, high * unit
        if any(value[i] * unit != int(value[i] * unit) for i in span):
            raise SystemExit("a fractional coefficient: CP-SAT takes integer rows only")
        expr = sum(int(value[i] * unit) * columns[index[i]] for i in span)
        if low > -np.inf:
            model.add(expr >= int(np.ceil(low)))
        if high < np.inf:
            model.add(expr <= int(np.floor(high)))
    model.minimize(sum(int(c) * columns[i] for i, c in enumerate(data["cost"]) if c))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = args.time_limit
    solver.parameters.num_workers = 2
    started = time.monotonic()
    status = solver.solve(model)
    print(f"CP-SAT: {solver.status_name(status)}, moves {solver.objective_value}, bound "
          f"{solver.best_objective_bound}, {time.monotonic() - started:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("snapshot", nargs="?")
    parser.add_argument("policy", nargs="?")
    parser.add_argument("goal", nargs="*")
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--dump")
    parser.add_argument("--leave-out", help="budgets,protections,placement: the model without "
                                            "them, to time a solve on a goal they make "
                                            "unreachable")
    parser.add_argument("--cp-sat")
    args = parser.parse_args()
    if args.cp_sat:
        cp_sat(args)
    else:
        highs(args)


if __name__ == "__main__":
    main()
