"""AWS Capacity Blocks for ML as EC2 sells them: the durations, the most instances per block, the price.

One file for the rules, so the planner (a block as a training tier, ``planner/planning/problem/sets.py``),
``gpuplan verify`` (the block re-billed) and provisioning (``planner/operations/capacity_blocks.py``, the
offers listed and bought) agree on what a block is. EC2 sells durations of 1 to 14 days in 1-day steps,
then 7-day steps up to 182 days, at most 64 instances per block (256 across an account's blocks), paid
upfront when bought, not cancellable (EC2 User Guide, "Capacity Blocks for ML",
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html, and "Find and purchase
Capacity Blocks", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-purchase.html; API
reference DescribeCapacityBlockOfferings ``CapacityDurationHours``). The fee of an offer is its
"effective instance hourly rate" times instances times the block's hours
(https://aws.amazon.com/ec2/capacityblocks/pricing/); the catalog holds that rate per offering
(``capacity_block_usd_h``), an estimate until an offer is listed.
"""

from __future__ import annotations

from datetime import timedelta

__all__ = [
    "CAPACITY_BLOCK_ACCOUNT_MAX_NODES",
    "CAPACITY_BLOCK_AHEAD",
    "CAPACITY_BLOCK_DAYS",
    "CAPACITY_BLOCK_MAX_NODES",
    "CAPACITY_BLOCK_UNIT_HOURS",
    "block_duration_hours",
    "block_fee_usd",
    "why_no_block",
]

#: How far ahead EC2 sells Capacity Blocks (8 weeks), and the unit of their durations (whole days).
CAPACITY_BLOCK_AHEAD = timedelta(weeks=8)
CAPACITY_BLOCK_UNIT_HOURS = 24
#: The durations EC2 sells, in days: 1-14 in 1-day steps, then 21, 28, ... 182 in 7-day steps.
CAPACITY_BLOCK_DAYS: tuple[int, ...] = (*range(1, 15), *range(21, 183, 7))
#: The most instances one Capacity Block holds.
CAPACITY_BLOCK_MAX_NODES = 64
#: The most instances an account holds across its Capacity Blocks (EC2 User Guide, "Capacity Blocks for ML").
CAPACITY_BLOCK_ACCOUNT_MAX_NODES = 256


def block_duration_hours(hours: float) -> int | None:
    """The shortest duration EC2 sells that covers ``hours``, in hours (720 h, 30 days: 840 h, 35 days);
    None when the run is longer than the longest block (182 days)."""
    days = max(hours, 1e-9) / CAPACITY_BLOCK_UNIT_HOURS - 1e-9
    for sold in CAPACITY_BLOCK_DAYS:
        if sold >= days:
            return sold * CAPACITY_BLOCK_UNIT_HOURS
    return None


def why_no_block(nodes: int, hours: float) -> str | None:
    """Why no single block holds a gang of ``nodes`` for ``hours`` (None: one does)."""
    if nodes > CAPACITY_BLOCK_MAX_NODES:
        return (
            f"{nodes} nodes: a Capacity Block holds at most {CAPACITY_BLOCK_MAX_NODES} instances "
            f"(and an account at most {CAPACITY_BLOCK_ACCOUNT_MAX_NODES} across its blocks)"
        )
    if block_duration_hours(hours) is None:
        return f"{hours:g} h: longer than the longest Capacity Block ({CAPACITY_BLOCK_DAYS[-1]} days)"
    return None


def block_fee_usd(rate_usd_h: float, nodes: int, hours: float) -> float:
    """The upfront fee of the block a gang of ``nodes`` running ``hours`` needs: the rate per
    instance-hour times instances times the sold duration covering ``hours``. ValueError where no single
    block holds the gang (:func:`why_no_block`): callers check first."""
    why = why_no_block(nodes, hours)
    sold = block_duration_hours(hours)
    if why is not None or sold is None:
        raise ValueError(why or "no Capacity Block duration covers the run")
    return rate_usd_h * nodes * sold
