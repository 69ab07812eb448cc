"""Human-readable plan reports: ``report.md`` and ``report.html`` from a plan directory.

The report reads ONLY the plan files (``plan.json`` and ``allocations.csv``, see
``plan-contract.md``), never solver internals, so what it shows is exactly what Terraform, the
daemon and the users' own tools see. It takes the typed :class:`models.plan.PlanDocument`:
``write_reports`` reads the directory through :meth:`models.plan.Plan.read`, so a wrong plan.json
fails there with an ``InputError`` naming the file and field, and every field the report uses is
the contract's (the optional ones are ``| None`` and shown as "—").

Who reads it and what that means here:

* The platform lead distrusts black boxes, so the page shows the solver status, the bound and
  the gap in words, why each commitment pays for itself (utilization and coverage), and the
  savings against the baselines, including an honest "this plan costs more" when it does.
* The FinOps analyst needs totals that reconcile, so every cost table has a total row, its rows
  are rounded to whole dollars so that they add up to the total shown, and a warning line
  appears whenever the plan's parts do not sum to ``costs.total_usd`` within $1.

Charts use plotly (already a dependency; matplotlib is not). The page must work offline and
open from a mail attachment or a CI artifact, so plotly.js is embedded inline exactly ONCE in
``<head>`` and every chart is a ``<div>`` rendered with ``include_plotlyjs=False``: one copy of
the ~4.8 MB library however many charts there are, and no CDN or other external fetch. Long
horizons (more than a month of sub-daily periods, e.g. 8760 hourly periods) are resampled to
days before plotting so the page stays light; chart titles say when they are.

The templates are ``templates/plan.md.j2`` and ``templates/plan.html.j2`` (which extends the shared
``base.html.j2``). Markdown and HTML are rendered from one shared context, so the two never disagree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from markupsafe import Markup

from models.plan import (
    Commitment,
    MigNodeLayout,
    MigPool,
    Plan,
    PlanDocument,
    PlanHorizon,
    TrainingPlacement,
)
from models.tiers import COMMITTED_TIERS, Tier
from models.wording import plural
from planner.outputs.reports.futures import outcome_lines
from planner.outputs.reports.kit import (
    DASH,
    IDLE_SERIES,
    TIER_COLORS,
    TIER_ORDER,
    Table,
    apportion,
    chart_div,
    fmt_num,
    fmt_pct,
    fmt_rate,
    fmt_sig,
    fmt_usd,
    iso_time,
    jinja_environment,
    money_column,
    round_half_up,
    unserved_table,
)

__all__ = ["render_html", "render_markdown", "write_reports"]

#: A job with more runs than this is "repeated": one summary row, full per-run table collapsed.
REPEATED_JOB_MIN_RUNS = 4
#: Horizons with more periods than this (and periods shorter than a day) are charted per day.
DAILY_RESAMPLE_MIN_PERIODS = 744
#: Parts and totals that differ by more than this many dollars trigger a reconciliation warning.
RECONCILE_TOLERANCE_USD = 1.0


# --------------------------------------------------------------------------------------------
# Tables: one neutral structure rendered by both templates
# --------------------------------------------------------------------------------------------


@dataclass
class CostBreakdown:
    title: str
    key_name: str
    table: Table
    warning: str | None


@dataclass
class RunGroup:
    """The per-run tables of one repeated job (collapsed in html, in the appendix in md)."""

    job: str
    runs: int
    training: Table
    spot: Table | None


def _cost_breakdown(
    title: str,
    key_name: str,
    parts: Mapping[str, float] | Mapping[Tier, float],
    total_usd: float,
    order: Iterable[str] | None = None,
) -> CostBreakdown:
    """A cost table with share and a total row that reconciles with ``costs.total_usd``.

    When the parts sum to the plan total (within $1) the total row shows the plan total and the
    rows are apportioned to add up to it exactly. When they do not, the total row shows the
    sum of the rows (so the table stays internally consistent) and a warning names both numbers.
    """
    items = [(str(k), float(v)) for k, v in parts.items()]
    if order is not None:
        rank = {str(name): i for i, name in enumerate(order)}
        items.sort(key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))
    else:
        items.sort(key=lambda kv: (-kv[1], kv[0]))
    parts_sum = sum(v for _, v in items)
    warning = None
    if abs(parts_sum - total_usd) <= RECONCILE_TOLERANCE_USD:
        shown_total = total_usd
    else:
        shown_total = parts_sum
        warning = (
            f"Warning: the {key_name} rows sum to {fmt_usd(parts_sum)}, but the plan total "
            f"(costs.total_usd) is {fmt_usd(total_usd)}, a difference of "
            f"{fmt_usd(parts_sum - total_usd)}. The plan files disagree; do not use this "
            f"breakdown for chargeback until the plan is regenerated."
        )
    rounded = apportion([v for _, v in items], round_half_up(shown_total))
    denominator = shown_total if shown_total else None
    table = Table([key_name, "cost", "share"], [False, True, True])
    for (name, value), whole in zip(items, rounded, strict=True):
        share = value / denominator if denominator else None
        table.rows.append([name, fmt_usd(whole), fmt_pct(share)])
    table.total = ["Total", fmt_usd(round_half_up(shown_total)), fmt_pct(1.0) if denominator else DASH]
    return CostBreakdown(title, key_name, table, warning)


def _allocations(allocations: pd.DataFrame) -> pd.DataFrame:
    """allocations.csv as the report computes with it. A plan that allocates nothing has a header-only
    allocations.csv, which pandas reads with untyped (object) columns: give the numbers their dtype."""
    if not allocations.empty:
        return allocations
    return allocations.astype({"period": "int64", "nodes": "float64", "gpus": "float64"})


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


def _header(plan: PlanDocument) -> dict[str, Any]:
    hz, solver = plan.horizon, plan.solver
    horizon_items = [
        ("start", iso_time(hz.start)),
        ("hours", fmt_num(hz.hours, 2)),
        ("period hours", fmt_num(hz.period_hours, 2)),
        ("periods", fmt_num(hz.periods)),
    ]
    gap, objective, bound = solver.gap, solver.objective_usd, solver.bound_usd
    grid = solver.training_start_grid_hours
    solver_items = [
        ("solver", solver.name),
        ("status", solver.verdict()),
        ("objective", fmt_usd(objective)),
        ("lower bound", fmt_usd(bound)),
        ("gap", fmt_pct(gap, 2)),
        ("seconds", fmt_num(solver.seconds, 1)),
        ("method", solver.method),
        (
            "aggregated periods / model periods",
            f"{fmt_num(solver.aggregated_periods)} / {fmt_num(solver.model_periods)}",
        ),
        ("training start grid", f"every {fmt_num(grid, 2)} h"),
    ]
    if solver.model_bound_usd is not None:  # the staged method's own bound, valid for its training start grid
        solver_items.append(("model bound (training on its start grid)", fmt_usd(solver.model_bound_usd)))
        solver_items.append(("model gap (what --gap stops on)", fmt_pct(solver.model_gap, 2)))
    if solver.bound_method:
        solver_items.append(("how the lower bound was obtained", solver.bound_method))

    gap_sentence = (
        f"The gap is the distance from the proven lower bound: the solver proved that no "
        f"plan can cost less than {fmt_usd(bound)}, so this plan costs at most "
        f"{fmt_pct(gap, 2)} more than the best possible plan"
        f" (at most {fmt_usd(max(objective - bound, 0.0))} more)."
    )
    model_sentence = None
    if solver.certified_bound_usd is not None:
        model_sentence = (
            "The lower bound holds for the full problem: every hour, every hourly training start, "
            "whole nodes; no plan at all can cost less."
        )
    elif (hz.periods and solver.model_periods < hz.periods) or grid > hz.period_hours:
        model_sentence = (
            "The bound holds for the solver's model (merged periods and/or a coarser grid of "
            "training start times), which is a simplification of the full horizon."
        )
    prices = plan.prices
    assumed = [f"{u.offering} {u.tier}" for u in prices.used if u.basis == "assumed"] if prices else []
    return {
        "scenario": plan.scenario,
        "description": plan.description or plan.inputs.description,
        "created": iso_time(plan.created),
        "prices": None if prices is None else prices.summary[0].upper() + prices.summary[1:],
        "assumed_prices": ", ".join(assumed),
        "schema": plan.schema_,
        "horizon_items": horizon_items,
        "solver_items": solver_items,
        "gap_sentence": gap_sentence,
        "model_sentence": model_sentence,
        "solver_notes": solver.notes,
        "futures": _futures_lines(plan),
    }


def _futures_lines(plan: PlanDocument) -> list[str]:
    """The first screen's figures over the demand futures the purchases were chosen on (issue 41 point 4),
    when the plan was made with ``--futures``."""
    return [] if plan.futures is None else outcome_lines(plan.futures)


def _idle_commitment_cost(plan: PlanDocument) -> float | None:
    """Dollars paid for committed node-hours that ran nothing, from ``utilization.pools``."""
    pools = plan.utilization.pools
    if not pools:
        return None
    rates = _commitment_rates(plan)
    return sum(
        max(pool.committed_node_hours - pool.used_node_hours, 0.0) * rates[offering]
        for offering, pool in pools.items()
        if offering in rates
    )


def _commitment_rates(plan: PlanDocument) -> dict[str, float]:
    """Average $/node-hour per offering over its commitments (1y and 3y may both exist)."""
    cost: dict[str, float] = {}
    hours: dict[str, float] = {}
    for c in plan.commitments:
        if c.usd_per_node_hour:  # an offering without a price for the term is committed at $0
            cost[c.offering] = cost.get(c.offering, 0.0) + c.cost_in_horizon_usd
            hours[c.offering] = hours.get(c.offering, 0.0) + c.cost_in_horizon_usd / c.usd_per_node_hour
    return {o: cost[o] / hours[o] for o in cost if hours[o]}


def _saving_line(label: str, base: float, total: float) -> tuple[str, bool]:
    """``vs LABEL ($X): saves $Y (Z%).`` (or costs MORE), and whether the plan costs more."""
    if base <= 0:
        return f"vs {label} ({fmt_usd(base)}): no savings percentage (baseline is zero).", False
    saving = base - total
    if saving >= 0:
        return f"vs {label} ({fmt_usd(base)}): saves {fmt_usd(saving)} ({fmt_pct(saving / base)}).", False
    return (
        f"vs {label} ({fmt_usd(base)}): costs {fmt_usd(-saving)} MORE (savings {fmt_pct(saving / base)}).",
        True,
    )


def _comparisons(plan: PlanDocument) -> list[tuple[str, float, str | None]]:
    """(label, cost, how) of the headline's comparisons: the best peer and all on-demand; plans written
    before peers existed compare with all on-demand and greedy."""
    baselines = plan.baselines
    on_demand = baselines.peer("all on-demand")
    best = baselines.peer(baselines.best_peer)
    if not baselines.peers:
        return [("all on-demand", baselines.all_on_demand_usd, None), ("greedy", baselines.greedy_usd, None)]
    result: list[tuple[str, float, str | None]] = []
    if best is not None:
        result.append((f"best peer ({best.name})", best.total_usd, best.how))
    result.append(("all on-demand", baselines.all_on_demand_usd, on_demand.how if on_demand else None))
    return result


#: The peer table's "Runs" column: what each usage is (planner/planning/baselines.py, issue 39).
PEER_RUNS = {
    "fleet": "one offering per service (a user can run it)",
    "per_period": "cheapest offering per period (a reference)",
}


def _peer_table(plan: PlanDocument) -> Table | None:
    """Every peer: its cost, what this plan saves against it, what it commits and still owes after."""
    baselines, total = plan.baselines, plan.costs.total_usd
    if not baselines.peers:
        return None
    table = Table(
        ["Peer", "Cost", "Plan saves", "Commitments bought", "Owed after horizon", "Runs"],
        [False, True, True, False, True, False],
    )
    for peer in baselines.peers:
        saving = peer.total_usd - total
        share = f" ({fmt_pct(saving / peer.total_usd)})" if peer.total_usd > 0 else ""
        bought = "; ".join(f"{c.nodes} x {c.offering} {c.term}" for c in peer.commitments) or "none"
        name = f"{peer.name} (best)" if peer.name == baselines.best_peer else peer.name
        owed = fmt_usd(peer.obligation_beyond_horizon_usd)
        runs = PEER_RUNS[peer.usage]
        table.rows.append([name, fmt_usd(peer.total_usd), fmt_usd(saving) + share, bought, owed, runs])
    return table


def _headline(plan: PlanDocument) -> dict[str, Any]:
    total, baselines = plan.costs.total_usd, plan.baselines
    lines: list[dict[str, str | None]] = []
    more_than: list[str] = []
    for label, base, how in _comparisons(plan):
        text, more = _saving_line(label, base, total)
        lines.append({"text": text, "how": how})
        if more:
            more_than.append(label)
    reasons: list[str] = []
    if more_than:
        guaranteed = sum(t.guaranteed_gpus for t in plan.teams.values())
        best = baselines.peer(baselines.best_peer)
        if best is not None and f"best peer ({best.name})" in more_than:
            reasons.append(
                f"{best.name} bills its committed nodes against every non-spot node of their offering each "
                f"hour, training gangs included, the way the clouds bill reservations"
            )
        elif guaranteed:
            reasons.append(
                f"team guarantees keep {plural(guaranteed, 'GPU', thousands=True)} provisioned whether or "
                f"not they are used, while a baseline may pay only for the demand it serves"
            )
        idle = _idle_commitment_cost(plan)
        if idle:
            reasons.append(
                f"commitments are paid whether used or not: {fmt_usd(idle)} of committed "
                f"node-hours run nothing"
            )
        beyond_plan = sum(c.obligation_beyond_horizon_usd for c in plan.commitments)
        if best is not None and best.obligation_beyond_horizon_usd > beyond_plan:
            reasons.append(
                f"{best.name} also owes {fmt_usd(best.obligation_beyond_horizon_usd)} after the horizon "
                f"(this plan: {fmt_usd(beyond_plan)}); the comparison is of horizon costs"
            )
        reasons.append(
            "the baseline may ignore constraints this plan honours (placement groups and "
            "fabric, capacity limits, burst caps, the spot share cap, deadlines)"
        )
    unserved_note = None
    if plan.unserved:
        unserved_note = (
            f"{plural(len(plan.unserved), 'workload item')} {'is' if len(plan.unserved) == 1 else 'are'} "
            "unserved (see below): the comparison is "
            f"between a plan that serves less and baselines that may serve everything."
        )
    beyond = sum(c.obligation_beyond_horizon_usd for c in plan.commitments)
    beyond_line = None
    if beyond > 0:
        beyond_line = (
            f"Beside that horizon cost, the commitments bought oblige {fmt_usd(beyond)} more after the "
            f"horizon ends (terms longer than the {fmt_num(plan.horizon.hours)} h horizon); the savings "
            f"below compare horizon costs."
        )
    return {
        "total": fmt_usd(total),
        "beyond": beyond_line,
        "verdict": f"This plan is {plan.solver.verdict()}: no plan can cost less than "
        f"{fmt_usd(plan.solver.bound_usd)} (details under Plan and solver).",
        "lines": lines,
        "more_than": ", ".join(more_than),
        "reasons": reasons,
        "unserved_note": unserved_note,
        "baseline_notes": baselines.notes,
        "peers": _peer_table(plan),
    }


def _costs(plan: PlanDocument) -> dict[str, Any]:
    costs = plan.costs
    total = costs.total_usd
    breakdowns = [
        _cost_breakdown("Cost by tier", "tier", costs.by_tier, total, order=TIER_ORDER),
        _cost_breakdown("Cost by team", "team", costs.by_team, total),
        _cost_breakdown("Cost by cloud", "cloud", costs.by_cloud, total),
        _cost_breakdown("Cost by workload", "workload", costs.by_workload, total),
    ]
    teams_table = None
    if plan.teams:
        teams_table = Table(
            ["team", "priority", "guaranteed GPUs", "burst GPUs", "peak GPUs", "GPU-hours", "cost"],
            [False, False, True, True, True, True, True],
        )
        names = sorted(plan.teams)
        # Same apportioning as the by-team table, so a team shows the same dollars in both.
        cost_cells, cost_total = money_column(plan.teams[n].cost_usd for n in names)
        for name, cost_cell in zip(names, cost_cells, strict=True):
            t = plan.teams[name]
            teams_table.rows.append(
                [
                    name,
                    t.priority,
                    fmt_num(t.guaranteed_gpus, 1),
                    fmt_num(t.burst_gpus, 1),
                    fmt_num(t.peak_gpus, 1),
                    fmt_num(t.gpu_hours),
                    cost_cell,
                ]
            )
        gpu_hours = sum(t.gpu_hours for t in plan.teams.values())
        teams_table.total = ["Total", "", "", "", "", fmt_num(gpu_hours), cost_total]
    return {"total": fmt_usd(total), "breakdowns": breakdowns, "teams": teams_table, "cash": _cash(plan)}


def _cash(plan: PlanDocument) -> Table | None:
    """Cost and cash per calendar month side by side (issue 38): what the plan costs in a month
    (commitments amortized) and what goes out in it (upfront fees when bought, hourly charges as they run).
    None for a plan written before payment options (schema v1)."""
    months = plan.costs.cash_by_month
    if not months:
        return None
    table = Table(
        ["month", "cost", "upfront fees", "hourly charges", "cash out"], [False, True, True, True, True]
    )
    cost_cells, cost_total = money_column(m.cost_usd for m in months)
    fee_cells, fee_total = money_column(m.upfront_usd for m in months)
    hourly_cells, hourly_total = money_column(m.recurring_usd for m in months)
    cash_cells, cash_total = money_column(m.cash_usd for m in months)
    for m, *cells in zip(months, cost_cells, fee_cells, hourly_cells, cash_cells, strict=True):
        table.rows.append([m.month, *cells])
    table.total = ["Total", cost_total, fee_total, hourly_total, cash_total]
    return table


def _term_cell(c: Commitment) -> str:
    """A purchase's term, with how it is paid when not by the hour (``1y, all upfront``)."""
    return str(c.term) if c.payment == "no-upfront" else f"{c.term}, {c.payment.replace('-', ' ')}"


