"""Commitments re-tuned against the exact per-period cost, training placements fixed.

The cluster model chooses commitments on averaged demand, so it misjudges peaks (Jensen works against it
here). With training placed, the cost of inference for commitments R is ``F(R) = sum_t F_t(R)``, each
``F_t`` the LP value of period t's covering problem: convex and piecewise linear in R, and the duals of
the pool and capacity rows give a subgradient. R is a count per commitment column (``purchases.py``); a
column's nodes serve only in its window, so its subgradient sums the duals of the periods it serves in.
Kelley's cutting planes (Benders with one aggregated cut per iterate) minimise ``c.R + F(R)`` over
whole-node R in a box around the incumbent, an eighth of its full size at first, doubled after an
iterate that improves and halved after one that does not (the first cuts know little: from the full box
inference-heavy-saas's first four iterates were predicted at -$5.6M to $1.62M against $1.73M and none
improved; from an eighth the tuning takes 1.2 s instead of 7-11, and no plan of the shipped scenarios
got dearer); every iterate is evaluated exactly over all periods, so the best one found is never worse
than the start.

Node counts are fractional in F, but each period's LP carries the rounding rows of ``node_need.py``
(``PeriodModel(rounding=True)``): a group of services sharing offerings needs the whole nodes above its
replicas' node-equivalents, so 2.5 nodes of demand beside 2 committed cost a whole on-demand node, not
half of one, and a third commitment is seen to pay. The rows' right-hand sides move with R, so F stays
convex and their duals join the subgradient. The plan's whole nodes come afterwards
(``dispatch.dispatch``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pulp

from planner.planning.optimize.build import guarantee_penalty_per_gpu, guarantee_rows, segment_starts
from planner.planning.optimize.dispatch import Distinct, Occupancy, PeriodModel, max_nodes
from planner.planning.problem.sets import PlanningSets
from planner.solvers.solve import solve
from planner.solvers.work import deadline_after, past

TRUST = 0.3  # the full box: this fraction (at least MIN_STEP nodes) of the incumbent's counts
MIN_STEP = 4


@dataclass
class Tuned:
    commitments: dict[int, int]  # new column -> nodes
    cost_before: float  # commitments + the periods' inference LP (with rounding rows) at the start
    cost_after: float
    iterations: int
    seconds: float


def tune_commitments(
    sets: PlanningSets,
    commitments: dict[int, int],
    occupancy: Occupancy,
    time_limit: float | None,
    progress: Callable[[str], None] | None = None,
    max_iterations: int = 30,
) -> Tuned:
    say = progress or (lambda _message: None)
    began = time.perf_counter()  # measured for the report only
    deadline = deadline_after(time_limit)  # counted work (planner/solvers/work.py), not the clock
    keys = sets.new_columns
    price = {c: sets.columns[c].cost_per_node for c in keys}
    n_o = len(sets.offerings)
    offering_of = np.array([sets.columns[c].offering for c in keys], dtype=np.int64)

    model = PeriodModel(sets, sets.committed(commitments), every_pool=True, rounding=True)
    groups = Distinct.of(sets, occupancy)
    # which columns serve in each distinct period (the same throughout the periods it stands for)
    begins = np.array([sets.columns[c].start for c in keys], dtype=np.int64)
    ends = np.array([sets.columns[c].end for c in keys], dtype=np.int64)
    first = np.asarray(groups.first, dtype=np.int64)[:, None]
    serving = ((first >= begins[None, :]) & (first < ends[None, :])).astype(float)

    def bought(values: dict[int, int]) -> float:
        return sum(price[c] * values.get(c, 0) for c in keys)

    def evaluate(values: dict[int, int]) -> tuple[float, np.ndarray]:
        """F(R), the periods' LP cost, and a subgradient of it per column."""
        model.set_commitments(sets.committed(values))
        total, gradient = 0.0, np.zeros(len(keys))
        for u, (t, weight) in enumerate(zip(groups.first, groups.counts, strict=True)):
            total += weight * model.lp_at(int(t), occupancy)
            per_offering = model.commitment_gradient()
            gradient += weight * per_offering[offering_of] * serving[u]  # columns serving at t only
        return total, gradient

    def counts(values: dict[int, int]) -> np.ndarray:
        return np.array([values.get(c, 0) for c in keys], dtype=float)

    # per offering and segment: gangs on offerings without on-demand nodes (owned) run on commitments
    # only, so the new columns there hold what they need beyond the held ones; and the capacity left
    # beside the held nodes and spot training (elsewhere on-demand nodes take what commitments do not)
    held = sets.committed({})
    segments = len(segment_starts(sets))
    lowest = np.zeros((n_o, segments))
    room = np.full((n_o, segments), math.inf)
    top = max_nodes(sets)
    no_on_demand = np.array([o.on_demand_usd_h is None for o in sets.offerings])
    for q in range(segments):
        inside = sets.segment == q
        if not inside.any():
            continue
        need = np.ceil(occupancy.non_spot[:, inside].max(axis=1) - 1e-9) - held[:, inside].min(axis=1)
        lowest[:, q] = np.where(no_on_demand, np.maximum(need, 0.0), 0.0)
        room[:, q] = top - (held[:, inside] + occupancy.spot[:, inside]).max(axis=1)
    best = dict(commitments)
    inference, gradient = evaluate(best)
    best_cost = start_cost = bought(best) + inference
    cuts: list[tuple[float, np.ndarray, np.ndarray]] = [(inference, gradient, counts(best))]
    iterations = 0
    scale = 1 / 8  # of the trust box; doubled after an iterate that improves, halved after one that does not
    while iterations < max_iterations and scale >= 1 / 16:
        if past(deadline, "commitments re-tuned"):
            break
        candidate = _master(sets, keys, price, cuts, counts(best), lowest, room, scale)
        if candidate is None or candidate == {k: v for k, v in best.items() if v}:
            break
        iterations += 1
        inference, gradient = evaluate(candidate)
        cuts.append((inference, gradient, counts(candidate)))
        cost = bought(candidate) + inference
        if cost < best_cost - 1e-6:
            best, best_cost = candidate, cost
            scale = min(1.0, scale * 2)
            say(f"commitments re-tuned on every period: ${best_cost:,.0f} (iteration {iterations})")
        else:
            scale /= 2
    return Tuned(best, start_cost, best_cost, iterations, time.perf_counter() - began)


