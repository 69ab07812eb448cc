"""The billing rule (``models/billing.py``) is written once: one small plan, priced by every user of the
rule, costs the same to the cent.

A week of hourly periods on one offering (on demand $10, spot $4 per node-hour): one node held on a
1-year commitment at $6, and more 1-year nodes may be bought at $6. Service A is latency-critical
(non-spot only), service B may run on spot; one replica is one node. With C nodes committed, the
cheapest bill of an hour is, in closed form,

    max(0, A - C) * 10            A's nodes beyond the commitments, on demand
  + max(0, B - max(0, C - A)) * 4  B on the committed nodes A leaves idle, the rest on spot

plus C * 6 * 168 for the commitments; the plan's C is the one that minimizes the week (found here by
enumeration, without gpuplan, and unique). That figure is then asked of: the plan both methods write,
the rule itself over the plan's rows, ``gpuplan verify``'s reading of the rows, the baselines' bill,
chargeback, and every model builder (the staged MILP, the per-period dispatch, the cluster bound and the
exact-start bound, each solved on its own, the commitment theirs to choose except in the dispatch).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models.billing import commitment_usd, covered_nodes, on_demand_nodes, pay_as_you_go_usd, pool_row
from models.catalog import Catalog
from models.chargeback import charge_plan
from models.inputs import load_inputs
from models.plan import Plan
from models.scenario import parse
from models.tiers import Term
from planner.planning.baselines import Usage, bill
from planner.planning.optimize import optimize
from planner.planning.optimize.bound import certified_bound
from planner.planning.optimize.bound_exact import exact_bound
from planner.planning.optimize.build import create_model
from planner.planning.optimize.dispatch import Occupancy, dispatch
from planner.planning.problem.sets import ModelOptions, build_sets
from planner.solvers.solve import solve
from planner.verify import verify
from planner.verify.billing import node_counts
from planner.verify.context import Context
from planner.verify.findings import Findings
from planner.verify.rows import check_rows

H = 168
OD, SPOT, RESERVED = 10.0, 4.0, 6.0
HELD = 1
CENT = 0.005
A = [int(x) for x in np.random.default_rng(3).integers(0, 7, H)]
B = [int(x) for x in np.random.default_rng(4).integers(0, 4, H)]


def week_usd(committed: int) -> float:
    """The week's cheapest bill with ``committed`` nodes, by the closed form of the module docstring."""
    c = committed
    hourly = sum(max(0, a - c) * OD + max(0, b - max(0, c - a)) * SPOT for a, b in zip(A, B, strict=True))
    return hourly + c * RESERVED * H


def best_commitment() -> int:
    costs = sorted((week_usd(c), c) for c in range(HELD, 10))
    assert costs[1][0] - costs[0][0] > 1.0, "the test data must have one cheapest commitment"
    return costs[0][1]


def closed_form() -> float:
    return week_usd(best_commitment())


def test_the_rule_in_its_own_words() -> None:
    assert covered_nodes(5.0, 3.0) == 3.0 and on_demand_nodes(5.0, 3.0) == 2.0
    assert covered_nodes(2.0, 3.0) == 2.0 and on_demand_nodes(2.0, 3.0) == 0.0
    n, c = np.array([0.0, 2.0, 5.0]), np.array([3.0, 3.0, 3.0])
    assert covered_nodes(n, c).tolist() == [0.0, 2.0, 3.0]
    assert on_demand_nodes(n, c).tolist() == [0.0, 0.0, 2.0]
    spot = np.array([1.0, 0.0, 2.0])
    assert pay_as_you_go_usd(n, spot, c, OD, SPOT, 2.0) == pytest.approx(2 * 10 * 2 + 3 * 4 * 2)
    assert commitment_usd(3, 6.0, 10.0) == 180.0
    # as a model's row: use - committed - on demand (<= the fixed committed nodes)
    assert pool_row([("x", 1.0)], [("R", 1.0)], "NO") == [("x", 1.0), ("R", -1.0), ("NO", -1.0)]
    assert pool_row([("x", 2.0)], [], None) == [("x", 2.0)]


def row_id(row: dict) -> str:
    return f"{row['cloud']}:{row['region']}:{row['instance_type']}"


@pytest.fixture(scope="module")
def week(tmp_path_factory: pytest.TempPathFactory, kit) -> dict:
    root = tmp_path_factory.mktemp("billing")
    row = kit.offering_row(on_demand_usd_h=OD, spot_usd_h=SPOT, reserved_1y_usd_h=RESERVED)
    kit.write_catalog_csv(root / "catalog.csv", [row])
    kit.write_demand_csv(root / "a.csv", A)
    kit.write_demand_csv(root / "b.csv", B)
    service = {"team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"]}
    data = kit.scenario_dict(
        hours=H,
        terms=["1y"],
        inference=[
            {"name": "a", **service, "latency_critical": True, "replicas": {"csv": "a.csv"}},
            {"name": "b", **service, "latency_critical": False, "replicas": {"csv": "b.csv"}},
        ],
    )
    data["commitments"] = [
        {"offering": row_id(row), "term": "1y", "nodes": HELD, "start": "2026-10-01T00:00:00Z"}
    ]
    path = kit.write_scenario_yaml(root / "scenario.yaml", data)
    scenario = parse(data, path)
    catalog = Catalog.load(root / "catalog.csv")
    sets = build_sets(scenario, catalog, root, ModelOptions(block_hours=1, start_grid_hours=1))
    return {"root": root, "path": path, "scenario": scenario, "catalog": catalog, "sets": sets}


