"""A plan's cost per month and tier: what finance compares across what-if variants and against owning.

Months are 730-hour slices of the horizon from its start (``models.tiers.HOURS_PER_MONTH``, the month
``models/tco.py`` uses too), so a year is 12 months and cost curves line up across variants whatever the
calendar. Allocation rows are charged to the month of their period; commitments (and owned nodes) are
paid evenly over their hours inside the horizon (from their start, or the horizon's, to their end), the
way ``plan.json`` charges them (``cost_in_horizon_usd``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from models.plan import Plan, PlanHorizon
from models.tiers import HOURS_PER_MONTH


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