def _day(value: Any) -> str:
    """A commitment's start or end as a date (``—`` for a plan written before they had times)."""
    return value.strftime("%Y-%m-%d") if value is not None else DASH


def _commitments(plan: PlanDocument, alloc: pd.DataFrame) -> dict[str, Any]:
    """The purchase schedule: what to buy, when, for how long and at what cost; what is held already and
    when it expires; then how the committed pools are used."""
    commitments = [c for c in plan.commitments if not c.existing]
    held = sorted((c for c in plan.commitments if c.existing), key=lambda c: (c.end is None, c.end))
    hz = plan.horizon
    table = None
    beyond_total = None
    if commitments:
        table = Table(
            ["buy on", "offering", "term", "nodes", "until", "$/node-h", "per year", "used",
             "cost in horizon", "obligation beyond horizon"],
            [False, False, False, True, False, True, True, True, True, True],
        )  # fmt: skip
        year_cells, year_total = money_column(c.usd_per_year for c in commitments)
        cost_cells, cost_total = money_column(c.cost_in_horizon_usd for c in commitments)
        beyond_cells, beyond_total = money_column(c.obligation_beyond_horizon_usd for c in commitments)
        for c, year_cell, cost_cell, beyond_cell in zip(
            commitments, year_cells, cost_cells, beyond_cells, strict=True
        ):
            pool = plan.utilization.pools.get(c.offering)
            fraction = (
                c.used_fraction if c.used_fraction is not None else (pool.used_fraction if pool else None)
            )
            table.rows.append(
                [_day(c.start), c.offering, _term_cell(c), fmt_num(c.nodes), _day(c.end),
                 fmt_rate(c.usd_per_node_hour), year_cell, fmt_pct(fraction), cost_cell, beyond_cell]
            )  # fmt: skip
        nodes_sum = sum(c.nodes for c in commitments)
        table.total = ["Total", "", "", fmt_num(nodes_sum), "", "", year_total, "", cost_total, beyond_total]
    held_table = None
    expiring: list[str] = []
    if held:
        held_table = Table(
            [
                "commitment",
                "offering",
                "term",
                "nodes",
                "since",
                "ends",
                "$/node-h",
                "used",
                "cost in horizon",
            ],
            [False, False, False, True, False, False, True, True, True],
        )
        cost_cells, cost_total = money_column(c.cost_in_horizon_usd for c in held)
        for c, cost_cell in zip(held, cost_cells, strict=True):
            held_table.rows.append(
                [c.name, c.offering, str(c.term), fmt_num(c.nodes), _day(c.start), _day(c.end),
                 fmt_rate(c.usd_per_node_hour), fmt_pct(c.used_fraction), cost_cell]
            )  # fmt: skip
            if c.end is not None and c.end < hz.start + timedelta(hours=hz.hours):
                renewals = [
                    b
                    for b in commitments
                    if b.offering == c.offering and b.start is not None and b.start >= c.end
                ]
                then = (
                    f"; the plan buys {renewals[0].nodes} x {renewals[0].term} from {_day(renewals[0].start)}"
                    if renewals
                    else "; the plan does not renew it"
                )
                expiring.append(f"{c.name} ({c.nodes} x {c.offering}) expires on {_day(c.end)}{then}.")
        held_table.total = ["Total", "", "", fmt_num(sum(c.nodes for c in held)), "", "", "", "", cost_total]

    pools = plan.utilization.pools
    pools_table = None
    if pools:
        rates = _commitment_rates(plan)
        # Coverage needs all node-hours per offering, which only allocations.csv has.
        node_hours = alloc.assign(nh=alloc["nodes"] * hz.period_hours)
        all_nh = node_hours.groupby("offering")["nh"].sum().to_dict()
        res_nh = node_hours[node_hours["tier"].isin(COMMITTED_TIERS)].groupby("offering")["nh"].sum()
        res_nh_d = res_nh.to_dict()
        pools_table = Table(
            [
                "offering",
                "committed nodes",
                "committed node-h",
                "used node-h",
                "utilization",
                "idle node-h",
                "idle cost",
                "coverage",
            ],
            [False, True, True, True, True, True, True, True],
        )
        for offering in sorted(pools):
            p = pools[offering]
            idle = max(p.committed_node_hours - p.used_node_hours, 0.0)
            rate = rates.get(offering)
            total_nh = all_nh.get(offering)
            coverage = res_nh_d.get(offering, 0.0) / total_nh if total_nh else None
            pools_table.rows.append(
                [
                    offering,
                    fmt_num(p.committed_nodes),
                    fmt_num(p.committed_node_hours),
                    fmt_num(p.used_node_hours),
                    fmt_pct(p.used_fraction),
                    fmt_num(idle),
                    fmt_usd(idle * rate if rate is not None else None),
                    fmt_pct(coverage),
                ]
            )

    note = None
    reserved_cost = sum(v for k, v in plan.costs.by_tier.items() if k in COMMITTED_TIERS)
    commit_cost = sum(c.cost_in_horizon_usd for c in commitments)
    if commitments and abs(reserved_cost - commit_cost) > RECONCILE_TOLERANCE_USD:
        note = (
            f"Note: the commitments cost {fmt_usd(commit_cost)} in the horizon, while the reserved tiers "
            f"in the cost tables total {fmt_usd(reserved_cost)}."
        )
    return {
        "table": table,
        "held": held_table,
        "expiring": expiring,
        "beyond_total": beyond_total,
        "used_fraction": fmt_pct(plan.utilization.reserved_used_fraction),
        "pools": pools_table,
        "note": note,
    }


