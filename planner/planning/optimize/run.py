"""``optimize``: build the sets, pick the method (staged or hourly), return the plan.

The one entry point of planning (re-exported as ``planner.planning.optimize.optimize``). It sits on top:
it makes the one :class:`~planner.planning.optimize.budget.TimeBudget` of the run from ``--time-limit``
(counted work, never the clock) and the run's wall-clock safety net (``planner/solvers/work.py``), and hands
them to the method it picks; the two methods (``staged.py``, ``hourly.py``) are peers that never
import each other and end on the same finishing path (``finish.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from models.catalog import Catalog
from models.errors import SolverError
from models.plan import Baselines, Plan
from models.scenario import Scenario
from models.wording import plural
from planner.planning.baselines import compute_baselines
from planner.planning.optimize.budget import TimeBudget, safety_net_for
from planner.planning.optimize.finish import finished
from planner.planning.optimize.hourly import plan_hourly
from planner.planning.optimize.seed import check_seed_horizon, seeded_plan
from planner.planning.optimize.settings import METHODS, SolveSettings
from planner.planning.optimize.staged import plan_staged
from planner.planning.problem.checks import check_inputs
from planner.planning.problem.sets import PlanningSets, build_sets
from planner.solvers.solve import Termination
from planner.solvers.work import guarded

__all__ = ["HOURLY_ABOVE", "HOURLY_OPTIONS_ABOVE", "hourly_by_size", "optimize", "sets_summary"]

# ``auto`` takes the hourly method above this many (model slots x services): the staged MILP's size
# grows with that product, the hourly method's cluster model does not
HOURLY_ABOVE = 5_000
# ... and above this many training placement options: the staged MILP carries every option's starts and
# spends most of its time there, where the hourly method's cluster MILP decides as well in a fraction of
# it. Measured at the defaults (2026-12-07; staged -> hourly): mixed-fleet (253 options) $1,866,256 ->
# $1,861,282 in 124 -> 27 CPU s (certified gap 2.82 -> 2.78 %); h100-shortage (449) $2,052,524 ->
# $2,023,878, 133 -> 38 s, 3.52 -> 2.15 %; training-heavy-lab (314) $3,553,215 -> $3,525,549 (proven
# optimal), 43-69 -> 27 s. colocation-decision (142, owned servers) stays staged: hourly $2,305,821,
# 7.1 %, against the staged $2,293,306, 0.79 %.
HOURLY_OPTIONS_ABOVE = 200


def sets_summary(sets: PlanningSets) -> str:
    """The size of what is planned, the first progress line: counts a user can check against the scenario."""
    return ", ".join(
        [
            plural(len(sets.offerings), "offering"),
            plural(len(sets.services), "service"),
            plural(len(sets.runs), "training run"),
            plural(len(sets.slots), "model slot"),
            plural(len(sets.options), "placement option"),
        ]
    )


def optimize(
    scenario: Scenario,
    catalog: Catalog,
    base_dir: Path | None = None,
    settings: SolveSettings | None = None,
    progress: Callable[[str], None] | None = None,
    seed: Plan | None = None,
) -> Plan:
    """Plan ``scenario`` at minimum cost; raise SolverError if no feasible plan comes back.

    ``seed``: a plan to start from (``gpuplan plan --start-from DIR``; seed.py): the plan returned is never
    dearer than the seed's decisions on this scenario, when they are all for sale here (a plan of a
    scenario with fewer choices: a coarser purchase schedule, fewer regions or terms).

    ``settings.method`` picks the method: ``hourly`` (hourly.py) for big scenarios, ``staged``
    (staged.py) otherwise; ``auto`` decides by size (``hourly_by_size``). Either way ``bound_usd``/``gap``
    in plan.json are the certified bound on the full hourly problem (bound.py) and the plan's gap
    against it.
    """
    settings = settings or SolveSettings()
    say = progress or (lambda _message: None)
    net = safety_net_for(settings.time_limit)
    budget = TimeBudget(settings.time_limit, settings.realize_seconds, net=net)
    with guarded(net):
        plan = _optimize(scenario, catalog, base_dir, settings, budget, say, seed)
    if net.cuts:  # the net cut a stage: the plan may differ on another run; never called optimal
        solver = plan.document.solver
        for what, seconds in net.cuts.items():
            solver.notes.append(
                f"{what} stopped by the wall-clock limit after {seconds:.0f} s (the safety net at "
                f"{net.seconds:.0f} s); a re-run may give another plan"
            )
        if solver.status == Termination.OPTIMAL.value:
            solver.status = Termination.FEASIBLE.value
        say(solver.notes[-1])
    return plan


def _optimize(
    scenario: Scenario,
    catalog: Catalog,
    base_dir: Path | None,
    settings: SolveSettings,
    budget: TimeBudget,
    say: Callable[[str], None],
    seed: Plan | None = None,
) -> Plan:
    warnings = check_inputs(scenario, catalog)  # what validate checks; InputError before any solve
    sets = build_sets(scenario, catalog, base_dir, settings.model_options())
    say(sets_summary(sets))
    if seed is not None:  # before any solve: a seed of another horizon is bad input, not a late surprise
        check_seed_horizon(sets, seed, "--start-from")
    if settings.method not in METHODS:
        raise SolverError(f"unknown method {settings.method!r}; choose one of {', '.join(METHODS)}")
    method = settings.method
    if method == "auto":
        method = "hourly" if hourly_by_size(sets) else "staged"
    plan_by = plan_hourly if method == "hourly" else plan_staged
    baselines = compute_baselines(sets)  # counted work: none (no HiGHS run), so the plan is the same
    say(first_plan(baselines, settings.time_limit))
    plan = plan_by(sets, settings, budget, say, baselines)
    if seed is not None:
        plan = seeded_plan(sets, seed, plan, budget, say)
    return finished(plan, catalog, warnings)  # never optimal with a run left unplaced (issue 39.4)


def hourly_by_size(sets: PlanningSets) -> bool:
    """``auto``'s choice: the hourly method where the staged MILP would be big (``HOURLY_ABOVE``,
    ``HOURLY_OPTIONS_ABOVE``)."""
    size = len(sets.slots) * max(1, len(sets.services))
    return size > HOURLY_ABOVE or len(sets.options) > HOURLY_OPTIONS_ABOVE


def first_plan(baselines: Baselines, time_limit: float | None) -> str:
    """The line said before the search: the cheapest peer a user could run, priced in under a second, as
    the plan to beat (the search's plan is never dearer than it: tests/e2e), so a new user sees a first
    plan and its cost at once (issue 39 point 6) while the search goes on."""
    best = baselines.peer(baselines.best_peer)
    search = "searching for a cheaper one"
    if time_limit is not None:
        search += f" within {time_limit:g} s of counted work"
    if best is None:
        return f"first plan: all on demand, ${baselines.all_on_demand_usd:,.0f}; {search}"
    nodes = sum(c.nodes for c in best.commitments)
    bought = [f"{plural(nodes, 'node')} committed"] if nodes else []
    bought += [plural(len(best.savings_plans), "savings plan")] if best.savings_plans else []
    bought = bought or ["no commitments"]
    return (
        f"first plan: ${best.total_usd:,.0f}, the best peer a user could run ({best.name}: each service "
        f"on one offering, {' and '.join(bought)}, the rest on demand); {search}"
    )
