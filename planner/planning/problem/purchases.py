"""Commitment columns: every commitment the plan may buy, when, for how long, and the ones already held.

A *column* is one way to hold committed nodes of one offering: a term (1y, 3y, owned, or a capacity
reservation already held), a window of periods in which its nodes serve (start inclusive, end
exclusive, clipped to the horizon), a rate, and the hours of the horizon it is paid for. The model
decides a whole node count for each new column; an existing column's count is fixed (it is paid
whether used or not, so its cost is a constant of every plan).

New cloud commitments may start at the first hour of any purchase step (``purchase.schedule``):
the horizon's first hour, and the first hour of every calendar quarter or month inside it; also
where a commitment held already ends, so that renewing (or replacing) it leaves no gap. A term
that ends inside the horizon is simply a column that stops there; renewing it is buying another
column from that step on. Each new column is paid for its hours inside the horizon; what its term
binds beyond the horizon is reported as an obligation, not counted in the plan's cost (as for a
day-one purchase on a horizon shorter than its term).

Own servers (``colocation``) keep one column, ordered at the horizon start, serving after their lead
time and paid for the whole horizon (capital is committed when ordered); servers already bought
(``colocation.existing_nodes``) are an existing owned column from the first hour.

Of columns with the same offering and window, only the cheapest over the horizon is kept: the model
reads a column only through its window and its cost, so a dearer twin is never part of an optimum.

Payment options (issue 38): a cloud term is sold paid by the hour (no upfront) or with part or all of it
paid at purchase (partial, all upfront), at a lower effective rate. A column is priced *amortized*: its
``usd_per_node_hour`` is the option's hourly rate plus its fee per node spread over the term's hours (as the
clouds compare options), so the cost machinery is unchanged; its ``payment``, ``upfront_usd`` (per node) and
``hourly_usd`` say how it is paid, and ``options`` lists every way its term is sold (the cheapest effective
rate prices it; ``payments.py`` splits a purchase among them under a cash limit).

``segment_of_period`` numbers the stretches between column boundaries: inside a segment the same
columns are active, which is what lets the model merge periods (``sets.py``), the bound average
hours (``bound.py``) and guarantees be backed per segment (``build.guarantee_rows``).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from models.catalog import Catalog, Offering
from models.errors import InputError
from models.priceterms import NODE_SHAPED_KINDS, PriceTerm
from models.savingsplans import RateGroup, plan_groups
from models.scenario import SAVINGS_PLAN_TERM_KIND, SCOPED_KINDS, ExistingCommitment, Scenario
from models.tiers import HOURS_PER_MONTH, HOURS_PER_YEAR, TERM_TIER, Term

__all__ = [
    "CommitColumn",
    "PaymentOption",
    "PlanColumn",
    "committed_by_period",
    "held_columns",
    "payment_options",
    "plan_budget",
    "plan_columns",
    "purchase_columns",
    "purchase_steps",
    "savings_plan_groups",
    "segment_of_period",
]

#: Months that open a purchase step, per schedule (``horizon``: none beyond the first hour).
STEP_MONTHS: dict[str, tuple[int, ...]] = {
    "horizon": (),
    "quarterly": (1, 4, 7, 10),
    "monthly": tuple(range(1, 13)),
}


@dataclass(frozen=True, slots=True)
class PaymentOption:
    """One way a term of an offering is paid: ``hourly_usd`` per node-hour plus ``upfront_usd`` per node
    at purchase, for ``term_hours``; ``source`` and ``basis`` (quoted, assumed) say where its figures
    come from."""

    payment: str  # no-upfront, partial-upfront, all-upfront
    hourly_usd: float
    upfront_usd: float
    term_hours: float
    source: str = ""
    basis: str = "quoted"

    @property
    def effective_usd_h(self) -> float:
        """The hourly rate plus the fee spread over the term: what a node-hour costs, amortized."""
        return self.hourly_usd + (self.upfront_usd / self.term_hours if self.term_hours else 0.0)


@dataclass(frozen=True, slots=True)
class CommitColumn:
    """One way to hold committed nodes of an offering (see the module docstring)."""

    offering: int  # index into the offerings of the sets
    term: Term
    start: int  # first period its nodes serve
    end: int  # the period after the last one they serve inside the horizon
    usd_per_node_hour: float
    paid_hours: float  # hours inside the horizon it is paid for
    beyond_hours: float  # hours its term binds after the horizon ends
    starts_hour: float  # when the term starts, hours from the horizon start (negative: before it)
    ends_hour: float  # when the term ends (beyond the horizon for most)
    nodes: int | None = None  # held nodes of an existing commitment; None: the plan decides
    name: str = ""  # existing: its label; new: filled in when the plan is written
    payment: str = "no-upfront"  # how it is paid (owned servers: their amortized rate, no fee)
    upfront_usd: float = 0.0  # fee per node at purchase (usd_per_node_hour has it spread over the term)
    hourly_usd: float | None = None  # recurring charge per node-hour; None: usd_per_node_hour (no fee)
    options: tuple[PaymentOption, ...] = ()  # every way its term is sold, cheapest effective rate first

    @property
    def existing(self) -> bool:
        return self.nodes is not None

    @property
    def recurring_usd_per_node_hour(self) -> float:
        """What is charged per node-hour, the upfront fee aside (the cash view)."""
        return self.usd_per_node_hour if self.hourly_usd is None else self.hourly_usd

    @property
    def cost_per_node(self) -> float:
        """What one node of it costs inside the horizon."""
        return self.usd_per_node_hour * self.paid_hours

    def active(self, period: int) -> bool:
        return self.start <= period < self.end


def purchase_steps(scenario: Scenario) -> list[int]:
    """First periods of the purchase steps: 0 and every calendar month/quarter start inside the
    horizon (a month start that falls inside a period opens the step at the next period)."""
    horizon = scenario.horizon
    p = horizon.period_hours
    months = STEP_MONTHS[scenario.purchase.schedule]
    steps = {0}
    year, month = horizon.start.year, horizon.start.month
    while months:
        month += 1
        if month > 12:
            year, month = year + 1, 1
        when = datetime(year, month, 1, tzinfo=horizon.start.tzinfo)
        if when >= horizon.end:
            break
        if month in months:
            steps.add(math.ceil(horizon.hour_of(when) / p - 1e-9))
    return sorted(step for step in steps if step < horizon.periods)


def held_columns(
    scenario: Scenario, offerings: list[Offering], catalog: Catalog | None = None
) -> list[CommitColumn]:
    """The commitments held already, in scenario order, colocation's servers last. Raises InputError
    for one on an offering the scenario cannot use, without a rate, or above ``max_nodes``."""
    horizon = scenario.horizon
    periods = horizon.periods
    index = {offering.id: o for o, offering in enumerate(offerings)}
    columns: list[CommitColumn] = []
    for k, held in enumerate(scenario.commitments):
        o = _offering_of(held, k, index, catalog)
        columns.append(_existing(held, k, o, offerings[o], scenario))
    _within_max_nodes(columns, offerings, periods)
    colocation = scenario.colocation
    owned = next((o for o, off in enumerate(offerings) if off.owned), None)
    if colocation is not None and owned is not None and colocation.existing_nodes:
        rate = offerings[owned].owned_usd_h or 0.0
        columns.append(
            CommitColumn(owned, Term.OWNED, 0, periods, rate, float(horizon.hours), 0.0, 0.0,
                         float(horizon.hours), nodes=colocation.existing_nodes, name="colocation/existing")
        )  # fmt: skip
    return columns


def purchase_columns(
    scenario: Scenario,
    offerings: list[Offering],
    terms: Mapping[int, list[Term]],
    held: list[CommitColumn],
    payments: Mapping[tuple[int, int], Sequence[PaymentOption]] | None = None,
) -> list[CommitColumn]:
    """What the plan may buy: per offering, each of its ``terms`` at each purchase step and where a
    ``held`` column ends inside the horizon (a renewal). ``payments`` ((offering, term years) -> the
    options it is sold with, :func:`payment_options`): each column is priced at the lowest effective rate
    among them; without, at the catalog's rate paid by the hour."""
    horizon = scenario.horizon
    p = horizon.period_hours
    periods = horizon.periods
    renewals = {column.end for column in held if 0 < column.end < periods}
    colocation = scenario.colocation
    life = colocation.depreciation_months * HOURS_PER_MONTH if colocation else 0.0
    steps = purchase_steps(scenario)
    fresh: dict[tuple[int, int, int], CommitColumn] = {}
    for o, offering_terms in terms.items():
        offering = offerings[o]
        for term in offering_terms:
            price = offering.price(TERM_TIER[term])
            if price is None:
                continue
            rate = price
            if term == Term.OWNED:  # ordered at the start, serving after the lead time
                start = math.ceil(offering.available_from_hour / p - 1e-9)
                if start < periods:
                    column = CommitColumn(o, term, start, periods, rate, float(horizon.hours),
                                          max(0.0, life - horizon.hours), 0.0, life)  # fmt: skip
                    fresh[(o, start, periods)] = column
                continue
            length = (term.years or 0) * HOURS_PER_YEAR
            options = tuple(
                sorted(
                    (payments or {}).get((o, term.years or 0))
                    or (PaymentOption("no-upfront", rate, 0.0, length),),
                    key=lambda option: (option.effective_usd_h, option.payment),
                )
            )
            best = options[0]
            for step in sorted({*steps, *renewals}):
                end = min(periods, step + math.ceil(length / p - 1e-9))
                paid = float((end - step) * p)
                column = CommitColumn(o, term, step, end, best.effective_usd_h, paid, max(0.0, length - paid),
                                      float(step * p), float(step * p + length), payment=best.payment,
                                      upfront_usd=best.upfront_usd, hourly_usd=best.hourly_usd,
                                      options=options)  # fmt: skip
                twin = fresh.get((o, step, end))
                if twin is None or (column.cost_per_node, column.beyond_hours) < (
                    twin.cost_per_node,
                    twin.beyond_hours,
                ):
                    fresh[(o, step, end)] = column
    return sorted(fresh.values(), key=lambda c: (c.offering, c.start, c.term))


