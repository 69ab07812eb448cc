"""``optimize``: build the sets, pick the method (staged or hourly), return the plan.

The one entry point of planning (re-exported as ``planner.planning.optimize.optimize``). It sits on top: the
methods (``staged.py``, ``hourly.py``), the baselines and the plan building are imported from here,
never the reverse.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from models.catalog import Catalog
from models.errors import SolverError
from models.plan import Plan
from models.scenario import Scenario
from planner.planning.baselines import compute_baselines
from planner.planning.optimize.bound import clusters_per_block
from planner.planning.optimize.hourly import plan_hourly
from planner.planning.optimize.settings import METHODS, SolveSettings
from planner.planning.optimize.solution import build_plan
from planner.planning.optimize.staged import plan_staged
from planner.planning.problem.checks import check_inputs
from planner.planning.problem.sets import ModelOptions, PlanningSets, build_sets

__all__ = ["HOURLY_ABOVE", "optimize"]

# ``auto`` takes the hourly method above this many (model slots x services): the staged MILP's size
# grows with that product, the hourly method's cluster model does not
HOURLY_ABOVE = 5_000


def optimize(
    scenario: Scenario,
    catalog: Catalog,
    base_dir: Path | None = None,
    settings: SolveSettings | None = None,
    progress: Callable[[str], None] | None = None,
) -> Plan:
    """Plan ``scenario`` at minimum cost; raise SolverError if no feasible plan comes back.

    ``settings.method`` picks the method: ``hourly`` (hourly.py) for big scenarios, ``staged``
    (staged.py) otherwise; ``auto`` decides by size (``HOURLY_ABOVE``). Either way ``bound_usd``/``gap``
    in plan.json are the certified bound on the full hourly problem (bound.py) and the plan's gap
    against it.
    """
    settings = settings or SolveSettings()
    say = progress or (lambda _message: None)
    began = time.perf_counter()
    warnings = check_inputs(scenario, catalog)  # what validate checks; InputError before any solve
    sets = build_sets(
        scenario,
        catalog,
        base_dir,
        ModelOptions(block_hours=settings.block_hours, start_grid_hours=settings.start_grid_hours),
    )
    say(
        f"{len(sets.offerings)} offerings, {len(sets.services)} services, {len(sets.runs)} training runs, "
        f"{len(sets.slots)} model slots, {len(sets.options)} placement options"
    )
    if settings.method not in METHODS:
        raise SolverError(f"unknown method {settings.method!r}; choose one of {', '.join(METHODS)}")
    method = settings.method
    if method == "auto":
        method = "hourly" if len(sets.slots) * max(1, len(sets.services)) > HOURLY_ABOVE else "staged"
    if method == "hourly":
        plan = _optimize_hourly(sets, settings, say, time.perf_counter() - began)
    else:
        plan = plan_staged(sets, settings, say, began)
    plan.document.warnings = warnings
    return plan


def _optimize_hourly(
    sets: PlanningSets, settings: SolveSettings, say: Callable[[str], None], build_seconds: float
) -> Plan:
    """The hourly method (hourly.py): cluster model -> training placed -> inference per period."""
    if settings.solver != "highs":
        say("the hourly method dispatches periods with HiGHS; --solver applies to the staged method only")
    done = plan_hourly(
        sets,
        time_limit=settings.time_limit,
        gap=settings.gap,
        per_block=settings.bound_clusters_per_block or clusters_per_block(sets),
        relax=settings.cluster_relax,
        progress=say,
    )
    say(f"plan: ${done.result.objective:,.0f}, certified gap {done.result.gap:.3%}")
    plan = build_plan(
        done.solution,
        done.result,
        compute_baselines(sets),
        method="hourly-decomposition",
        elapsed={"build": build_seconds},
        model_slots=done.clusters,
        realize_seconds=settings.realize_budget,
        progress=say,
    )
    solver = plan.document.solver
    solver.bound_method = done.bound_method
    solver.certified_bound_usd, solver.certified_gap = solver.bound_usd, solver.gap
    solver.certified_bound_method = done.bound_method
    solver.certified_bound_clusters = done.clusters
    solver.stages = done.stages
    solver.requested_gap = settings.gap
    return plan