#: How the report names each savings-plan kind of plan.json (models/plan.py SavingsPlanCommitment.kind).
SAVINGS_PLAN_KINDS = {
    "savings-plan-compute": "AWS Compute Savings Plan",
    "savings-plan-ec2-instance": "AWS EC2 Instance Savings Plan",
    "savings-plan": "Azure savings plan for compute",
}


def _savings_plans(plan: PlanDocument, alloc: pd.DataFrame) -> dict[str, Any] | None:
    """The savings plans held or bought (issue 38), None when the plan has none: each one's commitment,
    how much of it covered nodes (utilization, as the clouds report it: spent over committed), what the
    usage it covered would have cost on demand and so what it saved, and what it binds after the horizon.
    The committed, spent and obligation figures are plan.json's; the saving is the covered savings_plan
    rows of allocations.csv at the offerings' on-demand rates less what the plan spent on them."""
    if not plan.savings_plans:
        return None
    hours = plan.horizon.period_hours
    rows = alloc[alloc["tier"] == Tier.SAVINGS_PLAN]
    at_on_demand: dict[str, float] = {}
    for sp in plan.savings_plans:
        mine = rows[rows["commitment"] == sp.name]
        at_on_demand[sp.name] = sum(
            float(nodes) * hours * (plan.offerings[str(o)].on_demand_usd_h or 0.0)
            for o, nodes in mine.groupby("offering")["nodes"].sum().items()
        )
    table = Table(
        ["savings plan", "kind", "term", "scope", "$/h", "hours in horizon", "committed", "spent",
         "utilization", "covered usage at on demand", "saved", "obligation beyond horizon"],
        [False, False, False, False, True, True, True, True, True, True, True, True],
    )  # fmt: skip
    plans = plan.savings_plans
    committed, committed_total = money_column(sp.cost_in_horizon_usd for sp in plans)
    spent, spent_total = money_column(sp.spent_usd for sp in plans)
    value, value_total = money_column(at_on_demand[sp.name] for sp in plans)
    saved, saved_total = money_column(at_on_demand[sp.name] - sp.spent_usd for sp in plans)
    beyond, beyond_total = money_column(sp.obligation_beyond_horizon_usd for sp in plans)
    for k, sp in enumerate(plans):
        held_hours = sp.cost_in_horizon_usd / sp.usd_per_hour if sp.usd_per_hour > 0 else 0.0
        utilization = sp.spent_usd / sp.cost_in_horizon_usd if sp.cost_in_horizon_usd > 0 else None
        kind = SAVINGS_PLAN_KINDS.get(sp.kind, sp.kind) + (", held" if sp.existing else ", bought")
        term = str(sp.term)
        if sp.payment != "no-upfront":  # its payment: part or all of the whole commitment at its start
            term += f", {sp.payment.replace('-', ' ')} ({fmt_usd(sp.upfront_usd)} at start)"
        table.rows.append(
            [sp.name, kind, term, sp.scope, fmt_rate(sp.usd_per_hour), fmt_num(held_hours),
             committed[k], spent[k], fmt_pct(utilization), value[k], saved[k], beyond[k]]
        )  # fmt: skip
    cost = sum(sp.cost_in_horizon_usd for sp in plans)
    spent_usd = sum(sp.spent_usd for sp in plans)
    net = sum(at_on_demand.values()) - cost
    overall = fmt_pct(spent_usd / cost if cost > 0 else None)
    table.total = ["Total", "", "", "", "", "", committed_total, spent_total, overall, value_total,
                   saved_total, beyond_total]  # fmt: skip
    unspent = max(cost - spent_usd, 0.0)
    verdict = f"save {fmt_usd(net)} against paying" if net >= 0 else f"cost {fmt_usd(-net)} more than paying"
    summary = (
        f"Each hour a savings plan covers on-demand usage at its own rates, highest discount first, up to "
        f"its commitment; the rest of the commitment is paid unspent ({fmt_usd(unspent)} in the horizon). "
        f"Net of that, the savings plans {verdict} on demand for the usage they covered. They are "
        "bought in the cloud's billing console or Savings Plans API (GCP committed use: gcloud compute "
        "commitments create), not by gpuplan provision or Terraform; the nodes they cover run on demand."
    )
    return {"table": table, "summary": summary}


