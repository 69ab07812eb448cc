"""Local search over commitments and training placements, every move scored on the exact per-period cost.

The hourly method's refinement (``schedule.improve_schedule``, ``commitments.tune_commitments``) moves
one kind of decision at a time: a run's start (off spot, for fixed commitments), or the commitments
(for fixed placements). Issue 19 measured what that leaves: on a month case the optimum commits 24
p5.48xlarge where the plan commits 16 and no p5en where the plan commits 2, a trade neither step can
make alone. This search moves both, in one neighbourhood:

- *relocate* a run: any (offering, tier, start) of its options, spot included while ``max_spot_share``
  holds, the start chosen by the pool's dual prices, the best few scored exactly;
- *relocate with commitment*: the same onto a committable offering with its gang's nodes committed on
  the cheapest column serving the run (a gang moved onto nodes bought for it);
- *step* a commitment column by +-k nodes (a line search: k = 1, 2, 4, ... while it pays);
- *swap* k nodes of one column for k of another (another offering, term or purchase step).

Score. With commitments R and placements fixed, every period t is the covering LP of ``dispatch.py``
(``PeriodModel``, built once, re-solved warm per period); the plan's cost is
``c.R + sum_t F_t(R, occupancy_t) + spot training + guarantee penalty``. A move changes only the
periods it touches (a run's old and new window; a column's window), so only those are re-solved, and
periods with equal right-hand sides are solved once. A move is kept when that total drops: first
improvement over a neighbourhood sampled in an order fixed by ``seed``.

Pruning by convexity (exact, never a lost improving move). ``F_t`` is an LP value as a function of its
right-hand side, so it is convex in R and its row duals give a subgradient ``g`` (pool rows: more room,
capacity rows: less; as ``commitments.py``). Hence for a direction d, ``c.d + F(R+d) - F(R) >= (c + g).d``:
a step or swap whose bound is not negative cannot pay and is not solved; and along one direction the
change ``f(k)`` is convex with ``f(0) = 0``, so if ``k = 1`` does not pay no larger ``k`` does.

Feasibility. Every placement is one of ``sets.options`` moved in time (``schedule.at``): one offering and
kind per gang, with its fabric, inside its window. Starts come from ``schedule.feasible_starts`` with the
limits ``schedule_training`` uses (``max_nodes``, burst limits less the team's inference, commitments
for gangs on owned nodes); commitment steps keep every period within ``max_nodes`` beside spot training
and above what gangs on owned nodes hold; the spot share is recounted per move; a step that raises the
guarantee shortfall is refused. :func:`violations` checks all of it on the whole plan and is run before a
move is kept. Node counts are fractional in the score; the caller dispatches whole nodes afterwards and
keeps the search's plan only if it is cheaper as written (the incumbent is never lost).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from models.tiers import Capacity
from planner.planning.optimize.dispatch import EPS, Occupancy, PeriodModel, PoolPrices, team_index
from planner.planning.optimize.payments import blocks_over_cap
from planner.planning.optimize.schedule import (
    Schedule,
    _cheapest_start,
    _Limits,
    at,
    combos,
    feasible_starts,
)
from planner.planning.problem.sets import PlanningSets, TrainingOption, first_start
from planner.solvers.work import deadline_after, meter, past

__all__ = ["Searched", "search", "spot_share_holds", "violations"]

SAMPLE = 4  # relocation candidates per run scored exactly (best estimates first)
SWAPS = 12  # column pairs per round scored exactly (most promising bound first)
MAX_ROUNDS = 50


@dataclass
class Searched:
    """What the search returns: the best plan it found (the start's when nothing paid)."""

    commitments: dict[int, int]  # new column -> nodes
    schedule: Schedule
    cost_before: float  # commitments + per-period LP cost + spot training + guarantee penalty
    cost_after: float
    moves: dict[str, int] = field(default_factory=dict)  # accepted moves per kind
    evaluations: int = 0  # moves scored exactly
    seconds: float = 0.0

    @property
    def accepted(self) -> int:
        return sum(self.moves.values())


def search(
    sets: PlanningSets,
    commitments: dict[int, int],
    schedule: Schedule,
    time_limit: float | None,
    guarantee_usd: Callable[[dict[int, int]], float] | None = None,
    progress: Callable[[str], None] | None = None,
    seed: int = 0,
    max_moves: int | None = None,
    min_round_gain: float = 0.0,
) -> Searched:
    """Improve (commitments, placements) by the moves of the module docstring until none pays, the
    time limit (nominal seconds of counted work, ``planner/solvers/work.py``) is spent, ``max_moves``
    are kept or a round saves less than ``min_round_gain`` of the cost. ``guarantee_usd``: the guarantee
    penalty of a set of commitments (None: the scenario has no guarantees). Deterministic for a given ``seed``
    unless the wall-clock safety net cuts it."""
    began = time.perf_counter()  # measured for the report only
    deadline = deadline_after(time_limit)
    state = _State(sets, commitments, schedule, guarantee_usd, deadline)
    start_cost = state.total()
    rng = np.random.default_rng(seed)
    moves: dict[str, int] = {}
    say = progress or (lambda _message: None)

    def out_of_time() -> bool:
        over = max_moves is not None and sum(moves.values()) >= max_moves
        return over or past(deadline, "the local search")

    def kept(kind: str) -> None:
        moves[kind] = moves.get(kind, 0) + 1

    for _round in range(MAX_ROUNDS):
        before = state.total()
        for r in rng.permutation(sorted(state.placements)).tolist():
            if out_of_time():
                break
            if state.relocate(int(r), rng):
                kept("relocate")

        for kind in ("step", "swap", "relocate+commit"):
            if out_of_time():
                break
            for _ in range(len(sets.columns) + len(state.placements)):
                if out_of_time() or not getattr(state, kind.replace("+", "_"))(rng):
                    break
                kept(kind)
        now = state.total()
        if now < before - 1e-6:
            say(f"local search: {sum(moves.values())} moves, -${start_cost - now:,.0f}")
        if out_of_time() or now >= before - max(1e-6, min_round_gain * abs(before)):
            break
    placed = sorted(state.placements.values(), key=lambda option: option.run)
    result = replace(schedule, placements=placed, occupancy=state.occupancy.copy())
    chosen = {c: n for c, n in state.commitments.items() if n > 0}
    return Searched(
        chosen, result, start_cost, state.total(), moves, state.evaluations, time.perf_counter() - began
    )


def spot_share_holds(sets: PlanningSets, placements: list[TrainingOption]) -> bool:
    """Spot GPU-hours within ``max_spot_share`` of the served runs' GPU-hours (the rule build.py states)."""
    share = sets.scenario.purchase.max_spot_share
    hours = [(sets.runs[o.run].gpus * sets.runs[o.run].job.hours, o.tier) for o in placements]
    spot = sum(h for h, tier in hours if tier == Capacity.SPOT)
    return spot <= share * sum(h for h, _tier in hours) + 1e-6


def violations(
    sets: PlanningSets, commitments: dict[int, int], placements: list[TrainingOption]
) -> list[str]:
    """What in (commitments, placements) breaks the plan contract's rules, as readable lines (empty: none).

    The rules placements must keep whatever the search does: each a known (run, offering, tier) option
    held for its duration, inside its run's window, each run once; per period, an offering's committed
    or non-spot nodes plus spot training within ``max_nodes``, gangs on owned nodes within the nodes
    committed there, a team's training within its burst limit; the spot share; whole, non-negative
    commitments on new columns only."""
    found: list[str] = []
    known = combos(sets)
    new = set(sets.new_columns)
    for c, nodes in commitments.items():
        if c not in new or nodes < 0 or nodes != int(nodes):
            found.append(f"column {c}: {nodes} nodes is not a whole, new commitment")
    runs = [option.run for option in placements]
    if len(set(runs)) != len(runs):
        found.append("a run is placed twice")
    teams = team_index(sets)
    occupancy = Occupancy.empty(len(sets.offerings), len(teams), sets.scenario.horizon.periods)
    for option in placements:
        run = sets.runs[option.run]
        base = known.get((option.run, option.offering, option.tier))
        if base is None or base.periods != option.periods:
            found.append(f"run {option.run}: not one of its options")
            continue
        first = first_start(sets.scenario, run, option.tier)  # flex-start: after the planned delay
        if option.start < first or option.start + option.periods > run.end_period:
            found.append(f"run {option.run}: outside its window")
            continue
        occupancy.add(sets, option, teams[run.job.team])
    committed = sets.committed({c: n for c, n in commitments.items() if c in new})
    limits = _Limits.of(sets, reserve_inference=False)
    for o, offering in enumerate(sets.offerings):
        held = np.maximum(committed[o], occupancy.non_spot[o]) + occupancy.spot[o]
        if (held > limits.cap[o] + EPS).any():
            found.append(
                f"{offering.id}: above max_nodes in {int((held > limits.cap[o] + EPS).sum())} periods"
            )
        if offering.on_demand_usd_h is None and (occupancy.non_spot[o] > committed[o] + EPS).any():
            found.append(f"{offering.id}: gangs beyond the nodes committed on an offering without on-demand")
    over = occupancy.team_gpus > limits.burst + EPS
    if over.any():
        found.append(f"training above a team's burst limit in {int(over.sum())} team-periods")
    if not spot_share_holds(sets, placements):
        found.append("spot share above max_spot_share")
    found += blocks_over_cap(sets, placements)
    return found


class _State:
    """The incumbent: commitments, placements and occupancy, with every period's LP value and duals."""

    def __init__(
        self,
        sets: PlanningSets,
        commitments: dict[int, int],
        schedule: Schedule,
        guarantee_usd: Callable[[dict[int, int]], float] | None,
        deadline: float | None = None,
    ) -> None:
        self.sets = sets
        self.deadline = deadline  # a work meter reading (work.deadline_after): a move gives up past it
        self.commitments = {c: int(commitments.get(c, 0)) for c in sets.new_columns}
        self.committed = sets.committed(self.commitments)
        self.placements = {option.run: option for option in schedule.placements}
        self.occupancy = schedule.occupancy.copy()
        self.guarantee = guarantee_usd
        self.guarantee_now = guarantee_usd(self.commitments) if guarantee_usd else 0.0
        self.teams = team_index(sets)
        self.limits = _Limits.of(sets)
        self.loose = _Limits.of(sets, reserve_inference=False)
        self.by_run: dict[int, list[TrainingOption]] = {}
        for option in combos(sets).values():
            self.by_run.setdefault(option.run, []).append(option)
        self.model = PeriodModel(sets, self.committed, every_pool=True)
        n_o, periods = len(sets.offerings), sets.scenario.horizon.periods
        self.period_cost = np.zeros(periods)
        self.pool_dual = np.zeros((n_o, periods))
        self.cap_dual = np.zeros((n_o, periods))
        self.slack = np.zeros((n_o, periods))  # pool rows: committed nodes no one uses
        self.cap_slack = np.full((n_o, periods), np.inf)  # capacity rows: nodes below max_nodes
        self.has_pool = np.isin(np.arange(n_o), self.model.pool_offerings)
        self.evaluations = 0
        everything = np.arange(periods)
        self._store(everything, *self._solve(everything, self.committed, self.occupancy))
        self.gpu_hours = {r: sets.runs[r].gpus * sets.runs[r].job.hours for r in self.placements}
        self.total_hours = sum(self.gpu_hours.values())
        self.spot_hours = sum(
            self.gpu_hours[r] for r, option in self.placements.items() if option.tier == Capacity.SPOT
        )

    def expired(self) -> bool:
        """Past the deadline: one move of a year-long column re-solves thousands of periods, so the
        moves check this between their trials, not only the search between moves."""
        return past(self.deadline, "the local search")

    # -- scoring ------------------------------------------------------------------------------------

    def total(self) -> float:
        bought = sum(self.sets.columns[c].cost_per_node * n for c, n in self.commitments.items())
        training = sum(option.cost_usd for option in self.placements.values())
        return bought + float(self.period_cost.sum()) + training + self.guarantee_now

    def _solve(
        self, periods: np.ndarray, committed: np.ndarray, occupancy: Occupancy
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """LP value, pool and capacity duals, and pool and capacity slack of ``periods`` for these right-hand
        sides (each distinct period solved once, in time order so neighbours warm-start each other)."""
        sets, model = self.sets, self.model
        n_o = len(sets.offerings)
        if not periods.size:
            empty = np.zeros((n_o, 0))
            return np.zeros(0), empty, empty, empty, empty
        model.set_commitments(committed)
        signature = np.vstack(
            [sets.demand[:, periods], committed[:, periods], occupancy.non_spot[:, periods],
             occupancy.spot[:, periods], occupancy.team_gpus[:, periods]]
        ).T  # fmt: skip
        _, first, inverse = np.unique(signature, axis=0, return_index=True, return_inverse=True)
        value = np.zeros(len(first))
        pool = np.zeros((n_o, len(first)))
        cap = np.zeros((n_o, len(first)))
        slack = np.zeros((n_o, len(first)))
        cap_slack = np.full((n_o, len(first)), np.inf)
        for u in np.argsort(first):
            t = int(periods[first[u]])
            value[u] = model.lp_at(t, occupancy)
            pool_dual, cap_dual, _rounding = model.duals()
            pool[model.pool_offerings, u] = pool_dual
            cap[model.cap_offerings, u] = cap_dual
            if len(model.pool_rows):
                used = np.asarray(model.highs.solution().row_value)[model.pool_rows]
                room = model.pool_base[:, t] - occupancy.non_spot[model.pool_offerings, t]
                slack[model.pool_offerings, u] = np.maximum(room - used, 0.0)
            if len(model.cap_rows):
                used = np.asarray(model.highs.solution().row_value)[model.cap_rows]
                room = model.cap_max - model.cap_committed[:, t] - occupancy.spot[model.cap_offerings, t]
                cap_slack[model.cap_offerings, u] = np.maximum(room - used, 0.0)
        inverse = inverse.reshape(-1)
        return value[inverse], pool[:, inverse], cap[:, inverse], slack[:, inverse], cap_slack[:, inverse]

    def _store(
        self,
        periods: np.ndarray,
        value: np.ndarray,
        pool: np.ndarray,
        cap: np.ndarray,
        slack: np.ndarray,
        cap_slack: np.ndarray,
    ) -> None:
        self.period_cost[periods] = value
        self.pool_dual[:, periods] = pool
        self.cap_dual[:, periods] = cap
        self.slack[:, periods] = slack
        self.cap_slack[:, periods] = cap_slack

    def _try(
        self,
        periods: np.ndarray,
        committed: np.ndarray,
        occupancy: Occupancy,
        fixed_change: float,
    ) -> tuple[float, tuple[np.ndarray, ...]]:
        """The total's change if ``periods`` had these right-hand sides (``fixed_change``: commitments,
        spot training and guarantee penalty), and what to store if the move is kept. Leaves the model
        at the incumbent's commitments."""
        self.evaluations += 1
        meter().charge_moves()
        solved = self._solve(periods, committed, occupancy)
        self.model.set_commitments(self.committed)
        change = float(solved[0].sum() - self.period_cost[periods].sum()) + fixed_change
        return change, (periods, *solved)

    # -- feasibility --------------------------------------------------------------------------------

    def _committed_fits(self, committed: np.ndarray, offering: int) -> bool:
        """Commitments on ``offering`` keep every period within max_nodes beside spot training, and
        cover the gangs on owned nodes (no on-demand node to take the rest)."""
        o = offering
        if (committed[o] + self.occupancy.spot[o] > self.loose.cap[o] + EPS).any():
            return False
        if self.sets.offerings[o].on_demand_usd_h is None:
            return not (self.occupancy.non_spot[o] > committed[o] + EPS).any()
        return True

    def _valid(self, commitments: dict[int, int], placements: dict[int, TrainingOption]) -> bool:
        return not violations(self.sets, commitments, list(placements.values()))

    # -- moves --------------------------------------------------------------------------------------

    def _prices(self) -> PoolPrices:
        return PoolPrices(-self.pool_dual, self.slack, float(self.period_cost.sum()), self.period_cost)

    def _candidates(self, r: int, committed: np.ndarray, spot_ok: bool) -> list[tuple[float, TrainingOption]]:
        """(estimated cost, option at its cheapest start) for run ``r``'s options that fit now (the run
        itself taken out of the occupancy by the caller)."""
        team = self.teams[self.sets.runs[r].job.team]
        prices = self._prices()
        found: list[tuple[float, TrainingOption]] = []
        for option in self.by_run.get(r, []):
            if option.tier == Capacity.SPOT and not spot_ok:
                continue
            best = _cheapest_start(
                self.sets, option, committed, self.limits, self.occupancy, team, prices, prices.slack
            )
            if best is not None:
                found.append((best[0], at(self.sets, option, best[1])))
        return found

    def _spot_ok(self, r: int) -> bool:
        """Whether run ``r`` may go on spot: the share with it there still holds."""
        spot = self.spot_hours - (self.gpu_hours[r] if self.placements[r].tier == Capacity.SPOT else 0.0)
        return (
            spot + self.gpu_hours[r] <= self.sets.scenario.purchase.max_spot_share * self.total_hours + 1e-6
        )

    def _apply_run(self, r: int, chosen: TrainingOption) -> None:
        current = self.placements[r]
        self.spot_hours += self.gpu_hours[r] * (
            (chosen.tier == Capacity.SPOT) - (current.tier == Capacity.SPOT)
        )
        self.placements[r] = chosen

    def relocate(self, r: int, rng: np.random.Generator) -> bool:
        """Move run ``r`` to the best of its few best-estimated (offering, tier, start); True if kept."""
        current = self.placements[r]
        team = self.teams[self.sets.runs[r].job.team]
        self.occupancy.remove(self.sets, current, team)
        found = [
            item
            for item in self._candidates(r, self.committed, self._spot_ok(r))
            if (item[1].offering, item[1].tier, item[1].start)
            != (current.offering, current.tier, current.start)
        ]
        found.sort(key=lambda item: item[0])
        best: tuple[float, TrainingOption, tuple] | None = None
        for _estimate, option in found[:SAMPLE]:
            if self.expired():
                break
            self.occupancy.add(self.sets, option, team)
            touched = np.union1d(_periods(current), _periods(option))
            change, store = self._try(
                touched, self.committed, self.occupancy, option.cost_usd - current.cost_usd
            )
            self.occupancy.remove(self.sets, option, team)
            if change < -1e-6 and (best is None or change < best[0]):
                best = (change, option, store)
        if best is not None:
            trial = dict(self.placements)
            trial[r] = best[1]
            if self._valid(self.commitments, trial):
                self.occupancy.add(self.sets, best[1], team)
                self._store(*best[2])
                self._apply_run(r, best[1])
                return True
        self.occupancy.add(self.sets, current, team)
        return False

    def _reduced(self) -> np.ndarray:
        """Per new column: its price plus the subgradient of the periods' LP cost (module docstring)."""
        sets = self.sets
        keys = sets.new_columns
        reduced = np.zeros(len(keys))
        for k, c in enumerate(keys):
            column = sets.columns[c]
            window = slice(column.start, column.end)
            g = float(
                self.pool_dual[column.offering, window].sum() - self.cap_dual[column.offering, window].sum()
            )
            reduced[k] = column.cost_per_node + g
        return reduced

    def _commit_change(
        self, change: dict[int, int]
    ) -> tuple[float, np.ndarray, np.ndarray, dict[int, int]] | None:
        """Right-hand sides of adding ``change`` (column -> nodes) to the commitments: (fixed cost change,
        periods touched, committed, new commitments), or None if it breaks a limit or a guarantee."""
        sets = self.sets
        commitments = dict(self.commitments)
        committed = self.committed.copy()
        fixed = 0.0
        for c, k in change.items():
            if commitments[c] + k < 0:
                return None
            column = sets.columns[c]
            commitments[c] += k
            committed[column.offering, column.start : column.end] += k
            fixed += k * column.cost_per_node
        for o in {sets.columns[c].offering for c in change}:
            if not self._committed_fits(committed, o):
                return None
        if self.guarantee is not None and any(k < 0 for k in change.values()):
            penalty = self.guarantee(commitments)
            if penalty > self.guarantee_now + 1e-6:
                return None  # a guarantee the incumbent backs would go short
            fixed += penalty - self.guarantee_now
        return fixed, self._affected(committed - self.committed), committed, commitments

    def _affected(self, change: np.ndarray) -> np.ndarray:
        """Periods whose LP value a change of committed nodes ((offerings, periods)) can move. Exact: where
        the change only relaxes rows the LP leaves slack (more nodes on an idle pool, fewer on a capacity
        row below max_nodes), or only tightens rows by no more than their slack, the period's optimum
        stays optimal, so those periods keep their value and duals (their slack is shifted on keeping)."""
        up, down = change > 0, change < 0
        pool_moves = self.has_pool[:, None] & (
            (up & (self.slack <= 1e-7)) | (down & (self.slack < -change - 1e-9))
        )
        cap_moves = (up & (self.cap_slack < change - 1e-9)) | (down & (self.cap_slack <= 1e-7))
        return np.flatnonzero((pool_moves | cap_moves).any(axis=0))

    def _shift(self, committed: np.ndarray) -> None:
        """Commitments become ``committed``: slack moves with them where the periods are not re-solved."""
        change = committed - self.committed
        self.slack = np.where(self.has_pool[:, None], np.maximum(self.slack + change, 0.0), self.slack)
        self.cap_slack = np.maximum(self.cap_slack - change, 0.0)

    def _line(self, direction: dict[int, int]) -> bool:
        """Along ``direction``: k = 1, 2, 4, ... while the total keeps dropping; keep the best. Stops at
        the first k that does not pay (convex along the line: no larger k would)."""
        best: tuple[float, tuple, np.ndarray, dict[int, int]] | None = None
        k = 1
        while not self.expired():
            change = self._commit_change({c: k * d for c, d in direction.items()})
            if change is None:
                break
            fixed, touched, committed, commitments = change
            delta, store = self._try(touched, committed, self.occupancy, fixed)
            if delta >= -1e-6 or (best is not None and delta >= best[0] - 1e-6):
                break
            best = (delta, store, committed, commitments)
            k *= 2
        if best is None or not self._valid(best[3], self.placements):
            return False
        _delta, store, committed, commitments = best
        self._shift(committed)
        self.commitments, self.committed = commitments, committed
        self.model.set_commitments(committed)
        self._store(*store)
        if self.guarantee is not None:
            self.guarantee_now = self.guarantee(commitments)
        return True

    def step(self, rng: np.random.Generator) -> bool:
        """+-k on the column whose bound promises most; True if a step was kept."""
        keys = self.sets.new_columns
        reduced = self._reduced()
        order: list[tuple[float, float, int]] = []
        for k, c in enumerate(keys):
            if reduced[k] < -1e-6:
                order.append((float(reduced[k]), float(rng.random()), c * 2 + 1))
            if reduced[k] > 1e-6 and self.commitments[c] > 0:
                order.append((-float(reduced[k]), float(rng.random()), c * 2))
        for _bound, _tie, code in sorted(order):
            if self.expired():
                return False
            c, up = divmod(code, 2)
            if self._line({c: 1 if up else -1}):
                return True
        return False

    def swap(self, rng: np.random.Generator) -> bool:
        """k nodes of one column for k of another, the pairs with the most negative bound first."""
        keys = self.sets.new_columns
        reduced = self._reduced()
        pairs = [
            (reduced[b] - reduced[a], rng.random(), ca, cb)
            for a, ca in enumerate(keys)
            if self.commitments[ca] > 0
            for b, cb in enumerate(keys)
            if cb != ca and reduced[b] - reduced[a] < -1e-6
        ]
        best_pairs = sorted(pairs)[:SWAPS]
        return any(not self.expired() and self._line({ca: -1, cb: 1}) for _b, _t, ca, cb in best_pairs)

    def relocate_commit(self, rng: np.random.Generator) -> bool:
        """A run moved onto a committable offering off spot, with its gang's nodes committed there on the
        cheapest column serving its whole run; the best-estimated such move per run, scored exactly."""
        sets = self.sets
        order = rng.permutation(sorted(self.placements)).tolist()
        for r in order:
            if self.expired():
                return False
            current = self.placements[r]
            nodes = sets.runs[r].job.nodes
            team = self.teams[sets.runs[r].job.team]
            self.occupancy.remove(sets, current, team)
            tried: tuple[float, TrainingOption, tuple, np.ndarray, dict[int, int]] | None = None
            for option in self.by_run.get(r, []):
                if option.tier != Capacity.NON_SPOT or not sets.columns_on.get(option.offering):
                    continue
                for c in sorted(
                    (c for c in sets.columns_on[option.offering] if not sets.columns[c].existing),
                    key=lambda c: sets.columns[c].cost_per_node,
                ):
                    change = self._commit_change({c: nodes})
                    if change is None:
                        continue
                    fixed, touched, committed, commitments = change
                    column = sets.columns[c]
                    ok = feasible_starts(sets, option, committed, self.limits, self.occupancy, team)
                    ok = ok[(ok >= column.start) & (ok + option.periods <= column.end)]
                    if not ok.size:
                        continue
                    idle = (committed - self.occupancy.non_spot)[option.offering]
                    # the start where the most of the new nodes would sit idle without the run
                    run_idle = np.array([idle[s : s + option.periods].min() for s in ok])
                    placed = at(sets, option, int(ok[int(np.argmax(run_idle))]))
                    if (placed.offering, placed.tier, placed.start) == (
                        current.offering, current.tier, current.start
                    ):  # fmt: skip
                        continue
                    self.occupancy.add(sets, placed, team)
                    periods = np.union1d(np.union1d(touched, _periods(current)), _periods(placed))
                    delta, store = self._try(
                        periods, committed, self.occupancy, fixed + placed.cost_usd - current.cost_usd
                    )
                    self.occupancy.remove(sets, placed, team)
                    if delta < -1e-6 and (tried is None or delta < tried[0]):
                        tried = (delta, placed, store, committed, commitments)
                    break  # the cheapest column that fits stands for the offering
            if tried is not None:
                _delta, placed, store, committed, commitments = tried
                trial = dict(self.placements)
                trial[r] = placed
                if self._valid(commitments, trial):
                    self.occupancy.add(sets, placed, team)
                    self._shift(committed)
                    self.commitments, self.committed = commitments, committed
                    self.model.set_commitments(committed)
                    self._store(*store)
                    self._apply_run(r, placed)
                    return True
            self.occupancy.add(sets, current, team)
        return False


def _periods(option: TrainingOption) -> np.ndarray:
    return np.arange(option.start, option.start + option.periods)
