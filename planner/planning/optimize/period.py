"""One period's whole replicas as they are being placed: groups, their nodes and what they cost.

``realize.py`` rounds, searches and, through ``realize_exact.py``, solves each period's replicas on this
state; both read it from here, so neither imports the other. :class:`RealizeContext` is what every period
shares (replica shapes, prices, limits, candidate groups); :class:`PeriodState` is one period's groups,
replicas and team room, priced by :meth:`PeriodState.offering_cost` under the billing rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from models.billing import on_demand_nodes
from models.mig import replica_slice
from models.savingsplans import APPLY_ORDER, coverage_order
from models.tiers import Capacity
from planner.planning.mig.packing import pack
from planner.planning.optimize.build import replica_penalty
from planner.planning.problem.sets import PlanningSets

__all__ = ["EPS", "KINDS", "Group", "PeriodState", "RealizeContext", "ReplicaShape", "replica_shapes"]

EPS = 1e-6
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


_MIG_GPUS: dict[tuple[str, tuple[tuple[str, int], ...]], int] = {}
"""GPUs a MIG demand packs onto, by (GPU model, sorted demand): ``pack`` without its input checks, which
the search below would otherwise repeat hundreds of thousands of times."""


class Group:
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


UndoState = tuple[
    dict[tuple[int, int], tuple[int, dict[str, int]]], dict[tuple[int, int, int], int], np.ndarray
]
"""A period's groups (whole GPUs, MIG instances), replicas and team room, to undo a trial move."""


class PeriodState:
    """One period's realization: groups, their nodes and what they cost under the billing rule."""

    def __init__(
        self,
        problem: RealizeContext,
        period: int,
        committed: np.ndarray,
        train_non_spot: np.ndarray,
        train_spot: np.ndarray,
        team_room: np.ndarray,
    ) -> None:
        self.p = problem
        self.plans = problem.plans_at(period)
        self.committed = committed
        self.train_non_spot = train_non_spot
        self.train_spot = train_spot
        self.team_room = team_room  # GPUs each team may still use (inf without a burst limit)
        self.base_room = team_room.copy()  # the same before any replica is placed
        self.groups: dict[tuple[int, int], Group] = {}
        self.replicas: dict[tuple[int, int, int], int] = {}  # (o, kind, i) -> replicas
        self.remainder: dict[tuple[int, int, int], float] = {}  # the model's fraction not yet placed
        self.evaluations = 0  # prices computed (:meth:`_added`): the local search's counted work

    def group(self, o: int, kind: int) -> Group:
        key = (o, kind)
        if key not in self.groups:
            self.groups[key] = Group(self.p.sets.offerings[o].gpu_model)
        return self.groups[key]

    def offering_cost(self, o: int, gpus: tuple[int, int]) -> float:
        """Cost of offering ``o`` this period with ``gpus`` (non-spot, spot) inference GPUs; inf past a
        limit."""
        g = self.p.gpus_per_node[o]
        non_spot = self.train_non_spot[o] + math.ceil(gpus[0] / g)
        spot = self.train_spot[o] + math.ceil(gpus[1] / g)
        if max(self.committed[o], non_spot) + spot > self.p.max_nodes[o] + EPS:
            return math.inf
        on_demand = on_demand_nodes(non_spot, self.committed[o])
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
        if sign > 0 and shape.share > self.team_room[self.p.team_of[i]] + EPS:
            return math.inf
        return self._added(i, o, kind, sign)

    def _added(self, i: int, o: int, kind: int, sign: int = 1) -> float:
        """:meth:`delta` without the team's room: what depends on offering ``o`` (and the savings plans)."""
        self.evaluations += 1
        shape = self.p.shapes[(i, o)]
        before = self.gpus_of(o)
        changed = self.group(o, kind).gpus(shape, sign)
        after = (changed, before[1]) if kind == 0 else (before[0], changed)
        change = self.offering_cost(o, after) - self.offering_cost(o, before)
        if kind == 0 and o in self.p.plan_covered and self.plans:
            change -= self.plan_saving({o: changed}) - self.plan_saving()
        return change

    def plan_saving(self, inference_gpus: dict[int, int] | None = None) -> float:
        """What the savings plans active this period save against on-demand, by the cloud's rule
        (``models.savingsplans.bill_hours``: the plans in their order, each covering its offerings'
        on-demand nodes highest savings first until its budget is spent), with the non-spot inference GPUs
        of the offerings in ``inference_gpus`` in place of theirs. Their commitments are paid whatever
        happens (``sets.fixed_usd``): only what they save depends on where replicas go."""
        if not self.plans:
            return 0.0
        left: dict[int, float] = {}
        saved = 0.0
        for budget, order in self.plans:
            for o, rate, price in order:
                if budget <= EPS:
                    break
                if o not in left:
                    gpus = (inference_gpus or {}).get(o)
                    gpus = self.gpus_of(o)[0] if gpus is None else gpus
                    non_spot = self.train_non_spot[o] + math.ceil(gpus / self.p.gpus_per_node[o])
                    left[o] = on_demand_nodes(non_spot, self.committed[o])
                covered = min(left[o], budget / rate)
                left[o] -= covered
                budget -= covered * rate
                saved += covered * price
        return saved

    def training_cost(self) -> float:
        """What the period would cost with no inference at all: a lower bound on :meth:`cost` (a savings
        plan saves at most an on-demand node's price per node it covers, so more nodes never cost less)."""
        saving = self.plan_saving(dict.fromkeys(self.p.plan_covered, 0)) if self.plans else 0.0
        return sum(self.offering_cost(o, (0, 0)) for o in self.p.offerings_used) - saving

    def cost(self) -> float:
        """This period's cost of the offerings inference may use (training's own part included), less what
        the savings plans save (:meth:`plan_saving`)."""
        return sum(self.offering_cost(o, self.gpus_of(o)) for o in self.p.offerings_used) - self.plan_saving()

    def snapshot(self) -> UndoState:
        groups = {key: (g.whole, dict(g.mig)) for key, g in self.groups.items()}
        return groups, dict(self.replicas), self.team_room.copy()

    def restore(self, state: UndoState) -> None:
        groups, self.replicas, self.team_room = state
        model = self.p.sets.offerings
        self.groups = {
            key: Group(model[key[0]].gpu_model, whole, mig) for key, (whole, mig) in groups.items()
        }

    def fill(self, i: int, need: int, exclude: tuple[int, int] | None = None, preferred: bool = False) -> int:
        """Place ``need`` replicas of ``i`` one by one where each costs least (ties: where the model put
        the larger fraction); the number placed (fewer when no group can take one within the limits).
        ``preferred``: look first among the groups the model gave ``i`` a share of (the rounding: fast
        where a service has dozens of eligible groups), then everywhere. A replica placed changes the cost
        of another only on its own offering (or, under savings plans, on the offerings they cover), so
        the others' costs are kept from one replica to the next: the same choices, without re-pricing
        every group for each replica (the local search re-places groups of a hundred MIG replicas)."""
        everywhere = [g for g in self.p.candidates[i] if g != exclude]
        chosen = [(o, kind) for (o, kind, j) in self.remainder if j == i] if preferred else []
        known: dict[tuple[int, int], float] = {}  # the cost of one more replica, team room apart
        shares = {o: self.p.shapes[(i, o)].share for o, _kind in (*everywhere, *chosen)}
        team = self.p.team_of[i]
        for placed in range(need):
            room = self.team_room[team] + EPS
            for candidates in (chosen, everywhere) if chosen else (everywhere,):
                best: tuple[float, float, int] = (math.inf, 0.0, -1)
                for k, (o, kind) in enumerate(candidates):
                    if shares[o] > room:
                        continue  # beyond the team's burst limit
                    if (o, kind) not in known:
                        known[(o, kind)] = round(self._added(i, o, kind), 6)
                    option = (known[(o, kind)], -self.remainder.get((o, kind, i), 0.0), k)
                    if option < best:
                        best = option
                cost, _, k = best
                if math.isfinite(cost):
                    break
            if not math.isfinite(cost):
                return placed
            o, kind = candidates[k]
            self.move(i, o, kind, +1)
            self.remainder[(o, kind, i)] = 0.0
            if self.plans and o in self.p.plan_covered:
                known.clear()
            else:
                known.pop((o, 0), None)
                known.pop((o, 1), None)
        return need

    def move(self, i: int, o: int, kind: int, sign: int) -> None:
        shape = self.p.shapes[(i, o)]
        self.group(o, kind).add(shape, sign)
        self.replicas[(o, kind, i)] = self.replicas.get((o, kind, i), 0) + sign
        self.team_room[self.p.team_of[i]] -= sign * shape.share


