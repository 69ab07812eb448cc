"""Training placed period by period, for the hourly method: every gang at a whole period, on one
offering, inside its window, within commitments, ``max_nodes`` and burst limits in every period.

``schedule_training`` turns the cluster model's choices into such a placement (nearest feasible start,
fallbacks; on owned servers, which sell no on-demand node, nodes committed where rounding left too
few); ``improve_schedule`` then moves runs where commitments sit idle, each move checked on the exact
per-period LPs it touches. A non-spot gang uses its offering's idle commitments first and on-demand
nodes beyond them (the billing rule, build.py row 2), so its cost depends on when it runs.

Every placement is one of ``sets.options`` moved in time (``at``), to a start between the run's first
period and its last feasible start (``feasible_starts``): build.py's rules 12-14 (one offering and kind
per gang, with its fabric; inside the window; spot only for preemptible jobs) hold by construction.
Owned nodes before delivery (rule 15) have no room: ``committed`` ((offerings, periods), what the
commitment columns serve in each period) is 0 there.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass, field, replace

import numpy as np

from models.billing import on_demand_nodes
from models.tiers import Capacity
from planner.planning.optimize.dispatch import EPS, Occupancy, PeriodModel, PoolPrices, max_nodes, team_index
from planner.planning.optimize.payments import block_room
from planner.planning.problem.purchases import CommitColumn
from planner.planning.problem.sets import PlanningSets, TrainingOption, first_start, on_demand_or_dearest
from planner.solvers.work import past


@dataclass
class Schedule:
    placements: list[TrainingOption]
    unserved_runs: list[int]
    occupancy: Occupancy
    moved: int = 0  # runs placed away from the preferred start, offering or tier
    added: dict[int, int] = field(default_factory=dict)  # new column -> nodes committed for gangs


@dataclass(frozen=True)
class _Limits:
    """What every period must respect besides commitments: ``max_nodes``, and team burst GPUs less
    what the team's inference needs at least (so training never crowds its own services out)."""

    cap: np.ndarray  # per offering (inf: none)
    burst: np.ndarray  # (teams, periods) GPUs training may hold (inf: no limit)

    @classmethod
    def of(cls, sets: PlanningSets, reserve_inference: bool = True) -> _Limits:
        periods = sets.scenario.horizon.periods
        burst = np.full((len(sets.scenario.teams), periods), math.inf)
        teams = team_index(sets)
        for m, team in enumerate(sets.scenario.teams):
            if team.burst_gpus is not None:
                burst[m] = team.burst_gpus
        if reserve_inference:
            for i, service in enumerate(sets.services):
                per_replica = [
                    sets.offerings[o].gpus_per_node / q
                    for (ii, o), q in sets.replicas_per_node.items()
                    if ii == i
                ]
                if per_replica:
                    burst[teams[service.team]] -= sets.demand[i] * min(per_replica)
        return cls(max_nodes(sets), burst)


def combos(sets: PlanningSets) -> dict[tuple[int, int, Capacity], TrainingOption]:
    """One option per (run, offering, tier): duration and cost do not depend on the start."""
    result: dict[tuple[int, int, Capacity], TrainingOption] = {}
    for option in sets.options:
        result.setdefault((option.run, option.offering, option.tier), option)
    return result


