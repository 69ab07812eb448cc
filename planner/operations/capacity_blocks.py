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
daemon can call them too (it does not yet: buying a block stays a person's decision).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from models.capacity_blocks import (
    CAPACITY_BLOCK_ACCOUNT_MAX_NODES,
    CAPACITY_BLOCK_AHEAD,
    block_duration_hours,
    why_no_block,
)
from models.naming import client_token, managed_tags
from models.plan import Plan
from planner.outputs.desired import plan_id_of, run_name
from providers.base import (
    Capability,
    CapacityBlockOffer,
    CapacityReservation,
    InvalidRequest,
    Provider,
    QuotaExceeded,
    require,
)

__all__ = [
    "BlockListing",
    "BlockPurchase",
    "BlockRequest",
    "block_requests",
    "buy_block",
    "list_blocks",
]


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
    """The plan's multi-node non-spot gangs that start after ``at`` and within the 8 weeks EC2 sells
    blocks for, on offerings ``handles`` says are its own."""
    document = plan.document
    requests = []
    for placement in document.training:
        if placement.nodes < 2 or placement.tier == "spot" or not handles(placement.offering):
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


def list_blocks(plan: Plan, provider: Provider, at: datetime) -> list[BlockListing]:
    """The offers for each of the plan's gangs that a block could hold (:func:`block_requests`); a
    gang no single block can hold is listed with no offers, without asking the cloud. Unsupported when
    ``provider`` sells no blocks; a provider error propagates."""
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
