"""A plan started from another plan's decisions: never dearer than that plan (issue 39, point 2).

A scenario with more choices than another (a finer purchase schedule, more regions, more terms, a larger
``max_nodes``) can buy everything the other's plan buys and place its training where it placed it, so its
plan should never cost more. A search stopped by its budget does not see that by itself: the richer model
is larger and its search may end elsewhere. ``optimize(..., seed=plan)`` (``gpuplan plan --start-from
DIR``) therefore takes the seed's decisions (the commitments it bought, by offering, term and start; the
training runs where and when it placed them, spot or not) onto this scenario's sets, checks them against
its rules (``local_search.violations``), dispatches them through the same finishing path as any plan
(``finish.py``: whole nodes per period, savings plans re-bought for the fleet, runs it left unserved
repaired where they fit) and keeps whichever of the method's plan and the seed's is cheaper as written.

The seed's decisions are used only if every one of them is for sale here: a purchase at a step this
scenario does not offer, a run or offering it does not have, or a placement that breaks its limits means
the seed is not a restriction of this scenario, and the plan says why it was not used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from models.catalog import Catalog
from models.errors import InputError, SolverError
from models.plan import Plan
from models.scenario import Scenario
from models.tiers import Capacity, Term, Tier
from planner.planning.optimize.budget import TimeBudget
from planner.planning.optimize.dispatch import Occupancy
from planner.planning.optimize.finish import (
    Scheduled,
    dispatch_scheduled,
    finished,
    guarantee_shortfall,
    write_plan,
)
from planner.planning.optimize.local_search import violations
from planner.planning.optimize.schedule import Schedule, at, combos
from planner.planning.optimize.settings import SolveSettings
from planner.planning.optimize.solution import Solution
from planner.planning.problem.checks import check_inputs
from planner.planning.problem.sets import PlanningSets, TrainingOption, build_sets
from planner.solvers.solve import SolveResult, Termination

__all__ = [
    "SeedDecisions",
    "check_seed_horizon",
    "dispatched_plan",
    "fleet_solution",
    "plan_as_run",
    "plan_of_decisions",
    "rebilled_plan",
    "seed_decisions",
    "seeded_plan",
]


@dataclass(frozen=True)
class SeedDecisions:
    """A seed plan's decisions on this scenario's sets, or why they do not fit (``reason``)."""

    commitments: dict[int, int]  # new column -> nodes
    placements: list[TrainingOption]
    unserved_runs: list[int]
    reason: str = ""


def check_seed_horizon(sets: PlanningSets, seed: Plan, name: str) -> None:
    """A seed plans the same hours in the same periods, else its decisions mean nothing here: an
    InputError naming the seed (``name``) and both horizons."""
    mine = sets.scenario.horizon
    theirs = seed.document.horizon
    if (theirs.start, theirs.hours, theirs.period_hours) != (mine.start, mine.hours, mine.period_hours):
        raise InputError(
            None,
            name,
            f"the plan to start from covers {theirs.hours} h from {theirs.start.isoformat()} in "
            f"{theirs.period_hours} h periods; this scenario {mine.hours} h from {mine.start.isoformat()} in "
            f"{mine.period_hours} h periods: a seed must plan the same horizon",
        )


def seed_decisions(sets: PlanningSets, seed: Plan) -> SeedDecisions:
    """The seed's purchases and placements as this scenario's columns and options (module docstring)."""
    offering_index = {offering.id: o for o, offering in enumerate(sets.offerings)}
    p = sets.period_hours
    start = sets.scenario.horizon.start
    columns: dict[tuple[int, Term, int], int] = {}
    for c in sets.new_columns:
        new = sets.columns[c]
        columns.setdefault((new.offering, new.term, new.start), c)
    commitments: dict[int, int] = {}
    for bought in seed.document.commitments:
        if bought.existing:
            continue
        o = offering_index.get(bought.offering)
        step = 0 if bought.start is None else round((bought.start - start).total_seconds() / 3600 / p)
        found = None if o is None else columns.get((o, bought.term, step))
        if found is None and o is not None and bought.term in sets.scenario.purchase.terms:
            # a term sold here but dropped for this offering as dominated (sets.build_sets: another of
            # its terms costs less per node inside the horizon): the purchase goes to the cheapest kept
            kept = [c for (oo, _term, start), c in columns.items() if oo == o and start == step]
            found = min(kept, key=lambda c: (sets.columns[c].cost_per_node, c)) if kept else None
        if found is None:
            what = bought.name or bought.offering
            return SeedDecisions({}, [], [], f"its purchase {what} is not for sale here")
        commitments[found] = commitments.get(found, 0) + bought.nodes  # paid several ways: one column
    run_index = {(run.job.name, run.run): r for r, run in enumerate(sets.runs)}
    known = combos(sets)
    placements: list[TrainingOption] = []
    for placed in seed.document.training:
        r = run_index.get((placed.job, placed.run))
        o = offering_index.get(placed.offering)
        own = {Tier.SPOT: Capacity.SPOT, **{c.tier: c for c in Capacity if c.own_nodes}}
        capacity = own.get(placed.tier, Capacity.NON_SPOT)
        base = None if r is None or o is None else known.get((r, o, capacity))
        if base is None:
            return SeedDecisions(
                {}, [], [], f"its run {placed.job} #{placed.run} on {placed.offering} has no option here"
            )
        placements.append(at(sets, base, placed.start_period))
    problems = violations(sets, commitments, placements)
    if problems:
        return SeedDecisions({}, [], [], f"its decisions break this scenario's rules ({problems[0]})")
    placed_runs = {option.run for option in placements}
    unserved = [r for r in range(len(sets.runs)) if r not in placed_runs]
    return SeedDecisions(commitments, placements, unserved)


def plan_of_decisions(
    sets: PlanningSets,
    decisions: SeedDecisions,
    reference: Plan,
    budget: TimeBudget,
    say: Callable[[str], None],
) -> tuple[Plan, float]:
    """The plan of ``decisions`` on ``sets`` by the finishing path alone (whole-node dispatch,
    ``write_plan``), with ``reference``'s baselines, bound and solver record; and its dispatch's objective."""
    occupancy = Occupancy.of(sets, decisions.placements)
    schedule = Schedule(decisions.placements, decisions.unserved_runs, occupancy)
    scheduled = Scheduled(decisions.commitments, sets.committed(decisions.commitments), schedule)
    dispatched = dispatch_scheduled(sets, scheduled, say)
    return _written(dispatched.solution, dispatched.objective, reference, budget, say), dispatched.objective


def _written(
    solution: Solution, objective: float, reference: Plan, budget: TimeBudget, say: Callable[[str], None]
) -> Plan:
    """``solution`` through ``write_plan`` with ``reference``'s baselines, bound and solver record."""
    solver = reference.document.solver
    result = SolveResult(solver.name, Termination.FEASIBLE, objective, solver.bound_usd, 0.0)
    return write_plan(
        solution,
        result,
        reference.document.baselines,
        budget,
        method=solver.method,
        build_seconds=solver.build_seconds,
        model_slots=solver.model_periods,
        stages=solver.stages,
        requested_gap=solver.requested_gap or 0.0,
        say=say,
    )


