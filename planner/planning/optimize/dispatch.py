"""Inference dispatched period by period in whole nodes, for fixed commitments and placed training.

With commitments R fixed and every training run placed, nothing couples two periods any more: each
period is a small covering problem (serve every service's replicas on non-spot nodes, which the
commitments cover first and on-demand nodes beyond them, the way clouds bill, or on spot nodes,
within capacity and burst limits; placed non-spot training shares the same commitments). Its rows and columns
are the same in every period, only the right-hand sides change, so one HiGHS model is built once (in
numpy, no PuLP objects) and re-solved per distinct period with new row bounds, warm-started from the
previous basis. Periods with the same demand and training occupancy share a solution.

Whole nodes: fractional node counts are first fixed one at a time by LP diving (floor or ceil,
whichever LP is cheaper) where there are few enough distinct periods, then rounded up; where rounding
would cross ``max_nodes``, that offering's counts are capped at their floor and the period re-solved,
so every written period is feasible. The same model prices the pool (its duals) for
``schedule.improve_schedule`` and ``commitments.tune_commitments``.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from models.billing import pool_row
from models.errors import SolverError
from models.tiers import Capacity, Tier
from planner.planning.optimize.build import replica_penalty
from planner.planning.optimize.node_need import node_needs
from planner.planning.problem.sets import PlanningSets, TrainingOption
from planner.solvers.highs import HighsModel, RowwiseModel
from planner.solvers.work import meter

EPS = 1e-6
DIVE_PERIODS = 2_000


@dataclass
class Occupancy:
    """Nodes (per offering) and GPUs (per team) that placed training holds in every period (a gang in a
    Capacity Block: its team's GPUs only, its nodes are the block's)."""

    non_spot: np.ndarray  # (offerings, periods) non-spot nodes held by training (commitments first)
    spot: np.ndarray  # (offerings, periods) spot nodes held by training
    team_gpus: np.ndarray  # (teams, periods)
    # (periods,) the Capacity Block fees paid at each start (purchase.max_upfront_usd: payments.block_room)
    block_fees: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @classmethod
    def empty(cls, offerings: int, teams: int, periods: int) -> Occupancy:
        return cls(
            np.zeros((offerings, periods)), np.zeros((offerings, periods)), np.zeros((teams, periods)),
            np.zeros(periods),
        )  # fmt: skip

    @classmethod
    def of(cls, sets: PlanningSets, placements: Iterable[TrainingOption]) -> Occupancy:
        """What ``placements`` hold in every period of the horizon."""
        teams = team_index(sets)
        occupancy = cls.empty(len(sets.offerings), len(teams), sets.scenario.horizon.periods)
        for option in placements:
            occupancy.add(sets, option, teams[sets.runs[option.run].job.team])
        return occupancy

    def add(self, sets: PlanningSets, option: TrainingOption, team: int, sign: int = 1) -> None:
        nodes = sign * sets.runs[option.run].job.nodes
        window = slice(option.start, option.start + option.periods)
        if not option.tier.own_nodes:  # a block's or flex-start nodes are their own: only the team's GPUs
            held = self.non_spot if option.tier == Capacity.NON_SPOT else self.spot
            held[option.offering, window] += nodes
        elif len(self.block_fees):  # and its fee, paid at its start
            self.block_fees[option.start] += sign * option.cost_usd
        self.team_gpus[team, window] += nodes * sets.offerings[option.offering].gpus_per_node

    def remove(self, sets: PlanningSets, option: TrainingOption, team: int) -> None:
        self.add(sets, option, team, sign=-1)

    def copy(self) -> Occupancy:
        return Occupancy(
            self.non_spot.copy(), self.spot.copy(), self.team_gpus.copy(), self.block_fees.copy()
        )

    def signature(self, demand: np.ndarray) -> np.ndarray:
        """(periods, ...) rows: two periods with equal rows have the same covering problem."""
        return np.vstack([demand, self.non_spot, self.spot, self.team_gpus]).T


@dataclass
class Distinct:
    """Periods grouped by signature, in order of first appearance (neighbours warm-start best)."""

    first: np.ndarray  # (groups,) the first period of each group
    of_period: np.ndarray  # (periods,) group of each period
    counts: np.ndarray  # (groups,) periods per group

    @classmethod
    def of(cls, sets: PlanningSets, occupancy: Occupancy) -> Distinct:
        # other commitments serving (a purchase step, owned nodes delivered) make a period different
        # even at equal demand and training
        _, first, inverse, counts = np.unique(
            np.hstack([occupancy.signature(sets.demand), sets.segment[:, None]]),
            axis=0,
            return_index=True,
            return_inverse=True,
            return_counts=True,
        )
        order = np.argsort(first)
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        return cls(first[order], rank[inverse.reshape(-1)], counts[order])


@dataclass
class Dispatch:
    """Per period: nodes serving each service on each (offering, tier), and replicas left unserved."""

    rows: (
        np.ndarray
    )  # structured: period, offering, TIER_CODE, service, nodes serving (node-equivalents), replicas
    unserved: np.ndarray  # (services, periods) replicas
    held_cost_usd: float  # on-demand (inference and non-spot training beyond R) + spot inference, whole nodes
    lp_cost_usd: float  # the same periods' LP optimum (fractional nodes): a bound for these R and training
    distinct_periods: int
    seconds: float  # measured wall seconds, for reports only
    repaired_periods: int = 0  # periods where rounding up crossed max_nodes and was repaired
    work: float = 0.0  # nominal seconds of counted work it took (planner/solvers/work.py): what decides


#: The integer code of each capacity kind in this module's arrays: the third column of
#: ``PeriodModel.columns``, the int8 ``tier`` field of ``Dispatch.rows`` and the first axis of the
#: per-kind arrays of ``dispatch``. ``CODE_CAPACITY[code]`` is the kind back.
TIER_CODE: dict[Capacity, int] = {Capacity.NON_SPOT: 0, Capacity.SPOT: 1}
CODE_CAPACITY: tuple[Capacity, ...] = tuple(sorted(TIER_CODE, key=TIER_CODE.__getitem__))
NON_SPOT_CODE = TIER_CODE[Capacity.NON_SPOT]
SPOT_CODE = TIER_CODE[Capacity.SPOT]


def max_nodes(sets: PlanningSets) -> np.ndarray:
    """Each offering's capacity limit in nodes (inf where it has none)."""
    return np.array([o.max_nodes if o.max_nodes is not None else math.inf for o in sets.offerings])


