"""Whole replicas on whole nodes: the model's fractional inference made into something a cluster runs.

Both methods size inference in node-equivalents: a service's replicas may come out in fractions split
between offerings (3.14 replicas of a service on one offering), and services of different MIG
profiles share a node's GPUs pro rata. This step turns every period's serving into whole replicas per
(offering, capacity kind) and sizes each such group's nodes from an actual packing:

- a whole-GPU replica takes ``g`` GPUs, ``g`` a divisor of the node's GPUs (``sets.whole_gpu_size``):
  sizes that divide each other pack without loss (placed largest first, each lands on an aligned free
  block), so a group's whole-GPU replicas and MIG-partitioned GPUs fit on ``ceil(GPUs / G)`` nodes;
- MIG replicas of a group are packed together onto the fewest GPUs in legal layouts
  (``planner.mig.packing.pack``); each such GPU is one more single-GPU item.

Per period, three steps. (1) Rounding: every service keeps the whole part of each fractional share the
model gave it, and the replicas still missing go one at a time, largest replicas first, to the group
where they cost least given the nodes already needed there (room on a committed node, or on a node
already held, costs nothing); ties go to where the model put the larger fraction; replicas beyond the
demand are taken off where that saves most. (2) Local search: empty a small group, or free the last
node of any, if moving its replicas elsewhere costs less. (3) The period's own MILP
(``realize_exact.py``: the same hour with commitments and training fixed, MIG as exact layouts), from
that answer, kept where it is cheaper; within a time budget (``SolveSettings.realize_budget``), after
which periods keep the answer of (1) and the plan's notes say how many had (2) and (3). Limits hold
throughout: an offering's ``max_nodes`` and team burst limits (GPUs counted as the model counts them);
a replica no group can take without breaking one is left unserved and reported, and the plan's
penalty counts it.

Cost follows from the sizes: the non-spot nodes beyond the commitments are whole on-demand nodes, spot
nodes are whole spot nodes (billed by ``solution.extract_allocations``). Periods with the same
serving, demand, training and commitments have the same answer, so each distinct period is realized
once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from models.mig import replica_slice
from models.tiers import Capacity
from planner.mig.packing import pack
from planner.optimize.build import replica_penalty
from planner.optimize.realize_exact import solve_period
from planner.optimize.sets import PlanningSets

__all__ = ["Realized", "ReplicaShape", "realize", "replica_shapes"]

EPS = 1e-6
IMPROVE_ROUNDS = 3
EXACT_BUDGET_SECONDS = 60.0  # MILP time over all periods; beyond it, periods keep the rounded answer
EMPTY_NODES = 2  # groups of at most this many nodes are also tried emptied whole
KINDS: tuple[Capacity, ...] = (Capacity.NON_SPOT, Capacity.SPOT)


@dataclass(frozen=True, slots=True)
class ReplicaShape:
    """How one replica of a service sits on a node of an offering."""

    gpus: int
    """Whole GPUs it takes (0 for a MIG replica)."""
    profile: str | None
    """Its MIG profile (one instance), or None for whole GPUs."""
    share: float
    """GPUs per replica as the planning model counts them (``G / q``): burst limits are counted so."""


def replica_shapes(sets: PlanningSets) -> dict[tuple[int, int], ReplicaShape]:
    """(service, offering) -> shape, for every eligible pair. MIG where the offering's GPU partitions and
    a slice smaller than the whole GPU holds the replica (the profile ``sets.replicas_per_node`` counts
    with), else whole GPUs: ``G / q``, a divisor of ``G`` by construction."""
    shapes = {}
    for (i, o), q in sets.replicas_per_node.items():
        service, offering = sets.services[i], sets.offerings[o]
        g = offering.gpus_per_node
        chosen = replica_slice(offering.gpu_model, service.gpu_memory_gb, service.gpu_compute_share)
        if chosen is not None:
            shapes[(i, o)] = ReplicaShape(0, chosen.name, g / q)
        else:
            size = round(g / q)
            if size * q != g:  # pragma: no cover - sets.replicas_per_node rounds sizes to divisors
                raise AssertionError(f"{service.name} on {offering.id}: {g} GPUs / {q} replicas is not whole")
            shapes[(i, o)] = ReplicaShape(size, None, float(size))
    return shapes


@dataclass
class Realized:
    """The realized inference: rows as ``Solution.inference`` (whole ``replicas``; ``nodes`` the share of
    the group's packed GPUs, spot groups scaled to their whole nodes) and the replicas left unserved."""

    inference: pd.DataFrame
    unserved: np.ndarray  # (services, periods)
    penalty_delta_usd: float  # the penalty of replicas unserved beyond the model's (or fewer: negative)
    distinct_periods: int
    exact_periods: int = 0  # distinct periods where the MILP beat the rounding
    refined_periods: int = 0  # distinct periods that had the local search and the MILP (the rest, once
    # the time budget ran out, keep the rounding)


_MIG_GPUS: dict[tuple[str, tuple[tuple[str, int], ...]], int] = {}
"""GPUs a MIG demand packs onto, by (GPU model, sorted demand): ``pack`` without its input checks, which
the search below would otherwise repeat hundreds of thousands of times."""


class _Group:
    """The replicas of one (offering, kind) in one period, and the GPUs they need (kept up to date)."""

    __slots__ = ("gpu_model", "mig", "needed", "whole")

    def __init__(self, gpu_model: str, whole: int = 0, mig: dict[str, int] | None = None) -> None:
        self.gpu_model = gpu_model
        self.whole = whole
        self.mig: dict[str, int] = mig or {}
        self.needed = self._count(self.whole, self.mig)

    def _count(self, whole: int, mig: dict[str, int]) -> int:
        key = (self.gpu_model, tuple(sorted(item for item in mig.items() if item[1])))
        gpus = _MIG_GPUS.get(key)
        if gpus is None:
            gpus = _MIG_GPUS[key] = pack(self.gpu_model, mig).gpus if key[1] else 0
        return whole + gpus

    def gpus(self, shape: ReplicaShape | None = None, sign: int = 0) -> int:
        """GPUs the group needs, with ``sign`` replicas of ``shape`` added (or removed)."""
        if shape is None or not sign:
            return self.needed
        if shape.profile is None:
            return self.needed + sign * shape.gpus
        mig = dict(self.mig)
        mig[shape.profile] = mig.get(shape.profile, 0) + sign
        return self._count(self.whole, mig)

    def add(self, shape: ReplicaShape, sign: int = 1) -> None:
        self.needed = self.gpus(shape, sign)
        self.whole += sign * shape.gpus
        if shape.profile is not None:
            self.mig[shape.profile] = self.mig.get(shape.profile, 0) + sign


_State = tuple[dict[tuple[int, int], tuple[int, dict[str, int]]], dict[tuple[int, int, int], int], np.ndarray]
"""A period's groups (whole GPUs, MIG instances), replicas and team room, to undo a trial move."""


class _Period:
    """One period's realization: groups, their nodes and what they cost under the billing rule."""

    def __init__(
        self, problem: _Problem, committed: np.ndarray, train_non_spot: np.ndarray, train_spot: np.ndarray,
        team_room: np.ndarray,
    ) -> None:  # fmt: skip
        self.p = problem
        self.committed = committed
        self.train_non_spot = train_non_spot
        self.train_spot = train_spot
        self.team_room = team_room  # GPUs each team may still use (inf without a burst limit)
        self.base_room = team_room.copy()  # the same before any replica is placed
        self.groups: dict[tuple[int, int], _Group] = {}
        self.replicas: dict[tuple[int, int, int], int] = {}  # (o, kind, i) -> replicas
        self.remainder: dict[tuple[int, int, int], float] = {}  # the model's fraction not yet placed

    def group(self, o: int, kind: int) -> _Group:
        key = (o, kind)
        if key not in self.groups:
            self.groups[key] = _Group(self.p.sets.offerings[o].gpu_model)
        return self.groups[key]

    def offering_cost(self, o: int, gpus: tuple[int, int]) -> float:
        """Cost of offering ``o`` this period with ``gpus`` (non-spot, spot) inference GPUs; inf past a
        limit."""
        g = self.p.gpus_per_node[o]
        non_spot = self.train_non_spot[o] + math.ceil(gpus[0] / g)
        spot = self.train_spot[o] + math.ceil(gpus[1] / g)
        if max(self.committed[o], non_spot) + spot > self.p.max_nodes[o] + EPS:
            return math.inf
        on_demand = max(0.0, non_spot - self.committed[o])
        if on_demand > EPS and self.p.on_demand[o] is None:
            return math.inf
        if gpus[1] and self.p.spot[o] is None:
            return math.inf
        return on_demand * (self.p.on_demand[o] or 0.0) + math.ceil(gpus[1] / g) * (self.p.spot[o] or 0.0)

    def pays_on_demand(self, o: int) -> bool:
        """Whether offering ``o`` holds non-spot nodes beyond its commitments this period."""
        g = self.p.gpus_per_node[o]
        return self.train_non_spot[o] + math.ceil(self.gpus_of(o)[0] / g) > self.committed[o] + EPS

    def gpus_of(self, o: int) -> tuple[int, int]:
        return (
            self.groups[(o, 0)].gpus() if (o, 0) in self.groups else 0,
            self.groups[(o, 1)].gpus() if (o, 1) in self.groups else 0,
        )

    def delta(self, i: int, o: int, kind: int, sign: int) -> float:
        """What adding (+1) or removing (-1) one replica of ``i`` on (o, kind) changes in cost."""
        shape = self.p.shapes[(i, o)]
        team = self.p.team_of[i]
        if sign > 0 and shape.share > self.team_room[team] + EPS:
            return math.inf
        before = self.gpus_of(o)
        changed = self.group(o, kind).gpus(shape, sign)
        after = (changed, before[1]) if kind == 0 else (before[0], changed)
        return self.offering_cost(o, after) - self.offering_cost(o, before)

    def training_cost(self) -> float:
        """What the period would cost with no inference at all: a lower bound on :meth:`cost`."""
        return sum(self.offering_cost(o, (0, 0)) for o in self.p.offerings_used)

    def cost(self) -> float:
        """This period's cost of the offerings inference may use (training's own part included)."""
        return sum(self.offering_cost(o, self.gpus_of(o)) for o in self.p.offerings_used)

    def snapshot(self) -> _State:
        groups = {key: (g.whole, dict(g.mig)) for key, g in self.groups.items()}
        return groups, dict(self.replicas), self.team_room.copy()

    def restore(self, state: _State) -> None:
        groups, self.replicas, self.team_room = state
        model = self.p.sets.offerings
        self.groups = {
            key: _Group(model[key[0]].gpu_model, whole, mig) for key, (whole, mig) in groups.items()
        }

    def fill(self, i: int, need: int, exclude: tuple[int, int] | None = None, preferred: bool = False) -> int:
        """Place ``need`` replicas of ``i`` one by one where each costs least (ties: where the model put
        the larger fraction); the number placed (fewer when no group can take one within the limits).
        ``preferred``: look first among the groups the model gave ``i`` a share of (the rounding: fast
        where a service has dozens of eligible groups), then everywhere."""
        everywhere = [g for g in self.p.candidates[i] if g != exclude]
        chosen = [(o, kind) for (o, kind, j) in self.remainder if j == i] if preferred else []
        for placed in range(need):
            for candidates in (chosen, everywhere) if chosen else (everywhere,):
                options = [
                    (round(self.delta(i, o, kind, +1), 6), -self.remainder.get((o, kind, i), 0.0), k)
                    for k, (o, kind) in enumerate(candidates)
                ]
                cost, _, k = min(options, default=(math.inf, 0.0, -1))
                if math.isfinite(cost):
                    break
            if not math.isfinite(cost):
                return placed
            o, kind = candidates[k]
            self.move(i, o, kind, +1)
            self.remainder[(o, kind, i)] = 0.0
        return need

    def move(self, i: int, o: int, kind: int, sign: int) -> None:
        shape = self.p.shapes[(i, o)]
        self.group(o, kind).add(shape, sign)
        self.replicas[(o, kind, i)] = self.replicas.get((o, kind, i), 0) + sign
        self.team_room[self.p.team_of[i]] -= sign * shape.share


class _Problem:
    """What every period shares: shapes, prices, limits, candidate groups per service."""

    def __init__(self, sets: PlanningSets, exact_seconds: float) -> None:
        self.sets = sets
        self.shapes = replica_shapes(sets)
        offerings = sets.offerings
        self.gpus_per_node = [o.gpus_per_node for o in offerings]
        self.max_nodes = [o.max_nodes if o.max_nodes is not None else math.inf for o in offerings]
        self.on_demand = [o.on_demand_usd_h for o in offerings]
        self.spot = [o.spot_usd_h for o in offerings]
        teams = {team.name: m for m, team in enumerate(sets.scenario.teams)}
        self.team_of = [teams[s.team] for s in sets.services]
        self.burst = np.array(
            [t.burst_gpus if t.burst_gpus is not None else math.inf for t in sets.scenario.teams], dtype=float
        )
        self.candidates: list[list[tuple[int, int]]] = [[] for _ in sets.services]
        for (i, o), kinds in sorted(sets.serve_tiers.items()):
            self.candidates[i] += [(o, KINDS.index(kind)) for kind in kinds]
        self.offerings_used = sorted({o for groups in self.candidates for o, _ in groups})
        p = sets.period_hours
        self.penalty = np.array([replica_penalty(sets, i) * p for i in range(len(sets.services))])
        self.exact_seconds_left = exact_seconds
        self.exact_periods = 0  # periods where the MILP beat the greedy answer
        self.refined_periods = 0  # periods that had the local search and the MILP
        # largest replicas first: they are the hardest to fit into room left over
        self.order = sorted(
            range(len(sets.services)),
            key=lambda i: -max((self.shapes[(i, o)].share for o, _ in self.candidates[i]), default=0.0),
        )


def realize(
    sets: PlanningSets,
    inference: pd.DataFrame,
    unserved: np.ndarray,
    committed: np.ndarray,
    training: tuple[np.ndarray, np.ndarray, np.ndarray],
    progress: Callable[[str], None] | None = None,
    exact_seconds: float = EXACT_BUDGET_SECONDS,
) -> Realized:
    """Whole replicas per (offering, kind) every period, on nodes sized by packing.

    ``inference``: the model's rows (period, o, tier, i, nodes, replicas; fractional); ``unserved``:
    its unserved replicas (services, periods); ``committed``: (offerings, periods) nodes committed;
    ``training``: per period the non-spot and spot nodes training holds per offering and the GPUs it
    holds per team, arrays (offerings, periods), (offerings, periods), (teams, periods);
    ``exact_seconds``: time for the local search and the period MILPs in all (0: the rounding only).
    """
    problem = _Problem(sets, exact_seconds)
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
    cache: dict[bytes, tuple[list[tuple[int, int, int, float, int]], np.ndarray]] = {}
    out: list[tuple[int, int, int, int, float, int]] = []
    new_unserved = np.zeros((n_s, periods))
    for t in range(periods):
        rows = data[bounds[t] : bounds[t + 1], 1:]
        shares = np.round(fractions[bounds[t] : bounds[t + 1]], 6)
        key = b"".join(
            (
                rows.tobytes(), shares.tobytes(), target[:, t].tobytes(), committed[:, t].tobytes(),
                train_non_spot[:, t].tobytes(), train_spot[:, t].tobytes(), team_train[:, t].tobytes(),
            )
        )  # fmt: skip
        if key not in cache:
            room = problem.burst - team_train[:, t]
            period = _Period(problem, committed[:, t], train_non_spot[:, t], train_spot[:, t], room)
            cache[key] = _realize_period(period, rows, shares, target[:, t])
            if progress is not None and len(cache) % 1000 == 0:
                progress(
                    f"whole replicas: {len(cache):,} distinct periods ({problem.refined_periods:,} refined)"
                )
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
        problem.refined_periods,
    )  # fmt: skip


