"""Runs the search left unserved, placed after it where they fit; the reason of those that stay (issue 39.4).

A run can be left unserved by a stage cut short (stage 1's incumbent locks training in, the greedy
``schedule_training``, the hourly method's last resort for the spot share), not only because it has no
room. So once a method has its plan, :func:`place_unserved` tries every run left unserved that has
options: on the plan's final commitments and occupancy, each of its (offering, tier) options at every
start ``schedule.feasible_starts`` allows (the limits ``schedule_training`` uses, the team's inference
room kept first, then training alone), spot only while ``max_spot_share`` holds, inserted at its
cheapest start (the on-demand nodes beyond the idle commitments it needs, spot at its effective
cost). The whole plan is checked with ``local_search.violations``, dispatched again, and kept only if it
costs less as written (the incumbent is never lost). The work is a count, not seconds: at most
``REPAIR_OPTIONS`` options per run, one dispatch for all the runs placed.

What stays unserved says which of three it is (:func:`unserved_why`): no option at all
(``sets.no_option_reason``), proven no room (no option fits its window even in an otherwise empty fleet
with every column committed up to ``max_nodes``: a relaxation of every plan, so the proof holds), or
unplaced by the search (:data:`UNPLACED`: room may exist, the search did not find it), in which case
the plan's status is never ``optimal``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from models.billing import on_demand_nodes
from models.tiers import Capacity
from planner.planning.optimize.dispatch import Occupancy, team_index
from planner.planning.optimize.local_search import spot_share_holds, violations
from planner.planning.optimize.schedule import (
    Schedule,
    _Limits,
    _needs_commitment,
    at,
    combos,
    feasible_starts,
)
from planner.planning.problem.sets import PlanningSets, TrainingOption, on_demand_or_dearest

__all__ = [
    "NO_ROOM",
    "REPAIR_OPTIONS",
    "UNPLACED",
    "Repaired",
    "Why",
    "place_unserved",
    "unserved_why",
]

REPAIR_OPTIONS = 16  # (offering, tier) options tried per unserved run, cheapest estimate first

UNPLACED = "unplaced: the search stopped before placing it"
NO_ROOM = (
    "no room in its window: no offering fits it there even with nothing else running "
    "(max_nodes, delivery of owned nodes, the team's burst limit)"
)


class Why(StrEnum):
    """Why a run is unserved: the three answers a plan may give (module docstring)."""

    NO_OPTION = "no_option"
    NO_ROOM = "no_room"
    SEARCH = "search"


def unserved_why(sets: PlanningSets, r: int) -> Why:
    """Whether run ``r`` has no option, provably no room, or room the search did not use."""
    if r in sets.no_option_reason:
        return Why.NO_OPTION
    return Why.SEARCH if _fits_alone(sets, r) else Why.NO_ROOM


def _fits_alone(sets: PlanningSets, r: int) -> bool:
    """Some option of run ``r`` has a feasible start in an empty fleet, with the most room any plan can
    leave it: gangs on owned nodes (commitments only) with every column committing ``max_nodes``, the
    others with nothing committed (commitments only take room from spot); burst limits without the
    team's inference. What any plan leaves the run is no more room than this."""
    limits = _Limits.of(sets, reserve_inference=False)
    most = max(run.job.nodes for run in sets.runs)
    owned = np.minimum(sets.committed(dict.fromkeys(sets.new_columns, most)), limits.cap[:, None])
    none = np.zeros_like(owned)
    empty = Occupancy.empty(len(sets.offerings), len(sets.scenario.teams), sets.scenario.horizon.periods)
    team = team_index(sets)[sets.runs[r].job.team]
    return any(
        feasible_starts(
            sets, option, owned if _needs_commitment(sets, option) else none, limits, empty, team
        ).size
        for option in combos(sets).values()
        if option.run == r
    )