def schedule_training(
    sets: PlanningSets, committed: np.ndarray, preferred: dict[int, tuple[int, Capacity, int]]
) -> Schedule:
    """Place every run so that, period by period, nothing crosses ``max_nodes`` (non-spot runs on owned
    servers: their commitments) and no team's training crosses its burst limit.

    Each run starts where the cluster model put it (``preferred``: run -> offering, tier, start) when
    that fits, else at the nearest start in its window that does, else on its cheapest other offering
    and tier that fits (never moving a run onto spot, so ``max_spot_share`` keeps holding); a run
    that fits nowhere is left unserved. A gang on an offering without on-demand nodes (owned) needs
    at least its node count committed: where rounded commitments fall short, the missing nodes are
    committed if capacity allows, and that cost counts in the choice. Big gangs and tight windows go
    first: they are the hardest to fit. ``committed`` ((offerings, periods) nodes) is updated in place.
    """
    teams = team_index(sets)
    strict, loose = _Limits.of(sets), _Limits.of(sets, reserve_inference=False)
    occupancy = Occupancy.empty(len(sets.offerings), len(teams), sets.scenario.horizon.periods)
    by_combo = combos(sets)
    by_run: dict[int, list[TrainingOption]] = defaultdict(list)
    for option in by_combo.values():
        by_run[option.run].append(option)
    placements: list[TrainingOption] = []
    unserved: list[int] = []
    added: dict[int, int] = defaultdict(int)
    moved = 0

    def slack(r: int) -> int:
        run = sets.runs[r]
        return run.end_period - run.first_period - min((o.periods for o in by_run[r]), default=0)

    for r in sorted(range(len(sets.runs)), key=lambda r: (-sets.runs[r].job.nodes, slack(r), r)):
        team = teams[sets.runs[r].job.team]
        wanted = preferred.get(r)
        candidates: list[tuple[TrainingOption, int | None]] = []
        if wanted is not None and (r, wanted[0], wanted[1]) in by_combo:
            candidates.append((by_combo[(r, wanted[0], wanted[1])], wanted[2]))
        for option in by_run.get(r, []):
            if wanted is not None and (option.offering, option.tier) == wanted[:2]:
                continue
            if option.tier == Capacity.SPOT and (wanted is None or wanted[1] != Capacity.SPOT):
                continue  # moving onto spot could break max_spot_share
            candidates.append((option, None))
        candidates.sort(key=lambda item: (item[1] is None, _cost_with_commitment(sets, item[0], committed)))
        placed = None
        # first leaving each team's inference room under its burst limit, else training alone
        for limits, (rank, (option, start)) in itertools.product((strict, loose), enumerate(candidates)):
            raise_by = _shortfall(sets, option, committed, limits, occupancy)
            if raise_by is None:
                continue
            column = _column_for(sets, option)
            window = slice(0, 0) if column is None else slice(column.start, column.end)
            committed[option.offering, window] += raise_by
            ok = feasible_starts(sets, option, committed, limits, occupancy, team)
            if not ok.size:
                committed[option.offering, window] -= raise_by
                continue
            begin = int(ok[0] if start is None else ok[np.argmin(np.abs(ok - start))])
            if raise_by and column is not None:
                added[sets.columns.index(column)] += raise_by
            placed = at(sets, option, begin)
            moved += rank > 0 or begin != start
            break
        if placed is None:
            unserved.append(r)
            continue
        occupancy.add(sets, placed, team)
        placements.append(placed)
    placements.sort(key=lambda option: option.run)
    return Schedule(placements, sorted(unserved), occupancy, moved, dict(added))


