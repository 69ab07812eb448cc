"""The stage-1 planning model built the textbook PuLP way, to measure what the "fast" build saves.

``planner.planning.optimize.build.create_model`` builds the MILP as (variable, coefficient) lists and inserts
all rows with one ``problem.extend``; SOLVER-NOTES.md measured that style at 3.5-4x faster than the usual one
on a synthetic model. This module builds THE SAME model from the same
:class:`~planner.planning.problem.sets.PlanningSets` in the usual style -- one ``pulp.LpVariable`` per tuple,
``prob += lpSum(coef * var for ...) >= rhs`` inside nested loops over slots, services and offerings, the
objective as one ``lpSum`` -- so the bench can compare build time and memory on the planner's real model
rather than on a look-alike. Variables and rows get the fast build's names, so :func:`compare` can check the
two models term by term, not only by their optimum.

What is deliberately *not* naive: the index sets. Sums over "the options of offering o active in
block b" use index lists grouped once up front (as a modeller writes ``A[o, b]`` in the data section),
not a scan of every option inside every (offering, slot) row: a quadratic scan would measure the
scan, not PuLP, and makes the unmerged hourly model unbuildable. Likewise the commitment columns
serving in a period, ``C(o, t)`` (new columns: one ``R[c]`` each) and ``K(o, t)`` (the nodes of held
columns, a constant on the right-hand side), are read from the sets (``columns_active``,
``existing_nodes``) as a data table. The Python loop structure is the formulation's; only the PuLP
idiom differs.

:func:`unreduced_sets` builds the planning sets without the two size reductions of ``sets.py``
(dominance pruning and period merging): the textbook model a planner without those proofs would
solve, with the same optimum.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pulp

import planner.planning.optimize.build  # noqa: F401  (switches PuLP's per-variable v4 warnings off, as in the product)
from models.catalog import Catalog
from models.scenario import Scenario
from models.tiers import Capacity
from planner.planning.optimize.build import VAR_CODE, guarantee_penalty_per_gpu
from planner.planning.optimize.build import replica_penalty as build_replica_penalty
from planner.planning.optimize.build import run_penalty as build_run_penalty
from planner.planning.problem import sets as sets_module
from planner.planning.problem.sets import ModelOptions, PlanningSets, Slot, shares_commitments, usable

__all__ = ["NaiveModel", "compare", "create_model_naive", "unreduced_sets"]


@dataclass
class NaiveModel:
    """The textbook-built problem and its variable dicts (keys as in ``PlanningModel``)."""

    problem: pulp.LpProblem
    commit: dict[int, pulp.LpVariable] = field(default_factory=dict)  # new column -> R[c]
    serve: dict[tuple[Capacity, int, int, int], pulp.LpVariable] = field(default_factory=dict)
    held: dict[tuple[Capacity, int, int], pulp.LpVariable] = field(default_factory=dict)
    place: dict[int, pulp.LpVariable] = field(default_factory=dict)
    committed_part: dict[int, pulp.LpVariable] = field(default_factory=dict)  # M[a]
    guarantee: dict[tuple[str, int, int], pulp.LpVariable] = field(default_factory=dict)  # H[m,o,q]
    guarantee_short: dict[tuple[str, int], pulp.LpVariable] = field(default_factory=dict)  # UG[m,q]


def create_model_naive(sets: PlanningSets) -> NaiveModel:
    """Build the formulation of ``build.py`` (same variables, rows and costs) in textbook PuLP style."""
    S = range(len(sets.slots))  # the formulation's index-set names
    I = range(len(sets.services))  # noqa: E741
    O = range(len(sets.offerings))  # noqa: E741
    A = range(len(sets.options))
    NON_SPOT, SPOT = Capacity.NON_SPOT, Capacity.SPOT
    teams = sets.scenario.teams
    prob = pulp.LpProblem(sets.scenario.name.replace(" ", "_") or "plan", pulp.LpMinimize)
    model = NaiveModel(prob)

    # ---- index sets (data section) -----------------------------------------------------------------
    eligible = {i: [o for o in O if (i, o) in sets.replicas_per_node] for i in I}
    first = {s: int(sets.slots[s].periods[0]) for s in S}  # slots never straddle a column boundary
    segment_start: dict[int, int] = {}  # segment q -> its first period
    for t, q in enumerate(sets.segment.tolist()):
        segment_start.setdefault(q, t)
    new_columns = set(sets.new_columns)

    def C(o: int, t: int) -> list[int]:  # the formulation's C(o, t): new columns only
        return [c for c in sets.columns_active(o, t) if c in new_columns]

    def K(o: int, t: int) -> float:  # the held nodes of o serving in period t
        return float(sets.existing_nodes(o, t))

    options_of_run: dict[int, list[int]] = defaultdict(list)
    on_commit: dict[tuple[int, int], list[int]] = defaultdict(list)  # (o, block) -> a on commitments
    beside: dict[tuple[int, int], list[int]] = defaultdict(list)  # (o, block) -> a on OD or spot
    team_options: dict[tuple[str, int], list[int]] = defaultdict(list)  # (team, block) -> a
    for a in A:
        option = sets.options[a]
        options_of_run[option.run].append(a)
        has_od = sets.offerings[option.offering].on_demand_usd_h is not None
        for block in option.blocks:
            if option.tier == NON_SPOT and (
                not has_od or shares_commitments(sets, option.offering, NON_SPOT)
            ):
                on_commit[(option.offering, block)].append(a)  # n Y[a] (owned) or M[a]
            if option.tier == SPOT or has_od:
                beside[(option.offering, block)].append(a)  # n Y[a] (spot) or n Y[a] - M[a]
            team_options[(sets.runs[option.run].job.team, block)].append(a)
    nodes = {a: sets.runs[sets.options[a].run].job.nodes for a in A}
    hours = {a: sets.options[a].periods * sets.period_hours for a in A}
    guaranteed = [team for team in teams if team.guaranteed_gpus > 0]

    # ---- variables ---------------------------------------------------------------------------------
    def whole(o: int) -> str:
        limited = sets.integral_held or sets.offerings[o].max_nodes is not None
        return pulp.LpInteger if limited else pulp.LpContinuous

    R = model.commit
    for c in sets.new_columns:
        limit = sets.offerings[sets.columns[c].offering].max_nodes
        R[c] = pulp.LpVariable(f"R_{c}", 0, limit, pulp.LpInteger)
    X = model.serve
    UI = {}
    for i in I:
        for s in S:
            if sets.slots[s].demand[i] <= 0:
                continue
            for o in eligible[i]:
                for tier in sets.serve_tiers.get((i, o), ()):
                    if tier == NON_SPOT and not usable(sets, o, first[s]):
                        continue  # owned nodes not delivered yet
                    X[tier, i, o, s] = pulp.LpVariable(f"X{VAR_CODE[tier]}_{i}_{o}_{s}", 0)
            UI[i, s] = pulp.LpVariable(f"UI_{i}_{s}", 0, sets.slots[s].demand[i])
    Y = model.place
    for a in A:
        if sets.training_fixed:
            Y[a] = pulp.LpVariable(f"Y_{a}", 1, 1, pulp.LpInteger)
        else:
            Y[a] = pulp.LpVariable(f"Y_{a}", cat=pulp.LpBinary)
    M = model.committed_part
    for a in A:
        option = sets.options[a]
        if shares_commitments(sets, option.offering, option.tier):  # non-spot, committable, sells OD
            M[a] = pulp.LpVariable(f"M_{a}", 0, float(nodes[a]), whole(option.offering))
    UT = {r: pulp.LpVariable(f"UT_{r}", cat=pulp.LpBinary) for r in range(len(sets.runs))}
    N = model.held  # NO[o,s] where a non_spot row exists and o sells on demand; NS[o,s] where spot serves
    for o in O:
        for s in S:
            non_spot_used = any((NON_SPOT, i, o, s) in X for i in I) or on_commit.get(
                (o, sets.slots[s].block)
            )
            if non_spot_used and sets.offerings[o].on_demand_usd_h is not None:
                N[NON_SPOT, o, s] = pulp.LpVariable(f"Nn_{o}_{s}", 0, sets.offerings[o].max_nodes, whole(o))
            if any((SPOT, i, o, s) in X for i in I):
                N[SPOT, o, s] = pulp.LpVariable(f"Ns_{o}_{s}", 0, sets.offerings[o].max_nodes, whole(o))
    H, UG = model.guarantee, model.guarantee_short
    for q, t in segment_start.items():
        for team in guaranteed:
            for o in sets.team_offerings.get(team.name, []):
                if sets.columns_active(o, t):  # a column (new or held) serves in q
                    H[team.name, o, q] = pulp.LpVariable(f"H_{team.name}_{o}_{q}", 0)
            UG[team.name, q] = pulp.LpVariable(f"UG_{team.name}_{q}", 0, float(team.guaranteed_gpus))

    # ---- objective ---------------------------------------------------------------------------------
    def held_price(tier: Capacity, o: int) -> float:
        off = sets.offerings[o]
        price = off.on_demand_usd_h if tier == NON_SPOT else off.spot_usd_h
        assert price is not None
        return price

    def od(a: int) -> float:  # the on-demand price of option a's offering (0: it sells none)
        return sets.offerings[sets.options[a].offering].on_demand_usd_h or 0.0

    # penalties are definitions, not formulation: the planner's own (a slack must price the same)
    def replica_penalty(i: int) -> float:
        return build_replica_penalty(sets, i)

    def run_penalty(r: int) -> float:
        return build_run_penalty(sets, r)

    unserved_gpu = guarantee_penalty_per_gpu(sets)
    periods = max(1, len(sets.segment))
    weight = {q: float(np.count_nonzero(sets.segment == q)) / periods for q in segment_start}
    prob += (
        lpSum(sets.columns[c].cost_per_node * R[c] for c in R)
        + lpSum(held_price(t, o) * sets.slots[s].hours * N[t, o, s] for (t, o, s) in N)
        + lpSum(sets.options[a].cost_usd * Y[a] for a in A)
        + lpSum(od(a) * hours[a] * nodes[a] * Y[a] for a in A if sets.options[a].tier == NON_SPOT)
        - lpSum(od(a) * hours[a] * M[a] for a in M)
        + lpSum(replica_penalty(i) * sets.slots[s].hours * UI[i, s] for (i, s) in UI)
        + lpSum(run_penalty(r) * UT[r] for r in UT)
        + lpSum(unserved_gpu * weight[q] * UG[m, q] for (m, q) in UG)
    )

    # ---- 1 demand and 3 held spot nodes ------------------------------------------------------------
    for i in I:
        for s in S:
            if (i, s) in UI:
                prob += (
                    lpSum(
                        sets.replicas_per_node[i, o] * X[t, i, o, s]
                        for o in eligible[i]
                        for t in sets.serve_tiers.get((i, o), ())
                        if (t, i, o, s) in X
                    )
                    + UI[i, s]
                    >= sets.slots[s].demand[i],
                    f"demand_{i}_{s}",
                )
    for o in O:
        for s in S:
            if (SPOT, o, s) in N:
                prob += (
                    lpSum(X[SPOT, i, o, s] for i in I if (SPOT, i, o, s) in X) <= N[SPOT, o, s],
                    f"held_s_{o}_{s}",
                )
    # ---- 5 place (and M[a] <= n_a Y[a]) ------------------------------------------------------------
    for a in M:
        prob += M[a] <= nodes[a] * Y[a], f"part_{a}"
    for r in UT:
        prob += lpSum(Y[a] for a in options_of_run[r]) + UT[r] == 1, f"place_{r}"

    # ---- 2 non-spot and 4 capacity -----------------------------------------------------------------
    def on_commitments(a: int) -> pulp.LpAffineExpression:  # a's nodes the commitments cover
        return M[a] if a in M else nodes[a] * Y[a]

    def beside_commitments(a: int) -> pulp.LpAffineExpression:  # a's nodes beyond them
        return nodes[a] * Y[a] - M[a] if a in M else nodes[a] * Y[a]

    for o in O:
        for s in S:
            block = sets.slots[s].block
            users = [X[NON_SPOT, i, o, s] for i in I if (NON_SPOT, i, o, s) in X]
            training = on_commit.get((o, block), [])
            if users or training:
                prob += (
                    lpSum(users) + lpSum(on_commitments(a) for a in training)
                    <= lpSum(R[c] for c in C(o, first[s]))
                    + K(o, first[s])
                    + lpSum(N[t, o, s] for t in (NON_SPOT,) if (t, o, s) in N),
                    f"non_spot_{o}_{s}",
                )
    for o in O:
        limit = sets.offerings[o].max_nodes
        if limit is None:
            continue
        for q, t in segment_start.items():
            if C(o, t):
                prob += lpSum(R[c] for c in C(o, t)) + K(o, t) <= limit, f"cap_commit_{o}_{q}"
        for s in S:
            block = sets.slots[s].block
            held = [N[t, o, s] for t in (NON_SPOT, SPOT) if (t, o, s) in N]
            if held or beside.get((o, block)):
                prob += (
                    lpSum(R[c] for c in C(o, first[s]))
                    + K(o, first[s])
                    + lpSum(held)
                    + lpSum(beside_commitments(a) for a in beside.get((o, block), []))
                    <= limit,
                    f"cap_{o}_{s}",
                )
    # ---- 6 spot share ------------------------------------------------------------------------------
    share = sets.scenario.purchase.max_spot_share
    if share < 1.0 and any(sets.options[a].tier == SPOT for a in A):
        gpu_hours = {
            a: sets.runs[sets.options[a].run].gpus * sets.runs[sets.options[a].run].job.hours for a in A
        }
        prob += (
            lpSum(gpu_hours[a] * Y[a] for a in A if sets.options[a].tier == SPOT)
            <= share * lpSum(gpu_hours[a] * Y[a] for a in A),
            "spot_share",
        )
    # ---- 7 team burst ------------------------------------------------------------------------------
    for team in teams:
        if team.burst_gpus is None:
            continue
        mine = [i for i in I if sets.services[i].team == team.name]
        for s in S:
            inference = [
                sets.offerings[o].gpus_per_node * X[t, i, o, s]
                for i in mine
                for o in eligible[i]
                for t in sets.serve_tiers.get((i, o), ())
                if (t, i, o, s) in X
            ]
            training = team_options.get((team.name, sets.slots[s].block), [])
            if inference or training:
                prob += (
                    lpSum(inference) + lpSum(sets.runs[sets.options[a].run].gpus * Y[a] for a in training)
                    <= team.burst_gpus,
                    f"burst_{team.name}_{s}",
                )
    # ---- 8 guarantees, per segment -----------------------------------------------------------------
    for q, t in segment_start.items():
        for team in guaranteed:
            prob += (
                lpSum(
                    H[team.name, o, q]
                    for o in sets.team_offerings.get(team.name, [])
                    if (team.name, o, q) in H
                )
                + UG[team.name, q]
                >= team.guaranteed_gpus,
                f"guarantee_{team.name}_{q}",
            )
        for o in O:
            backers = [H[team.name, o, q] for team in guaranteed if (team.name, o, q) in H]
            if backers:
                gpus = sets.offerings[o].gpus_per_node
                prob += (
                    lpSum(backers) <= gpus * (lpSum(R[c] for c in C(o, t)) + K(o, t)),
                    f"backing_{o}_{q}",
                )
    return model


lpSum = pulp.lpSum


# ---- equivalence ------------------------------------------------------------------------------------


def compare(fast: pulp.LpProblem, naive: pulp.LpProblem, tolerance: float = 1e-9) -> list[str]:
    """Differences between two problems, by variable and row name (empty list: the same model).

    Checks every variable's bounds and category, every objective coefficient and every row's sense,
    right-hand side and coefficients, with ``tolerance`` relative (``a - s*a`` and ``a*(1-s)`` may
    differ in the last bit).
    """
    problems: list[str] = []

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= tolerance * max(1.0, abs(a), abs(b))

    def columns(problem: pulp.LpProblem) -> dict[str, tuple]:
        return {v.name: (v.lowBound, v.upBound, v.cat) for v in problem.variables()}

    fast_cols, naive_cols = columns(fast), columns(naive)
    if fast_cols.keys() != naive_cols.keys():
        only_fast = sorted(fast_cols.keys() - naive_cols.keys())[:5]
        only_naive = sorted(naive_cols.keys() - fast_cols.keys())[:5]
        problems.append(f"variables differ: only fast {only_fast}, only naive {only_naive}")
    for name in fast_cols.keys() & naive_cols.keys():
        (flo, fup, fcat), (nlo, nup, ncat) = fast_cols[name], naive_cols[name]
        if fcat != ncat or (flo is None) != (nlo is None) or (fup is None) != (nup is None):
            problems.append(f"variable {name}: {fast_cols[name]} vs {naive_cols[name]}")
        elif (flo is not None and not close(flo, nlo)) or (fup is not None and not close(fup, nup)):
            problems.append(f"variable {name}: bounds {fast_cols[name]} vs {naive_cols[name]}")

    def terms(expression: pulp.LpAffineExpression) -> dict[str, float]:
        return {v.name: c for v, c in expression.items() if c}

    def differ(what: str, f: dict[str, float], n: dict[str, float]) -> None:
        if f.keys() != n.keys():
            problems.append(f"{what}: terms {sorted(f.keys() ^ n.keys())[:5]} in one model only")
        else:
            bad = [k for k in f if not close(f[k], n[k])]
            if bad:
                problems.append(f"{what}: {bad[0]} {f[bad[0]]!r} vs {n[bad[0]]!r} (+{len(bad) - 1} more)")

    differ("objective", terms(fast.objective), terms(naive.objective))
    if not close(fast.objective.constant, naive.objective.constant):
        problems.append("objective constants differ")
    fast_rows = {row.name: row for row in fast.constraints()}
    naive_rows = {row.name: row for row in naive.constraints()}
    if fast_rows.keys() != naive_rows.keys():
        problems.append(f"rows differ: {sorted(fast_rows.keys() ^ naive_rows.keys())[:5]}")
    for name in fast_rows.keys() & naive_rows.keys():
        f, n = fast_rows[name], naive_rows[name]
        if f.sense != n.sense or not close(f.constant, n.constant):
            problems.append(f"row {name}: sense/rhs {f.sense} {-f.constant} vs {n.sense} {-n.constant}")
        differ(f"row {name}", terms(f), terms(n))
    return problems


# ---- planning sets without the size reductions ------------------------------------------------------


def _one_slot_per_period(
    block_of: np.ndarray, demand: np.ndarray, p: int, segment: np.ndarray | None = None
) -> tuple[list[Slot], np.ndarray]:
    """``_merge_periods`` without the merge: every period is its own slot (the segment key is then not
    needed: no two periods share a slot, so none straddles a column boundary)."""
    slots = [
        Slot(int(block_of[t]), np.array([t]), float(p), tuple(int(x) for x in demand[:, t]))
        for t in range(len(block_of))
    ]
    return slots, np.arange(len(block_of))


@contextlib.contextmanager
def _one_slot_per_period_patched() -> Iterator[None]:
    """Swap ``sets._merge_periods`` for :func:`_one_slot_per_period` (this process, this block only)."""
    saved = sets_module._merge_periods
    sets_module._merge_periods = _one_slot_per_period
    try:
        yield
    finally:
        sets_module._merge_periods = saved


def unreduced_sets(
    scenario: Scenario, catalog: Catalog, base_dir: Path | None, options: ModelOptions | None = None
) -> PlanningSets:
    """Planning sets with neither dominance pruning nor period merging (one slot per period).

    Pruning is switched off with the product's own ``ModelOptions(prune=False)``. Merging is not:
    ``merge=False`` also shrinks the training blocks to one period (a finer, different training model
    with its own optimum), while this bench wants the SAME model, only unmerged -- so the weekly
    blocks stay and only ``_merge_periods`` is replaced. Kept as well: the start grid, its thinning
    (``max_starts_per_run``) and the rule that starts touching the same blocks collapse to the
    earliest; they define the model's training decisions rather than reduce an equivalent model.
    """
    options = replace(options or ModelOptions(), prune=False, merge=True)
    with _one_slot_per_period_patched():
        return sets_module.build_sets(scenario, catalog, base_dir, options)
