"""The hourly method for big scenarios: decide on clusters, then plan every period exactly.

1. *Decide.* The cluster model of ``bound.py`` (each block's periods grouped by demand, training at
   block resolution) chooses the commitments and each run's offering, tier and approximate start.
   Its proven bound is the certified lower bound on the full hourly problem (Jensen, see bound.py),
   so the same solve gives the decisions and the certificate. Its LP relaxation first (one LP, a
   valid if weaker bound, decisions rounded and placed), then the MILP warm-started from those
   decisions, for a share of the time: better decisions and a tighter bound.
2. *Place training* period by period (``schedule.schedule_training``): nothing above ``max_nodes``
   or a team's burst limit, nearest to the cluster model's start; non-spot gangs use idle commitments
   first and on-demand nodes beyond them (the billing rule).
3. *Refine*: training moved onto idle commitments (``schedule.improve_schedule``) and commitments
   re-tuned on the exact per-period cost (``commitments.tune_commitments``).
4. *Dispatch inference* in every period in whole nodes (``dispatch.dispatch``, through
   ``finish.dispatch_scheduled``): exact per period for these commitments and placements, so the plan is
   feasible hour by hour by construction.
The plan's cost is measured on what is written (allocations + commitments + penalties), and its gap
against the certified bound is a true optimality certificate for the full hourly problem.
Every step reads the same ``PlanningSets``, so the rules that ``build.py`` gets by construction (rules
9-16 of its docstring) hold in the hourly plan too; bound.py, dispatch.py and schedule.py say how.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from models.errors import SolverError
from models.plan import Baselines, Plan, SolverStage
from models.tiers import Capacity
from planner.planning.optimize.bound import (
    BoundResult,
    ClusterDecisions,
    certified_bound,
    clusters_per_block,
    finer_bound,
    start_from,
)
from planner.planning.optimize.bound_exact import best_bound, try_exact_bound
from planner.planning.optimize.budget import SECONDS, Share, TimeBudget
from planner.planning.optimize.commitments import tune_commitments
from planner.planning.optimize.dispatch import pool_prices, team_index
from planner.planning.optimize.exact_plan import weigh_exact_plan
from planner.planning.optimize.finish import (
    Dispatched,
    Scheduled,
    dispatch_scheduled,
    improve_plan,
    record_raw_bound,
    swap_for_savings_plans,
    write_plan,
)
from planner.planning.optimize.schedule import Schedule, improve_schedule, schedule_training
from planner.planning.optimize.settings import SolveSettings
from planner.planning.optimize.solution import Solution
from planner.planning.problem.sets import PlanningSets
from planner.solvers.ahead import Beside
from planner.solvers.solve import SolveResult, Termination


@dataclass
class HourlyResult:
    solution: Solution
    result: SolveResult  # objective = the plan's cost incl. penalties; bound = the certified bound
    clusters: int
    stages: list[SolverStage]
    bound_method: str
    raw_bound: float  # the certified bound before it was capped at the plan's cost
    bound_clusters: int  # the clusters of the model whose bound it is


#: The finer bound is the cluster MILP (``bound.finer_bound(integral=True)``) where the coarse MILP's bound
#: beat its LP's by more than this (relative): there whole commitments and run choices are what the LP
#: misses, and more clusters alone do not recover it. spot-price-shock: coarse LP $1,631,529, MILP
#: $1,662,804 (+1.9 %); at 16 per block the LP is $1,639,938, the MILP at 12 $1,667,397. Elsewhere the two
#: differ by 0.1-0.3 % and the finer LP is the quicker bound. (Started from the plan, that MILP took 30 s of
#: the clock instead of 16: it is not.)
INTEGRAL_GAIN = 0.005


def plan_hourly(
    sets: PlanningSets,
    settings: SolveSettings,
    budget: TimeBudget,
    say: Callable[[str], None],
    baselines: Baselines,
) -> Plan:
    """Plan ``sets`` by the hourly method (module docstring): cluster model -> training placed ->
    inference per period, then the plan written by the path both methods share, with ``baselines``
    (``compute_baselines(sets)``) as its peers."""
    if settings.solver != "highs":
        say("the hourly method dispatches periods with HiGHS; --solver applies to the staged method only")
    build_seconds = budget.wall_seconds()  # measured, for the report
    done = _decide_and_dispatch(
        sets,
        budget,
        gap=settings.gap,
        per_block=settings.bound_clusters_per_block or clusters_per_block(sets),
        relax=settings.cluster_relax,
        say=say,
    )
    say(f"plan before whole replicas: ${done.result.objective:,.0f}, certified gap {done.result.gap:.3%}")
    plan = write_plan(
        done.solution,
        done.result,
        baselines,
        budget,
        method="hourly-decomposition",
        build_seconds=build_seconds,
        model_slots=done.clusters,
        stages=done.stages,
        requested_gap=settings.gap,
        say=say,
        lean=settings.lean,
    )
    solver = plan.document.solver
    solver.bound_method = done.bound_method
    solver.certified_bound_usd, solver.certified_gap = solver.bound_usd, solver.gap
    record_raw_bound(solver, done.raw_bound, plan.total_usd + solver.penalty_usd, say)
    solver.certified_bound_method = done.bound_method
    solver.certified_bound_clusters = done.bound_clusters
    return plan


def _decide_and_dispatch(
    sets: PlanningSets,
    budget: TimeBudget,
    *,
    gap: float,
    per_block: int | None,
    relax: bool | None,
    say: Callable[[str], None],
) -> HourlyResult:
    """Steps 1-4 of the module docstring for every period of ``sets``; ``relax`` True stops after the
    LP stage."""
    # the local search stops short of the time limit by what the whole replicas take after it
    reserve = budget.of_limit(Share.REALIZE) or 0.0

    say(f"cluster model, LP relaxation ({per_block or 'every slot its own'} cluster(s) per block)")
    # the plan's decisions come from this LP: it gets at least its floor, even past --time-limit (a
    # plan a little late beats no plan)
    remaining = budget.left()
    lp = certified_bound(sets, per_block, time_limit=budget.cluster_lp(), gap=gap / 2, relax=True)
    if remaining is not None and lp.work > remaining:
        say(
            f"the cluster LP took {lp.work:.0f} s of counted work, past the {budget.limit:g} s time limit: "
            "without it there is no plan"
        )
    if lp.decisions is None:
        raise SolverError(
            f"the cluster model's LP stopped with status '{lp.solve.termination.value}' after "
            f"{lp.seconds:.1f} s (try a longer --time-limit)"
        )
    say(f"LP relaxation: bound ${lp.bound_usd:,.0f} ({lp.clusters} clusters, {lp.seconds:.1f} s)")
    bound, method = lp.bound_usd, lp.method
    first = _schedule(sets, lp.decisions, say)
    best: Dispatched | None = None
    milp_stage: SolverStage | None = None
    milp: BoundResult | None = None
    if relax is not True and budget.runs_cluster_milp():
        # the MILP, warm-started from the LP's rounded decisions, its time capped relative to the LP's
        start = start_from(sets, first.commitments, first.schedule.placements, first.schedule.unserved_runs)
        limit = budget.cluster_milp(lp.work)
        say(f"cluster model, MILP warm-started from the LP's rounded decisions ({limit or 0:.0f} s)")
        milp = certified_bound(sets, per_block, time_limit=limit, gap=gap / 2, start=start)
        if milp.solve.ok and milp.bound_usd > bound:
            bound, method = milp.bound_usd, milp.method
    # the cluster model again with finer clusters: less averaging, a tighter bound (bound.finer_bound), in
    # its share; its MILP where whole commitments made the coarse bound (INTEGRAL_GAIN), else its LP. It
    # needs nothing the plan's stages below decide, so it runs beside them on another core, taken where it
    # is wanted (after them, as before) or dropped (``solvers.ahead.Beside``: the same plan either way)
    integral = milp is not None and bound > lp.bound_usd * (1 + INTEGRAL_GAIN)
    coarse_work = milp.work if integral and milp is not None else lp.work
    finer = None if relax is True else _finer_beside(sets, per_block, budget, coarse_work, integral)
    if milp is not None:
        if milp.decisions is not None:
            best = _finish(sets, _schedule(sets, milp.decisions, say), budget, say, reserve)
            say(f"plan from the MILP's decisions: ${best.objective:,.0f}; bound ${milp.bound_usd:,.0f}")
        milp_stage = _stage(2, "cluster model, MILP warm-started from stage 1: decisions, bound", milp, best)
    lp_what = "cluster model, LP relaxation: decisions (rounded), bound"
    if best is None:  # no MILP stage, or it found nothing: the LP's decisions make the plan
        best = _finish(sets, first, budget, say, reserve)
        stages = [_stage(1, lp_what, lp, best)]
    else:
        stages = [_stage(1, lp_what, lp, None)]
    if milp_stage is not None:
        stages.append(milp_stage)
    objective = best.objective
    bound_clusters = lp.clusters
    if finer is not None and objective - bound > gap * max(objective, 1e-9):
        fine, said = finer.take()
        for line in said:
            say(line)
        if fine is not None and fine.bound_usd > bound:
            bound, method, bound_clusters = fine.bound_usd, fine.method, fine.clusters
    elif finer is not None:
        finer.drop()
    # the exact-start bound (bound_exact.py) against this plan, in what is left of the time limit; not
    # where whole commitments made the bound (``integral``): its LP has them fractional, and its integer
    # stage does not finish in its share (spot-price-shock: LP $1,651,486 under the finer MILP's
    # $1,667,397, 9-11 s of the clock for nothing)
    exact_seconds = None if integral else budget.exact_bound(bound, objective, gap)
    exact = (
        None
        if exact_seconds is None
        else try_exact_bound(sets, per_block, exact_seconds, objective, say, held_usd=bound)
    )
    if exact is not None and exact.bound_usd > bound:
        chosen = best_bound(BoundResult(bound, bound_clusters, 0.0, lp.solve, method), exact)
        bound, method, bound_clusters = chosen.bound_usd, chosen.method, chosen.clusters
    candidate, weighed = weigh_exact_plan(sets, exact, objective, len(stages) + 1, say)
    if candidate is not None:
        best, objective = candidate, candidate.objective
    if weighed is not None:
        stages.append(weighed)
    raw_bound = bound  # kept as computed: above the plan it is a bug signal (finish.record_raw_bound)
    bound = min(bound, objective)
    distance = max(0.0, objective - bound) / max(objective, 1e-9)
    termination = Termination.OPTIMAL if distance <= gap + 1e-9 else Termination.FEASIBLE
    result = SolveResult("HiGHS", termination, objective, bound, budget.wall_seconds())
    return HourlyResult(best.solution, result, lp.clusters, stages, method, raw_bound, bound_clusters)


def _finer_beside(
    sets: PlanningSets, per_block: int | None, budget: TimeBudget, coarse_work: float, integral: bool
) -> Beside[tuple[BoundResult | None, list[str]]]:
    """``bound.finer_bound`` started beside the plan's stages, its progress lines kept to be said when taken
    (in the order one thread would say them)."""
    limit = budget.of_limit(Share.FINER_BOUND)

    def solve() -> tuple[BoundResult | None, list[str]]:
        said: list[str] = []
        return finer_bound(sets, per_block, limit, said.append, coarse_work, integral), said

    return Beside(solve)


def _stage(number: int, what: str, cluster: BoundResult, realized: Dispatched | None) -> SolverStage:
    """What one cluster-model solve decided and, where its decisions made a plan, what that plan did."""
    stage = SolverStage(
        stage=number,
        what=what,
        status=cluster.solve.termination.value,
        cluster_objective_usd=cluster.solve.objective,
        bound_usd=cluster.bound_usd,
        seconds=round(cluster.seconds, 3),
        stopped_by=cluster.solve.stopped_by,
    )
    if realized is None:
        return stage
    return stage.model_copy(
        update={
            "objective_usd": realized.objective,
            "runs_moved": realized.schedule.moved,
            "nodes_committed_for_gangs": sum(realized.schedule.added.values()),
            "distinct_periods": realized.dispatch.distinct_periods,
            "repaired_periods": realized.dispatch.repaired_periods,
            "dispatch_lp_usd": realized.dispatch.lp_cost_usd,
            "dispatch_seconds": round(realized.dispatch.seconds, 3),
        }
    )


def _schedule(sets: PlanningSets, decisions: ClusterDecisions, say: Callable[[str], None]) -> Scheduled:
    """Training placed period by period for the cluster model's decisions."""
    commitments = dict(decisions.commitments)
    committed = sets.committed(commitments)
    preferred = _within_spot_share(sets, dict(decisions.runs))
    base = committed.copy()
    schedule = schedule_training(sets, committed, preferred)  # may commit more nodes for gangs
    if _spot_share_broken(sets, schedule):  # a run left unserved shrank the total: place again
        kept = {o.run: (o.offering, o.tier, o.start) for o in schedule.placements}
        preferred = _within_spot_share(sets, kept)
        committed[:] = base
        schedule = schedule_training(sets, committed, preferred)
        while _spot_share_broken(sets, schedule):  # last resort: leave the biggest spot run unserved
            spot = max(
                (option for option in schedule.placements if option.tier == Capacity.SPOT),
                key=lambda option: sets.runs[option.run].gpus * sets.runs[option.run].job.hours,
            )
            schedule.occupancy.remove(sets, spot, team_index(sets)[sets.runs[spot.run].job.team])
            schedule.placements.remove(spot)
            schedule.unserved_runs = sorted([*schedule.unserved_runs, spot.run])
    for key, nodes in schedule.added.items():
        commitments[key] = commitments.get(key, 0) + nodes
    say(
        f"training placed period by period: {len(schedule.placements)} runs, {schedule.moved} moved from the "
        f"cluster model's choice, {len(schedule.unserved_runs)} unserved, "
        f"{sum(schedule.added.values())} nodes committed for gangs"
    )
    return Scheduled(commitments, committed, schedule)


