"""Savings plans (issue 38) where plans are priced and quoted: a bought savings plan resting on an assumed
rate is warned (price sources), and the Kueue on-demand flavor holds the nodes a savings plan covers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from sp_kit import P5, START, held, sp_term

from models.inputs import load_inputs
from models.priceterms import terms_path_for, write_terms
from models.tiers import Tier
from planner.outputs.k8s import _whole_flavors
from planner.planning.optimize import SolveSettings, optimize


def test_a_bought_savings_plan_on_an_assumed_rate_is_warned(kit, tmp_path: Path) -> None:
    """Buying is not planned yet (issue 38): a held plan turned bought shows the warning a buyer needs."""
    from models.pricesources import price_sources, price_warnings

    rows = [kit.offering_row(on_demand_usd_h=10.0)]
    path = kit.write_catalog_csv(tmp_path / "catalog.csv", rows)
    term = sp_term(P5, "savings-plan-compute", 1, 6.0)
    write_terms([replace(term, basis="assumed", source="70% of on demand")],
                terms_path_for(path))  # fmt: skip
    data = kit.scenario_dict(hours=24, start=START, inference=[
        {"name": "chat", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"], "latency_critical": True,
         "replicas": {"profile": "flat", "base": 2}}])  # fmt: skip
    data["savings_plans"] = [held(usd_per_hour=6.0)]
    inputs = load_inputs(kit.write_scenario_yaml(tmp_path / "s.yaml", data))
    plan = optimize(inputs.scenario, inputs.catalog, inputs.base_dir, SolveSettings(time_limit=10))
    assert plan.document.prices is not None and plan.document.prices.counts == {"assumed": 1, "unstated": 1}
    assert not any("savings plan" in w for w in plan.document.warnings)  # held: nothing to decide
    bought = plan.document.model_copy(
        update={"savings_plans": [plan.document.savings_plans[0].model_copy(update={"existing": False})]}
    )
    sources = price_sources(inputs.catalog, bought, plan.allocations)
    (warning,) = [w for w in price_warnings(sources, bought, bought.created) if "savings plan" in w]
    assert "buying savings plan sp-a" in warning and "70% of on demand" in warning


def test_kueue_on_demand_quota_holds_the_nodes_a_savings_plan_covers(kit, tmp_path: Path) -> None:
    """3 p5 nodes ($10/h) all covered by a $18/h plan at $6/h: no row is on_demand, yet the 24 GPUs run on
    on-demand nodes, so the on-demand flavor's quota is 24 and its price the plan's rate per GPU-hour."""
    rows = [kit.offering_row(on_demand_usd_h=10.0)]
    path = kit.write_catalog_csv(tmp_path / "catalog.csv", rows)
    write_terms([sp_term(P5, "savings-plan-compute", 1, 6.0)], terms_path_for(path))
    data = kit.scenario_dict(hours=24, start=START, inference=[
        {"name": "chat", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"], "latency_critical": True,
         "replicas": {"profile": "flat", "base": 3}}])  # fmt: skip
    data["savings_plans"] = [held(usd_per_hour=18.0)]
    inputs = load_inputs(kit.write_scenario_yaml(tmp_path / "s.yaml", data))
    plan = optimize(inputs.scenario, inputs.catalog, inputs.base_dir, SolveSettings(time_limit=10))
    assert set(plan.allocations["tier"]) == {Tier.SAVINGS_PLAN}
    (flavor,) = _whole_flavors(plan)
    assert flavor.capacity_type.value == "on-demand"
    assert flavor.capacity["nvidia.com/gpu"] == 24
    assert flavor.usd_per_gpu_hour == pytest.approx(6.0 / 8)
