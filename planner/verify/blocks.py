"""AWS Capacity Blocks a plan buys for its gangs (tier ``capacity_block``), re-billed from the catalog.

A block is paid upfront: the offering's ``capacity_block_usd_h`` times the gang's instances times the
shortest duration EC2 sells that holds the run (``models.capacity_blocks``: 1-14 days, then weeks up to
182; at most 64 instances). Each block is priced again here from the scenario, the catalog and the run's
held periods alone, and compared with what the plan says it costs (``training[].cost_usd``,
``block_hours``) and with what its rows cost (they carry the fee between them). A block is planned only
where the scenario opts in (``purchase.capacity_blocks``) and the catalog prices one on an AWS offering.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pandas as pd

from models.capacity_blocks import FIXED_RESERVATIONS, block_duration_hours, why_no_block
from models.plan import TrainingPlacement
from models.tiers import Tier
from planner.verify.context import Context, close
from planner.verify.findings import Findings

__all__ = ["BlockBill", "block_bills", "check_blocks"]


@dataclass(frozen=True, slots=True)
class BlockBill:
    """One block as the catalog bills it: the placement, the hours sold and the fee (None: no block can
    be bought for it, ``why`` says why)."""

    placement: TrainingPlacement
    hours: int | None
    fee_usd: float | None
    why: str | None = None


def block_bills(ctx: Context) -> list[BlockBill]:
    """Every gang of the plan in a Capacity Block, re-billed: rate x nodes x the sold hours that hold its
    held periods."""
    bills = []
    for placement in ctx.plan.document.training:
        if placement.tier != Tier.CAPACITY_BLOCK:
            continue
        offering = ctx.offerings.get(placement.offering)
        held = placement.periods * ctx.p
        cloud = offering.cloud if offering is not None else ""
        sells = cloud in FIXED_RESERVATIONS
        rate = offering.capacity_block_usd_h if offering is not None and sells else None
        if not sells or rate is None:
            why: str | None = f"{placement.offering} sells no block (no capacity_block_usd_h in the catalog)"
        elif not ctx.scenario.purchase.buys_blocks(cloud):
            why = (
                "the scenario does not allow calendar-mode reservations (purchase.calendar_mode)"
                if cloud == "gcp"
                else "the scenario does not allow Capacity Blocks (purchase.capacity_blocks)"
            )
        else:
            why = why_no_block(placement.nodes, held, cloud)
        sold = block_duration_hours(held, cloud) if sells else None
        fee = None if why is not None or rate is None or sold is None else rate * placement.nodes * sold
        bills.append(BlockBill(placement, sold, fee, why))
    return bills


def check_blocks(ctx: Context, findings: Findings, rows: pd.DataFrame) -> None:
    """Each block sold as EC2 sells them, at its fee; its rows (training only) carry that fee."""
    fees: dict[str, float] = defaultdict(float)
    for bill in block_bills(ctx):
        placement = bill.placement
        where: dict[str, int | str | None] = {
            "workload": placement.job, "offering": placement.offering, "period": placement.start_period,
        }  # fmt: skip
        name = f"{placement.job} run {placement.run}"
        if bill.fee_usd is None:
            findings.add("block-unavailable", f"{name} in a Capacity Block: {bill.why}", **where)
            continue
        fees[placement.job] += bill.fee_usd
        if placement.block_hours != bill.hours or not close(placement.cost_usd, bill.fee_usd, abs_=0.01):
            findings.add(
                "block-fee",
                f"{name}: a block of {placement.block_hours} h for ${placement.cost_usd:,.2f}; EC2 sells "
                f"{bill.hours} h for {placement.periods * ctx.p} h held, at ${bill.fee_usd:,.2f} "
                f"(rate x {placement.nodes} instances x {bill.hours} h)",
                **where,
            )
    block_rows = rows[rows["tier"] == Tier.CAPACITY_BLOCK]
    inference = block_rows[block_rows["kind"] != "training"]
    for workload, period in zip(inference["workload"].head(5), inference["period"].head(5), strict=True):
        findings.add(
            "block-rows",
            f"{workload} on a Capacity Block: blocks are bought for training gangs only",
            workload=str(workload),
            period=int(period),
        )
    paid = block_rows[block_rows["kind"] == "training"].groupby("workload")["cost_usd"].sum()
    for job in sorted(set(fees) | {str(j) for j in paid.index}):
        written = float(paid.get(job, 0.0))
        if not close(written, fees.get(job, 0.0), abs_=0.01):
            findings.add(
                "block-rows",
                f"{job}: its capacity_block rows cost ${written:,.2f}; its blocks' fees are "
                f"${fees.get(job, 0.0):,.2f}",
                workload=job,
            )