class RealizeContext:
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
        # the savings plans decided (held; bought ones once the plan is written), in the order the rule
        # applies them, each with its offerings in coverage order: (start, end, USD/h, [(o, rate, c_od)])
        prices = {o.id: o.on_demand_usd_h or 0.0 for o in offerings}
        index = {o.id: k for k, o in enumerate(offerings)}
        self.plans = [
            (plan.start, plan.end if plan.end is not None else len(sets.slot_of_period), plan.usd_per_hour,
             [(index[oid], plan.rates[oid], prices[oid]) for oid in coverage_order(plan, prices)])
            for plan in sorted(sets.savings_plans(), key=lambda plan: (APPLY_ORDER[plan.kind], plan.name))
        ]  # fmt: skip
        self.plan_covered = {o for *_window, _usd, order in self.plans for o, _r, _c in order}
        p = sets.period_hours
        self.penalty = np.array([replica_penalty(sets, i) * p for i in range(len(sets.services))])
        self.exact_seconds_left = exact_seconds
        self.exact_periods = 0  # periods where the MILP beat the greedy answer
        self.searched_periods = 0  # periods that had the local search
        self.milp_periods = 0  # ... and their own MILP
        # largest replicas first: they are the hardest to fit into room left over
        self.order = sorted(
            range(len(sets.services)),
            key=lambda i: -max((self.shapes[(i, o)].share for o, _ in self.candidates[i]), default=0.0),
        )

    def plans_at(self, period: int) -> list[tuple[float, list[tuple[int, float, float]]]]:
        """The savings plans active in ``period``: (USD per hour, offerings in coverage order)."""
        return [(usd, order) for start, end, usd, order in self.plans if start <= period < end and usd > 0]

    def plans_key(self, period: int) -> bytes:
        """Which plans are active in ``period``: periods that differ only there may cost differently."""
        return bytes(start <= period < end for start, end, _usd, _order in self.plans)