def dispatched_plan(
    scenario: Scenario,
    catalog: Catalog,
    base_dir: Path | None,
    seed: Plan,
    reference: Plan,
    settings: SolveSettings,
    say: Callable[[str], None] | None = None,
) -> Plan:
    """``scenario`` planned with ``seed``'s purchases and training placements, no search: the finishing
    path every plan ends with. ``reference`` (a plan of the same fleet) gives the baselines and the
    certified bound (valid for any purchase). A SolverError says why the decisions do not fit."""
    tell = say or (lambda _m: None)
    warnings = check_inputs(scenario, catalog)
    sets = build_sets(scenario, catalog, base_dir, settings.model_options())
    decisions = seed_decisions(sets, seed)
    if decisions.reason:
        raise SolverError(f"the purchases cannot be planned as bought: {decisions.reason}")
    plan, _objective = plan_of_decisions(
        sets, decisions, reference, TimeBudget(settings.time_limit, settings.realize_seconds), tell
    )
    return finished(plan, catalog, warnings)


def fleet_solution(sets: PlanningSets, decisions: SeedDecisions, fleet: Plan, note: str) -> Solution | None:
    """``fleet``'s inference rows as they run (whole replicas on whole nodes per period), with
    ``decisions`` (its placements and purchases on ``sets``), as a solution of ``sets``: written out, only
    the bill of each offering's pool changes. None when it serves a service or offering ``sets`` lacks."""
    offering_index = {offering.id: o for o, offering in enumerate(sets.offerings)}
    service_index = {service.name: i for i, service in enumerate(sets.services)}
    rows = fleet.allocations
    rows = rows[rows["kind"] == "inference"]
    frame = pd.DataFrame(
        {
            "period": rows["period"].to_numpy(dtype=np.int64),
            "o": rows["offering"].map(offering_index),
            "tier": np.where(rows["tier"].astype(str) == str(Tier.SPOT), Capacity.SPOT, Capacity.NON_SPOT),
            "i": rows["workload"].map(service_index),
            "nodes": rows["nodes"].to_numpy(dtype=float),
            "replicas": rows["replicas"].to_numpy(dtype=float),
        }
    )
    if (
        frame["o"].isna().any()
        or frame["i"].isna().any()
        or len(sets.slot_of_period) != fleet.document.horizon.periods
    ):
        return None
    frame = frame.astype({"o": np.int64, "i": np.int64})
    inference = frame.groupby(["period", "o", "tier", "i"], as_index=False)[["nodes", "replicas"]].sum()
    served = np.zeros_like(sets.demand, dtype=float)
    np.add.at(
        served, (inference["i"].to_numpy(), inference["period"].to_numpy()), inference["replicas"].to_numpy()
    )
    return Solution(
        sets=sets,
        commits=dict(decisions.commitments),
        inference=inference,
        placements=decisions.placements,
        unserved_replicas=np.maximum(sets.demand - served, 0.0),
        unserved_runs=decisions.unserved_runs,
        guarantee_short=guarantee_shortfall(sets, decisions.commitments)[0],
        penalty_usd=fleet.document.solver.penalty_usd,
        notes=[note],
    )