#: A run's cost_usd is what it pays beyond the commitments it uses (spot or on-demand node-hours); its share
#: of those commitments is in "Cost by workload", so the two differ (issue 42): the header says which it is.
BEYOND_COMMITMENTS = "cost beyond commitments"
TRAINING_HEADERS = [
    "job",
    "run",
    "team",
    "offering",
    "tier",
    "nodes",
    "start",
    "duration h",
    "placement group",
    "fabric",
    "checkpoint min",
    "expected overhead",
    BEYOND_COMMITMENTS,
]
TRAINING_NUMERIC = [False, True, False, False, False, True, False, True, False, False, True, True, True]
SPOT_HEADERS = [
    "job",
    "run",
    "offering",
    "nodes",
    "gang interruptions/h",
    "expected interruptions",
    "checkpoint min",
    "expected overhead",
    BEYOND_COMMITMENTS,
]
SPOT_NUMERIC = [False, True, False, True, True, True, True, True, True]


def tier_cell(t: TrainingPlacement) -> str:
    """A run's tier, or "mixed" with its split when its node-hours are billed on more than one tier."""
    if len(t.tiers) < 2:
        return str(t.tier)
    parts = sorted(t.tiers.items(), key=lambda item: -item[1])
    return "mixed: " + ", ".join(f"{tier} {fmt_pct(share)}" for tier, share in parts)


