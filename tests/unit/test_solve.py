"""The solver wrapper: statuses, bounds, and block-by-block solving of separable models."""

from __future__ import annotations

import math

import pulp
import pytest

from planner.optimize.solve import Termination, solve, solve_separable


def separable_problem(fixed_value: int) -> pulp.LpProblem:
    """Three covering knapsacks tied together only through a variable fixed at ``fixed_value``."""
    problem = pulp.LpProblem("blocks", pulp.LpMinimize)
    shared = problem.add_variable("shared", fixed_value, fixed_value, pulp.LpInteger)
    objective = [(shared, 2.0)]
    for block, (need, sizes, prices) in enumerate(
        [(7, (3, 5), (4.0, 6.0)), (11, (2, 7), (3.0, 8.5)), (5, (4, 4), (5.0, 4.5))]
    ):
        items = [problem.add_variable(f"n_{block}_{k}", 0, None, pulp.LpInteger) for k in range(2)]
        terms = [(item, float(size)) for item, size in zip(items, sizes, strict=True)]
        problem += pulp.LpAffineExpression([*terms, (shared, 1.0)]) >= need
        objective += [(item, price) for item, price in zip(items, prices, strict=True)]
    problem.setObjective(pulp.LpAffineExpression(objective))
    return problem


def brute_force(fixed_value: int) -> float:
    total = 2.0 * fixed_value
    for need, sizes, prices in [(7, (3, 5), (4.0, 6.0)), (11, (2, 7), (3.0, 8.5)), (5, (4, 4), (5.0, 4.5))]:
        total += min(
            a * prices[0] + b * prices[1]
            for a in range(12)
            for b in range(12)
            if a * sizes[0] + b * sizes[1] + fixed_value >= need
        )
    return total


@pytest.mark.parametrize("fixed_value", [0, 1, 3])
def test_block_by_block_equals_the_whole_and_brute_force(fixed_value):
    whole = solve(separable_problem(fixed_value), gap=1e-9)
    problem = separable_problem(fixed_value)
    blocks = solve_separable(problem, gap=1e-9)
    assert whole.termination == blocks.termination == Termination.OPTIMAL
    assert blocks.objective == pytest.approx(whole.objective) == pytest.approx(brute_force(fixed_value))
    assert blocks.bound <= blocks.objective + 1e-9
    # the values written back are a solution of the whole problem, at the reported cost
    assert pulp.value(problem.objective) == pytest.approx(blocks.objective)
    for constraint in problem.constraints():  # a list (PuLP 4 API); the dict view is deprecated
        assert constraint.value() >= -1e-9


def test_infeasible_fixed_row_is_reported():
    problem = pulp.LpProblem("bad", pulp.LpMinimize)
    x = problem.add_variable("x", 1, 1)
    problem += pulp.LpAffineExpression([(x, 1.0)]) >= 2
    problem.setObjective(pulp.LpAffineExpression([(x, 1.0)]))
    assert solve_separable(problem).termination == Termination.INFEASIBLE


def test_gap_is_distance_from_the_bound():
    result = solve(separable_problem(0), gap=1e-9)
    assert result.ok and result.gap == pytest.approx(0.0, abs=1e-6)
    assert math.isfinite(result.bound)
