"""How each commitment the plan buys is paid: no, partial or all upfront, under a cash limit (issue 38).

The planning models price a commitment column at its cheapest payment option, amortized (the hourly rate
plus the fee spread over the term: ``purchases.PaymentOption``). Paying differently changes neither where
nor how many nodes serve, only what they cost and when the cash goes out, so once the nodes are decided the
payment is a separate, small choice. Without a cash limit every purchase keeps its cheapest option. With
``purchase.max_upfront_usd`` ({per: month | quarter, usd}) a small MILP splits each bought column's nodes
among its options, minimizing what the terms cost in all (amortized over the term, beyond the horizon
too) such that the fees paid in each calendar window stay within the limit:

    min  sum_{c,k} x[c,k] * effective[c,k] * term_hours[c]
    s.t. sum_k x[c,k] = nodes[c]                       for each bought column c
         sum_{c in w, k} x[c,k] * upfront[c,k] <= cap  for each window w (month or quarter of its start)
         x[c,k] >= 0, integer

No-upfront needs no cash, so it is always feasible. The models priced every column at its cheapest option,
which the split can only raise: their bounds stay valid (a relaxation of the cash limit).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pulp

from models.errors import SolverError
from models.scenario import CashWindow
from planner.planning.problem.sets import PlanningSets
from planner.solvers.solve import solve

__all__ = ["cash_window", "fees_by_window", "split_payments"]


def cash_window(when: datetime, per: CashWindow) -> str:
    """The calendar window a payment at ``when`` counts in: ``2027-03`` (month) or ``2027-Q1`` (quarter)."""
    if per == "month":
        return f"{when.year:04d}-{when.month:02d}"
    return f"{when.year:04d}-Q{(when.month - 1) // 3 + 1}"


def fees_by_window(sets: PlanningSets, commits: dict[int, int]) -> dict[str, float]:
    """The upfront fees of the node commitments bought (``commits``: new column -> nodes, each column paid
    as it now is), per window of ``purchase.max_upfront_usd``: what the savings plans bought after them
    may still pay upfront is the limit less these (``savings_purchase.buy_savings_plans``)."""
    cap = sets.scenario.purchase.max_upfront_usd
    if cap is None:
        return {}
    start = sets.scenario.horizon.start
    fees: dict[str, float] = {}
    for c, nodes in commits.items():
        column = sets.columns[c]
        if nodes > 0 and not column.existing and column.upfront_usd:
            window = cash_window(start + timedelta(hours=column.starts_hour), cap.per)
            fees[window] = fees.get(window, 0.0) + nodes * column.upfront_usd
    return fees


def split_payments(sets: PlanningSets, commits: dict[int, int]) -> dict[int, dict[str, int]]:
    """Bought column -> payment option -> nodes, for the columns of ``commits`` (new column -> nodes) that
    have a choice (module docstring). Without a cash limit, or when every cheapest option fits it, each
    column keeps its cheapest option and nothing is split (an empty answer)."""
    cap = sets.scenario.purchase.max_upfront_usd
    choices = {
        c: n for c, n in commits.items() if n > 0 and not sets.columns[c].existing and sets.columns[c].options
    }
    if cap is None or not choices:
        return {}
    start = sets.scenario.horizon.start
    window = {c: cash_window(start + timedelta(hours=sets.columns[c].starts_hour), cap.per) for c in choices}
    cheapest: dict[str, float] = {}
    for c, n in choices.items():
        cheapest[window[c]] = cheapest.get(window[c], 0.0) + n * sets.columns[c].options[0].upfront_usd
    if all(fees <= cap.usd + 1e-6 for fees in cheapest.values()):
        return {}
    problem = pulp.LpProblem("payments", pulp.LpMinimize)
    x: dict[tuple[int, int], pulp.LpVariable] = {}
    objective = []
    for c, n in sorted(choices.items()):
        column = sets.columns[c]
        term_hours = column.paid_hours + column.beyond_hours
        for k, option in enumerate(column.options):
            x[(c, k)] = problem.add_variable(f"x_{c}_{k}", 0, n, pulp.LpInteger)
            objective.append((x[(c, k)], option.effective_usd_h * term_hours))
        problem += pulp.LpConstraint(
            pulp.LpAffineExpression([(x[(c, k)], 1.0) for k in range(len(column.options))]),
            pulp.LpConstraintEQ, f"nodes_{c}", float(n),
        )  # fmt: skip
    for w in sorted(set(window.values())):
        fees = [
            (x[(c, k)], option.upfront_usd)
            for c in choices
            if window[c] == w
            for k, option in enumerate(sets.columns[c].options)
            if option.upfront_usd > 0
        ]
        if fees:
            problem += pulp.LpConstraint(
                pulp.LpAffineExpression(fees), pulp.LpConstraintLE, f"cash_{w}", float(cap.usd)
            )
    problem.setObjective(pulp.LpAffineExpression(objective))
    result = solve(problem, gap=0.0)
    if not result.ok:  # pragma: no cover - paying everything by the hour always fits
        raise SolverError(f"the payment-option MILP ended '{result.termination.value}'")
    split: dict[int, dict[str, int]] = {}
    for (c, k), var in x.items():
        nodes = round(float(var.varValue or 0.0))
        if nodes > 0:
            split.setdefault(c, {})[sets.columns[c].options[k].payment] = nodes
    return split