def improve_schedule(
    sets: PlanningSets,
    committed: np.ndarray,
    schedule: Schedule,
    prices: PoolPrices,
    deadline: float | None = None,
) -> tuple[Schedule, float]:
    """Move runs, one at a time, to where the pools' dual prices say they cost least (start or
    offering), keeping every period feasible. Each move is checked by
    re-solving the periods it touches (old and new window) and kept only if that lowers the exact
    per-period LP cost plus the run's own cost. Returns the new schedule and the saving (exact for
    these LPs). ``deadline``: a work-meter reading (``work.deadline_after``: counted work, not the clock)
    after which no more moves are tried."""
    teams = team_index(sets)
    limits = _Limits.of(sets)
    by_combo = combos(sets)
    occupancy = schedule.occupancy.copy()
    model = PeriodModel(sets, committed)
    period_cost = prices.period_usd.copy()
    slack = prices.slack.copy()
    placements = {option.run: option for option in schedule.placements}
    saving = 0.0
    moved = 0
    for r in sorted(placements, key=lambda r: (-sets.runs[r].job.nodes, r)):
        if past(deadline, "training moves"):
            break
        current = placements[r]
        nodes = sets.runs[r].job.nodes
        team = teams[sets.runs[r].job.team]
        occupancy.remove(sets, current, team)
        best: tuple[float, TrainingOption] | None = None
        for option in by_combo.values():
            if option.run != r or option.tier == Capacity.SPOT:
                continue  # runs move in time or between offerings off spot (the spot share holds)
            if _needs_commitment(sets, option) and committed[option.offering].max(initial=0.0) < nodes:
                continue
            found = _cheapest_start(sets, option, committed, limits, occupancy, team, prices, slack)
            if found is None or (option.offering, option.tier, found[1]) == (
                current.offering, current.tier, current.start
            ):  # fmt: skip
                continue
            if best is None or found[0] < best[0]:
                best = (found[0], at(sets, option, found[1]))
        if best is None:
            occupancy.add(sets, current, team)
            continue
        chosen = best[1]
        occupancy.add(sets, chosen, team)
        touched = np.union1d(_periods(current), _periods(chosen))
        after = np.array([model.lp_at(int(t), occupancy) for t in touched])
        delta = float(after.sum() - period_cost[touched].sum()) + chosen.cost_usd - current.cost_usd
        if delta < -1e-6:
            period_cost[touched] = after
            saving -= delta
            moved += 1
            placements[r] = chosen
            if current.tier == Capacity.NON_SPOT:
                slack[current.offering, _periods(current)] += nodes
            if chosen.tier == Capacity.NON_SPOT:
                slack[chosen.offering, _periods(chosen)] -= nodes
        else:  # put it back
            occupancy.remove(sets, chosen, team)
            occupancy.add(sets, current, team)
    placed = sorted(placements.values(), key=lambda option: option.run)
    return replace(schedule, placements=placed, occupancy=occupancy, moved=schedule.moved + moved), saving