def payment_options(terms: Iterable[PriceTerm], offering: Offering, years: int) -> tuple[PaymentOption, ...]:
    """The ways ``offering``'s ``years``-year term is sold: paid by the hour at the catalog's rate (which a
    pricing overlay may have set), and each upfront option of the terms file (the node-shaped terms, the
    lowest effective rate per option: ``models/priceterms.py``), quoted or assumed as the file says. Empty
    when the catalog has no price for the term."""
    price = offering.price(TERM_TIER[Term.ONE_YEAR if years == 1 else Term.THREE_YEARS])
    if price is None:
        return ()
    hours = years * HOURS_PER_YEAR
    found = [PaymentOption("no-upfront", price, 0.0, hours)]  # the catalog's price, its provenance in prices
    upfront: dict[str, PriceTerm] = {}
    for t in terms:
        if (
            t.offering == offering.id
            and t.term_years == years
            and t.kind in NODE_SHAPED_KINDS
            and t.payment in ("partial-upfront", "all-upfront")
        ):
            kept = upfront.get(t.payment)
            if kept is None or t.effective_usd_h < kept.effective_usd_h:
                upfront[t.payment] = t
    for payment, t in sorted(upfront.items()):
        found.append(PaymentOption(payment, t.usd_h, t.upfront_usd, hours, t.source, t.basis))
    return tuple(found)


