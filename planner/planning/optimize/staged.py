"""The staged method: one MILP over merged periods, then whole nodes, with an optional third stage.

1. The MILP with on-demand/spot node counts relaxed to fractions (commitments and training placements
   stay integer): it decides commitments and placements, and HiGHS proves a lower bound. Relaxing
   integrality only lowers the optimum, so this bound holds for stage 2's model.
2. Training fixed as decided, periods re-merge further and every node count is whole: solved slot by
   slot at stage 1's commitments (the model is separable then), then with commitments free,
   warm-started from that plan. Its cost is the plan's cost.
3. Only if the gap is above the target: the whole-node model with training free, warm-started from
   stage 2, for a tighter bound (and a better plan if it finds one).

``--gap`` is measured against the best of stage 1's and stage 3's bounds (``model_gap``): a true
optimality certificate for the model (training on its start grid, capacity held for each block a run
touches). ``bound_usd``/``gap`` in plan.json are the certified bound on the full hourly problem
(bound.py) and the plan's gap against it; the exact-start bound (bound_exact.py) runs after the plan is
written, and where its integer solution, dispatched as a plan, keeps every rule and costs less as
written, that plan replaces this one (exact_plan.py; its model bound is then that model's). The
hourly method, for sizes where one MILP over every slot does not fit, is ``hourly.py``; ``run.py``
picks between the two.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from models.errors import SolverError
from models.plan import Baselines, Plan, SolverReport, SolverStage
from planner.planning.optimize.bound import BoundResult, certified_bound, clusters_per_block, start_from
from planner.planning.optimize.bound_exact import best_bound, try_exact_bound
from planner.planning.optimize.budget import Share, TimeBudget
from planner.planning.optimize.build import PlanningModel, create_model
from planner.planning.optimize.dispatch import Occupancy
from planner.planning.optimize.exact_plan import NOT_KEPT, weigh_exact_plan
from planner.planning.optimize.finish import (
    Dispatched,
    Scheduled,
    dispatch_scheduled,
    improve_plan,
    record_raw_bound,
    swap_for_savings_plans,
    write_plan,
)
from planner.planning.optimize.schedule import Schedule
from planner.planning.optimize.settings import SolveSettings
from planner.planning.optimize.solution import Solution, solution_from_model
from planner.planning.problem.sets import PlanningSets, fix_training
from planner.solvers.solve import SolveResult, Termination, solve, solve_separable

__all__ = ["plan_staged", "warm_start"]


def plan_staged(
    sets: PlanningSets,
    settings: SolveSettings,
    budget: TimeBudget,
    say: Callable[[str], None],
    baselines: Baselines,
) -> Plan:
    """Plan ``sets`` by the staged method (module docstring); raise SolverError without a feasible plan.

    ``budget`` counts from when planning started (before the sets were built): the build time and the
    time left for the certified bound count from there. ``baselines``: the peers the plan is compared
    with (``compute_baselines(sets)``).
    """
    # savings plans for sale join at stage 3 (the whole-node model, warm-started) and, for every plan, in
    # the purchase LP on the finished fleet (savings_purchase.py), so that a plan with plans for sale never
    # costs more than without them: with them, stage 1's MILP over every slot and run start found no
    # placement for a 16-node gang within its time on mixed-fleet (measured: $14.5M with the gang
    # unserved, against $2.15M without them), and stage 2's free solve took its time from the rest
    first = create_model(sets, savings_plans=False)
    build_seconds = budget.wall_seconds()  # measured, for the report
    say(f"stage 1 built in {build_seconds:.1f} s; solving with {settings.solver}")
    # stage 1 may not take the whole budget: stages 2-3 and the certified bound need their share
    relaxed = _solve(first, settings, budget.of_limit(Share.STAGE_1), what="stage 1")
    say(f"stage 1: {relaxed.termination.value}, bound ${relaxed.bound:,.0f}, {relaxed.seconds:.1f} s")

    chosen = [a for a, var in enumerate(first.place) if (var.varValue or 0.0) > 0.5]
    fixed_sets = fix_training(sets, chosen)
    second = create_model(fixed_sets, savings_plans=False)
    say(f"stage 2: {len(fixed_sets.slots)} model slots, whole nodes")
    final = _second_stage(first, second, settings, budget)
    # stages 1-2 without the savings plans for sale bound another model: with plans for sale only stage 3's
    # bound (and the certified one, always computed then) bound this one; 0 is the trivial bound till then
    bound = relaxed.bound if not sets.new_plans else 0.0
    used = relaxed.seconds + final.seconds
    plan_model, stage3 = second, None
    # the certified bound keeps its share of the budget: stages 1-3 stop at the rest (counted work)
    stage_3 = budget.until(Share.STAGES)
    # stage 3 when stages 1-2 leave a gap (with plans for sale: the gap of the model without them; the
    # plans weigh against reservations in swap_for_savings_plans below in any case)
    # (not once the wall-clock safety net has fired: the stage would start with no time)
    gap_left = _distance(final.objective, relaxed.bound) > settings.gap
    if gap_left and budget.worth_a_stage(stage_3) and not budget.past(None, "stage 3"):
        # 3. tighten the bound: the full model with whole nodes, warm-started from stage 2's plan
        say(f"stage 3: gap {_distance(final.objective, relaxed.bound):.3%} > {settings.gap:.2%}; whole nodes")
        full_sets = replace(sets, integral_held=True)
        full = create_model(full_sets)
        # aim below the requested gap, so the plan meets the user's bar with room to spare rather than
        # stopping the moment HiGHS's own gap estimate touches it
        tighter = replace(settings, gap=settings.gap / 2)
        start = warm_start(full, second, chosen)
        attempt = _attempt(full, tighter, stage_3, start=start, what="stage 3")
        if not attempt.ok:  # cut by the safety net before it held even the warm start: stage 2 stands
            say("stage 3: stopped before it had a plan; stage 2's plan stands")
        else:
            stage3 = attempt
            bound = max(bound, stage3.bound)
            if stage3.objective < final.objective - 1e-6:
                plan_model = full
            used += stage3.seconds
    best = final if plan_model is second else stage3
    assert best is not None
    fixed = sets.fixed_usd  # commitments already held: a constant the models leave out
    floor = sets.bound_fixed_usd  # what bounds add: less what held savings plans can save at most
    # written against the full problem's sets (stage 2's keep only the chosen placements): the repair of
    # runs left unserved and their reasons need every option (issue 39.4)
    solution = replace(solution_from_model(plan_model), sets=sets)
    placed = (
        chosen
        if plan_model is second
        else [a for a, var in enumerate(full.place) if (var.varValue or 0) > 0.5]
    )
    searched = _local_search(sets, solution, placed, best.objective + fixed, budget, say)
    if searched is not None:  # cheaper as written than stage 2 (or 3): its plan, at its cost
        solution = searched.solution
        best = replace(best, objective=searched.objective - fixed)
        say(f"local search: plan ${searched.objective:,.0f}")
    if sets.new_plans:  # reservations that a plan for sale covers more cheaply, dropped for the plans
        if searched is not None:  # the local search's plan, dispatched already
            commitments, schedule, written = searched.commitments, searched.schedule, searched.objective
        else:
            scheduled = _scheduled(sets, solution, placed)
            commitments, schedule = scheduled.commitments, scheduled.schedule
            written = dispatch_scheduled(sets, scheduled, say).objective
        swapped = swap_for_savings_plans(sets, commitments, schedule, written, say)
        if swapped is not None:
            solution = swapped.solution
            best = replace(best, objective=swapped.objective - fixed)
    bound = min(bound, best.objective)
    termination = _termination(best.objective, bound, settings.gap)
    result = SolveResult(best.solver, termination, best.objective + fixed, bound + floor, used)
    # the model's objective, before whole replicas (realize.py) and the certified bound: not the plan's
    # total, which the summary prints (issue 42: two unnamed dollar figures read as a contradiction)
    objective = f"model objective before whole replicas: ${result.objective:,.0f}"
    if sets.new_plans and stage3 is None:
        say(f"{objective} (plans for sale: the certified bound follows)")
    else:
        say(f"{objective}, model gap {result.gap:.3%}")
    certified = None
    if settings.certify or sets.plans:  # with savings plans, only this bound holds for the plan as billed
        # what is left of the budget, at least its share (a bound stopped early is still valid)
        left = budget.certified()
        per_block = settings.bound_clusters_per_block or clusters_per_block(sets)
        # the plan's decisions as HiGHS's first incumbent: it prunes from the start (valid whatever it is)
        start = start_from(sets, solution.commits, solution.placements, solution.unserved_runs)
        certified = certified_bound(sets, per_block, time_limit=left, start=start)
        if not math.isfinite(certified.bound_usd):  # stopped before any solution: its LP bounds it too
            say("certified bound: the cluster MILP found no solution in its time; its LP relaxation instead")
            certified = certified_bound(sets, per_block, time_limit=left, relax=True)
        say(
            f"certified bound on the full hourly problem: ${certified.bound_usd:,.0f} "
            f"({certified.clusters} clusters, {certified.seconds:.1f} s)"
        )
    stages = [
        SolverStage(stage=1, what="node counts relaxed; commitments and training decided; lower bound"
                    + (" (savings plans for sale left to stage 3 and the purchase LP: a bound of the "
                       "model without them)" if sets.new_plans else ""),
                    status=relaxed.termination.value, objective_usd=relaxed.objective + fixed,
                    bound_usd=relaxed.bound + floor, seconds=round(relaxed.seconds, 3),
                    stopped_by=relaxed.stopped_by),
        SolverStage(stage=2, what="training fixed; whole nodes slot by slot, then commitments re-optimized",
                    status=final.termination.value, objective_usd=final.objective + fixed,
                    bound_usd=final.bound + floor, seconds=round(final.seconds, 3),
                    stopped_by=final.stopped_by),
    ]  # fmt: skip
    if stage3 is not None:
        stages.append(
            SolverStage(stage=3, what="whole nodes everywhere, warm-started from stage 2; tighter bound",
                        status=stage3.termination.value, objective_usd=stage3.objective + fixed,
                        bound_usd=stage3.bound + floor, seconds=round(stage3.seconds, 3),
                        stopped_by=stage3.stopped_by)
        )  # fmt: skip

    def write(solution: Solution, result: SolveResult) -> Plan:
        plan = write_plan(
            solution,
            result,
            baselines,
            budget,
            method="staged-milp",
            build_seconds=build_seconds,
            model_slots=len(sets.slots),
            stages=stages,
            requested_gap=settings.gap,
            say=say,
            lean=settings.lean,
        )
        plan.document.solver.stage2_model_periods = len(fixed_sets.slots)
        return plan

    plan = write(solution, result)
    if certified is None:
        return plan
    # bound_usd/gap become the full hourly problem's; the model's own stay too
    solver = plan.document.solver
    solver.model_bound_usd, solver.model_gap = solver.bound_usd, solver.gap
    paid = plan.total_usd + solver.penalty_usd  # what the plan as written costs
    exact_seconds = budget.exact_bound(certified.bound_usd, paid, settings.gap)
    # valid too: the plan keeps the larger of the two bounds
    exact = (
        None
        if exact_seconds is None
        else try_exact_bound(sets, per_block, exact_seconds, paid, say, held_usd=certified.bound_usd)
    )
    candidate, weighed = weigh_exact_plan(sets, exact, paid, len(stages) + 1, say)
    if candidate is not None and exact is not None and weighed is not None:
        # the exact-start model's plan, written as any plan; its model bound is that model's own
        own = SolveResult(
            best.solver,
            _termination(candidate.objective, exact.bound_usd, settings.gap),
            candidate.objective,
            min(exact.bound_usd, candidate.objective),
            budget.wall_seconds(),
        )
        rebuilt = write(candidate.solution, own)
        rebuilt_paid = rebuilt.total_usd + rebuilt.document.solver.penalty_usd
        if rebuilt_paid < paid - 1e-6:  # cheaper still once its replicas are whole
            plan, paid, solver = rebuilt, rebuilt_paid, rebuilt.document.solver
            solver.model_bound_usd, solver.model_gap = solver.bound_usd, solver.gap
        else:
            say(f"exact-start plan: ${rebuilt_paid:,.0f} as written, not cheaper; the plan stays")
            weighed = weighed.model_copy(update={"what": NOT_KEPT})
    if weighed is not None:
        solver.stages.append(weighed)
    _certify(solver, best_bound(certified, exact), paid, say)
    # the status speaks of the certified gap: optimal only when it is within what was asked
    within = solver.gap <= settings.gap + 1e-9
    solver.status = (Termination.OPTIMAL if within else Termination.FEASIBLE).value
    return plan


def _second_stage(
    first: PlanningModel, second: PlanningModel, settings: SolveSettings, budget: TimeBudget
) -> SolveResult:
    """Whole nodes with training fixed: first slot by slot at stage 1's commitments (fast, always
    feasible), then with commitments free again, warm-started from that plan, for what time allows."""
    # commitments and savings plans as stage 1 bought them
    decided = [(var, first.commit[key], True) for key, var in second.commit.items()]
    decided += [(var, first.plan_buy.get(key), False) for key, var in second.plan_buy.items()]
    bounds = [(var.lowBound, var.upBound) for var, _first, _whole in decided]
    for var, bought, whole in decided:  # a plan stage 1 did not model: none bought yet
        value = 0.0 if bought is None else bought.varValue or 0.0
        var.lowBound = var.upBound = round(value) if whole else value
    by_slot = solve_separable(second.problem, time_limit=budget.limit, gap=min(settings.gap, 1e-4))
    if not by_slot.ok:
        raise SolverError(f"stage 2 (whole nodes, stage 1's commitments) ended '{by_slot.termination.value}'")
    start = {var.name: var.varValue or 0.0 for var in second.problem.variables()}
    for (var, _first, _whole), (low, up) in zip(decided, bounds, strict=True):
        var.lowBound, var.upBound = low, up
    # counted work: stage 1's and this stage's so far
    half = budget.of_left(Share.STAGE_2_FREE, budget.left())
    work = None if half is None else budget.stage_floor(half)
    free = _attempt(second, settings, work, start=start, what="stage 2")
    # HiGHS did not keep the warm start, or the safety net cut it before it held one: restore it
    if not free.ok or free.objective > by_slot.objective + 1e-6:
        for var in second.problem.variables():
            var.varValue = start[var.name]
        best = by_slot
    else:
        best = free
    # else the slot blocks' (at stage 1's commitments), or the trivial 0 where they proved none
    bound = free.bound if free.ok else by_slot.bound
    bound = bound if math.isfinite(bound) else 0.0
    seconds = by_slot.seconds + free.seconds
    stopped_by = "time" if "time" in (by_slot.stopped_by, free.stopped_by) else free.stopped_by
    return SolveResult(best.solver, best.termination, best.objective, bound, seconds, stopped_by)


def _scheduled(sets: PlanningSets, solution: Solution, placed: list[int]) -> Scheduled:
    """``solution``'s commitments and the training placements ``placed`` (option indices) as the finishing
    path takes them."""
    placements = sorted((sets.options[a] for a in placed), key=lambda option: option.run)
    schedule = Schedule(placements, sorted(solution.unserved_runs), Occupancy.of(sets, placements))
    commitments = {c: int(n) for c, n in solution.commits.items() if not sets.columns[c].existing}
    return Scheduled(commitments, sets.committed(commitments), schedule)


def _local_search(
    sets: PlanningSets,
    solution: Solution,
    placed: list[int],
    incumbent_usd: float,
    budget: TimeBudget,
    say: Callable[[str], None],
) -> Dispatched | None:
    """The local search of ``local_search.py`` from stage 2's (or 3's) plan, in what is left of the
    stages' share of the time limit (the certified bound keeps its own): its plan if cheaper than both
    the model's cost and that plan dispatched period by period (the same measure for both), else None."""
    # checked before the incumbent's dispatch too: a year of periods dispatched for nothing otherwise
    if not budget.searchable(budget.local_search(budget.until(Share.STAGES), 0.0, 0.0, say)):
        return None
    scheduled = _scheduled(sets, solution, placed)
    incumbent = dispatch_scheduled(sets, scheduled, say)
    bar = min(incumbent_usd, incumbent.objective)
    left = budget.until(Share.STAGES)
    return improve_plan(sets, scheduled, bar, incumbent.dispatch.work, left, budget, say)


