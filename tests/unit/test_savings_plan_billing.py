"""The savings-plan billing rule (``models/savingsplans.py``) against independent calculations: a linear
program per hour (one plan: the highest-discount-first rule is the cheapest covering), and worked examples
written out by hand for the order across plans."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from models.savingsplans import SavingsPlan, bill_hours, budget_row, cover_row, coverage_order, rate_groups

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


# ---- the linear form the models use (cover_row, budget_row) ---------------------------------------------


def _lp(
    usage: dict[str, float], groups: list[tuple[str, dict[str, float], float]], od: dict[str, float] = OD
) -> float:
    """One hour as the models write it: NO[o] on-demand nodes (fixed here to the usage), Z[g,o] covered by
    group g, rows from cover_row and budget_row, covered nodes priced at -c_od, every budget paid."""
    import pulp

    model = pulp.LpProblem("hour", pulp.LpMinimize)
    z = {
        (g, o): model.add_variable(f"z_{g}_{o}", 0, None)
        for g, (_name, rates, _budget) in enumerate(groups)
        for o in rates
        if o in usage
    }
    no = {o: model.add_variable(f"no_{o}", usage[o], usage[o]) for o in usage}
    for o in usage:
        row = cover_row([z[g, o] for g in range(len(groups)) if (g, o) in z], no[o])
        model += pulp.lpSum(c * v for v, c in row) <= 0
    for g, (_name, rates, budget) in enumerate(groups):
        row = budget_row([(z[g, o], rates[o]) for o in rates if (g, o) in z], [])
        model += pulp.lpSum(c * v for v, c in row) <= budget
    model += pulp.lpSum(od[o] * no[o] for o in usage) - pulp.lpSum(od[o] * var for (_g, o), var in z.items())
    model.solve(pulp.HiGHS(msg=False))
    assert pulp.LpStatus[model.status] == "Optimal"
    return float(pulp.value(model.objective) or 0.0) + sum(budget for _n, _r, budget in groups)


@pytest.mark.parametrize("seed", range(10))
def test_the_linear_form_equals_the_rule_with_one_group(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    rates = {o: OD[o] * float(rng.uniform(0.4, 0.95)) for o in OD}
    budget = float(rng.uniform(0, 120))
    usage = {o: float(rng.integers(0, 6)) for o in OD}
    rule = bill_hours(
        {o: np.array([n]) for o, n in usage.items()},
        OD,
        [SavingsPlan("g", "savings-plan-compute", budget, rates)],
    )
    assert _lp(usage, [("g", rates, budget)]) == pytest.approx(rule.total_usd, rel=1e-7, abs=1e-6)


@pytest.mark.parametrize("seed", range(10))
def test_the_linear_form_is_never_dearer_than_the_rule(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    ec2 = {"p5": OD["p5"] * float(rng.uniform(0.4, 0.8))}
    compute = {o: OD[o] * float(rng.uniform(0.5, 0.95)) for o in OD}
    budgets = (float(rng.uniform(0, 80)), float(rng.uniform(0, 80)))
    usage = {o: float(rng.integers(0, 5)) for o in OD}
    plans = [SavingsPlan("ec2", "savings-plan-ec2-instance", budgets[0], ec2),
             SavingsPlan("compute", "savings-plan-compute", budgets[1], compute)]  # fmt: skip
    rule = bill_hours({o: np.array([n]) for o, n in usage.items()}, OD, plans)
    assert _lp(usage, [("ec2", ec2, budgets[0]), ("compute", compute, budgets[1])]) <= rule.total_usd + 1e-6


def test_where_the_rules_order_costs_more_than_the_best_split() -> None:
    """EC2 Instance plan $5.5/h with rates f1 6, f2 5.5; Compute plan $6/h with f1 9, f2 6; one node of each
    at $10/h on demand. The rule: the EC2 plan first covers f2 whole (savings 45 %: 5.5 of 5.5 spent), the
    Compute plan then covers 6/9 of f1: 11.5 + 10/3 = 14.83. The best split: EC2 covers f1 (5.5/6 of it),
    Compute covers f2 whole: 11.5 + 10/12 = 12.33. Models may reach the split; verify bills the rule."""
    od = {"f1": 10.0, "f2": 10.0}
    ec2 = SavingsPlan("ec2", "savings-plan-ec2-instance", 5.5, {"f1": 6.0, "f2": 5.5})
    compute = SavingsPlan("compute", "savings-plan-compute", 6.0, {"f1": 9.0, "f2": 6.0})
    rule = bill_hours({"f1": np.array([1.0]), "f2": np.array([1.0])}, od, [ec2, compute])
    assert rule.total_usd == pytest.approx(11.5 + 10 / 3)
    best = 11.5 + 10 / 12
    split = _lp(
        {"f1": 1.0, "f2": 1.0}, [("ec2", dict(ec2.rates), 5.5), ("compute", dict(compute.rates), 6.0)], od
    )
    assert split == pytest.approx(best)


def test_rate_groups_from_the_embedded_terms() -> None:
    from models.catalog import Catalog

    groups = {g.name: g for g in rate_groups(Catalog.load().terms)}
    p5 = groups["savings-plan-ec2-instance 3y ec2-instance p5 us-east-1"]
    assert dict(p5.rates) == {"aws:us-east-1:p5.48xlarge": 23.77728}
    compute = groups["savings-plan-compute 1y compute"]
    assert dict(compute.rates) == {"aws:us-east-1:p6-b200.48xlarge": 89.72208}
    assert all(g.kind.startswith("savings-plan") for g in groups.values())
    assert not any("reserved" in name or "committed" in name for name in groups)
