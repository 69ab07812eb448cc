"""Where a plan's prices come from, in one line and price by price: what a buyer checks before signing.

A plan is only as good as the prices it was solved on. :func:`price_sources` lists every (offering, tier)
price the plan uses (on-demand and spot node-hours from allocations.csv, the purchases' commitment rates,
the savings-plan rates its savings plans covered nodes at), each with its basis (quoted, assumed,
negotiated) and date from the catalog or its terms file, and :func:`price_warnings` says when a decision
rests on an assumed price or one older than :data:`STALE_AFTER_DAYS`.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, cast

from models.catalog import CATALOG_FORMAT, Catalog
from models.plan import PlanDocument, PriceSources, PriceUse
from models.tiers import TERM_TIER, Term, Tier

if TYPE_CHECKING:
    import pandas as pd

    from models.priceterms import PriceTerm

__all__ = ["STALE_AFTER_DAYS", "price_sources", "price_warnings"]

#: A price read longer ago than this is old enough to check before buying on it.
STALE_AFTER_DAYS: Final = 30
_BASES: Final = ("quoted", "negotiated", "assumed", "unstated")
_BOUGHT: Final = (Term.ONE_YEAR, Term.THREE_YEARS)  # terms bought at a catalog price


def price_sources(catalog: Catalog, document: PlanDocument, allocations: pd.DataFrame) -> PriceSources:
    """Every price ``document`` uses, from ``catalog``: on-demand and spot as allocations.csv uses them,
    each commitment the plan buys at its rate (commitments already held and owned servers are priced by the
    scenario, not the catalog), each Capacity Block bought at its rate, and each savings-plan rate a savings
    plan (held or bought) covered nodes at, from the catalog's terms file."""
    hours: dict[tuple[str, Tier], float] = defaultdict(float)
    period = document.horizon.period_hours
    if len(allocations):
        paid_as_run = [Tier.ON_DEMAND.value, Tier.SPOT.value, Tier.FLEX_START.value]
        open_market = allocations[allocations["tier"].isin(paid_as_run)]
        summed = open_market.groupby(["offering", "tier"])["nodes"].sum()
        for offering, tier, nodes in zip(
            summed.index.get_level_values(0), summed.index.get_level_values(1), summed.to_numpy(), strict=True
        ):
            hours[(str(offering), Tier(str(tier)))] += float(nodes) * period
    for placement in document.training:  # a Capacity Block: its rate for the hours it is sold for
        if placement.tier == Tier.CAPACITY_BLOCK and placement.block_hours:
            hours[(placement.offering, Tier.CAPACITY_BLOCK)] += placement.nodes * placement.block_hours
    for commitment in document.commitments:
        if commitment.existing or commitment.term not in _BOUGHT:
            continue
        rate = commitment.usd_per_node_hour
        hours[(commitment.offering, TERM_TIER[commitment.term])] += (
            commitment.cost_in_horizon_usd / rate if rate > 0 else 0.0
        )
    used = []
    for (offering_id, tier), node_hours in sorted(hours.items()):
        if node_hours <= 0 or offering_id not in {o.id for o in catalog}:
            continue
        offering = catalog.get(offering_id)
        price = offering.price(tier)
        if price is None:
            continue
        said = offering.price_provenance(tier)
        basis = "unstated" if said.basis == "unknown" else said.basis
        used.append(
            PriceUse(
                offering=offering_id,
                tier=tier,
                usd_per_node_hour=price,
                basis=basis,
                source=said.source,
                as_of=said.as_of,
                node_hours=node_hours,
            )
        )
    used.extend(_savings_plan_rates(catalog, document, allocations))
    counts = {basis: sum(1 for u in used if u.basis == basis) for basis in _BASES}
    dated = [u.as_of for u in used if u.as_of is not None]
    sources = PriceSources(
        catalog=catalog.source,
        catalog_format=CATALOG_FORMAT if _has_provenance(catalog) else 1,
        overlays=list(catalog.overlays),
        counts={basis: n for basis, n in counts.items() if n},
        oldest=min(dated, default=None),
        newest=max(dated, default=None),
        used=used,
        summary="",
    )
    sources.summary = _summary(sources)
    return sources


