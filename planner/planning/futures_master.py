"""What to commit to now, over many demand futures at once: one small MILP over the futures' fleets (the
decomposition of issue 41).

Each future has been planned on its own; its fleet (``fleet_bill.py``: per offering and period, the
non-spot nodes its plan runs) is a feasible second stage under any purchase, billed by the cloud's rule.
With the fleets fixed, the expected cost is a convex piecewise-linear function of the commitment levels,
so the best first stage over all futures is a MILP with one integer per purchase the point forecast's
sets offer (offering x term x purchase step, ``sets.new_columns``) and, per future, offering and group of
periods with the same columns serving and the same whole nodes running, one continuous on-demand excess:

    min  sum_k w_k cost_k                         (or (1 - lam) E + lam CVaR_alpha, Rockafellar-Uryasev)
    cost_k = other_k + sum_j n_j rate_j paid_j + sum_(o,g,v) od_o p count * e_kogv + tail_k
    e_kogv >= v - held_og - sum_(j serving in g) n_j,   e >= 0           (the billing rule, exact)
    tail_k:  per stretch after the horizon, od_o * hours * max(0, carried_ko - nodes still committed)
    guarantees: each team's guaranteed GPUs backed by committed GPUs in every segment (build.guarantee_rows)
    max_nodes: committed + the futures' spot nodes of o within the offering's limit

Its size grows with the futures (not with the hours: periods with the same node count share a row), a few
thousand columns for ten futures of a year, solved by HiGHS in about a second, so 10-50 futures cost one
plan each (the wait-and-see plans, in parallel) and this. The result is one candidate first stage, which
``futures.py`` prices on every future with the others (its second stage re-billed, or re-planned).
Its objective is not a lower bound (the fleets are fixed, not optimized under the purchase); the bound
``futures.py`` reports stays the futures' own certified bounds.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import pulp
from pulp.v4_migration import set_v4_migration_warnings

from models.errors import SolverError
from models.scenario import ExistingCommitment
from planner.planning.fleet_bill import WHOLE, Fleet
from planner.planning.optimize.build import guarantee_penalty_per_gpu, guarantee_rows
from planner.planning.problem.sets import PlanningSets
from planner.solvers.solve import solve

set_v4_migration_warnings(False)

__all__ = ["MasterResult", "master_first_stage"]

#: The master's relative optimality gap (it is small: HiGHS closes it in well under a second).
MASTER_GAP = 1e-5


@dataclass(frozen=True)
class MasterResult:
    """The master's purchases, its expected (or risk-weighted) fleet-billed cost and its size."""

    commitments: tuple[ExistingCommitment, ...]
    score_usd: float
    columns: int
    rows: int


def master_first_stage(
    sets: PlanningSets,
    fleets: Sequence[Fleet],
    weights: Sequence[float],
    tail_until: datetime | None,
    cvar_level: float = 0.9,
    risk_weight: float = 0.0,
    time_limit: float | None = 120.0,
) -> MasterResult:
    """The commitments (module docstring) that minimize ``(1 - risk_weight) * E + risk_weight * CVaR`` of
    the fleets' cost, weighted by ``weights``; ``sets``: the point forecast's (its purchasable columns,
    teams and limits). Raises SolverError when HiGHS finds no solution within ``time_limit``."""
    problem = pulp.LpProblem("futures_master", pulp.LpMinimize)
    horizon_hours = float(sets.horizon_hours)
    until = (tail_until - fleets[0].horizon_start).total_seconds() / 3600 if tail_until else horizon_hours
    new = sets.new_columns
    biggest = max((float(f.pool[k].max()) for f in fleets for k in f.pool if len(f.pool[k])), default=0.0)
    buy: dict[int, pulp.LpVariable] = {}
    for c in new:
        limit = sets.offerings[sets.columns[c].offering].max_nodes
        up = float(limit) if limit is not None else max(biggest, 1.0)
        buy[c] = problem.add_variable(f"n_{c}", 0, up, pulp.LpInteger)
    index = {o.id: k for k, o in enumerate(sets.offerings)}
    serving = {
        o: [tuple(c for c in sets.columns_active(o, t) if c in buy) for t in range(len(sets.segment))]
        for o in range(len(sets.offerings))
        if any(c in buy for c in sets.columns_on.get(o, []))
    }
    commitment_cost = pulp.lpSum(
        buy[c] * sets.columns[c].usd_per_node_hour
        * (sets.columns[c].paid_hours + max(0.0, min(sets.columns[c].ends_hour, until) - horizon_hours))
        for c in new
    )  # fmt: skip
    costs: list[pulp.LpAffineExpression] = []
    for k, fleet in enumerate(fleets):
        costs.append(_future_cost(problem, sets, fleet, k, buy, serving, index, until) + commitment_cost)
    _limit_nodes(problem, sets, fleets, buy, serving)
    penalty = 0.0
    family = guarantee_rows(sets, buy, lambda name, up: problem.add_variable(name, 0, up))
    if family.rows:
        for name, (terms, sense, rhs) in family.rows.items():
            problem.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms), sense, name, rhs))
        per_gpu = guarantee_penalty_per_gpu(sets)
        penalty = pulp.lpSum(short * per_gpu * family.weight[key] for key, short in family.shortfall.items())
    expected = pulp.lpSum(w * cost for w, cost in zip(weights, costs, strict=True))
    objective = expected
    if risk_weight > 0:
        eta = problem.add_variable("eta", None, None)
        excess = [problem.add_variable(f"z_{k}", 0) for k in range(len(fleets))]
        for k, cost in enumerate(costs):
            problem += excess[k] >= cost - eta, f"cvar_{k}"
        tail = eta + pulp.lpSum(w * z for w, z in zip(weights, excess, strict=True)) / (1.0 - cvar_level)
        objective = (1.0 - risk_weight) * expected + risk_weight * tail
    total = objective + penalty
    problem += total
    result = solve(problem, "highs", time_limit, MASTER_GAP, threads=1, what="the futures master")
    if not result.ok:
        raise SolverError(f"the futures master found no purchase ({result.termination})")
    start = fleets[0].horizon_start
    chosen = []
    for c in new:
        nodes = round(buy[c].varValue or 0.0)
        if nodes <= 0:
            continue
        column = sets.columns[c]
        chosen.append(
            ExistingCommitment(
                offering=sets.offerings[column.offering].id, term=column.term, nodes=nodes,
                start=start + timedelta(hours=column.starts_hour),
                usd_per_node_hour=column.usd_per_node_hour,
            )
        )  # fmt: skip
    return MasterResult(
        tuple(chosen), float(pulp.value(total)), len(problem.variables()), len(problem.constraints)
    )


