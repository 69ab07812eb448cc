"""The futures decomposition's second stage (``planner/planning/fleet_bill.py``) and master
(``planner/planning/futures_master.py``), each against an independent calculation.

- A planned fleet billed under its own plan's commitments gives back the plan's cost to the cent, and its
  tail equals an hour-by-hour bill of the last month's nodes carried on (written here, on the plan's rows).
- The same fleet billed under other commitments equals an hour-by-hour bill written here from the rows.
- The master's purchase equals a brute force over every commitment level of a small case (two purchase
  steps, three futures): the least expected cost, the least risk-weighted score, and the least among the
  levels that back a team's guarantee.
"""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from models.futures import cvar
from models.held import bought_commitments, holding_only
from models.inputs import Inputs, load_inputs
from models.plan import Plan
from models.scenario import ExistingCommitment
from models.tiers import Term, Tier
from planner.planning.fleet_bill import Fleet, bill, fleet_of, held_nodes, tail_floor
from planner.planning.futures import carried_tail, least_rates
from planner.planning.futures_master import master_first_stage
from planner.planning.optimize import SolveSettings, optimize
from planner.planning.optimize.finish import guarantee_shortfall
from planner.planning.problem.sets import ModelOptions, PlanningSets, build_sets

P5 = "aws:us-east-1:p5.48xlarge"
START = datetime(2027, 1, 1, tzinfo=UTC)


def _write(tmp: Path, data: dict[str, Any]) -> Inputs:
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return load_inputs(path)


def _mixed(tmp: Path) -> Inputs:
    """Two weeks: a latency-critical daily service, a batch service allowed on spot, a 2-node training run."""
    return _write(tmp, {
        "name": "fleet-bill",
        "horizon": {"start": "2027-01-04T00:00:00Z", "hours": 336, "period_hours": 1},
        "catalog": "embedded",
        "clouds": {"aws": {"regions": ["us-east-1"]}},
        "purchase": {"terms": ["1y"], "schedule": "horizon"},
        "teams": [{"name": "serving", "guaranteed_gpus": 0}, {"name": "research", "guaranteed_gpus": 0}],
        "inference": [
            {"name": "chat", "team": "serving", "gpus_per_replica": 8, "gpu_models": ["H100"],
             "latency_critical": True, "replicas": {"profile": "diurnal", "base": 4, "peak": 9}},
            {"name": "batch", "team": "serving", "gpus_per_replica": 8, "gpu_models": ["H100"],
             "latency_critical": False, "replicas": {"profile": "flat", "base": 2}},
        ],
        "training": [
            {"name": "ft", "team": "research", "nodes": 2, "gpus_per_node": 8, "gpu_models": ["H100"],
             "hours": 48, "earliest_start": "2027-01-05T00:00:00Z", "deadline": "2027-01-15T00:00:00Z",
             "preemptible": True, "checkpoint": {"write_minutes": 1, "restart_minutes": 5}},
        ],
    })  # fmt: skip


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Inputs, Plan]:
    inputs = _mixed(tmp_path_factory.mktemp("fleet"))
    plan = optimize(inputs.scenario, inputs.catalog, inputs.base_dir, SolveSettings(time_limit=20))
    return inputs, plan