def team_index(sets: PlanningSets) -> dict[str, int]:
    return {team.name: m for m, team in enumerate(sets.scenario.teams)}


class PeriodModel:
    """One period's covering LP, built once; re-solved per period with new right-hand sides.

    Rows: demand per service; spot nodes held (``sum x_spot <= NS``); per offering with non-spot use,
    the billing row ``sum x_non_spot - NO <= R_t - training`` (the nodes committed in period t cover
    non-spot use first, NO on-demand nodes the rest; no NO where the offering sells none, e.g. owned
    servers); capacity ``NO + NS <= max_nodes - R_t - spot training``; team burst limits. ``committed``
    is (offerings, periods): R_t per period (commitments serve only inside their columns' windows).
    Its columns come from ``sets.serve_tiers``, so build.py's rules 9-11 hold by construction (no spot
    column for a latency-critical service, no kind an offering does not sell); owned nodes before
    their delivery (rule 15) keep their column but get no room in the billing row (R_t is 0 there).
    The billing rows are called the offering's *pool* below: its commitments plus on-demand nodes.
    ``rounding`` adds one row per group of services sharing offerings (``node_need.py``): their on-demand
    and spot nodes at least the period's whole-node count beyond the nodes committed less non-spot
    training, so the LP pays rounding up to whole nodes (commitment tuning: ``commitments.py``).
    """

    def __init__(
        self,
        sets: PlanningSets,
        committed: np.ndarray,
        whole: bool = False,
        every_pool: bool = False,
        rounding: bool = False,
    ) -> None:
        self.sets = sets
        p = sets.period_hours
        offerings = sets.offerings
        teams = team_index(sets)

        def sells_non_spot(o: int) -> bool:
            has_commitment = bool(committed[o].max(initial=0.0) > 0) or (every_pool and sets.committable(o))
            return offerings[o].on_demand_usd_h is not None or has_commitment

        columns: list[tuple[int, int, int]] = []  # (service, offering, tier code)
        for (i, o), kinds in sorted(sets.serve_tiers.items()):
            for kind in kinds:
                if kind == Capacity.NON_SPOT and not sells_non_spot(o):
                    continue
                columns.append((i, o, TIER_CODE[kind]))
        training_non_spot = {option.offering for option in sets.options if option.tier == Capacity.NON_SPOT}
        pool_offerings = sorted(
            {o for (_i, o, t) in columns if t == NON_SPOT_CODE}
            | {o for o in training_non_spot if sells_non_spot(o)}
        )
        held_keys = sorted(
            {(SPOT_CODE, o) for (_i, o, t) in columns if t == SPOT_CODE}
            | {(NON_SPOT_CODE, o) for o in pool_offerings if offerings[o].on_demand_usd_h is not None}
        )
        self.columns = np.array(columns, dtype=np.int64).reshape(-1, 3)
        self.held_keys = held_keys
        n_x, n_held, n_services = len(columns), len(held_keys), len(sets.services)
        self.n_x, self.n_held = n_x, n_held
        self.held_col = {key: n_x + k for k, key in enumerate(held_keys)}
        self.unserved_col = n_x + n_held  # + i
        n_cols = n_x + n_held + n_services
        cost = np.zeros(n_cols)
        upper = np.full(n_cols, math.inf)
        for key, col in self.held_col.items():
            tier, o = key
            cost[col] = (offerings[o].price(Tier.SPOT if tier == SPOT_CODE else Tier.ON_DEMAND) or 0.0) * p
            if offerings[o].max_nodes is not None:
                upper[col] = offerings[o].max_nodes
        for i in range(n_services):
            cost[self.unserved_col + i] = replica_penalty(sets, i) * p
        rows: list[list[tuple[int, float]]] = []
        # demand rows first (one per service), then spot-held, pool, capacity and burst rows
        demand_rows: list[list[tuple[int, float]]] = [[] for _ in range(n_services)]
        spot_keys = [key for key in held_keys if key[0] == SPOT_CODE]
        held_rows: dict[tuple[int, int], list[tuple[int, float]]] = {key: [] for key in spot_keys}
        pool_use: dict[int, list[tuple[int, float]]] = {o: [] for o in pool_offerings}
        burst_rows: dict[int, list[tuple[int, float]]] = defaultdict(list)
        bursting = {m for m, team in enumerate(sets.scenario.teams) if team.burst_gpus is not None}
        for col, (i, o, tier) in enumerate(columns):
            demand_rows[i].append((col, sets.replicas_per_node[(i, o)]))
            if tier == NON_SPOT_CODE:
                pool_use[o].append((col, 1.0))
            else:
                held_rows[(tier, o)].append((col, 1.0))
            m = teams[sets.services[i].team]
            if m in bursting:
                burst_rows[m].append((col, float(offerings[o].gpus_per_node)))
        # the billing rule per offering: its commitments (the row's bound, set per period) cover non-spot
        # use first, on-demand nodes the rest
        pool_rows = {
            o: pool_row(pool_use[o], [], self.held_col.get((NON_SPOT_CODE, o))) for o in pool_offerings
        }
        for i in range(n_services):
            demand_rows[i].append((self.unserved_col + i, 1.0))
        rows += demand_rows
        for key in spot_keys:
            rows.append([*held_rows[key], (self.held_col[key], -1.0)])
        self.pool_offerings = pool_offerings
        rows += [pool_rows[o] for o in self.pool_offerings]
        self.cap_offerings = sorted({o for (_t, o) in held_keys if offerings[o].max_nodes is not None})
        rows += [
            [(self.held_col[(t, o)], 1.0) for t in (NON_SPOT_CODE, SPOT_CODE) if (t, o) in self.held_col]
            for o in self.cap_offerings
        ]
        self.burst_teams = sorted(burst_rows)
        rows += [burst_rows[m] for m in self.burst_teams]
        # rounding: per group of services sharing offerings, their whole nodes (node_need.py): on-demand and
        # spot nodes, and what unserved replicas free, at least the period's whole count beyond the nodes
        # committed less non-spot training (the row's lower bound, set per period)
        needs = node_needs(sets) if rounding else []
        self.round_member = np.zeros((len(needs), len(offerings)))
        for g, need in enumerate(needs):
            self.round_member[g, sorted(need.offerings)] = 1.0
            rows.append(
                [(self.held_col[key], 1.0) for key in held_keys if key[1] in need.offerings]
                + [(self.unserved_col + i, need.unserved[i]) for i in need.services]
            )
        self.round_need = np.array([need.nodes(sets.demand) for need in needs]).reshape(
            len(needs), sets.demand.shape[1]
        )
        self.n_rows = len(rows)
        lower = np.full(self.n_rows, -math.inf)
        upper_row = np.zeros(self.n_rows)
        upper_row[:n_services] = math.inf
        starts = np.cumsum([0] + [len(row) for row in rows]).astype(np.int32)
        lp = RowwiseModel(
            cost=cost,
            col_lower=np.zeros(n_cols),
            col_upper=upper,
            row_lower=lower,
            row_upper=upper_row,
            start=starts,
            index=np.array([c for row in rows for c, _ in row], dtype=np.int32),
            value=np.array([v for row in rows for _, v in row], dtype=float),
        )
        self.highs = HighsModel(lp, quiet=True, output_flag=False)
        self.whole = whole
        if whole and n_held:
            self.highs.set_options(mip_rel_gap=1e-4)
            self.highs.make_integer(np.arange(n_x, n_x + n_held, dtype=np.int32))
        self.cost = cost
        self.col_upper = upper
        first_pool = n_services + len(spot_keys)
        self.pool_rows = np.arange(first_pool, first_pool + len(self.pool_offerings), dtype=np.int32)
        first_cap = first_pool + len(self.pool_offerings)
        self.cap_rows = np.arange(first_cap, first_cap + len(self.cap_offerings), dtype=np.int32)
        first_burst = first_cap + len(self.cap_offerings)
        self.burst_rows = np.arange(first_burst, first_burst + len(self.burst_teams), dtype=np.int32)
        first_round = first_burst + len(self.burst_teams)
        self.round_rows = np.arange(first_round, first_round + len(needs), dtype=np.int32)
        self.demand_rows = np.arange(n_services, dtype=np.int32)
        self.held_cols = np.arange(n_x, n_x + n_held, dtype=np.int32)
        self.cap_cols = [
            np.array([k for k, (_t, oo) in enumerate(held_keys) if oo == o], dtype=np.int64)
            for o in self.cap_offerings
        ]
        self.cap_max = np.array([offerings[o].max_nodes for o in self.cap_offerings], dtype=float)
        self.set_commitments(committed)
        burst = [sets.scenario.teams[m].burst_gpus for m in self.burst_teams]
        self.burst_base = np.array(burst, dtype=float)

    def solve_at(
        self, t: int, occupancy: Occupancy, dive: bool = False, lp_only: bool = False
    ) -> tuple[np.ndarray, np.ndarray, float, bool]:
        """Period ``t``: column values with whole held nodes, the LP cost, and whether rounding up
        crossed ``max_nodes`` and needed a repair.

        ``dive``: before rounding up, fix fractional node counts one at a time (the dearest first) to
        whichever of floor and ceil gives the cheaper LP: closer to the whole-node optimum than plain
        rounding up, at two LP re-solves per fractional count.
        """
        highs = self.highs
        demand = self.sets.demand[:, t].astype(float)
        pool_train, other_train, team_gpus = (
            occupancy.non_spot[:, t],
            occupancy.spot[:, t],
            occupancy.team_gpus[:, t],
        )
        n_s = len(demand)
        highs.set_row_bounds(self.demand_rows, demand, np.full(n_s, math.inf))
        if len(self.pool_rows):
            room = self.pool_base[:, t] - pool_train[self.pool_offerings]
            highs.set_row_bounds(self.pool_rows, np.full(len(room), -math.inf), room)
        cap_room = None
        if len(self.cap_rows):
            cap_room = self.cap_max - self.cap_committed[:, t] - other_train[self.cap_offerings]
            highs.set_row_bounds(self.cap_rows, np.full(len(cap_room), -math.inf), cap_room)
        if len(self.burst_rows):
            room = self.burst_base - team_gpus[self.burst_teams]
            highs.set_row_bounds(self.burst_rows, np.full(len(room), -math.inf), room)
        if len(self.round_rows):
            short = self.round_need[:, t] - self.round_committed[:, t] + self.round_member @ pool_train
            short[short <= 0] = -math.inf  # met by the commitments alone
            highs.set_row_bounds(self.round_rows, short, np.full(len(short), math.inf))
        values, lp_cost = self._run()
        if lp_only:
            return values, values[self.held_cols], lp_cost, False
        if self.whole:
            return values, np.round(values[self.held_cols]), lp_cost, False
        lower = np.zeros(self.n_held)
        upper = self.col_upper[self.held_cols].copy()
        dived = self._dive(values, lower, upper) if dive else None
        if dived is not None:
            if self._rounded_cost(dived) <= self._rounded_cost(values):
                values = dived
            else:  # diving is greedy: fixing one count at its floor can force a dearer node elsewhere
                lower[:] = 0.0
                upper[:] = self.col_upper[self.held_cols]
                self._bound(np.arange(self.n_held), lower, upper)
        repaired = False
        while True:  # round up; where that crosses max_nodes, cap at the floor and re-solve
            held = values[self.held_cols]
            whole = np.ceil(held - EPS).clip(min=0)
            over = self._over_cap(whole, cap_room)
            if not over:
                break
            repaired = True
            upper[over] = np.floor(held[over] + EPS)
            self._bound(np.array(over), lower[over], upper[over])
            values, _ = self._run()
        if repaired or dived is not None:  # restore the column bounds for the next period
            self._bound(np.arange(self.n_held), np.zeros(self.n_held), self.col_upper[self.held_cols])
        values = values.copy()
        values[self.held_cols] = whole
        return values, whole, lp_cost, repaired

    def set_commitments(self, committed: np.ndarray) -> None:
        """New commitments ((offerings, periods) nodes serving): they only move right-hand sides."""
        self.pool_base = committed[self.pool_offerings].astype(float)
        self.cap_committed = committed[self.cap_offerings].astype(float)
        self.round_committed = self.round_member @ committed  # per rounding group: its nodes committed

    def lp_at(self, t: int, occupancy: Occupancy) -> float:
        """Period ``t``'s LP value (fractional nodes); ``duals`` and ``commitment_gradient`` read its rows."""
        return self.solve_at(t, occupancy, lp_only=True)[2]

    def duals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The last solve's duals of the pool, capacity and rounding rows (in their orders)."""
        if not self.cost.size:
            return np.zeros(len(self.pool_rows)), np.zeros(len(self.cap_rows)), np.zeros(len(self.round_rows))
        duals = np.asarray(self.highs.solution().row_dual)
        return duals[self.pool_rows], duals[self.cap_rows], duals[self.round_rows]

    def commitment_gradient(self) -> np.ndarray:
        """A subgradient of the last solve's LP value in the nodes committed per offering: the pool rows'
        duals (more room), less the capacity rows' (less room) and the rounding rows' (less shortfall)."""
        pool, cap, rounding = self.duals()
        gradient = np.zeros(len(self.sets.offerings))
        gradient[self.pool_offerings] += pool
        gradient[self.cap_offerings] -= cap
        return gradient - rounding @ self.round_member

    def _run(self) -> tuple[np.ndarray, float]:
        if not self.cost.size:  # nothing to serve (a scenario of training only): HiGHS says "Empty"
            return np.zeros(0), 0.0
        outcome = self.highs.run()
        if not outcome.optimal:  # slack columns make every period feasible: this is a solver fault
            raise SolverError(f"HiGHS stopped with '{outcome.status_text}' on a period")
        values = np.asarray(self.highs.col_value())
        return values, float(self.cost @ values)

    def _unserved(self, values: np.ndarray) -> float:
        return float(values[self.unserved_col :].sum())

    def _bound(self, held: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        cols = self.held_cols[held]
        self.highs.set_col_bounds(cols, lower.astype(float), upper.astype(float))

    def _dive(
        self, values: np.ndarray, lower: np.ndarray, upper: np.ndarray, steps: int = 24
    ) -> np.ndarray | None:
        """Fix fractional node counts (dearest first) at floor or ceil; None if none was fractional."""
        price = self.cost[self.held_cols]
        changed = False
        for _ in range(steps):
            held = values[self.held_cols]
            frac = held - np.floor(held)
            fractional = np.flatnonzero((frac > 1e-6) & (frac < 1 - 1e-6))
            if not fractional.size:
                break
            k = int(fractional[np.argmax(price[fractional])])
            changed = True
            floor = math.floor(held[k])
            one = np.array([k])
            lower_k = lower[k]
            self._bound(one, np.array([lower_k]), np.array([floor]))
            down, down_cost = self._run()
            if self._unserved(down) > self._unserved(values) + 1e-9:
                down_cost = math.inf  # a fraction of a replica left unserved is never the cheaper way
            if floor + 1 <= upper[k]:
                self._bound(one, np.array([floor + 1.0]), np.array([upper[k]]))
                up, up_cost = self._run()
            else:
                up, up_cost = down, math.inf
            if down_cost <= up_cost:
                upper[k] = floor
                values = down
            else:
                lower[k] = floor + 1.0
                values = up
            self._bound(one, np.array([lower[k]]), np.array([upper[k]]))
        return values if changed else None

    def _rounded_cost(self, values: np.ndarray) -> float:
        """Cost of ``values`` with every held node count rounded up (unserved slack at its penalty)."""
        rounded = values.copy()
        rounded[self.held_cols] = np.ceil(values[self.held_cols] - EPS).clip(min=0)
        return float(self.cost @ rounded)

    def _over_cap(self, whole: np.ndarray, cap_room: np.ndarray | None) -> list[int]:
        """Held columns of offerings whose whole node counts cross max_nodes (fractional ones only)."""
        if cap_room is None:
            return []
        over: list[int] = []
        for row, cols in enumerate(self.cap_cols):
            if whole[cols].sum() > cap_room[row] + EPS:
                over += [int(k) for k in cols]
        return over


def dispatch(
    sets: PlanningSets,
    committed: np.ndarray,
    occupancy: Occupancy,
    progress: Callable[[str], None] | None = None,
    whole: bool = False,
    dive: bool | None = None,
) -> Dispatch:
    """Serve inference in every period at least cost, given commitments and placed training.

    ``whole`` solves each period as a MILP instead (exact, ~20x slower: for tests and checks);
    ``dive`` None dives where there are at most ``DIVE_PERIODS`` distinct periods.
    """
    began, counted = time.perf_counter(), meter().units
    model = PeriodModel(sets, committed, whole)
    periods = sets.demand.shape[1]
    groups = Distinct.of(sets, occupancy)
    n_groups = len(groups.first)
    if dive is None:  # diving costs ~2 LPs per fractional node count: affordable on fewer periods
        dive = n_groups <= DIVE_PERIODS
    n_s = len(sets.services)
    solutions: list[np.ndarray] = []
    lp_costs = np.zeros(n_groups)
    held_costs = np.zeros(n_groups)
    repaired = 0
    for u, t in enumerate(groups.first):
        values, held_whole, lp_cost, fixed = model.solve_at(int(t), occupancy, dive)
        solutions.append(values)
        lp_costs[u] = lp_cost
        held_costs[u] = float(model.cost[model.held_cols] @ held_whole)
        repaired += fixed
        if progress is not None and u % 1000 == 999:
            progress(f"dispatch: {u + 1:,} of {n_groups:,} distinct periods")
    inverse = groups.of_period
    # rows per distinct period, then repeated for every period that shares it
    per_unique: list[np.ndarray] = []
    unserved_u = np.zeros((n_s, n_groups))
    per_replica = np.array([sets.replicas_per_node[(int(i), int(o))] for i, o, _t in model.columns])
    for u in range(n_groups):
        values = solutions[u]
        t = int(groups.first[u])
        x = values[: model.n_x]
        nodes = x  # node-equivalents serving; realize.py makes them whole replicas on whole nodes
        keep = nodes > EPS
        per_unique.append(np.column_stack([model.columns[keep], nodes[keep], (x * per_replica)[keep]]))
        unserved_u[:, u] = values[model.unserved_col : model.unserved_col + n_s]
    dtype = np.dtype(
        [("period", np.int64), ("o", np.int64), ("tier", np.int8), ("i", np.int64), ("nodes", float),
         ("replicas", float)]
    )  # fmt: skip
    total_rows = sum(len(per_unique[inverse[t]]) for t in range(periods))
    rows = np.empty(total_rows, dtype=dtype)
    at = 0
    for t in range(periods):
        block = per_unique[inverse[t]]
        n = len(block)
        rows["period"][at : at + n] = t
        rows["i"][at : at + n] = block[:, 0]
        rows["o"][at : at + n] = block[:, 1]
        rows["tier"][at : at + n] = block[:, 2]
        rows["nodes"][at : at + n] = block[:, 3]
        rows["replicas"][at : at + n] = block[:, 4]
        at += n
    return Dispatch(
        rows=rows,
        unserved=unserved_u[:, inverse],
        held_cost_usd=float(held_costs @ groups.counts),
        lp_cost_usd=float(lp_costs @ groups.counts),
        distinct_periods=n_groups,
        seconds=time.perf_counter() - began,
        repaired_periods=repaired,
        work=meter().units - counted,
    )


@dataclass
class PoolPrices:
    """Per offering and period: what one more committed node would save inference (the LP dual of the
    pool row, >= 0) and the committed nodes nobody uses (the row's slack)."""

    price: np.ndarray  # (offerings, periods) USD per node for the period
    slack: np.ndarray  # (offerings, periods) nodes
    inference_usd: float  # the periods' LP cost (fractional nodes): what training moves try to lower
    period_usd: np.ndarray  # (periods,) the same, per period


def pool_prices(sets: PlanningSets, committed: np.ndarray, occupancy: Occupancy) -> PoolPrices:
    """Every period's LP, its pool duals and the pool's idle nodes (for moving training)."""
    model = PeriodModel(sets, committed)
    groups = Distinct.of(sets, occupancy)
    price = np.zeros((len(sets.offerings), len(groups.first)))
    slack = committed[:, groups.first] - occupancy.non_spot[:, groups.first]  # pools no service uses
    values = np.zeros(len(groups.first))
    for u, t in enumerate(groups.first):
        values[u] = model.lp_at(int(t), occupancy)
        if len(model.pool_rows):
            pool_dual = model.duals()[0]
            used = np.asarray(model.highs.solution().row_value)[model.pool_rows]
            room = model.pool_base[:, t] - occupancy.non_spot[model.pool_offerings, t]
            price[model.pool_offerings, u] = -pool_dual
            slack[model.pool_offerings, u] = room - used
    total = float(values @ groups.counts)
    inverse = groups.of_period
    return PoolPrices(price[:, inverse], np.maximum(slack[:, inverse], 0.0), total, values[inverse])
