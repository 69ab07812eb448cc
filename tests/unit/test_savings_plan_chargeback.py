"""Chargeback of a plan holding a savings plan (issue 38): each month the plan's spent dollars go to the
teams whose rows it covered (covered node-hours x its rate), its unspent commitment is idle cost charged by
the idle rule, and the teams add up to the plan's cost. A small plan whose split is computed by hand, and
usage against such a plan refused with one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sp_kit import P4, P5, held, sp_term

from models.chargeback import IDLE_PROJECT, Book, IdleRule, charge_plan
from models.errors import InputError
from models.inputs import load_inputs
from models.plan import Plan
from models.priceterms import terms_path_for, write_terms
from models.tiers import Tier
from models.usage import read_usage
from planner.planning.optimize import SolveSettings, optimize

START = "2027-01-31T00:00:00Z"  # 48 h: 24 in January, 24 in February
HOURS = 48
CHAT = {"name": "chat", "team": "a", "gpus_per_replica": 8, "gpu_models": ["H100"],
        "latency_critical": True, "replicas": {"profile": "flat", "base": 3}}  # fmt: skip
EMBED = {"name": "embed", "team": "b", "gpus_per_replica": 8, "gpu_models": ["A100"],
         "latency_critical": True, "replicas": {"profile": "flat", "base": 1}}  # fmt: skip


@pytest.fixture(scope="module")
def plan(kit, tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """Team a: 3 p5 nodes ($10/h on demand) all 48 h; team b: 1 p4d node ($6/h). A Compute plan of $24/h
    from hour 12 (rates: p5 $6, p4d $3) covers p4d first (50% off, $3) and the 3 p5 nodes ($18): $21 of
    its $24 spent each hour, $3 idle."""
    directory = tmp_path_factory.mktemp("sp-chargeback")
    rows = [
        kit.offering_row(on_demand_usd_h=10.0),
        kit.offering_row(instance_type="p4d.24xlarge", gpu_model="A100-40GB", gpu_memory_gb=40,
                         on_demand_usd_h=6.0),
    ]  # fmt: skip
    path = kit.write_catalog_csv(directory / "catalog.csv", rows)
    terms = [sp_term(P5, "savings-plan-compute", 1, 6.0), sp_term(P4, "savings-plan-compute", 1, 3.0)]
    write_terms(terms, terms_path_for(path))
    data = kit.scenario_dict(hours=HOURS, start=START, inference=[CHAT, EMBED],
                             teams=[{"name": "a"}, {"name": "b"}])  # fmt: skip
    data["savings_plans"] = [held(usd_per_hour=24.0, start="2027-01-31T12:00:00Z")]
    inputs = load_inputs(kit.write_scenario_yaml(directory / "s.yaml", data))
    return optimize(inputs.scenario, inputs.catalog, inputs.base_dir, SolveSettings(time_limit=30))


# by hand: hours 0-11 on demand (a: 3 x $10, b: $6), all in January; the plan from hour 12: 12 h in
# January (commitment 12 x $24 = $288; a spent 12 x $18 = $216, b 12 x $3 = $36, idle $36) and 24 h in
# February ($576; a $432, b $72, idle $72)
ON_DEMAND = {"a": 12 * 30.0, "b": 12 * 6.0}
MONTHS = {"2027-01": (288.0, 216.0, 36.0), "2027-02": (576.0, 432.0, 72.0)}  # cost, a spent, b spent
TOTAL = 24.0 * 36 + 12 * 36.0


def _cost(result: Any, **where: str) -> float:
    rows = result.rows
    for column, value in where.items():
        rows = rows[rows[column] == value]
    return float(rows["cost_usd"].sum())


def test_the_plan_is_the_hand_made_case(plan: Plan) -> None:
    (sp,) = plan.document.savings_plans
    assert sp.cost_in_horizon_usd == pytest.approx(24.0 * 36)
    assert sp.spent_usd == pytest.approx(21.0 * 36)
    assert plan.document.costs.total_usd == pytest.approx(TOTAL)


def test_usage_rule_shares_each_month_by_the_dollars_spent(plan: Plan) -> None:
    result = charge_plan(plan, IdleRule.USAGE)
    for month, (cost, a, b) in MONTHS.items():
        assert _cost(result, month=month, team="a", tier="savings_plan") == pytest.approx(cost * a / (a + b))
        assert _cost(result, month=month, team="b", tier="savings_plan") == pytest.approx(cost * b / (a + b))
    assert IDLE_PROJECT not in set(result.rows["project"])
    for team, usd in ON_DEMAND.items():
        assert _cost(result, team=team, tier="on_demand") == pytest.approx(usd)
    # the teams add up to the plan's cost, and (one rule, one horizon) to plan.json's cost by team
    assert result.total_usd == pytest.approx(TOTAL, abs=0.005)
    by_team = result.rows.groupby("team")["cost_usd"].sum()
    for team, usd in plan.document.costs.by_team.items():
        assert by_team[team] == pytest.approx(usd)
    assert by_team["a"] == pytest.approx(360.0 + 288.0 * 216 / 252 + 576.0 * 432 / 504)


def test_guarantees_rule_charges_the_unspent_dollars_to_the_backers(plan: Plan) -> None:
    """b holds a guarantee on A100s, which the plan covers (p4d): the idle $3 an hour go to b."""
    teams = dict(plan.document.teams)
    teams["b"] = teams["b"].model_copy(update={"guaranteed_gpus": 8})
    backed = Plan(plan.document.model_copy(update={"teams": teams}), plan.allocations)
    result = charge_plan(backed, IdleRule.GUARANTEES)
    for month, (cost, a, b) in MONTHS.items():
        idle = cost - a - b
        assert _cost(result, month=month, team="a", tier="savings_plan") == pytest.approx(a)
        assert _cost(result, month=month, team="b", project="embed", tier="savings_plan") == pytest.approx(b)
        assert _cost(result, month=month, team="b", project=IDLE_PROJECT) == pytest.approx(idle)
        window = result.windows[(result.windows["month"] == month)].iloc[0]
        assert (window["commitment"], window["tier"]) == ("sp-a", "savings_plan")
        assert window["used_fraction"] == pytest.approx((a + b) / cost)
        assert window["idle_usd"] == pytest.approx(idle)
    assert result.total_usd == pytest.approx(TOTAL, abs=0.005)
    # without a backer the guarantees rule shares the idle dollars by use, as the usage rule does
    plain = charge_plan(plan, IdleRule.GUARANTEES).rows.groupby("team")["cost_usd"].sum()
    shared = charge_plan(plan, IdleRule.USAGE).rows.groupby("team")["cost_usd"].sum()
    pd.testing.assert_series_equal(plain, shared)


def test_rates_and_one_month(plan: Plan) -> None:
    result = charge_plan(plan, IdleRule.USAGE, month="2027-02")
    assert result.expected_total_usd == pytest.approx(576.0)  # all covered: no on-demand row in February
    assert result.total_usd == pytest.approx(576.0, abs=0.005)
    rate = result.rates[(result.rates["tier"] == "savings_plan") & (result.rates["offering"] == P5)].iloc[0]
    assert rate["price_usd_per_gpu_hour"] == pytest.approx(6.0 / 8)
    assert rate["effective_usd_per_gpu_hour"] == pytest.approx(6.0 / 8 * 576 / 504)


def test_usage_against_a_plan_holding_savings_plans_is_refused(plan: Plan, tmp_path: Path) -> None:
    usage = tmp_path / "usage.csv"
    usage.write_text(f"team,start,end,gpus,offering,tier\na,{START},2027-01-31T01:00:00Z,8,{P5},on_demand\n")
    with pytest.raises(InputError, match=r"holds savings plans \(sp-a\); usage is not charged") as caught:
        read_usage(usage, Book.from_plan(plan))
    assert caught.value.file == str(usage) and "\n" not in str(caught.value)
    assert Tier.SAVINGS_PLAN in set(plan.allocations["tier"])
