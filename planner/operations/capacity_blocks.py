"""AWS Capacity Blocks for ML for a plan's gangs: listed, and bought only when a person asks.

A Capacity Block holds ``nodes`` instances for whole days at a fixed upfront fee, sold up to 8 weeks
ahead; it is the way teams get H100/H200 capacity for a training run. EC2 sells durations of 1 to 14 days
in 1-day steps, then 7-day steps up to 182 days, and at most 64 instances per block (256 across an
account's blocks; the rules are ``models/capacity_blocks.py``, which the planner uses too):
:func:`block_duration_hours` rounds a run up to the next duration sold, and a gang a
single block cannot hold is listed with the reason and never asked for (EC2 User Guide, "Find and
purchase Capacity Blocks",
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-purchase.html; API reference
DescribeCapacityBlockOfferings ``CapacityDurationHours``). :func:`block_requests` says which
of the plan's gangs a block could hold; :func:`list_blocks` asks the provider for the offers for each
(listing buys nothing); :func:`buy_block` buys one of them, never above ``max_usd``, idempotently
(the client token comes from the plan id and the offer), tagged as the plan's, and never past the 256
instances EC2 allows across an account's blocks (EC2 User Guide, "Capacity Blocks for ML",
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html): the blocks the account
holds (awaiting payment, scheduled or active, whoever bought them) are read first, on a dry run too, and
a block that would pass the limit is refused, naming the figures, before anything is bought. A provider
without ``Capability.CAPACITY_BLOCKS`` gets ``Unsupported`` before any call. ``gpuplan provision
--capacity-blocks`` prints these; they take a provider and a plan, nothing of the CLI, so the
daemon can call them too.

:func:`buy_planned_blocks` is the step for the gangs the plan itself holds in a block (tier
``capacity_block``): from the time EC2 sells the block (8 weeks ahead) it lists the offers for the run and
picks the one that holds it (its offering, at least its nodes, at least its hours, starting no later than
its planned start) at the least upfront fee, and buys it only with ``apply`` and a cap per block
(``max_usd``) the fee is within; without a cap it only says what it would buy. A block already held for the
run (tagged with the plan id and the run, in any state but over) is never bought again, so a second apply
buys nothing.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from models.capacity_blocks import (
    CAPACITY_BLOCK_ACCOUNT_MAX_NODES,
    CAPACITY_BLOCK_AHEAD,
    block_duration_hours,
    why_no_block,
)
from models.naming import TAG_PLAN, TAG_RUN, client_token, managed_tags
from models.plan import Plan, TrainingPlacement
from models.tiers import Tier
from planner.outputs.desired import plan_id_of, run_name
from providers.base import (
    Capability,
    CapacityBlockOffer,
    CapacityReservation,
    InvalidRequest,
    Provider,
    ProviderError,
    QuotaExceeded,
    require,
)

__all__ = [
    "BlockListing",
    "BlockPurchase",
    "BlockRequest",
    "PlannedBlock",
    "block_requests",
    "buy_block",
    "buy_planned_blocks",
    "list_blocks",
]

log = logging.getLogger("gpuplan.provision")


@dataclass(frozen=True)
class BlockRequest:
    """A non-spot gang of the plan that a Capacity Block could hold: its size, its hours rounded up to
    the next duration EC2 sells, the start window to ask for (its planned start, or up to a day earlier),
    and what the plan pays for it on demand (the figure a block's upfront fee is compared with).
    ``unsellable`` says why no single block can hold it (more than 64 nodes, longer than 182 days); such
    a request is listed with no offers and never sent to the cloud."""

    run: str
    offering: str
    nodes: int
    hours: int
    start_from: datetime
    start_to: datetime
    on_demand_usd: float
    unsellable: str | None = None


def block_requests(plan: Plan, at: datetime, handles: Callable[[str], bool]) -> list[BlockRequest]:
    """The plan's multi-node non-spot gangs, and every gang it holds in a block (tier capacity_block),
    that start after ``at`` and within the 8 weeks EC2 sells blocks for, on offerings ``handles`` says are
    its own."""
    document = plan.document
    requests = []
    for placement in document.training:
        single = placement.nodes < 2 and placement.tier != Tier.CAPACITY_BLOCK
        if single or placement.tier == "spot" or not handles(placement.offering):
            continue
        if not at < placement.start <= at + CAPACITY_BLOCK_AHEAD:
            continue
        sold = block_duration_hours(placement.hours)
        why = why_no_block(placement.nodes, placement.hours)
        unsellable = None if why is None else f"{why}, so no single block is asked for"
        hours = sold if sold is not None else math.ceil(placement.hours)
        record = document.offerings.get(placement.offering)
        rate = record.on_demand_usd_h if record is not None and record.on_demand_usd_h else 0.0
        requests.append(
            BlockRequest(
                run=run_name(placement.job, placement.run),
                offering=placement.offering,
                nodes=placement.nodes,
                hours=hours,
                start_from=max(at, placement.start - timedelta(days=1)),
                start_to=placement.start,
                on_demand_usd=rate * placement.nodes * placement.hours,
                unsellable=unsellable,
            )
        )
    return requests


@dataclass(frozen=True)
class BlockListing:
    """One gang's request and the offers the provider listed for it."""

    request: BlockRequest
    offers: tuple[CapacityBlockOffer, ...]

    def saving_usd(self, offer: CapacityBlockOffer) -> float:
        """What ``offer`` saves against the plan's on-demand cost of the gang (negative: it costs more)."""
        return self.request.on_demand_usd - offer.upfront_usd


@dataclass(frozen=True)
class BlockPurchase:
    """What :func:`buy_block` did: ``reservation`` is None on a dry run (nothing bought)."""

    offer: CapacityBlockOffer
    run: str
    max_usd: float
    reservation: CapacityReservation | None


def list_blocks(
    plan: Plan, provider: Provider, at: datetime, runs: Collection[str] | None = None
) -> list[BlockListing]:
    """The offers for each of the plan's gangs that a block could hold (:func:`block_requests`; only
    those of ``runs`` when given); a gang no single block can hold is listed with no offers, without asking
    the cloud. Unsupported when ``provider`` sells no blocks; a provider error propagates."""
    require(provider, Capability.CAPACITY_BLOCKS, "capacity_block_offerings")
    return [
        BlockListing(
            request,
            ()
            if request.unsellable
            else tuple(
                provider.capacity_block_offerings(
                    request.offering, request.nodes, request.hours, request.start_from, request.start_to
                )
            ),
        )
        for request in block_requests(plan, at, provider.handles)
        if runs is None or request.run in runs
    ]


def buy_block(
    plan: Plan,
    provider: Provider,
    listings: list[BlockListing],
    offer_id: str,
    *,
    max_usd: float,
    apply: bool,
) -> BlockPurchase:
    """Buy ``offer_id``, one of the offers in ``listings``, for at most ``max_usd`` upfront; with ``apply``
    False (a dry run) only check that it may be bought. InvalidRequest when the offer was not listed or
    ``max_usd`` is not a positive figure; QuotaExceeded when its instances and those of the blocks the
    account holds would pass :data:`CAPACITY_BLOCK_ACCOUNT_MAX_NODES` (a block this purchase's token
    already bought is the purchase itself, bought again as nothing); the provider refuses an offer above
    the cap."""
    require(provider, Capability.CAPACITY_BLOCKS, "purchase_capacity_block")
    if not max_usd > 0:
        raise InvalidRequest(
            "give the most the block may cost upfront (a positive USD figure)",
            cloud=provider.cloud,
            operation="purchase_capacity_block",
        )
    found = [(listing, offer) for listing in listings for offer in listing.offers if offer.id == offer_id]
    if not found:
        raise InvalidRequest(
            f"{offer_id} is not among the blocks listed for the plan's gangs",
            cloud=provider.cloud,
            operation="purchase_capacity_block",
        )
    listing, offer = found[0]
    run = listing.request.run
    plan_id = plan_id_of(plan.document)
    token = client_token(plan_id, "capacity-block", offer_id)
    _check_account_limit(provider, offer, token)
    if not apply:
        return BlockPurchase(offer, run, max_usd, None)
    bought = provider.purchase_capacity_block(
        offer_id, max_usd=max_usd, token=token, tags=managed_tags(plan_id, run=run)
    )
    return BlockPurchase(offer, run, max_usd, bought)


def _check_account_limit(provider: Provider, offer: CapacityBlockOffer, token: str) -> None:
    """QuotaExceeded, naming the figures, when ``offer``'s instances on top of those of the blocks the
    account holds would pass :data:`CAPACITY_BLOCK_ACCOUNT_MAX_NODES`; EC2 would refuse the purchase, or a
    later one the plan counts on. Nothing when ``token`` bought a held block already (a repeated buy)."""
    held = provider.capacity_blocks_held()
    if any(token in block.tags.values() for block in held):
        return
    holding = sum(block.nodes for block in held)
    if holding + offer.nodes <= CAPACITY_BLOCK_ACCOUNT_MAX_NODES:
        return
    names = ", ".join(f"{b.id or b.name} ({b.nodes}, {b.state})" for b in held)
    raise QuotaExceeded(
        f"{offer.id} holds {offer.nodes} instances and the account's {len(held)} Capacity Blocks "
        f"awaiting payment, scheduled or active hold {holding} ({names}): {holding + offer.nodes} in all, "
        f"over the {CAPACITY_BLOCK_ACCOUNT_MAX_NODES} EC2 allows across an account's blocks; not bought",
        cloud=provider.cloud,
        operation="purchase_capacity_block",
    )


@dataclass(frozen=True)
class PlannedBlock:
    """What :func:`buy_planned_blocks` did, or would do, for one gang the plan holds in a Capacity Block.

    ``status``: ``held`` (a block is held for the run already: nothing bought), ``bought``, ``would-buy``
    (a dry run, or no cap given: ``message`` says which), ``over-cap`` (the best offer costs more than the
    cap), ``no-offer``, ``unsellable`` (no single block holds it), ``not-yet`` (more than 8 weeks ahead),
    ``missing`` (its start is past and no block is held), ``failed`` (the cloud refused; ``message`` says
    why)."""

    run: str
    offering: str
    nodes: int
    start: datetime
    plan_fee_usd: float
    status: str
    message: str
    offer: CapacityBlockOffer | None = None
    reservation: CapacityReservation | None = None
    max_usd: float | None = None

    @property
    def failed(self) -> bool:
        return self.status == "failed"


def buy_planned_blocks(
    plan: Plan, provider: Provider, at: datetime, *, max_usd: float | None, apply: bool
) -> list[PlannedBlock]:
    """For each gang of ``plan`` on tier capacity_block that has not ended at ``at`` (on ``provider``'s
    offerings): the block held for it, or the offer that holds it at the least fee, bought only with
    ``apply`` and within ``max_usd`` (see the module docstring). Reads the account's blocks and lists
    offers; buys at most one block per run. Unsupported when ``provider`` sells no blocks."""
    require(provider, Capability.CAPACITY_BLOCKS, "purchase_capacity_block")
    planned = [
        p
        for p in plan.document.training
        if p.tier == Tier.CAPACITY_BLOCK and provider.handles(p.offering) and p.end > at
    ]
    if not planned:
        return []
    plan_id = plan_id_of(plan.document)
    held = sorted(
        (b for b in provider.capacity_blocks_held() if b.tags.get(TAG_PLAN) == plan_id),
        key=lambda b: b.id or b.name,
    )
    # the run's block: tagged with it, of its offering, holding all its nodes (as reconcile.run_block
    # takes it; a doubtful one is neither used nor counted as held)
    held_for = {
        run_name(p.job, p.run): b
        for p in planned
        for b in held
        if b.tags.get(TAG_RUN) == run_name(p.job, p.run) and b.offering == p.offering and b.nodes >= p.nodes
    }
    wanted = {
        run_name(p.job, p.run)
        for p in planned
        if run_name(p.job, p.run) not in held_for and at < p.start <= at + CAPACITY_BLOCK_AHEAD
    }
    listings = [_with_early_starts(listing, provider) for listing in list_blocks(plan, provider, at, wanted)]
    by_run = {listing.request.run: listing for listing in listings}
    decisions = []
    for placement in planned:
        run = run_name(placement.job, placement.run)
        decision = _decide(
            plan, provider, placement, run, held_for.get(run), by_run.get(run), listings, max_usd, apply, at
        )
        (log.warning if decision.status in ("over-cap", "failed", "missing") else log.info)(
            "capacity block for %s: %s", run, decision.message
        )
        decisions.append(decision)
    return decisions


def _with_early_starts(listing: BlockListing, provider: Provider) -> BlockListing:
    """``listing`` with the offers of the duration that holds the run from the earliest start asked for:
    EC2's blocks start (and end) at 11:30 UTC, so a block of the run's own duration that starts before the
    run ends before it does; one sold duration longer (up to a day more) covers it. Both are listed, and
    :func:`_fits` keeps only the offers that last to the run's planned end."""
    request = listing.request
    if request.unsellable:
        return listing
    early = (request.start_to - request.start_from).total_seconds() / 3600
    longer = block_duration_hours(request.hours + early)
    if longer is None or longer == request.hours:
        return listing
    more = provider.capacity_block_offerings(
        request.offering, request.nodes, longer, request.start_from, request.start_to
    )
    return BlockListing(request, (*listing.offers, *more))


def _fits(offer: CapacityBlockOffer, placement: TrainingPlacement) -> bool:
    """Whether ``offer`` holds the run: its offering, at least its nodes, from no later than its planned
    start to no earlier than its planned end (a block that starts early and ends before the run would
    leave the gang without capacity before it finishes)."""
    return (
        offer.offering == placement.offering
        and offer.nodes >= placement.nodes
        and offer.start is not None
        and offer.start <= placement.start
        and offer.start + timedelta(hours=offer.hours) >= placement.end
    )


def _decide(
    plan: Plan,
    provider: Provider,
    placement: TrainingPlacement,
    run: str,
    held: CapacityReservation | None,
    listing: BlockListing | None,
    listings: list[BlockListing],
    max_usd: float | None,
    apply: bool,
    at: datetime,
) -> PlannedBlock:
    """One run's decision (:class:`PlannedBlock` says what each status means)."""
    gang = f"{placement.nodes} x {placement.offering} from {placement.start:%Y-%m-%d %H:%M}Z"
    fee = placement.cost_usd
    base = functools.partial(
        PlannedBlock,
        run=run,
        offering=placement.offering,
        nodes=placement.nodes,
        start=placement.start,
        plan_fee_usd=fee,
        max_usd=max_usd,
    )
    if held is not None:
        what = f"Capacity Block {held.id or held.name} ({held.state}) is held for it already: nothing bought"
        return base(status="held", message=what, reservation=held)
    if placement.start <= at:
        return base(
            status="missing",
            message=f"{gang}: its start has come and no Capacity Block is held for it (blocks are bought "
            "ahead); the gang waits",
        )
    if listing is None:
        sells = placement.start - CAPACITY_BLOCK_AHEAD
        return base(
            status="not-yet",
            message=f"{gang}: EC2 sells its block from {sells:%Y-%m-%d %H:%M}Z (8 weeks ahead)",
        )
    if listing.request.unsellable:
        return base(status="unsellable", message=f"{gang}: {listing.request.unsellable}")
    fits = [o for o in listing.offers if _fits(o, placement)]
    if not fits:
        return base(
            status="no-offer",
            message=f"{gang}: none of the {len(listing.offers)} offers listed holds it ({placement.nodes} "
            f"nodes, {placement.hours:g} h, from no later than its start); nothing bought",
        )
    best = min(fits, key=lambda o: (o.upfront_usd, o.start or placement.start, o.id))
    starts = f"{best.start:%Y-%m-%d %H:%M}Z" if best.start else "?"
    offer = (
        f"{best.id} ({best.nodes} x {best.offering}, {best.zone or '?'}, from {starts} for {best.hours} h) "
        f"at ${best.upfront_usd:,.2f} upfront (the plan's fee for the block: ${fee:,.2f})"
    )
    if max_usd is None:
        return base(
            status="would-buy",
            offer=best,
            message=f"would buy {offer}; a cost cap is needed to buy it (--block-max-usd N)",
        )
    if not best.upfront_usd <= max_usd:
        return base(
            status="over-cap",
            offer=best,
            message=f"the best offer {offer} is over the cap of ${max_usd:,.2f}: not bought",
        )
    try:
        bought = buy_block(plan, provider, listings, best.id, max_usd=max_usd, apply=apply)
    except ProviderError as exc:
        return base(status="failed", offer=best, message=f"{offer}: not bought ({exc})")
    if bought.reservation is None:
        return base(
            status="would-buy",
            offer=best,
            message=f"would buy {offer}, within the cap of ${max_usd:,.2f}; --apply buys it",
        )
    made = bought.reservation
    return base(
        status="bought",
        offer=best,
        reservation=made,
        message=f"bought {offer}: Capacity Block {made.id or made.name}, tagged for the run",
    )
