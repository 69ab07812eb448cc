"""One period's whole replicas, exactly: a small MILP over the groups (offering, kind) each service may
use, solved from the greedy answer of ``realize.py`` as its first incumbent.

Variables, for one period:
  y[i,g] integer   replicas of service i on group g = (offering o, kind: non-spot or spot)
  n[g]   integer   nodes of group g that serve inference
  z[g,L] integer   GPUs of group g partitioned in MIG layout L (the maximal legal layouts of the GPU
                   model, ``models.mig.maximal_layouts``, projected onto the profiles the group serves)
  D[o]   >= 0      on-demand nodes of o: its non-spot nodes beyond the commitments
  U[i]   >= 0      replicas of i left unserved (penalized, as the planning model does)
Rows:
  demand[i]     sum_g y[i,g] + U[i] = target[i]
  slices[g,p]   sum_L z[g,L] c_L[p] >= sum_{i of profile p} y[i,g]       (MIG instances)
  gpus[g]       sum_{i whole} size_i y[i,g] + sum_L z[g,L] <= G_o n[g]   (sizes divide each other:
                                                                           GPUs fit iff they add up)
  billing[o]    n[o,non-spot] - D[o] <= committed[o] - training non-spot nodes[o]
  capacity[o]   D[o] + n[o,spot] <= max_nodes[o] - committed[o] - training spot nodes[o]
  burst[m]      sum_{i of m} share_i y[i,g] <= burst_m - training GPUs of m
Objective: c_od[o] D[o] + c_spot[o] n[o,spot] + penalty_i U[i], plus a cent per node so no node is
held that nothing needs. This is the period's own problem with commitments and training fixed, so its
optimum is the cheapest whole-replica plan of the hour (MIG as the exact packing, whole GPUs exactly).
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict

import numpy as np

from models.mig import MIG_PROFILES, canonical_model, maximal_layouts
from planner.planning.optimize.period import PeriodState
from planner.solvers.highs import HighsModel, RowwiseModel

__all__ = ["PERIOD_TIME_LIMIT", "solve_period"]

# nominal seconds (counted work) per period's MILP; the rounded answer stands if it is not beaten by then
PERIOD_TIME_LIMIT = 1.0
MIP_GAP = 1e-4  # of an hour's bill (~$0.02 on a $200 hour): proving the last cent costs ~5x the time
NODE_CENT = 0.01  # USD per node held: among equal bills, the one holding fewest nodes


class _Rows:
    """A row-wise model under construction."""

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.upper: list[float] = []
        self.integral: list[bool] = []
        self.rows: list[dict[int, float]] = []
        self.row_lower: list[float] = []
        self.row_upper: list[float] = []

    def column(self, cost: float, upper: float = math.inf, integral: bool = True) -> int:
        self.cost.append(cost)
        self.upper.append(upper)
        self.integral.append(integral)
        return len(self.cost) - 1

    def row(self, entries: dict[int, float], lower: float, upper: float) -> None:
        self.rows.append(entries)
        self.row_lower.append(lower)
        self.row_upper.append(upper)

    def model(self) -> RowwiseModel:
        start = np.concatenate([[0], np.cumsum([len(r) for r in self.rows])]).astype(np.int32)
        return RowwiseModel(
            cost=np.array(self.cost),
            col_lower=np.zeros(len(self.cost)),
            col_upper=np.array(self.upper),
            row_lower=np.array(self.row_lower),
            row_upper=np.array(self.row_upper),
            start=start,
            index=np.array([c for r in self.rows for c in r], dtype=np.int32),
            value=np.array([v for r in self.rows for v in r.values()]),
            integral=np.array(self.integral),
        )


@functools.lru_cache(maxsize=1024)
def _layout_columns(gpu_model: str, profiles: tuple[str, ...]) -> list[tuple[int, ...]]:
    """Maximal legal layouts as instance counts of ``profiles``, deduplicated, dominated ones dropped."""
    order = [p.name for p in MIG_PROFILES[canonical_model(gpu_model)]]
    idx = [order.index(name) for name in profiles]
    columns = {tuple(layout.count_vector[k] for k in idx) for layout in maximal_layouts(gpu_model)}
    columns.discard((0,) * len(idx))
    return sorted(
        c
        for c in columns
        if not any(o != c and all(a >= b for a, b in zip(o, c, strict=True)) for o in columns)
    )


def solve_period(
    period: PeriodState, target: np.ndarray, penalty: np.ndarray, start: dict[tuple[int, int, int], int]
) -> dict[tuple[int, int, int], int] | None:
    """Replicas per (o, kind, i) of the period's optimum, or None if HiGHS did not beat ``start``."""
    problem = period.p
    m = _Rows()
    y: dict[tuple[int, int, int], int] = {}
    nodes: dict[tuple[int, int], int] = {}
    services = [i for i in range(len(target)) if target[i] > 0]
    for i in services:
        for o, kind in problem.candidates[i]:
            y[(o, kind, i)] = m.column(0.0, float(target[i]))
            if (o, kind) not in nodes:
                price = problem.spot[o] if kind == 1 else 0.0
                nodes[(o, kind)] = m.column((price or 0.0) + NODE_CENT)
    unserved = {i: m.column(float(penalty[i]), float(target[i]), integral=False) for i in services}
    for i in services:
        entries = {col: 1.0 for (o, kind, j), col in y.items() if j == i}
        m.row({**entries, unserved[i]: 1.0}, float(target[i]), float(target[i]))
    for (o, kind), n_col in nodes.items():
        g = problem.gpus_per_node[o]
        mine = [(i, col) for (go, gk, i), col in y.items() if (go, gk) == (o, kind)]
        gpus: dict[int, float] = {n_col: -float(g)}
        by_profile: dict[str, list[int]] = defaultdict(list)
        for i, col in mine:
            shape = problem.shapes[(i, o)]
            if shape.profile is None:
                gpus[col] = float(shape.gpus)
            else:
                by_profile[shape.profile].append(col)
        if by_profile:
            profiles = tuple(sorted(by_profile))
            columns = _layout_columns(problem.sets.offerings[o].gpu_model, profiles)
            layouts = [m.column(0.0) for _ in columns]
            for k, name in enumerate(profiles):
                entries = {z: float(c[k]) for z, c in zip(layouts, columns, strict=True) if c[k]}
                m.row({**entries, **{col: -1.0 for col in by_profile[name]}}, 0.0, math.inf)
            gpus.update({z: 1.0 for z in layouts})
        m.row(gpus, -math.inf, 0.0)
    for o in sorted({o for o, _ in nodes}):
        fixed = float(period.committed[o] - period.train_non_spot[o])
        sold = problem.on_demand[o] is not None
        on_demand = m.column(problem.on_demand[o] or 0.0, math.inf if sold else 0.0, integral=False)
        if (o, 0) in nodes:
            m.row({nodes[(o, 0)]: 1.0, on_demand: -1.0}, -math.inf, fixed)
        else:
            m.row({on_demand: -1.0}, -math.inf, fixed)
        if math.isfinite(problem.max_nodes[o]):
            room = problem.max_nodes[o] - period.committed[o] - period.train_spot[o]
            entries = {on_demand: 1.0, **({nodes[(o, 1)]: 1.0} if (o, 1) in nodes else {})}
            m.row(entries, -math.inf, float(room))
    for team in range(len(problem.burst)):
        room = period.base_room[team]
        if not math.isfinite(room):
            continue
        entries = {
            col: problem.shapes[(i, o)].share for (o, _k, i), col in y.items() if problem.team_of[i] == team
        }
        if entries:
            m.row(entries, -math.inf, float(room))
    highs = HighsModel(m.model(), output_flag=False, mip_rel_gap=MIP_GAP, mip_abs_gap=1e-3)
    values = np.zeros(len(m.cost))
    for key, col in y.items():
        values[col] = start.get(key, 0)
    highs.set_partial_start(
        np.array(list(y.values()), dtype=np.int32), np.array([values[c] for c in y.values()], dtype=float)
    )
    outcome = highs.run(work=PERIOD_TIME_LIMIT, what="whole replicas")
    if not outcome.feasible:
        return None
    solution = highs.col_value()
    return {key: round(solution[col]) for key, col in y.items() if round(solution[col]) > 0}
