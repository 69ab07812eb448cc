"""Whole replicas on whole nodes: the model's fractional inference made into something a cluster runs.

Both methods size inference in node-equivalents: a service's replicas may come out in fractions split
between offerings (3.14 replicas of a service on one offering), and services of different MIG
profiles share a node's GPUs pro rata. This step turns every period's serving into whole replicas per
(offering, capacity kind) and sizes each such group's nodes from an actual packing:

- a whole-GPU replica takes ``g`` GPUs, ``g`` a divisor of the node's GPUs (``sets.whole_gpu_size``):
  sizes that divide each other pack without loss (placed largest first, each lands on an aligned free
  block), so a group's whole-GPU replicas and MIG-partitioned GPUs fit on ``ceil(GPUs / G)`` nodes;
- MIG replicas of a group are packed together onto the fewest GPUs in legal layouts
  (``planner.planning.mig.packing.pack``); each such GPU is one more single-GPU item.

Per period, three steps. (1) Rounding: every service keeps the whole part of each fractional share the
model gave it, and the replicas still missing go one at a time, largest replicas first, to the group
where they cost least given the nodes already needed there (room on a committed node, or on a node
already held, costs nothing); ties go to where the model put the larger fraction; replicas beyond the
demand are taken off where that saves most. (2) Local search: empty a small group, or free the last
node of any, if moving its replicas elsewhere costs less. (3) The period's own MILP
(``realize_exact.py``: the same hour with commitments and training fixed, MIG as exact layouts), from
that answer, kept where it is cheaper. (2) runs on every period before (3) on any (it finds most of
the saving for a fraction of the work), each on the periods standing for the most hours first, within
a budget of counted work (``TimeBudget.realize``), after which periods keep what they have; the plan's
notes say how many had (2) and (3). The MILPs of (3) are solved ahead in worker threads, one per core
(``solvers.ahead``), and taken in order: the periods done and their answers are those of one thread.
Limits hold throughout: an offering's ``max_nodes`` and team burst limits (GPUs counted as the model
counts them); a replica no group can take without breaking one is left unserved and reported, and the
plan's penalty counts it.

Cost follows from the sizes: the non-spot nodes beyond the commitments are whole on-demand nodes, spot
nodes are whole spot nodes (billed by ``solution.extract_allocations``). Periods with the same
serving, demand, training and commitments have the same answer, so each distinct period is realized
once.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.planning.optimize.build import replica_penalty
from planner.planning.optimize.period import (
    EPS,
    KINDS,
    Group,
    PeriodState,
    RealizeContext,
    ReplicaShape,
    replica_shapes,
)
from planner.planning.optimize.realize_exact import solve_period
from planner.planning.problem.sets import PlanningSets
from planner.solvers.ahead import in_order
from planner.solvers.work import meter, past

__all__ = ["Realized", "ReplicaShape", "realize", "replica_shapes"]

IMPROVE_ROUNDS = 3
EXACT_BUDGET_SECONDS = (
    60.0  # counted work (nominal seconds) over all periods; beyond it, periods keep the rounded answer
)
EMPTY_NODES = 2  # groups of at most this many nodes are also tried emptied whole


@dataclass
class Realized:
    """The realized inference: rows as ``Solution.inference`` (whole ``replicas``; ``nodes`` the share of
    the group's packed GPUs, spot groups scaled to their whole nodes) and the replicas left unserved."""

    inference: pd.DataFrame
    unserved: np.ndarray  # (services, periods)
    penalty_delta_usd: float  # the penalty of replicas unserved beyond the model's (or fewer: negative)
    distinct_periods: int
    exact_periods: int = 0  # distinct periods where the MILP beat the local search's answer
    refined_periods: int = 0  # distinct periods done: nothing to save, or improved by the local search
    # (the rest, once the time budget ran out, keep the rounding)
    milp_periods: int = 0  # distinct periods that also had their own MILP


def realize(
    sets: PlanningSets,
    inference: pd.DataFrame,
    unserved: np.ndarray,
    committed: np.ndarray,
    training: tuple[np.ndarray, np.ndarray, np.ndarray],
    progress: Callable[[str], None] | None = None,
    exact_seconds: float = EXACT_BUDGET_SECONDS,
    workers: int | None = None,
) -> Realized:
    """Whole replicas per (offering, kind) every period, on nodes sized by packing.

    ``inference``: the model's rows (period, o, tier, i, nodes, replicas; fractional); ``unserved``:
    its unserved replicas (services, periods); ``committed``: (offerings, periods) nodes committed;
    ``training``: per period the non-spot and spot nodes training holds per offering and the GPUs it
    holds per team, arrays (offerings, periods), (offerings, periods), (teams, periods);
    ``exact_seconds``: time for the local search and the period MILPs in all (0: the rounding only);
    ``workers``: threads for the period MILPs (None: ``solvers.ahead.workers``; the answer is the same).
    """
    problem = RealizeContext(sets, exact_seconds)
    periods = sets.demand.shape[1]
    n_s = len(sets.services)
    p = sets.period_hours
    train_non_spot, train_spot, team_train = training
    committed = committed.astype(float)
    kind_code = {kind: k for k, kind in enumerate(KINDS)}
    frame = inference[inference["replicas"] > EPS]
    codes = frame["tier"].map(kind_code).to_numpy(dtype=np.int64)
    data = np.column_stack(
        [
            frame["period"].to_numpy(np.int64),
            frame["o"].to_numpy(np.int64),
            codes,
            frame["i"].to_numpy(np.int64),
        ]
    )
    fractions = frame["replicas"].to_numpy(float)
    order = np.argsort(data[:, 0], kind="stable")
    data, fractions = data[order], fractions[order]
    bounds = np.searchsorted(data[:, 0], np.arange(periods + 1))
    target = sets.demand.astype(np.int64)  # the whole demand: the MILP and the limits decide what stays out
    keys = [
        _period_key(problem, t, data[bounds[t] : bounds[t + 1], 1:], fractions[bounds[t] : bounds[t + 1]],
                    target[:, t], committed[:, t], train_non_spot[:, t], train_spot[:, t], team_train[:, t])
        for t in range(periods)
    ]  # fmt: skip
    # distinct periods, those standing for the most hours first: when the refining budget ends, the
    # periods left with the rounded answer are those that weigh least in the bill
    first: dict[bytes, int] = {}
    for t, key in enumerate(keys):
        first.setdefault(key, t)
    weight = Counter(keys)
    rounded: dict[bytes, tuple[PeriodState, np.ndarray, np.ndarray]] = {}  # state, served, target
    refine: list[bytes] = []  # periods that pay for inference, heaviest first
    free = 0  # periods where inference costs nothing beyond training: nothing to refine
    for key, t in sorted(first.items(), key=lambda item: (-weight[item[0]], item[1])):
        room = problem.burst - team_train[:, t]
        period = PeriodState(problem, t, committed[:, t], train_non_spot[:, t], train_spot[:, t], room)
        rows, shares = data[bounds[t] : bounds[t + 1], 1:], np.round(fractions[bounds[t] : bounds[t + 1]], 6)
        served = _round_period(period, rows, shares, target[:, t])
        rounded[key] = (period, served, target[:, t])
        if _free(period, served, target[:, t]):
            free += 1
        elif served.any():
            refine.append(key)
    # (2) the local search on every period that pays, then (3) their MILPs, each while the budget
    # (counted work) lasts and the safety net has not fired: the local search finds most of the saving
    # (growth-year: $86,369 of $87,336, in 14 s of 47), the MILPs the rest (inference-heavy-saas's MIG
    # layouts: $14,696 of $50,231)
    for done, key in enumerate(refine):
        if problem.exact_seconds_left <= 0 or past(None, "whole replicas"):
            break
        if progress is not None and done and done % 1000 == 0:
            progress(f"whole replicas: local search on {done:,} of {len(refine):,} periods")
        _improve_step(*rounded[key])
    _exact_steps(problem, [rounded[key] for key in refine], progress, workers)
    cache = {key: (_rows(period), served) for key, (period, served, _target) in rounded.items()}
    out: list[tuple[int, int, int, int, float, int]] = []
    new_unserved = np.zeros((n_s, periods))
    for t, key in enumerate(keys):
        result, served = cache[key]
        out += [(t, *row) for row in result]
        new_unserved[:, t] = np.maximum(0, sets.demand[:, t] - served)
    columns = ["period", "o", "tier", "i", "nodes", "replicas"]
    table = pd.DataFrame(out, columns=columns)
    table["tier"] = np.array(KINDS, dtype=object)[table["tier"].to_numpy(np.int64)] if len(table) else []
    delta = sum(
        float((new_unserved[i] - unserved[i]).sum()) * replica_penalty(sets, i) * p for i in range(n_s)
    )
    return Realized(
        table.astype({"replicas": np.int64}), new_unserved, delta, len(cache), problem.exact_periods,
        free + problem.searched_periods, problem.milp_periods,
    )  # fmt: skip


def _period_key(
    problem: RealizeContext, t: int, rows: np.ndarray, shares: np.ndarray, *state: np.ndarray
) -> bytes:
    """What period ``t``'s answer depends on: its model rows and shares (rounded), its demand,
    commitments and training (``state``) and the savings plans active."""
    parts = (rows.tobytes(), np.round(shares, 6).tobytes(), *(a.tobytes() for a in state))
    return b"".join((*parts, problem.plans_key(t)))


def _round_period(
    period: PeriodState, rows: np.ndarray, shares: np.ndarray, target: np.ndarray
) -> np.ndarray:
    """(1) the rounding of one period: its replicas placed; the replicas served per service."""
    problem = period.p
    contents: dict[tuple[int, int], tuple[int, dict[str, int]]] = {}
    for (o, kind, i), share in zip(rows.tolist(), shares.tolist(), strict=True):
        whole = math.floor(share + EPS)
        period.remainder[(o, kind, i)] = period.remainder.get((o, kind, i), 0.0) + share - whole
        if not whole:
            continue
        shape = problem.shapes[(i, o)]
        gpus, mig = contents.get((o, kind), (0, {}))
        if shape.profile is None:
            gpus += whole * shape.gpus
        else:
            mig[shape.profile] = mig.get(shape.profile, 0) + whole
        contents[(o, kind)] = (gpus, mig)
        period.replicas[(o, kind, i)] = period.replicas.get((o, kind, i), 0) + whole
        period.team_room[problem.team_of[i]] -= whole * shape.share
    for (o, kind), (gpus, mig) in contents.items():  # one packing per group, not one per row
        period.groups[(o, kind)] = Group(problem.sets.offerings[o].gpu_model, gpus, mig)
    served = np.zeros(len(target), dtype=np.int64)
    for (_o, _kind, i), n in period.replicas.items():
        served[i] += n
    for i in problem.order:
        while served[i] > target[i]:  # beyond the demand: off where it saves most
            mine = [(o, kind) for (o, kind, j), n in period.replicas.items() if j == i and n > 0]
            o, kind = min(
                mine,
                key=lambda g: (period.delta(i, g[0], g[1], -1), period.remainder.get((g[0], g[1], i), 0.0)),
            )
            period.move(i, o, kind, -1)
            served[i] -= 1
        if served[i] < target[i]:
            served[i] += period.fill(i, int(target[i] - served[i]), preferred=True)
    return served


def _free(period: PeriodState, served: np.ndarray, target: np.ndarray) -> bool:
    """Whether inference costs nothing beyond what training pays: nothing to improve."""
    return bool((served >= target).all()) and period.cost() <= period.training_cost() + EPS


def _improve_step(period: PeriodState, served: np.ndarray, target: np.ndarray) -> None:
    """(2) on one period, its price evaluations charged to the budget and the work meter."""
    problem = period.p
    counted, evaluated = meter().units, period.evaluations
    _improve(period)
    meter().charge_moves(period.evaluations - evaluated, "price evaluation")
    problem.exact_seconds_left -= meter().units - counted
    problem.searched_periods += 1


def _exact_steps(
    problem: RealizeContext,
    periods: list[tuple[PeriodState, np.ndarray, np.ndarray]],
    progress: Callable[[str], None] | None,
    workers: int | None,
) -> None:
    """(3) the periods' MILPs in order while the budget lasts, each run and its model charged to the budget
    and the work meter. The runs are solved ahead in worker threads (``solvers.ahead``: results and work
    handed over in order), so the periods done and their answers are those of one thread, on any load."""
    results = in_order(periods, _solve, workers)
    try:
        for done in itertools.count():
            if problem.exact_seconds_left <= 0 or past(None, "whole replicas"):
                break
            item = next(results, None)
            if item is None:
                break
            if progress is not None and done and done % 1000 == 0:
                progress(f"whole replicas: MILP on {done:,} of {len(periods):,} periods")
            (period, served, target), best, work = item  # the run's work is on the meter now
            counted = meter().units
            _apply(period, target, served, best)
            meter().charge_moves(1, "period model")  # building and reading back its MILP, beyond the run
            problem.exact_seconds_left -= work + meter().units - counted
            problem.milp_periods += 1
    finally:
        results.close()


def _solve(item: tuple[PeriodState, np.ndarray, np.ndarray]) -> dict[tuple[int, int, int], int] | None:
    """The period's MILP optimum from its answer so far (``realize_exact``; reads the period, changes
    nothing: safe in a worker thread while other periods are changed)."""
    period, _served, target = item
    return solve_period(period, target, period.p.penalty, dict(period.replicas))


def _apply(
    period: PeriodState, target: np.ndarray, served: np.ndarray, best: dict[tuple[int, int, int], int] | None
) -> None:
    """Replace the period's answer by the MILP's ``best`` when that costs less."""
    if best is None:
        return
    problem = period.p
    before = period.cost() + float(problem.penalty @ (target - served))
    state = period.snapshot()
    period.groups, period.replicas, period.team_room = {}, {}, period.base_room.copy()
    for (o, kind, i), n in best.items():
        for _ in range(n):
            period.move(i, o, kind, +1)
    now = np.zeros(len(target), dtype=np.int64)
    for (_o, _k, i), n in period.replicas.items():
        now[i] += n
    if period.cost() + float(problem.penalty @ (target - now)) < before - EPS:
        served[:] = now
        problem.exact_periods += 1
    else:
        period.restore(state)


def _improve(period: PeriodState) -> None:
    """Local search on the rounded period: for each group that pays for nodes, try emptying it, and try
    freeing its last node, moving the replicas to the cheapest other groups; keep a move only if the
    period costs less. Fixes what keeping the model's whole parts in place can miss (4 replicas split
    2.5 / 1.5 between two offerings: both rounded to 2, where all 4 on one node pool is cheaper)."""
    problem = period.p
    for _ in range(IMPROVE_ROUNDS):
        improved = False
        for o, kind in sorted(period.groups):
            group = period.groups[(o, kind)]
            g = problem.gpus_per_node[o]
            nodes = math.ceil(group.gpus() / g)
            if not nodes or (kind == 0 and not period.pays_on_demand(o)):
                continue  # all on committed nodes: emptying them saves nothing
            # empty a small group; free the last node of any
            for keep in (0, (nodes - 1) * g) if nodes <= EMPTY_NODES else ((nodes - 1) * g,):
                mine = sorted(
                    ((i, n) for (go, gk, i), n in period.replicas.items() if (go, gk) == (o, kind) and n > 0),
                    key=lambda item: problem.shapes[(item[0], o)].share,
                )
                if not mine or (keep and group.gpus() <= keep):
                    continue
                state, before = period.snapshot(), period.cost()
                removed: list[int] = []
                for i, n in mine:
                    for _ in range(n):
                        if period.groups[(o, kind)].gpus() <= keep:
                            break
                        period.move(i, o, kind, -1)
                        removed.append(i)
                batches = [(i, len(list(same))) for i, same in itertools.groupby(removed)]
                if all(period.fill(i, n, exclude=(o, kind)) == n for i, n in batches) and (
                    period.cost() < before - EPS
                ):
                    improved = True
                    break
                period.restore(state)
                group = period.groups[(o, kind)]
        if not improved:
            return


def _rows(period: PeriodState) -> list[tuple[int, int, int, float, int]]:
    """Each group's packed GPUs shared among its rows (MIG rows by their per-service GPU share), as node
    shares; spot groups scaled to the whole nodes held."""
    problem = period.p
    result = []
    for (o, kind), group in period.groups.items():
        mine = [(i, n) for (go, gk, i), n in period.replicas.items() if (go, gk) == (o, kind) and n > 0]
        if not mine:
            continue
        g = problem.gpus_per_node[o]
        mig_gpus = group.gpus() - group.whole
        mig_weight = sum(n * problem.shapes[(i, o)].share for i, n in mine if problem.shapes[(i, o)].profile)
        scale = (math.ceil(group.gpus() / g) * g / group.gpus()) if kind == 1 and group.gpus() else 1.0
        for i, n in mine:
            shape = problem.shapes[(i, o)]
            gpus = n * shape.gpus if shape.profile is None else mig_gpus * n * shape.share / mig_weight
            result.append((o, kind, i, gpus * scale / g, n))
    return result
