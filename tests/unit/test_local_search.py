"""The local search (planner/planning/optimize/local_search.py) against independent calculations.

- from a deliberately bad start it reaches the optimum of a brute force over every commitment level and
  every run placement, each scored by the exact per-period MILP (``dispatch(whole=True)``);
- a move that would break the spot share or a capacity limit is never kept, and ``violations`` (its
  safety net) does flag such plans;
- it never returns a costlier plan, and the same seed gives the same plan.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from models.catalog import Catalog
from models.scenario import parse
from models.tiers import Capacity
from planner.planning.optimize.dispatch import Occupancy, dispatch, team_index
from planner.planning.optimize.local_search import search, violations
from planner.planning.optimize.schedule import Schedule, at, combos
from planner.planning.problem.sets import PlanningSets, TrainingOption, build_sets


def _sets(tmp_path: Path, kit: Any, rows: list[dict[str, Any]], **scenario: Any) -> PlanningSets:
    kit.write_catalog_csv(tmp_path / "catalog.csv", rows)
    parsed = parse(kit.scenario_dict(**scenario), tmp_path / "scenario.yaml")
    return build_sets(parsed, Catalog.load(tmp_path / "catalog.csv"), tmp_path)


def _job(name: str, nodes: int, hours: float, window: tuple[int, int], **extra: Any) -> dict[str, Any]:
    return {"name": name, "team": "t", "nodes": nodes, "gpu_models": ["H100"], "hours": hours,
            "earliest_start": f"2027-01-04T{window[0]:02d}:00:00Z",
            "deadline": f"2027-01-04T{window[1]:02d}:00:00Z", **extra}  # fmt: skip


def _schedule(sets: PlanningSets, placements: list[TrainingOption]) -> Schedule:
    teams = team_index(sets)
    occupancy = Occupancy.empty(len(sets.offerings), len(teams), sets.scenario.horizon.periods)
    for option in placements:
        occupancy.add(sets, option, teams[sets.runs[option.run].job.team])
    return Schedule(sorted(placements, key=lambda option: option.run), [], occupancy)


def _exact(sets: PlanningSets, commitments: dict[int, int], placements: list[TrainingOption]) -> float:
    """The plan's cost with every period solved as its own MILP (whole nodes), independent of the search."""
    schedule = _schedule(sets, placements)
    hourly = dispatch(sets, sets.committed(commitments), schedule.occupancy, whole=True)
    bought = sum(sets.columns[c].cost_per_node * n for c, n in commitments.items())
    return bought + hourly.held_cost_usd + sum(option.cost_usd for option in placements)


def _every_placement(sets: PlanningSets, r: int) -> list[TrainingOption]:
    run = sets.runs[r]
    return [
        at(sets, option, start)
        for (rr, _o, _tier), option in sorted(combos(sets).items(), key=lambda item: str(item[0]))
        if rr == r
        for start in range(run.first_period, run.end_period - option.periods + 1)
    ]


@pytest.fixture
def fleet(tmp_path: Path, kit: Any) -> PlanningSets:
    """One committable offering ($10 on demand, $4 on 3y) and a dearer one that is not ($11), a service
    of one 8-GPU replica per node between 1 and 3 replicas a day, a 2-node, 6 h run in a 0-20 h window."""
    rows = [
        kit.offering_row(instance_type="a", on_demand_usd_h=10.0, reserved_3y_usd_h=4.0),
        kit.offering_row(instance_type="b", on_demand_usd_h=11.0),
    ]
    service = {"name": "s", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
               "replicas": {"profile": "diurnal", "base": 1, "peak": 3, "peak_hour_utc": 12}}  # fmt: skip
    return _sets(
        tmp_path,
        kit,
        rows,
        hours=24,
        terms=["3y"],
        inference=[service],
        training=[_job("run", 2, 6, (0, 20))],
    )


def test_reaches_the_brute_force_optimum_from_a_bad_start(fleet: PlanningSets) -> None:
    """Every commitment level 0-5 x every (offering, tier, start) of the run, each scored exactly: the
    search, started with nothing committed and the run on the inference peak, ends at that optimum."""
    sets = fleet
    (column,) = sets.new_columns
    assert sets.columns[column].cost_per_node == pytest.approx(4.0 * 24)  # $4/h over the 24 h horizon
    placements = _every_placement(sets, 0)
    assert len({(p.offering, p.start) for p in placements}) > 10  # the run really can move
    optimum = min(
        _exact(sets, {column: level}, [placed]) for level, placed in itertools.product(range(6), placements)
    )
    bad = next(p for p in placements if p.start == 9)  # 9-15 h: on the 12:00 peak
    start = _exact(sets, {}, [bad])
    found = search(sets, {}, _schedule(sets, [bad]), time_limit=None, seed=0)
    reached = _exact(sets, found.commitments, found.schedule.placements)
    assert start > optimum + 1.0  # the start is really bad
    assert reached == pytest.approx(optimum, abs=1e-6)
    assert found.cost_after == pytest.approx(reached, abs=1e-6)  # its score is the exact cost here
    assert found.accepted >= 2 and not violations(sets, found.commitments, found.schedule.placements)