def _within_max_nodes(held: list[CommitColumn], offerings: list[Offering], periods: int) -> None:
    """Held nodes take capacity like any other: more than ``max_nodes`` at once cannot be right."""
    nodes = committed_by_period(held, {}, len(offerings), periods)
    for o, offering in enumerate(offerings):
        if offering.max_nodes is not None and periods and nodes[o].max() > offering.max_nodes:
            raise InputError(
                None,
                "commitments",
                f"{nodes[o].max():g} nodes of {offering.id} held at once, above its max_nodes "
                f"({offering.max_nodes}) in the catalog",
            )


def _offering_of(held: ExistingCommitment, k: int, index: dict[str, int], catalog: Catalog | None) -> int:
    if held.offering in index:
        return index[held.offering]
    where = f"commitments[{k}].offering"
    known = catalog is not None and any(offering.id == held.offering for offering in catalog)
    if known:
        raise InputError(
            None, where, f"{held.offering} is outside the scenario's clouds/regions; allow its region"
        )
    ids = [offering.id for offering in catalog] if catalog is not None else list(index)
    close = difflib.get_close_matches(held.offering, ids, n=3, cutoff=0.6)
    hint = " (see gpuplan catalog for ids)"
    if close:
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?"
    raise InputError(None, where, f"unknown offering {held.offering!r}{hint}")


