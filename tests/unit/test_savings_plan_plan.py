"""Held savings plans in the written plan (issue 38, steps 3-4): allocation rows of tier savings_plan split
from the on-demand rows by the billing rule, costs (the commitment plus what is left on demand), plan.json's
savings_plans, a bound that stays a bound, and ``gpuplan verify`` re-billing each period by the rule. Every
figure by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sp_kit import P4, P5, START, held, sp_term

from models.inputs import Inputs, load_inputs
from models.plan import Plan
from models.priceterms import terms_path_for, write_terms
from models.tiers import Tier
from planner.outputs.karpenter import PoolTier, pool_peaks
from planner.planning.optimize import SolveSettings, optimize
from planner.planning.problem.checks import check_inputs
from planner.verify import verify

HOURS = 48
CHAT = {"name": "chat", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
        "latency_critical": True, "replicas": {"profile": "flat", "base": 3}}  # fmt: skip
EMBED = {"name": "embed", "team": "t", "gpus_per_replica": 8, "gpu_models": ["A100"],
         "latency_critical": True, "replicas": {"profile": "flat", "base": 2}}  # fmt: skip


def _inputs(kit: Any, directory: Path, plans: list, services: list, terms: list, **extra: Any) -> Inputs:
    """p5 in us-east-1 at $10/h on demand (and p4d at $6/h), no spot, no node terms."""
    rows = [
        kit.offering_row(on_demand_usd_h=10.0),
        kit.offering_row(instance_type="p4d.24xlarge", gpu_model="A100-40GB", gpu_memory_gb=40,
                         on_demand_usd_h=6.0),
    ]  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    path = kit.write_catalog_csv(directory / "catalog.csv", rows)
    write_terms(terms, terms_path_for(path))
    data = kit.scenario_dict(hours=HOURS, start=START, inference=services)
    data["savings_plans"] = plans
    data.update(extra)
    return load_inputs(kit.write_scenario_yaml(directory / "s.yaml", data))


def _plan(inputs: Inputs) -> Plan:
    return optimize(inputs.scenario, inputs.catalog, inputs.base_dir, SolveSettings(time_limit=30))


@pytest.mark.parametrize(("budget", "covered"), [(12.0, 2.0), (40.0, 3.0), (3.0, 0.5)])
def test_one_offering_n_nodes_and_a_held_plan_by_hand(kit, tmp_path: Path, budget: float, covered: float):
    """N = 3 on-demand nodes at c = $10/h, a Compute plan of B $/h at r = $6/h: each period it covers
    min(N, B / r) nodes; the plan costs B x hours + (N - covered) x c x hours."""
    inputs = _inputs(
        kit, tmp_path, [held(usd_per_hour=budget)], [CHAT], [sp_term(P5, "savings-plan-compute", 1, 6.0)]
    )
    plan = _plan(inputs)
    rows = plan.allocations
    per_period = rows.groupby(["period", "tier"])["nodes"].sum().unstack(fill_value=0.0)
    assert per_period[Tier.SAVINGS_PLAN].tolist() == pytest.approx([covered] * HOURS)
    assert per_period.get(Tier.ON_DEMAND, pd.Series(0.0, index=per_period.index)).tolist() == pytest.approx(
        [3 - covered] * HOURS
    )
    sp_rows = rows[rows["tier"] == Tier.SAVINGS_PLAN]
    assert set(sp_rows["commitment"]) == {"sp-a"} and (sp_rows["cost_usd"] == 0).all()
    total = budget * HOURS + (3 - covered) * 10.0 * HOURS
    doc = plan.document
    assert doc.costs.total_usd == pytest.approx(total)
    assert doc.costs.by_tier[Tier.SAVINGS_PLAN] == pytest.approx(budget * HOURS)
    assert doc.costs.by_tier[Tier.ON_DEMAND] == pytest.approx((3 - covered) * 10.0 * HOURS)
    assert doc.costs.by_team["t"] == pytest.approx(total) and doc.costs.by_cloud["aws"] == pytest.approx(
        total
    )
    (sp,) = doc.savings_plans
    assert (sp.name, sp.kind, sp.usd_per_hour, sp.existing) == ("sp-a", "savings-plan-compute", budget, True)
    assert sp.cost_in_horizon_usd == pytest.approx(budget * HOURS)
    assert sp.spent_usd == pytest.approx(covered * 6.0 * HOURS)
    assert sp.unspent_usd == pytest.approx((budget - covered * 6.0) * HOURS)
    # the bound: the models pay on demand for what the plan covers, so the bound subtracts the most it can
    # save; it must not exceed what the plan costs (the optimum here: 3 nodes are the only way)
    assert doc.solver.bound_usd <= total + 1e-6
    assert verify(inputs, plan).total == 0
    # a savings plan's nodes launch on demand: the on-demand pool holds all 3
    assert pool_peaks(plan)[(P5, PoolTier.ON_DEMAND)] == 3


def test_a_compute_plan_covers_the_higher_discount_first(kit, tmp_path: Path) -> None:
    """p4d saves 50% (rate $3 of $6), p5 40% ($6 of $10): a $9/h plan covers both p4d nodes ($6/h), and
    with the $3/h left half a p5 node; $9 + 2.5 x $10 an hour."""
    terms = [sp_term(P5, "savings-plan-compute", 1, 6.0), sp_term(P4, "savings-plan-compute", 1, 3.0)]
    inputs = _inputs(kit, tmp_path, [held(usd_per_hour=9.0)], [CHAT, EMBED], terms)
    plan = _plan(inputs)
    sp_rows = plan.allocations[plan.allocations["tier"] == Tier.SAVINGS_PLAN]
    covered = sp_rows.groupby("offering")["nodes"].sum() / HOURS
    assert covered[P4] == pytest.approx(2.0) and covered[P5] == pytest.approx(0.5)
    assert plan.document.costs.total_usd == pytest.approx((9.0 + 2.5 * 10.0) * HOURS)
    assert verify(inputs, plan).total == 0


@pytest.mark.parametrize("method", ["staged", "hourly"])
def test_the_models_see_a_held_plan_and_prove_the_optimum(kit, tmp_path: Path, method: str) -> None:
    """p5 at $10/h in us-east-1, or at $11/h in us-east-2 where a held $12/h plan covers it at $6/h. Blind
    to the plan, a model would serve from us-east-1, $12 + 3 x $10 an hour. The optimum serves 2 nodes
    from us-east-2 (the plan covers both) and 1 from us-east-1, $12 + $10 an hour (all 3 in us-east-2:
    $12 + $11): the models cover on-demand nodes with the plan's budget (build.define_savings_plans,
    bound._savings_plans) and the whole replicas are placed knowing it (period.plan_saving), so both
    methods find it and the certified bound proves it (a bound that subtracted what the plan can save at
    most would stop at $12 + 30 - 22 an hour)."""
    east2 = "aws:us-east-2:p5.48xlarge"
    directory = tmp_path
    rows = [
        kit.offering_row(on_demand_usd_h=10.0),
        kit.offering_row(region="us-east-2", on_demand_usd_h=11.0),
    ]
    path = kit.write_catalog_csv(directory / "catalog.csv", rows)
    write_terms([sp_term(east2, "savings-plan-compute", 1, 6.0)], terms_path_for(path))
    data = kit.scenario_dict(hours=HOURS, start=START, inference=[CHAT])
    data["savings_plans"] = [held(usd_per_hour=12.0)]
    inputs = load_inputs(kit.write_scenario_yaml(directory / "s.yaml", data))
    plan = optimize(
        inputs.scenario, inputs.catalog, inputs.base_dir, SolveSettings(time_limit=30, method=method)
    )
    assert plan.document.solver.method == {"staged": "staged-milp", "hourly": "hourly-decomposition"}[method]
    optimum = (12.0 + 10.0) * HOURS
    assert plan.document.costs.total_usd == pytest.approx(optimum)
    assert plan.document.solver.bound_usd == pytest.approx(optimum)
    nodes = plan.allocations.groupby(["offering", "tier"])["nodes"].sum() / HOURS
    assert nodes.to_dict() == pytest.approx(
        {(east2, Tier.SAVINGS_PLAN): 2.0, ("aws:us-east-1:p5.48xlarge", Tier.ON_DEMAND): 1.0}
    )
    assert verify(inputs, plan).total == 0


def test_a_training_run_pays_only_what_the_plan_leaves_on_demand(kit, tmp_path: Path) -> None:
    """A 2-node gang for 20 h on p5 ($10/h), a $6/h plan at $6/h: it covers 1 node while the run runs; the
    run pays the other, 20 x $10, and the plan its 48 h."""
    job = {"name": "ft", "team": "t", "nodes": 2, "gpus_per_node": 8, "gpu_models": ["H100"], "hours": 20}
    terms = [sp_term(P5, "savings-plan-compute", 1, 6.0)]
    inputs = _inputs(kit, tmp_path, [held(usd_per_hour=6.0)], [], terms, training=[job])
    plan = _plan(inputs)
    (run,) = plan.document.training
    assert run.cost_usd == pytest.approx(20 * 10.0)
    assert plan.document.costs.total_usd == pytest.approx(6.0 * HOURS + 20 * 10.0)
    assert verify(inputs, plan).total == 0


def test_without_savings_plans_nothing_is_split(kit, tmp_path: Path) -> None:
    inputs = _inputs(kit, tmp_path, [], [CHAT], [sp_term(P5, "savings-plan-compute", 1, 6.0)])
    plan = _plan(inputs)
    assert set(plan.allocations["tier"]) == {Tier.ON_DEMAND} and plan.document.savings_plans == []
    assert Tier.SAVINGS_PLAN not in plan.document.costs.by_tier
    assert plan.document.costs.total_usd == pytest.approx(3 * 10.0 * HOURS)


def test_buying_savings_plans_without_rates_says_so(kit, tmp_path: Path) -> None:
    """Plans to buy, but the terms file prices only 3-year ones and the scenario buys 1-year terms: a
    warning naming the kinds and terms, and nothing bought (buying itself: test_savings_plan_buy.py)."""
    inputs = _inputs(kit, tmp_path, [], [CHAT], [sp_term(P5, "savings-plan-compute", 3, 6.0)],
                     purchase={"terms": ["1y"], "savings_plans": ["compute"]})  # fmt: skip
    warnings = check_inputs(inputs.scenario, inputs.catalog)
    assert any("purchase.savings_plans (compute)" in w and "(1y)" in w for w in warnings), warnings
    assert _plan(inputs).document.savings_plans == []


# ---- verify: the written plan passes, each corruption is found ---------------------------------------


@pytest.fixture(scope="module")
def late_plan(kit, tmp_path_factory: pytest.TempPathFactory) -> tuple[Inputs, Plan]:
    """A $12/h plan that starts 10 h into the horizon: periods 10-47 have 2 nodes on it, 1 on demand."""
    directory = tmp_path_factory.mktemp("late")
    plans = [held(usd_per_hour=12.0, start="2027-01-04T10:00:00Z")]
    inputs = _inputs(kit, directory, plans, [CHAT], [sp_term(P5, "savings-plan-compute", 1, 6.0)])
    return inputs, _plan(inputs)


def _kinds(inputs: Inputs, plan: Plan, rows: pd.DataFrame | None = None, **document: Any) -> set[str]:
    changed = Plan(plan.document.model_copy(update=document), plan.allocations if rows is None else rows)
    return set(verify(inputs, changed).kinds)


def _move(rows: pd.DataFrame, period: int, nodes: float) -> pd.DataFrame:
    """``nodes`` of period ``period`` moved from the savings-plan row to the on-demand row (paid)."""
    rows = rows.copy()
    sp = (rows["period"] == period) & (rows["tier"] == Tier.SAVINGS_PLAN)
    od = (rows["period"] == period) & (rows["tier"] == Tier.ON_DEMAND)
    for mask, sign in ((sp, -1.0), (od, 1.0)):
        rows.loc[mask, "nodes"] += sign * nodes
        rows.loc[mask, "gpus"] += sign * nodes * 8
        rows.loc[mask, "replicas"] += sign * nodes
    rows.loc[od, "cost_usd"] += nodes * 10.0
    return rows


def test_verify_passes_the_written_plan(late_plan) -> None:
    inputs, plan = late_plan
    rows = plan.allocations
    assert rows[rows["tier"] == Tier.SAVINGS_PLAN]["period"].min() == 10
    assert verify(inputs, plan).total == 0


def test_verify_finds_coverage_the_rule_does_not_give(late_plan) -> None:
    inputs, plan = late_plan
    # 1 node less covered in period 20 (paid on demand instead): the rule covers 2 there; the total
    # then differs from the written one too
    kinds = _kinds(inputs, plan, _move(plan.allocations, 20, 1.0))
    assert "savings-plan-coverage" in kinds and "savings-plan-budget" not in kinds


def test_verify_finds_a_row_naming_a_plan_not_active_then(late_plan) -> None:
    inputs, plan = late_plan
    rows = plan.allocations.copy()
    first = rows.index[(rows["tier"] == Tier.SAVINGS_PLAN) & (rows["period"] == 20)][0]
    rows.loc[first, "period"] = 5  # before the plan starts
    kinds = _kinds(inputs, plan, rows)
    assert "savings-plan-row" in kinds


def test_verify_finds_spending_above_the_commitment(late_plan) -> None:
    inputs, plan = late_plan
    # all 3 nodes of period 30 on the plan: $18/h of a $12/h commitment
    kinds = _kinds(inputs, plan, _move(plan.allocations, 30, -1.0))
    assert "savings-plan-budget" in kinds and "savings-plan-coverage" in kinds


def test_verify_finds_a_plan_costed_or_listed_wrong(late_plan) -> None:
    inputs, plan = late_plan
    (sp,) = plan.document.savings_plans
    cheaper = sp.model_copy(update={"cost_in_horizon_usd": sp.cost_in_horizon_usd - 100.0})
    assert "savings-plan-cost" in _kinds(inputs, plan, savings_plans=[cheaper])
    bigger = sp.model_copy(update={"usd_per_hour": 20.0})
    assert "existing-savings-plan" in _kinds(inputs, plan, savings_plans=[bigger])
    assert "existing-savings-plan" in _kinds(inputs, plan, savings_plans=[])


def test_a_plan_written_before_savings_plans_still_loads(late_plan, tmp_path: Path) -> None:
    import json

    from models.plan import read_document

    plan = late_plan[1]
    data = json.loads(plan.document.to_json())
    assert data["savings_plans"][0]["name"] == "sp-a"
    del data["savings_plans"]
    (tmp_path / "plan.json").write_text(json.dumps(data))
    assert read_document(tmp_path / "plan.json").savings_plans == []
    assert np.isfinite(plan.document.solver.bound_usd)
