"""Payment options and cash (issue 38): each commitment's fee and hourly charge as the catalog sells its
option (a savings plan's fee: its payment's share of its whole commitment), the plan's cash per calendar
month re-counted from its rows and commitments, and the cash limit.

Re-derived from the scenario and catalog alone: the option's figures from the terms file
(``models/priceterms.py``: the node-shaped terms of the offering, term and payment, the lowest effective
rate), the months by walking the horizon's calendar, not by the planner's arrays (``planning/monthly.py``).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

import numpy as np

from models.catalog import Offering
from models.plan import Commitment, SavingsPlanCommitment
from models.priceterms import NODE_SHAPED_KINDS
from models.savingsplans import UPFRONT_SHARE
from models.tiers import HOURS_PER_YEAR, TERM_TIER, Term, Tier
from planner.verify.blocks import block_bills
from planner.verify.context import Context, close
from planner.verify.findings import Findings

__all__ = ["bought_rate", "check_cash", "month_key", "savings_plan_fee", "window_key"]


def month_key(when: datetime) -> str:
    """A calendar month as plan.json names it: ``2027-01``."""
    return f"{when.year:04d}-{when.month:02d}"


def window_key(when: datetime, per: str) -> str:
    """The calendar window of ``purchase.max_upfront_usd`` a fee paid at ``when`` counts in."""
    return month_key(when) if per == "month" else f"{when.year:04d}-Q{(when.month - 1) // 3 + 1}"


def bought_rate(
    ctx: Context, findings: Findings, c: Commitment, offering: Offering, where: dict[str, int | str | None]
) -> float | None:
    """The amortized rate a purchase must carry for its payment option: the catalog's rate paid by the hour,
    or the terms file's hourly rate plus its fee spread over the term; its ``upfront_usd`` and
    ``hourly_usd`` must be that option's. None (and a finding) when the catalog does not sell the option."""
    if c.payment == "no-upfront" or c.term not in (Term.ONE_YEAR, Term.THREE_YEARS):
        if c.upfront_usd:
            findings.add(
                "payment", f"{c.name}: paid by the hour, but with a fee of ${c.upfront_usd:,.2f}", **where
            )
        return offering.price(TERM_TIER[c.term])
    years = c.term.years or 0
    sold = [
        t
        for t in ctx.catalog.terms
        if t.offering == c.offering
        and t.term_years == years
        and t.kind in NODE_SHAPED_KINDS
        and t.payment == c.payment
    ]
    if not sold:
        findings.add(
            "payment", f"{c.name}: {c.payment}, but the catalog sells no {c.term} {c.payment} term", **where
        )
        return None
    term = min(sold, key=lambda t: t.usd_h + t.upfront_usd / (years * HOURS_PER_YEAR))
    if not close(c.upfront_usd, term.upfront_usd, rel=1e-9, abs_=1e-6) or not close(
        c.recurring_usd_per_node_hour, term.usd_h, rel=1e-9, abs_=1e-9
    ):
        findings.add(
            "payment",
            f"{c.name}: {c.payment} at ${c.upfront_usd:,.2f} per node and "
            f"${c.recurring_usd_per_node_hour:,.4f}/node-hour; the catalog sells it at "
            f"${term.upfront_usd:,.2f} and ${term.usd_h:,.4f}",
            **where,
        )
    return term.usd_h + term.upfront_usd / (years * HOURS_PER_YEAR)


def savings_plan_fee(plan: SavingsPlanCommitment) -> float:
    """What a savings plan's payment option takes at purchase, by the cloud's rule: its share
    (``models.savingsplans.UPFRONT_SHARE``) of the whole commitment, USD per hour x its term's hours."""
    return UPFRONT_SHARE[plan.payment] * plan.usd_per_hour * (plan.term.years or 0) * HOURS_PER_YEAR


