"""The savings-plan billing rule (``models/savingsplans.py``) against independent calculations: a linear
program per hour (one plan: the highest-discount-first rule is the cheapest covering), and worked examples
written out by hand for the order across plans."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from models.savingsplans import SavingsPlan, bill_hours, coverage_order

OD = {"p5": 55.04, "p4d": 21.96, "g6e": 1.861}


def _lp_cost(usage: dict[str, float], plan: SavingsPlan) -> float:
    """One hour, one plan, by linear programming: minimize the commitment plus the on-demand remainder over
    every covering x_o (0 <= x_o <= usage, sum rate_o x_o <= commitment)."""
    names = [o for o in usage if o in plan.rates]
    if not names:
        return plan.usd_per_hour + sum(usage[o] * OD[o] for o in usage)
    c = [-OD[o] for o in names]  # each covered node saves its on-demand rate
    a = [[plan.rates[o] for o in names]]
    result = linprog(
        c, A_ub=a, b_ub=[plan.usd_per_hour], bounds=[(0, usage[o]) for o in names], method="highs"
    )
    assert result.status == 0
    return plan.usd_per_hour + sum(usage[o] * OD[o] for o in usage) + float(result.fun)


@pytest.mark.parametrize("seed", range(20))
def test_one_plan_bills_as_the_cheapest_covering(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rates = {o: OD[o] * float(rng.uniform(0.4, 0.95)) for o in OD if rng.random() < 0.8} or {"p5": 30.0}
    plan = SavingsPlan("sp", "savings-plan-compute", float(rng.uniform(0, 120)), rates)
    usage = {o: float(rng.integers(0, 6)) for o in OD}
    bill = bill_hours({o: np.array([n]) for o, n in usage.items()}, OD, [plan])
    assert bill.total_usd == pytest.approx(_lp_cost(usage, plan), rel=1e-9, abs=1e-9)


def test_the_highest_discount_is_covered_first_then_the_lower_rate() -> None:
    plan = SavingsPlan("sp", "savings-plan-compute", 10.0, {"p5": 27.52, "p4d": 10.98, "g6e": 1.2})
    # p5 and p4d both save exactly 50 %: the lower rate (p4d) first; g6e saves 35.5 %
    assert coverage_order(plan, OD) == ["p4d", "p5", "g6e"]


def test_a_worked_hour_with_both_kinds() -> None:
    """EC2 Instance plan (p5 only, 30 $/h at 34.6752) applies first, then the Compute plan (40 $/h: p5 at
    38.53, p4d at 15.37, g6e at 1.30). Usage: 2 p5, 3 p4d, 4 g6e.
    By hand: the EC2 plan covers 30 / 34.6752 = 0.86517 p5; the Compute plan orders by savings: g6e
    (1 - 1.30/1.861 = 30.15 %), p4d (1 - 15.37/21.96 = 30.01 %), p5 (1 - 38.53/55.04 = 29.996 %): g6e
    4 x 1.30 = 5.20, then p4d: 34.80 / 15.37 = 2.26416 of 3, and the budget is spent. Left on demand:
    p5 2 - 0.86517, p4d 3 - 2.26416, g6e 0."""
    ec2 = SavingsPlan("ec2", "savings-plan-ec2-instance", 30.0, {"p5": 34.6752})
    compute = SavingsPlan("compute", "savings-plan-compute", 40.0, {"p5": 38.53, "p4d": 15.37, "g6e": 1.30})
    usage = {"p5": np.array([2.0]), "p4d": np.array([3.0]), "g6e": np.array([4.0])}
    bill = bill_hours(usage, OD, [compute, ec2])  # given in any order: the kinds decide
    p5_ec2 = 30.0 / 34.6752
    p4d = (40.0 - 4 * 1.30) / 15.37
    assert bill.covered[("ec2", "p5")][0] == pytest.approx(p5_ec2)
    assert bill.covered[("compute", "g6e")][0] == pytest.approx(4.0)
    assert bill.covered[("compute", "p4d")][0] == pytest.approx(p4d)
    assert bill.covered[("compute", "p5")][0] == pytest.approx(0.0)
    expected_on_demand = (2 - p5_ec2) * 55.04 + (3 - p4d) * 21.96
    assert bill.on_demand_usd == pytest.approx(expected_on_demand)
    assert bill.total_usd == pytest.approx(70.0 + expected_on_demand)
    assert bill.unspent_usd == pytest.approx(0.0)


def test_an_idle_hour_pays_the_commitment_unspent_and_a_plan_bills_only_its_term() -> None:
    plan = SavingsPlan("sp", "savings-plan-compute", 12.0, {"p5": 30.0}, start=1, end=3)
    bill = bill_hours({"p5": np.array([1.0, 0.0, 1.0, 1.0])}, OD, [plan], hours_per_step=2.0)
    # step 0: before its term (on demand 2 h); step 1: idle (24 unspent); step 2: covers 24 / 60 of the node;
    # step 3: after it (on demand)
    assert bill.commitment_usd == pytest.approx(2 * 12.0 * 2)
    assert bill.unspent_usd == pytest.approx(24.0)
    assert bill.covered[("sp", "p5")].tolist() == pytest.approx([0.0, 0.0, 0.4, 0.0])
    assert bill.on_demand_usd == pytest.approx((1 + 0.6 + 1) * 55.04 * 2)


def test_bad_plans_are_refused() -> None:
    with pytest.raises(ValueError, match=">= 0 USD per hour"):
        SavingsPlan("x", "savings-plan-compute", -1.0, {"p5": 30.0})
    with pytest.raises(ValueError, match="above 0"):
        SavingsPlan("x", "savings-plan-compute", 1.0, {"p5": 0.0})