def _training_row(t: TrainingPlacement, hz: PlanHorizon) -> list[str]:
    return [
        t.job,
        fmt_num(t.run),
        t.team,
        t.offering,
        tier_cell(t),
        fmt_num(t.nodes),
        iso_time(t.start),
        fmt_num(t.periods * hz.period_hours, 1),  # held periods: the expected preemption overhead included
        t.placement_group,
        t.fabric or DASH,
        fmt_num(t.checkpoint_interval_minutes, 1),
        fmt_pct(t.expected_overhead),
        fmt_usd(t.cost_usd),
    ]


def _spot_row(t: TrainingPlacement) -> list[str]:
    return [
        t.job,
        fmt_num(t.run),
        t.offering,
        fmt_num(t.nodes),
        fmt_sig(t.gang_interruptions_per_hour),
        fmt_sig(t.expected_interruptions),
        fmt_num(t.checkpoint_interval_minutes, 1),
        fmt_pct(t.expected_overhead),
        fmt_usd(t.cost_usd),
    ]


def _training(plan: PlanDocument, alloc: pd.DataFrame) -> dict[str, Any]:
    hz = plan.horizon
    runs = sorted(plan.training, key=lambda t: (t.job, t.run))
    by_job: dict[str, list[TrainingPlacement]] = {}
    for t in runs:
        by_job.setdefault(t.job, []).append(t)
    repeated = {job for job, rs in by_job.items() if len(rs) > REPEATED_JOB_MIN_RUNS}

    summary = None
    if repeated:
        summary = Table(
            ["job", "team", "runs", "tiers used", "node-hours", BEYOND_COMMITMENTS],
            [False, False, True, False, True, True],
        )
        job_costs = [sum(t.cost_usd for t in rs) for rs in by_job.values()]
        cost_cells, cost_total = money_column(job_costs)
        for (job, rs), cost_cell in zip(by_job.items(), cost_cells, strict=True):
            tiers: dict[str, int] = {}
            for t in rs:
                kind = "mixed" if len(t.tiers) > 1 else str(t.tier)
                tiers[kind] = tiers.get(kind, 0) + 1
            node_hours = sum(t.nodes * t.periods * hz.period_hours for t in rs)
            summary.rows.append(
                [
                    job,
                    ", ".join(sorted({t.team for t in rs})),
                    fmt_num(len(rs)),
                    ", ".join(f"{k} ×{v}" for k, v in sorted(tiers.items())),
                    fmt_num(node_hours),
                    cost_cell,
                ]
            )
        summary.total = ["Total", "", fmt_num(len(runs)), "", "", cost_total]

    main = Table(TRAINING_HEADERS, TRAINING_NUMERIC)
    main.rows = [_training_row(t, hz) for t in runs if t.job not in repeated]

    spot_runs = [t for t in runs if t.tier == Tier.SPOT]
    spot_main = Table(SPOT_HEADERS, SPOT_NUMERIC)
    spot_main.rows = [_spot_row(t) for t in spot_runs if t.job not in repeated]
    spot_summary = None
    groups: list[RunGroup] = []
    for job in sorted(repeated):
        rs = by_job[job]
        full = Table(TRAINING_HEADERS, TRAINING_NUMERIC, [_training_row(t, hz) for t in rs])
        job_spot = [t for t in rs if t.tier == Tier.SPOT]
        spot_full = Table(SPOT_HEADERS, SPOT_NUMERIC, [_spot_row(t) for t in job_spot]) if job_spot else None
        groups.append(RunGroup(job, len(rs), full, spot_full))
        if job_spot:
            if spot_summary is None:
                spot_summary = Table(
                    [
                        "job",
                        "spot runs",
                        "max gang interruptions/h",
                        "expected interruptions (all runs)",
                        "mean expected overhead",
                    ],
                    [False, True, True, True, True],
                )
            spot_summary.rows.append(
                [
                    job,
                    fmt_num(len(job_spot)),
                    fmt_sig(max(t.gang_interruptions_per_hour for t in job_spot)),
                    fmt_sig(sum(t.expected_interruptions for t in job_spot)),
                    fmt_pct(sum(t.expected_overhead for t in job_spot) / len(job_spot)),
                ]
            )

    # AWS Capacity Blocks bought for gangs (issue 38): the duration sold, the fee paid upfront at its start
    blocks = Table(
        ["job", "run", "offering", "nodes", "start", "hours run", "hours sold", "fee (upfront)"],
        [False, True, False, True, False, True, True, True],
    )
    block_runs = [t for t in runs if t.tier == Tier.CAPACITY_BLOCK]
    for t in block_runs:
        blocks.rows.append(
            [t.job, fmt_num(t.run), t.offering, fmt_num(t.nodes), iso_time(t.start), fmt_num(t.hours, 1),
             fmt_num(t.block_hours or 0), fmt_usd(t.cost_usd)]
        )  # fmt: skip
    if block_runs:
        blocks.total = ["Total", "", "", "", "", "", "", fmt_usd(sum(t.cost_usd for t in block_runs))]

    # GCP flex-start gangs (issue 38): the start delay planned for, the hours held, billed as they run
    flex = Table(
        ["job", "run", "offering", "nodes", "start", "start delay (h)", "hours held", "cost"],
        [False, True, False, True, False, True, True, True],
    )
    flex_runs = [t for t in runs if t.tier == Tier.FLEX_START]
    for t in flex_runs:
        flex.rows.append(
            [t.job, fmt_num(t.run), t.offering, fmt_num(t.nodes), iso_time(t.start),
             fmt_num(t.flex_start_delay_hours or 0, 1), fmt_num(t.held_hours), fmt_usd(t.cost_usd)]
        )  # fmt: skip
    if flex_runs:
        flex.total = ["Total", "", "", "", "", "", "", fmt_usd(sum(t.cost_usd for t in flex_runs))]

    # Spot share of training GPU-hours, measured on allocations.csv (what was actually planned).
    training = alloc[alloc["kind"] == "training"]
    train_gh = float(training["gpus"].sum()) * hz.period_hours
    spot_gh = float(training.loc[training["tier"] == Tier.SPOT, "gpus"].sum()) * hz.period_hours
    share = spot_gh / train_gh if train_gh else None
    cap = plan.inputs.max_spot_share
    share_line = (
        f"Training on spot: {fmt_num(spot_gh)} of {fmt_num(train_gh)} training GPU-hours "
        f"({fmt_pct(share)}), from allocations.csv."
    )
    cap_line = (
        f"Spot share cap (inputs max_spot_share): {fmt_pct(cap)}."
        if cap is not None
        else "No spot share cap in the plan inputs."
    )
    cap_warning = None
    if cap is not None and share is not None and share > cap + 1e-9:
        cap_warning = f"Warning: the spot share {fmt_pct(share)} exceeds the cap {fmt_pct(cap)}."
    return {
        "count": len(runs),
        "summary": summary,
        "main": main,
        "groups": groups,
        "spot_main": spot_main,
        "spot_summary": spot_summary,
        "spot_count": len(spot_runs),
        "blocks": blocks,
        "flex": flex,
        "share_line": share_line,
        "cap_line": cap_line,
        "cap_warning": cap_warning,
    }


