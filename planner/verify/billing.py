"""How the plan is billed: the billing rule per (period, offering), capacity caps, commitments' rates and
the cost totals, all recomputed from the rows and the catalog.

Billing rule (how clouds bill a reserved instance, CUD or Azure reservation: it covers any non-spot node
of its offering running in that hour; ``models/billing.py`` states it once): with C committed nodes and N
non-spot nodes in use, committed rows sum to min(N, C) and on-demand rows to max(0, N - C). Commitments
cover first; on-demand pays only for the excess, in whole nodes: where N > C, N is a whole number (rows
carry their share of the whole on-demand nodes, idle part included). Below C, N may be fractional: the
committed nodes are held whole and paid anyway, and rows carry the part they use. Spot nodes S are always
whole.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import numpy as np
import pandas as pd

from models.billing import covered_nodes, on_demand_nodes
from models.catalog import Offering
from models.plan import Commitment
from models.scenario import ExistingCommitment
from models.tiers import TERM_TIER, Term, Tier
from planner.verify.context import EPS, HELD, SPOT, Context, close, term_hours
from planner.verify.findings import Findings, Violation
from planner.verify.payments import bought_rate
from planner.verify.rows import row_examples

__all__ = ["check_billing", "check_commitment_rows", "check_commitments", "check_costs", "node_counts"]


def node_counts(ctx: Context, rows: pd.DataFrame) -> pd.DataFrame:
    """Per (offering, period) with rows: held non-spot nodes N, committed rows, on-demand rows, spot S,
    committed nodes C."""
    key = ["offering", "period"]
    held = rows["capacity"] == HELD
    parts = {
        "N": rows[held].groupby(key)["nodes"].sum(),
        "committed_rows": rows[rows["committed"]].groupby(key)["nodes"].sum(),
        # a savings plan's rows are on-demand nodes it pays for (check_savings_plans re-bills the split)
        "on_demand_rows": rows[rows["tier"].isin([Tier.ON_DEMAND, Tier.SAVINGS_PLAN])]
        .groupby(key)["nodes"]
        .sum(),
        "S": rows[rows["capacity"] == SPOT].groupby(key)["nodes"].sum(),
    }
    frame = pd.DataFrame(parts).fillna(0.0).reset_index()
    committed = np.zeros(len(frame))
    for offering, index in frame.groupby("offering").groups.items():
        series = ctx.committed.get(str(offering))
        if series is not None:
            committed[frame.index.get_indexer(index)] = series[frame.loc[index, "period"].to_numpy()]
    frame["C"] = committed
    return frame


def check_billing(ctx: Context, findings: Findings, rows: pd.DataFrame) -> pd.DataFrame:
    """Whole nodes, commitments first, ``max_nodes``; returns :func:`node_counts` for the packing check."""
    counts = node_counts(ctx, rows)
    n, s, c = counts["N"].to_numpy(), counts["S"].to_numpy(), counts["C"].to_numpy()
    for column, what in (("N", "non-spot"), ("S", "spot")):
        values = counts[column].to_numpy()
        fractional = np.abs(values - np.round(values)) > EPS
        if column == "N":  # inside the commitments the committed nodes are whole already
            fractional &= values > c + EPS
        bad = counts[fractional]
        findings.add_many(
            "fractional-nodes", len(bad),
            row_examples(bad, "fractional-nodes", _held_message(column, what)),
        )  # fmt: skip
    covered, excess = covered_nodes(n, c), on_demand_nodes(n, c)
    wrong = (np.abs(counts["committed_rows"].to_numpy() - covered) > EPS) | (
        np.abs(counts["on_demand_rows"].to_numpy() - excess) > EPS
    )
    bad = counts[wrong]
    findings.add_many(
        "billing-committed-first", len(bad),
        row_examples(
            bad, "billing-committed-first",
            lambda r: f"N={r.N:g} non-spot nodes, C={r.C:g} committed: committed rows {r.committed_rows:g} "
            f"(should be {covered_nodes(r.N, r.C):g}), on-demand rows {r.on_demand_rows:g} "
            f"(should be {on_demand_nodes(r.N, r.C):g})",
        ),
    )  # fmt: skip
    limit = counts["offering"].map({oid: o.max_nodes for oid, o in ctx.offerings.items()}).astype(float)
    held = n + s + np.maximum(0.0, c - n)
    over = counts.assign(held=held, limit=limit)[
        limit.notna().to_numpy() & (held > limit.fillna(np.inf).to_numpy() + EPS)
    ]
    findings.add_many(
        "max-nodes", len(over),
        row_examples(
            over, "max-nodes",
            lambda r: f"{r.held:g} nodes held (non-spot, spot, idle committed); max_nodes {r.limit:g}",
        ),
    )  # fmt: skip
    for offering_id, series in ctx.committed.items():
        offering = ctx.offerings.get(offering_id)
        if (
            offering is not None
            and offering.max_nodes is not None
            and series.max(initial=0) > offering.max_nodes
        ):
            findings.add(
                "max-nodes",
                f"{series.max():g} nodes committed on {offering_id}; max_nodes {offering.max_nodes}",
                offering=offering_id,
            )
    return counts


def _held_message(column: str, what: str) -> Callable[[Any], str]:
    return lambda r: f"{getattr(r, column):g} {what} nodes held"


def check_commitments(ctx: Context, findings: Findings) -> None:
    """Each commitment: held ones exactly as the scenario lists them; purchases on an offering and term
    the scenario may buy, at the catalog's rate, starting at a purchase step; each costed for its hours
    inside the horizon, with what it still binds after it, and serving in the periods its times say."""
    scenario = ctx.scenario
    held = {c.label: (k, c) for k, c in enumerate(scenario.commitments)}
    colocation = scenario.colocation
    seen: set[str] = set()
    steps = purchase_hours(ctx)
    for c in ctx.plan.document.commitments:
        offering = ctx.offerings.get(c.offering)
        where: dict[str, int | str | None] = {"offering": c.offering}
        if offering is None:
            findings.add(
                "unknown-offering",
                f"commitment on {c.offering}: not an offering the scenario may buy",
                **where,
            )
            continue
        if c.existing:
            seen.add(c.name)
            rate = _check_held(ctx, findings, c, held, where)
        else:
            rate = _check_bought(ctx, findings, c, offering, steps, where)
        if rate is not None and not close(c.usd_per_node_hour, rate, rel=1e-9):
            findings.add(
                "commitment-rate",
                f"{c.name or c.term} at ${c.usd_per_node_hour:,.4f}/node-hour; the rate is ${rate:,.4f}",
                **where,
            )
        if c.nodes < 0:
            findings.add("row-identity", f"commitment of {c.nodes} nodes", **where)
        _check_paid(ctx, findings, c, where)
    missing = [label for label in held if label not in seen]
    if colocation is not None and colocation.existing_nodes and "colocation/existing" not in seen:
        missing.append("colocation/existing")
    for label in missing:
        findings.add("existing-commitment", f"{label}: held already, but not in the plan's commitments")


def purchase_hours(ctx: Context) -> set[float]:
    """Hours (from the horizon start) at which a new cloud commitment may start: the first hour, the
    first hour of each calendar quarter or month inside the horizon (``purchase.schedule``, rounded up
    to a period), and where a held commitment ends inside the horizon (a renewal)."""
    horizon = ctx.scenario.horizon
    months = {"horizon": (), "quarterly": (1, 4, 7, 10), "monthly": tuple(range(1, 13))}
    wanted = months[ctx.scenario.purchase.schedule]
    hours = {0.0}
    when = horizon.start.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    while wanted and when < horizon.end:
        when = (when + timedelta(days=32)).replace(day=1)
        if when.month in wanted and when < horizon.end:
            hours.add(math.ceil(horizon.hour_of(when) / ctx.p - 1e-9) * float(ctx.p))
    for c in ctx.plan.document.commitments:
        if c.existing and c.end is not None and 0 < horizon.hour_of(c.end) < horizon.hours:
            hours.add(math.floor(horizon.hour_of(c.end) / ctx.p + 1e-9) * float(ctx.p))
    return hours


def _check_held(
    ctx: Context,
    findings: Findings,
    c: Commitment,
    held: dict[str, tuple[int, ExistingCommitment]],
    where: dict[str, int | str | None],
) -> float | None:
    """A held commitment as the scenario lists it; returns the rate it must carry."""
    scenario = ctx.scenario
    offering = ctx.offerings[c.offering]
    if c.name == "colocation/existing" and scenario.colocation is not None and offering.owned:
        start, end, nodes = scenario.horizon.start, scenario.horizon.end, scenario.colocation.existing_nodes
        listed: tuple[str, Term, int] = (offering.id, Term.OWNED, nodes)
        rate = offering.owned_usd_h
    elif c.name in held:
        _k, entry = held[c.name]
        start, end = entry.start, entry.ends
        listed = (entry.offering, entry.term, entry.nodes)
        rate = entry.usd_per_node_hour
        if rate is None:
            rate = (
                offering.on_demand_usd_h
                if entry.term == Term.RESERVATION
                else offering.price(TERM_TIER[entry.term])
            )
    else:
        findings.add(
            "existing-commitment",
            f"{c.name!r}: marked existing, but the scenario holds no such commitment",
            **where,
        )
        return None
    if (c.offering, c.term, c.nodes) != listed or c.start != start or c.end != end:
        findings.add(
            "existing-commitment",
            f"{c.name}: {c.nodes} nodes of {c.offering} on {c.term}, {c.start} to {c.end}; the scenario "
            f"holds {listed[2]} of {listed[0]} on {listed[1]}, {start} to {end}",
            **where,
        )
    return rate


def _check_bought(
    ctx: Context,
    findings: Findings,
    c: Commitment,
    offering: Offering,
    steps: set[float],
    where: dict[str, int | str | None],
) -> float | None:
    """A purchase: a term the scenario may buy here, starting at a purchase step, ending after its term;
    returns the catalog's rate."""
    scenario = ctx.scenario
    rate = bought_rate(ctx, findings, c, offering, where)
    allowed = (
        offering.owned if c.term == Term.OWNED else c.term in scenario.purchase.terms and not offering.owned
    )
    if rate is None or not allowed:
        findings.add(
            "tier-unavailable",
            f"{c.nodes} nodes on {c.term}: {c.offering} is not sold on that term here",
            **where,
        )
        return None
    if c.start is None or c.end is None:
        return rate  # a plan written before purchases had times: bought at the start for the horizon
    begins = scenario.horizon.hour_of(c.start)
    on_step = begins == 0.0 if c.term == Term.OWNED else any(abs(begins - h) < 1e-6 for h in steps)
    length = term_hours(scenario, c.term)
    if not on_step or not close(scenario.horizon.hour_of(c.end) - begins, length, abs_=1e-6):
        findings.add(
            "commitment-start",
            f"{c.name or c.term}: starts {c.start.isoformat()}, ends {c.end.isoformat()}; purchases start at "
            f"a purchase step ({scenario.purchase.schedule}) and last their term ({length:g} h)",
            **where,
        )
    return rate


