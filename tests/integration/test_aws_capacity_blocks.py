"""Capacity Block durations and sizes as EC2 sells them (issue 35 point 5): 1-14 days in 1-day steps,
then 7-day steps up to 182 days, at most 64 instances a block (EC2 User Guide, "Find and purchase
Capacity Blocks", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-purchase.html).
The gangs are the mixed-fleet week's, with the pretraining run's hours and size changed in the document
(``block_requests`` reads only ``plan.document``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from models.capacity_blocks import CAPACITY_BLOCK_DAYS, block_duration_hours
from models.plan import Plan
from planner.operations.capacity_blocks import block_requests, list_blocks
from providers.base import Capability
from providers.sim import SimProvider


@pytest.mark.parametrize(
    ("hours", "sold"),
    [
        (0.5, 24),
        (24, 24),
        (25, 48),
        (48, 48),
        (300, 312),  # 12.5 days: 13 days
        (336, 336),  # 14 days, the last 1-day step
        (337, 504),  # just over 14 days: 21 days, the first 7-day step
        (720, 840),  # the example's 30-day run: 35 days
        (841, 1008),  # just over 35 days: 42 days
        (4368, 4368),  # 182 days, the longest block
        (4369, None),  # longer than any block
    ],
)
def test_hours_round_up_to_the_next_duration_ec2_sells(hours: float, sold: int | None) -> None:
    assert block_duration_hours(hours) == sold


def test_the_durations_sold_are_1_to_14_days_then_weeks_to_26_weeks() -> None:
    assert CAPACITY_BLOCK_DAYS[:14] == tuple(range(1, 15))
    assert CAPACITY_BLOCK_DAYS[14:] == tuple(7 * w for w in range(3, 27))
    assert len(CAPACITY_BLOCK_DAYS) == 38 and CAPACITY_BLOCK_DAYS[-1] == 182


def _with_gang(plan: Plan, **change: Any) -> tuple[Plan, Any]:
    document = plan.document
    gang = next(t for t in document.training if t.nodes > 1)
    changed = gang.model_copy(update=change)
    training = [changed if t is gang else t for t in document.training]
    return dataclasses.replace(plan, document=document.model_copy(update={"training": training})), changed


def test_the_examples_720_hour_run_asks_for_a_35_day_block(week_plan: Callable[[str], Path]) -> None:
    plan, gang = _with_gang(Plan.read(week_plan("aws")), hours=720.0)
    at = gang.start - timedelta(days=2)
    (request,) = [r for r in block_requests(plan, at, lambda o: o.startswith("aws:")) if r.nodes > 1]
    assert (request.hours, request.nodes, request.unsellable) == (840, 16, None)
    record = plan.document.offerings[gang.offering]
    assert request.on_demand_usd == pytest.approx(record.on_demand_usd_h * 16 * 720)


class _Seller(SimProvider):
    """The sim cloud selling blocks: records what it is asked (only the contract is exercised)."""

    capabilities = frozenset({*SimProvider.capabilities, Capability.CAPACITY_BLOCKS})

    def __init__(self, state: Path) -> None:
        super().__init__(state)
        self.asked: list[tuple[str, int, int]] = []

    def capacity_block_offerings(self, offering: str, nodes: int, hours: int, *_: Any) -> list[Any]:  # type: ignore[override]
        self.asked.append((offering, nodes, hours))
        return []


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"nodes": 65}, "65 nodes: a Capacity Block holds at most 64 instances"),
        ({"hours": 4400.0}, "4400 h: longer than the longest Capacity Block (182 days)"),
    ],
)
def test_a_gang_no_single_block_can_hold_is_listed_with_why_and_never_asked_for(
    week_plan: Callable[[str], Path], tmp_path: Path, change: dict[str, Any], why: str
) -> None:
    plan, gang = _with_gang(Plan.read(week_plan("aws")), **change)
    seller = _Seller(tmp_path / "s.json")
    listings = list_blocks(plan, seller, gang.start - timedelta(days=2))
    (listing,) = [x for x in listings if x.request.run == f"{gang.job}-{gang.run}"]
    assert listing.offers == () and listing.request.unsellable is not None
    assert why in listing.request.unsellable
    assert all(nodes <= 64 for _, nodes, _ in seller.asked)
    assert (gang.offering, gang.nodes, listing.request.hours) not in seller.asked


def test_a_64_node_gang_is_asked_for(week_plan: Callable[[str], Path], tmp_path: Path) -> None:
    plan, gang = _with_gang(Plan.read(week_plan("aws")), nodes=64, hours=100.0)
    seller = _Seller(tmp_path / "s.json")
    list_blocks(plan, seller, gang.start - timedelta(days=2))
    assert (gang.offering, 64, 120) in seller.asked  # 100 h: 5 days


# ----------------------------------------------------------------------------------------------------------
# The account's limit across its blocks: 256 instances (EC2 User Guide, "Capacity Blocks for ML",
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html)


def test_a_block_that_would_pass_256_instances_across_the_accounts_blocks_is_refused_before_buying(
    aws_env: None, week_plan: Callable[[str], Path]
) -> None:
    """The AWS adapter on moto and the EC2 stand-in: the blocks the account holds (awaiting payment,
    scheduled or active, in every configured region, whoever bought them) are read before a purchase, on
    a dry run too; cancelled or expired blocks and ordinary reservations do not count. 160 held: a block
    of 64 (224) is bought, a second of 64 (288) refused naming the figures, and nothing is sent to EC2's
    purchase; one of 32 (exactly 256) may be bought; the first bought again is the same block."""
    import boto3
    from aws_stand_in import Ec2StandIn, block_offering, make_vpc
    from moto import mock_aws

    from models.capacity_blocks import CAPACITY_BLOCK_ACCOUNT_MAX_NODES
    from planner.operations.capacity_blocks import BlockListing, BlockRequest, buy_block
    from providers.aws import AwsSettings, open_provider
    from providers.base import QuotaExceeded

    plan = Plan.read(week_plan("aws"))
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        vpc = make_vpc(session)
        stand_in = Ec2StandIn()
        stand_in.install(session)
        subnets = {"us-east-1": vpc.subnets, "us-east-2": ["subnet-0e0e0e0e"]}
        settings = AwsSettings(image_id=vpc.image_id, subnets=subnets)
        provider = open_provider(settings, session=session, sleep=lambda s: None)
        stand_in.hold("us-east-1", 64, "active")
        stand_in.hold("us-east-2", 64, "scheduled")  # another region of the account
        stand_in.hold("us-east-1", 32, "payment-pending")
        for state in ("cancelled", "expired"):
            stand_in.hold("us-east-1", 64, state)
        stand_in.hold("us-east-1", 64, "active", reservation_type="default")  # an ODCR, not a block
        stand_in.block_offerings = [
            block_offering("cb-a", "1000.00", count=64),
            block_offering("cb-b", "1000.00", count=64, hours=48),
            block_offering("cb-c", "1000.00", count=32, hours=72),
        ]
        offering = "aws:us-east-1:p5.48xlarge"
        at = plan.document.horizon.start
        listings = [
            BlockListing(
                BlockRequest(f"run-{hours}", offering, nodes, hours, at, at, 1e6),
                tuple(provider.capacity_block_offerings(offering, nodes, hours)),
            )
            for nodes, hours in ((64, 24), (64, 48), (32, 72))
        ]
        assert [o.id for listing in listings for o in listing.offers] == ["cb-a", "cb-b", "cb-c"]

        bought = buy_block(plan, provider, listings, "cb-a", max_usd=5000, apply=True)  # 160 + 64 = 224
        assert bought.reservation is not None and bought.reservation.nodes == 64
        for apply in (False, True):  # 224 + 64 = 288: refused, on a dry run too
            with pytest.raises(QuotaExceeded) as refused:
                buy_block(plan, provider, listings, "cb-b", max_usd=5000, apply=apply)
            message = str(refused.value)
            assert "cb-b holds 64 instances" in message and "4 Capacity Blocks" in message
            assert "hold 224" in message and "288 in all" in message
            assert f"over the {CAPACITY_BLOCK_ACCOUNT_MAX_NODES} EC2 allows" in message
        assert [p["CapacityBlockOfferingId"] for p in stand_in.calls("PurchaseCapacityBlock")] == ["cb-a"]
        held_reads = stand_in.calls("DescribeCapacityReservations")
        assert {f["Name"] for call in held_reads for f in call.get("Filters", [])} >= {"state"}

        exactly = buy_block(plan, provider, listings, "cb-c", max_usd=5000, apply=False)  # 224 + 32 = 256
        assert exactly.reservation is None
        again = buy_block(plan, provider, listings, "cb-a", max_usd=5000, apply=True)  # its own token
        assert again.reservation is not None and again.reservation.id == bought.reservation.id
        assert len(stand_in.calls("PurchaseCapacityBlock")) == 1