def check_cash(ctx: Context, findings: Findings) -> None:
    """``costs.cash_by_month`` re-counted month by month, and the fees of each window within the limit:
    commitments', savings plans' and Capacity Blocks' (each block's fee re-billed from the catalog, in the
    window its block starts)."""
    doc = ctx.plan.document
    horizon = ctx.scenario.horizon
    cap = ctx.scenario.purchase.max_upfront_usd
    if cap is not None:
        fees: dict[str, float] = defaultdict(float)
        for c in doc.commitments:
            if c.upfront_usd and c.start is not None and not c.existing:
                fees[window_key(c.start, cap.per)] += c.nodes * c.upfront_usd
        for sp in doc.savings_plans:
            if not sp.existing:
                fees[window_key(sp.start, cap.per)] += savings_plan_fee(sp)
        for bill in block_bills(ctx):  # a Capacity Block's fee, re-billed, in the window its block starts
            if bill.fee_usd is not None:
                starts = horizon.start + timedelta(hours=bill.placement.start_period * horizon.period_hours)
                fees[window_key(starts, cap.per)] += bill.fee_usd
        for window, paid in sorted(fees.items()):
            if paid > cap.usd + 1e-6:
                findings.add(
                    "upfront-cap",
                    f"{window}: upfront fees ${paid:,.2f}, above purchase.max_upfront_usd (${cap.usd:,.2f} a "
                    f"{cap.per})",
                )
    if doc.costs.cash_by_month is None:
        return  # a plan written before payment options (schema v1)
    cost: dict[str, float] = defaultdict(float)
    cash: dict[str, float] = defaultdict(float)
    upfront: dict[str, float] = defaultdict(float)
    p = horizon.period_hours

    # the calendar months of the horizon, as hour ranges: walked month by month from its start
    bounds: list[tuple[str, float, float]] = []
    when = horizon.start
    while when < horizon.end:
        following = (
            when.replace(day=1, hour=0, minute=0, second=0, microsecond=0) + timedelta(days=32)
        ).replace(day=1)
        bounds.append((month_key(when), horizon.hour_of(when), horizon.hour_of(min(following, horizon.end))))
        when = following

    def spread(begin: float, end: float, amount: float, into: dict[str, float]) -> None:
        """``amount`` evenly over the whole hours [begin, end) inside the horizon, by month."""
        first, last = float(int(max(0.0, begin))), float(int(min(float(horizon.hours), end)))
        for key, h0, h1 in bounds:
            overlap = min(h1, last) - max(h0, first)
            if overlap > 0:
                into[key] += amount * overlap / (last - first)

    # the rows: each period's cost over its hours, summed per month (whole-hour month bounds); a Capacity
    # Block's rows are cost, not cash: its fee goes out whole in the month it starts (re-billed: blocks.py)
    allocations = ctx.plan.allocations
    block = (allocations["tier"] == Tier.CAPACITY_BLOCK).to_numpy()
    for frame, paid_as_used in ((allocations[~block], True), (allocations[block], False)):
        per_hour = np.zeros(horizon.hours)
        for period, usd in frame.groupby("period")["cost_usd"].sum().items():
            first = int(period) * p  # type: ignore[call-overload]
            per_hour[first : first + p] += float(usd) / p
        for key, h0, h1 in bounds:
            usage = float(per_hour[int(h0) : int(h1)].sum())
            cost[key] += usage
            if paid_as_used:
                cash[key] += usage
    for bill in block_bills(ctx):
        if bill.fee_usd is not None:
            starts = horizon.start + timedelta(hours=bill.placement.start_period * p)
            upfront[month_key(starts)] += bill.fee_usd
    for c in doc.commitments:
        begin = 0.0 if c.start is None else horizon.hour_of(c.start)
        end = float(horizon.hours) if c.end is None else horizon.hour_of(c.end)
        spread(begin, end, c.cost_in_horizon_usd, cost)
        recurring = c.recurring_usd_per_node_hour / c.usd_per_node_hour if c.usd_per_node_hour else 1.0
        spread(begin, end, c.cost_in_horizon_usd * recurring, cash)
        if c.upfront_usd and c.start is not None and 0 <= begin < horizon.hours:
            upfront[month_key(c.start)] += c.nodes * c.upfront_usd
    for plan in doc.savings_plans:
        begin, end = horizon.hour_of(plan.start), horizon.hour_of(plan.end)
        spread(begin, end, plan.cost_in_horizon_usd, cost)
        share = UPFRONT_SHARE[plan.payment]
        spread(begin, end, plan.cost_in_horizon_usd * (1.0 - share), cash)
        if share and 0 <= begin < horizon.hours:
            upfront[month_key(plan.start)] += savings_plan_fee(plan)
    months = [key for key, _h0, _h1 in bounds]
    written = {m.month: m for m in doc.costs.cash_by_month}
    if sorted(written) != months:
        findings.add(
            "cash-month", f"costs.cash_by_month lists {sorted(written)}; the horizon's months are {months}"
        )
        return
    for month in months:
        row = written[month]
        expected = (cost[month], upfront[month], cash[month], upfront[month] + cash[month])
        found = (row.cost_usd, row.upfront_usd, row.recurring_usd, row.cash_usd)
        if not all(close(a, b, rel=1e-6, abs_=0.01) for a, b in zip(found, expected, strict=True)):
            findings.add(
                "cash-month",
                f"{month}: cost ${row.cost_usd:,.2f}, upfront ${row.upfront_usd:,.2f}, recurring "
                f"${row.recurring_usd:,.2f}, cash ${row.cash_usd:,.2f}; recounted ${expected[0]:,.2f}, "
                f"${expected[1]:,.2f}, ${expected[2]:,.2f}, ${expected[3]:,.2f}",
            )
