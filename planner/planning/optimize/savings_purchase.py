"""How much savings plan to buy at each purchase step, for the fleet a plan runs (issue 38).

A savings plan commits USD per hour for its term; each hour it covers on-demand nodes of the offerings it
prices at their plan rates, and what it does not spend is lost. Once a plan's nodes are decided period by
period, the best amounts are a linear program (``models.savingsplans.cover_row`` / ``budget_row``)::

    min  sum_k S[k] paid_hours[k]  -  sum_t h_t sum_(g,o) c_od[o] Z[g,o,t]
    s.t. sum_g Z[g,o,t] <= U[o,t]                                   (cover: the nodes paid on demand)
         sum_o rate[g,o] Z[g,o,t] - sum_(k of g active in t) S[k] <= held[g,t]   (budget, USD per hour)

``U`` the whole on-demand nodes beyond the node commitments (every workload's: inference and training),
``held`` what plans held already commit. With one group active in an hour this is the cloud's rule
exactly; with several it may split coverage better than the rule's order, so the amounts are chosen by the
LP and the plan is then billed by the rule (``bill_hours``), as ``gpuplan verify`` re-bills it. Periods
with the same usage and the same plans active are one LP period (weighted), so a year of hourly periods
stays small.

Every method ends here (``solution.build_plan``): the models weigh plans against reservations while
deciding (the staged MILP: ``build.define_savings_plans``, on inference's on-demand nodes; the cluster
model of the hourly method and of the certified bounds: ``bound._savings_plans``, on every on-demand
node), but the amounts written are this LP's, on the fleet as written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import pandas as pd
import pulp

from models.errors import SolverError
from models.savingsplans import bill_hours
from models.tiers import Tier
from planner.planning.optimize.payments import cash_window
from planner.planning.problem.sets import PlanningSets
from planner.solvers.solve import solve

__all__ = ["STEP_USD_PER_HOUR", "PlanPurchase", "buy_savings_plans", "on_demand_usage", "plans_saving_usd"]

#: AWS sells savings plans in steps of $0.001 per hour (Savings Plans API, ``commitment``); amounts are
#: rounded to it and smaller ones are not bought.
STEP_USD_PER_HOUR = 0.001


@dataclass(frozen=True)
class PlanPurchase:
    """What the LP chose: new plan column -> USD per hour (resource-based committed use: whole GPUs x one
    GPU's price), and its objective against buying none."""

    chosen: dict[int, float]
    saving_usd: float  # LP cost with no new plan minus LP cost with these (>= 0)
    lp_periods: int


def on_demand_usage(sets: PlanningSets, allocations: pd.DataFrame) -> np.ndarray:
    """(offerings, periods) nodes paid on demand or by a savings plan: the written allocation rows of tier
    on_demand and savings_plan, which add up to the whole nodes beyond each offering's node commitments."""
    usage = np.zeros((len(sets.offerings), len(sets.slot_of_period)))
    rows = allocations[allocations["tier"].isin([Tier.ON_DEMAND, Tier.SAVINGS_PLAN])]
    index = {offering.id: o for o, offering in enumerate(sets.offerings)}
    np.add.at(
        usage,
        (rows["offering"].map(index).to_numpy(np.int64), rows["period"].to_numpy(np.int64)),
        rows["nodes"].to_numpy(float),
    )
    return np.round(usage, 9)


def buy_savings_plans(
    sets: PlanningSets, usage: np.ndarray, fees_paid: Mapping[str, float] | None = None
) -> PlanPurchase:
    """The amounts of the new savings-plan columns of ``sets`` that make ``usage`` cheapest (module
    docstring), given the plans held; columns not bought are left out of ``chosen``.

    Under ``purchase.max_upfront_usd`` a partial or all-upfront plan pays its share of its whole commitment
    at purchase (``RateGroup.upfront_share``), and what the plans bought in one calendar window pay is at
    most the limit less ``fees_paid`` there (window -> USD: the node commitments' fees, paid first,
    ``payments.split_payments``); no-upfront plans need no cash, so the LP stays feasible."""
    new = sets.new_plans
    if not new:
        return PlanPurchase({}, 0.0, 0)
    periods = usage.shape[1]
    hours = float(sets.period_hours)
    groups = range(len(sets.groups))
    eligible = sorted({o for g in groups for o in sets.group_rates[g]})
    held = sets.budget()  # (groups, periods) USD per hour of the plans held
    active = np.zeros((len(new), periods), dtype=np.int64)
    for n, k in enumerate(new):
        active[n, sets.plans[k].start : sets.plans[k].end] = 1
    # one LP period per distinct (usage of the covered offerings, held budgets, new columns active)
    key = np.vstack([usage[eligible], held, active]).T if eligible else np.zeros((periods, 0))
    _distinct, first, weight = np.unique(key, axis=0, return_index=True, return_counts=True)
    problem = pulp.LpProblem("savings_plans", pulp.LpMinimize)
    # USD per hour per unit bought: 1 for a savings plan (any amount), one GPU's price for resource-based
    # committed use (whole GPUs: an integer count, so this LP becomes a small MILP)
    scale = {k: sets.groups[sets.plans[k].group].unit_usd_per_hour or 1.0 for k in new}
    buy = {
        k: problem.add_variable(
            f"S_{k}", 0, None,
            pulp.LpInteger if sets.groups[sets.plans[k].group].unit_usd_per_hour else pulp.LpContinuous,
        )
        for k in new
    }  # fmt: skip
    objective: list[tuple[pulp.LpVariable, float]] = [
        (buy[k], sets.plans[k].paid_hours * scale[k]) for k in new
    ]
    for u, t in enumerate(first.tolist()):
        covers: dict[int, list[pulp.LpVariable]] = {}
        for g in groups:
            budgets = [k for n, k in enumerate(new) if active[n, t] and sets.plans[k].group == g]
            if not budgets and held[g, t] <= 0:
                continue
            spend = []
            for o, rate in sets.group_rates[g].items():
                price = sets.offerings[o].on_demand_usd_h
                if usage[o, t] <= 0 or price is None or price <= rate:
                    continue
                z = problem.add_variable(f"Z_{g}_{o}_{u}", 0, None, pulp.LpContinuous)
                covers.setdefault(o, []).append(z)
                spend.append((z, rate))
                objective.append((z, -price * hours * float(weight[u])))
            if spend:  # budget_row, each amount in its units
                row = [*spend, *((buy[k], -scale[k]) for k in budgets)]
                problem += pulp.LpConstraint(pulp.LpAffineExpression(row), pulp.LpConstraintLE,
                                             f"budget_{g}_{u}", float(held[g, t]))  # fmt: skip
        for o, zs in covers.items():  # cover_row with the on-demand nodes fixed: sum_g Z <= U
            problem += pulp.LpConstraint(
                pulp.LpAffineExpression([(z, 1.0) for z in zs]), pulp.LpConstraintLE, f"cover_{o}_{u}",
                float(usage[o, t]),
            )  # fmt: skip
    _cash_rows(problem, sets, buy, scale, fees_paid or {})
    problem.setObjective(pulp.LpAffineExpression(objective))
    result = solve(problem, gap=0.0)
    if not result.ok:  # pragma: no cover - S = 0 is always feasible
        raise SolverError(f"the savings-plan purchase LP ended '{result.termination.value}'")
    chosen = {}
    for k, var in buy.items():
        if sets.groups[sets.plans[k].group].unit_usd_per_hour:  # whole GPUs
            units = round(float(var.varValue or 0.0))
            if units > 0:
                chosen[k] = units * scale[k]
            continue
        steps = float(var.varValue or 0.0) / STEP_USD_PER_HOUR
        # a plan paying part upfront under a cash limit rounds down, so its fee stays within the limit
        share = sets.groups[sets.plans[k].group].upfront_share
        capped = sets.scenario.purchase.max_upfront_usd is not None and share > 0
        amount = (math.floor(steps + 1e-6) if capped else round(steps)) * STEP_USD_PER_HOUR
        if amount >= STEP_USD_PER_HOUR:
            chosen[k] = round(amount, 3)
    without = _held_only_cost(problem, buy)
    return PlanPurchase(chosen, max(0.0, without - result.objective), len(first))


def _cash_rows(
    problem: pulp.LpProblem,
    sets: PlanningSets,
    buy: dict[int, pulp.LpVariable],
    scale: dict[int, float],
    fees_paid: Mapping[str, float],
) -> None:
    """``purchase.max_upfront_usd``: per calendar window, the upfront part of the plans starting in it,
    ``sum_k share[k] x term_hours[k] x S[k] <= limit - fees_paid[window]`` (at least 0)."""
    cap = sets.scenario.purchase.max_upfront_usd
    if cap is None:
        return
    start = sets.scenario.horizon.start
    fees: dict[str, list[tuple[pulp.LpVariable, float]]] = {}
    for k, var in buy.items():
        plan = sets.plans[k]
        share = sets.groups[plan.group].upfront_share
        if share > 0:
            window = cash_window(start + timedelta(hours=plan.starts_hour), cap.per)
            fees.setdefault(window, []).append((var, share * (plan.ends_hour - plan.starts_hour) * scale[k]))
    for window, row in sorted(fees.items()):
        left = max(0.0, cap.usd - fees_paid.get(window, 0.0))
        problem += pulp.LpConstraint(
            pulp.LpAffineExpression(row), pulp.LpConstraintLE, f"cash_{window.replace('-', '_')}", left
        )


def _held_only_cost(problem: pulp.LpProblem, buy: dict[int, pulp.LpVariable]) -> float:
    """The same LP with nothing bought: what the held plans alone leave (for the saving figure)."""
    for var in buy.values():
        var.upBound = 0.0
    result = solve(problem, gap=0.0)
    for var in buy.values():
        var.upBound = None
    return result.objective if result.ok else 0.0


def plans_saving_usd(sets: PlanningSets, usage: np.ndarray) -> float:
    """What savings plans take off paying ``usage`` (offerings x periods, on-demand nodes) on demand: the
    decided plans by the cloud's rule, and what the best new ones (:func:`buy_savings_plans`) save beyond
    them. The finishing path subtracts it from a plan's cost (``finish.written_cost``), so plans compared
    there (local search, the exact-start plan, the hourly method's candidates) are compared as they will be
    written: with the savings plans bought for each."""
    if not sets.plans:
        return 0.0
    saved = 0.0
    held = sets.savings_plans()
    if held:
        p = float(sets.period_hours)
        ids = [offering.id for offering in sets.offerings]
        prices = {offering.id: offering.on_demand_usd_h or 0.0 for offering in sets.offerings}
        bill = bill_hours({ids[o]: usage[o] for o in range(len(ids))}, prices, held, hours_per_step=p)
        paid = sum(float(usage[o].sum()) * prices[ids[o]] * p for o in range(len(ids)))
        saved += paid - bill.on_demand_usd
    if sets.new_plans:
        saved += buy_savings_plans(sets, usage).saving_usd
    return saved
