"""What a plan asks of a fleet at one instant: its desired state, read from the plan files alone.

:func:`desired_state` reads ``plan.json`` and ``allocations.csv`` at a time ``at`` (in period ``p``):

- **Pools**: per (offering, capacity), the whole nodes its inference rows of period ``p`` hold. Committed
  tiers (reserved 1y/3y, a held capacity reservation) run on-demand nodes: a commitment is a billing
  discount the cloud applies to them, not a different kind of node. Owned (colocation) nodes are not a
  cloud's and are only counted in a note.
- **Gangs**: every training run that is running at ``at``, or starts within ``lead_hours`` after it, with
  its placement group (multi-node runs) created ahead of its start. A non-spot multi-node gang also gets a
  capacity reservation ahead of its start where the cloud's reservations can hold a placement group
  (``reserve_gangs``), so its nodes can launch together. What the gang may do when the cloud refuses
  that reservation (``fallback``: another zone, no reservation, a Capacity Block) is the plan's, per run.
  A gang the plan puts on tier ``capacity_block`` is held by an AWS Capacity Block bought for the run
  (``block``): no reservation is made for it ahead, its nodes launch into the block once it is active
  (``planner.operations.capacity_blocks`` buys it, ``reconcile`` launches into it). A provider that sells no
  blocks (``blocks`` False) holds such a gang as it holds any on-demand gang, and a note says so.
- **Purchases**: the commitments the plan buys, as recommendations (never actions).
- **Savings plans** (held or bought) are a billing commitment of dollars per hour, not a resource: the nodes
  they cover are on-demand nodes of the pools above (rows of tier savings_plan), and each plan is a note
  saying it is bought in the billing console or the Savings Plans API, never by gpuplan.

Pure: no cloud calls. ``gpuplan provision`` and the daemon compare it with a provider's inventory
(``planner.operations.reconcile``); ``gpuplan terraform`` writes it as Terraform roots (``pools.py``).
Names and tags come from ``models.naming``, so both paths name the same resource the same way.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from models.actions import RecommendedPurchase
from models.errors import InputError
from models.flex_start import FLEX_START_MAX_RUN_HOURS
from models.naming import parse_offering, pool_name, safe_name
from models.plan import Plan, PlanDocument, TrainingPlacement, UtcTime
from models.scenario import FALLBACKS, Fallback
from models.tiers import CapacityType, Tier

__all__ = [
    "DEFAULT_LEAD_HOURS",
    "MAX_LEAD_HOURS",
    "RESERVATION_MARGIN",
    "DesiredGang",
    "DesiredPool",
    "DesiredState",
    "desired_state",
    "lead_hours_problem",
    "period_of",
    "plan_id_of",
    "region_of",
    "reservation_name",
    "run_name",
]

#: How long a gang's reservation outlives the run's planned end: a run a little late keeps its capacity,
#: and no reservation bills on for long after its run (the cloud ends it by itself then). One value for
#: ``gpuplan provision`` (``planner.operations.reconcile``) and the Terraform roots (``pools.py``).
RESERVATION_MARGIN: Final = timedelta(hours=6)

#: Hours before a gang's start at which its placement group and reservation are made.
DEFAULT_LEAD_HOURS: Final = 2.0
#: The longest lead a gang's placement group and reservation are made with (a month: a reservation made
#: further ahead bills at on demand for nothing that long).
MAX_LEAD_HOURS: Final = 24.0 * 31


def lead_hours_problem(value: float) -> str | None:
    """Why ``value`` is not a lead time (``--lead-hours``, daemon.yaml ``lead_hours``), or None."""
    if not math.isfinite(value) or not 0 <= value <= MAX_LEAD_HOURS:
        return f"must be from 0 to {MAX_LEAD_HOURS:g} hours (a month), got {value:g}"
    return None


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
    fallback: tuple[Fallback, ...] = Field(
        FALLBACKS, description="what it may do when its reservation is refused, in order (the plan's)"
    )
    max_run_hours: float | None = Field(
        None, description="a GCP flex-start gang (tier flex_start): its VMs' run duration, at most 7 days"
    )
    block: bool = Field(
        False,
        description="held by a Capacity Block bought for the run (tier capacity_block): no reservation made "
        "ahead; its nodes launch into the block once it is active",
    )
    block_hours: int | None = Field(None, description="the block's duration the plan bought (block gangs)")
    block_fee_usd: float | None = Field(
        None, description="the plan's upfront fee for the block (block gangs)"
    )


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


def plan_id_of(document: PlanDocument) -> str:
    """The id every resource of the plan is tagged with: the scenario's name, so that re-plans of the
    same scenario adopt the fleet (their pools match by name) instead of building a second one."""
    return safe_name(document.scenario)


def run_name(job: str, run: int) -> str:
    """A training run's name in the clouds (its tag, its gang's resources): unique per scenario, since
    job names that collide after ``safe_name`` are refused at validation."""
    return safe_name(f"{job}-{run}")


def reservation_name(gang: DesiredGang) -> str:
    """The capacity reservation that holds ``gang``: provision and the Terraform roots name it alike."""
    return safe_name(f"res-{gang.run}")


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
    blocks: bool = True,
) -> DesiredState:
    """What ``plan`` asks of the provider that ``handles`` its offerings, at ``at``; ``reserve_gangs``
    False (a cloud whose reservations cannot hold a placement group) reserves no gang; ``blocks`` False (a
    cloud that sells no Capacity Blocks) holds the plan's block gangs as on-demand gangs, with a note."""
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
        asked = _asked_at(placement)
        if placement.end <= at:
            ended.append(name)
        elif asked <= lead_end:
            gang = _gang(placement, name, running=asked <= at, reserve=reserve_gangs, blocks=blocks)
            gangs.append(gang)
            if placement.tier == Tier.CAPACITY_BLOCK and not gang.block:
                held_in = (
                    "a calendar-mode reservation, which gpuplan does not buy yet (buy it in the console or "
                    "the future-reservations API)"
                    if parse_offering(placement.offering)[0] == "gcp"
                    else "a Capacity Block, which this cloud does not sell"
                )
                notes.append(f"{name}: the plan holds it in {held_in}; held as an on-demand gang instead")
    for offering, nodes in sorted(skipped.items()):
        notes.append(f"{offering}: {nodes:g} nodes at this time belong to another provider, left out")
    notes.extend(_savings_plan_notes(document, handles))

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


