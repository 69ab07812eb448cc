"""Commitments over time (``planner/planning/problem/purchases.py``): purchases at purchase steps, commitments
held already, each checked against an independent calculation.

One offering (1 GPU per node, one replica per node, on demand $10/h, 1y $6/h) and one service, so demand
D_t is in nodes. With daily periods over a year and new 1y commitments allowed at the purchase steps
S (each from its step to the horizon's end, paid for those hours), the cost of buying n_s nodes at
step s is

    f(n) = sum_s n_s * 6 * 24 * (P - s) + sum_t max(0, D_t - sum_{s <= t} n_s - K_t) * 10 * 24

(K_t: nodes held already that serve in period t), enumerated here over every n, independently of the
planner.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models.catalog import Catalog
from models.errors import InputError
from models.inputs import Inputs
from models.plan import Plan
from models.scenario import parse
from planner.planning.monthly import monthly_by_tier
from planner.planning.optimize import optimize
from planner.planning.problem.purchases import purchase_steps
from planner.verify import verify

C_OD, C_1Y = 10.0, 6.0
P = 365  # daily periods over 2027
DAY = 24
A = "aws:us-east-1:p5.1x"
B = "aws:us-east-2:p5.1x"


def _rows(kit) -> list[dict[str, Any]]:
    return [
        kit.offering_row(
            instance_type="p5.1x", gpus_per_node=1, on_demand_usd_h=C_OD, reserved_1y_usd_h=C_1Y
        ),
        # a dearer region the plan would never choose on its own
        kit.offering_row(region="us-east-2", instance_type="p5.1x", gpus_per_node=1, on_demand_usd_h=20.0,
                         reserved_1y_usd_h=15.0),
    ]  # fmt: skip


def _scenario(tmp_path: Path, kit, daily: list[int], schedule: str, **extra: Any):
    kit.write_catalog_csv(tmp_path / "catalog.csv", _rows(kit))
    kit.write_demand_csv(tmp_path / "demand.csv", [d for d in daily for _hour in range(DAY)])
    data = kit.scenario_dict(
        hours=P * DAY,
        start="2027-01-01T00:00:00Z",
        period_hours=DAY,
        terms=["1y"],
        inference=[{"name": "svc", "team": "t", "gpus_per_replica": 1, "gpu_models": ["H100"],
                    "replicas": {"csv": "demand.csv"}}],
    )  # fmt: skip
    data["purchase"]["schedule"] = schedule
    data.update(extra)
    return parse(data), Catalog.load(tmp_path / "catalog.csv")


def _plan(tmp_path: Path, kit, daily: list[int], schedule: str, method: str = "staged", **extra: Any):
    scenario, catalog = _scenario(tmp_path, kit, daily, schedule, **extra)
    plan = optimize(scenario, catalog, tmp_path, kit.exact_settings(method=method))
    findings = verify(Inputs(scenario, catalog, tmp_path), plan)
    assert findings.ok, [(k.kind, k.examples[:2]) for k in findings.summary()]
    return plan, json.loads(plan.document.to_json())


def _brute_force(
    daily: list[int], steps: list[int], held: np.ndarray | None = None, most: int = 7
) -> tuple[float, tuple]:
    demand = np.array(daily, dtype=float)
    held = np.zeros(P) if held is None else held
    best = (float("inf"), ())
    for counts in itertools.product(range(most + 1), repeat=len(steps)):
        committed = held.copy()
        cost = 0.0
        for step, n in zip(steps, counts, strict=True):
            committed[step:] += n
            cost += n * C_1Y * DAY * (P - step)
        cost += float(np.clip(demand - committed, 0, None).sum()) * C_OD * DAY
        if cost < best[0] - 1e-9:
            best = (cost, counts)
    return best


STEP_UP = [2] * 181 + [6] * 184  # 2 nodes until 1 July (day 181), then 6


def test_quarterly_steps_are_the_calendar_quarters() -> None:
    scenario = parse(
        {"name": "s", "horizon": {"start": "2027-01-01T00:00:00Z", "hours": P * DAY, "period_hours": DAY},
         "purchase": {"schedule": "quarterly"}}
    )  # fmt: skip
    assert purchase_steps(scenario) == [0, 90, 181, 273]  # 1 Jan, 1 Apr, 1 Jul, 1 Oct
    monthly = parse({**scenario.model_dump(mode="json"), "purchase": {"schedule": "monthly"}})
    assert purchase_steps(monthly)[:4] == [0, 31, 59, 90] and len(purchase_steps(monthly)) == 12


@pytest.mark.parametrize("method", ["staged", "hourly"])
def test_demand_that_steps_up_at_month_six_buys_the_second_batch_then(
    tmp_path: Path, kit, method: str
) -> None:
    """The brute force over every count at every quarterly step is the optimum; the plan meets it, buys 2
    nodes on 1 January and 4 on 1 July, and costs less than the best day-one-only purchase (which
    cannot make the second batch pay: 6 x 12 months > 10 x 6 months)."""
    steps = [0, 90, 181, 273]
    optimum, counts = _brute_force(STEP_UP, steps)
    day_one, day_one_counts = _brute_force(STEP_UP, [0])
    assert counts == (2, 0, 4, 0) and day_one_counts == (2,)
    plan, document = _plan(tmp_path, kit, STEP_UP, "quarterly", method)
    assert plan.total_usd == pytest.approx(optimum, rel=1e-9)
    assert plan.total_usd < day_one - 1.0
    bought = {(c["start"], c["nodes"]) for c in document["commitments"] if not c["existing"]}
    assert bought == {("2027-01-01T00:00:00Z", 2), ("2027-07-01T00:00:00Z", 4)}
    july = next(c for c in document["commitments"] if c["start"].startswith("2027-07-01"))
    assert july["start_period"] == 181 and july["end_period"] == P
    assert july["cost_in_horizon_usd"] == pytest.approx(4 * C_1Y * DAY * (P - 181))
    assert july["obligation_beyond_horizon_usd"] == pytest.approx(4 * C_1Y * (8760 - DAY * (P - 181)))
    # the certified bound handles start times too: never above the exact optimum
    assert document["solver"]["bound_usd"] <= optimum * (1 + 1e-9)
    # finance's monthly view pays each purchase from its start: July's 4 nodes only in the second half
    monthly = monthly_by_tier(plan)["reserved_1y"]
    assert monthly.iloc[0] == pytest.approx(2 * C_1Y * 730) and monthly.iloc[11] == pytest.approx(
        6 * C_1Y * 730
    )
    rows = plan.allocations
    on_july = rows[rows["commitment"] == july["name"]]
    assert (
        set(on_july["period"]) == set(range(181, P)) and (on_july.groupby("period")["nodes"].sum() == 4).all()
    )


def test_with_purchases_only_on_day_one_the_plan_is_the_day_one_optimum(tmp_path: Path, kit) -> None:
    day_one, _counts = _brute_force(STEP_UP, [0])
    plan, document = _plan(tmp_path, kit, STEP_UP, "horizon")
    assert plan.total_usd == pytest.approx(day_one, rel=1e-9)
    assert {c["start"] for c in document["commitments"]} == {"2027-01-01T00:00:00Z"}


def _held(name: str, offering: str, start: str, nodes: int = 2, **more: Any) -> dict[str, Any]:
    return {"name": name, "offering": offering, "term": "1y", "nodes": nodes, "start": start, **more}


@pytest.mark.parametrize("method", ["staged", "hourly"])
def test_a_held_commitment_covers_the_base_load_until_it_ends_then_it_is_renewed(
    tmp_path: Path, kit, method: str
) -> None:
    """2 nodes held since 1 May 2026 (ending 1 May 2027, inside a quarter) under a flat load of 2: no
    purchase for that load before 1 May, then a renewal of 2 nodes from exactly 1 May (a renewal step)."""
    flat = [2] * P
    held = {"commitments": [_held("ri-2026", A, "2026-05-01T00:00:00Z")]}
    plan, document = _plan(tmp_path, kit, flat, "quarterly", method, **held)
    ends = 120  # 1 May 2027, day 120
    renewal_steps = [0, 90, ends, 181, 273]
    covered = np.zeros(P)
    covered[:ends] = 2
    bought, counts = _brute_force(flat, renewal_steps, covered, most=3)
    fixed = 2 * C_1Y * DAY * ends  # the held one, paid for its hours inside the horizon
    assert counts == (0, 0, 2, 0, 0)
    assert plan.total_usd == pytest.approx(fixed + bought, rel=1e-9)
    held_doc = next(c for c in document["commitments"] if c["existing"])
    assert held_doc["name"] == "ri-2026" and held_doc["end"] == "2027-05-01T00:00:00Z"
    assert held_doc["used_fraction"] == pytest.approx(1.0)
    assert held_doc["cost_in_horizon_usd"] == pytest.approx(fixed)
    assert [(c["start"], c["nodes"]) for c in document["commitments"] if not c["existing"]] == [
        ("2027-05-01T00:00:00Z", 2)
    ]


@pytest.mark.parametrize("method", ["staged", "hourly"])
def test_a_held_commitment_on_an_offering_the_plan_would_not_choose_is_still_used(
    tmp_path: Path, kit, method: str
) -> None:
    """2 nodes held on the dearer region for the whole year (paid anyway), a flat load of 3: the plan runs
    2 replicas on them every day and buys only 1 node of the cheap offering."""
    held = {"commitments": [_held("dear", B, "2026-12-01T00:00:00Z", usd_per_node_hour=14.0)]}
    plan, document = _plan(tmp_path, kit, [3] * P, "quarterly", method, **held)
    fixed = 2 * 14.0 * DAY * 334  # its rate for its hours inside the horizon: it ends 1 Dec 2027 (day 334)
    dear = next(c for c in document["commitments"] if c["existing"])
    assert dear["cost_in_horizon_usd"] == pytest.approx(fixed)
    rows = plan.allocations
    on_dear = rows[rows["commitment"] == "dear"].groupby("period")["nodes"].sum()
    assert set(on_dear.index) == set(range(334)) and (on_dear == 2).all()
    assert dear["used_fraction"] == pytest.approx(1.0)
    covered = np.zeros(P)
    covered[:334] = 2
    best, _counts = _brute_force([3] * P, [0, 90, 181, 273, 334], covered, most=3)
    assert plan.total_usd == pytest.approx(fixed + best, rel=1e-9)


def test_a_capacity_reservation_is_paid_at_the_on_demand_rate_by_default(tmp_path: Path, kit) -> None:
    reservation = {"name": "odcr", "offering": A, "term": "reservation", "nodes": 1,
                   "start": "2027-01-01T00:00:00Z", "end": "2027-02-01T00:00:00Z"}  # fmt: skip
    plan, document = _plan(tmp_path, kit, [1] * P, "horizon", commitments=[reservation])
    odcr = next(c for c in document["commitments"] if c["existing"])
    assert odcr["term"] == "reservation" and odcr["usd_per_node_hour"] == C_OD
    assert odcr["cost_in_horizon_usd"] == pytest.approx(C_OD * 31 * DAY)
    assert plan.document.costs.by_tier["capacity_reservation"] == pytest.approx(C_OD * 31 * DAY)
    assert set(plan.allocations.loc[plan.allocations["commitment"] == "odcr", "period"]) == set(range(31))


@pytest.mark.parametrize(
    ("held", "where", "message"),
    [
        (_held("x", "aws:us-east-1:nope", "2027-01-01T00:00:00Z"), "commitments[0].offering",
         "unknown offering"),
        ({"offering": A, "term": "reservation", "nodes": 1, "start": "2027-01-01T00:00:00Z"},
         "commitments[0]", "needs an end"),
        (_held("x", A, "2024-01-01T00:00:00Z"), "commitments[0]", "does not overlap the horizon"),
        (_held("x", A, "2027-01-01T00:00:00Z", nodes=0), "commitments[0].nodes", "greater than 0"),
    ],
)  # fmt: skip
def test_bad_held_commitments_are_named(tmp_path: Path, kit, held: dict, where: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        scenario, catalog = _scenario(tmp_path, kit, [1] * P, "quarterly", commitments=[held])
        optimize(scenario, catalog, tmp_path, kit.exact_settings())
    assert caught.value.where == where and message in str(caught.value)


def test_servers_already_bought_serve_from_the_first_hour(tmp_path: Path, kit) -> None:
    """colocation.existing_nodes: 2 owned servers running already (new ones would arrive after a month)
    serve from hour 0, are paid at the owned rate for the horizon, and are never bought again."""
    from models.scenario import Colocation
    from models.tco import owned_usd_per_node_hour

    colocation = {"site": "colo", "gpu_model": "H100", "gpus_per_node": 1, "max_nodes": 4,
                  "lead_time_months": 1.0, "existing_nodes": 2}  # fmt: skip
    plan, document = _plan(tmp_path, kit, [2] * P, "horizon", colocation=colocation)
    rate = owned_usd_per_node_hour(Colocation.model_validate(colocation))
    held = [c for c in document["commitments"] if c["existing"]]
    assert [(c["name"], c["term"], c["nodes"]) for c in held] == [("colocation/existing", "owned", 2)]
    assert held[0]["cost_in_horizon_usd"] == pytest.approx(2 * rate * 8760)
    rows = plan.allocations
    owned = rows[rows["tier"] == "owned"].groupby("period")["nodes"].sum()
    assert set(owned.index) == set(range(P)) and (owned == 2).all()  # hour 0 on, no lead time
    assert not [c for c in document["commitments"] if not c["existing"]]  # the load fits on them
    assert plan.total_usd == pytest.approx(2 * rate * 8760, rel=1e-9)


def test_verify_reports_a_held_commitment_the_plan_leaves_out(tmp_path: Path, kit) -> None:
    held = {"commitments": [_held("ri-2026", A, "2026-05-01T00:00:00Z")]}
    plan, _document = _plan(tmp_path, kit, [2] * P, "quarterly", **held)
    scenario, catalog = _scenario(tmp_path, kit, [2] * P, "quarterly", **held)
    dropped = plan.document.model_copy(
        update={"commitments": [c for c in plan.document.commitments if not c.existing]}
    )
    findings = verify(Inputs(scenario, catalog, tmp_path), Plan(dropped, plan.allocations))
    kinds = {k.kind for k in findings.summary()}
    assert "existing-commitment" in kinds  # and its rows now name a commitment the plan does not have
    assert (
        "ri-2026"
        in next(k for k in findings.summary() if k.kind == "existing-commitment").examples[0].message
    )
