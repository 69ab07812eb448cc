"""Human-readable plan reports: ``report.md`` and ``report.html`` from a plan directory.

The report reads ONLY the plan files (``plan.json`` and ``allocations.csv``, see
``plan-contract.md``), never solver internals, so what it shows is exactly what Terraform, the
daemon and the users' own tools see. Every field beyond contract v1 is treated as optional: a
plan written by an older or simpler planner still renders, with "—" where a number is unknown.

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
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from markupsafe import Markup

from models.errors import InputError
from models.plan import COMMITTED_TIERS
from planner.reports.kit import (
    DASH,
    IDLE_SERIES,
    TIER_COLORS,
    TIER_ORDER,
    Table,
    apportion,
    fmt_num,
    fmt_pct,
    fmt_rate,
    fmt_sig,
    fmt_usd,
    iso_time,
    jinja_environment,
    money_column,
    parse_time,
    round_half_up,
)

__all__ = ["render_html", "render_markdown", "write_reports"]

#: A job with more runs than this is "repeated": one summary row, full per-run table collapsed.
REPEATED_JOB_MIN_RUNS = 4
#: Horizons with more periods than this (and periods shorter than a day) are charted per day.
DAILY_RESAMPLE_MIN_PERIODS = 744
#: Parts and totals that differ by more than this many dollars trigger a reconciliation warning.
RECONCILE_TOLERANCE_USD = 1.0
ALLOCATION_COLUMNS = ("period", "offering", "tier", "workload", "kind", "team", "nodes", "gpus")


def _num(value: Any) -> float | None:  # transitional: goes when the report takes the typed PlanDocument
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None



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
    parts: Mapping[str, Any],
    total_usd: float | None,
    order: Iterable[str] | None = None,
) -> CostBreakdown:
    """A cost table with share and a total row that reconciles with ``costs.total_usd``.

    When the parts sum to the plan total (within $1) the total row shows the plan total and the
    rows are apportioned to add up to it exactly. When they do not, the total row shows the
    sum of the rows (so the table stays internally consistent) and a warning names both numbers.
    """
    items = [(str(k), _num(v) or 0.0) for k, v in parts.items()]
    if order is not None:
        rank = {name: i for i, name in enumerate(order)}
        items.sort(key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))
    else:
        items.sort(key=lambda kv: (-kv[1], kv[0]))
    parts_sum = sum(v for _, v in items)
    warning = None
    if total_usd is None:
        shown_total = parts_sum
    elif abs(parts_sum - total_usd) <= RECONCILE_TOLERANCE_USD:
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


# --------------------------------------------------------------------------------------------
# Plan access helpers (every addition to contract v1 is optional)
# --------------------------------------------------------------------------------------------


@dataclass
class _Horizon:
    start: datetime | None
    hours: float | None
    period_hours: float
    periods: int

    def period_start(self, period: int) -> datetime | None:
        return None if self.start is None else self.start + timedelta(hours=period * self.period_hours)


def _horizon(plan: Mapping[str, Any], allocations: pd.DataFrame) -> _Horizon:
    h = plan.get("horizon") or {}
    period_hours = _num(h.get("period_hours")) or 1.0
    hours = _num(h.get("hours"))
    periods = _num(h.get("periods"))
    if periods is None and hours is not None:
        periods = math.ceil(hours / period_hours)
    if not allocations.empty:
        periods = max(periods or 0, int(allocations["period"].max()) + 1)
    return _Horizon(parse_time(h.get("start")), hours, period_hours, int(periods or 0))


def _normalize_allocations(allocations: pd.DataFrame | None) -> pd.DataFrame:
    """Typed copy with every contract column present, so an empty or partial frame still renders."""
    df = pd.DataFrame() if allocations is None else allocations.copy()
    for col in ALLOCATION_COLUMNS:
        if col not in df.columns:
            df[col] = pd.Series(dtype="float64" if col in ("period", "nodes", "gpus") else "object")
    for col in ("period", "nodes", "gpus"):
        df[col] = pd.to_numeric(df[col], errors="coerce").fillna(0)
    df["period"] = df["period"].astype("int64")
    for col in ("offering", "tier", "workload", "kind", "team"):
        df[col] = df[col].astype("string").fillna("")
    return df


def _inputs(plan: Mapping[str, Any]) -> dict[str, Any]:
    inputs = plan.get("inputs")
    return inputs if isinstance(inputs, dict) else {}


def _max_spot_share(plan: Mapping[str, Any]) -> float | None:
    inputs = _inputs(plan)
    value = _num(inputs.get("max_spot_share"))
    if value is None and isinstance(inputs.get("purchase"), dict):
        value = _num(inputs["purchase"].get("max_spot_share"))
    return value


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str:
    return DASH if value is None or value == "" else str(value)


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


def _header(plan: Mapping[str, Any], hz: _Horizon) -> dict[str, Any]:
    inputs = _inputs(plan)
    solver = _dict(plan.get("solver"))
    horizon = _dict(plan.get("horizon"))
    horizon_items = [
        ("start", _str(horizon.get("start"))),
        ("hours", fmt_num(hz.hours, 2)),
        ("period hours", fmt_num(hz.period_hours, 2)),
        ("periods", fmt_num(hz.periods)),
    ]
    gap = _num(solver.get("gap"))
    objective, bound = _num(solver.get("objective_usd")), _num(solver.get("bound_usd"))
    solver_items = [
        ("solver", _str(solver.get("name"))),
        ("status", _str(solver.get("status"))),
        ("objective", fmt_usd(objective)),
        ("lower bound", fmt_usd(bound)),
        ("gap", fmt_pct(gap, 2)),
        ("seconds", fmt_num(solver.get("seconds"), 1)),
    ]
    if solver.get("method"):
        solver_items.append(("method", str(solver["method"])))
    aggregated = solver.get("aggregated_periods")
    model_periods = solver.get("model_periods")
    if aggregated is not None or model_periods is not None:
        solver_items.append(
            ("aggregated periods / model periods", f"{fmt_num(aggregated)} / {fmt_num(model_periods)}")
        )
    grid = _num(solver.get("training_start_grid_hours"))
    if grid is not None:
        solver_items.append(("training start grid", f"every {fmt_num(grid, 2)} h"))
    model_bound = _num(solver.get("model_bound_usd"))
    if model_bound is not None:  # the staged method's own bound, valid for its training start grid
        solver_items.append(("model bound (training on its start grid)", fmt_usd(model_bound)))
        solver_items.append(("model gap (what --gap stops on)", fmt_pct(_num(solver.get("model_gap")), 2)))
    if solver.get("bound_method"):
        solver_items.append(("how the lower bound was obtained", str(solver["bound_method"])))

    if gap is not None and bound is not None:
        gap_sentence = (
            f"The gap is the distance from the proven lower bound: the solver proved that no "
            f"plan can cost less than {fmt_usd(bound)}, so this plan costs at most "
            f"{fmt_pct(gap, 2)} more than the best possible plan"
        )
        if objective is not None:
            gap_sentence += f" (at most {fmt_usd(max(objective - bound, 0.0))} more)"
        gap_sentence += "."
    elif gap is not None:
        gap_sentence = (
            f"The gap ({fmt_pct(gap, 2)}) is the distance from the proven lower bound: how much "
            f"more this plan may cost than the best possible plan."
        )
    else:
        gap_sentence = (
            "The solver reported no gap, so there is no proof of how far this plan is from "
            "the best possible plan (the gap is the distance from the proven lower bound)."
        )
    model_sentence = None
    mp = _num(model_periods)
    certified = _num(solver.get("certified_bound_usd"))
    if certified is not None:
        model_sentence = (
            "The lower bound holds for the full problem: every hour, every hourly training start, "
            "whole nodes; no plan at all can cost less."
        )
    elif (mp is not None and hz.periods and mp < hz.periods) or (grid is not None and grid > hz.period_hours):
        model_sentence = (
            "The bound holds for the solver's model (merged periods and/or a coarser grid of "
            "training start times), which is a simplification of the full horizon."
        )
    return {
        "scenario": _str(plan.get("scenario") or inputs.get("name")),
        "description": plan.get("description") or inputs.get("description") or "",
        "created": _str(plan.get("created")),
        "schema": _str(plan.get("schema")),
        "horizon_items": horizon_items,
        "solver_items": solver_items,
        "gap_sentence": gap_sentence,
        "model_sentence": model_sentence,
        "solver_notes": [str(n) for n in _list(solver.get("notes"))],
    }


def _idle_commitment_cost(plan: Mapping[str, Any]) -> float | None:
    """Dollars paid for committed node-hours that ran nothing, from ``utilization.pools``."""
    pools = _dict(_dict(plan.get("utilization")).get("pools"))
    if not pools:
        return None
    rates = _commitment_rates(plan)
    idle = 0.0
    for offering, pool in pools.items():
        pool = _dict(pool)
        committed, used = _num(pool.get("committed_node_hours")), _num(pool.get("used_node_hours"))
        rate = rates.get(offering)
        if committed is not None and used is not None and rate is not None:
            idle += max(committed - used, 0.0) * rate
    return idle


def _commitment_rates(plan: Mapping[str, Any]) -> dict[str, float]:
    """Average $/node-hour per offering over its commitments (1y and 3y may both exist)."""
    cost: dict[str, float] = {}
    hours: dict[str, float] = {}
    for c in _list(plan.get("commitments")):
        c = _dict(c)
        rate, in_horizon = _num(c.get("usd_per_node_hour")), _num(c.get("cost_in_horizon_usd"))
        offering = str(c.get("offering"))
        if rate and in_horizon is not None:
            cost[offering] = cost.get(offering, 0.0) + in_horizon
            hours[offering] = hours.get(offering, 0.0) + in_horizon / rate
        elif rate:
            cost.setdefault(offering, rate)
            hours.setdefault(offering, 1.0)
    return {o: cost[o] / hours[o] for o in cost if hours[o]}


def _headline(plan: Mapping[str, Any]) -> dict[str, Any]:
    costs, baselines = _dict(plan.get("costs")), _dict(plan.get("baselines"))
    total = _num(costs.get("total_usd"))
    lines: list[str] = []
    more_than: list[str] = []
    for label, key in (("all on-demand", "all_on_demand_usd"), ("greedy", "greedy_usd")):
        base = _num(baselines.get(key))
        if base is None or total is None:
            lines.append(f"vs {label}: no baseline in the plan.")
            continue
        if base <= 0:
            lines.append(f"vs {label} ({fmt_usd(base)}): no savings percentage (baseline is zero).")
            continue
        saving = base - total
        if saving >= 0:
            lines.append(f"vs {label} ({fmt_usd(base)}): saves {fmt_usd(saving)} ({fmt_pct(saving / base)}).")
        else:
            more_than.append(label)
            lines.append(
                f"vs {label} ({fmt_usd(base)}): costs {fmt_usd(-saving)} MORE "
                f"(savings {fmt_pct(saving / base)})."
            )
    reasons: list[str] = []
    if more_than:
        teams = _dict(plan.get("teams"))
        guaranteed = sum(_num(_dict(t).get("guaranteed_gpus")) or 0.0 for t in teams.values())
        if guaranteed:
            reasons.append(
                f"team guarantees keep {fmt_num(guaranteed)} GPUs provisioned whether or not "
                f"they are used, while a baseline may pay only for the demand it serves"
            )
        idle = _idle_commitment_cost(plan)
        if idle:
            reasons.append(
                f"commitments are paid whether used or not: {fmt_usd(idle)} of committed "
                f"node-hours run nothing"
            )
        reasons.append(
            "the baseline may ignore constraints this plan honours (placement groups and "
            "fabric, capacity limits, the spot share cap, deadlines)"
        )
    unserved = _list(plan.get("unserved"))
    unserved_note = None
    if unserved:
        unserved_note = (
            f"{len(unserved)} workload item(s) are unserved (see below): the comparison is "
            f"between a plan that serves less and baselines that may serve everything."
        )
    return {
        "total": fmt_usd(total),
        "lines": lines,
        "more_than": ", ".join(more_than),
        "reasons": reasons,
        "unserved_note": unserved_note,
        "baseline_notes": [str(n) for n in _list(baselines.get("notes"))],
    }


def _costs(plan: Mapping[str, Any]) -> dict[str, Any]:
    costs = _dict(plan.get("costs"))
    total = _num(costs.get("total_usd"))
    breakdowns = [
        _cost_breakdown("Cost by tier", "tier", _dict(costs.get("by_tier")), total, order=TIER_ORDER),
        _cost_breakdown("Cost by team", "team", _dict(costs.get("by_team")), total),
        _cost_breakdown("Cost by cloud", "cloud", _dict(costs.get("by_cloud")), total),
    ]
    if isinstance(costs.get("by_workload"), dict):
        breakdowns.append(_cost_breakdown("Cost by workload", "workload", costs["by_workload"], total))
    teams = _dict(plan.get("teams"))
    teams_table = None
    if teams:
        teams_table = Table(
            ["team", "priority", "guaranteed GPUs", "burst GPUs", "peak GPUs", "GPU-hours", "cost"],
            [False, False, True, True, True, True, True],
        )
        names = sorted(teams)
        # Same apportioning as the by-team table, so a team shows the same dollars in both.
        cost_cells, cost_total = money_column(_dict(teams[n]).get("cost_usd") for n in names)
        gpu_hours = 0.0
        for name, cost_cell in zip(names, cost_cells, strict=True):
            t = _dict(teams[name])
            gpu_hours += _num(t.get("gpu_hours")) or 0.0
            teams_table.rows.append(
                [
                    name,
                    _str(t.get("priority")),
                    fmt_num(t.get("guaranteed_gpus"), 1),
                    fmt_num(t.get("burst_gpus"), 1),
                    fmt_num(t.get("peak_gpus"), 1),
                    fmt_num(t.get("gpu_hours")),
                    cost_cell,
                ]
            )
        teams_table.total = ["Total", "", "", "", "", fmt_num(gpu_hours), cost_total]
    return {"total": fmt_usd(total), "breakdowns": breakdowns, "teams": teams_table}


def _commitments(plan: Mapping[str, Any], alloc: pd.DataFrame, hz: _Horizon) -> dict[str, Any]:
    commitments = [_dict(c) for c in _list(plan.get("commitments"))]
    table = None
    beyond_total = None
    if commitments:
        has_beyond = any("obligation_beyond_horizon_usd" in c for c in commitments)
        headers = ["offering", "term", "nodes", "$/node-h", "cost in horizon"]
        numeric = [False, False, True, True, True]
        if has_beyond:
            headers.append("obligation beyond horizon")
            numeric.append(True)
        table = Table(headers, numeric)
        cost_cells, cost_total = money_column(c.get("cost_in_horizon_usd") for c in commitments)
        beyond_cells, beyond_sum = money_column(c.get("obligation_beyond_horizon_usd") for c in commitments)
        for i, c in enumerate(commitments):
            row = [
                _str(c.get("offering")),
                _str(c.get("term")),
                fmt_num(c.get("nodes")),
                fmt_rate(c.get("usd_per_node_hour")),
                cost_cells[i],
            ]
            if has_beyond:
                row.append(beyond_cells[i])
            table.rows.append(row)
        nodes_sum = sum(_num(c.get("nodes")) or 0.0 for c in commitments)
        table.total = ["Total", "", fmt_num(nodes_sum), "", cost_total]
        if has_beyond:
            table.total.append(beyond_sum)
            beyond_total = beyond_sum

    utilization = _dict(plan.get("utilization"))
    used_fraction = _num(utilization.get("reserved_used_fraction"))
    pools = _dict(utilization.get("pools"))
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
            p = _dict(pools[offering])
            committed, used = _num(p.get("committed_node_hours")), _num(p.get("used_node_hours"))
            frac = _num(p.get("used_fraction"))
            if frac is None and committed and used is not None:
                frac = used / committed
            idle = max(committed - used, 0.0) if committed is not None and used is not None else None
            rate = rates.get(offering)
            idle_cost = idle * rate if idle is not None and rate is not None else None
            total_nh = all_nh.get(offering)
            coverage = res_nh_d.get(offering, 0.0) / total_nh if total_nh else None
            pools_table.rows.append(
                [
                    offering,
                    fmt_num(p.get("committed_nodes")),
                    fmt_num(committed),
                    fmt_num(used),
                    fmt_pct(frac),
                    fmt_num(idle),
                    fmt_usd(idle_cost),
                    fmt_pct(coverage),
                ]
            )

    note = None
    by_tier = _dict(_dict(plan.get("costs")).get("by_tier"))
    reserved_cost = sum(_num(v) or 0.0 for k, v in by_tier.items() if str(k) in COMMITTED_TIERS)
    commit_cost = sum(_num(c.get("cost_in_horizon_usd")) or 0.0 for c in commitments)
    if commitments and abs(reserved_cost - commit_cost) > RECONCILE_TOLERANCE_USD:
        note = (
            f"Note: the commitments cost {fmt_usd(commit_cost)} in the horizon, while the reserved tiers "
            f"in the cost tables total {fmt_usd(reserved_cost)}."
        )
    return {
        "table": table,
        "beyond_total": beyond_total,
        "used_fraction": fmt_pct(used_fraction) if used_fraction is not None else None,
        "pools": pools_table,
        "note": note,
    }


def _training_row(t: Mapping[str, Any], hz: _Horizon) -> list[str]:
    start = t.get("start")
    if not start:
        sp = _num(t.get("start_period"))
        ts = hz.period_start(int(sp)) if sp is not None else None
        start = iso_time(ts) if ts is not None else (f"period {int(sp)}" if sp is not None else None)
    periods = _num(t.get("periods"))
    duration = periods * hz.period_hours if periods is not None else _num(t.get("hours"))
    return [
        _str(t.get("job")),
        fmt_num(t.get("run")),
        _str(t.get("team")),
        _str(t.get("offering")),
        _str(t.get("tier")),
        fmt_num(t.get("nodes")),
        _str(start),
        fmt_num(duration, 1),
        _str(t.get("placement_group")),
        _str(t.get("fabric")),
        fmt_num(t.get("checkpoint_interval_minutes"), 1),
        fmt_pct(t.get("expected_overhead")),
        fmt_usd(t.get("cost_usd")),
    ]


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
    "cost",
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
    "cost",
]
SPOT_NUMERIC = [False, True, False, True, True, True, True, True, True]


def _spot_row(t: Mapping[str, Any]) -> list[str]:
    return [
        _str(t.get("job")),
        fmt_num(t.get("run")),
        _str(t.get("offering")),
        fmt_num(t.get("nodes")),
        fmt_sig(t.get("gang_interruptions_per_hour")),
        fmt_sig(t.get("expected_interruptions")),
        fmt_num(t.get("checkpoint_interval_minutes"), 1),
        fmt_pct(t.get("expected_overhead")),
        fmt_usd(t.get("cost_usd")),
    ]


def _training(plan: Mapping[str, Any], alloc: pd.DataFrame, hz: _Horizon) -> dict[str, Any]:
    runs = [_dict(t) for t in _list(plan.get("training"))]
    runs.sort(key=lambda t: (str(t.get("job")), _num(t.get("run")) or 0.0))
    by_job: dict[str, list[dict[str, Any]]] = {}
    for t in runs:
        by_job.setdefault(str(t.get("job")), []).append(t)
    repeated = {job for job, rs in by_job.items() if len(rs) > REPEATED_JOB_MIN_RUNS}

    summary = None
    if repeated:
        summary = Table(
            ["job", "team", "runs", "tiers used", "node-hours", "cost"],
            [False, False, True, False, True, True],
        )
        job_costs = [sum(_num(t.get("cost_usd")) or 0.0 for t in rs) for rs in by_job.values()]
        cost_cells, cost_total = money_column(job_costs)
        for (job, rs), cost_cell in zip(by_job.items(), cost_cells, strict=True):
            tiers: dict[str, int] = {}
            for t in rs:
                tiers[str(t.get("tier"))] = tiers.get(str(t.get("tier")), 0) + 1
            node_hours = sum(
                (_num(t.get("nodes")) or 0.0) * (_num(t.get("periods")) or 0.0) * hz.period_hours for t in rs
            )
            teams = sorted({str(t.get("team")) for t in rs})
            summary.rows.append(
                [
                    job,
                    ", ".join(teams),
                    fmt_num(len(rs)),
                    ", ".join(f"{k} ×{v}" for k, v in sorted(tiers.items())),
                    fmt_num(node_hours),
                    cost_cell,
                ]
            )
        summary.total = ["Total", "", fmt_num(len(runs)), "", "", cost_total]

    main = Table(TRAINING_HEADERS, TRAINING_NUMERIC)
    main.rows = [_training_row(t, hz) for t in runs if str(t.get("job")) not in repeated]

    spot_runs = [t for t in runs if t.get("tier") == "spot"]
    spot_main = Table(SPOT_HEADERS, SPOT_NUMERIC)
    spot_main.rows = [_spot_row(t) for t in spot_runs if str(t.get("job")) not in repeated]
    spot_summary = None
    groups: list[RunGroup] = []
    for job in sorted(repeated):
        rs = by_job[job]
        full = Table(TRAINING_HEADERS, TRAINING_NUMERIC, [_training_row(t, hz) for t in rs])
        job_spot = [t for t in rs if t.get("tier") == "spot"]
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
            rates = [r for t in job_spot if (r := _num(t.get("gang_interruptions_per_hour"))) is not None]
            expected = [e for t in job_spot if (e := _num(t.get("expected_interruptions"))) is not None]
            overheads = [o for t in job_spot if (o := _num(t.get("expected_overhead"))) is not None]
            spot_summary.rows.append(
                [
                    job,
                    fmt_num(len(job_spot)),
                    fmt_sig(max(rates)) if rates else DASH,
                    fmt_sig(sum(expected)) if expected else DASH,
                    fmt_pct(sum(overheads) / len(overheads)) if overheads else DASH,
                ]
            )

    # Spot share of training GPU-hours, measured on allocations.csv (what was actually planned).
    training = alloc[alloc["kind"] == "training"]
    train_gh = float(training["gpus"].sum()) * hz.period_hours
    spot_gh = float(training.loc[training["tier"] == "spot", "gpus"].sum()) * hz.period_hours
    share = spot_gh / train_gh if train_gh else None
    cap = _max_spot_share(plan)
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
        "share_line": share_line,
        "cap_line": cap_line,
        "cap_warning": cap_warning,
    }


def _mig(plan: Mapping[str, Any]) -> dict[str, Any] | None:
    """The MIG section: per node pool, the peak slice demand, GPUs packed vs per-service vs whole GPUs."""
    mig = _dict(plan.get("mig"))
    pools = [_dict(p) for p in _list(mig.get("pools"))]
    if not pools:
        return None
    table = Table(
        ["node pool (offering)", "config", "peak slices", "GPUs packed", "per-service layouts",
         "one replica per GPU", "saved", "layout of each node"],
        [False, False, False, True, True, True, True, False],
    )  # fmt: skip
    for pool in pools:
        demand = ", ".join(f"{n} x {name}" for name, n in _dict(pool.get("peak_demand")).items())
        layout = "; ".join(
            f"{_str(g.get('gpus'))} GPU(s): "
            + (", ".join(f"{n} x {name}" for name, n in _dict(g.get("mig_devices")).items()) or "no slices")
            for g in (_dict(x) for x in _list(pool.get("node_layout")))
        )
        packed, whole = _num(pool.get("gpus_packed")), _num(pool.get("gpus_whole_per_replica"))
        table.rows.append(
            [
                _str(pool.get("offering")),
                _str(pool.get("config")),
                demand or DASH,
                fmt_num(packed),
                fmt_num(pool.get("gpus_per_service_layouts")),
                fmt_num(whole),
                fmt_num(whole - packed) if packed is not None and whole is not None else DASH,
                f"{layout} (on {fmt_num(pool.get('nodes_with_config'))} node(s) at the peak)",
            ]
        )
    saved_hours = _num(mig.get("gpu_hours_saved_vs_whole"))
    summary = (
        f"Slicing saves {fmt_num(mig.get('gpus_saved_vs_whole_at_peak'))} GPUs at the pools' peaks and "
        f"{fmt_num(saved_hours)} GPU-hours over the horizon against one replica per whole GPU. "
        "Replicas of different services share GPUs (packed with a cutting-stock model over the valid MIG "
        "layouts); training never shares a GPU. Apply a pool's layout with mig-config.yaml and the node "
        "label nvidia.com/mig.config=<config>."
    )
    return {"table": table, "summary": summary}


def _unserved(plan: Mapping[str, Any]) -> Table | None:
    items = [_dict(u) for u in _list(plan.get("unserved"))]
    if not items:
        return None
    table = Table(
        ["workload", "kind", "team", "run", "unserved", "reason"], [False, False, False, True, True, False]
    )
    for u in items:
        if _num(u.get("gpu_hours")) is not None:
            amount = f"{fmt_num(u.get('gpu_hours'), 1)} GPU-h"
        elif _num(u.get("replica_hours")) is not None:
            amount = f"{fmt_num(u.get('replica_hours'), 1)} replica-h"
        else:
            amount = DASH
        run = fmt_num(u.get("run")) if u.get("run") is not None else DASH
        table.rows.append(
            [
                _str(u.get("workload")),
                _str(u.get("kind")),
                _str(u.get("team")),
                run,
                amount,
                _str(u.get("reason")),
            ]
        )
    return table


# --------------------------------------------------------------------------------------------
# Charts (html only)
# --------------------------------------------------------------------------------------------


def _time_axis(hz: _Horizon, index: pd.Index, daily: bool) -> list[Any]:
    """Timestamps for the x axis (ISO strings are compact in the page); indices if no start."""
    if hz.start is None:
        return [int(i) for i in index]
    step = timedelta(days=1) if daily else timedelta(hours=hz.period_hours)
    fmt = "%Y-%m-%d" if daily else "%Y-%m-%d %H:%M"
    return [(hz.start + step * int(i)).strftime(fmt) for i in index]


def _x_title(hz: _Horizon, daily: bool) -> str:
    if hz.start is not None:
        return "date (UTC)" if daily else "time (UTC)"
    return "day of horizon" if daily else "period"


def _resample(frame: pd.DataFrame, hz: _Horizon, how: str) -> tuple[pd.DataFrame, bool]:
    """Per-period frame -> per-day frame (mean or max) for long horizons of sub-daily periods."""
    if hz.periods <= DAILY_RESAMPLE_MIN_PERIODS or hz.period_hours >= 24:
        return frame, False
    day = (frame.index.to_numpy() * hz.period_hours // 24).astype("int64")
    grouped = frame.groupby(day)
    return (grouped.mean() if how == "mean" else grouped.max()), True


def _per_period(alloc: pd.DataFrame, column: str, by: str, hz: _Horizon) -> pd.DataFrame:
    """Sum of ``column`` per period (rows) and ``by`` value (columns), zero-filled over the horizon."""
    if alloc.empty:
        return pd.DataFrame(index=pd.RangeIndex(hz.periods))
    table = alloc.pivot_table(index="period", columns=by, values=column, aggfunc="sum", fill_value=0)
    table.columns = [str(c) for c in table.columns]
    return table.reindex(pd.RangeIndex(hz.periods), fill_value=0).astype("float64")


def _idle_reserved(plan: Mapping[str, Any], alloc: pd.DataFrame, hz: _Horizon) -> pd.Series:
    """Committed reserved nodes not used in each period, summed over pools (offering, term).

    Assumes each commitment spans the whole horizon (the contract commits "for the horizon").
    """
    committed: dict[tuple[str, str], float] = {}
    for c in _list(plan.get("commitments")):
        c = _dict(c)
        key = (str(c.get("offering")), _term_tier(str(c.get("term"))))
        committed[key] = committed.get(key, 0.0) + (_num(c.get("nodes")) or 0.0)
    idle = pd.Series(0.0, index=pd.RangeIndex(hz.periods))
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
        pool_used = used[key] if key in used.columns else 0.0
        idle = idle + (nodes - pool_used).clip(lower=0.0)
    return idle


def _term_tier(term: str) -> str:
    """The tier a commitment term is paid on: ``1y`` -> ``reserved_1y``; ``owned`` stays ``owned``."""
    return term if term == "owned" else f"reserved_{term}"


def _ordered_tiers(names: Iterable[str]) -> list[str]:
    order = [*TIER_ORDER[:3], IDLE_SERIES, *TIER_ORDER[3:]]
    rank = {n: i for i, n in enumerate(order)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


def _charts(plan: Mapping[str, Any], alloc: pd.DataFrame, hz: _Horizon) -> list[Markup]:
    """Four chart divs; plotly.js itself is NOT included here (the page embeds it once)."""
    import plotly.graph_objects as go  # deferred: only the html needs plotly

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
    nodes[IDLE_SERIES] = _idle_reserved(plan, alloc, hz).to_numpy()
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
        xaxis_title=_x_title(hz, daily),
        yaxis_title="nodes in use (node-hours per hour)",
        **layout,
    )

    # (b), (c) cost bars straight from costs (the same numbers as the tables).
    costs = _dict(plan.get("costs"))
    total = _num(costs.get("total_usd"))

    def bar(parts: Mapping[str, Any], title: str, xlabel: str, order: Iterable[str] | None) -> go.Figure:
        names = list(parts)
        names = _ordered_tiers(names) if order else sorted(names, key=lambda n: -(_num(parts[n]) or 0.0))
        values = [_num(parts[n]) or 0.0 for n in names]
        # Label bars with the very dollars the cost tables show (same apportioning).
        shown = {row[0]: row[1] for row in _cost_breakdown("", "", parts, total).table.rows}
        labels = [shown.get(str(n), fmt_usd(v)) for n, v in zip(names, values, strict=True)]
        colors = [TIER_COLORS.get(n, "#5b6b7f") for n in names] if order else "#5b6b7f"
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

    fig_b = bar(_dict(costs.get("by_tier")), "Cost by tier (USD, whole horizon)", "tier", TIER_ORDER)
    fig_c = bar(_dict(costs.get("by_team")), "Cost by team (USD, whole horizon)", "team", None)

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
        xaxis_title=_x_title(hz, daily_d),
        yaxis_title="GPUs allocated",
        **layout,
    )

    config = {"displaylogo": False, "responsive": True}
    return [
        Markup(fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"chart-{name}", config=config))
        for name, fig in (
            ("nodes-per-tier", fig_a),
            ("cost-by-tier", fig_b),
            ("cost-by-team", fig_c),
            ("gpus-per-team", fig_d),
        )
    ]


# --------------------------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------------------------

# Markdown keeps every newline (no trim_blocks); render_markdown then collapses runs of blank lines.
_MD = jinja_environment(autoescape=False, trim=False).get_template("plan.md.j2")
_HTML = jinja_environment(autoescape=True, trim=True).get_template("plan.html.j2")


def _context(
    plan: Mapping[str, Any], allocations: pd.DataFrame | None
) -> tuple[dict[str, Any], pd.DataFrame, _Horizon]:
    alloc = _normalize_allocations(allocations)
    hz = _horizon(plan, alloc)
    inputs = plan.get("inputs")
    ctx = {
        "h": _header(plan, hz),
        "head": _headline(plan),
        "costs": _costs(plan),
        "com": _commitments(plan, alloc, hz),
        "tr": _training(plan, alloc, hz),
        "unserved": _unserved(plan),
        "mig": _mig(plan),
        "inputs_json": json.dumps(inputs, indent=2, sort_keys=False, default=str) if inputs else "",
    }
    return ctx, alloc, hz


def render_markdown(plan: dict, allocations: pd.DataFrame) -> str:
    """The report as Markdown: the same sections as the html, no charts, repeated runs in an Appendix."""
    ctx, _, _ = _context(plan, allocations)
    text = _MD.render(**ctx)
    # Collapse the blank-line runs that optional sections leave behind (a table never contains one).
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n") + "\n"


def render_html(plan: dict, allocations: pd.DataFrame) -> str:
    """The report as ONE self-contained html page (plotly.js inline once, no external fetch)."""
    from plotly.offline import get_plotlyjs

    ctx, alloc, hz = _context(plan, allocations)
    return _HTML.render(**ctx, charts=_charts(plan, alloc, hz), plotlyjs=Markup(get_plotlyjs()))


def _read_plan(plan_dir: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    plan_path, alloc_path = plan_dir / "plan.json", plan_dir / "allocations.csv"
    for path in (plan_path, alloc_path):
        if not path.is_file():
            raise InputError(path, None, "not found; write a plan first with `gpuplan plan SCENARIO -o DIR`")
    try:
        plan = json.loads(plan_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise InputError(plan_path, where, f"invalid JSON: {exc.msg}") from exc
    if not isinstance(plan, dict):
        raise InputError(plan_path, None, "expected a JSON object at the top level")
    try:
        allocations = pd.read_csv(alloc_path)
    except pd.errors.EmptyDataError:
        allocations = pd.DataFrame(columns=list(ALLOCATION_COLUMNS))
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(alloc_path, None, f"not a readable CSV: {exc}") from exc
    missing = [c for c in ALLOCATION_COLUMNS if c not in allocations.columns]
    if missing:
        raise InputError(alloc_path, "header", f"missing column(s): {', '.join(missing)}")
    return plan, allocations


def write_reports(plan_dir: str | Path) -> tuple[Path, Path]:
    """Read DIR/plan.json and DIR/allocations.csv, write DIR/report.md and DIR/report.html.

    Returns the paths ``(report.md, report.html)``. Raises ``InputError`` (naming the file) when a
    plan file is missing or unreadable, so the CLI can print one line instead of a traceback.
    """
    plan_dir = Path(plan_dir)
    plan, allocations = _read_plan(plan_dir)
    md_path, html_path = plan_dir / "report.md", plan_dir / "report.html"
    md_path.write_text(render_markdown(plan, allocations), encoding="utf-8")
    html_path.write_text(render_html(plan, allocations), encoding="utf-8")
    return md_path, html_path
