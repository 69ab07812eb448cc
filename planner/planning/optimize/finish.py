"""What both methods share once they have decisions: dispatch, local search, the written cost.

The staged method (``staged.py``) and the hourly method (``hourly.py``) decide commitments and training
placements differently; from there on they take the same path, written here once: training placed
(:class:`Scheduled`) is dispatched period by period in whole nodes (:func:`dispatch_scheduled`, the
plan's allocations), improved by the local search where that makes a cheaper written plan
(:func:`improve_plan`), costed as the written plan adds it up (:func:`written_cost`), and written as the
plan (:func:`write_plan`: whole replicas, the contract's document). The exact-start plan
(``exact_plan.py``) goes through the same path, and ``gpuplan plan`` verifies what was written.
Neither method imports the other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import pulp

from models.catalog import Catalog
from models.errors import SolverError
from models.plan import Baselines, Plan, SolveMethod, SolverReport, SolverStage, UnservedTraining
from models.pricesources import price_sources, price_warnings
from planner.planning.optimize.budget import TimeBudget
from planner.planning.optimize.build import (
    guarantee_penalty_per_gpu,
    guarantee_rows,
    replica_penalty,
    run_penalty,
    worst_shortfall,
)
from planner.planning.optimize.dispatch import CODE_CAPACITY, NON_SPOT_CODE, Dispatch, Occupancy, dispatch
from planner.planning.optimize.local_search import search
from planner.planning.optimize.repair import UNPLACED, place_unserved
from planner.planning.optimize.savings_purchase import plans_saving_usd
from planner.planning.optimize.schedule import Schedule
from planner.planning.optimize.settings import SEARCH_MIN_ROUND_GAIN
from planner.planning.optimize.solution import Solution, build_plan
from planner.planning.problem.sets import PlanningSets
from planner.solvers.solve import SolveResult, Termination, solve

__all__ = [
    "Dispatched",
    "Scheduled",
    "dispatch_scheduled",
    "finished",
    "guarantee_shortfall",
    "improve_plan",
    "record_raw_bound",
    "repair_unserved",
    "settle_status",
    "solution_of",
    "swap_for_savings_plans",
    "write_plan",
    "written_cost",
]


@dataclass
class Scheduled:
    commitments: dict[int, int]  # new column -> nodes
    committed: np.ndarray  # (offerings, periods) nodes serving, held columns included
    schedule: Schedule


@dataclass
class Dispatched:
    """An hourly plan made from one set of cluster-model decisions."""

    solution: Solution
    schedule: Schedule
    dispatch: Dispatch
    commitments: dict[int, int]  # new column -> nodes
    objective: float


def dispatch_scheduled(sets: PlanningSets, scheduled: Scheduled, say: Callable[[str], None]) -> Dispatched:
    """Inference dispatched period by period around the placed training: the finished plan."""
    hourly = dispatch(sets, scheduled.committed, scheduled.schedule.occupancy, progress=say)
    say(
        f"inference dispatched in whole nodes: {hourly.distinct_periods:,} distinct periods, "
        f"{hourly.seconds:.1f} s"
    )
    solution = solution_of(sets, scheduled.commitments, scheduled.schedule, hourly)
    return Dispatched(
        solution, scheduled.schedule, hourly, scheduled.commitments, written_cost(sets, solution, hourly)
    )


def improve_plan(
    sets: PlanningSets,
    scheduled: Scheduled,
    incumbent_usd: float,
    dispatch_work: float,
    left: float | None,
    budget: TimeBudget,
    say: Callable[[str], None],
    reserve: float = 0.0,
    seed: int = 0,
) -> Dispatched | None:
    """Local search (local_search.py) from ``scheduled``, in the ``left`` seconds less ``reserve`` and
    the dispatches after it, at most its share of the limit (``TimeBudget.local_search``); its plan,
    dispatched in whole nodes, if that costs less than ``incumbent_usd`` as written
    (:func:`written_cost`), else None: the incumbent is never lost. Both methods call it."""
    seconds = budget.local_search(left, reserve, dispatch_work, say)
    if not budget.searchable(seconds):
        return None
    guarantees = any(team.guaranteed_gpus > 0 for team in sets.scenario.teams)
    found = search(
        sets,
        scheduled.commitments,
        scheduled.schedule,
        seconds,
        (lambda chosen: guarantee_shortfall(sets, chosen)[1]) if guarantees else None,
        say,
        seed,
        min_round_gain=SEARCH_MIN_ROUND_GAIN,
    )
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(found.moves.items())) or "none"
    if not found.accepted:
        say(f"local search: 0 moves ({found.evaluations} scored, {found.seconds:.1f} s)")
        return None
    searched = Scheduled(found.commitments, sets.committed(found.commitments), found.schedule)
    candidate = dispatch_scheduled(sets, searched, say)
    kept = candidate.objective < incumbent_usd - 1e-6
    say(
        f"local search: {found.accepted} moves ({kinds}; {found.evaluations} scored, {found.seconds:.1f} s), "
        f"-${incumbent_usd - candidate.objective:,.0f} in whole nodes"
        + ("" if kept else ": not cheaper as written, the incumbent stays")
    )
    return candidate if kept else None


def swap_for_savings_plans(
    sets: PlanningSets,
    commitments: dict[int, int],
    schedule: Schedule,
    incumbent_usd: float,
    say: Callable[[str], None],
) -> Dispatched | None:
    """With savings plans for sale: the plan with the reservations dropped whose offering a plan for sale
    covers more cheaply than the reservation's own rate (same term), their nodes left on demand for the
    plans the purchase LP buys (``commitments``: new column -> nodes, training as ``schedule`` places it);
    that plan if it costs less as written than ``incumbent_usd``, else None.
    The models that decide commitments without the plans (the staged method's stages 1-2) cannot weigh
    them against reservations; this one candidate does, at the price of one dispatch."""
    cheapest: dict[tuple[int, int], float] = {}
    for k in sets.new_plans:
        group = sets.groups[sets.plans[k].group]
        for o, rate in sets.group_rates[sets.plans[k].group].items():
            key = (o, group.term_years)
            cheapest[key] = min(rate, cheapest.get(key, rate))
    kept = {
        c: n
        for c, n in commitments.items()
        if not (
            (column := sets.columns[c]).term.years
            and cheapest.get((column.offering, column.term.years), math.inf) < column.usd_per_node_hour
        )
    }
    if kept == commitments:
        return None
    candidate = dispatch_scheduled(sets, Scheduled(kept, sets.committed(kept), schedule), say)
    kept_it = candidate.objective < incumbent_usd - 1e-6
    say(
        f"savings plans in place of {len(commitments) - len(kept)} reservations: "
        f"${candidate.objective:,.0f} as written"
        + ("" if kept_it else ", not cheaper: the reservations stay")
    )
    return candidate if kept_it else None


def solution_of(
    sets: PlanningSets, commitments: dict[int, int], schedule: Schedule, hourly: Dispatch
) -> Solution:
    rows = hourly.rows
    inference = pd.DataFrame(
        {
            "period": rows["period"],
            "o": rows["o"],
            "tier": np.array(CODE_CAPACITY, dtype=object)[rows["tier"]],
            "i": rows["i"],
            "nodes": rows["nodes"],
            "replicas": rows["replicas"],
        }
    )
    shortfall, guarantee_usd = guarantee_shortfall(sets, commitments)
    p = sets.period_hours
    penalty = sum(
        float(hourly.unserved[i].sum()) * replica_penalty(sets, i) * p for i in range(len(sets.services))
    )
    penalty += sum(run_penalty(sets, r) for r in schedule.unserved_runs)
    penalty += guarantee_usd
    return Solution(
        sets=sets,
        commits={c: nodes for c, nodes in commitments.items() if nodes > 0},
        inference=inference,
        placements=schedule.placements,
        unserved_replicas=hourly.unserved,
        unserved_runs=schedule.unserved_runs,
        guarantee_short=shortfall,
        penalty_usd=penalty,
    )


def guarantee_shortfall(sets: PlanningSets, commitments: dict[int, int]) -> tuple[dict[str, float], float]:
    """Guaranteed GPUs the fixed commitments cannot back (the guarantee rows of build.py, R fixed):
    per team the most in any segment, and their penalty (per segment, by its share of the horizon)."""
    if not any(team.guaranteed_gpus > 0 for team in sets.scenario.teams):
        return {}, 0.0
    problem = pulp.LpProblem("guarantees", pulp.LpMinimize)
    commit = {}
    for c in sets.new_columns:
        nodes = float(commitments.get(c, 0))
        commit[c] = problem.add_variable(f"R_{c}", nodes, nodes, pulp.LpContinuous)
    family = guarantee_rows(
        sets, commit, lambda name, up: problem.add_variable(name, 0, up, pulp.LpContinuous)
    )
    for name, (row, sense, rhs) in family.rows.items():
        problem.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(row), sense, name, rhs))
    problem.setObjective(pulp.lpSum(family.weight[key] * var for key, var in family.shortfall.items()))
    result = solve(problem, gap=0.0)
    if not result.ok:  # pragma: no cover - the shortfall columns make it always feasible
        raise SolverError("the guarantee check failed")
    value = lambda var: float(var.varValue or 0.0)  # noqa: E731
    penalty = guarantee_penalty_per_gpu(sets) * sum(
        family.weight[key] * value(var) for key, var in family.shortfall.items()
    )
    return worst_shortfall(family.shortfall, value), penalty


def written_cost(sets: PlanningSets, solution: Solution, hourly: Dispatch) -> float:
    """Commitments + held nodes (spot inference, on-demand nodes beyond the commitments for inference and
    training) + spot training + penalties, less what savings plans save on the on-demand nodes (held
    ones, and those the plan would buy for this fleet: ``savings_purchase.plans_saving_usd``), as the
    written plan adds it up."""
    commitments = sets.fixed_usd + sum(
        nodes * sets.columns[c].cost_per_node for c, nodes in solution.commits.items()
    )
    training = sum(option.cost_usd for option in solution.placements)
    saved = plans_saving_usd(sets, _on_demand_nodes(sets, solution, hourly)) if sets.plans else 0.0
    return commitments + hourly.held_cost_usd + training + solution.penalty_usd - saved


def _on_demand_nodes(sets: PlanningSets, solution: Solution, hourly: Dispatch) -> np.ndarray:
    """(offerings, periods) whole on-demand nodes of a dispatched plan: its non-spot nodes (inference's
    node-equivalents, rounded up to whole nodes beyond the commitments, and training's) beyond them."""
    periods = len(sets.slot_of_period)
    non_spot = Occupancy.of(sets, solution.placements).non_spot.copy()
    rows = hourly.rows[hourly.rows["tier"] == NON_SPOT_CODE]
    np.add.at(non_spot, (rows["o"].astype(np.int64), rows["period"].astype(np.int64)), rows["nodes"])
    committed = sets.committed({**solution.commits})[:, :periods]
    beyond = non_spot - committed
    return np.where(beyond > 1e-6, np.ceil(beyond - 1e-6), 0.0)


def write_plan(
    solution: Solution,
    result: SolveResult,
    baselines: Baselines,
    budget: TimeBudget,
    *,
    method: SolveMethod,
    build_seconds: float,
    model_slots: int,
    stages: Sequence[SolverStage],
    requested_gap: float,
    say: Callable[[str], None],
    lean: bool = False,
) -> Plan:
    """The plan of ``solution``, as both methods write it: the runs it leaves unserved placed where they
    fit (:func:`repair_unserved`), whole replicas within the budget's share (``realize.py``), then the
    contract's document (``solution.build_plan``) with the solver stages that made it. The method adds
    what only it knows (bounds, stage 2's slots) to ``plan.document.solver``. ``lean``:
    ``SolveSettings.lean``."""
    repaired = repair_unserved(solution.sets, solution, result.objective, say)
    if repaired is not None:
        solution = repaired.solution
        # the model's bound is the model's: a run the model left unserved, placed at an hourly start
        # the model does not have, can make the plan cheaper than that model's optimum
        objective = repaired.objective
        result = replace(result, objective=objective, bound=min(result.bound, objective))
    plan = build_plan(
        solution,
        result,
        baselines,
        method=method,
        elapsed={"build": build_seconds},
        model_slots=model_slots,
        realize_seconds=budget.realize,
        progress=say,
        lean=lean,
    )
    solver = plan.document.solver
    solver.stages = list(stages)
    solver.requested_gap = requested_gap
    return plan


def repair_unserved(
    sets: PlanningSets, solution: Solution, incumbent_usd: float, say: Callable[[str], None]
) -> Dispatched | None:
    """``solution`` with the runs the search left unserved placed where they fit (``repair.py``),
    dispatched again: that plan if it costs less as written than ``incumbent_usd``, else None."""
    repaired = place_unserved(sets, solution.commits, solution.placements, solution.unserved_runs)
    if repaired is None:
        return None
    if not repaired.placed:
        say(f"repair: none of {repaired.tried} unserved run(s) fits beside the plan's commitments, training")
        return None
    scheduled = Scheduled(repaired.commitments, repaired.committed, repaired.schedule)
    candidate = dispatch_scheduled(sets, scheduled, say)
    kept = candidate.objective < incumbent_usd - 1e-6
    say(
        f"repair: {len(repaired.placed)} of {repaired.tried} unserved run(s) placed after the search, "
        f"${candidate.objective:,.0f} as written" + ("" if kept else ", not cheaper: the plan stays")
    )
    if not kept:
        return None
    candidate.solution.notes.append(
        f"{len(repaired.placed)} training run(s) the search left unserved placed after it "
        "(repair: cheapest feasible start beside the plan's commitments and training)"
    )
    return candidate


def finished(plan: Plan, catalog: Catalog, warnings: Sequence[str]) -> Plan:
    """``plan`` as every path hands it out: its status settled (:func:`settle_status`), the sources of the
    prices it uses recorded, and the inputs' ``warnings`` with the prices' own."""
    settle_status(plan)
    sources = price_sources(catalog, plan.document, plan.allocations)
    plan.document.prices = sources
    plan.document.warnings = [*warnings, *price_warnings(sources, plan.document, plan.document.created)]
    return plan


def settle_status(plan: Plan) -> None:
    """A plan with a run the search left unplaced (room may exist) is never ``optimal``: its cost is no
    proven optimum, whatever the gap says; the notes say why."""
    solver = plan.document.solver
    unplaced = [
        item.workload
        for item in plan.document.unserved
        if isinstance(item, UnservedTraining) and item.reason.startswith(UNPLACED)
    ]
    if not unplaced:
        return
    if solver.status == Termination.OPTIMAL.value:
        solver.status = Termination.FEASIBLE.value
    names = ", ".join(sorted(set(unplaced)))
    solver.notes.append(f"not optimal: {len(unplaced)} training run(s) unplaced by the search ({names})")


#: a certified bound above the plan's cost by more than this share is no rounding: a bound (or plan) bug
BOUND_ABOVE_PLAN = 1e-7


def record_raw_bound(
    solver: SolverReport, raw_usd: float, paid_usd: float, say: Callable[[str], None]
) -> None:
    """Keep the certified bound as computed (``certified_bound_raw_usd``) beside the capped one the gap
    uses, and name a bound above the plan's cost ``paid_usd`` as the bug signal it is: a lower bound above a
    feasible plan is impossible, and capping it at the plan's cost (``min(bound, cost)``) would hide it
    (issue 39.3). Tests compare the raw bound with independent optima."""
    solver.certified_bound_raw_usd = raw_usd
    if raw_usd > paid_usd * (1 + BOUND_ABOVE_PLAN) + 1e-6:
        message = (
            f"bound error: the certified bound ${raw_usd:,.2f} is above the plan's cost ${paid_usd:,.2f}; "
            "a lower bound cannot exceed a feasible plan (a gpuplan bug: please report it)"
        )
        solver.notes.append(message)
        say(message)