def _existing(
    held: ExistingCommitment, k: int, o: int, offering: Offering, scenario: Scenario
) -> CommitColumn:
    horizon = scenario.horizon
    p = horizon.period_hours
    starts, ends = horizon.hour_of(held.start), horizon.hour_of(held.ends)
    rate = held.usd_per_node_hour
    if rate is None:
        tier = TERM_TIER[held.term]
        rate = offering.on_demand_usd_h if held.term == Term.RESERVATION else offering.price(tier)
    if rate is None:
        raise InputError(
            None,
            f"commitments[{k}].usd_per_node_hour",
            f"the catalog has no {held.term} price for {held.offering}; give the rate paid",
        )
    # its nodes serve in the whole periods inside [start, end); it is paid for every hour in the horizon
    first = max(0, math.ceil(starts / p - 1e-9))
    last = min(horizon.periods, math.floor(ends / p + 1e-9))
    paid = max(0.0, min(ends, horizon.hours) - max(starts, 0.0))
    return CommitColumn(o, held.term, first, max(first, last), rate, paid,
                        max(0.0, ends - max(float(horizon.hours), starts)), starts, ends,
                        nodes=held.nodes, name=held.label)  # fmt: skip


def committed_by_period(
    columns: list[CommitColumn], chosen: Mapping[int, float], offerings: int, periods: int
) -> np.ndarray:
    """(offerings, periods) committed nodes: the existing columns' and ``chosen`` (column -> nodes)."""
    held = (
        (column.offering, column.start, column.end, column.nodes if column.existing else chosen.get(c, 0.0))
        for c, column in enumerate(columns)
    )
    return _sum_over_windows(held, offerings, periods)


def _sum_over_windows(
    windows: Iterable[tuple[int, int, int, float | None]], rows: int, periods: int
) -> np.ndarray:
    """(rows, periods): each (row, start, end, amount) added in the periods [start, end)."""
    delta = np.zeros((rows, periods + 1))
    for row, start, end, amount in windows:
        if amount and end > start:
            delta[row, start] += amount
            delta[row, end] -= amount
    return np.cumsum(delta, axis=1)[:, :periods]


def segment_of_period(columns: Sequence[CommitColumn | PlanColumn], periods: int) -> np.ndarray:
    """Per period, the number of column boundaries at or before it: equal numbers, equal columns active
    (commitment columns and savings-plan columns alike: a plan's window bounds a segment too)."""
    bounds = sorted({b for column in columns for b in (column.start, column.end) if 0 < b < periods})
    return np.searchsorted(np.array(bounds, dtype=np.int64), np.arange(periods), side="right").astype(
        np.int64
    )


# ---- savings plans: dollars per hour, not nodes (issue 38; models/savingsplans.py) ------------------------


