"""Savings-plan columns (``planner/planning/problem/purchases.py``): when a plan may be bought, how long it
serves inside the horizon, what it binds after it, and the budget per period, in closed form."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from models.scenario import parse
from models.tiers import HOURS_PER_YEAR
from planner.planning.problem.purchases import PlanColumn, plan_budget, plan_columns, purchase_steps


def _scenario(kit, tmp_path: Path, hours: int, schedule: str, period_hours: int = 1):
    data = kit.scenario_dict(
        hours=hours, period_hours=period_hours, terms=["1y"], start="2027-01-01T00:00:00Z"
    )
    data["purchase"]["schedule"] = schedule
    return parse(data, tmp_path / "scenario.yaml")


def test_a_plan_may_be_bought_at_every_purchase_step_and_binds_the_rest_of_its_term(
    kit, tmp_path: Path
) -> None:
    scenario = _scenario(
        kit, tmp_path, hours=HOURS_PER_YEAR, schedule="quarterly", period_hours=24 * 365 // 365
    )
    steps = purchase_steps(scenario)
    columns = plan_columns(scenario, {0: 1, 1: 3})
    assert [c.start for c in columns if c.group == 0] == steps == [c.start for c in columns if c.group == 1]
    assert len(steps) == 4  # January, April, July, October
    for column in columns:
        years = 1 if column.group == 0 else 3
        assert column.starts_hour == column.start * 24  # daily periods
        assert column.paid_hours == HOURS_PER_YEAR - column.start * 24  # to the horizon's end
        assert column.beyond_hours == years * HOURS_PER_YEAR - column.paid_hours
        assert column.end == 365 and not column.existing


def test_a_held_plan_ending_inside_the_horizon_can_be_renewed_there(kit, tmp_path: Path) -> None:
    scenario = _scenario(kit, tmp_path, hours=2000, schedule="horizon")
    held = PlanColumn(0, 0, 700, 700.0, 0.0, -HOURS_PER_YEAR + 700.0, 700.0, usd_per_hour=40.0, name="sp-old")
    columns = plan_columns(scenario, {0: 1}, [held])
    assert columns[0] is held
    assert [c.start for c in columns[1:]] == [0, 700]  # the first hour, and where the held one ends


def test_the_budget_sums_the_plans_active_in_each_period(kit, tmp_path: Path) -> None:
    scenario = _scenario(kit, tmp_path, hours=10, schedule="horizon")
    held = PlanColumn(1, 0, 4, 4.0, 0.0, -100.0, 4.0, usd_per_hour=7.5)
    columns = [held, PlanColumn(0, 0, 10, 10.0, 0.0, 0.0, 10.0), PlanColumn(1, 2, 10, 8.0, 0.0, 2.0, 10.0)]
    budget = plan_budget(columns, {1: 3.0, 2: 1.25}, groups=2, periods=scenario.horizon.periods)
    assert budget[0].tolist() == pytest.approx([3.0] * 10)
    assert budget[1].tolist() == pytest.approx([7.5, 7.5, 8.75, 8.75, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25])
    assert np.all(plan_budget(columns, {}, 2, 10)[0] == 0)
