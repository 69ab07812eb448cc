"""The node pools a plan holds, as Terraform declares them: one entry per module instance.

Terraform describes a fleet as it should stand, so a plan is cut at one moment (``--at``: what
``gpuplan provision`` would hold then, gangs included) or summarised as a steady state (``--peak``). A
pool here is an offering with its on-demand and spot nodes together (the AWS module mixes them in one
group; GCP and Azure make one group per kind), and a gang is its own pool with its placement group and,
when it is not spot, a capacity reservation that ends with the run (its planned end plus
``RESERVATION_MARGIN``, the margin ``gpuplan provision`` gives its reservations).

The steady state holds, per offering, on demand ``max(the most committed nodes at any period, the most
non-spot nodes the plan runs at any period)`` and on spot the most spot nodes at any period: the
commitments are paid whether nodes run or not, so they are the baseline, and every pool's peak is held so
the fleet never waits for capacity. Training gangs are transient and left out of it (the README says
so): they come and go with ``gpuplan provision`` or a root written ``--at`` their start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from models.naming import parse_offering, pool_name, safe_name
from models.plan import Plan
from models.tiers import CapacityType, Tier
from planner.outputs.desired import DEFAULT_LEAD_HOURS, RESERVATION_MARGIN, desired_state, reservation_name

__all__ = ["KEY_LIMIT", "TerraformPool", "at_time", "clouds_of", "steady_state"]

#: Longest module instance name: the modules prefix every resource name with it and add suffixes.
KEY_LIMIT = 41
_TOLERANCE = 1e-6


@dataclass(frozen=True)
class TerraformPool:
    """One instance of a ``<cloud>-gpu-pool`` module."""

    key: str  # the instance's name (``name`` of the module), unique in its root
    pool: str  # the gpuplan-pool tag: models.naming.pool_name, as provision tags a node
    offering: str
    on_demand_nodes: int
    spot_nodes: int
    run: str | None = None  # a gang: its run, tagged gpuplan-run, in its own placement group
    fabric: str | None = None  # the gang's fabric (None for pools: they need none)
    reserved_nodes: int = 0
    placement_group: str | None = None  # a gang's group, as provision names it
    reservation: str | None = None  # a reserved gang's reservation, as provision names it
    #: when the reservation ends: the run's planned end plus the margin provision gives its reservations,
    #: so a root applied and never destroyed stops paying for it (None: no reservation)
    reservation_end: datetime | None = None
    why: str = ""

    @property
    def cloud(self) -> str:
        return parse_offering(self.offering)[0]

    @property
    def region(self) -> str:
        return parse_offering(self.offering)[1]

    @property
    def instance_type(self) -> str:
        return parse_offering(self.offering)[2]


def clouds_of(plan: Plan) -> list[str]:
    """The clouds the plan uses (owned servers are no cloud's), in name order."""
    clouds = {parse_offering(o)[0] for o in plan.document.offerings}
    return sorted(clouds - {"owned"})


def _pool(offering: str, capacity: CapacityType, nodes: int, why: str) -> TerraformPool:
    """The module instance of one pool: ``offering``'s ``nodes`` on ``capacity``."""
    pool = pool_name(offering, capacity)
    spot = capacity is CapacityType.SPOT
    return TerraformPool(
        key=safe_name(pool, limit=KEY_LIMIT),
        pool=pool,
        offering=offering,
        on_demand_nodes=0 if spot else nodes,
        spot_nodes=nodes if spot else 0,
        why=why,
    )


def at_time(
    plan: Plan, cloud: str, at: datetime, lead_hours: float = DEFAULT_LEAD_HOURS, *, reserve_gangs: bool
) -> list[TerraformPool]:
    """What the plan holds on ``cloud`` at ``at``: the pools of that period and the gangs running then
    or starting within ``lead_hours`` (an upcoming gang: its group and, where ``reserve_gangs``, its
    reservation; no nodes yet)."""
    desired = desired_state(
        plan,
        at,
        handles=lambda o: parse_offering(o)[0] == cloud,
        lead_hours=lead_hours,
        reserve_gangs=reserve_gangs,
    )
    result = [
        _pool(pool.offering, pool.capacity, pool.nodes, f"period {desired.period}")
        for pool in sorted(desired.pools, key=lambda p: p.pool)
        if pool.nodes
    ]
    for gang in sorted(desired.gangs, key=lambda g: g.run):
        held = gang.nodes if gang.running else 0
        spot = gang.capacity is CapacityType.SPOT
        result.append(
            TerraformPool(
                key=safe_name(gang.run, limit=KEY_LIMIT),
                pool=pool_name(gang.offering, gang.capacity),
                offering=gang.offering,
                on_demand_nodes=0 if spot else held,
                spot_nodes=held if spot else 0,
                run=gang.run,
                fabric=None if gang.fabric in (None, "none") else gang.fabric,
                reserved_nodes=gang.nodes if gang.reserve else 0,
                placement_group=gang.placement_group,
                reservation=reservation_name(gang) if gang.reserve else None,
                reservation_end=gang.end + RESERVATION_MARGIN if gang.reserve else None,
                why=f"{gang.job} run {gang.run_index}: {gang.start:%Y-%m-%d %H:%M}Z to "
                f"{gang.end:%Y-%m-%d %H:%M}Z"
                + ("" if gang.running else " (starts within the lead time: group and reservation only)"),
            )
        )
    return result


def steady_state(plan: Plan, cloud: str) -> list[TerraformPool]:
    """Per offering of ``cloud``: the committed baseline or the non-spot peak, and the spot peak."""
    rows = plan.allocations
    rows = rows[(rows["kind"].to_numpy() == "inference") & (rows["tier"].to_numpy() != Tier.OWNED)]
    rows = rows[[parse_offering(o)[0] == cloud for o in rows["offering"]]]
    spot = rows["tier"].to_numpy() == Tier.SPOT
    per_period = rows.assign(spot=spot).groupby(["offering", "spot", "period"])["nodes"].sum()
    peaks: dict[tuple[str, bool], int] = {
        (str(offering), bool(is_spot)): math.ceil(float(value) - _TOLERANCE)
        for (offering, is_spot), value in per_period.groupby(level=[0, 1]).max().items()
    }
    committed = _committed_peak(plan, cloud)
    offerings = sorted({o for o, _ in peaks} | set(committed))
    result = []
    for offering in offerings:
        base = committed.get(offering, 0)
        on_demand = max(base, peaks.get((offering, False), 0))
        spot_nodes = peaks.get((offering, True), 0)
        why = f"peak: {peaks.get((offering, False), 0)} non-spot, {spot_nodes} spot; {base} committed"
        if on_demand:
            result.append(_pool(offering, CapacityType.ON_DEMAND, on_demand, why))
        if spot_nodes:
            result.append(_pool(offering, CapacityType.SPOT, spot_nodes, why))
    return result


def _committed_peak(plan: Plan, cloud: str) -> dict[str, int]:
    """The most nodes of each offering the plan's commitments (held or bought) cover in any period."""
    periods = plan.document.horizon.periods
    counts: dict[str, np.ndarray] = {}
    for commitment in plan.document.commitments:
        if parse_offering(commitment.offering)[0] != cloud:
            continue
        line = counts.setdefault(commitment.offering, np.zeros(periods, dtype=np.int64))
        end = periods if commitment.end_period is None else commitment.end_period
        line[commitment.start_period : end] += commitment.nodes
    return {offering: int(line.max()) for offering, line in counts.items() if line.size}