def _check_paid(ctx: Context, findings: Findings, c: Commitment, where: dict[str, int | str | None]) -> None:
    """Cost: its rate for its hours inside the horizon; obligation: for its hours after it; and the
    periods it says it serves in are the ones its times give."""
    horizon = ctx.scenario.horizon
    hours = float(horizon.hours)
    if c.start is None or c.end is None:  # a plan written before commitments had times
        begins, ends = 0.0, term_hours(ctx.scenario, c.term)
    else:
        begins, ends = horizon.hour_of(c.start), horizon.hour_of(c.end)
    inside = max(0.0, min(ends, hours) - max(begins, 0.0))
    cost = c.nodes * c.usd_per_node_hour * inside
    if not close(c.cost_in_horizon_usd, cost, rel=1e-9, abs_=1e-4):
        findings.add(
            "commitment-cost",
            f"{c.name or c.term}: cost_in_horizon_usd ${c.cost_in_horizon_usd:,.2f}, expected ${cost:,.2f} "
            f"({c.nodes} x ${c.usd_per_node_hour:,.4f} x {inside:g} h)",
            **where,
        )
    owed = c.nodes * c.usd_per_node_hour * max(0.0, ends - max(hours, begins))
    if not close(c.obligation_beyond_horizon_usd, owed, rel=1e-9, abs_=1e-4):
        findings.add(
            "obligation",
            f"{c.name or c.term}: obligation_beyond_horizon_usd ${c.obligation_beyond_horizon_usd:,.2f}, "
            f"expected ${owed:,.2f}",
            **where,
        )
    first, end = ctx.window(c)
    if c.end_period is not None and (c.start_period, c.end_period) != (first, end):
        findings.add(
            "commitment-window",
            f"{c.name or c.term}: serves periods {c.start_period}-{c.end_period}; its times give "
            f"{first}-{end}",
            **where,
        )