def _hourly_bill(plan: Plan, commitments: list[ExistingCommitment]) -> float:
    """The plan's rows billed hour by hour with ``commitments`` held instead of its own purchases."""
    doc, rows = plan.document, plan.allocations
    p = doc.horizon.period_hours
    total = 0.0
    for _, row in rows.iterrows():
        if str(row["tier"]) in (Tier.SPOT, Tier.CAPACITY_BLOCK, Tier.FLEX_START):
            total += float(row["cost_usd"])
    non_spot = rows[~rows["tier"].astype(str).isin([Tier.SPOT, Tier.CAPACITY_BLOCK, Tier.FLEX_START])]
    running = non_spot.groupby(["offering", "period"])["nodes"].sum()
    for (offering, period), nodes in running.items():
        when = doc.horizon.start + timedelta(hours=int(period) * p)
        held = sum(c.nodes for c in commitments if c.offering == offering and c.start <= when < c.ends)
        whole = math.ceil(float(nodes) - 1e-6)
        rate = doc.offerings[str(offering)].on_demand_usd_h or 0.0
        total += max(0, whole - held) * rate * p
    end = doc.horizon.start + timedelta(hours=doc.horizon.hours)
    for c in commitments:
        inside = (min(c.ends, end) - max(c.start, doc.horizon.start)).total_seconds() / 3600
        total += c.nodes * (c.usd_per_node_hour or 0.0) * max(0.0, inside)
    return total


