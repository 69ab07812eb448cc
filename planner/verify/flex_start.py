"""GCP flex-start gangs a plan places (tier ``flex_start``), checked and re-billed from the catalog.

A flex-start gang runs on VMs Dynamic Workload Scheduler grants after a start delay, for at most 7 days, and
is billed per node-hour while it runs (``models.flex_start``). Each one is checked here from the scenario,
the catalog and the placement alone: the scenario allows flex-start, the offering is GCP and has a
flex-start rate, the run is at most 7 days, it starts no earlier than its window's start plus the planned
delay, and it costs the offering's ``flex_start_usd_h`` x nodes x hours held. Its rows are re-billed at that
rate in ``rows.py`` (per node-hour, as on-demand rows are).
"""

from __future__ import annotations

import pandas as pd

from models.flex_start import why_no_flex_start
from models.tiers import Tier
from planner.verify.context import EPS, Context, close
from planner.verify.findings import Findings

__all__ = ["check_flex_start"]


def check_flex_start(ctx: Context, findings: Findings, rows: pd.DataFrame) -> None:
    """Each flex-start gang allowed, long enough after its window opens, at the catalog's rate; its rows
    training only."""
    delay = ctx.scenario.purchase.flex_start_delay_hours
    for placement in ctx.plan.document.training:
        if placement.tier != Tier.FLEX_START:
            continue
        where: dict[str, int | str | None] = {
            "workload": placement.job, "offering": placement.offering, "period": placement.start_period,
        }  # fmt: skip
        name = f"{placement.job} run {placement.run} on flex-start"
        offering = ctx.offerings.get(placement.offering)
        rate = None if offering is None else offering.flex_start_usd_h
        why = why_no_flex_start(offering.cloud if offering else "an unknown cloud", placement.hours)
        if not ctx.scenario.purchase.flex_start:
            why = "the scenario does not allow flex-start (purchase.flex_start)"
        elif why is None and rate is None:
            why = f"{placement.offering} has no flex-start rate (no flex_start_usd_h in the catalog)"
        if why is not None or rate is None:
            findings.add("flex-start-unavailable", f"{name}: {why}", **where)
            continue
        run = ctx.runs.get((placement.job, placement.run))
        named = placement.flex_start_delay_hours
        if named is None or not close(named, delay):
            said = f"{name}: plans a start delay of {named} h, the scenario {delay:g} h"
            findings.add("flex-start-delay", said, **where)
        elif run is not None and placement.start_period * ctx.p < run.window_start_hour + delay - EPS:
            findings.add(
                "flex-start-delay",
                f"{name}: starts at hour {placement.start_period * ctx.p:g}, before its window's start "
                f"(hour {run.window_start_hour:g}) plus the {delay:g} h start delay",
                **where,
            )
        held = placement.periods * ctx.p
        fee = rate * placement.nodes * held
        if not close(placement.cost_usd, fee, abs_=0.01):
            findings.add(
                "flex-start-cost",
                f"{name}: cost_usd ${placement.cost_usd:,.2f}; the catalog bills ${fee:,.2f} "
                f"(${rate:g} x {placement.nodes} nodes x {held:g} h)",
                **where,
            )
    flex_rows = rows[(rows["tier"] == Tier.FLEX_START) & (rows["kind"] != "training")]
    for workload, period in zip(flex_rows["workload"].head(5), flex_rows["period"].head(5), strict=True):
        findings.add(
            "flex-start-cost",
            f"{workload} on flex-start: planned for training gangs only",
            workload=str(workload),
            period=int(period),
        )
