"""Commitments re-tuned against the exact per-period cost, training placements fixed.

The cluster model chooses commitments on averaged demand, so it misjudges peaks (Jensen works against
it here). With training placed, the cost of inference for commitments R is ``F(R) = sum_t F_t(R)``,
each ``F_t`` the LP value of period t's covering problem: convex and piecewise linear in R, and the
duals of the pool and capacity rows give a subgradient. Kelley's cutting planes (Benders with one
aggregated cut per iterate) minimise ``c.R + F(R)`` over whole-node R in a box around the incumbent;
every iterate is evaluated exactly over all periods, so the best one found is never worse than the
start. Node counts are fractional in F; the plan rounds them afterwards (``hourly.dispatch``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pulp

from models.tiers import TERM_TIER, Term
from planner.optimize.build import guarantee_penalty_per_gpu, guarantee_rows
from planner.optimize.hourly import Distinct, Occupancy, PeriodModel, max_nodes
from planner.optimize.sets import PlanningSets
from planner.optimize.solve import solve

TRUST = 0.3  # iterates stay within this fraction (at least MIN_STEP nodes) of the incumbent's counts
MIN_STEP = 4


@dataclass
class Tuned:
    commitments: dict[tuple[int, Term], int]
    cost_before: float  # commitments + fractional-node inference cost at the start
    cost_after: float
    iterations: int
    seconds: float


def tune_commitments(
    sets: PlanningSets,
    commitments: dict[tuple[int, Term], int],
    occupancy: Occupancy,
    time_limit: float | None,
    progress: Callable[[str], None] | None = None,
    max_iterations: int = 30,
) -> Tuned:
    say = progress or (lambda _message: None)
    began = time.perf_counter()
    keys = [(o, term) for o, terms in sets.terms.items() for term in terms]
    price = {
        key: (sets.offerings[key[0]].price(TERM_TIER[key[1]]) or 0.0) * sets.horizon_hours for key in keys
    }
    n_o = len(sets.offerings)

    def nodes(values: dict[tuple[int, Term], int]) -> np.ndarray:
        committed = np.zeros(n_o)
        for (o, _term), count in values.items():
            committed[o] += count
        return committed

    model = PeriodModel(sets, nodes(commitments), every_pool=True)
    groups = Distinct.of(sets, occupancy)

    def bought(values: dict[tuple[int, Term], int]) -> float:
        return sum(price[key] * values.get(key, 0) for key in keys)

    def evaluate(values: dict[tuple[int, Term], int]) -> tuple[float, np.ndarray]:
        """F(R), the periods' LP cost, and a subgradient of it per offering."""
        model.set_commitments(nodes(values))
        total, gradient = 0.0, np.zeros(n_o)
        for t, weight in zip(groups.first, groups.counts, strict=True):
            value, pool_dual, cap_dual = model.lp_at(int(t), occupancy)
            total += weight * value
            # more committed: pool room grows (where the nodes are usable yet)
            gradient[model.pool_offerings] += weight * pool_dual * model.pool_usable[:, int(t)]
            gradient[model.cap_offerings] -= weight * cap_dual  # ... and capacity room shrinks
        return total, gradient

    # gangs on offerings that sell no on-demand node (owned) run on commitments only; elsewhere on-demand
    # nodes take what the commitments do not cover (the billing rule)
    periods = occupancy.non_spot.shape[1]
    no_on_demand = np.array([o.on_demand_usd_h is None for o in sets.offerings])
    lowest = np.zeros(n_o)
    if periods:
        lowest = np.where(no_on_demand, np.ceil(occupancy.non_spot.max(axis=1) - 1e-9), 0.0)
    highest = max_nodes(sets) - (occupancy.spot.max(axis=1) if periods else 0.0)
    best = dict(commitments)
    inference, gradient = evaluate(best)
    best_cost = start_cost = bought(best) + inference
    cuts: list[tuple[float, np.ndarray, np.ndarray]] = [(inference, gradient, nodes(best))]
    iterations = 0
    scale = 1.0  # of the trust box; halved after an iterate that does not improve
    while iterations < max_iterations and scale >= 1 / 16:
        if time_limit is not None and time.perf_counter() - began > time_limit:
            break
        candidate = _master(sets, keys, price, cuts, nodes(best), lowest, highest, scale)
        if candidate is None or candidate == {k: v for k, v in best.items() if v}:
            break
        iterations += 1
        inference, gradient = evaluate(candidate)
        cuts.append((inference, gradient, nodes(candidate)))
        cost = bought(candidate) + inference
        if cost < best_cost - 1e-6:
            best, best_cost = candidate, cost
            say(f"commitments re-tuned on every period: ${best_cost:,.0f} (iteration {iterations})")
        else:
            scale /= 2
    return Tuned(best, start_cost, best_cost, iterations, time.perf_counter() - began)


def _master(
    sets: PlanningSets,
    keys: list[tuple[int, Term]],
    price: dict[tuple[int, Term], float],
    cuts: list[tuple[float, np.ndarray, np.ndarray]],
    center: np.ndarray,
    lowest: np.ndarray,
    highest: np.ndarray,
    scale: float = 1.0,
) -> dict[tuple[int, Term], int] | None:
    """min c.R + theta over the cuts, R whole and within the trust box; None if it has no solution."""
    problem = pulp.LpProblem("commitments", pulp.LpMinimize)
    commit = {}
    for o, term in keys:
        commit[(o, term)] = problem.add_variable(f"R_{o}_{term}", 0, None, pulp.LpInteger)
    theta = problem.add_variable("theta", None, None, pulp.LpContinuous)
    by_offering: dict[int, list[pulp.LpVariable]] = {}
    for (o, _term), var in commit.items():
        by_offering.setdefault(o, []).append(var)
    for o, variables in by_offering.items():
        step = max(1, round(scale * max(MIN_STEP, TRUST * center[o])))
        top = min(highest[o], center[o] + step)
        bottom = max(lowest[o], center[o] - step)
        total = pulp.lpSum(variables)
        problem += total >= bottom
        if math.isfinite(top):
            problem += total <= max(top, bottom)
    for value, gradient, at in cuts:  # theta >= F(R_j) + g_j . (R - R_j)
        expression = [(theta, 1.0)]
        constant = value
        for o, variables in by_offering.items():
            if gradient[o]:
                expression += [(var, -gradient[o]) for var in variables]
                constant -= gradient[o] * at[o]
        problem += pulp.LpAffineExpression(expression) >= constant
    family = guarantee_rows(
        sets, commit, lambda name, up: problem.add_variable(name, 0, up, pulp.LpContinuous)
    )
    for name, (terms, sense, rhs) in family.rows.items():
        problem.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms), sense, name, rhs))
    penalty = guarantee_penalty_per_gpu(sets)
    problem.setObjective(
        pulp.lpSum(price[key] * var for key, var in commit.items())
        + theta
        + pulp.lpSum(penalty * short for short in family.shortfall.values())
    )
    result = solve(problem, gap=1e-6)
    if not result.ok:
        return None
    return {key: round(var.varValue or 0.0) for key, var in commit.items() if round(var.varValue or 0.0) > 0}
