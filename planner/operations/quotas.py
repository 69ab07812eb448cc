"""Quotas before launch: the launches and reservations of an action list that the account's quotas cannot
take.

A launch beyond a quota fails at the cloud after the placement group and the reservation before it were
made (and the reservation bills from then on); a fleet of several pools fails in whatever order the cloud
meets them. So provision reads the quotas the launches count against (``Provider.quotas``: AWS Service
Quotas' vCPUs per instance family, Compute Engine's regional and GPU quotas, Azure's compute usages)
before anything is created, and :func:`check_quotas` decides, in the order of the action list, which
actions fit what is free. One that does not fit is refused, naming the quota and what the plan needs;
the others go on. Terminations free nothing in time: a pool's are done after its launches.

Reservations count too. EC2 allows Capacity Reservations up to the account's On-Demand limit less the
instances already running (EC2 User Guide, Capacity Reservation limits:
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-limits.html) and refuses one
beyond it; a Compute Engine reservation takes its VMs' quota when it is made
(https://cloud.google.com/compute/docs/instances/reservations-overview). A gang's reservation is often
made hours before its launch (``lead_hours``), in a cycle with no launch at all, so it is checked on its
own: nodes x units of its offering on demand. A launch into a reservation takes no more of a quota than
what the reservation holds (counted once: at the reservation when it is made in the same list, or in the
quota's ``used`` when the cloud reports it held, :attr:`providers.base.Quota.reserved`). A refused
reservation refuses its gang's launch with it, and a refused gang launch its reservation (it would bill
for a gang that is not there).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from models.actions import Action, ActionKind
from models.tiers import CapacityType
from providers.base import Quota

__all__ = ["QuotaCheck", "QuotaShortfall", "check_quotas", "quota_keys"]


@dataclass(frozen=True)
class QuotaShortfall:
    """A quota the launches of an action list need more of than is free."""

    quota: Quota
    needed: float  # units every launch and reservation counting against it needs
    refused: tuple[int, ...]  # the actions refused because of it

    def describe(self) -> str:
        q = self.quota
        where = f" in {q.region}" if q.region else ""
        return (
            f"quota {q.name}{where}: the plan's launches need {self.needed:g} {q.unit}, {q.free:g} of "
            f"{q.limit:g} are free ({q.used:g} in use); raise the quota (the cloud's console or API) or "
            f"actions {', '.join(f'#{i}' for i in self.refused)} wait"
        )


@dataclass(frozen=True)
class QuotaCheck:
    """What :func:`check_quotas` found: the actions not to send (id -> why) and the quotas short."""

    refused: dict[int, str]
    shortfalls: tuple[QuotaShortfall, ...]


def _counted(action: Action) -> tuple[str, CapacityType] | None:
    """The (offering, capacity) whose quotas ``action`` takes: a launch's, or a reservation's on demand."""
    if action.offering is None:
        return None
    if action.kind is ActionKind.LAUNCH and action.capacity is not None:
        return action.offering, action.capacity
    if action.kind is ActionKind.CREATE_RESERVATION:
        return action.offering, action.capacity or CapacityType.ON_DEMAND
    return None


def quota_keys(actions: Sequence[Action]) -> list[tuple[str, CapacityType]]:
    """The (offering, capacity) pairs the launches and reservations of ``actions`` count against, each
    once."""
    return list(dict.fromkeys(k for k in map(_counted, actions) if k is not None))


def _reservation_of(launch: Action, made: dict[str, Action]) -> Action | None:
    """The create-reservation action of ``made`` (by target) that ``launch`` launches into, if any."""
    if launch.kind is not ActionKind.LAUNCH:
        return None
    if launch.reservation is not None and launch.reservation in made:
        return made[launch.reservation]
    return next((r for r in made.values() if r.id in launch.depends_on), None)


def check_quotas(actions: Sequence[Action], quotas: Sequence[Quota]) -> QuotaCheck:
    """Admit ``actions``' launches and reservations in order while every quota each counts against has
    room; refuse the rest (see the module docstring: a reservation and the launch into it count once)."""
    room = {id(q): q.free for q in quotas}
    # units of each quota that a reservation holds unused: a launch into it takes them, not the room
    held: dict[tuple[int, str], float] = defaultdict(float)
    for q in quotas:
        for name, units in q.reserved.items():
            held[(id(q), name)] += units
    needed: dict[int, float] = defaultdict(float)
    refused_by: dict[int, list[int]] = defaultdict(list)
    refused: dict[int, str] = {}
    reservations: dict[str, Action] = {}
    for action in actions:
        key = _counted(action)
        if key is None:
            continue
        offering, capacity = key
        reserve = action.kind is ActionKind.CREATE_RESERVATION
        if reserve:
            reservations[action.target] = action
        into = _reservation_of(action, reservations)
        if into is not None and into.id in refused:
            why = refused[into.id].removeprefix("not sent: ")
            refused[action.id] = f"not sent: its reservation #{into.id} was refused too: {why}"
            continue
        pool = action.reservation or (into.target if into is not None else None)
        counts: list[tuple[Quota, float, float]] = []  # quota, units from its room, units from a reservation
        for q in quotas:
            if key not in q.per_node:
                continue
            units = action.count * q.per_node[key]
            taken = min(units, held[(id(q), pool)]) if pool is not None and not reserve else 0.0
            counts.append((q, units - taken, taken))
        for quota, units, _ in counts:
            needed[id(quota)] += units
        short = [(q, units) for q, units, _ in counts if units > room[id(q)] + 1e-9]
        if not short:
            for quota, units, taken in counts:
                room[id(quota)] -= units
                if reserve:
                    held[(id(quota), action.target)] += units
                elif pool is not None:
                    held[(id(quota), pool)] -= taken
            continue
        for quota, _ in short:
            refused_by[id(quota)].append(action.id)
        quota, units = short[0]
        free = room[id(quota)]
        if reserve:
            gang = action.run or action.target
            what = f"the reservation of {action.count} x {offering} for gang {gang} needs"
        else:
            what = f"{action.count} x {offering} {capacity} need"
        refused[action.id] = (
            f"not sent: {what} {units:g} {quota.unit} of quota {quota.name}, which has {free:g} free "
            f"(limit {quota.limit:g}, {quota.used:g} in use, and the actions before this one)"
        )
    for action in actions:  # a refused gang's reservation would bill for a gang that is not there
        if action.kind is ActionKind.CREATE_RESERVATION and action.id not in refused:
            launch = next(
                (
                    a
                    for a in actions
                    if a.kind is ActionKind.LAUNCH
                    and (action.id in a.depends_on or (a.reservation and a.reservation == action.target))
                ),
                None,
            )
            if launch is not None and launch.id in refused:
                refused[action.id] = f"not sent: its gang's launch #{launch.id} exceeds a quota"
    shortfalls = tuple(
        QuotaShortfall(q, needed[id(q)], tuple(refused_by[id(q)])) for q in quotas if refused_by[id(q)]
    )
    return QuotaCheck(refused, shortfalls)