def _finish(
    sets: PlanningSets, scheduled: Scheduled, budget: TimeBudget, say: Callable[[str], None], reserve: float
) -> Dispatched:
    """Refined, dispatched, then improved by local search where that makes a cheaper written plan."""
    refined = _refine(sets, scheduled, budget, say, reserve)
    best = dispatch_scheduled(sets, refined, say)
    better = improve_plan(
        sets, refined, best.objective, best.dispatch.work, budget.left(), budget, say, reserve
    )
    best = best if better is None else better
    if sets.new_plans:  # reservations that a plan for sale covers more cheaply, dropped for the plans
        swapped = swap_for_savings_plans(sets, best.commitments, best.schedule, best.objective, say)
        best = best if swapped is None else swapped
    return best


def _refine(
    sets: PlanningSets,
    scheduled: Scheduled,
    budget: TimeBudget,
    say: Callable[[str], None],
    reserve: float,
) -> Scheduled:
    """Training moved where the pool's dual prices say it costs least, then commitments re-tuned for
    it, then training moved again for the new commitments (moves first: on the large benchmark they
    saved 40x more per second than tuning); each from what is left of the limit less ``reserve``, the
    whole replicas' share after them."""
    moved = _move_training(sets, scheduled, budget, say, reserve)
    tuned = _tune(sets, moved, budget, say, reserve)
    if tuned.commitments == moved.commitments:
        return tuned
    return _move_training(sets, tuned, budget, say, reserve)


