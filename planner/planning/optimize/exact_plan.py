"""A plan candidate from the exact-start bound's integer solution (``bound_exact.py``).

Why: that integer model places every run at an exact start and buys whole commitments against
cluster-averaged inference; on ``bench/gen.py month`` its optimum is within 1 % of the plans the two
methods find, and below them. Its solution is read back as commitments and placements, inference is
dispatched period by period in whole nodes as for any plan (``finish.dispatch_scheduled``), and
the contract's rules are checked on the result (``local_search.violations``): averaging inference
over a cluster may hide a period where a burst or capacity limit does not hold. The candidate
replaces the plan only if it keeps every rule and costs less as written.
"""

from __future__ import annotations

from collections.abc import Callable

from models.plan import SolverStage
from planner.planning.optimize.bound_exact import ExactBound, ExactDecisions
from planner.planning.optimize.dispatch import Occupancy
from planner.planning.optimize.finish import Dispatched, Scheduled, dispatch_scheduled
from planner.planning.optimize.local_search import violations
from planner.planning.optimize.schedule import Schedule, at, combos
from planner.planning.problem.sets import PlanningSets

__all__ = ["NOT_KEPT", "exact_candidate", "scheduled_from_exact", "weigh_exact_plan"]

_WHAT = "exact-start model (bound_exact.py): its integer solution dispatched as a plan, "
KEPT = _WHAT + "which replaced the plan"
NOT_KEPT = _WHAT + "not cheaper: the plan stayed"


def scheduled_from_exact(sets: PlanningSets, decisions: ExactDecisions) -> Scheduled:
    """``decisions`` as commitments and placements (a run without a start is unserved)."""
    options = combos(sets)
    placements = [
        at(sets, options[(run, offering, tier)], start)
        for run, (offering, tier, start) in sorted(decisions.starts.items())
    ]
    unserved = sorted(set(range(len(sets.runs))) - set(decisions.starts))
    new = set(sets.new_columns)
    commitments = {c: n for c, n in decisions.commitments.items() if c in new}
    schedule = Schedule(placements, unserved, Occupancy.of(sets, placements))
    return Scheduled(commitments, sets.committed(commitments), schedule)


def exact_candidate(
    sets: PlanningSets, decisions: ExactDecisions, say: Callable[[str], None]
) -> Dispatched | None:
    """The dispatched plan of ``decisions``, or None (saying why) if it breaks a rule of the contract."""
    scheduled = scheduled_from_exact(sets, decisions)
    broken = violations(sets, scheduled.commitments, scheduled.schedule.placements)
    if broken:
        say(f"exact-start plan: {len(broken)} rule(s) broken by period ({broken[0]}); not used")
        return None
    return dispatch_scheduled(sets, scheduled, say)


def weigh_exact_plan(
    sets: PlanningSets,
    exact: ExactBound | None,
    incumbent_usd: float,
    stage: int,
    say: Callable[[str], None],
) -> tuple[Dispatched | None, SolverStage | None]:
    """The exact-start plan against a plan costing ``incumbent_usd`` as written: (the candidate if it is
    cheaper, else None; the solver stage that records it, None when there was no candidate to weigh).

    Both methods call this once their plan is known, so the record in ``plan.json`` reads the same."""
    if exact is None or exact.decisions is None:
        return None, None
    candidate = exact_candidate(sets, exact.decisions, say)
    if candidate is None:
        return None, None
    kept = candidate.objective < incumbent_usd - 1e-6
    say(
        f"exact-start plan: ${candidate.objective:,.0f} against ${incumbent_usd:,.0f}"
        + ("; it replaces the plan" if kept else "; the plan stays")
    )
    record = SolverStage(
        stage=stage,
        what=KEPT if kept else NOT_KEPT,
        status=exact.integer_status,
        objective_usd=candidate.objective,
        bound_usd=exact.bound_usd,
        seconds=round(exact.seconds + candidate.dispatch.seconds, 3),
        cluster_objective_usd=None,
        distinct_periods=candidate.dispatch.distinct_periods,
    )
    return (candidate if kept else None), record