def _certify(
    solver: SolverReport, certified: BoundResult, objective: float, say: Callable[[str], None]
) -> None:
    """Record the bound on the full hourly problem (every hourly start, whole nodes) in the plan; a bound
    that could not be computed leaves the model's in place. The gap uses it capped at the plan's cost;
    the raw one is kept, and flagged if above it (``finish.record_raw_bound``)."""
    if not math.isfinite(certified.bound_usd):
        return
    record_raw_bound(solver, certified.bound_usd, objective, say)
    bound = min(certified.bound_usd, objective)
    solver.bound_usd = solver.certified_bound_usd = bound
    solver.gap = solver.certified_gap = _distance(objective, bound)
    solver.bound_method = solver.certified_bound_method = certified.method
    solver.certified_bound_clusters = certified.clusters
    solver.certified_bound_seconds = round(certified.seconds, 3)


def _distance(objective: float, bound: float) -> float:
    return max(0.0, objective - bound) / max(abs(objective), 1e-9)


def warm_start(full: PlanningModel, fixed: PlanningModel, chosen: list[int]) -> dict[str, float]:
    """Stage 2's solution written in the variables of the full model (slot by slot, via periods)."""
    values: dict[str, float] = {}
    to_fixed_slot = {
        s: int(fixed.sets.slot_of_period[slot.periods[0]]) for s, slot in enumerate(full.sets.slots)
    }
    for key, var in full.commit.items():
        values[var.name] = fixed.commit[key].varValue or 0.0
    for (tier, i, o, s), var in full.serve.items():
        twin = fixed.serve.get((tier, i, o, to_fixed_slot[s]))
        values[var.name] = (twin.varValue or 0.0) if twin is not None else 0.0
    for (tier, o, s), var in full.held.items():
        twin = fixed.held.get((tier, o, to_fixed_slot[s]))
        values[var.name] = (twin.varValue or 0.0) if twin is not None else 0.0
    for key, var in full.plan_buy.items():  # none where the fixed model left the plans for sale out
        twin = fixed.plan_buy.get(key)
        values[var.name] = (twin.varValue or 0.0) if twin is not None else 0.0
    for (g, o, s), var in full.plan_cover.items():
        twin = fixed.plan_cover.get((g, o, to_fixed_slot[s]))
        values[var.name] = (twin.varValue or 0.0) if twin is not None else 0.0
    for (i, s), var in full.unserved_replicas.items():
        twin = fixed.unserved_replicas.get((i, to_fixed_slot[s]))
        values[var.name] = (twin.varValue or 0.0) if twin is not None else 0.0
    for a in chosen:
        values[full.place[a].name] = 1.0
    for r, var in full.unserved_run.items():
        values[var.name] = fixed.unserved_run[r].varValue or 0.0
    for pair, var in full.guarantee.items():
        values[var.name] = fixed.guarantee[pair].varValue or 0.0
    for team, var in full.guarantee_short.items():
        values[var.name] = fixed.guarantee_short[team].varValue or 0.0
    return values


