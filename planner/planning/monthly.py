"""A plan's cost per month and tier: what finance compares across what-if variants and against owning.

Months are 730-hour slices of the horizon from its start (``models.tiers.HOURS_PER_MONTH``, the month
``models/tco.py`` uses too), so a year is 12 months and cost curves line up across variants whatever the
calendar. Allocation rows are charged to the month of their period; commitments (and owned nodes) are
paid evenly over their hours inside the horizon (from their start, or the horizon's, to their end), the
way ``plan.json`` charges them (``cost_in_horizon_usd``).

Cash (issue 38) is counted per *calendar* month (:func:`cash_by_month`), the way a finance team asks ("how
much cash in January?") and the way ``purchase.max_upfront_usd`` limits it: a commitment's upfront fee goes
out in the month it starts, whole (the term beyond the horizon included); the hourly charges of usage,
commitments and savings plans as their hours run (a period that spans two months split by its hours). An
AWS Capacity Block's fee (a training gang's ``capacity_block`` tier) goes out whole in the month the block
starts; its cost is charged to the periods its gang runs (its allocation rows), like any usage. (EC2
charges the fee when the block is bought, up to 8 weeks before it starts; the plan counts it at the start,
where it decides the block.)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from models.plan import CashMonth, Plan, PlanHorizon
from models.tiers import HOURS_PER_MONTH, Tier


def months_in(horizon_hours: float) -> int:
    return max(1, math.ceil(horizon_hours / HOURS_PER_MONTH - 1e-9))


def monthly_by_tier(plan: Plan) -> pd.DataFrame:
    """USD per (month, tier): rows are months 0..M-1 of the horizon, columns the tiers paid."""
    horizon = plan.document.horizon
    hours, p = float(horizon.hours), float(horizon.period_hours)
    months = months_in(hours)
    frame = pd.DataFrame(0.0, index=pd.RangeIndex(months, name="month"), columns=[])
    alloc = plan.allocations
    if len(alloc):
        month = np.minimum((alloc["period"].to_numpy() * p // HOURS_PER_MONTH).astype(int), months - 1)
        grouped = alloc.assign(month=month).groupby(["month", "tier"])["cost_usd"].sum()
        # pandas-stubs types unstack's fill_value as int | str | dict; pandas takes any scalar
        frame = grouped.unstack(fill_value=0.0).reindex(frame.index, fill_value=0.0)  # type: ignore[arg-type]
    start = horizon.start
    for commitment in plan.document.commitments:
        tier = commitment.term.tier
        if tier not in frame.columns:
            frame[tier] = 0.0
        begin = 0.0 if commitment.start is None else (commitment.start - start).total_seconds() / 3600
        end = hours if commitment.end is None else (commitment.end - start).total_seconds() / 3600
        frame[tier] = frame[tier] + _spread(commitment.cost_in_horizon_usd, hours, months, begin, end)
    return frame.fillna(0.0)


def _spread(
    total: float, hours: float, months: int, begin: float = 0.0, end: float | None = None
) -> np.ndarray:
    """``total`` paid evenly per hour of [begin, end) inside the horizon, summed per 730 h month (the
    last month may be shorter)."""
    first, last = max(0.0, begin), min(hours, hours if end is None else end)
    edges = np.clip(np.arange(months + 1) * HOURS_PER_MONTH, first, max(first, last))
    paid = last - first
    return total * np.diff(edges) / paid if paid > 0 else np.zeros(months)


def month_labels(horizon: PlanHorizon) -> list[str]:
    """The day each 730 h month starts (``2027-01-31``): unique, where calendar-month names would repeat
    (the second 730 h month of 2027 starts on January 31)."""
    start = pd.Timestamp(horizon.start)
    months = months_in(float(horizon.hours))
    return [(start + pd.Timedelta(hours=HOURS_PER_MONTH * m)).strftime("%Y-%m-%d") for m in range(months)]


def series(plan: Plan) -> dict[str, Any]:
    """The monthly block of whatif.json: labels and USD per tier per month."""
    frame = monthly_by_tier(plan)
    return {
        "month": month_labels(plan.document.horizon),
        "by_tier": {str(tier): [float(v) for v in frame[tier]] for tier in frame.columns},
    }


def calendar_month_of_hour(horizon: PlanHorizon) -> tuple[list[str], np.ndarray]:
    """The calendar months the horizon touches (``2027-01``) and, per hour of it, the index of its month."""
    hours = pd.date_range(pd.Timestamp(horizon.start), periods=horizon.hours, freq="h")
    keys = hours.strftime("%Y-%m")
    labels = list(dict.fromkeys(keys))
    index = {label: n for n, label in enumerate(labels)}
    return labels, np.array([index[k] for k in keys], dtype=np.int64)


def cash_by_month(plan: Plan) -> list[CashMonth]:
    """Per calendar month: the plan's cost (commitments amortized, as ``costs.total_usd`` counts it) and
    its cash (upfront fees in the month a commitment starts, hourly charges as they run)."""
    document = plan.document
    horizon = document.horizon
    hours = horizon.hours
    labels, month = calendar_month_of_hour(horizon)
    per_hour_cost = np.zeros(hours)
    per_hour_cash = np.zeros(hours)
    alloc = plan.allocations
    upfront = np.zeros(len(labels))
    if len(alloc):
        block = (alloc["tier"] == Tier.CAPACITY_BLOCK).to_numpy()
        for rows, paid_as_used in ((alloc[~block], True), (alloc[block], False)):
            per_period = np.bincount(
                rows["period"].to_numpy(np.int64), rows["cost_usd"].to_numpy(float), minlength=horizon.periods
            )[: horizon.periods]
            usage = np.repeat(per_period / horizon.period_hours, horizon.period_hours)
            per_hour_cost += usage
            if paid_as_used:
                per_hour_cash += usage
    start = horizon.start
    for placement in document.training:  # a Capacity Block's fee: upfront, in the month the block starts
        if placement.tier == Tier.CAPACITY_BLOCK:
            upfront[month[min(hours - 1, max(0, int(placement.start_period * horizon.period_hours)))]] += (
                placement.cost_usd
            )
    windows: list[tuple[float, float, float, float]] = []  # begin, end, cost, recurring cash
    for c in document.commitments:
        begin = 0.0 if c.start is None else (c.start - start).total_seconds() / 3600
        end = float(hours) if c.end is None else (c.end - start).total_seconds() / 3600
        recurring = c.recurring_usd_per_node_hour / c.usd_per_node_hour if c.usd_per_node_hour else 1.0
        windows.append((begin, end, c.cost_in_horizon_usd, c.cost_in_horizon_usd * recurring))
        if c.upfront_total_usd and 0 <= begin < hours:
            upfront[month[int(begin)]] += c.upfront_total_usd
    for sp in document.savings_plans:  # a partial or all-upfront plan: that share of its whole commitment
        begin, end = (sp.start - start).total_seconds() / 3600, (sp.end - start).total_seconds() / 3600
        windows.append((begin, end, sp.cost_in_horizon_usd, sp.cost_in_horizon_usd * sp.recurring_share))
        if sp.upfront_usd and 0 <= begin < hours:
            upfront[month[int(begin)]] += sp.upfront_usd
    for begin, end, charged, paid in windows:
        first, last = int(max(0.0, begin)), int(min(float(hours), end))
        if last > first:
            per_hour_cost[first:last] += charged / (last - first)
            per_hour_cash[first:last] += paid / (last - first)
    cost = np.bincount(month, per_hour_cost, minlength=len(labels))
    recurring_cash = np.bincount(month, per_hour_cash, minlength=len(labels))
    return [
        CashMonth(
            month=label,
            cost_usd=float(cost[m]),
            upfront_usd=float(upfront[m]),
            recurring_usd=float(recurring_cash[m]),
            cash_usd=float(upfront[m] + recurring_cash[m]),
        )
        for m, label in enumerate(labels)
    ]