@dataclass(frozen=True, slots=True)
class PlanColumn:
    """One way to hold a savings plan: a rate group (``models.savingsplans.RateGroup``, by index), the
    periods its budget applies in (start inclusive, end exclusive, clipped to the horizon), the hours of
    the horizon it is paid for and those its term binds after it. A held plan has its ``usd_per_hour``; a
    new one leaves it to the model (a continuous amount: AWS sells them in steps of $0.001 per hour); once
    the plan decides it (``PlanningSets.with_bought_plans``) it has its amount too and ``bought`` is set."""

    group: int
    start: int
    end: int
    paid_hours: float
    beyond_hours: float
    starts_hour: float
    ends_hour: float
    usd_per_hour: float | None = None
    name: str = ""
    bought: bool = False

    @property
    def existing(self) -> bool:
        """Its amount is known: held before the plan, or bought by it (then no model decides it again)."""
        return self.usd_per_hour is not None


def plan_columns(
    scenario: Scenario, term_years: Mapping[int, int], held: Sequence[PlanColumn] = ()
) -> list[PlanColumn]:
    """What the plan may buy: each rate group (index -> its term in years) at each purchase step and where a
    ``held`` plan of the same group ends inside the horizon (a renewal); the held ones first, as given."""
    horizon = scenario.horizon
    p = horizon.period_hours
    periods = horizon.periods
    steps = purchase_steps(scenario)
    found: list[PlanColumn] = list(held)
    for group, years in sorted(term_years.items()):
        renewals = {c.end for c in held if c.group == group and 0 < c.end < periods}
        length = years * HOURS_PER_YEAR
        for step in sorted({*steps, *renewals}):
            end = min(periods, step + math.ceil(length / p - 1e-9))
            paid = float((end - step) * p)
            found.append(
                PlanColumn(
                    group, step, end, paid, max(0.0, length - paid), float(step * p), float(step * p + length)
                )
            )
    return found


def plan_budget(
    columns: list[PlanColumn], chosen: Mapping[int, float], groups: int, periods: int
) -> np.ndarray:
    """(groups, periods) USD per hour committed: the held plans' and ``chosen`` (column -> USD per hour)."""
    held = (
        (
            column.group,
            column.start,
            column.end,
            column.usd_per_hour if column.existing else chosen.get(k, 0.0),
        )
        for k, column in enumerate(columns)
    )
    return _sum_over_windows(held, groups, periods)


