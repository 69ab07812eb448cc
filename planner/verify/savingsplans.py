"""Savings plans, re-billed (issue 38): the held plans exactly as the scenario lists them, the bought ones
of a kind and term the scenario buys, starting at a purchase step, each at the catalog's rates and costed
for its hours inside the horizon; every ``savings_plan`` row names a plan active in its
period with a rate for its offering; and each period re-billed by the cloud's rule
(``models.savingsplans.bill_hours``: EC2 Instance plans first, highest savings first) on the whole
on-demand nodes of each offering, which the on_demand and savings_plan rows of a period add up to: each
plan's rows must carry what the rule covers, and no plan spends more than its commitment in a period.

Independent of the planner: the plans and their rates are re-derived here from the scenario and the
catalog's terms file (``models.*`` only).
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import timedelta

import numpy as np
import pandas as pd

from models.plan import SavingsPlanCommitment
from models.savingsplans import SavingsPlan, bill_hours, plan_groups
from models.scenario import SAVINGS_PLAN_TERM_KIND
from models.tiers import HOURS_PER_YEAR, Tier
from planner.verify.billing import purchase_hours
from planner.verify.context import Context, close, held_savings_plans
from planner.verify.findings import Findings, Violation
from planner.verify.payments import savings_plan_fee
from planner.verify.rows import row_examples

__all__ = ["check_savings_plans"]


def check_savings_plans(ctx: Context, findings: Findings, rows: pd.DataFrame) -> None:
    plans = held_savings_plans(ctx)
    _check_listed(ctx, findings, plans)
    plans = [*plans, *_bought(ctx, findings)]
    by_name = {plan.name: plan for plan in plans}
    sp = rows[rows["tier"] == Tier.SAVINGS_PLAN]
    # each row names a held plan active in its period with a rate for its offering
    fits = np.array(
        [
            name in by_name
            and by_name[name].start <= period < (by_name[name].end or ctx.periods)
            and offering in by_name[name].rates
            for name, period, offering in zip(sp["commitment"], sp["period"], sp["offering"], strict=True)
        ],
        dtype=bool,
    )
    bad = sp[~fits]
    findings.add_many(
        "savings-plan-row", len(bad),
        row_examples(bad, "savings-plan-row", lambda r: f"{r.workload} on savings_plan of {r.offering} in "
                     f"period {r.period:g} names {r.commitment!r}: no held plan covering it then"),
    )  # fmt: skip
    if not plans:
        return
    # re-bill every period by the rule on the whole on-demand nodes (on_demand + savings_plan rows)
    paid = rows[rows["tier"].isin([Tier.ON_DEMAND, Tier.SAVINGS_PLAN])]
    usage: dict[str, np.ndarray] = {}
    for offering, frame in paid.groupby(paid["offering"].astype(str)):
        series = np.zeros(ctx.periods)
        np.add.at(series, frame["period"].to_numpy(np.int64), frame["nodes"].to_numpy(float))
        usage[str(offering)] = np.round(series, 9)
    prices = {oid: o.on_demand_usd_h or 0.0 for oid, o in ctx.offerings.items()}
    bill = bill_hours(usage, prices, plans, hours_per_step=float(ctx.p))
    carried: dict[tuple[str, str], np.ndarray] = defaultdict(lambda: np.zeros(ctx.periods))
    good = sp[fits]
    for name, offering, period, nodes in zip(
        good["commitment"], good["offering"], good["period"], good["nodes"], strict=True
    ):
        carried[(str(name), str(offering))][int(period)] += float(nodes)
    wrong: list[Violation] = []
    count = 0
    for key in sorted(set(bill.covered) | set(carried)):
        expected = bill.covered.get(key, np.zeros(ctx.periods))
        found = carried.get(key, np.zeros(ctx.periods))
        off = np.flatnonzero(np.abs(expected - found) > 1e-6)
        count += len(off)
        for period in off[: max(0, findings.examples - len(wrong))]:
            wrong.append(Violation(
                kind="savings-plan-coverage", period=int(period), offering=key[1],
                message=f"savings plan {key[0]} covers {found[period]:g} nodes of {key[1]} in period "
                f"{period}; the rule covers {expected[period]:g} of the {usage.get(key[1], found)[period]:g} "
                "on-demand nodes",
            ))  # fmt: skip
    findings.add_many("savings-plan-coverage", count, wrong)
    # spending: what a plan's rows use at its rates is at most its commitment in each period
    over: list[Violation] = []
    count = 0
    spend: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(ctx.periods))
    for (name, offering), series in carried.items():
        spend[name] = spend[name] + series * by_name[name].rates[offering]
    for name, series in sorted(spend.items()):
        above = np.flatnonzero(series > by_name[name].usd_per_hour + 1e-6)
        count += len(above)
        over += [
            Violation(kind="savings-plan-budget", period=int(t),
                      message=f"savings plan {name} spends ${series[t]:,.4f}/h in period {t}; it commits "
                      f"${by_name[name].usd_per_hour:,.4f}/h")
            for t in above[: findings.examples]
        ]  # fmt: skip
    findings.add_many("savings-plan-budget", count, over)


def _check_listed(ctx: Context, findings: Findings, plans: list[SavingsPlan]) -> None:
    """plan.json's savings_plans: each held plan once, as the scenario holds it, costed for its hours
    inside the horizon and owing the rest of its term; none the scenario does not hold."""
    horizon = ctx.scenario.horizon
    listed = {plan.name: plan for plan in ctx.plan.document.savings_plans if plan.existing}
    for held, plan in zip(ctx.scenario.savings_plans, plans, strict=True):
        mine = listed.pop(held.name, None)
        if mine is None:
            findings.add("existing-savings-plan", f"held savings plan {held.name} is missing from plan.json")
            continue
        same = (
            mine.kind == plan.kind
            and mine.term == held.term
            and close(mine.usd_per_hour, held.usd_per_hour)
            and mine.start == held.start
            and mine.end == held.ends
            and (mine.start_period, mine.end_period) == (plan.start, plan.end)
            and mine.existing
            and mine.payment == held.payment
        )
        if not same:
            findings.add(
                "existing-savings-plan",
                f"savings plan {held.name} differs from the scenario's (kind, term, usd_per_hour, start, "
                "end, periods, payment)",
            )
        _check_fee(findings, mine)
        _check_cost(
            ctx, findings, mine, held.usd_per_hour, horizon.hour_of(held.start), horizon.hour_of(held.ends)
        )
        if (held.ends - held.start) != timedelta(hours=(held.term.years or 0) * HOURS_PER_YEAR):
            findings.add("existing-savings-plan", f"savings plan {held.name} does not last its term")
    for name in sorted(listed):
        findings.add("existing-savings-plan", f"savings plan {name} in plan.json is not held by the scenario")


def _bought(ctx: Context, findings: Findings) -> list[SavingsPlan]:
    """The plans plan.json says the plan buys, each checked against the scenario and the catalog: a kind and
    term the scenario buys, the catalog's rates for its offerings, a start at a purchase step (or where a
    held plan of its group ends), its term's length, its periods and its cost. Returned at the catalog's
    rates, for the re-billing (a wrong one is still billed, so its rows are checked too)."""
    scenario = ctx.scenario
    horizon = scenario.horizon
    groups = {g.key: g for g in plan_groups(ctx.catalog.terms, ctx.offerings.values())}
    kinds = {SAVINGS_PLAN_TERM_KIND[kind] for kind in scenario.purchase.savings_plans}
    steps = purchase_hours(ctx) | {horizon.hour_of(held.ends) for held in scenario.savings_plans}
    result = []
    for plan in (p for p in ctx.plan.document.savings_plans if not p.existing):
        years = plan.term.years or 0
        group = groups.get((plan.kind, years, plan.scope, plan.payment))
        rates = {o: r for o, r in (group.rates if group else {}).items() if o in ctx.offerings}
        begins, ends = horizon.hour_of(plan.start), horizon.hour_of(plan.end)
        problems = []
        if plan.kind not in kinds or plan.term not in scenario.purchase.terms:
            problems.append(f"a {plan.term} {plan.kind} plan, which purchase.savings_plans/terms do not buy")
        if (
            group is None
            or set(rates) != set(plan.rates)
            or not all(close(plan.rates[o], rate) for o, rate in rates.items())
        ):
            problems.append("rates other than the catalog's for its kind, term, scope and payment")
        if not any(abs(begins - h) < 1e-6 for h in steps) or not close(ends - begins, years * HOURS_PER_YEAR):
            problems.append(f"starts {plan.start.isoformat()}: not at a purchase step, or not for its term")
        unit = group.unit_usd_per_hour if group is not None else None
        if unit and (plan.gpus is None or not close(plan.usd_per_hour, plan.gpus * unit)):
            problems.append(
                f"${plan.usd_per_hour:,.4f}/h is not a whole number of GPUs at ${unit:,.5f}/h each"
            )
        first = max(0, math.ceil(begins / ctx.p - 1e-9))
        last = max(first, min(ctx.periods, math.floor(ends / ctx.p + 1e-9)))
        if (plan.start_period, plan.end_period) != (first, last):
            problems.append(f"periods {plan.start_period}-{plan.end_period}; its times give {first}-{last}")
        for problem in problems:
            findings.add("savings-plan-purchase", f"savings plan {plan.name}: {problem}")
        _check_fee(findings, plan)
        _check_cost(ctx, findings, plan, plan.usd_per_hour, begins, ends)
        billed = rates or dict(plan.rates)
        result.append(SavingsPlan(plan.name, plan.kind, plan.usd_per_hour, billed, first, last))
    return result


def _check_fee(findings: Findings, plan: SavingsPlanCommitment) -> None:
    """A plan's ``upfront_usd`` is what its payment takes at purchase (``payments.savings_plan_fee``)."""
    fee = savings_plan_fee(plan)
    if not close(plan.upfront_usd, fee, abs_=0.01):
        findings.add(
            "payment",
            f"savings plan {plan.name}: paid {plan.payment} with an upfront ${plan.upfront_usd:,.2f}; its "
            f"payment takes ${fee:,.2f} of its ${plan.usd_per_hour:,.3f}/h commitment",
        )


def _check_cost(
    ctx: Context,
    findings: Findings,
    plan: SavingsPlanCommitment,
    usd_per_hour: float,
    begins: float,
    ends: float,
) -> None:
    """A plan held or bought from hour ``begins`` to ``ends`` at ``usd_per_hour``: plan.json's
    cost inside the horizon and obligation after it are those hours at that rate."""
    horizon = ctx.scenario.horizon
    inside = max(0.0, min(ends, horizon.hours) - max(begins, 0.0))
    beyond = max(0.0, ends - max(float(horizon.hours), begins))
    if not close(plan.cost_in_horizon_usd, usd_per_hour * inside, abs_=0.01) or not close(
        plan.obligation_beyond_horizon_usd, usd_per_hour * beyond, abs_=0.01
    ):
        findings.add(
            "savings-plan-cost",
            f"savings plan {plan.name}: cost_in_horizon_usd ${plan.cost_in_horizon_usd:,.2f} and obligation "
            f"${plan.obligation_beyond_horizon_usd:,.2f}; its {inside:g} h inside the horizon cost "
            f"${usd_per_hour * inside:,.2f}, the {beyond:g} h after it ${usd_per_hour * beyond:,.2f}",
        )