def check_commitment_rows(ctx: Context, findings: Findings, rows: pd.DataFrame) -> None:
    """Rows on a committed tier name a commitment of the plan on their offering and tier that serves in
    their period, other rows name none, and no commitment carries more nodes in a period than it has."""
    if "commitment" not in ctx.plan.allocations or ctx.plan.allocations["commitment"].isna().all():
        return  # a plan written before rows named their commitment
    frame = rows
    known = pd.DataFrame(
        [
            (c.name, c.offering, str(TERM_TIER[c.term]), *ctx.window(c), float(c.nodes))
            for c in ctx.plan.document.commitments
        ],
        columns=["commitment", "c_offering", "c_tier", "c_first", "c_end", "limit"],
    ).drop_duplicates("commitment")
    frame = frame.merge(known, on="commitment", how="left")
    frame[["c_first", "c_end"]] = frame[["c_first", "c_end"]].fillna(-1.0)  # names no commitment: fits none
    committed = frame["committed"].to_numpy()
    fits = (
        (frame["c_offering"] == frame["offering"])
        & (frame["c_tier"] == frame["tier"])
        & (frame["period"] >= frame["c_first"])
        & (frame["period"] < frame["c_end"])
    ).to_numpy()
    # a committed tier with no commitment of it on the offering at all is tier-uncommitted's to report
    pairs = pd.MultiIndex.from_arrays([known["c_offering"], known["c_tier"]])
    held = pd.MultiIndex.from_arrays([frame["offering"], frame["tier"]]).isin(pairs)
    plan_rows = (frame["tier"] == Tier.SAVINGS_PLAN).to_numpy()  # check_savings_plans' to judge
    bad = np.where(committed, held & ~fits, (frame["commitment"] != "").to_numpy() & ~plan_rows)
    examples = row_examples(
        frame[bad], "commitment-row",
        lambda r: f"{r.workload} on {r.tier} of {r.offering} in period {r.period:g} names commitment "
        f"{r.commitment!r}: not a commitment of that offering and tier serving then",
        findings.examples,
    )  # fmt: skip
    findings.add_many("commitment-row", int(bad.sum()), examples)
    load = frame[committed & ~bad].groupby(["commitment", "period"])["nodes"].sum().reset_index()
    load = load.merge(known[["commitment", "limit"]], on="commitment")
    over = load[load["nodes"] > load["limit"] + 1e-6]
    examples = row_examples(
        over, "commitment-row",
        lambda r: f"commitment {r.commitment} carries {r.nodes:g} nodes in period {r.period:g}; "
        f"it has {r.limit:g}",
        findings.examples,
    )  # fmt: skip
    findings.add_many("commitment-row", len(over), examples)