def _layout_text(groups: list[MigNodeLayout]) -> str:
    """One node's layout in words: ``5 GPUs: 7 x 1g.10gb; 1 GPU: MIG off``."""
    return "; ".join(
        f"{plural(g.gpus, 'GPU')}: "
        + (
            "MIG off"
            if g.mig_devices is None
            else ", ".join(f"{n} x {name}" for name, n in g.mig_devices.items()) or "no slices"
        )
        for g in groups
    )


def _mig_peak(pool: MigPool) -> str:
    """The nodes carrying each config at the pool's peak, and their layouts."""
    if not pool.configs and pool.node_layout is not None:  # a plan written before schedules
        return f"{fmt_num(pool.nodes_with_config or 0)} x {pool.config} ({_layout_text(pool.node_layout)})"
    layouts = {c.name: c.node_layout for c in pool.configs}
    used = pool.nodes_in(pool.peak_period)
    return ", ".join(f"{fmt_num(n)} x {name} ({_layout_text(layouts[name])})" for name, n in used.items())


def _mig_hours(pool: MigPool, hz: PlanHorizon) -> str:
    """Hours in which some node of the pool carries a MIG config, of the horizon's."""
    periods: set[int] = set()
    for config in pool.configs:
        for entry in config.schedule:
            for start, end in entry.periods:
                periods.update(range(start, end))
    return f"{fmt_num(len(periods) * hz.period_hours)} of {fmt_num(hz.hours)} h"


def _mig(plan: PlanDocument) -> dict[str, Any] | None:
    """The MIG section: per node pool, the peak slice demand, GPUs packed vs per-service vs whole GPUs,
    the configs over the horizon and the nodes carrying them at the peak."""
    mig = plan.mig
    if mig is None or not mig.pools:
        return None
    table = Table(
        ["node pool (offering)", "configs", "peak slices", "GPUs packed", "per-service layouts",
         "one replica per GPU", "saved", "hours with MIG", "nodes at the peak: config (layout of a node)"],
        [False, True, False, True, True, True, True, False, False],
    )  # fmt: skip
    for pool in mig.pools:
        demand = ", ".join(f"{n} x {name}" for name, n in pool.peak_demand.items())
        table.rows.append(
            [
                pool.offering,
                fmt_num(len(pool.configs) or (1 if pool.config else 0)),
                demand or DASH,
                fmt_num(pool.gpus_packed),
                fmt_num(pool.gpus_per_service_layouts),
                fmt_num(pool.gpus_whole_per_replica),
                fmt_num(pool.gpus_whole_per_replica - pool.gpus_packed),
                _mig_hours(pool, plan.horizon) if pool.configs else DASH,
                _mig_peak(pool) or DASH,
            ]
        )
    configs = sum(len(pool.configs) for pool in mig.pools)
    summary = (
        f"Slicing saves {plural(mig.gpus_saved_vs_whole_at_peak, 'GPU', thousands=True)} at the pools' "
        "peaks and "
        f"{fmt_num(mig.gpu_hours_saved_vs_whole)} GPU-hours over the horizon against one replica per "
        "whole GPU. Replicas of different services share GPUs (packed with a cutting-stock model over "
        "the valid MIG layouts, every period); training never shares a GPU. "
        f"{plural(configs, 'node layout', thousands=True)} {'covers' if configs == 1 else 'cover'} every "
        "period's replicas; plan.json's "
        "mig.pools[].configs say on how many nodes each applies in which periods. Apply one with "
        "mig-config.yaml and the node label nvidia.com/mig.config=<config> (all-disabled on the other "
        "nodes)."
    )
    return {"table": table, "summary": summary}


