"""planner/planning/optimize/budget.py: one time budget from --time-limit, each stage's share named once.

Each rule is checked against the figures it must give, worked out by hand from the shares it names, on a
clock the test moves (no test here waits or measures time); and the tree is read to check that no stage
computes a share of the limit where it runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from planner.planning.optimize.budget import OF_LEFT, OF_LIMIT, SECONDS, Share, TimeBudget

OPTIMIZE = Path(__file__).resolve().parents[2] / "planner" / "planning" / "optimize"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def budget_at(limit: float | None, elapsed: float, realize: float | None = None) -> TimeBudget:
    clock = Clock()
    budget = TimeBudget(limit, realize, began=clock.now, clock=clock)
    clock.now += elapsed
    return budget


def test_every_share_is_named_in_one_table() -> None:
    assert set(OF_LIMIT) | set(OF_LEFT) == set(Share)
    assert not set(OF_LIMIT) & set(OF_LEFT)
    assert all(0 < share <= 1 for share in [*OF_LIMIT.values(), *OF_LEFT.values()])
    # stage 1 fits inside the stages' part, and the certified bound keeps the rest
    assert OF_LIMIT[Share.STAGE_1] < OF_LIMIT[Share.STAGES] < 1


def test_the_clock_and_the_shares_of_the_limit() -> None:
    budget = budget_at(120.0, 30.0)
    assert budget.elapsed() == pytest.approx(30.0)
    assert budget.left() == pytest.approx(90.0)
    assert budget.of_limit(Share.STAGE_1) == pytest.approx(48.0)  # 40 % of 120 s
    assert budget.until(Share.STAGES) == pytest.approx(84.0 - 30.0)  # 70 % of 120 s, less 30 s spent
    assert budget.of_left(Share.STAGE_2_FREE, 90.0) == pytest.approx(45.0)
    free = budget_at(None, 30.0)
    assert free.left() is None and free.of_limit(Share.STAGE_1) is None and free.until(Share.STAGES) is None
    assert free.of_left(Share.STAGE_2_FREE, None) is None


def test_whole_replicas_get_what_is_left_at_least_their_share_unless_given_seconds() -> None:
    assert budget_at(120.0, 100.0).realize == pytest.approx(30.0)  # at least 25 % of 120 s
    assert budget_at(120.0, 50.0).realize == pytest.approx(70.0)  # what is left, when more
    assert budget_at(120.0, 0.0, realize=7.0).realize == pytest.approx(7.0)
    assert budget_at(None, 0.0).realize == SECONDS["realize without a limit"]


def test_the_exact_bound_runs_only_in_time_left_and_only_when_it_can_help() -> None:
    """Its budget: what is left of the limit, at most 15 % of it, none below 5 s, none once the plan is
    proven within the gap asked for (so a plan done early is not made to wait for it)."""
    assert budget_at(120.0, 30.0).exact_bound(95.0, 100.0, 0.005) == pytest.approx(18.0)  # 15 % of 120
    assert budget_at(120.0, 110.0).exact_bound(95.0, 100.0, 0.005) == pytest.approx(10.0)  # what is left
    assert budget_at(120.0, 116.0).exact_bound(95.0, 100.0, 0.005) is None  # 4 s left: not worth it
    assert budget_at(120.0, 0.0).exact_bound(99.6, 100.0, 0.005) is None  # already within 0.5 %
    assert budget_at(None, 1e6).exact_bound(95.0, 100.0, 0.005) == pytest.approx(60.0)  # no limit


def test_the_local_search_keeps_the_dispatches_and_the_reserve() -> None:
    said: list[str] = []
    budget = budget_at(120.0, 0.0)
    # 100 s left, 10 s kept, 4 s of dispatch x 1.5: 84 s, at most 20 % of 120 s = 24 s
    assert budget.local_search(100.0, 10.0, 4.0, said.append) == pytest.approx(24.0)
    assert budget.local_search(20.0, 10.0, 4.0, said.append) == pytest.approx(4.0)
    short = budget.local_search(11.0, 10.0, 0.5, said.append)
    assert short == pytest.approx(0.25) and not budget.searchable(short)
    assert said == ["local search: no time left (11 s, 10 s kept)"]
    assert budget_at(None, 0.0).local_search(None, 0.0, 0.0, said.append) is None
    assert budget.searchable(None) and budget.searchable(1.0)


def test_the_hourly_methods_cluster_model_gets_its_floor_and_its_cap() -> None:
    # the LP: what is left, at least 600 s, past the limit if need be
    assert budget_at(60.0, 10.0).cluster_lp() == pytest.approx(600.0)
    assert budget_at(3600.0, 10.0).cluster_lp() == pytest.approx(3590.0)
    # the MILP: at most 3/4 of what is left, at least a third, capped at max(20 s, 2.5 x the LP's time)
    assert budget_at(120.0, 20.0).cluster_milp(4.0) == pytest.approx(100.0 / 3)  # cap 20 < 100/3
    assert budget_at(120.0, 20.0).cluster_milp(16.0) == pytest.approx(40.0)  # cap 40 between
    assert budget_at(120.0, 20.0).cluster_milp(100.0) == pytest.approx(75.0)  # 3/4 of 100 s
    assert budget_at(None, 0.0).cluster_milp(16.0) == pytest.approx(40.0)
    assert budget_at(120.0, 109.0).runs_cluster_milp() and not budget_at(120.0, 110.0).runs_cluster_milp()


def test_no_stage_computes_a_share_of_the_limit_where_it_runs() -> None:
    """Outside budget.py, nothing in optimize/ multiplies or divides a time limit or what is left of it
    by a literal or a module constant (``0.5 * remaining``, ``REALIZE_SHARE * time_limit``, as the code
    had before the budget: six files, eleven names): the shares are the budget's."""
    found = []
    names = {"time_limit", "remaining", "left", "limit", "solve_budget"}
    for path in sorted(OPTIMIZE.glob("*.py")):
        if path.name == "budget.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div):
                sides = (node.left, node.right)
                literal = any(
                    isinstance(side, ast.Constant) or (isinstance(side, ast.Name) and side.id.isupper())
                    for side in sides
                )
                timed = any(
                    (isinstance(side, ast.Name) and side.id in names)
                    or (isinstance(side, ast.Attribute) and side.attr in names)
                    for side in sides
                )
                if literal and timed:
                    found.append(f"{path.name}:{node.lineno}")
    assert found == []


def test_the_certified_bound_keeps_at_least_its_share() -> None:
    # stages that overran leave 2 s: the bound still gets its share of the limit, not the 5 s floor
    assert budget_at(120.0, 118.0).certified() == pytest.approx(OF_LIMIT[Share.CERTIFIED] * 120.0)
    # with more left than that, all of it
    assert budget_at(120.0, 40.0).certified() == pytest.approx(80.0)
    assert budget_at(None, 40.0).certified() is None