def price_warnings(sources: PriceSources, document: PlanDocument, now: datetime) -> list[str]:
    """What a buyer should check first: each purchase priced on an assumption, and the prices the plan uses
    that are older than :data:`STALE_AFTER_DAYS` days at ``now``."""
    by_key = {(u.offering, u.tier): u for u in sources.used}
    found = []
    for commitment in document.commitments:
        if commitment.existing or commitment.term not in _BOUGHT:
            continue
        use = by_key.get((commitment.offering, TERM_TIER[commitment.term]))
        if use is not None and use.basis == "assumed":
            found.append(
                f"the {commitment.term} purchase of {commitment.nodes} x {commitment.offering} rests on an "
                f"assumed price (${use.usd_per_node_hour:,.4g} per node-hour: {use.source}); get a quote "
                "(gpuplan catalog fetch, or your rate in a pricing overlay) before buying"
            )
    for plan in document.savings_plans:
        assumed = [
            u
            for u in sources.used
            if u.tier == Tier.SAVINGS_PLAN and u.basis == "assumed" and u.offering in plan.rates
        ]
        if not plan.existing and assumed:
            found.append(
                f"buying savings plan {plan.name} (${plan.usd_per_hour:,.4g}/h) rests on {len(assumed)} "
                f"assumed savings-plan rate(s) ({assumed[0].offering}: {assumed[0].source}); get the "
                "offering's rates (gpuplan catalog fetch) before buying"
            )
    stale = [u for u in sources.used if u.as_of is not None and (now - u.as_of).days > STALE_AFTER_DAYS]
    if stale:
        oldest = min(stale, key=lambda u: u.as_of or now)
        found.append(
            f"{len(stale)} of the {len(sources.used)} prices the plan uses are more than "
            f"{STALE_AFTER_DAYS} days old (the oldest: {oldest.offering} {oldest.tier}, of "
            f"{oldest.as_of:%Y-%m-%d}); refresh them with gpuplan catalog fetch"
        )
    return found


_KIND_NAMES: Final = {
    "savings-plan-compute": "AWS Compute Savings Plan",
    "savings-plan-ec2-instance": "AWS EC2 Instance Savings Plan",
    "savings-plan": "Azure savings plan for compute",
}


def _savings_plan_rates(
    catalog: Catalog, document: PlanDocument, allocations: pd.DataFrame
) -> list[PriceUse]:
    """One price per (offering, savings-plan kind, term) the plan's savings plans covered nodes of: the rate,
    with the basis, source and date of the terms-file row it came from (``models/savingsplans.py``
    ``rate_groups``: the lowest no-upfront rate of that kind, term and offering)."""
    if not document.savings_plans or not len(allocations):
        return []
    period = document.horizon.period_hours
    rows = allocations[allocations["tier"] == Tier.SAVINGS_PLAN.value]
    covered = rows.groupby(["commitment", "offering"])["nodes"].sum()
    hours: dict[tuple[str, str, int, float], float] = defaultdict(float)
    plans = {p.name: p for p in document.savings_plans}
    for index, nodes in covered.items():
        name, offering = (str(k) for k in cast("tuple[Any, ...]", index))
        plan = plans.get(name)
        if plan is None or offering not in plan.rates:
            continue
        key = (offering, plan.kind, plan.term.years or 0, float(plan.rates[offering]))
        hours[key] += float(nodes) * period
    used = []
    for (offering, kind, years, rate), node_hours in sorted(hours.items()):
        if node_hours <= 0:
            continue
        term = _term_of(catalog, offering, kind, years, rate)
        what = f"{_KIND_NAMES.get(kind, kind)}, {years}y, no upfront"
        used.append(
            PriceUse(
                offering=offering,
                tier=Tier.SAVINGS_PLAN,
                usd_per_node_hour=rate,
                basis=term.basis if term is not None else "unstated",
                source=f"{what}: {term.source}"
                if term is not None
                else f"{what}: not in the catalog's terms file",
                as_of=term.as_of if term is not None else None,
                node_hours=node_hours,
            )
        )
    return used


def _term_of(catalog: Catalog, offering: str, kind: str, years: int, rate: float) -> PriceTerm | None:
    """The terms-file row a savings-plan rate came from: that offering, kind and term, paid without upfront,
    at the rate (the nearest, should a rate have been rounded on its way through plan.json)."""
    candidates = [
        t
        for t in catalog.terms
        if t.offering == offering
        and t.kind == kind
        and t.term_years == years
        and t.payment in ("no-upfront", "")
    ]
    return min(candidates, key=lambda t: abs(t.usd_h - rate), default=None)


def _has_provenance(catalog: Catalog) -> bool:
    return any(o.provenance for o in catalog)


def _summary(sources: PriceSources) -> str:
    """``prices: the embedded catalog; the plan uses 12: 9 quoted (2025-11-30 to 2026-11-29), 3 assumed``."""
    where = "the embedded catalog" if sources.catalog == "embedded" else sources.catalog
    if sources.overlays:
        where += f" with {', '.join(sources.overlays)}"
    parts = []
    for basis in _BASES:
        n = sources.counts.get(basis, 0)
        if not n:
            continue
        text = f"{n} {basis}"
        if basis in ("quoted", "negotiated"):
            dates = sorted({u.as_of.date() for u in sources.used if u.basis == basis and u.as_of is not None})
            if dates:
                text += f" (of {dates[0]})" if len(dates) == 1 else f" ({dates[0]} to {dates[-1]})"
        parts.append(text)
    if not parts:
        return f"prices: {where}; the plan uses none of its prices"
    return f"prices: {where}; the plan uses {len(sources.used)}: {', '.join(parts)}"