def _master(
    sets: PlanningSets,
    keys: list[int],
    price: dict[int, float],
    cuts: list[tuple[float, np.ndarray, np.ndarray]],
    center: np.ndarray,
    lowest: np.ndarray,
    highest: np.ndarray,
    scale: float = 1.0,
) -> dict[int, int] | None:
    """min c.R + theta over the cuts, R whole, each column within the trust box around ``center``
    and, in every segment, an offering's serving columns between ``lowest`` and ``highest`` nodes
    (per offering and segment: what gangs on owned nodes hold, and the capacity left); None if it has
    no solution."""
    problem = pulp.LpProblem("commitments", pulp.LpMinimize)
    commit = {c: problem.add_variable(f"R_{c}", 0, None, pulp.LpInteger) for c in keys}
    theta = problem.add_variable("theta", None, None, pulp.LpContinuous)
    for k, c in enumerate(keys):
        step = max(1, round(scale * max(MIN_STEP, TRUST * center[k])))
        commit[c].lowBound = max(0.0, center[k] - step)
        commit[c].upBound = center[k] + step
    for q, period in segment_starts(sets).items():
        serving: dict[int, list[pulp.LpVariable]] = {}
        for c in keys:
            column = sets.columns[c]
            if column.active(period):
                serving.setdefault(column.offering, []).append(commit[c])
        for o, variables in serving.items():
            total = pulp.lpSum(variables)
            if lowest[o, q] > 0:
                problem += total >= lowest[o, q]
            if math.isfinite(highest[o, q]):
                problem += total <= max(highest[o, q], lowest[o, q])
    for value, gradient, at in cuts:  # theta >= F(R_j) + g_j . (R - R_j)
        expression = [(theta, 1.0)]
        constant = value
        for k, c in enumerate(keys):
            if gradient[k]:
                expression.append((commit[c], -gradient[k]))
                constant -= gradient[k] * at[k]
        problem += pulp.LpAffineExpression(expression) >= constant
    family = guarantee_rows(
        sets, commit, lambda name, up: problem.add_variable(name, 0, up, pulp.LpContinuous)
    )
    for name, (terms, sense, rhs) in family.rows.items():
        problem.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms), sense, name, rhs))
    penalty = guarantee_penalty_per_gpu(sets)
    problem.setObjective(
        pulp.lpSum(price[c] * var for c, var in commit.items())
        + theta
        + pulp.lpSum(penalty * family.weight[key] * short for key, short in family.shortfall.items())
    )
    result = solve(problem, gap=1e-6)
    if not result.ok:
        return None
    return {c: round(var.varValue or 0.0) for c, var in commit.items() if round(var.varValue or 0.0) > 0}