# --------------------------------------------------------------------------------------------
# Charts (html only)
# --------------------------------------------------------------------------------------------


def _time_axis(hz: PlanHorizon, index: pd.Index, daily: bool) -> list[str]:
    """Timestamps for the x axis (ISO strings are compact in the page)."""
    step = timedelta(days=1) if daily else timedelta(hours=hz.period_hours)
    fmt = "%Y-%m-%d" if daily else "%Y-%m-%d %H:%M"
    return [(hz.start + step * int(i)).strftime(fmt) for i in index]


def _x_title(daily: bool) -> str:
    return "date (UTC)" if daily else "time (UTC)"


def _resample(frame: pd.DataFrame, hz: PlanHorizon, how: str) -> tuple[pd.DataFrame, bool]:
    """Per-period frame -> per-day frame (mean or max) for long horizons of sub-daily periods."""
    if hz.periods <= DAILY_RESAMPLE_MIN_PERIODS or hz.period_hours >= 24:
        return frame, False
    day = (frame.index.to_numpy() * hz.period_hours // 24).astype("int64")
    grouped = frame.groupby(day)
    return (grouped.mean() if how == "mean" else grouped.max()), True


def _per_period(alloc: pd.DataFrame, column: str, by: str, hz: PlanHorizon) -> pd.DataFrame:
    """Sum of ``column`` per period (rows) and ``by`` value (columns), zero-filled over the horizon."""
    if alloc.empty:
        return pd.DataFrame(index=pd.RangeIndex(hz.periods))
    table = alloc.pivot_table(index="period", columns=by, values=column, aggfunc="sum", fill_value=0)
    table.columns = [str(c) for c in table.columns]
    return table.reindex(pd.RangeIndex(hz.periods), fill_value=0).astype("float64")


def _idle_reserved(plan: PlanDocument, alloc: pd.DataFrame) -> pd.Series:
    """Committed nodes not used in each period, summed over pools (offering, committed tier), each
    commitment counted in the periods it serves (a plan without windows: the whole horizon)."""
    periods = plan.horizon.periods
    committed: dict[tuple[str, str], pd.Series] = {}
    for c in plan.commitments:
        key = (c.offering, str(c.term.tier))
        nodes = pd.Series(0.0, index=pd.RangeIndex(periods))
        end = periods if c.end_period is None else c.end_period
        nodes.iloc[c.start_period : end] = float(c.nodes)
        committed[key] = committed.get(key, 0.0) + nodes
    idle = pd.Series(0.0, index=pd.RangeIndex(periods))
    if not committed:
        return idle
    reserved = alloc[alloc["tier"].isin(COMMITTED_TIERS)]
    used = (
        reserved.pivot_table(index="period", columns=["offering", "tier"], values="nodes", aggfunc="sum")
        if not reserved.empty
        else pd.DataFrame(index=idle.index)
    )
    used = used.reindex(idle.index, fill_value=0.0).fillna(0.0)
    for key, nodes in committed.items():
        if key not in used.columns:  # a pool that runs nothing at all is idle throughout
            idle = idle + nodes
            continue
        idle = idle + (nodes - used[key]).clip(lower=0.0)
    return idle


def _ordered_tiers(names: Iterable[str]) -> list[str]:
    committed = [t for t in TIER_ORDER if t.committed]
    order = [*committed, IDLE_SERIES, *(t for t in TIER_ORDER if not t.committed)]
    rank = {str(n): i for i, n in enumerate(order)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


def _timeline(plan: PlanDocument) -> Markup | None:
    """The purchase schedule as a timeline: one bar per commitment over the horizon (held ones grey,
    purchases in their tier's colour), its whole term in the hover; None without commitments."""
    import plotly.graph_objects as go  # deferred: only the html needs plotly

    hz = plan.horizon
    first, last = hz.start, hz.start + timedelta(hours=hz.hours)
    dated = [c for c in plan.commitments if c.start is not None and c.end is not None]
    if not dated:
        return None
    fig = go.Figure()
    labels = []
    for c in dated:
        assert c.start is not None and c.end is not None
        label = f"{'held' if c.existing else 'buy'}: {c.nodes} x {c.offering} {c.term}"
        labels.append(label)
        begin, end = max(c.start, first), min(c.end, last)
        colour = "#9aa5b1" if c.existing else TIER_COLORS.get(str(c.term.tier), "#5b6b7f")
        hover = (
            f"{c.name}<br>{plural(c.nodes, 'node')}, {c.term}, {_day(c.start)} to {_day(c.end)}<br>"
            f"{fmt_usd(c.cost_in_horizon_usd)} in the horizon"
            + (
                f", {fmt_usd(c.obligation_beyond_horizon_usd)} after it"
                if c.obligation_beyond_horizon_usd
                else ""
            )
        )
        fig.add_trace(
            go.Bar(
                x=[(end - begin).total_seconds() * 1000],
                base=[begin.isoformat()],
                y=[label],
                orientation="h",
                marker={"color": colour},
                hovertemplate=hover + "<extra></extra>",
                showlegend=False,
            )
        )
    fig.update_layout(
        title="Purchase schedule: what is held and bought, when, over the horizon",
        template="simple_white",
        height=140 + 36 * len(labels),
        margin={"l": 20, "r": 20, "t": 60, "b": 40},
        barmode="overlay",
        xaxis={"type": "date", "range": [first.isoformat(), last.isoformat()], "title": "date (UTC)"},
        yaxis={"autorange": "reversed", "automargin": True},
    )
    return chart_div(fig, "chart-purchase-schedule")


def _charts(plan: PlanDocument, alloc: pd.DataFrame) -> list[Markup]:
    """Four chart divs; plotly.js itself is NOT included here (the page embeds it once)."""
    import plotly.graph_objects as go  # deferred: only the html needs plotly

    hz = plan.horizon
    layout = {
        "template": "simple_white",
        "height": 420,
        "margin": {"l": 70, "r": 20, "t": 60, "b": 60},
        "hovermode": "x unified",
        "legend": {"orientation": "h", "y": -0.2},
    }
    unit = f"{fmt_num(hz.period_hours, 2)}-hour period"

    # (a) nodes per tier over time, plus committed-but-idle reserved nodes.
    nodes = _per_period(alloc, "nodes", "tier", hz)
    nodes[IDLE_SERIES] = _idle_reserved(plan, alloc).to_numpy()
    if not nodes[IDLE_SERIES].any():
        nodes = nodes.drop(columns=[IDLE_SERIES])
    nodes, daily = _resample(nodes, hz, "mean")
    x = _time_axis(hz, nodes.index, daily)
    fig_a = go.Figure()
    for tier in _ordered_tiers(nodes.columns):
        fig_a.add_trace(
            go.Scatter(
                x=x,
                y=nodes[tier].round(3).tolist(),
                name=tier,
                mode="lines",
                stackgroup="nodes",
                line={"width": 0.5, "shape": "linear" if daily else "hv"},
                fillcolor=TIER_COLORS.get(tier),
                marker={"color": TIER_COLORS.get(tier)},
            )
        )
    title_a = (
        "Node-hours per tier over time (daily mean of " + unit + "s)"
        if daily
        else "Node-hours per tier over time (per " + unit + ")"
    )
    fig_a.update_layout(
        title=title_a,
        xaxis_title=_x_title(daily),
        yaxis_title="nodes in use (node-hours per hour)",
        **layout,
    )

    # (b), (c) cost bars straight from costs (the same numbers as the tables).
    total = plan.costs.total_usd

    def bar(
        by: Mapping[str, float] | Mapping[Tier, float], title: str, xlabel: str, by_tier: bool
    ) -> go.Figure:
        parts = {str(k): v for k, v in by.items()}
        names = _ordered_tiers(parts) if by_tier else sorted(parts, key=lambda n: -parts[n])
        values = [parts[n] for n in names]
        # Label bars with the very dollars the cost tables show (same apportioning).
        shown = {row[0]: row[1] for row in _cost_breakdown("", "", parts, total).table.rows}
        labels = [shown[n] for n in names]
        colors = [TIER_COLORS.get(n, "#5b6b7f") for n in names] if by_tier else "#5b6b7f"
        fig = go.Figure(
            go.Bar(
                x=names,
                y=values,
                text=labels,
                textposition="outside",
                marker={"color": colors},
                hovertemplate="%{x}: %{text}<extra></extra>",
            )
        )
        fig.update_layout(
            title=title,
            xaxis_title=xlabel,
            yaxis_title="cost in horizon (USD)",
            yaxis_tickprefix="$",
            yaxis_tickformat=",.0f",
            **{**layout, "hovermode": "closest"},
        )
        return fig

    fig_b = bar(plan.costs.by_tier, "Cost by tier (USD, whole horizon)", "tier", True)
    fig_c = bar(plan.costs.by_team, "Cost by team (USD, whole horizon)", "team", False)

    # (d) GPUs per team over time (daily max keeps the peaks that a mean would hide).
    gpus = _per_period(alloc, "gpus", "team", hz)
    gpus, daily_d = _resample(gpus, hz, "max")
    xd = _time_axis(hz, gpus.index, daily_d)
    fig_d = go.Figure()
    for team in sorted(gpus.columns):
        fig_d.add_trace(
            go.Scatter(
                x=xd,
                y=gpus[team].round(3).tolist(),
                name=team,
                mode="lines",
                line={"shape": "linear" if daily_d else "hv"},
            )
        )
    title_d = (
        "GPUs per team over time (daily max of " + unit + "s)"
        if daily_d
        else "GPUs per team over time (per " + unit + ")"
    )
    fig_d.update_layout(
        title=title_d,
        xaxis_title=_x_title(daily_d),
        yaxis_title="GPUs allocated",
        **layout,
    )

    return [
        chart_div(fig, f"chart-{name}")
        for name, fig in (
            ("nodes-per-tier", fig_a),
            ("cost-by-tier", fig_b),
            ("cost-by-team", fig_c),
            ("gpus-per-team", fig_d),
        )
    ]


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


class _Verbatim(str):
    """Text report.md prints as it is: the scenario echo, inside a code fence (no HTML there)."""

    __slots__ = ()


def _md_text(value: Any) -> Any:
    """Every value report.md prints, with ``& < >`` as entities: names users write (scenario, teams,
    workloads, a description) may hold HTML, and Markdown renderers pass raw HTML through (report.html
    autoescapes)."""
    if isinstance(value, _Verbatim) or not isinstance(value, str):
        return value
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# Markdown keeps every newline (no trim_blocks); render_markdown then collapses runs of blank lines.
_MD_ENV = jinja_environment(autoescape=False, trim=False)
_MD_ENV.finalize = _md_text
_MD = _MD_ENV.get_template("plan.md.j2")
_HTML = jinja_environment(autoescape=True, trim=True).get_template("plan.html.j2")


def _context(plan: PlanDocument, alloc: pd.DataFrame) -> dict[str, Any]:
    return {
        "h": _header(plan),
        "head": _headline(plan),
        "costs": _costs(plan),
        "com": _commitments(plan, alloc),
        "sp": _savings_plans(plan, alloc),
        "tr": _training(plan, alloc),
        "unserved": unserved_table(plan.unserved),
        "mig": _mig(plan),
        # The echo as plan.json has it (fields the file leaves out stay out).
        "inputs_json": json.dumps(plan.inputs.model_dump(mode="json", exclude_unset=True), indent=2),
    }


def render_markdown(plan: PlanDocument, allocations: pd.DataFrame) -> str:
    """The report as Markdown: the same sections as the html, no charts, repeated runs in an Appendix."""
    context = _context(plan, _allocations(allocations))
    echo = context["inputs_json"]
    # a fence longer than any backtick run in the echo, so no name can close it
    longest = max((len(run) for run in re.findall(r"`+", echo)), default=0)
    context["inputs_json"] = _Verbatim(echo)
    context["fence"] = _Verbatim("`" * max(3, longest + 1))
    text = _MD.render(**context)
    # Collapse the blank-line runs that optional sections leave behind (a table never contains one).
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n") + "\n"


def render_html(plan: PlanDocument, allocations: pd.DataFrame) -> str:
    """The report as ONE self-contained html page (plotly.js inline once, no external fetch)."""
    from plotly.offline import get_plotlyjs

    alloc = _allocations(allocations)
    return _HTML.render(
        **_context(plan, alloc),
        charts=_charts(plan, alloc),
        timeline=_timeline(plan),
        plotlyjs=Markup(get_plotlyjs()),
    )


def write_reports(plan_dir: str | Path) -> tuple[Path, Path]:
    """Read DIR/plan.json and DIR/allocations.csv, write DIR/report.md and DIR/report.html.

    Returns the paths ``(report.md, report.html)``. The directory is read through ``Plan.read``, which
    raises ``InputError`` (naming the file and field) when a plan file is missing, unreadable or not
    the contract, or when its files do not belong together (a cut or foreign allocations.csv), so the
    CLI can print one line instead of a traceback. Nothing is written then.
    """
    plan_dir = Path(plan_dir)
    plan = Plan.read(plan_dir)
    md_path, html_path = plan_dir / "report.md", plan_dir / "report.html"
    md_path.write_text(render_markdown(plan.document, plan.allocations), encoding="utf-8")
    html_path.write_text(render_html(plan.document, plan.allocations), encoding="utf-8")
    return md_path, html_path
