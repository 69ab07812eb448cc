"""AWS Capacity Blocks for ML for a plan's gangs: listed, and bought only when a person asks.

A Capacity Block holds ``nodes`` instances for whole days at a fixed upfront fee, sold up to 8 weeks
ahead; it is the way teams get H100/H200 capacity for a training run. :func:`block_requests` says which
of the plan's gangs a block could hold; :func:`list_blocks` asks the provider for the offers for each
(listing buys nothing); :func:`buy_block` buys one of them, never above ``max_usd``, idempotently
(the client token comes from the plan id and the offer), tagged as the plan's. A provider without
``Capability.CAPACITY_BLOCKS`` gets ``Unsupported`` before any call. ``gpuplan provision
--capacity-blocks`` prints these; they take a provider and a plan, nothing of the CLI, so the
daemon can call them too (it does not yet: buying a block stays a person's decision).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from models.naming import client_token, managed_tags
from models.plan import Plan
from planner.outputs.desired import plan_id_of, run_name
from providers.base import (
    Capability,
    CapacityBlockOffer,
    CapacityReservation,
    InvalidRequest,
    Provider,
    require,
)

__all__ = [
    "CAPACITY_BLOCK_AHEAD",
    "CAPACITY_BLOCK_UNIT_HOURS",
    "BlockListing",
    "BlockPurchase",
    "BlockRequest",
    "block_hours",
    "block_requests",
    "buy_block",
    "list_blocks",
]

#: How far ahead EC2 sells Capacity Blocks (8 weeks), and the unit of their durations (whole days).
CAPACITY_BLOCK_AHEAD = timedelta(weeks=8)
CAPACITY_BLOCK_UNIT_HOURS = 24


@dataclass(frozen=True)
class BlockRequest:
    """A non-spot gang of the plan that a Capacity Block could hold: its size, its hours rounded up to
    whole days, the start window to ask for (its planned start, or up to a day earlier), and what the
    plan pays for it on demand (the figure a block's upfront fee is compared with)."""

    run: str
    offering: str
    nodes: int
    hours: int
    start_from: datetime
    start_to: datetime
    on_demand_usd: float


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
        unit = CAPACITY_BLOCK_UNIT_HOURS
        hours = max(1, math.ceil(placement.hours / unit - 1e-9)) * unit
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
    """The offers for each of the plan's gangs that a block could hold (:func:`block_requests`).
    Unsupported when ``provider`` sells no blocks; a provider error propagates."""
    require(provider, Capability.CAPACITY_BLOCKS, "capacity_block_offerings")
    return [
        BlockListing(
            request,
            tuple(
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
    ``max_usd`` is not a positive figure; the provider refuses an offer above the cap."""
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
    if not apply:
        return BlockPurchase(offer, run, max_usd, None)
    plan_id = plan_id_of(plan.document)
    bought = provider.purchase_capacity_block(
        offer_id,
        max_usd=max_usd,
        token=client_token(plan_id, "capacity-block", offer_id),
        tags=managed_tags(plan_id, run=run),
    )
    return BlockPurchase(offer, run, max_usd, bought)


def block_hours(hours: float) -> int:
    """The shortest Capacity Block duration EC2 sells that covers ``hours``."""
    unit = CAPACITY_BLOCK_UNIT_HOURS
    return max(1, math.ceil(hours / unit - 1e-9)) * unit
