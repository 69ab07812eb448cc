"""Owned (colocation) nodes as a tier of the planning MILP, against brute force.

One catalog offering (8x H100, on-demand and 1y) and one service with one node per replica, so demand D_t
is in nodes. With n owned nodes (usable from period L on, paid for the whole horizon at the owned rate
c_own), r 1y nodes and on-demand for the rest, the cost is

    f(n, r) = (n * c_own + r * c_1y) * H + sum_t max(0, D_t - r - n * [t >= L]) * c_od

enumerated here over every (n, r), independently of the planner. c_own comes from ``models.tco``
(checked against hand calculations in test_finance.py).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from models.catalog import Catalog
from models.scenario import parse
from models.tco import owned_usd_per_node_hour
from models.tiers import HOURS_PER_MONTH
from planner.planning.optimize import optimize

H = 3 * 730  # three 730-hour months, hourly periods
C_OD, C_1Y = 55.04, 33.024
OWNED_ID = "owned:colo:8xH100"


def _demand(seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(x) for x in rng.choice([2, 3, 4, 6], size=H, p=[0.2, 0.3, 0.3, 0.2])]


def _plan(
    tmp_path: Path, kit, demand: list[int], colocation: dict, terms: list[str]
) -> tuple[dict, pd.DataFrame]:
    kit.write_catalog_csv(
        tmp_path / "catalog.csv",
        [kit.offering_row(on_demand_usd_h=C_OD, reserved_1y_usd_h=C_1Y, fabric="efa")],
    )
    kit.write_demand_csv(tmp_path / "demand.csv", demand)
    data = kit.scenario_dict(
        hours=H,
        terms=terms,
        inference=[{"name": "svc", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
                    "replicas": {"csv": "demand.csv"}}],
    )  # fmt: skip
    data["colocation"] = colocation
    scenario = parse(data)
    catalog = Catalog.load(tmp_path / "catalog.csv")
    plan = optimize(scenario, catalog, tmp_path, kit.exact_settings())
    return json.loads(plan.document.to_json()), plan.allocations  # plan.json as written


def _brute_force(
    demand: list[int], c_own: float, max_owned: int, lead_periods: int, terms: list[str]
) -> float:
    d = np.array(demand)
    usable = np.arange(H) >= lead_periods
    best = np.inf
    r_range = range(0, max(demand) + 1) if "1y" in terms else [0]
    for n, r in itertools.product(range(max_owned + 1), r_range):
        covered = r + n * usable
        cost = (n * c_own + r * C_1Y) * H + np.maximum(0, d - covered).sum() * C_OD
        best = min(best, cost)
    return float(best)


@pytest.mark.parametrize("max_owned", [2, 8])
def test_owned_nodes_are_bought_where_they_beat_commitments(tmp_path: Path, kit, max_owned: int) -> None:
    demand = _demand(seed=3)
    colocation = {"max_nodes": max_owned}
    data, alloc = _plan(tmp_path, kit, demand, colocation, ["1y"])
    c_own = owned_usd_per_node_hour(
        parse({**kit.scenario_dict(hours=H), "colocation": colocation}).colocation
    )
    expected = _brute_force(demand, c_own, max_owned, 0, ["1y"])
    assert data["costs"]["total_usd"] == pytest.approx(expected, rel=1e-6)
    owned = [c for c in data["commitments"] if c["term"] == "owned"]
    assert owned and owned[0]["offering"] == OWNED_ID
    assert owned[0]["usd_per_node_hour"] == pytest.approx(c_own)
    # the owned tier is reported as such, and its cost is the commitment's
    assert data["costs"]["by_tier"]["owned"] == pytest.approx(owned[0]["nodes"] * c_own * H)
    assert data["costs"]["by_cloud"]["owned"] == pytest.approx(owned[0]["nodes"] * c_own * H)
    assert set(alloc.loc[alloc["offering"] == OWNED_ID, "tier"]) == {"owned"}
    # the all-on-demand baseline is a cloud policy: owned nodes never enter it
    assert data["baselines"]["all_on_demand_usd"] == pytest.approx(sum(demand) * C_OD)


def test_owned_nodes_wait_for_their_lead_time(tmp_path: Path, kit) -> None:
    """One month of lead time: no owned node serves before period 730, and the optimum knows it."""
    demand = _demand(seed=5)
    # cheap enough that owning pays even though the first month is paid and unused
    colocation = {"max_nodes": 6, "lead_time_months": 1, "capex_per_node_usd": 120_000}
    data, alloc = _plan(tmp_path, kit, demand, colocation, [])
    owned_rows = alloc[alloc["offering"] == OWNED_ID]
    assert len(owned_rows) and owned_rows["period"].min() >= HOURS_PER_MONTH
    c_own = data["offerings"][OWNED_ID]["owned_usd_h"]
    expected = _brute_force(demand, c_own, 6, int(HOURS_PER_MONTH), [])
    assert data["costs"]["total_usd"] == pytest.approx(expected, rel=1e-6)
    # without the lead time the plan would be cheaper: the constraint binds
    free = _brute_force(demand, c_own, 6, 0, [])
    assert free < expected - 1.0
    assert data["solver"]["bound_usd"] <= data["costs"]["total_usd"] + 1e-6
    assert data["solver"]["gap"] <= 0.01


def test_hourly_method_keeps_owned_nodes_idle_until_delivery(tmp_path: Path, kit) -> None:
    """The hourly method on the lead-time case: nothing owned serves before period 730, and the brute-force
    optimum lies between its certified bound and its plan."""
    demand = _demand(seed=5)
    colocation = {"max_nodes": 6, "lead_time_months": 1, "capex_per_node_usd": 120_000}
    kit.write_catalog_csv(tmp_path / "catalog.csv", [kit.offering_row(on_demand_usd_h=C_OD, fabric="efa")])
    kit.write_demand_csv(tmp_path / "demand.csv", demand)
    data = kit.scenario_dict(
        hours=H,
        inference=[{"name": "svc", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
                    "replicas": {"csv": "demand.csv"}}],
    )  # fmt: skip
    data["colocation"] = colocation
    plan = optimize(
        parse(data), Catalog.load(tmp_path / "catalog.csv"), tmp_path, kit.exact_settings(method="hourly")
    )
    alloc = plan.allocations
    owned_rows = alloc[alloc["offering"] == OWNED_ID]
    assert len(owned_rows) and owned_rows["period"].min() >= HOURS_PER_MONTH
    # every period covers its demand with what is usable then
    served = alloc.groupby("period")["nodes"].sum().reindex(range(H), fill_value=0.0)
    assert (served.to_numpy() >= np.array(demand) - 1e-6).all()
    c_own = plan.document.offerings[OWNED_ID].owned_usd_h
    optimum = _brute_force(demand, c_own, 6, int(HOURS_PER_MONTH), [])
    assert plan.document.solver.bound_usd <= optimum + 1e-6 <= plan.document.costs.total_usd + 2e-6
    assert plan.document.costs.total_usd <= optimum * 1.01
