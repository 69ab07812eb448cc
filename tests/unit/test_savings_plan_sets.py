"""Savings plans in the planning sets (issue 38, step 2): rate groups by offering index, plan columns (held
first), budgets per period, plan windows as segment boundaries, held plans in ``fixed_usd``, and pruning
that never drops an offering a savings plan covers by its on-demand price alone (memo fact 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sp_kit import START, held, sp_term

from models.catalog import Catalog
from models.priceterms import terms_path_for, write_terms
from models.scenario import parse
from planner.planning.problem.sets import ModelOptions, build_sets

P5_EAST1 = "aws:us-east-1:p5.48xlarge"
P5_EAST2 = "aws:us-east-2:p5.48xlarge"


def _sets(
    kit: Any, tmp_path: Path, plans: list, prune: bool = True, buy: list[str] | None = None, **extra: Any
):
    """One p5 service (3 replicas of 8 GPUs, latency critical) over 48 h; p5 in us-east-1 at $10/h on
    demand and in us-east-2 at $11/h, which a Compute plan covers at $6/h."""
    rows = [
        kit.offering_row(on_demand_usd_h=10.0),
        kit.offering_row(region="us-east-2", on_demand_usd_h=11.0),
    ]
    path = kit.write_catalog_csv(tmp_path / "catalog.csv", rows)
    write_terms([sp_term(P5_EAST2, "savings-plan-compute", 1, 6.0)], terms_path_for(path))
    service = {"name": "chat", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
               "replicas": {"profile": "flat", "base": 3}}  # fmt: skip
    data = kit.scenario_dict(hours=48, start=START, terms=["1y"] if buy else [], inference=[service])
    data["purchase"]["savings_plans"] = buy or []
    data["savings_plans"] = plans
    data.update(extra)
    scenario = parse(data, tmp_path / "s.yaml")
    return build_sets(scenario, Catalog.load(path), tmp_path, ModelOptions(prune=prune))


def test_no_savings_plan_changes_nothing(kit, tmp_path: Path) -> None:
    sets = _sets(kit, tmp_path, [])
    assert sets.groups == [] and sets.plans == [] and sets.group_rates == []
    assert sets.budget().shape == (0, 48) and sets.fixed_usd == 0.0
    assert sets.segment.tolist() == [0] * 48
    # us-east-2 is dominated (same node, dearer on demand, no commitment): spot only, so off spot nowhere
    assert sets.serve_tiers.get((0, 1)) is None


def test_a_held_plan_is_a_column_with_its_budget_its_cost_and_its_window(kit, tmp_path: Path) -> None:
    # began 10 h into the horizon: 1y from then
    sets = _sets(kit, tmp_path, [held(usd_per_hour=4.0, start="2027-01-04T10:00:00Z")])
    assert [g.name for g in sets.groups] == ["savings-plan-compute 1y compute"]
    assert sets.group_rates == [{1: 6.0}]  # by offering index: us-east-2 only
    (plan,) = sets.plans
    assert (plan.start, plan.end, plan.paid_hours, plan.name) == (10, 48, 38.0, "sp-a")
    assert sets.held_plans == [0] and sets.new_plans == []
    assert sets.fixed_usd == pytest.approx(4.0 * 38)
    assert sets.budget()[0].tolist() == [0.0] * 10 + [4.0] * 38
    assert sets.plans_active(9) == [] and sets.plans_active(10) == [0]
    # its start bounds a segment: no slot straddles it
    assert sets.segment.tolist() == [0] * 10 + [1] * 38
    for slot in sets.slots:
        assert len({int(sets.segment[p]) for p in slot.periods}) == 1


def test_pruning_keeps_what_a_savings_plan_covers(kit, tmp_path: Path) -> None:
    """us-east-2 is $1/h dearer on demand, but the held plan covers it at $6/h: priced on demand it
    would be pruned off spot, and the plan's coverage (and the bound) lost."""
    sets = _sets(kit, tmp_path, [held(usd_per_hour=12.0)])
    unpruned = _sets(kit, tmp_path, [held(usd_per_hour=12.0)], prune=False)
    assert sets.plan_covered(1) and not sets.plan_covered(0)
    assert sets.serve_tiers[(0, 1)] == unpruned.serve_tiers[(0, 1)]
    assert "non_spot" in sets.serve_tiers[(0, 1)]


def test_a_group_the_plan_may_buy_is_kept_from_pruning_too(kit, tmp_path: Path) -> None:
    sets = _sets(kit, tmp_path, [], buy=["compute"])
    assert [g.name for g in sets.groups] == ["savings-plan-compute 1y compute"]
    assert sets.held_plans == [] and len(sets.new_plans) == 1  # a horizon of 48 h: one purchase step
    assert sets.plan_covered(1) and "non_spot" in sets.serve_tiers[(0, 1)]
    assert np.all(sets.budget() == 0.0)