@pytest.fixture(scope="module")
def written(week: dict, kit) -> dict[str, Plan]:
    """The plan of each method, written and read back as any reader of the directory would."""
    plans = {}
    for method in ("staged", "hourly"):
        plan = optimize(week["scenario"], week["catalog"], week["root"], kit.exact_settings(method=method))
        (week["root"] / method).mkdir()
        plan.write(week["root"] / method)
        plans[method] = Plan.read(week["root"] / method)
    return plans


def test_the_closed_form_is_the_rule() -> None:
    """The figure every user must give, as the rule states it per hour (B takes A's idle committed
    nodes first: they are paid already)."""
    c = float(best_commitment())
    assert c > HELD  # something is bought: the models' commitment variables are in play
    a, b = np.array(A, dtype=float), np.array(B, dtype=float)
    idle = on_demand_nodes(c, a)  # committed nodes A leaves idle
    non_spot = a + covered_nodes(b, idle)
    spot = b - covered_nodes(b, idle)
    by_rule = pay_as_you_go_usd(non_spot, spot, c, OD, SPOT, 1.0) + commitment_usd(c, RESERVED, H)
    assert by_rule == pytest.approx(closed_form(), abs=CENT)


@pytest.mark.parametrize("method", ["staged", "hourly"])
def test_the_plan_and_its_readers_bill_the_same_cents(
    week: dict, written: dict[str, Plan], method: str
) -> None:
    expected, committed = closed_form(), float(best_commitment())
    plan = written[method]
    assert plan.document.costs.total_usd == pytest.approx(expected, abs=CENT)
    assert sum(c.nodes for c in plan.document.commitments) == committed
    rows = plan.allocations
    tiers = rows["tier"].astype(str)

    def by_period(mask: pd.Series) -> np.ndarray:
        periods = rows["period"][mask].to_numpy(np.int64)
        return np.bincount(periods, weights=rows["nodes"][mask].to_numpy(float), minlength=H)

    non_spot, spot = by_period(tiers != "spot"), by_period(tiers == "spot")
    # the rule over the plan's rows
    own = pay_as_you_go_usd(non_spot, spot, committed, OD, SPOT, 1.0) + commitment_usd(committed, RESERVED, H)
    assert own == pytest.approx(expected, abs=CENT)
    # gpuplan verify: its own reading of the rows (N, S, C per offering and period), priced by the rule
    inputs = load_inputs(week["path"])
    ctx = Context(inputs.scenario, inputs.catalog, inputs.base_dir, plan)
    counts = node_counts(ctx, check_rows(ctx, Findings(3)))
    held = sum(c.cost_in_horizon_usd for c in plan.document.commitments)
    assert held == pytest.approx(commitment_usd(committed, RESERVED, H), abs=CENT)
    verified = held + pay_as_you_go_usd(
        counts["N"].to_numpy(), counts["S"].to_numpy(), counts["C"].to_numpy(), OD, SPOT, 1.0
    )
    assert verified == pytest.approx(expected, abs=CENT)
    assert verify(inputs, plan).ok
    # the baselines' bill of the same usage and purchase (the held commitment is every peer's too)
    usage = Usage(non_spot[None, :], spot[None, :], 0.0)
    bought = {(0, Term.ONE_YEAR): int(committed) - HELD}
    assert bill(week["sets"], usage, bought)[0] == pytest.approx(expected, abs=CENT)
    # chargeback: the plan's rows at the rule's rates, the commitments by their terms
    for rule in ("usage", "guarantees"):
        assert charge_plan(plan, rule).total_usd == pytest.approx(expected, abs=CENT)


def test_every_model_builder_prices_it_the_same(week: dict) -> None:
    """Each model, solved alone on these inputs, reaches the same bill: the staged MILP, the cluster bound
    and the exact-start bound (each with every period its own cluster: no averaging) choosing the
    commitment themselves, and the per-period dispatch (whole nodes) at the MILP's commitment."""
    sets, expected = week["sets"], closed_form()
    model = create_model(sets)
    result = solve(model.problem, gap=0.0)
    assert result.ok
    assert result.objective + sets.fixed_usd == pytest.approx(expected, abs=CENT)
    bought = {c: round(var.varValue or 0.0) for c, var in model.commit.items()}
    assert HELD + sum(bought.values()) == best_commitment()
    periods = sets.scenario.horizon.periods
    empty = Occupancy.empty(len(sets.offerings), len(sets.scenario.teams), periods)
    dispatched = dispatch(sets, sets.committed(bought), empty, whole=True)
    assert dispatched.held_cost_usd + sets.fixed_usd + sum(
        n * sets.columns[c].cost_per_node for c, n in bought.items()
    ) == pytest.approx(expected, abs=CENT)
    assert certified_bound(sets, None, gap=0.0).bound_usd == pytest.approx(expected, abs=CENT)
    assert exact_bound(sets, None, time_limit=60, gap=0.0).bound_usd == pytest.approx(expected, abs=CENT)
