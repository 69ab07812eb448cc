"""The hourly plan for fixed commitments: training starts placed period by period, then inference
dispatched period by period in whole nodes.

With commitments R fixed and every training run placed, nothing couples two periods any more: each
period is a small covering problem (serve every service's replicas from the committed pool left by
training, or from on-demand and spot nodes, within capacity and burst limits). Its rows and columns
are the same in every period, only the right-hand sides change, so one HiGHS model is built once (in
numpy, no PuLP objects) and re-solved per distinct period with new row bounds, warm-started from the
previous basis. Periods with the same demand and training occupancy share a solution.

Whole nodes: each period's LP is rounded up (``ceil``) per offering and tier; where that would cross a
``max_nodes`` limit, that offering's node counts are capped at their floor and the period re-solved, so
every written period is feasible. The rounding costs at most one node per offering and tier in use.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from planner.optimize.build import replica_penalty
from planner.optimize.sets import ON_DEMAND, POOL, SPOT, TERM_TIER, PlanningSets, TrainingOption
from planner.optimize.solve import _quiet_stdout

EPS = 1e-6
DIVE_PERIODS = 2_000


@dataclass
class Occupancy:
    """Nodes (per offering) and GPUs (per team) that placed training holds in every period."""

    pool: np.ndarray  # (offerings, periods) committed nodes used by training
    other: np.ndarray  # (offerings, periods) on-demand/spot nodes held by training
    team_gpus: np.ndarray  # (teams, periods)

    @classmethod
    def empty(cls, offerings: int, teams: int, periods: int) -> Occupancy:
        return cls(np.zeros((offerings, periods)), np.zeros((offerings, periods)), np.zeros((teams, periods)))

    def add(self, sets: PlanningSets, option: TrainingOption, team: int) -> None:
        nodes = sets.runs[option.run].job.nodes
        window = slice(option.start, option.start + option.periods)
        (self.pool if option.tier == POOL else self.other)[option.offering, window] += nodes
        self.team_gpus[team, window] += nodes * sets.offerings[option.offering].gpus_per_node


@dataclass
class Schedule:
    placements: list[TrainingOption]
    unserved_runs: list[int]
    occupancy: Occupancy
    moved: int = 0  # runs placed away from the preferred start, offering or tier
    added: dict[tuple[int, str], int] = field(default_factory=dict)  # (offering, term) -> nodes committed


@dataclass
class Dispatch:
    """Per period: nodes serving each service on each (offering, tier), and replicas left unserved."""

    rows: np.ndarray  # structured: period, offering, tier code, service, nodes (held tiers: whole-node share)
    unserved: np.ndarray  # (services, periods) replicas
    held_cost_usd: float  # on-demand + spot node cost of inference, whole nodes
    lp_cost_usd: float  # the same periods' LP optimum (fractional nodes): a bound for these R and training
    distinct_periods: int
    seconds: float
    repaired_periods: int = 0
    notes: list[str] = field(default_factory=list)


TIER_CODES = (POOL, ON_DEMAND, SPOT)


def _team_index(sets: PlanningSets) -> dict[str, int]:
    return {team.name: m for m, team in enumerate(sets.scenario.teams)}


def _combos(sets: PlanningSets) -> dict[tuple[int, int, str], TrainingOption]:
    """One option per (run, offering, tier): duration and cost do not depend on the start."""
    combos: dict[tuple[int, int, str], TrainingOption] = {}
    for option in sets.options:
        combos.setdefault((option.run, option.offering, option.tier), option)
    return combos


def schedule_training(
    sets: PlanningSets, committed: np.ndarray, preferred: dict[int, tuple[int, str, int]]
) -> Schedule:
    """Place every run at a whole period so that, period by period, pool runs fit the commitments,
    nothing crosses ``max_nodes`` and no team's training crosses its burst limit.

    Each run starts where the cluster model put it (``preferred``: run -> offering, tier, start) when
    that fits, else at the nearest start in its window that does, else on its cheapest other offering
    and tier that fits (never moving a run onto spot, so ``max_spot_share`` keeps holding); a run
    that fits nowhere is left unserved. A gang on the pool needs at least its node count committed:
    where rounded commitments fall short, the missing nodes are committed (on the offering's cheapest
    term) if capacity allows, and that cost counts in the choice. Big gangs go first: they are the
    hardest to fit. ``committed`` (nodes per offering) is updated in place.
    """
    periods = sets.scenario.horizon.periods
    teams = _team_index(sets)
    occupancy = Occupancy.empty(len(sets.offerings), len(teams), periods)
    combos = _combos(sets)
    by_run: dict[int, list[TrainingOption]] = defaultdict(list)
    for option in combos.values():
        by_run[option.run].append(option)
    burst = np.array([t.burst_gpus if t.burst_gpus is not None else math.inf for t in sets.scenario.teams])
    cap = np.array([o.max_nodes if o.max_nodes is not None else math.inf for o in sets.offerings])
    placements: list[TrainingOption] = []
    unserved: list[int] = []
    added: dict[tuple[int, str], int] = defaultdict(int)
    moved = 0

    def slack(r: int) -> int:
        run = sets.runs[r]
        return run.end_period - run.first_period - min(o.periods for o in by_run[r]) if by_run[r] else 0

    order = sorted(range(len(sets.runs)), key=lambda r: (-sets.runs[r].job.nodes, slack(r), r))
    for r in order:
        run = sets.runs[r]
        team = teams[run.job.team]
        wanted = preferred.get(r)
        candidates: list[tuple[TrainingOption, int | None]] = []
        if wanted is not None and (r, wanted[0], wanted[1]) in combos:
            candidates.append((combos[(r, wanted[0], wanted[1])], wanted[2]))
        wanted_tier = wanted[1] if wanted else None
        for option in sorted(by_run.get(r, []), key=lambda opt: opt.cost_usd):
            if wanted is not None and (option.offering, option.tier) == wanted[:2]:
                continue
            if option.tier == SPOT and wanted_tier != SPOT:
                continue  # moving onto spot could break max_spot_share
            candidates.append((option, None))
        candidates.sort(key=lambda item: (item[1] is None, _raise_cost(sets, item[0], committed, occupancy)))
        placed = None
        for rank, (option, start) in enumerate(candidates):
            raise_by = _shortfall(sets, option, committed, cap, occupancy)
            if raise_by is None:
                continue
            committed[option.offering] += raise_by
            begin = _first_fit(sets, option, start, committed, cap, burst, occupancy, team)
            if begin is None:
                committed[option.offering] -= raise_by
                continue
            if raise_by:
                added[(option.offering, _cheapest_term(sets, option.offering))] += raise_by
            placed = _at(sets, option, begin)
            moved += rank > 0 or begin != start
            break
        if placed is None:
            unserved.append(r)
            continue
        occupancy.add(sets, placed, team)
        placements.append(placed)
    placements.sort(key=lambda option: option.run)
    return Schedule(placements, sorted(unserved), occupancy, moved, dict(added))


def _cheapest_term(sets: PlanningSets, o: int) -> str:
    offering = sets.offerings[o]
    return min(sets.terms[o], key=lambda term: offering.price(TERM_TIER[term]) or math.inf)


def _shortfall(
    sets: PlanningSets, option: TrainingOption, committed: np.ndarray, cap: np.ndarray, occupancy: Occupancy
) -> int | None:
    """Nodes to commit so a pool gang fits at all (0 if none needed); None if capacity forbids it."""
    if option.tier != POOL:
        return 0
    o = option.offering
    missing = max(0, math.ceil(sets.runs[option.run].job.nodes - committed[o] - EPS))
    if missing and (not sets.terms[o] or committed[o] + missing + occupancy.other[o].max() > cap[o] + EPS):
        return None
    return missing


def _raise_cost(
    sets: PlanningSets, option: TrainingOption, committed: np.ndarray, occupancy: Occupancy
) -> float:
    """The option's cost plus any commitment it forces (for ordering the fallbacks)."""
    if option.tier != POOL:
        return option.cost_usd
    o = option.offering
    missing = max(0.0, sets.runs[option.run].job.nodes - committed[o])
    if not missing:
        return option.cost_usd
    if not sets.terms[o]:
        return math.inf
    price = sets.offerings[o].price(TERM_TIER[_cheapest_term(sets, o)]) or 0.0
    return option.cost_usd + missing * price * sets.horizon_hours