def _savings_plan_notes(document: PlanDocument, handles: Callable[[str], bool]) -> list[str]:
    """One line per savings plan of this provider's offerings: not provisioned, and where it is bought."""
    notes = []
    for sp in document.savings_plans:
        if not any(handles(offering) for offering in sp.rates):
            continue
        where = {
            "savings-plan": "the Azure portal's Reservations + savings plans (or its Billing Benefits API)",
            "committed-use": f"GCP's committed use discounts ({sp.gpus} GPUs with their vCPUs and memory: "
            "gcloud compute commitments create)",
        }.get(sp.kind, "the AWS Billing console or the Savings Plans API (CreateSavingsPlan)")
        status = "held" if sp.existing else f"to buy from {sp.start:%Y-%m-%d}"
        notes.append(
            f"savings plan {sp.name} ({sp.scope}, {sp.term}, ${sp.usd_per_hour:,.2f}/h, {status}) is a "
            f"billing commitment, not a resource: it is bought in {where}, never by gpuplan; the nodes it "
            "covers launch on demand in the pools above"
        )
    return notes


def _asked_at(placement: TrainingPlacement) -> datetime:
    """When the gang's nodes are asked for: its planned start, but a flex-start gang's the start delay
    before it (the plan put its start that long after the earliest it may be asked: the expected wait for
    Dynamic Workload Scheduler's capacity, ``flex_start_delay_hours``)."""
    if placement.tier == Tier.FLEX_START and placement.flex_start_delay_hours:
        return placement.start - timedelta(hours=placement.flex_start_delay_hours)
    return placement.start


def _gang(
    placement: TrainingPlacement, name: str, *, running: bool, reserve: bool, blocks: bool = True
) -> DesiredGang:
    capacity = _capacity_of(placement.tier)
    multi = placement.nodes > 1
    # a flex-start gang: VMs Dynamic Workload Scheduler grants for its held hours, never a reservation
    flex = placement.tier == Tier.FLEX_START
    block = blocks and placement.tier == Tier.CAPACITY_BLOCK
    return DesiredGang(
        run=name,
        job=placement.job,
        run_index=placement.run,
        team=placement.team,
        offering=placement.offering,
        capacity=capacity,
        nodes=placement.nodes,
        # a block's instances are placed together in an EC2 UltraCluster by the block itself (API Reference,
        # CapacityBlock: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityBlock.html)
        placement_group=safe_name(placement.placement_group) if multi and not block else None,
        # the plan writes "none" for a run on no fabric; the clouds take None (as pools.py does)
        fabric=None if placement.fabric in (None, "none") else placement.fabric,
        start=placement.start,
        end=placement.end,
        running=running,
        # a block gang's capacity is its block: an ODCR beside it would bill for nothing
        reserve=reserve and multi and capacity is CapacityType.ON_DEMAND and not flex and not block,
        fallback=placement.fallbacks,
        max_run_hours=min(placement.held_hours, FLEX_START_MAX_RUN_HOURS) if flex else None,
        block=block,
        block_hours=placement.block_hours if block else None,
        block_fee_usd=placement.cost_usd if block else None,
    )


def region_of(offering: str) -> str:
    return parse_offering(offering)[1]
