"""Checks one row (or the plan's header) can fail on its own: identity, offering, tier, GPUs, cost, the
delivery of owned nodes, eligibility, spot for latency-critical services and whole replicas.

:func:`check_rows` returns the rows the other checks may rely on: rows with a broken identity or an
offering the scenario cannot buy are reported here and left out there (their numbers mean nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd

from models.tiers import TERM_TIER, Tier
from planner.verify.context import EPS, SPOT, Context, held_savings_plans, replica_shape
from planner.verify.findings import Findings, Violation

__all__ = ["check_header", "check_rows", "row_examples"]


def row_examples(
    frame: pd.DataFrame, kind: str, message: Callable[[Any], str], limit: int = 20
) -> Iterator[Violation]:
    """Violations for the first ``limit`` rows of ``frame`` (itertuples), each located by its row."""
    for row in frame.head(limit).itertuples(index=False):
        period = getattr(row, "period", None)
        yield Violation(
            kind=kind,
            message=message(row),
            period=None if period is None or not np.isfinite(period) else int(period),
            offering=getattr(row, "offering", None),
            workload=getattr(row, "workload", None),
        )


def _report(
    findings: Findings, frame: pd.DataFrame, mask: Any, kind: str, message: Callable[[Any], str]
) -> None:
    bad = frame[np.asarray(mask, dtype=bool)]
    findings.add_many(kind, len(bad), row_examples(bad, kind, message, findings.examples))


def check_header(ctx: Context, findings: Findings) -> None:
    """The plan is a plan of this scenario, over its horizon."""
    doc, horizon = ctx.plan.document, ctx.scenario.horizon
    if doc.scenario != ctx.scenario.name:
        findings.add("plan-header", f"plan.json is for scenario {doc.scenario!r}, not {ctx.scenario.name!r}")
    plan_h = doc.horizon
    mine = (horizon.start, horizon.hours, horizon.period_hours, horizon.periods)
    theirs = (plan_h.start, plan_h.hours, plan_h.period_hours, plan_h.periods)
    if mine != theirs:
        findings.add(
            "plan-header",
            f"plan horizon (start, hours, period_hours, periods) {theirs} differs from the scenario's {mine}",
        )


def check_rows(ctx: Context, findings: Findings) -> pd.DataFrame:
    """Row-level checks; the rows that are fit for the other checks, with ``replicas`` filled."""
    rows = ctx.rows
    scenario = ctx.scenario
    kinds = {s.name: "inference" for s in scenario.inference} | {
        j.name: "training" for j in scenario.training
    }
    teams = {w.name: w.team for w in scenario.workloads}
    tiers = {str(t) for t in Tier}
    period = rows["period"]
    numbers = rows[["nodes", "gpus", "cost_usd"]]
    broken = (
        period.isna()
        | (period != period.round())
        | (period < 0)
        | (period >= ctx.periods)
        | ~rows["tier"].isin(tiers)
        | (rows["workload"].map(kinds) != rows["kind"])
        | (rows["workload"].map(teams) != rows["team"])
        | numbers.isna().any(axis=1)
        | (numbers < -EPS).any(axis=1)
    )
    _report(
        findings, rows, broken, "row-identity",
        lambda r: f"row ({r.period}, {r.offering}, {r.tier}, {r.workload}, {r.kind}, {r.team}): unknown "
        "workload/tier, wrong kind or team, period outside the horizon, or negative/missing numbers",
    )  # fmt: skip
    # rows on a committed tier are one per commitment they use (two 1y purchases of one offering)
    duplicate = (
        rows.duplicated(["period", "offering", "tier", "workload", "commitment"], keep="first") & ~broken
    )
    _report(
        findings,
        rows,
        duplicate,
        "row-identity",
        lambda r: f"duplicate row for ({r.period}, {r.offering}, {r.tier}, {r.workload}, {r.commitment!r})",
    )
    unknown = rows["gpn"].isna() & ~broken
    _report(
        findings, rows, unknown, "unknown-offering",
        lambda r: f"{r.workload} on {r.offering}: not an offering the scenario may buy (clouds, regions, "
        "colocation)",
    )  # fmt: skip
    rows = rows[~broken & ~unknown].copy()
    rows["period"] = rows["period"].astype(np.int64)
    offerings = ctx.offerings

    _report(
        findings, rows, ~np.isclose(rows["gpus"], rows["nodes"] * rows["gpn"], rtol=1e-9, atol=EPS),
        "gpus-column", lambda r: f"{r.gpus:g} GPUs on {r.nodes:g} nodes of {r.gpn:g} GPUs",
    )  # fmt: skip

    # tiers: sold by the offering and allowed by the scenario; committed tiers only where bought
    allowed_terms = {str(TERM_TIER[t]) for t in scenario.purchase.terms}
    # a commitment held already is on its own term, whatever the scenario may buy
    held = {(c.offering, str(TERM_TIER[c.term])) for c in scenario.commitments}

    covered = {oid for plan in held_savings_plans(ctx) for oid in plan.rates} | {
        oid for plan in ctx.plan.document.savings_plans if not plan.existing for oid in plan.rates
    }  # bought plans' rates and starts: check_savings_plans

    def sold(offering_id: str, tier: str) -> bool:
        offering = offerings[offering_id]
        if (offering_id, tier) in held:
            return True
        if tier == Tier.OWNED:
            return offering.owned
        if tier == Tier.CAPACITY_RESERVATION:
            return False  # only held ones: the plan never buys a capacity reservation
        if tier == Tier.SAVINGS_PLAN:  # a plan covers it (which one, and when: check_savings_plans)
            return offering_id in covered
        if tier == Tier.CAPACITY_BLOCK:  # the fee, size and duration: check_blocks
            return scenario.purchase.buys_blocks(offering.cloud) and offering.price(tier) is not None
        if tier == Tier.FLEX_START:  # the run's length and start: check_flex_start
            sells = offering.cloud == "gcp" and offering.price(tier) is not None
            return scenario.purchase.flex_start and sells
        if tier in (Tier.RESERVED_1Y, Tier.RESERVED_3Y) and tier not in allowed_terms:
            return False
        return offering.price(tier) is not None

    pairs = rows[["offering", "tier"]].drop_duplicates()
    sold_of = {(o, t): sold(o, t) for o, t in pairs.itertuples(index=False)}
    not_sold = np.array(
        [not sold_of[(o, t)] for o, t in zip(rows["offering"], rows["tier"], strict=True)], dtype=bool
    )
    _report(
        findings, rows, not_sold, "tier-unavailable", lambda r: f"{r.offering} does not sell {r.tier} here"
    )
    bought = ctx.committed_terms
    uncommitted = rows["committed"].to_numpy() & np.array(
        [t not in bought.get(o, set()) for o, t in zip(rows["offering"], rows["tier"], strict=True)],
        dtype=bool,
    )
    _report(
        findings,
        rows,
        uncommitted,
        "tier-uncommitted",
        lambda r: f"{r.workload} on {r.tier} of {r.offering}, which has no {r.tier} commitment",
    )

    # cost of a row: committed tiers are paid apart (commitments); the rest per node-hour
    price = np.zeros(len(rows))
    for tier in (Tier.ON_DEMAND, Tier.SPOT, Tier.FLEX_START):  # flex-start: per node-hour, as it runs
        mask = (rows["tier"] == tier).to_numpy()
        rate = {oid: o.price(tier) or 0.0 for oid, o in offerings.items()}
        price[mask] = rows["offering"][mask].map(rate).to_numpy(dtype=float)
    expected = rows["nodes"].to_numpy() * price * ctx.p
    # a Capacity Block's rows carry its fee between them (check_blocks re-bills it)
    block = (rows["tier"] == Tier.CAPACITY_BLOCK).to_numpy()
    expected[block] = rows["cost_usd"].to_numpy(dtype=float)[block]
    rows["expected_cost"] = expected
    _report(
        findings, rows, ~np.isclose(rows["cost_usd"], expected, rtol=1e-6, atol=1e-6), "cost-row",
        lambda r: f"{r.workload} on {r.tier} of {r.offering}: cost_usd {r.cost_usd:,.4f}, "
        f"expected {r.expected_cost:,.4f}",
    )  # fmt: skip

    # offerings that sell no on-demand node (owned) serve only where their commitments do
    committed = np.zeros(len(rows))
    only_committed = np.zeros(len(rows), dtype=bool)
    for oid, offering in offerings.items():
        if offering.on_demand_usd_h is None:
            mine = (rows["offering"] == oid).to_numpy()
            only_committed |= mine
            series = ctx.committed.get(oid, np.zeros(ctx.periods))
            committed[mine] = series[
                rows["period"].to_numpy()[mine].astype(np.int64).clip(0, ctx.periods - 1)
            ]
    _report(
        findings, rows, only_committed & (committed <= EPS) & (rows["nodes"] > EPS), "owned-before-delivery",
        lambda r: f"{r.workload} on {r.offering} in a period where none of its nodes is delivered or held",
    )  # fmt: skip
    return _inference_rows(ctx, findings, rows)


def _inference_rows(ctx: Context, findings: Findings, rows: pd.DataFrame) -> pd.DataFrame:
    """Eligibility, spot for latency-critical services and whole replicas; ``replicas`` filled where the
    plan has no column (estimated from nodes, homogeneous), ``shape`` set per inference row."""
    inference = (rows["kind"] == "inference").to_numpy()
    pairs = rows.loc[inference, ["workload", "offering"]].drop_duplicates()
    shapes = {
        (w, o): replica_shape(ctx.services[w], ctx.offerings[o]) for w, o in pairs.itertuples(index=False)
    }
    shape = [
        shapes.get((w, o)) if inf else None
        for w, o, inf in zip(rows["workload"], rows["offering"], inference, strict=True)
    ]
    rows["shape"] = pd.Series(shape, index=rows.index, dtype=object)
    ineligible = inference & np.array([s is None for s in shape], dtype=bool)
    _report(
        findings, rows, ineligible, "ineligible-offering",
        lambda r: f"{r.workload} cannot run on {r.offering} (GPU model, GPUs per replica or memory)",
    )  # fmt: skip
    critical = rows["workload"].map({s.name: s.latency_critical for s in ctx.scenario.inference})
    on_spot = (rows["capacity"] == SPOT).to_numpy() & critical.eq(True).to_numpy(dtype=bool)
    _report(
        findings, rows, inference & on_spot,
        "spot-latency", lambda r: f"latency-critical {r.workload} on spot ({r.offering})",
    )  # fmt: skip

    replicas = rows["replicas"].to_numpy(dtype=float).copy()
    if len(rows) and np.isnan(replicas).all():
        findings.add(
            "missing-replicas-column",
            "allocations.csv has no replicas column (a plan from before it): no integer replicas to check; "
            "demand and packing are checked on replicas estimated as nodes x replicas per node",
        )
        per_node = {key: s.per_node(ctx.offerings[key[1]]) if s else 0.0 for key, s in shapes.items()}
        estimate = np.array(
            [per_node.get((w, o), 0.0) for w, o in zip(rows["workload"], rows["offering"], strict=True)]
        )
        replicas = np.where(inference, rows["nodes"].to_numpy() * estimate, 0.0)
    else:
        fractional = inference & (
            np.isnan(replicas) | (np.abs(replicas - np.round(replicas)) > EPS) | (replicas < -EPS)
        )
        _report(
            findings,
            rows,
            fractional,
            "fractional-replicas",
            lambda r: f"{r.workload} on {r.tier} of {r.offering}: {r.replicas:g} replicas",
        )
        replicas = np.where(np.isnan(replicas), 0.0, replicas)
    rows["replicas"] = np.where(inference, replicas, 0.0)
    return rows
