"""Savings plans in a scenario (issue 38): ``purchase.savings_plans`` (the kinds the plan may buy) and the
plans held already (``savings_plans:``), validated strictly with errors naming the field; their rates from
the catalog's terms file (``purchases.savings_plan_groups``); the tier their rows are written on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sp_kit import P4, P5, START, held, sp_term, write_sp_catalog

from models.catalog import Catalog
from models.errors import InputError
from models.priceterms import PriceTerm
from models.scenario import parse
from models.scope import scenario_offerings
from models.tiers import HOURS_PER_YEAR, Tier
from planner.outputs.k8s import _TIER_CAPACITY, NodeCapacity
from planner.outputs.karpenter import _TIER_OF_ROW, PoolTier
from planner.planning.problem.purchases import savings_plan_groups


def _error(kit: Any, tmp_path: Path, **changes: Any) -> InputError:
    data = kit.scenario_dict(hours=24, start=START)
    data.update(changes)
    with pytest.raises(InputError) as caught:
        parse(data, tmp_path / "s.yaml")
    return caught.value


def test_held_plans_and_kinds_to_buy_are_read(kit, tmp_path: Path) -> None:
    data = kit.scenario_dict(hours=24, start=START, terms=["1y", "3y"])
    data["purchase"]["savings_plans"] = ["compute", "ec2-instance"]
    data["savings_plans"] = [
        held(),
        held("sp-b", kind="ec2-instance", term="3y", family="p5", region="us-east-1"),
    ]
    scenario = parse(data, tmp_path / "s.yaml")
    assert scenario.purchase.savings_plans == ["compute", "ec2-instance"]
    a, b = scenario.savings_plans
    assert (a.scope, b.scope) == ("compute", "ec2-instance p5 us-east-1")
    assert (b.ends - b.start).total_seconds() == 3 * HOURS_PER_YEAR * 3600
    # opt-in: a scenario without them buys none and holds none
    plain = parse(kit.scenario_dict(hours=24, start=START), tmp_path / "s.yaml")
    assert plain.purchase.savings_plans == [] and plain.savings_plans == []


@pytest.mark.parametrize(
    ("plans", "where", "says"),
    [
        (
            [held(kind="ec2-instance", region="us-east-1")],
            "savings_plans[0].family",
            "in one region: give it",
        ),
        (
            [held(kind="gcp-resource", family="H100")],
            "savings_plans[0].region",
            "GCP: a GPU model",
        ),
        ([held(region="us-east-1")], "savings_plans[0].region", "only an ec2-instance"),
        ([held(usd_per_hour=0)], "savings_plans[0].usd_per_hour", "greater than 0"),
        ([held(usd_per_hour=True)], "savings_plans[0].usd_per_hour", ""),
        ([held(kind="ec2")], "savings_plans[0].kind", "compute"),
        ([held(term="5y")], "savings_plans[0].term", "'1y' or '3y'"),
        ([held(rate=3)], "savings_plans[0].rate", "unknown field"),
        ([held(), held()], "savings_plans[1].name", "unique"),
        ([held(start="2025-01-01T00:00:00Z")], "savings_plans[0]", "does not overlap the horizon"),
    ],
)
def test_a_bad_held_plan_names_its_field(kit, tmp_path: Path, plans: list, where: str, says: str) -> None:
    error = _error(kit, tmp_path, savings_plans=plans)
    assert error.where == where and says in error.problem


def test_a_bad_kind_to_buy_names_its_field(kit, tmp_path: Path) -> None:
    data = kit.scenario_dict(hours=24, start=START)
    data["purchase"]["savings_plans"] = ["compute", "reserved"]
    with pytest.raises(InputError) as caught:
        parse(data, tmp_path / "s.yaml")
    assert caught.value.where == "purchase.savings_plans[1]"


def test_a_plan_may_not_share_a_held_commitments_name(kit, tmp_path: Path) -> None:
    commitment = {"name": "sp-a", "offering": P5, "term": "1y", "nodes": 1, "start": START}
    error = _error(kit, tmp_path, commitments=[commitment], savings_plans=[held()])
    assert error.where == "savings_plans[0].name"


def _groups(kit: Any, tmp_path: Path, terms: list[PriceTerm], plans: list, buy: list[str], years: list[str]):
    catalog = Catalog.load(write_sp_catalog(kit, tmp_path, terms, p5=10.0, p4=6.0))
    data = kit.scenario_dict(hours=48, start=START, terms=years)
    data["purchase"]["savings_plans"] = buy
    data["savings_plans"] = plans
    scenario = parse(data, tmp_path / "s.yaml")
    return savings_plan_groups(scenario, catalog, scenario_offerings(scenario, catalog))


TERMS = [
    sp_term(P5, "savings-plan-compute", 1, 7.0),
    sp_term(P4, "savings-plan-compute", 1, 4.5),
    sp_term(P5, "savings-plan-ec2-instance", 1, 6.0),
    sp_term(P5, "savings-plan-compute", 3, 5.0),
]


def test_rates_come_from_the_catalogs_terms_and_held_plans_become_columns(kit, tmp_path: Path) -> None:
    plans = [held(usd_per_hour=4.0, start="2026-07-04T00:00:00Z")]
    groups, columns, buyable = _groups(kit, tmp_path, TERMS, plans, buy=[], years=[])
    assert [g.name for g in groups] == ["savings-plan-compute 1y compute"]  # held only: nothing to buy
    assert dict(groups[0].rates) == {P5: 7.0, P4: 4.5} and buyable == {}
    (column,) = columns
    # began half a year before the horizon: serves all 48 h of it, binds the rest of its year after it
    assert (column.group, column.start, column.end, column.usd_per_hour, column.name) == (
        0,
        0,
        48,
        4.0,
        "sp-a",
    )
    assert column.paid_hours == 48.0 and column.starts_hour == -184 * 24.0
    assert column.beyond_hours == pytest.approx(HOURS_PER_YEAR - 184 * 24 - 48)


def test_the_groups_the_plan_may_buy_follow_the_scenarios_kinds_and_terms(kit, tmp_path: Path) -> None:
    groups, columns, buyable = _groups(kit, tmp_path, TERMS, [], buy=["ec2-instance"], years=["1y"])
    assert [g.name for g in groups] == ["savings-plan-ec2-instance 1y ec2-instance p5 us-east-1"]
    assert buyable == {0: 1} and columns == []
    groups, _, buyable = _groups(kit, tmp_path, TERMS, [], buy=["compute"], years=["1y", "3y"])
    assert [g.name for g in groups] == ["savings-plan-compute 1y compute", "savings-plan-compute 3y compute"]
    assert buyable == {0: 1, 1: 3}


@pytest.mark.parametrize(
    ("plan", "says"),
    [
        (
            held(term="3y", kind="ec2-instance", family="p5", region="us-east-1"),
            "3y ec2-instance savings plan of p5",
        ),
        (held(kind="azure"), "1y azure savings plan"),
        (held(kind="ec2-instance", family="p4d", region="us-east-1"), "of p4d in us-east-1"),
    ],
)
def test_a_held_plan_without_rates_in_the_catalog_is_refused_by_name(kit, tmp_path: Path, plan, says) -> None:
    with pytest.raises(InputError) as caught:
        _groups(kit, tmp_path, TERMS, [held("sp-ok"), {**plan, "name": "sp-x"}], buy=[], years=[])
    assert (
        caught.value.where == "savings_plans[1]"
        and "'sp-x'" in caught.value.problem
        and says in caught.value.problem
    )


def test_savings_plan_rows_launch_on_demand_nodes() -> None:
    """A savings plan discounts on-demand nodes and holds none: Kueue flavors and Karpenter pools of its
    rows are the on-demand ones."""
    assert set(_TIER_CAPACITY) == set(Tier)
    assert _TIER_CAPACITY[Tier.SAVINGS_PLAN] is NodeCapacity.ON_DEMAND
    assert _TIER_OF_ROW[Tier.SAVINGS_PLAN] is PoolTier.ON_DEMAND