def _future_cost(
    problem: pulp.LpProblem,
    sets: PlanningSets,
    fleet: Fleet,
    k: int,
    buy: dict[int, pulp.LpVariable],
    serving: dict[int, list[tuple[int, ...]]],
    index: dict[str, int],
    until: float,
) -> pulp.LpAffineExpression:
    """Future ``k``'s cost beyond the commitments' own: the rows off the pool, the held commitments, on
    demand beyond the committed nodes in the horizon and (to ``until``) after it."""
    p, periods = fleet.period_hours, fleet.periods
    end = fleet.hours
    terms: list[tuple[pulp.LpVariable, float]] = []
    constant = fleet.other_usd + sum(
        h.nodes * h.usd_per_node_hour * max(0.0, min(h.ends_hour, until) - max(h.starts_hour, 0.0))
        for h in fleet.scenario_held
    )
    held_by = fleet.committed(())
    for offering, running in sorted(fleet.pool.items()):
        rate = fleet.on_demand_usd_h.get(offering, 0.0)
        held = held_by.get(offering, np.zeros(periods))
        o = index.get(offering)
        groups: dict[tuple[tuple[int, ...], float, float], int] = defaultdict(int)
        columns = serving.get(o, []) if o is not None else []
        for t in range(periods):
            groups[(columns[t] if columns else (), float(held[t]), float(running[t]))] += 1
        for g, ((active, base, value), count) in enumerate(sorted(groups.items())):
            if value <= base + WHOLE:
                continue
            if not active:
                constant += rate * p * count * (value - base)
                continue
            excess = problem.add_variable(f"e_{k}_{o}_{g}", 0)
            problem += excess + pulp.lpSum(buy[c] for c in active) >= value - base, f"pool_{k}_{o}_{g}"
            terms.append((excess, rate * p * count))
    if until > end:
        for offering in sorted(set(fleet.carried) | set(fleet.pool)):
            rate = fleet.on_demand_usd_h.get(offering, 0.0)
            demand = fleet.carried.get(offering, 0.0)
            o = index.get(offering)
            mine = [c for c in buy if o is not None and sets.columns[c].offering == o]
            kept = [h for h in fleet.scenario_held if h.offering == offering]
            cuts = sorted(
                {end, until, *(min(sets.columns[c].ends_hour, until) for c in mine),
                 *(min(h.ends_hour, until) for h in kept)}
            )  # fmt: skip
            for w, (a, b) in enumerate(itertools.pairwise(cuts)):
                if b <= a or demand <= 0:
                    continue
                base = sum(h.nodes for h in kept if h.ends_hour > a)
                serving_then = [c for c in mine if sets.columns[c].ends_hour > a]
                if not serving_then:
                    constant += rate * (b - a) * max(demand - base, 0.0)
                    continue
                short = problem.add_variable(f"f_{k}_{o}_{w}", 0)
                covered = pulp.lpSum(buy[c] for c in serving_then)
                problem += short + covered >= demand - base, f"tail_{k}_{o}_{w}"
                terms.append((short, rate * (b - a)))
    return pulp.lpSum(v * a for v, a in terms) + constant


def _limit_nodes(
    problem: pulp.LpProblem,
    sets: PlanningSets,
    fleets: Sequence[Fleet],
    buy: dict[int, pulp.LpVariable],
    serving: dict[int, list[tuple[int, ...]]],
) -> None:
    """On an offering with ``max_nodes``, the committed nodes and every future's spot nodes within it (in
    each group of periods with the same columns serving)."""
    for o, columns in serving.items():
        offering = sets.offerings[o]
        if offering.max_nodes is None:
            continue
        groups: dict[tuple[int, ...], float] = {}
        for t, active in enumerate(columns):
            if not active:
                continue
            spot = max((float(f.spot[offering.id][t]) for f in fleets if offering.id in f.spot), default=0.0)
            held = float(sets.existing_nodes(o, t))
            groups[active] = max(groups.get(active, 0.0), spot + held)
        for g, (active, used) in enumerate(sorted(groups.items())):
            room = max(0.0, float(offering.max_nodes) - used)
            problem += pulp.lpSum(buy[c] for c in active) <= room, f"max_nodes_{o}_{g}"