def at(sets: PlanningSets, option: TrainingOption, start: int) -> TrainingOption:
    """``option`` started at ``start`` (the blocks it touches follow)."""
    block = sets.block_periods
    blocks = tuple(range(start // block, (start + option.periods - 1) // block + 1))
    return replace(option, start=start, blocks=blocks)


def feasible_starts(
    sets: PlanningSets,
    option: TrainingOption,
    committed: np.ndarray,
    limits: _Limits,
    occupancy: Occupancy,
    team: int,
) -> np.ndarray:
    """Every start in the run's window at which ``option`` fits in each period it holds."""
    run = sets.runs[option.run]
    nodes = run.job.nodes
    o = option.offering
    last = run.end_period - option.periods
    first = first_start(sets.scenario, run, option.tier)  # flex-start: after the planned start delay
    if last < first or (_needs_commitment(sets, option) and committed[o].max(initial=0.0) < nodes):
        return np.zeros(0, dtype=np.int64)
    if _needs_commitment(sets, option):
        room = committed[o] - occupancy.non_spot[o]
    elif option.tier.own_nodes:  # a block's or flex-start nodes: only the team's burst limit
        room = np.full(occupancy.spot.shape[1], math.inf)
    elif option.tier == Capacity.NON_SPOT:  # commitments first, on-demand nodes up to max_nodes
        room = limits.cap[o] - occupancy.non_spot[o] - occupancy.spot[o]
    else:  # spot nodes beside whatever non-spot nodes are held (at least the commitments)
        room = limits.cap[o] - np.maximum(committed[o], occupancy.non_spot[o]) - occupancy.spot[o]
    gpus = nodes * sets.offerings[o].gpus_per_node
    fits = (room >= nodes - EPS) & (limits.burst[team] - occupancy.team_gpus[team] >= gpus - EPS)
    # a start fits when every period it holds fits: no misfit between it and its end
    misfits = np.concatenate([[0], np.cumsum(~fits)])
    starts = np.arange(first, last + 1)
    ok = misfits[starts + option.periods] - misfits[starts] == 0
    cash = block_room(sets, occupancy.block_fees, option)  # a block: its fee within the cash limit
    if cash is not None:
        ok &= cash[starts]
    return starts[ok]


def _periods(option: TrainingOption) -> np.ndarray:
    return np.arange(option.start, option.start + option.periods)


def _column_for(sets: PlanningSets, option: TrainingOption) -> CommitColumn | None:
    """The new column that gains nodes when a gang on owned servers needs more: of those serving
    somewhere in the run's window, the cheapest per node."""
    run = sets.runs[option.run]
    serving = [
        sets.columns[c]
        for c in sets.columns_on.get(option.offering, [])
        if not sets.columns[c].existing
        and sets.columns[c].start < run.end_period
        and sets.columns[c].end > run.first_period
    ]
    return min(serving, key=lambda column: column.cost_per_node, default=None)


def _window_committed(sets: PlanningSets, option: TrainingOption, committed: np.ndarray) -> float:
    """The most nodes committed on the option's offering in any period of its run's window."""
    run = sets.runs[option.run]
    return float(committed[option.offering, run.first_period : run.end_period].max(initial=0.0))


def _needs_commitment(sets: PlanningSets, option: TrainingOption) -> bool:
    """A non-spot gang on an offering that sells no on-demand node (owned) runs on commitments only."""
    return option.tier == Capacity.NON_SPOT and sets.offerings[option.offering].on_demand_usd_h is None


def _shortfall(
    sets: PlanningSets, option: TrainingOption, committed: np.ndarray, limits: _Limits, occupancy: Occupancy
) -> int | None:
    """Nodes to commit so a gang that needs commitments fits at all (0 if none needed); None if
    capacity forbids it."""
    if not _needs_commitment(sets, option):
        return 0
    o = option.offering
    missing = max(
        0, math.ceil(sets.runs[option.run].job.nodes - _window_committed(sets, option, committed) - EPS)
    )
    if missing and (
        _column_for(sets, option) is None
        or (committed[o] + occupancy.spot[o]).max() + missing > limits.cap[o] + EPS
    ):
        return None
    return missing


def _cost_with_commitment(sets: PlanningSets, option: TrainingOption, committed: np.ndarray) -> float:
    """What the option would cost with no idle commitment to use, plus any commitment it forces (for
    ordering the fallbacks): spot at its effective cost, non-spot at the on-demand rate beyond the
    nodes committed on its offering."""
    nodes = sets.runs[option.run].job.nodes
    missing = on_demand_nodes(float(nodes), _window_committed(sets, option, committed))
    if option.tier.own_cost:  # spot, a Capacity Block: its own cost
        return option.cost_usd
    if not _needs_commitment(sets, option):
        return option.list_usd * missing / nodes
    if not missing:
        return 0.0
    column = _column_for(sets, option)
    return math.inf if column is None else missing * column.cost_per_node


def _cheapest_start(
    sets: PlanningSets,
    option: TrainingOption,
    committed: np.ndarray,
    limits: _Limits,
    occupancy: Occupancy,
    team: int,
    prices: PoolPrices,
    slack: np.ndarray,
) -> tuple[float, int] | None:
    """(estimated cost, start) of the cheapest feasible start of ``option``, or None."""
    ok = feasible_starts(sets, option, committed, limits, occupancy, team)
    if not ok.size:
        return None
    if option.tier.own_cost:  # spot, a Capacity Block: the price does not depend on the start
        return option.cost_usd, int(ok[0])
    o = option.offering
    nodes = sets.runs[option.run].job.nodes
    # nodes beyond the idle pool displace inference: at the dual price where the row binds, else at
    # most the offering's on-demand price (inference could move there, or somewhere cheaper)
    fallback = on_demand_or_dearest(sets, o) * sets.period_hours
    unit = np.where(prices.price[o] > EPS, prices.price[o], fallback)
    running = np.concatenate([[0.0], np.cumsum(unit * on_demand_nodes(float(nodes), slack[o]))])
    costs = running[ok + option.periods] - running[ok]
    k = int(np.argmin(costs))
    return option.cost_usd + float(costs[k]), int(ok[k])