def _solve(
    model: PlanningModel,
    settings: SolveSettings,
    time_limit: float | None,
    start: dict[str, float] | None = None,
    what: str = "a MILP",
) -> SolveResult:
    """``model`` solved within ``time_limit`` nominal seconds of counted work (budget.py); a SolverError
    without a feasible plan."""
    result = _attempt(model, settings, time_limit, start, what)
    if not result.ok:
        raise SolverError(
            f"{result.solver} stopped with status '{result.termination.value}' after {result.seconds:.1f} s "
            "without a feasible plan"
            + (" (try a longer --time-limit)" if result.termination == Termination.NO_SOLUTION else "")
        )
    return result


def _attempt(
    model: PlanningModel,
    settings: SolveSettings,
    time_limit: float | None,
    start: dict[str, float] | None = None,
    what: str = "a MILP",
) -> SolveResult:
    """:func:`_solve` for a stage that may end without a plan (stage 3: stage 2's stands)."""
    return solve(
        model.problem,
        solver=settings.solver,
        time_limit=time_limit,
        gap=settings.gap,
        threads=settings.threads,
        verbose=settings.verbose,
        start=start,
        what=what,
    )


def _termination(objective: float, bound: float, gap: float) -> Termination:
    """Optimal when ``objective`` is within the requested gap of ``bound``."""
    return Termination.OPTIMAL if _distance(objective, bound) <= gap + 1e-9 else Termination.TIME_LIMIT
