"""A future's fleet as its own plan runs it, billed under any first stage: the second stage of the futures
decomposition (issue 41, ``planner/planning/futures_master.py``).

A future's own plan fixes what runs where in every period: per offering, the non-spot nodes of its pool
(inference and training alike), the spot nodes, Capacity Blocks and flex-start gangs. Holding other
commitments changes only how that pool is billed (``models/billing.py``: per offering and period the
committed nodes cover up to the nodes running, the rest is paid on demand in whole nodes), not whether the
fleet can run: so the fleet billed under a first stage is a *feasible* second stage of that future, and
its cost an upper bound of the best one (a re-optimized dispatch may move a service to where commitments
sit). Billing it is a few array operations, where planning the future again with the purchases held takes
a full plan (about a minute on a shipped scenario): the difference that lets 10 to 50 futures and a dozen
candidates be priced in seconds.

:class:`Fleet` is read once from a plan (:func:`fleet_of`); :func:`bill` prices a first stage on it. The
pool's bill under the plan's own commitments plus :attr:`Fleet.other_usd` (what its rows off the pool
cost) gives back the plan's own cost: ``tests/unit/test_fleet_bill.py`` checks that on planned fleets,
and each bill against an hour-by-hour bill written independently.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import pandas as pd

from models.billing import covered_nodes, on_demand_nodes
from models.plan import Plan
from models.scenario import ExistingCommitment
from models.tiers import HOURS_PER_MONTH, OWN_NODE_TIERS, Tier

__all__ = ["Bill", "Fleet", "HeldNodes", "bill", "fleet_of", "held_nodes", "tail_floor"]

#: Tiers whose nodes are not in an offering's pool: spot, Capacity Blocks, flex-start.
OFF_POOL: tuple[str, ...] = (str(Tier.SPOT), *(str(t) for t in OWN_NODE_TIERS))
#: Slack under which a fractional node count is taken as whole (allocations carry shares of nodes).
WHOLE = 1e-6


@dataclass(frozen=True)
class HeldNodes:
    """Committed nodes of one offering at one rate over one window (hours from the horizon's start)."""

    offering: str
    nodes: int
    usd_per_node_hour: float
    starts_hour: float
    ends_hour: float
    key: tuple[str, str, str, float] | None = None  # the candidate's purchase it stands for (None: held)


def held_nodes(commitments: Sequence[ExistingCommitment], horizon_start: datetime) -> list[HeldNodes]:
    """``commitments`` (a first stage's) as windows counted from ``horizon_start``."""
    result = []
    for c in commitments:
        starts = (c.start - horizon_start).total_seconds() / 3600
        ends = (c.ends - horizon_start).total_seconds() / 3600
        key = (c.offering, str(c.term), c.start.isoformat(), float(c.usd_per_node_hour or 0.0))
        result.append(HeldNodes(c.offering, c.nodes, float(c.usd_per_node_hour or 0.0), starts, ends, key))
    return result


@dataclass(frozen=True)
class Fleet:
    """What one future's fleet runs, read from its own plan (module docstring)."""

    horizon_start: datetime
    period_hours: float
    periods: int
    on_demand_usd_h: dict[str, float]  # offering -> its on-demand rate
    pool: dict[str, np.ndarray]  # offering -> whole non-spot nodes running, per period
    used: dict[str, np.ndarray]  # offering -> the node shares workloads use, per period (<= pool)
    spot: dict[str, np.ndarray]  # offering -> spot nodes, per period (under max_nodes with the pool)
    critical: dict[str, np.ndarray]  # offering -> latency-critical inference nodes, per period
    critical_total: float  # their node-periods, every offering together
    other_usd: float  # what the rows off the pool cost in the horizon (spot, blocks, flex-start)
    scenario_held: tuple[HeldNodes, ...]  # the scenario's own commitments, held in every first stage
    carried: dict[str, float]  # offering -> mean non-spot nodes of the last month (``tail: carried``)
    unserved: int  # runs and services the plan left unserved (the same under any first stage)

    @property
    def hours(self) -> float:
        return self.period_hours * self.periods

    def serving(self, h: HeldNodes) -> np.ndarray:
        """The periods ``h``'s nodes serve in: those that start inside its term."""
        starts = np.arange(self.periods) * self.period_hours
        return (starts >= h.starts_hour - WHOLE) & (starts < h.ends_hour - WHOLE)

    def committed(self, held: Sequence[HeldNodes]) -> dict[str, np.ndarray]:
        """Per offering, the committed nodes serving in each period (:meth:`serving`)."""
        result: dict[str, np.ndarray] = {}
        for h in (*self.scenario_held, *held):
            result.setdefault(h.offering, np.zeros(self.periods))
            result[h.offering] += h.nodes * self.serving(h)
        return result


def fleet_of(plan: Plan, critical: Collection[str] = ()) -> Fleet:
    """``plan``'s fleet (module docstring); ``critical``: the latency-critical services, for the share of
    their node-hours on committed capacity."""
    doc = plan.document
    rows = plan.allocations
    periods, p = doc.horizon.periods, float(doc.horizon.period_hours)
    pooled = ~rows["tier"].astype(str).isin(OFF_POOL)
    used = _per_period(rows[pooled], periods)
    pool = {offering: np.ceil(nodes - WHOLE).clip(min=0.0) for offering, nodes in used.items()}
    mine = rows[pooled & (rows["kind"] == "inference") & rows["workload"].isin(list(critical))]
    crit = _per_period(mine, periods)
    last = max(1, min(periods, math.ceil(HOURS_PER_MONTH / p)))
    recent = rows[(rows["period"] >= periods - last) & pooled]
    carried = {str(k): float(v) for k, v in (recent.groupby("offering")["nodes"].sum() / last).items()}
    start = doc.horizon.start
    scenario_held = tuple(
        HeldNodes(
            c.offering, c.nodes, float(c.usd_per_node_hour),
            (c.start - start).total_seconds() / 3600 if c.start else -math.inf,
            (c.end - start).total_seconds() / 3600 if c.end else math.inf,
        )
        for c in doc.commitments
        if c.existing
    )  # fmt: skip
    return Fleet(
        horizon_start=start,
        period_hours=p,
        periods=periods,
        on_demand_usd_h={k: float(v.on_demand_usd_h or 0.0) for k, v in doc.offerings.items()},
        pool=pool,
        used=used,
        spot=_per_period(rows[rows["tier"].astype(str) == str(Tier.SPOT)], periods),
        critical=crit,
        critical_total=float(mine["nodes"].sum()),
        other_usd=float(rows.loc[~pooled, "cost_usd"].sum()),
        scenario_held=scenario_held,
        carried=carried,
        unserved=len(doc.unserved),
    )


def _per_period(rows: pd.DataFrame, periods: int) -> dict[str, np.ndarray]:
    """Per offering, the nodes of ``rows`` summed per period."""
    result: dict[str, np.ndarray] = {}
    for offering, group in rows.groupby("offering"):
        nodes = np.zeros(periods)
        np.add.at(nodes, group["period"].to_numpy(dtype=np.int64), group["nodes"].to_numpy(dtype=float))
        result[str(offering)] = nodes
    return result


@dataclass(frozen=True)
class Bill:
    """A first stage billed on one fleet."""

    horizon_usd: float
    tail_usd: float
    owed_after_usd: float  # what the commitments (held and bought) still owe after the horizon
    committed_share: float  # latency-critical node-hours on committed nodes (1 where there are none)
    used: dict[tuple[str, str, str, float], float]  # purchase key -> used node-hours / its node-hours


def _inside(h: HeldNodes, start: float, end: float) -> float:
    """Hours of ``h``'s term between ``start`` and ``end``."""
    return max(0.0, min(h.ends_hour, end) - max(h.starts_hour, start))


def bill(fleet: Fleet, held: Sequence[HeldNodes], tail_until: datetime | None = None) -> Bill:
    """``fleet`` billed with ``held`` committed besides the scenario's own (module docstring): per
    offering and period on demand beyond the commitments, every commitment for its hours in the horizon;
    with ``tail_until``, the tail as ``futures.carried_tail`` counts it (the last month's non-spot nodes
    carried on, each stretch between commitment ends billed by the same rule)."""
    p, end = fleet.period_hours, fleet.hours
    committed = fleet.committed(held)
    everything = (*fleet.scenario_held, *held)
    horizon = fleet.other_usd + sum(h.nodes * h.usd_per_node_hour * _inside(h, 0.0, end) for h in everything)
    covered_critical = 0.0
    used: dict[tuple[str, str, str, float], float] = {}
    for offering, running in fleet.pool.items():
        c = committed.get(offering, np.zeros(fleet.periods))
        horizon += float(np.sum(on_demand_nodes(running, c))) * fleet.on_demand_usd_h.get(offering, 0.0) * p
        share = np.divide(covered_nodes(running, c), running, out=np.zeros_like(running), where=running > 0)
        if offering in fleet.critical:
            covered_critical += float(np.sum(fleet.critical[offering] * np.minimum(share, 1.0)))
        in_use = covered_nodes(fleet.used[offering], c)
        ratio = np.divide(in_use, c, out=np.zeros_like(c), where=c > 0)
        for h in held:
            if h.offering == offering and h.key is not None:
                active = fleet.serving(h)
                count = int(active.sum())
                used[h.key] = float(ratio[active].sum()) / count if count else 0.0
    for h in held:
        if h.key is not None and h.key not in used:
            used[h.key] = 0.0
    horizon_end = fleet.horizon_start + timedelta(hours=end)
    tail = 0.0
    if tail_until is not None and tail_until > horizon_end:
        until = (tail_until - fleet.horizon_start).total_seconds() / 3600
        for offering in sorted(set(fleet.carried) | {h.offering for h in everything}):
            mine = [h for h in everything if h.offering == offering and h.ends_hour > end]
            cuts = sorted({end, until, *(min(h.ends_hour, until) for h in mine)})
            for a, b in itertools.pairwise(cuts):
                running_on = [h for h in mine if h.ends_hour > a]
                nodes = sum(h.nodes for h in running_on)
                hourly = sum(h.nodes * h.usd_per_node_hour for h in running_on)
                beyond = max(fleet.carried.get(offering, 0.0) - nodes, 0.0)
                hourly += beyond * fleet.on_demand_usd_h.get(offering, 0.0)
                tail += hourly * (b - a)
    owed = sum(
        h.nodes * h.usd_per_node_hour * max(0.0, h.ends_hour - end)
        for h in everything
        if math.isfinite(h.ends_hour)
    )
    share = covered_critical / fleet.critical_total if fleet.critical_total > 0 else 1.0
    return Bill(horizon, tail, owed, share, used)


def tail_floor(fleet: Fleet, tail_until: datetime | None, least_usd_h: Mapping[str, float]) -> float:
    """A lower bound on the tail :func:`bill` counts under *any* first stage on ``fleet``: every node-hour
    carried after the horizon is paid at least the least rate its offering is sold at (``least_usd_h``:
    on demand, any commitment or savings plan rate, held or for sale), and commitments beyond the carried
    nodes only add. Zero without a tail."""
    if tail_until is None:
        return 0.0
    hours = (tail_until - fleet.horizon_start).total_seconds() / 3600 - fleet.hours
    if hours <= 0:
        return 0.0
    return hours * sum(nodes * least_usd_h.get(offering, 0.0) for offering, nodes in fleet.carried.items())
