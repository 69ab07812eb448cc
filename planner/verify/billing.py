"""How the plan is billed: the billing rule per (period, offering), capacity caps, commitments' rates and
the cost totals, all recomputed from the rows and the catalog.

Billing rule (how clouds bill a reserved instance, CUD or Azure reservation: it covers any non-spot node
of its offering running in that hour): with C committed nodes and N non-spot nodes in use, committed rows
sum to min(N, C) and on-demand rows to max(0, N - C). Commitments cover first; on-demand pays only for
the excess, in whole nodes: where N > C, N is a whole number (rows carry their share of the whole
on-demand nodes, idle part included). Below C, N may be fractional: the committed nodes are held whole
and paid anyway, and rows carry the part they use. Spot nodes S are always whole.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from models.tiers import TERM_TIER, Term, Tier
from planner.verify.context import EPS, HELD, SPOT, Context, close, term_hours
from planner.verify.findings import Findings, Violation
from planner.verify.rows import row_examples

__all__ = ["check_billing", "check_commitments", "check_costs", "node_counts"]


def node_counts(ctx: Context, rows: pd.DataFrame) -> pd.DataFrame:
    """Per (offering, period) with rows: held non-spot nodes N, committed rows, on-demand rows, spot S,
    committed nodes C."""
    key = ["offering", "period"]
    held = rows["capacity"] == HELD
    parts = {
        "N": rows[held].groupby(key)["nodes"].sum(),
        "committed_rows": rows[rows["committed"]].groupby(key)["nodes"].sum(),
        "on_demand_rows": rows[rows["tier"] == Tier.ON_DEMAND].groupby(key)["nodes"].sum(),
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
    covered, excess = np.minimum(n, c), np.maximum(0.0, n - c)
    wrong = (np.abs(counts["committed_rows"].to_numpy() - covered) > EPS) | (
        np.abs(counts["on_demand_rows"].to_numpy() - excess) > EPS
    )
    bad = counts[wrong]
    findings.add_many(
        "billing-committed-first", len(bad),
        row_examples(
            bad, "billing-committed-first",
            lambda r: f"N={r.N:g} non-spot nodes, C={r.C:g} committed: committed rows {r.committed_rows:g} "
            f"(should be {min(r.N, r.C):g}), on-demand rows {r.on_demand_rows:g} "
            f"(should be {max(0.0, r.N - r.C):g})",
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
    """Each commitment: an offering and term the scenario may buy, at the catalog's rate, costed for the
    horizon, with what is still owed after it."""
    scenario = ctx.scenario
    hours = scenario.horizon.hours
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
        tier = TERM_TIER[c.term]
        rate = offering.price(tier)
        allowed = (
            offering.owned
            if c.term == Term.OWNED
            else c.term in scenario.purchase.terms and not offering.owned
        )
        if rate is None or not allowed:
            findings.add(
                "tier-unavailable",
                f"{c.nodes} nodes on {c.term}: {c.offering} is not sold on that term here",
                **where,
            )
        elif not close(c.usd_per_node_hour, rate, rel=1e-9):
            findings.add(
                "commitment-rate",
                f"{c.term} at ${c.usd_per_node_hour:,.4f}/node-hour; the catalog's rate is ${rate:,.4f}",
                **where,
            )
        if c.nodes < 0:
            findings.add("row-identity", f"commitment of {c.nodes} nodes", **where)
        cost = c.nodes * c.usd_per_node_hour * hours
        if not close(c.cost_in_horizon_usd, cost, rel=1e-9, abs_=1e-4):
            findings.add(
                "commitment-cost",
                f"{c.term}: cost_in_horizon_usd ${c.cost_in_horizon_usd:,.2f}, expected ${cost:,.2f} "
                f"({c.nodes} x ${c.usd_per_node_hour:,.4f} x {hours} h)",
                **where,
            )
        owed = c.nodes * c.usd_per_node_hour * max(0.0, term_hours(scenario, c.term) - hours)
        if not close(c.obligation_beyond_horizon_usd, owed, rel=1e-9, abs_=1e-4):
            findings.add(
                "obligation",
                f"{c.term}: obligation_beyond_horizon_usd ${c.obligation_beyond_horizon_usd:,.2f}, "
                f"expected ${owed:,.2f}",
                **where,
            )


def check_costs(ctx: Context, findings: Findings, rows: pd.DataFrame) -> None:
    """``costs`` recomputed from the rows as written and the commitments: total, by tier, by cloud; the
    chargeback to teams and workloads is the plan's choice, but it must add up to the total."""
    doc = ctx.plan.document
    commitments = doc.commitments
    total = float(rows["cost_usd"].sum()) + sum(c.cost_in_horizon_usd for c in commitments)
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