def test_never_costlier_and_deterministic_for_a_seed(fleet: PlanningSets) -> None:
    """From every start (each placement, 0 or 4 nodes committed) the plan returned costs no more than the
    start, exactly; the same seed twice gives the same plan."""
    sets = fleet
    (column,) = sets.new_columns
    for level, placed in itertools.product((0, 4), _every_placement(sets, 0)[::5]):
        found = search(sets, {column: level}, _schedule(sets, [placed]), time_limit=None, seed=3)
        assert found.cost_after <= found.cost_before + 1e-9
        before = _exact(sets, {column: level}, [placed])
        assert _exact(sets, found.commitments, found.schedule.placements) <= before + 1e-6
    start = _every_placement(sets, 0)[-1]
    one, two = (search(sets, {}, _schedule(sets, [start]), None, seed=7) for _ in range(2))
    assert (one.commitments, one.schedule.placements) == (two.commitments, two.schedule.placements)


def test_spot_share_and_capacity_are_never_broken(tmp_path: Path, kit: Any) -> None:
    """Spot at $1 against $10 on demand tempts both preemptible runs onto spot, but max_spot_share 0.5
    allows one; a $5 offering (no spot) capped at 1 node tempts both overlapping runs (4 h in a 0-5 h
    window), but only one fits. The search keeps both rules and ends at the brute-force optimum under them."""
    rows = [
        kit.offering_row(instance_type="cheap", on_demand_usd_h=5.0, max_nodes=1),
        kit.offering_row(instance_type="dear", on_demand_usd_h=10.0, spot_usd_h=1.0),
    ]
    jobs = [_job(name, 1, 4, (0, 5), preemptible=True) for name in ("x", "y")]
    sets = _sets(tmp_path, kit, rows, hours=8, max_spot_share=0.5, training=jobs)
    dear = next(o for o, offering in enumerate(sets.offerings) if offering.instance_type == "dear")
    start = [at(sets, combos(sets)[(r, dear, Capacity.NON_SPOT)], 0) for r in (0, 1)]
    found = search(sets, {}, _schedule(sets, start), time_limit=None)
    placed = found.schedule.placements
    assert not violations(sets, found.commitments, placed)
    assert sorted(option.tier for option in placed) == [Capacity.NON_SPOT, Capacity.SPOT]
    best = min(
        _exact(sets, {}, [p, q])
        for p, q in itertools.product(_every_placement(sets, 0), _every_placement(sets, 1))
        if not violations(sets, {}, [p, q])
    )
    assert _exact(sets, found.commitments, placed) == pytest.approx(best, abs=1e-6)
    # the checker has teeth: both on spot, both on the capped offering at once, a start past the window
    spot = [at(sets, combos(sets)[(r, dear, Capacity.SPOT)], 0) for r in (0, 1)]
    cheap = 1 - dear
    crowded = [at(sets, combos(sets)[(r, cheap, Capacity.NON_SPOT)], 0) for r in (0, 1)]
    late = [at(sets, combos(sets)[(0, dear, Capacity.NON_SPOT)], 3)]
    assert any("spot share" in line for line in violations(sets, {}, spot))
    assert any("max_nodes" in line for line in violations(sets, {}, crowded))
    assert any("window" in line for line in violations(sets, {}, late))


def test_a_spent_time_limit_keeps_the_start(fleet: PlanningSets) -> None:
    """No time left: the search scores the start and keeps it, moves nothing (every move checks the
    deadline between its trials); with time, the same start improves (so the first assertion can fail)."""
    sets = fleet
    bad = next(p for p in _every_placement(sets, 0) if p.start == 9)
    spent = search(sets, {}, _schedule(sets, [bad]), time_limit=0.0)
    assert spent.accepted == 0 and spent.schedule.placements == [bad] and not spent.commitments
    assert spent.cost_after == pytest.approx(spent.cost_before)
    assert search(sets, {}, _schedule(sets, [bad]), time_limit=None).accepted >= 1