def _move_training(
    sets: PlanningSets,
    scheduled: Scheduled,
    budget: TimeBudget,
    say: Callable[[str], None],
    reserve: float,
    rounds: int = 3,
) -> Scheduled:
    """Rounds of ``schedule.improve_schedule`` (each move checked on the exact per-period LPs), with the
    pool's prices recomputed between rounds."""
    best = scheduled
    prices = pool_prices(sets, best.committed, best.schedule.occupancy)
    for _ in range(rounds):
        remaining = _left(budget, reserve)
        if remaining is not None and remaining < SECONDS["training moves when left"]:
            break
        seconds = budget.of_left(Share.MOVE_TRAINING, remaining)
        deadline = budget.deadline(seconds)  # counted work, not the clock
        schedule, saving = improve_schedule(sets, best.committed, best.schedule, prices, deadline)
        if saving <= 1e-6:
            break
        say(f"training moved where the pool is idle: -${saving:,.0f} (inference LP + training)")
        best = Scheduled(best.commitments, best.committed, schedule)
        prices = pool_prices(sets, best.committed, best.schedule.occupancy)
    return best


def _tune(
    sets: PlanningSets,
    scheduled: Scheduled,
    budget: TimeBudget,
    say: Callable[[str], None],
    reserve: float,
) -> Scheduled:
    """Commitments re-tuned on every period's exact cost (commitments.py), within their share of the
    time left."""
    seconds = budget.of_left(Share.TUNE_COMMITMENTS, _left(budget, reserve))
    if seconds is not None and seconds < SECONDS["tuning at least"]:
        return scheduled
    tuned = tune_commitments(sets, scheduled.commitments, scheduled.schedule.occupancy, seconds, say)
    say(
        f"commitments re-tuned on every period: ${tuned.cost_before:,.0f} -> ${tuned.cost_after:,.0f} "
        f"(commitments + inference LP, whole-node rows, {tuned.iterations} iterations, {tuned.seconds:.1f} s)"
    )
    return Scheduled(tuned.commitments, sets.committed(tuned.commitments), scheduled.schedule)


