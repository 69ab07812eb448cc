"""Quotas before launch: the launches of an action list that the account's quotas cannot take.

A launch beyond a quota fails at the cloud after the placement group and the reservation before it were
made (and the reservation bills from then on); a fleet of several pools fails in whatever order the cloud
meets them. So provision reads the quotas the launches count against (``Provider.quotas``: AWS Service
Quotas' vCPUs per instance family, Compute Engine's regional and GPU quotas, Azure's compute usages)
before anything is created, and :func:`check_quotas` decides, in the order of the action list, which
launches fit what is free. A launch that does not fit is refused (with its gang's reservation, which would
bill for nothing), naming the quota and what the plan needs; the others go on. Terminations free nothing
in time: a pool's are done after its launches.
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
    needed: float  # units every launch counting against it needs
    refused: tuple[int, ...]  # the launches refused because of it

    def describe(self) -> str:
        q = self.quota
        where = f" in {q.region}" if q.region else ""
        return (
            f"quota {q.name}{where}: the plan's launches need {self.needed:g} {q.unit}, {q.free:g} of "
            f"{q.limit:g} are free ({q.used:g} in use); raise the quota (the cloud's console or API) or the "
            f"launches {', '.join(f'#{i}' for i in self.refused)} wait"
        )


@dataclass(frozen=True)
class QuotaCheck:
    """What :func:`check_quotas` found: the actions not to send (id -> why) and the quotas short."""

    refused: dict[int, str]
    shortfalls: tuple[QuotaShortfall, ...]


def quota_keys(actions: Sequence[Action]) -> list[tuple[str, CapacityType]]:
    """The (offering, capacity) pairs the launches of ``actions`` count against, each once."""
    keys = [
        (a.offering, a.capacity) for a in actions if a.kind is ActionKind.LAUNCH and a.offering and a.capacity
    ]
    return list(dict.fromkeys((o, c) for o, c in keys if o is not None and c is not None))


def check_quotas(actions: Sequence[Action], quotas: Sequence[Quota]) -> QuotaCheck:
    """Admit ``actions``' launches in order while every quota each counts against has room; refuse the
    rest, and the reservation of a refused gang (a gang's launch into its reservation uses what the
    reservation holds: counted once, at the launch)."""
    room = {id(q): q.free for q in quotas}
    needed: dict[int, float] = defaultdict(float)
    refused_by: dict[int, list[int]] = defaultdict(list)
    refused: dict[int, str] = {}
    for action in actions:
        if action.kind is not ActionKind.LAUNCH or action.offering is None or action.capacity is None:
            continue
        counts = [
            (q, action.count * q.per_node[(action.offering, action.capacity)])
            for q in quotas
            if (action.offering, action.capacity) in q.per_node
        ]
        for quota, units in counts:
            needed[id(quota)] += units
        short = [(q, units) for q, units in counts if units > room[id(q)] + 1e-9]
        if not short:
            for quota, units in counts:
                room[id(quota)] -= units
            continue
        for quota, _ in short:
            refused_by[id(quota)].append(action.id)
        quota, units = short[0]
        free, what = room[id(quota)], f"{action.count} x {action.offering} {action.capacity}"
        refused[action.id] = (
            f"not sent: {what} need {units:g} {quota.unit} of quota {quota.name}, which has {free:g} free "
            f"(limit {quota.limit:g}, {quota.used:g} in use, and the launches before this one)"
        )
    for action in actions:  # a refused gang's reservation would bill for a gang that is not there
        if action.kind is ActionKind.CREATE_RESERVATION:
            launch = next(
                (a for a in actions if a.kind is ActionKind.LAUNCH and action.id in a.depends_on), None
            )
            if launch is not None and launch.id in refused:
                refused[action.id] = f"not sent: its gang's launch #{launch.id} exceeds a quota"
    shortfalls = tuple(
        QuotaShortfall(q, needed[id(q)], tuple(refused_by[id(q)])) for q in quotas if refused_by[id(q)]
    )
    return QuotaCheck(refused, shortfalls)
