"""From a plan to the actions that make a fleet match it: desired state at a time, minus what is there.

Pure: no cloud calls. :func:`desired_state` reads the plan (``plan.json`` and ``allocations.csv``) at an
instant; :func:`reconcile` compares it with a provider's :class:`~providers.base.Inventory` and returns the
ordered, minimal action list that ``gpuplan provision`` prints (dry run) or executes (``--apply``).

What the plan asks for at a time ``at`` (in period ``p``):

- **Pools**: per (offering, capacity), the whole nodes its inference rows of period ``p`` hold. Committed
  tiers (reserved 1y/3y, a held capacity reservation) run on-demand nodes: a commitment is a billing
  discount the cloud applies to them, not a different kind of node. Owned (colocation) nodes are not a
  cloud's and are only counted in a note.
- **Gangs**: every training run that is running at ``at``, or starts within ``lead_hours`` after it, with
  its placement group (multi-node runs) created ahead of its start. A non-spot multi-node gang also gets a
  capacity reservation ahead of its start, so its nodes can launch together; it is billed at the
  on-demand rate from its creation, which the action table says.

Rules the action list keeps:

- order: placement groups, then reservations, then launches, then terminations, then clean-up of what
  finished runs left; each action lists the actions it depends on (a launch into a placement group
  depends on the group's creation), so a failed action only stops the ones that need it;
- launch before terminate when replacing: a pool's terminations depend on the launches of the same
  offering, so a failed replacement never leaves the fleet short;
- never terminate a node that runs a gang: a run's nodes are left alone, even after its planned end
  (the note says so; ``retire_finished_runs`` terminates those of runs that ended);
- deterministic client tokens from plan id + target + period + the counts, so re-running an apply
  creates nothing twice (and a second run of a finished apply finds nothing to do);
- commitment purchases are never actions: they are *recommended purchases*, with their cost, for a human
  to decide (buying a three-year obligation is not a provisioning step).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from models.actions import Action, ActionKind, RecommendedPurchase
from models.errors import InputError
from models.plan import Plan, PlanDocument, TrainingPlacement, UtcTime
from models.tiers import CapacityType, Tier
from providers.base import (
    TAG_STANDS_IN,
    Inventory,
    Node,
    client_token,
    parse_offering,
    pool_name,
    safe_name,
)

__all__ = [
    "DEFAULT_LEAD_HOURS",
    "DesiredGang",
    "DesiredPool",
    "DesiredState",
    "desired_state",
    "leftover_notes",
    "period_of",
    "plan_id_of",
    "reconcile",
    "region_of",
    "run_name",
]

#: Hours before a gang's start at which its placement group and reservation are made.
DEFAULT_LEAD_HOURS: Final = 2.0
#: Below this a pool's fractional node count is float noise, not a node more (0.9999999 nodes is 1).
_NODE_TOLERANCE: Final = 1e-6


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DesiredPool(_Frozen):
    """Nodes of one offering on one capacity type that serve inference (not gangs) at the time asked."""

    pool: str
    offering: str
    capacity: CapacityType
    nodes: int
    node_hours: float = Field(description="the plan's node-hours per hour for the pool (before rounding up)")


class DesiredGang(_Frozen):
    """A training run the fleet must hold (running) or prepare for (starting within the lead time)."""

    run: str = Field(description="safe name of the run: job-run")
    job: str
    run_index: int
    team: str
    offering: str
    capacity: CapacityType
    nodes: int
    placement_group: str | None = Field(description="multi-node runs only")
    fabric: str | None
    start: UtcTime
    end: UtcTime
    running: bool = Field(description="running at the time asked (else it starts within the lead time)")
    reserve: bool = Field(description="a capacity reservation is held for it (non-spot multi-node gangs)")


class DesiredState(_Frozen):
    plan_id: str
    at: UtcTime
    period: int
    pools: tuple[DesiredPool, ...]
    gangs: tuple[DesiredGang, ...]
    ended_runs: tuple[str, ...] = Field(description="runs of the plan that ended before the time asked")
    purchases: tuple[RecommendedPurchase, ...]
    notes: tuple[str, ...]
    prices: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="offering -> capacity -> USD per node-hour, from the plan"
    )


# ----------------------------------------------------------------------------------------------------------
# desired state


def plan_id_of(document: PlanDocument) -> str:
    """The id every resource of the plan is tagged with: the scenario's name, so that re-plans of the
    same scenario adopt the fleet (their pools match by name) instead of building a second one."""
    return safe_name(document.scenario)


def run_name(job: str, run: int) -> str:
    return safe_name(f"{job}-{run}")


def _capacity_of(tier: str) -> CapacityType:
    return CapacityType.SPOT if tier == Tier.SPOT else CapacityType.ON_DEMAND


def period_of(document: PlanDocument, at: datetime) -> int:
    """The period of the horizon ``at`` falls in; InputError outside the horizon."""
    horizon = document.horizon
    start = horizon.start.astimezone(UTC)
    end = start + timedelta(hours=horizon.hours)
    at = at.astimezone(UTC)
    if not start <= at < end:
        raise InputError(
            None,
            "--at",
            f"{at:%Y-%m-%dT%H:%M:%SZ} is outside the plan's horizon ({start:%Y-%m-%dT%H:%M:%SZ} to "
            f"{end:%Y-%m-%dT%H:%M:%SZ}); plan again for a horizon that holds it",
        )
    return int((at - start).total_seconds() // 3600 // horizon.period_hours)


def desired_state(
    plan: Plan,
    at: datetime,
    *,
    handles: Callable[[str], bool],
    lead_hours: float = DEFAULT_LEAD_HOURS,
    reserve_gangs: bool = True,
) -> DesiredState:
    """What ``plan`` asks of the provider that ``handles`` its offerings, at ``at``; ``reserve_gangs``
    False (a cloud whose reservations cannot hold a placement group) reserves no gang."""
    document = plan.document
    period = period_of(document, at)
    at = at.astimezone(UTC)
    plan_id = plan_id_of(document)
    notes: list[str] = []
    skipped: dict[str, float] = defaultdict(float)

    rows = plan.allocations
    rows = rows[(rows["period"].to_numpy() == period) & (rows["kind"].to_numpy() == "inference")]
    held: dict[tuple[str, CapacityType], float] = defaultdict(float)
    owned = 0.0
    for offering, tier, nodes in zip(rows["offering"], rows["tier"], rows["nodes"], strict=True):
        if tier == Tier.OWNED:
            owned += float(nodes)
        elif handles(offering):
            held[(offering, _capacity_of(tier))] += float(nodes)
        else:
            skipped[offering] += float(nodes)
    pools = tuple(
        DesiredPool(
            pool=pool_name(offering, capacity),
            offering=offering,
            capacity=capacity,
            nodes=math.ceil(nodes - _NODE_TOLERANCE),
            node_hours=nodes,
        )
        for (offering, capacity), nodes in sorted(held.items())
    )
    if owned:
        notes.append(
            f"{owned:g} owned (colocation) nodes serve in period {period}: not a cloud's, not provisioned"
        )

    gangs: list[DesiredGang] = []
    ended: list[str] = []
    lead_end = at + timedelta(hours=lead_hours)
    for placement in document.training:
        if not handles(placement.offering):
            if placement.start <= lead_end and placement.end > at:
                skipped[placement.offering] += placement.nodes
            continue
        name = run_name(placement.job, placement.run)
        if placement.end <= at:
            ended.append(name)
        elif placement.start <= lead_end:
            gangs.append(_gang(placement, name, running=placement.start <= at, reserve=reserve_gangs))
    for offering, nodes in sorted(skipped.items()):
        notes.append(f"{offering}: {nodes:g} nodes at this time belong to another provider, left out")

    purchases = tuple(
        RecommendedPurchase(
            name=c.name,
            offering=c.offering,
            term=str(c.term),
            nodes=c.nodes,
            start=c.start,
            end=c.end,
            usd_per_node_hour=c.usd_per_node_hour,
            cost_in_horizon_usd=c.cost_in_horizon_usd,
            obligation_beyond_horizon_usd=c.obligation_beyond_horizon_usd,
            due=c.start is None or c.start <= at,
        )
        for c in document.commitments
        if not c.existing and handles(c.offering)
    )
    prices = {
        offering: {
            str(CapacityType.ON_DEMAND): record.on_demand_usd_h or 0.0,
            str(CapacityType.SPOT): record.spot_usd_h or 0.0,
        }
        for offering, record in document.offerings.items()
    }
    return DesiredState(
        plan_id=plan_id,
        at=at,
        period=period,
        pools=pools,
        gangs=tuple(gangs),
        ended_runs=tuple(ended),
        purchases=purchases,
        notes=tuple(notes),
        prices=prices,
    )


def _gang(placement: TrainingPlacement, name: str, *, running: bool, reserve: bool) -> DesiredGang:
    capacity = _capacity_of(placement.tier)
    multi = placement.nodes > 1
    return DesiredGang(
        run=name,
        job=placement.job,
        run_index=placement.run,
        team=placement.team,
        offering=placement.offering,
        capacity=capacity,
        nodes=placement.nodes,
        placement_group=safe_name(placement.placement_group) if multi else None,
        fabric=placement.fabric,
        start=placement.start,
        end=placement.end,
        running=running,
        reserve=reserve and multi and capacity is CapacityType.ON_DEMAND,
    )


# ----------------------------------------------------------------------------------------------------------
# the difference


class _Builder:
    """Collects actions in the order they must run, numbering them."""

    def __init__(self, desired: DesiredState) -> None:
        self.desired = desired
        self.actions: list[Action] = []

    def add(self, kind: ActionKind, target: str, **fields: object) -> Action:
        action = Action(id=len(self.actions) + 1, kind=kind, target=target, **fields)
        self.actions.append(action)
        return action

    def price(self, offering: str, capacity: CapacityType) -> float | None:
        rate = self.desired.prices.get(offering, {}).get(str(capacity))
        return rate or None


def _per_hour(rate: float | None, nodes: int) -> float | None:
    return None if rate is None else rate * nodes


def reconcile(
    desired: DesiredState,
    inventory: Inventory,
    *,
    retire_finished_runs: bool = False,
    launch_batch: int | None = None,
    at_risk: frozenset[str] = frozenset(),
) -> list[Action]:
    """The ordered, minimal actions that turn ``inventory`` into ``desired`` (see the module docstring).

    ``launch_batch`` splits a pool's launch into actions of at most that many nodes (a cloud's request
    limits, and a journal that records progress batch by batch); a gang is never split: all or nothing.
    ``at_risk``: ids of pool nodes the cloud may soon reclaim (a spot rebalance recommendation). They do
    not count toward their pool, so replacements launch now, and they are let go once the pool's other
    nodes are running and enough: capacity is replaced before it is lost, as an autoscaling group's
    capacity rebalancing does. (A gang's node is not replaced alone: its run's checkpoint hook is
    called.)"""
    build = _Builder(desired)
    plan_id, period = desired.plan_id, desired.period
    live = inventory.live_nodes()
    groups = {g.name for g in inventory.placement_groups}
    reservations = {r.name: r for r in inventory.reservations}
    # a run's reservation: the one provision made (by name) or any other tagged with the run, such as a
    # Capacity Block bought for it (provision --buy-capacity-block)
    run_reservation = {r.run: r.name for r in sorted(inventory.reservations, key=lambda r: r.name) if r.run}
    for name, found in reservations.items():
        if found.run and name == safe_name(f"res-{found.run}"):
            run_reservation[found.run] = name
    by_run: dict[str, list[Node]] = defaultdict(list)
    by_pool: dict[str, list[Node]] = defaultdict(list)
    for node in live:
        (by_run[node.run] if node.run else by_pool[node.pool]).append(node)

    group_action: dict[str, int] = {}
    for gang in desired.gangs:
        if gang.placement_group and gang.placement_group not in groups:
            made = build.add(
                ActionKind.CREATE_PLACEMENT_GROUP,
                gang.placement_group,
                offering=gang.offering,
                count=gang.nodes,
                run=gang.run,
                fabric=gang.fabric,
                token=client_token(plan_id, "placement-group", gang.placement_group),
                reason=f"{gang.run} ({gang.nodes} nodes) starts {gang.start:%Y-%m-%d %H:%M}Z",
            )
            group_action[gang.run] = made.id
    reservation_action: dict[str, int] = {}
    for gang in desired.gangs:
        have = len(by_run.get(gang.run, []))
        name = _reservation_name(gang)
        if gang.reserve and gang.run not in run_reservation and have < gang.nodes:
            made = build.add(
                ActionKind.CREATE_RESERVATION,
                name,
                offering=gang.offering,
                capacity=CapacityType.ON_DEMAND,
                count=gang.nodes,
                run=gang.run,
                placement_group=gang.placement_group,
                token=client_token(plan_id, "reservation", name, gang.nodes),
                depends_on=_ids(group_action.get(gang.run)),
                reason=f"holds {gang.nodes} nodes for {gang.run}, billed at on demand until its nodes use it",
                usd_per_hour=_per_hour(build.price(gang.offering, CapacityType.ON_DEMAND), gang.nodes),
            )
            reservation_action[gang.run] = made.id

    launches_of: dict[str, list[int]] = defaultdict(list)
    for gang in desired.gangs:
        have = len(by_run.get(gang.run, []))
        if not gang.running or have >= gang.nodes:
            continue
        held = run_reservation.get(gang.run)
        if held is None and gang.run in reservation_action:
            held = _reservation_name(gang)
        reserved = held is not None and gang.capacity is CapacityType.ON_DEMAND
        count = gang.nodes - have
        made = build.add(
            ActionKind.LAUNCH,
            gang.run,
            offering=gang.offering,
            capacity=gang.capacity,
            count=count,
            target_nodes=gang.nodes,
            run=gang.run,
            placement_group=gang.placement_group,
            reservation=held if reserved else None,
            fabric=gang.fabric,
            token=client_token(
                plan_id, "launch", gang.run, period, have, gang.nodes, _members(by_run[gang.run])
            ),
            depends_on=_ids(group_action.get(gang.run), reservation_action.get(gang.run)),
            reason=f"{gang.run} runs until {gang.end:%Y-%m-%d %H:%M}Z on {gang.nodes} nodes; {have} running",
            # nodes launched into a reservation add nothing: the reservation is billed already
            usd_per_hour=None if reserved else _per_hour(build.price(gang.offering, gang.capacity), count),
        )
        launches_of[gang.offering].append(made.id)

    wanted = {p.pool: p for p in desired.pools}
    for pool in desired.pools:
        have = sum(1 for n in by_pool.get(pool.pool, []) if n.id not in at_risk)
        start = have
        while start < pool.nodes:  # in batches of at most launch_batch nodes, each its own intent
            count = min(pool.nodes - start, launch_batch or pool.nodes)
            made = build.add(
                ActionKind.LAUNCH,
                pool.pool,
                offering=pool.offering,
                capacity=pool.capacity,
                count=count,
                target_nodes=start + count,
                token=client_token(
                    plan_id, "launch", pool.pool, period, start, start + count, _members(by_pool[pool.pool])
                ),
                reason=f"the plan holds {pool.nodes} nodes in period {period}; {have} running",
                usd_per_hour=_per_hour(build.price(pool.offering, pool.capacity), count),
            )
            launches_of[pool.offering].append(made.id)
            start += count

    for name in sorted(by_pool):
        nodes = by_pool[name]
        want = wanted[name].nodes if name in wanted else 0
        safe = [n for n in nodes if n.id not in at_risk]
        surplus = _to_terminate(safe, len(safe) - want) if len(safe) > want else []
        replaced = sum(1 for n in safe if n.state == "running") >= want
        risky = sorted((n for n in nodes if n.id in at_risk), key=lambda n: n.id) if replaced else []
        surplus += risky
        if not surplus:
            continue
        offering = surplus[0].offering
        # fallback nodes go once the pool they stand in for has its own: after its launches succeed
        stood_for = sorted(
            {n.tags[TAG_STANDS_IN] for n in surplus if n.tags.get(TAG_STANDS_IN)} & set(wanted)
        )
        waits_on = {
            *launches_of.get(offering, ()),
            *(i for p in stood_for for i in launches_of[wanted[p].offering]),
        }
        reason = f"the plan holds {want} nodes in period {period}; {len(nodes)} running"
        if name not in wanted:
            reason = f"the plan holds no nodes in this pool in period {period}; {len(nodes)} running"
        if risky:
            reason += f"; {len(risky)} at risk of reclaim replaced"
        build.add(
            ActionKind.TERMINATE,
            name,
            offering=offering,
            capacity=surplus[0].capacity,
            count=len(surplus),
            node_ids=tuple(n.id for n in surplus),
            depends_on=tuple(sorted(waits_on)),
            reason=reason,
            usd_per_hour=_per_hour(build.price(offering, surplus[0].capacity), -len(surplus)),
        )

    failed = sorted(inventory.failed_nodes(), key=lambda n: n.id)
    if failed:
        build.add(
            ActionKind.TERMINATE,
            "failed nodes",
            count=len(failed),
            node_ids=tuple(n.id for n in failed),
            reason="the cloud reports them failed: they serve nothing (replacements are launched above)",
        )

    active = {g.run for g in desired.gangs}
    ended = set(desired.ended_runs)
    if retire_finished_runs:
        for run in sorted(set(by_run) - active):
            nodes = sorted(by_run[run], key=lambda n: n.id)
            build.add(
                ActionKind.TERMINATE,
                run,
                offering=nodes[0].offering,
                capacity=nodes[0].capacity,
                count=len(nodes),
                node_ids=tuple(n.id for n in nodes),
                run=run,
                reason="its run ended in the plan (--retire-finished-runs)",
                usd_per_hour=_per_hour(build.price(nodes[0].offering, nodes[0].capacity), -len(nodes)),
            )
            by_run.pop(run)
    for reservation in sorted(inventory.reservations, key=lambda r: r.name):
        if reservation.run in active and reservation.run is not None:
            continue
        build.add(
            ActionKind.RELEASE_RESERVATION,
            reservation.name,
            offering=reservation.offering,
            count=reservation.nodes,
            run=reservation.run,
            reason="its run ended" if reservation.run in ended else "no gang of the plan needs it now",
            usd_per_hour=_per_hour(
                build.price(reservation.offering, CapacityType.ON_DEMAND), -reservation.nodes
            ),
        )
    for group in sorted(inventory.placement_groups, key=lambda g: g.name):
        if group.run in active or by_run.get(group.run or "", []):
            continue
        build.add(
            ActionKind.DELETE_PLACEMENT_GROUP,
            group.name,
            run=group.run,
            reason="its run ended and no node is left in it"
            if group.run in ended
            else "no gang of the plan needs it now",
        )
    return build.actions


def leftover_notes(desired: DesiredState, inventory: Inventory) -> list[str]:
    """What reconcile leaves running on purpose: the nodes of runs that are not active now."""
    active = {g.run for g in desired.gangs}
    runs: dict[str, int] = defaultdict(int)
    for node in inventory.live_nodes():
        if node.run and node.run not in active:
            runs[node.run] += 1
    return [
        f"{run}: {count} nodes of a run the plan does not hold now keep running (provision never "
        "terminates a gang; end the job, or use --retire-finished-runs)"
        for run, count in sorted(runs.items())
    ]


def _members(nodes: Sequence[Node]) -> str:
    """Which nodes a pool (or gang) holds, in a launch's token: after a node is interrupted and gone, the
    launch that replaces it is a new intent (the old token would be replayed, creating nothing), while a
    repeat of the same launch from the same inventory is the same one."""
    return client_token(*sorted(n.id for n in nodes)) if nodes else ""


def _reservation_name(gang: DesiredGang) -> str:
    return safe_name(f"res-{gang.run}")


def _ids(*ids: int | None) -> tuple[int, ...]:
    return tuple(i for i in ids if i is not None)


_STATE_ORDER: Final = {"pending": 0, "provisioning": 0, "staging": 0}


def _to_terminate(nodes: Sequence[Node], count: int) -> list[Node]:
    """Which ``count`` nodes of a pool to let go: not-yet-running ones first, then the newest (the oldest
    have warm caches and loaded models), ties by id so the choice is deterministic."""

    def key(node: Node) -> tuple[int, float, str]:
        launched = node.launched.timestamp() if node.launched is not None else 0.0
        return (_STATE_ORDER.get(node.state, 1), -launched, node.id)

    return sorted(nodes, key=key)[:count]


def region_of(offering: str) -> str:
    return parse_offering(offering)[1]
