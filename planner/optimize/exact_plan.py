"""A plan candidate from the exact-start bound's integer solution (``bound_exact.py``).

Why: that integer model places every run at an exact start and buys whole commitments against
cluster-averaged inference; on ``bench/gen.py month`` its optimum is within 1 % of the plans the two
methods find, and below them. Its solution is read back as commitments and placements, inference is
dispatched period by period in whole nodes as for any plan (``decompose.dispatch_scheduled``), and
the contract's rules are checked on the result (``local_search.violations``): averaging inference
over a cluster may hide a period where a burst or capacity limit does not hold. The candidate
replaces the plan only if it keeps every rule and costs less as written.
"""

from __future__ import annotations

from collections.abc import Callable

from planner.optimize.bound_exact import ExactDecisions
from planner.optimize.decompose import Realized, Scheduled, dispatch_scheduled
from planner.optimize.hourly import Occupancy
from planner.optimize.local_search import violations
from planner.optimize.schedule import Schedule, at, combos
from planner.optimize.sets import PlanningSets

__all__ = ["exact_candidate", "scheduled_from_exact"]


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
) -> Realized | None:
    """The dispatched plan of ``decisions``, or None (saying why) if it breaks a rule of the contract."""
    scheduled = scheduled_from_exact(sets, decisions)
    broken = violations(sets, scheduled.commitments, scheduled.schedule.placements)
    if broken:
        say(f"exact-start plan: {len(broken)} rule(s) broken by period ({broken[0]}); not used")
        return None
    return dispatch_scheduled(sets, scheduled, say)