def _hourly_tail(plan: Plan, until: datetime) -> float:
    """After the horizon, hour by hour to ``until``: the commitments still running at their rate, and the
    mean pool nodes of the horizon's last 730 hours beyond them on demand."""
    doc, rows = plan.document, plan.allocations
    periods, p = doc.horizon.periods, doc.horizon.period_hours
    last = min(periods, math.ceil(730 / p))
    pool = rows[~rows["tier"].astype(str).isin([Tier.SPOT, Tier.CAPACITY_BLOCK, Tier.FLEX_START])]
    recent = pool[pool["period"] >= periods - last]
    demand = recent.groupby("offering")["nodes"].sum() / last
    end = doc.horizon.start + timedelta(hours=doc.horizon.hours)
    total = 0.0
    for hour in range(int((until - end).total_seconds() // 3600)):
        when = end + timedelta(hours=hour)
        for offering in set(demand.index) | {c.offering for c in doc.commitments}:
            running = [c for c in doc.commitments if c.offering == offering and c.end and c.end > when]
            nodes = sum(c.nodes for c in running)
            total += sum(c.nodes * c.usd_per_node_hour for c in running)
            rate = doc.offerings[offering].on_demand_usd_h or 0.0
            total += max(float(demand.get(offering, 0.0)) - nodes, 0.0) * rate
    return total


def test_a_fleet_billed_under_its_own_purchases_costs_what_its_plan_costs(
    planned: tuple[Inputs, Plan],
) -> None:
    _inputs, plan = planned
    own = bought_commitments(plan)
    assert own, "the case must buy something for the check to mean anything"
    fleet = fleet_of(plan, {"chat"})
    until = START + timedelta(days=800)
    billed = bill(fleet, held_nodes(own, fleet.horizon_start), until)
    assert billed.horizon_usd == pytest.approx(plan.document.solver.objective_usd, abs=0.01)
    assert billed.tail_usd == pytest.approx(_hourly_tail(plan, until), rel=1e-9)
    assert carried_tail(plan, until) == pytest.approx(billed.tail_usd, rel=1e-12)
    assert billed.owed_after_usd == pytest.approx(
        sum(c.obligation_beyond_horizon_usd for c in plan.document.commitments), rel=1e-9
    )
    assert fleet.spot or fleet.other_usd == 0.0


@pytest.mark.parametrize("levels", [(0,), (1,), (3,), (7,), (20,)])
def test_a_fleet_billed_under_other_commitments_equals_an_hourly_bill(
    planned: tuple[Inputs, Plan], levels: tuple[int, ...]
) -> None:
    _inputs, plan = planned
    rate = plan.document.offerings[P5].on_demand_usd_h or 0.0
    start = plan.document.horizon.start
    commitments = [
        ExistingCommitment(
            offering=P5, term=Term.ONE_YEAR, nodes=n, start=start, usd_per_node_hour=0.6 * rate
        )
        for n in levels
        if n > 0
    ]
    fleet = fleet_of(plan)
    billed = bill(fleet, held_nodes(commitments, fleet.horizon_start))
    assert billed.horizon_usd == pytest.approx(_hourly_bill(plan, commitments), abs=0.01)
    assert billed.tail_usd == 0.0


def _small(tmp: Path, guaranteed: int = 0) -> tuple[Inputs, PlanningSets]:
    """H100 nodes, 1-year terms bought at two monthly steps, 59 daily periods."""
    tmp.mkdir(parents=True, exist_ok=True)
    inputs = _write(tmp, {
        "name": "master",
        "horizon": {"start": "2027-01-01T00:00:00Z", "hours": 59 * 24, "period_hours": 24},
        "catalog": "embedded",
        "clouds": {"aws": {"regions": ["us-east-1"]}},
        "purchase": {"terms": ["1y"], "schedule": "monthly"},
        "teams": [{"name": "serving", "guaranteed_gpus": guaranteed}],
        "inference": [
            {"name": "chat", "team": "serving", "gpus_per_replica": 8, "gpu_models": ["H100"],
             "latency_critical": True, "replicas": {"profile": "flat", "base": 4}},
        ],
    })  # fmt: skip
    return inputs, build_sets(inputs.scenario, inputs.catalog, inputs.base_dir, ModelOptions())


def _p5(sets: PlanningSets) -> list[int]:
    """The purchasable columns of p5.48xlarge (the fleets below run on it alone)."""
    return [c for c in sets.new_columns if sets.offerings[sets.columns[c].offering].id == P5]


def _fleets(sets: PlanningSets) -> list[Fleet]:
    rate = next(o.on_demand_usd_h for o in sets.offerings if o.id == P5) or 0.0
    periods = len(sets.segment)
    days = np.arange(periods)
    shapes = [  # low and flat; growing; a spike in February
        np.full(periods, 3.0),
        np.floor(2 + days / 8),
        np.where(days >= 31, 9.0, 4.0) + (days % 7 == 0),
    ]
    return [
        Fleet(
            horizon_start=START, period_hours=24.0, periods=periods, on_demand_usd_h={P5: rate},
            pool={P5: shape}, used={P5: shape}, spot={}, critical={}, critical_total=0.0,
            other_usd=1000.0 * k, scenario_held=(), carried={P5: float(shape[-30:].mean())}, unserved=0,
        )
        for k, shape in enumerate(shapes)
    ]  # fmt: skip


def _levels(sets: PlanningSets, n: tuple[int, ...]) -> list[ExistingCommitment]:
    chosen = []
    for c, nodes in zip(_p5(sets), n, strict=True):
        column = sets.columns[c]
        if nodes:
            chosen.append(
                ExistingCommitment(
                    offering=P5, term=column.term, nodes=nodes,
                    start=START + timedelta(hours=column.starts_hour),
                    usd_per_node_hour=column.usd_per_node_hour,
                )
            )  # fmt: skip
    return chosen


WEIGHTS = [0.3, 0.5, 0.2]


def _brute_force(sets: PlanningSets, fleets: list[Fleet], until: datetime | None, risk: float, level: float,
                 allowed: Any = None) -> tuple[float, tuple[int, ...]]:  # fmt: skip
    best: tuple[float, tuple[int, ...]] = (math.inf, ())
    for n in itertools.product(range(12), repeat=len(_p5(sets))):
        stage = _levels(sets, n)
        if allowed is not None and not allowed(stage):
            continue
        costs = []
        for fleet in fleets:
            billed = bill(fleet, held_nodes(stage, START), until)
            costs.append(billed.horizon_usd + billed.tail_usd)
        expected = sum(w * c for w, c in zip(WEIGHTS, costs, strict=True))
        score = (1 - risk) * expected + risk * cvar(costs, WEIGHTS, level)
        best = min(best, (score, n))
    return best


def _master_levels(sets: PlanningSets, chosen: tuple[ExistingCommitment, ...]) -> tuple[int, ...]:
    by_start = {c.start: c.nodes for c in chosen}
    assert all(c.offering == P5 for c in chosen)
    return tuple(by_start.get(START + timedelta(hours=sets.columns[c].starts_hour), 0) for c in _p5(sets))


@pytest.mark.parametrize(
    ("tail", "risk", "level"), [(False, 0.0, 0.9), (True, 0.0, 0.9), (True, 0.5, 0.7), (False, 1.0, 0.6)]
)
def test_the_master_buys_what_a_brute_force_over_every_level_buys(
    tmp_path: Path, tail: bool, risk: float, level: float
) -> None:
    _inputs, sets = _small(tmp_path)
    assert len(_p5(sets)) == 2  # January and February steps
    fleets = _fleets(sets)
    until = START + timedelta(days=400) if tail else None
    score, levels = _brute_force(sets, fleets, until, risk, level)
    result = master_first_stage(sets, fleets, WEIGHTS, until, level, risk)
    assert result.score_usd == pytest.approx(score, rel=1e-7)
    found = _master_levels(sets, result.commitments)
    again, _ = _brute_force(sets, fleets, until, risk, level, allowed=lambda s: _levels(sets, found) == s)
    assert again == pytest.approx(score, rel=1e-7)  # the master's purchase reaches the optimum
    assert levels != (0, 0)  # the case is not trivial


def test_the_master_backs_a_guarantee_the_cheapest_levels_would_not(tmp_path: Path) -> None:
    """40 guaranteed GPUs (5 nodes) from January: the unconstrained optimum holds fewer in January."""
    _free_inputs, free_sets = _small(tmp_path / "free")
    free, _ = _brute_force(free_sets, _fleets(free_sets), None, 0.0, 0.9)
    inputs, sets = _small(tmp_path / "guaranteed", guaranteed=40)
    fleets = _fleets(sets)

    def backs(stage: list[ExistingCommitment]) -> bool:
        held = build_sets(holding_only(inputs.scenario, stage, []), inputs.catalog, None, ModelOptions())
        return all(gpus <= 1e-6 for gpus in guarantee_shortfall(held, {})[0].values())

    score, levels = _brute_force(sets, fleets, None, 0.0, 0.9, allowed=backs)
    assert levels[0] >= 5 and score > free
    result = master_first_stage(sets, fleets, WEIGHTS, None)
    assert result.score_usd == pytest.approx(score, rel=1e-7)
    assert _master_levels(sets, result.commitments)[0] >= 5


def test_the_tail_floor_is_below_every_levels_tail_and_charges_the_least_rate(tmp_path: Path) -> None:
    """``tail_floor`` (the bound with the tail, docs/futures.md): every carried node-hour after the horizon at
    the least rate its offering is sold at, here the 1-year rate (below on demand); no purchase level of the
    two steps pays less tail on any fleet."""
    inputs, sets = _small(tmp_path)
    fleets = _fleets(sets)
    until = START + timedelta(days=400)
    least = least_rates(sets, [], fleets)
    offering = next(o for o in inputs.catalog if o.id == P5)
    assert offering.reserved_1y_usd_h is not None and offering.on_demand_usd_h is not None
    assert least[P5] == pytest.approx(min(offering.reserved_1y_usd_h, offering.on_demand_usd_h), rel=1e-12)
    tail_hours = 400 * 24 - 59 * 24
    for fleet in fleets:
        floor = tail_floor(fleet, until, least)
        assert floor == pytest.approx(tail_hours * fleet.carried[P5] * offering.reserved_1y_usd_h, rel=1e-12)
        tails = [
            bill(fleet, held_nodes(_levels(sets, n), START), until).tail_usd
            for n in itertools.product(range(12), repeat=len(_p5(sets)))
        ]
        assert min(tails) >= floor - 1e-6
        assert min(tails) <= 1.05 * floor  # not vacuous: the best level comes within 0.7-3 % here
        assert tail_floor(fleet, None, least) == 0.0