def savings_plan_groups(
    scenario: Scenario, catalog: Catalog, offerings: Sequence[Offering]
) -> tuple[list[RateGroup], list[PlanColumn], dict[int, int]]:
    """The savings-plan rate groups a scenario uses, its held plans as columns (in scenario order) and the
    groups it may buy (group index -> term in years).

    Rates are the catalog's terms file's (``Catalog.terms``, through ``models.savingsplans.rate_groups``;
    GCP's resource-based committed use from the offerings' 1y/3y prices, ``resource_groups``), kept for
    the scenario's ``offerings`` only; a pricing overlay does not reach savings-plan rates yet (a
    later change: assumed rates for the embedded catalog's offerings without a published one). A group is
    kept when a held plan is in it (even if none of its offerings is in scope: the plan is paid all the
    same) or when ``purchase.savings_plans`` and ``purchase.terms`` let the plan buy it and it covers some
    offering in scope. A held plan whose kind, term and scope have no rates in the catalog is an
    InputError naming it."""
    in_scope = {offering.id for offering in offerings}
    every: dict[tuple[str, int, str, str], RateGroup] = {
        g.key: g for g in plan_groups(catalog.terms, offerings)
    }
    wanted: dict[tuple[str, int, str, str], None] = {}
    for k, plan in enumerate(scenario.savings_plans):
        key = (SAVINGS_PLAN_TERM_KIND[plan.kind], plan.term.years or 0, plan.scope, plan.payment)
        if key not in every:
            raise InputError(
                None,
                f"savings_plans[{k}]",
                f"{plan.name!r}: the catalog has no rates for a {plan.term} {plan.kind} savings plan"
                + (f" of {plan.family} in {plan.region}" if plan.kind in SCOPED_KINDS else "")
                + (f" paid {plan.payment}" if plan.payment != "no-upfront" else "")
                + (
                    " (GCP committed use is priced from the catalog's 1y/3y prices of the scenario's "
                    "offerings with that GPU in that region)"
                    if plan.kind == "gcp-resource"
                    else " (savings-plan rates come from the catalog's terms file, catalog.terms.csv)"
                ),
            )
        wanted[key] = None
    kinds = {SAVINGS_PLAN_TERM_KIND[kind] for kind in scenario.purchase.savings_plans}
    years = {term.years for term in scenario.purchase.terms}
    buyable_keys = _payment_choices(
        [g for g in every.values() if g.kind in kinds and g.term_years in years and in_scope & set(g.rates)],
        in_scope,
        capped=scenario.purchase.max_upfront_usd is not None,
    )
    wanted.update(dict.fromkeys(buyable_keys))
    groups = [
        RateGroup(kind=g.kind, term_years=g.term_years, scope=g.scope,
                  rates={o: r for o, r in g.rates.items() if o in in_scope},
                  unit_usd_per_hour=g.unit_usd_per_hour, payment=g.payment)
        for g in (every[key] for key in sorted(wanted))
    ]  # fmt: skip
    index: dict[tuple[str, int, str, str], int] = {g.key: n for n, g in enumerate(groups)}
    horizon = scenario.horizon
    p = horizon.period_hours
    held: list[PlanColumn] = []
    for plan in scenario.savings_plans:
        starts, ends = horizon.hour_of(plan.start), horizon.hour_of(plan.ends)
        first = max(0, math.ceil(starts / p - 1e-9))
        last = min(horizon.periods, math.floor(ends / p + 1e-9))
        held.append(
            PlanColumn(
                index[(SAVINGS_PLAN_TERM_KIND[plan.kind], plan.term.years or 0, plan.scope, plan.payment)],
                first, max(first, last),
                max(0.0, min(ends, horizon.hours) - max(starts, 0.0)),
                max(0.0, ends - max(float(horizon.hours), starts)),
                starts, ends, usd_per_hour=plan.usd_per_hour, name=plan.name,
            )
        )  # fmt: skip
    buyable = {index[key]: key[1] for key in buyable_keys if groups[index[key]].rates}
    return groups, held, buyable


def _payment_choices(
    candidates: Sequence[RateGroup], in_scope: set[str], capped: bool
) -> list[tuple[str, int, str, str]]:
    """The groups a plan may buy among ``candidates``: of one kind, term and scope, the payment options
    paid more upfront have lower rates but cost cash at purchase. Without a cash limit a dollar committed
    costs a dollar whichever way it is paid, so an option whose rates are at most every other option's
    on every offering in scope covers as much for less and is the only one kept (AWS's all-upfront rates
    are the lowest); without such an option, or under ``purchase.max_upfront_usd``, every option stays
    and the purchase LP chooses (``savings_purchase.buy_savings_plans``)."""
    by_scope: dict[tuple[str, int, str], list[RateGroup]] = {}
    for group in candidates:
        by_scope.setdefault(group.key[:3], []).append(group)
    kept: list[tuple[str, int, str, str]] = []
    for options in by_scope.values():
        if not capped and len(options) > 1:
            best = [g for g in options if all(_no_dearer(g, other, in_scope) for other in options)]
            if best:
                options = best[:1]
        kept.extend(g.key for g in options)
    return sorted(kept)


def _no_dearer(group: RateGroup, other: RateGroup, in_scope: set[str]) -> bool:
    """``group`` covers every offering in scope that ``other`` covers, at no higher a rate."""
    return all(
        o in group.rates and group.rates[o] <= rate + 1e-12
        for o, rate in other.rates.items()
        if o in in_scope
    )