def _at(sets: PlanningSets, option: TrainingOption, start: int) -> TrainingOption:
    block = sets.block_periods
    blocks = tuple(range(start // block, (start + option.periods - 1) // block + 1))
    return TrainingOption(
        option.run,
        option.offering,
        option.tier,
        start,
        option.periods,
        option.cost_usd,
        blocks,
        option.overhead,
    )


def _first_fit(
    sets: PlanningSets,
    option: TrainingOption,
    preferred: int | None,
    committed: np.ndarray,
    cap: np.ndarray,
    burst: np.ndarray,
    occupancy: Occupancy,
    team: int,
) -> int | None:
    """The feasible start nearest ``preferred`` (or the earliest), or None."""
    run = sets.runs[option.run]
    nodes = run.job.nodes
    o = option.offering
    last = run.end_period - option.periods
    if last < run.first_period:
        return None
    if option.tier == POOL:
        if committed[o] < nodes:
            return None
        room = committed[o] - occupancy.pool[o]
    else:
        room = cap[o] - committed[o] - occupancy.other[o]
    team_room = burst[team] - occupancy.team_gpus[team]
    gpus = nodes * sets.offerings[o].gpus_per_node
    fits = (room >= nodes - EPS) & (team_room >= gpus - EPS)  # per period
    # a start fits when every period it holds fits: a run of consecutive fitting periods >= length
    bad = np.concatenate([[0], np.cumsum(~fits)])
    starts = np.arange(run.first_period, last + 1)
    ok = starts[bad[starts + option.periods] - bad[starts] == 0]
    if not ok.size:
        return None
    if preferred is None:
        return int(ok[0])
    return int(ok[np.argmin(np.abs(ok - preferred))])


class PeriodModel:
    """One period's covering LP, built once; re-solved per period with new right-hand sides."""

    def __init__(
        self, sets: PlanningSets, committed: np.ndarray, whole: bool = False, every_pool: bool = False
    ) -> None:
        import highspy

        self.sets = sets
        p = sets.period_hours
        offerings = sets.offerings
        teams = _team_index(sets)
        columns: list[tuple[int, int, int]] = []  # (service, offering, tier code)
        for (i, o), tiers in sorted(sets.serve_tiers.items()):
            for tier in tiers:
                if tier == POOL and committed[o] <= 0 and not (every_pool and sets.terms[o]):
                    continue
                columns.append((i, o, TIER_CODES.index(tier)))
        held_keys = sorted({(t, o) for (_i, o, t) in columns if t != 0})
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
            cost[col] = (offerings[o].price(TIER_CODES[tier]) or 0.0) * p
            if offerings[o].max_nodes is not None:
                upper[col] = offerings[o].max_nodes
        for i in range(n_services):
            cost[self.unserved_col + i] = replica_penalty(sets, i) * p
        rows: list[list[tuple[int, float]]] = []
        # demand rows first (one per service), then held, pool, capacity and burst rows
        demand_rows: list[list[tuple[int, float]]] = [[] for _ in range(n_services)]
        held_rows: dict[tuple[int, int], list[tuple[int, float]]] = {key: [] for key in held_keys}
        pool_rows: dict[int, list[tuple[int, float]]] = defaultdict(list)
        burst_rows: dict[int, list[tuple[int, float]]] = defaultdict(list)
        bursting = {m for m, team in enumerate(sets.scenario.teams) if team.burst_gpus is not None}
        for col, (i, o, tier) in enumerate(columns):
            demand_rows[i].append((col, sets.replicas_per_node[(i, o)]))
            if tier == 0:
                pool_rows[o].append((col, 1.0))
            else:
                held_rows[(tier, o)].append((col, 1.0))
            m = teams[sets.services[i].team]
            if m in bursting:
                burst_rows[m].append((col, float(offerings[o].gpus_per_node)))
        for i in range(n_services):
            demand_rows[i].append((self.unserved_col + i, 1.0))
        rows += demand_rows
        for key in held_keys:
            rows.append([*held_rows[key], (self.held_col[key], -1.0)])
        self.pool_offerings = sorted(pool_rows)
        rows += [pool_rows[o] for o in self.pool_offerings]
        self.cap_offerings = sorted({o for (_t, o) in held_keys if offerings[o].max_nodes is not None})
        rows += [
            [(self.held_col[(t, o)], 1.0) for t in (1, 2) if (t, o) in self.held_col]
            for o in self.cap_offerings
        ]
        self.burst_teams = sorted(burst_rows)
        rows += [burst_rows[m] for m in self.burst_teams]
        self.n_rows = len(rows)
        lower = np.full(self.n_rows, -math.inf)
        upper_row = np.zeros(self.n_rows)
        upper_row[:n_services] = math.inf
        starts = np.cumsum([0] + [len(row) for row in rows]).astype(np.int32)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n_cols, self.n_rows
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, np.zeros(n_cols), upper
        lp.row_lower_, lp.row_upper_ = lower, upper_row
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n_cols, self.n_rows
        lp.a_matrix_.start_ = starts
        lp.a_matrix_.index_ = np.array([c for row in rows for c, _ in row], dtype=np.int32)
        lp.a_matrix_.value_ = np.array([v for row in rows for _, v in row], dtype=float)
        with _quiet_stdout(True):
            self.highs = highspy.Highs()
        self.highs.setOptionValue("output_flag", False)
        self.highs.passModel(lp)
        self.whole = whole
        if whole and n_held:
            self.highs.setOptionValue("mip_rel_gap", 1e-4)
            self.highs.changeColsIntegrality(
                n_held,
                np.arange(n_x, n_x + n_held, dtype=np.int32),
                np.array([highspy.HighsVarType.kInteger] * n_held),
            )
        self.cost = cost
        self.col_upper = upper
        first_pool = n_services + n_held
        self.pool_rows = np.arange(first_pool, first_pool + len(self.pool_offerings), dtype=np.int32)
        first_cap = first_pool + len(self.pool_offerings)
        self.cap_rows = np.arange(first_cap, first_cap + len(self.cap_offerings), dtype=np.int32)
        first_burst = first_cap + len(self.cap_offerings)
        self.burst_rows = np.arange(first_burst, first_burst + len(self.burst_teams), dtype=np.int32)
        self.demand_rows = np.arange(n_services, dtype=np.int32)
        self.held_cols = np.arange(n_x, n_x + n_held, dtype=np.int32)
        self.held_offering = np.array([o for (_t, o) in held_keys], dtype=np.int64)
        self.cap_cols = [
            np.array([k for k, (_t, oo) in enumerate(held_keys) if oo == o], dtype=np.int64)
            for o in self.cap_offerings
        ]
        self.cap_room_base = np.array(
            [offerings[o].max_nodes - committed[o] for o in self.cap_offerings], dtype=float
        )
        self.pool_base = np.array([committed[o] for o in self.pool_offerings], dtype=float)
        burst = [sets.scenario.teams[m].burst_gpus for m in self.burst_teams]
        self.burst_base = np.array(burst, dtype=float)

    def solve(
        self,
        demand: np.ndarray,
        pool_train: np.ndarray,
        other_train: np.ndarray,
        team_gpus: np.ndarray,
        dive: bool = False,
        lp_only: bool = False,
    ) -> tuple[np.ndarray, np.ndarray, float, bool]:
        """Column values with whole held nodes, the LP cost, and whether rounding needed a re-solve.

        ``dive``: before rounding up, fix fractional node counts one at a time (the dearest first) to
        whichever of floor and ceil gives the cheaper LP: closer to the whole-node optimum than plain
        rounding up, at two LP re-solves per fractional count.
        """
        highs = self.highs
        n_s = len(demand)
        highs.changeRowsBounds(n_s, self.demand_rows, demand.astype(float), np.full(n_s, math.inf))
        if len(self.pool_rows):
            room = self.pool_base - pool_train[self.pool_offerings]
            highs.changeRowsBounds(len(room), self.pool_rows, np.full(len(room), -math.inf), room)
        cap_room = None
        if len(self.cap_rows):
            cap_room = self.cap_room_base - other_train[self.cap_offerings]
            highs.changeRowsBounds(len(cap_room), self.cap_rows, np.full(len(cap_room), -math.inf), cap_room)
        if len(self.burst_rows):
            room = self.burst_base - team_gpus[self.burst_teams]
            highs.changeRowsBounds(len(room), self.burst_rows, np.full(len(room), -math.inf), room)
        values, lp_cost = self._run()
        if lp_only:
            return values, values[self.held_cols], lp_cost, False
        lower = np.zeros(self.n_held)
        upper = self.col_upper[self.held_cols].copy()
        changed = False
        if self.whole:
            return values, np.round(values[self.held_cols]), lp_cost, False
        if dive:
            values, changed = self._dive(values, lower, upper)
        while True:  # round up; where that crosses max_nodes, cap at the floor and re-solve
            held = values[self.held_cols]
            whole = np.ceil(held - EPS).clip(min=0)
            over = self._over_cap(whole, cap_room)
            if not over:
                break
            changed = True
            upper[over] = np.floor(held[over] + EPS)
            self._bound(np.array(over), lower[over], upper[over])
            values, _ = self._run()
        if changed:  # restore the column bounds for the next period
            self._bound(np.arange(self.n_held), np.zeros(self.n_held), self.col_upper[self.held_cols])
        values = values.copy()
        values[self.held_cols] = whole
        return values, whole, lp_cost, changed

    def set_commitments(self, committed: np.ndarray) -> None:
        """New commitments (nodes per offering): they only move right-hand sides."""
        self.pool_base = committed[self.pool_offerings].astype(float)
        maximum = np.array([self.sets.offerings[o].max_nodes for o in self.cap_offerings], dtype=float)
        self.cap_room_base = maximum - committed[self.cap_offerings]

    def lp(
        self, demand: np.ndarray, pool_train: np.ndarray, other_train: np.ndarray, team_gpus: np.ndarray
    ) -> tuple[float, np.ndarray, np.ndarray]:
        """The period's LP value (fractional nodes) and the duals of its pool and capacity rows."""
        self.solve(demand, pool_train, other_train, team_gpus, dive=False, lp_only=True)
        solution = self.highs.getSolution()
        duals = np.asarray(solution.row_dual)
        values = np.asarray(solution.col_value)
        return float(self.cost @ values), duals[self.pool_rows], duals[self.cap_rows]

    def _run(self) -> tuple[np.ndarray, float]:
        self.highs.run()
        values = np.asarray(self.highs.getSolution().col_value)
        return values, float(self.cost @ values)

    def _bound(self, held: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        cols = self.held_cols[held]
        self.highs.changeColsBounds(len(cols), cols, lower.astype(float), upper.astype(float))

    def _dive(
        self, values: np.ndarray, lower: np.ndarray, upper: np.ndarray, steps: int = 24
    ) -> tuple[np.ndarray, bool]:
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
        return values, changed

    def _over_cap(self, whole: np.ndarray, cap_room: np.ndarray | None) -> list[int]:
        """Held columns of offerings whose whole node counts cross max_nodes (fractional ones only)."""
        if cap_room is None:
            return []
        over: list[int] = []
        for row, cols in enumerate(self.cap_cols):
            if whole[cols].sum() > cap_room[row] + EPS:
                over += [int(k) for k in cols]
        return over


def distinct_periods(sets: PlanningSets, occupancy: Occupancy) -> tuple[np.ndarray, np.ndarray]:
    """One period per distinct (demand, training occupancy) vector, chronologically, and how many
    periods each stands for."""
    signature = np.vstack([sets.demand, occupancy.pool, occupancy.other, occupancy.team_gpus]).T
    _, first, counts = np.unique(signature, axis=0, return_index=True, return_counts=True)
    order = np.argsort(first)
    return first[order], counts[order]


def dispatch(
    sets: PlanningSets,
    committed: np.ndarray,
    occupancy: Occupancy,
    progress: callable | None = None,  # type: ignore[valid-type]
    whole: bool = False,
    dive: bool | None = None,
) -> Dispatch:
    """Serve inference in every period at least cost, given commitments and placed training."""
    began = time.perf_counter()
    model = PeriodModel(sets, committed, whole)
    demand = sets.demand.astype(float)
    periods = demand.shape[1]
    signature = np.vstack([demand, occupancy.pool, occupancy.other, occupancy.team_gpus]).T
    unique, first, inverse = np.unique(signature, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(first)  # chronological: neighbouring periods warm-start each other best
    if dive is None:  # diving costs ~2 LPs per fractional node count: affordable on fewer periods
        dive = len(unique) <= DIVE_PERIODS
    n_s = len(sets.services)
    n_o = len(sets.offerings)
    solutions: dict[int, np.ndarray] = {}
    lp_costs = np.zeros(len(unique))
    held_costs = np.zeros(len(unique))
    repaired = 0
    for step, u in enumerate(order):
        t = int(first[u])
        values, whole, lp_cost, fixed = model.solve(
            demand[:, t], occupancy.pool[:, t], occupancy.other[:, t], occupancy.team_gpus[:, t], dive
        )
        solutions[int(u)] = values
        lp_costs[u] = lp_cost
        held_costs[u] = float(model.cost[model.n_x : model.n_x + model.n_held] @ whole)
        repaired += fixed
        if progress is not None and step % 1000 == 999:
            progress(f"dispatch: {step + 1:,} of {len(unique):,} distinct periods")
    count = np.bincount(inverse, minlength=len(unique))
    # rows per distinct period, then repeated for every period that shares it
    per_unique: list[np.ndarray] = []
    unserved_u = np.zeros((n_s, len(unique)))
    for u in range(len(unique)):
        values = solutions[u]
        x = values[: model.n_x]
        held = values[model.n_x : model.n_x + model.n_held]
        used = np.zeros((3, n_o))
        np.add.at(used, (model.columns[:, 2], model.columns[:, 1]), x)
        whole = np.zeros((3, n_o))
        for k, (tier, o) in enumerate(model.held_keys):
            whole[tier, o] = held[k]
        scale = np.where(used > EPS, whole / np.maximum(used, EPS), 0.0)
        scale[0] = 1.0  # the pool is committed: a workload's row is what it uses
        nodes = x * scale[model.columns[:, 2], model.columns[:, 1]]
        keep = nodes > EPS
        per_unique.append(np.column_stack([model.columns[keep], nodes[keep]]))
        unserved_u[:, u] = values[model.unserved_col : model.unserved_col + n_s]
    dtype = np.dtype(
        [("period", np.int64), ("o", np.int64), ("tier", np.int8), ("i", np.int64), ("nodes", float)]
    )
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
        at += n
    return Dispatch(
        rows=rows,
        unserved=unserved_u[:, inverse],
        held_cost_usd=float(held_costs @ count),
        lp_cost_usd=float(lp_costs @ count),
        distinct_periods=len(unique),
        seconds=time.perf_counter() - began,
        repaired_periods=repaired,
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
    model = PeriodModel(sets, committed)
    signature = np.vstack([sets.demand, occupancy.pool, occupancy.other, occupancy.team_gpus]).T
    _, first, inverse, counts = np.unique(
        signature, axis=0, return_index=True, return_inverse=True, return_counts=True
    )
    inverse = inverse.reshape(-1)
    price = np.zeros((len(sets.offerings), len(first)))
    slack = committed[:, None] - occupancy.pool[:, first]  # offerings without inference on their pool
    total = 0.0
    values = np.zeros(len(first))
    demand = sets.demand.astype(float)
    for u in np.argsort(first):  # chronologically: warm starts
        t = int(first[u])
        value, pool_dual, _cap = model.lp(
            demand[:, t], occupancy.pool[:, t], occupancy.other[:, t], occupancy.team_gpus[:, t]
        )
        total += counts[u] * value
        values[u] = value
        if len(model.pool_rows):
            used = np.asarray(model.highs.getSolution().row_value)[model.pool_rows]
            room = model.pool_base - occupancy.pool[model.pool_offerings, t]
            price[model.pool_offerings, u] = -pool_dual
            slack[model.pool_offerings, u] = room - used
    return PoolPrices(price[:, inverse], np.maximum(slack[:, inverse], 0.0), total, values[inverse])


def improve_schedule(
    sets: PlanningSets,
    committed: np.ndarray,
    schedule: Schedule,
    prices: PoolPrices,
    deadline: float | None = None,
) -> tuple[Schedule, float]:
    """Move runs, one at a time, to where the pool's dual prices say they cost least (start, offering,
    or from on-demand/spot onto the pool), keeping every period feasible. Each move is checked by
    re-solving the periods it touches (old and new window) and kept only if that lowers the exact
    per-period LP cost plus the run's own cost. Returns the new schedule and the saving (exact for
    these LPs). ``deadline``: a ``time.perf_counter()`` value after which no more moves are tried."""
    teams = _team_index(sets)
    combos = _combos(sets)
    burst = np.array([t.burst_gpus if t.burst_gpus is not None else math.inf for t in sets.scenario.teams])
    cap = np.array([o.max_nodes if o.max_nodes is not None else math.inf for o in sets.offerings])
    occupancy = Occupancy(schedule.occupancy.pool.copy(), schedule.occupancy.other.copy(),
                          schedule.occupancy.team_gpus.copy())  # fmt: skip
    model = PeriodModel(sets, committed)
    demand = sets.demand.astype(float)
    period_cost = prices.period_usd.copy()

    def exact(periods: np.ndarray) -> np.ndarray:
        return np.array(
            [
                model.lp(
                    demand[:, t], occupancy.pool[:, t], occupancy.other[:, t], occupancy.team_gpus[:, t]
                )[0]
                for t in periods
            ]
        )

    slack = prices.slack.copy()
    placements = {option.run: option for option in schedule.placements}
    saving = 0.0
    moved = 0
    for r in sorted(placements, key=lambda r: (-sets.runs[r].job.nodes, r)):
        if deadline is not None and time.perf_counter() > deadline:
            break
        current = placements[r]
        team = teams[sets.runs[r].job.team]
        _remove(sets, occupancy, current, team)
        best: tuple[float, TrainingOption] | None = None
        for option in combos.values():
            if (
                option.run != r
                or option.tier == SPOT
                or (option.tier == ON_DEMAND and current.tier != ON_DEMAND)
            ):
                continue  # runs move in time, between offerings, or onto the pool (spot share holds)
            if option.tier == POOL and committed[option.offering] < sets.runs[r].job.nodes:
                continue
            found = _cheapest_start(sets, option, committed, cap, burst, occupancy, team, prices, slack)
            if found is None:
                continue
            candidate = _at(sets, option, found[1])
            if (candidate.offering, candidate.tier, candidate.start) == (
                current.offering, current.tier, current.start
            ):  # fmt: skip
                continue
            if best is None or found[0] < best[0]:
                best = (found[0], candidate)
        if best is None:
            occupancy.add(sets, current, team)
            continue
        chosen = best[1]
        touched = np.union1d(
            np.arange(current.start, current.start + current.periods),
            np.arange(chosen.start, chosen.start + chosen.periods),
        )
        occupancy.add(sets, chosen, team)
        after = exact(touched)
        delta = float(after.sum() - period_cost[touched].sum()) + chosen.cost_usd - current.cost_usd
        if delta < -1e-6:
            period_cost[touched] = after
            saving -= delta
            moved += 1
            placements[r] = chosen
            nodes = sets.runs[r].job.nodes
            if current.tier == POOL:
                slack[current.offering, current.start : current.start + current.periods] += nodes
            if chosen.tier == POOL:
                slack[chosen.offering, chosen.start : chosen.start + chosen.periods] -= nodes
        else:  # put it back
            _remove(sets, occupancy, chosen, team)
            occupancy.add(sets, current, team)
    improved = Schedule(
        sorted(placements.values(), key=lambda option: option.run),
        schedule.unserved_runs,
        occupancy,
        schedule.moved + moved,
        schedule.added,
    )
    return improved, saving


def _by_run(schedule: Schedule) -> dict[int, TrainingOption]:
    return {option.run: option for option in schedule.placements}


def _remove(sets: PlanningSets, occupancy: Occupancy, option: TrainingOption, team: int) -> None:
    nodes = sets.runs[option.run].job.nodes
    window = slice(option.start, option.start + option.periods)
    (occupancy.pool if option.tier == POOL else occupancy.other)[option.offering, window] -= nodes
    occupancy.team_gpus[team, window] -= nodes * sets.offerings[option.offering].gpus_per_node


def _cheapest_start(
    sets: PlanningSets,
    option: TrainingOption,
    committed: np.ndarray,
    cap: np.ndarray,
    burst: np.ndarray,
    occupancy: Occupancy,
    team: int,
    prices: PoolPrices,
    slack: np.ndarray,
    prefer: int | None = None,
) -> tuple[float, int] | None:
    """(estimated cost, start) of the cheapest feasible start of ``option`` (``prefer`` on ties), or
    None."""
    run = sets.runs[option.run]
    nodes = run.job.nodes
    o = option.offering
    last = run.end_period - option.periods
    if last < run.first_period:
        return None
    if option.tier == POOL:
        room = committed[o] - occupancy.pool[o]
    else:
        room = cap[o] - committed[o] - occupancy.other[o]
    gpus = nodes * sets.offerings[o].gpus_per_node
    fits = (room >= nodes - EPS) & (burst[team] - occupancy.team_gpus[team] >= gpus - EPS)
    bad = np.concatenate([[0], np.cumsum(~fits)])
    starts = np.arange(run.first_period, last + 1)
    ok = starts[bad[starts + option.periods] - bad[starts] == 0]
    if not ok.size:
        return None
    if option.tier != POOL:  # the price does not depend on the start
        return option.cost_usd, prefer if prefer is not None and prefer in ok else int(ok[0])
    # nodes beyond the unused pool displace inference: at the dual price where the row binds, else at
    # most the offering's on-demand price (where inference would move, or somewhere cheaper)
    fallback = sets.offerings[o].on_demand_usd_h * sets.period_hours
    unit = np.where(prices.price[o] > EPS, prices.price[o], fallback)
    per_period = unit * np.maximum(0.0, nodes - slack[o])
    running = np.concatenate([[0.0], np.cumsum(per_period)])
    costs = running[ok + option.periods] - running[ok]
    k = int(np.argmin(costs))
    if prefer is not None and prefer in ok and costs[ok == prefer][0] <= costs[k] + 1e-9:
        return option.cost_usd + float(costs[ok == prefer][0]), prefer
    return option.cost_usd + float(costs[k]), int(ok[k])