def _realize_period(
    period: _Period, rows: np.ndarray, shares: np.ndarray, target: np.ndarray
) -> tuple[list[tuple[int, int, int, float, int]], np.ndarray]:
    """Rows (o, kind, i, nodes share, replicas) and replicas served per service, for one period."""
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
        period.groups[(o, kind)] = _Group(problem.sets.offerings[o].gpu_model, gpus, mig)
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
    free = (served >= target).all() and period.cost() <= period.training_cost() + EPS
    if free:  # inference costs nothing beyond what training pays: nothing to improve
        problem.refined_periods += 1
    elif problem.exact_seconds_left > 0 and served.any():  # (2) and (3), while the budget lasts
        began = time.perf_counter()
        _improve(period)
        _exact(period, target, served)
        problem.exact_seconds_left -= time.perf_counter() - began
        problem.refined_periods += 1
    return _rows(period), served


def _exact(period: _Period, target: np.ndarray, served: np.ndarray) -> None:
    """Replace the greedy answer by the period's MILP optimum when that costs less (``realize_exact``)."""
    problem = period.p
    greedy = dict(period.replicas)
    before = period.cost() + float(problem.penalty @ (target - served))
    best = solve_period(period, target, problem.penalty, greedy)
    if best is None:
        return
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


def _improve(period: _Period) -> None:
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
                if all(period.fill(i, 1, exclude=(o, kind)) == 1 for i in removed) and (
                    period.cost() < before - EPS
                ):
                    improved = True
                    break
                period.restore(state)
                group = period.groups[(o, kind)]
        if not improved:
            return


def _rows(period: _Period) -> list[tuple[int, int, int, float, int]]:
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