def check_costs(ctx: Context, findings: Findings, rows: pd.DataFrame) -> None:
    """``costs`` recomputed from the rows as written and the commitments: total, by tier, by cloud; the
    chargeback to teams and workloads is the plan's choice, but it must add up to the total."""
    doc = ctx.plan.document
    commitments = doc.commitments
    plans = doc.savings_plans
    total = (
        float(rows["cost_usd"].sum())
        + sum(c.cost_in_horizon_usd for c in commitments)
        + sum(plan.cost_in_horizon_usd for plan in plans)
    )
    if not close(doc.costs.total_usd, total, rel=1e-6, abs_=0.01):
        findings.add(
            "cost-total", f"costs.total_usd ${doc.costs.total_usd:,.2f}; rows + commitments ${total:,.2f}"
        )
    by_tier: dict[str, float] = defaultdict(float)
    by_cloud: dict[str, float] = defaultdict(float)
    for tier, value in rows.groupby("tier")["cost_usd"].sum().items():
        by_tier[str(tier)] += float(value)
    cloud_of = {oid: o.cloud for oid, o in ctx.offerings.items()}
    for cloud, value in rows.groupby(rows["offering"].map(cloud_of))["cost_usd"].sum().items():
        by_cloud[str(cloud)] += float(value)
    for c in commitments:
        by_tier[str(TERM_TIER[c.term])] += c.cost_in_horizon_usd
        by_cloud[cloud_of.get(c.offering, "?")] += c.cost_in_horizon_usd
    for plan in plans:  # an AWS plan (Compute, EC2 Instance) or Azure's
        by_tier[str(Tier.SAVINGS_PLAN)] += plan.cost_in_horizon_usd
        by_cloud["azure" if plan.kind == "savings-plan" else "aws"] += plan.cost_in_horizon_usd
    for kind, plan_values, mine in (
        ("cost-by-tier", {str(k): v for k, v in doc.costs.by_tier.items()}, by_tier),
        ("cost-by-cloud", doc.costs.by_cloud, by_cloud),
    ):
        for key in sorted(set(plan_values) | set(mine)):
            theirs, ours = plan_values.get(key, 0.0), mine.get(key, 0.0)
            if not close(theirs, ours, rel=1e-6, abs_=0.01):
                findings.add_many(
                    kind,
                    1,
                    [Violation(kind=kind, message=f"{key}: plan ${theirs:,.2f}, recomputed ${ours:,.2f}")],
                )
    for name, part in (("by_team", doc.costs.by_team), ("by_workload", doc.costs.by_workload)):
        if not close(sum(part.values()), total, rel=1e-6, abs_=0.01):
            findings.add(
                "cost-breakdown",
                f"costs.{name} sums to ${sum(part.values()):,.2f}; the total is ${total:,.2f}",
            )