def _spot_share_broken(sets: PlanningSets, schedule: Schedule) -> bool:
    share = sets.scenario.purchase.max_spot_share
    hours = {
        option.run: sets.runs[option.run].gpus * sets.runs[option.run].job.hours
        for option in schedule.placements
    }
    spot = sum(hours[option.run] for option in schedule.placements if option.tier == Capacity.SPOT)
    return spot > share * sum(hours.values()) + 1e-6


def _within_spot_share(
    sets: PlanningSets, runs: dict[int, tuple[int, Capacity, int]]
) -> dict[int, tuple[int, Capacity, int]]:
    """Rounded LP choices may put more than ``max_spot_share`` on spot: move the spot runs that save
    least per GPU-hour to their cheapest other tier until the share holds."""
    share = sets.scenario.purchase.max_spot_share
    if share >= 1.0:
        return runs
    cheapest: dict[tuple[int, bool], tuple[float, int, Capacity]] = {}
    for option in sets.options:  # off spot at the on-demand rate: the dearest it can cost
        key = (option.run, option.tier == Capacity.SPOT)
        cost = option.cost_usd if option.tier == Capacity.SPOT else option.list_usd
        if key not in cheapest or cost < cheapest[key][0]:
            cheapest[key] = (cost, option.offering, option.tier)
    gpu_hours = {r: run.gpus * run.job.hours for r, run in enumerate(sets.runs)}
    total = sum(gpu_hours[r] for r in runs)
    on_spot = [r for r, (_o, tier, _s) in runs.items() if tier == Capacity.SPOT]
    spot_hours = sum(gpu_hours[r] for r in on_spot)

    def saving(r: int) -> float:
        other = cheapest.get((r, False))
        spot = cheapest.get((r, True))
        return (other[0] - spot[0]) / gpu_hours[r] if other and spot else float("inf")

    for r in sorted(on_spot, key=saving):
        if spot_hours <= share * total + 1e-9:
            break
        other = cheapest.get((r, False))
        if other is None:
            continue
        runs[r] = (other[1], other[2], runs[r][2])
        spot_hours -= gpu_hours[r]
    return runs


def _left(budget: TimeBudget, reserve: float) -> float | None:
    """What is left of the limit less ``reserve`` (None: no limit)."""
    left = budget.left()
    return None if left is None else left - reserve
