"""Is the fleet consuming what was bought? Each commitment's use, planned and actual, and idle reservations.

A commitment pays only if the scheduler lands work on it: an RI, a committed-use discount or a reservation
covers the non-spot nodes of its offering running beside it (:mod:`models.billing`), and a capacity
reservation must be *targeted*: an on-demand node launched outside it (another zone, an autoscaler that does
not select it; zalando-incubator/kubernetes-on-aws PR #11623 is a Karpenter feature gate that once stopped
open reservations being used) is paid on demand while the reservation is paid idle beside it.

:func:`commitment_use` gives, per commitment active now, the share of its offering's committed nodes that
non-spot nodes cover: planned (the plan's rows of the current period) and actual (the fleet). The billing
rule pools an offering's commitments, so every commitment of one offering shares one figure.
:func:`idle_reservations` finds each capacity reservation with free slots while on-demand nodes of its
offering run outside every reservation.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from models.billing import covered_nodes
from models.plan import COMMITTED_TIERS, PlanDocument
from providers.resources import CapacityType, Inventory

__all__ = ["CommitmentUse", "IdleReservation", "commitment_use", "idle_reservations"]


@dataclass(frozen=True)
class CommitmentUse:
    """One commitment active now: the share of its offering's committed nodes in use, planned and actual."""

    name: str
    offering: str
    nodes: int
    planned: float
    actual: float


@dataclass(frozen=True)
class IdleReservation:
    """A capacity reservation with free slots while on-demand nodes of its offering run outside it."""

    name: str
    offering: str
    held: int
    running_in_it: int
    on_demand_outside: int

    def describe(self) -> str:
        idle = self.held - self.running_in_it
        return (
            f"reservation {self.name} holds {self.held} x {self.offering} but {idle} of them run nothing "
            f"while {self.on_demand_outside} on-demand nodes of that offering run outside it: both are paid; "
            "launch into the reservation (target it, or let the autoscaler select it) or release it"
        )


def commitment_use(
    document: PlanDocument, allocations: pd.DataFrame, inventory: Inventory, now: datetime
) -> list[CommitmentUse]:
    """Every commitment of the plan active at ``now``: planned use in the current period and actual use by
    the fleet's live non-spot nodes, each as covered nodes over committed nodes of the offering."""
    horizon = document.horizon
    period = math.floor((now - horizon.start).total_seconds() / 3600 / horizon.period_hours)
    active = [
        c
        for c in document.commitments
        if (c.start is None or c.start <= now) and (c.end is None or now < c.end)
    ]
    committed: dict[str, int] = defaultdict(int)
    for c in active:
        committed[c.offering] += c.nodes
    running: dict[str, int] = defaultdict(int)
    for node in inventory.live_nodes():
        if node.capacity != CapacityType.SPOT:
            running[node.offering] += 1
    planned_nodes: dict[str, float] = defaultdict(float)
    if 0 <= period < horizon.periods and len(allocations):
        rows = allocations[
            (allocations["period"] == period) & allocations["tier"].isin(list(COMMITTED_TIERS))
        ]
        for offering, nodes in rows.groupby("offering")["nodes"].sum().items():
            planned_nodes[str(offering)] = float(nodes)
    found = []
    for c in active:
        total = committed[c.offering]
        if total <= 0:
            continue
        found.append(
            CommitmentUse(
                name=c.name or c.offering,
                offering=c.offering,
                nodes=c.nodes,
                planned=min(1.0, planned_nodes[c.offering] / total),
                actual=covered_nodes(float(running[c.offering]), float(total)) / total,
            )
        )
    return found


def idle_reservations(inventory: Inventory) -> list[IdleReservation]:
    """Active capacity reservations with free slots while on-demand nodes of the same offering run outside
    every reservation (a gang's reservation is filled by its own launch, so it counts the same way)."""
    live = inventory.live_nodes()
    known = {key for r in inventory.reservations for key in (r.id, r.name) if key}
    outside: dict[str, int] = defaultdict(int)
    for node in live:
        if node.capacity == CapacityType.ON_DEMAND and (
            node.reservation is None or node.reservation not in known
        ):
            outside[node.offering] += 1
    found = []
    for reservation in inventory.reservations:
        if reservation.state not in ("active", "available"):
            continue
        inside = sum(
            1
            for n in live
            if n.reservation is not None and n.reservation in (reservation.id, reservation.name)
        )
        if inside < reservation.nodes and outside[reservation.offering] > 0:
            found.append(
                IdleReservation(
                    name=reservation.name,
                    offering=reservation.offering,
                    held=reservation.nodes,
                    running_in_it=inside,
                    on_demand_outside=outside[reservation.offering],
                )
            )
    return found