@dataclass
class Repaired:
    """The plan's purchases with the runs placed after the search (``placed``), not yet dispatched."""

    commitments: dict[int, int]  # new column -> nodes (unchanged)
    committed: np.ndarray  # (offerings, periods)
    schedule: Schedule
    placed: list[int]
    tried: int


def place_unserved(
    sets: PlanningSets, commits: dict[int, int], placed_runs: list[TrainingOption], unserved_runs: list[int]
) -> Repaired | None:
    """A plan's purchases (``commits``: column -> nodes) and placements with the runs it leaves unserved
    (those with options) inserted where they fit (module docstring), or None when none is left to try.
    ``Repaired.placed`` may be empty; the caller dispatches the result and keeps it only if it costs
    less as written. (Plain data, not a Solution: solution.py asks this module for the reasons.)"""
    todo = [r for r in unserved_runs if r not in sets.no_option_reason]
    if not todo:
        return None
    commitments = {c: int(n) for c, n in commits.items() if not sets.columns[c].existing}
    committed = sets.committed(commitments)
    placements = sorted(placed_runs, key=lambda option: option.run)
    occupancy = Occupancy.of(sets, placements)
    teams = team_index(sets)
    strict, loose = _Limits.of(sets), _Limits.of(sets, reserve_inference=False)
    by_run: dict[int, list[TrainingOption]] = {}
    for option in combos(sets).values():
        by_run.setdefault(option.run, []).append(option)
    placed: list[int] = []
    # the biggest gangs first: the hardest to fit
    for r in sorted(todo, key=lambda r: (-sets.runs[r].job.nodes, r)):
        team = teams[sets.runs[r].job.team]
        options = sorted(by_run.get(r, []), key=lambda option: option.list_usd)[:REPAIR_OPTIONS]
        best: tuple[float, TrainingOption] | None = None
        for limits in (strict, loose):  # the team's inference room kept first, then training alone
            for option in options:
                if option.tier == Capacity.SPOT and not spot_share_holds(
                    sets, [*placements, at(sets, option, sets.runs[r].first_period)]
                ):
                    continue
                starts = feasible_starts(sets, option, committed, limits, occupancy, team)
                if not starts.size:
                    continue
                cost, start = _cheapest(sets, option, starts, committed, occupancy)
                if best is None or cost < best[0]:
                    best = (cost, at(sets, option, start))
            if best is not None:
                break
        if best is None:
            continue
        occupancy.add(sets, best[1], team)
        placements.append(best[1])
        placed.append(r)
    placements.sort(key=lambda option: option.run)
    if placed and violations(sets, commitments, placements):  # pragma: no cover - kept by construction
        placed, placements = [], sorted(placed_runs, key=lambda option: option.run)
        occupancy = Occupancy.of(sets, placements)
    left = sorted(set(unserved_runs) - set(placed))
    return Repaired(commitments, committed, Schedule(placements, left, occupancy), placed, len(todo))


def _cheapest(
    sets: PlanningSets,
    option: TrainingOption,
    starts: np.ndarray,
    committed: np.ndarray,
    occupancy: Occupancy,
) -> tuple[float, int]:
    """(estimated cost, start) of ``option`` at the cheapest of ``starts``: spot at its own cost, non-spot
    at the on-demand price of the nodes beyond the commitments other training leaves idle."""
    if option.tier.own_cost:  # spot, a Capacity Block: the cost does not depend on the start
        return option.cost_usd, int(starts[0])
    o = option.offering
    idle = np.maximum(committed[o] - occupancy.non_spot[o], 0.0)
    price = on_demand_or_dearest(sets, o) * sets.period_hours
    beyond = on_demand_nodes(float(sets.runs[option.run].job.nodes), idle)
    running = np.concatenate([[0.0], np.cumsum(price * np.asarray(beyond, dtype=float))])
    costs = running[starts + option.periods] - running[starts]
    k = int(np.argmin(costs))
    return option.cost_usd + float(costs[k]), int(starts[k])