def plan_as_run(solution: Solution, reference: Plan, limit: float | None, say: Callable[[str], None]) -> Plan:
    """``solution`` written as it is (whole already: no refinement, which would move it), with
    ``reference``'s baselines, bound and solver record."""
    return _written(solution, reference.document.solver.objective_usd, reference, TimeBudget(limit, 0.0), say)


def rebilled_plan(
    scenario: Scenario,
    catalog: Catalog,
    base_dir: Path | None,
    own: Plan,
    settings: SolveSettings,
    say: Callable[[str], None] | None = None,
) -> Plan:
    """``own``'s fleet as it runs (its inference rows and training placements, unchanged) written as a plan
    of ``scenario``: the same future holding other commitments, nothing for sale. Only the bill changes:
    per offering and period the billing rule splits the nodes between the held commitments and on demand
    again (``solution.build_plan``), so the plan costs what ``fleet_bill.bill`` says, to the cent, and
    ``gpuplan verify`` checks it as any plan. ``own``'s baselines and certified bound (valid for any
    purchase) are kept. A SolverError says why the fleet does not fit ``scenario``."""
    warnings = check_inputs(scenario, catalog)
    sets = build_sets(scenario, catalog, base_dir, settings.model_options())
    decisions = seed_decisions(
        sets, Plan(own.document.model_copy(update={"commitments": []}), own.allocations)
    )
    if decisions.reason:
        raise SolverError(f"the fleet cannot be billed here: {decisions.reason}")
    note = "the fleet of the future's own plan, billed with these commitments held (fleet_bill.py)"
    solution = fleet_solution(sets, decisions, own, note)
    if solution is None:
        raise SolverError(
            "the fleet cannot be billed here: it serves a service or offering this scenario lacks"
        )
    plan = plan_as_run(solution, own, settings.time_limit, say or (lambda _m: None))
    return finished(plan, catalog, warnings)


def seeded_plan(
    sets: PlanningSets, seed: Plan, made: Plan, budget: TimeBudget, say: Callable[[str], None]
) -> Plan:
    """``made`` (the method's plan) or, if cheaper as written, the plan of the seed's decisions on these
    sets, with ``made``'s bound, baselines and stages (its gap recomputed): never dearer than either."""
    decisions = seed_decisions(sets, seed)
    solver = made.document.solver
    if decisions.reason:
        note = f"the plan to start from was not used: {decisions.reason}"
        say(note)
        solver.notes.append(note)
        return made
    plan, objective = plan_of_decisions(sets, decisions, made, budget, say)
    theirs = plan.document.costs.total_usd + plan.document.solver.penalty_usd
    # the seed's fleet as it ran, too: dispatched again under this run's (maybe smaller) budget, its
    # replicas may come out less well packed than the seed had them
    as_run = fleet_solution(sets, decisions, seed, "the plan started from, its fleet as it ran")
    if as_run is not None:
        kept = plan_as_run(as_run, made, budget.limit, say)
        paid = kept.document.costs.total_usd + kept.document.solver.penalty_usd
        if paid < theirs - 0.005:
            plan, objective, theirs = kept, paid, paid
    ours = made.document.costs.total_usd + solver.penalty_usd
    if theirs >= ours - 0.005:
        note = f"the plan to start from costs ${theirs:,.2f} here, not less than this plan's ${ours:,.2f}"
        say(note)
        solver.notes.append(note)
        return made
    report = solver.model_copy(deep=True)
    report.objective_usd = theirs
    report.model_objective_usd = objective
    report.penalty_usd = plan.document.solver.penalty_usd
    report.gap = max(0.0, theirs - report.bound_usd) / theirs if theirs > 0 else 0.0
    if report.certified_bound_usd is not None:
        report.certified_gap = report.gap
    report.status = Termination.FEASIBLE.value
    report.notes = [
        *plan.document.solver.notes,
        f"started from another plan's decisions: ${theirs:,.2f} as written, less than the search's own "
        f"${ours:,.2f} (a plan is never dearer than a plan it starts from)",
    ]
    say(report.notes[-1])
    plan.document.solver = report
    return plan
