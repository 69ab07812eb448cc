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

No-upfront needs no cash, so it is always feasible.

The models make the same choice, so the limit weighs in where the nodes are decided (a plan that buys the
nodes its cash allows) and the certified bounds count it: under a limit, :func:`payment_split` gives each
new column one variable per payment option, ``sum_k P[c,k] = R[c]``, priced at that option's cost inside the
horizon, and each window's row holds the options' fees beside the blocks' (:func:`cash_rows`). Whole
or relaxed, this is a relaxation of every plan's payments (each plan pays its nodes some whole way within
the limit; the split below only picks which), so a bound over it stays valid; without a limit every column
is priced at its cheapest option, as the split would keep it.

An AWS Capacity Block's fee (a training gang's tier ``capacity_block``) is upfront cash too, paid whole in
the window its block starts (``planning/monthly.py``) and with no cheaper way to pay it, so the blocks come
first: the models keep the fees of the blocks starting in each window within the limit
(:func:`block_cash_rows`: ``sum_a fee[a] Y[a] <= cap`` per window, in ``build.define_block_cash`` and the
cluster model of ``bound.py``), the placement heuristics start a block only where its window has room
(:func:`block_room`), and the split above and the savings plans' upfront get the limit less the blocks'
fees of each window (``cap - blocks[w]``, at least 0 since the blocks fit).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import pulp

from models.errors import SolverError
from models.scenario import CashWindow
from models.tiers import Capacity
from planner.planning.problem.sets import PlanningSets, TrainingOption
from planner.solvers.solve import solve

__all__ = [
    "CAP_EPS_USD",
    "PaymentSplit",
    "block_cash_rows",
    "block_fees_by_window",
    "block_room",
    "blocks_over_cap",
    "cash_rows",
    "cash_window",
    "commitment_window",
    "fees_by_window",
    "payment_split",
    "split_payments",
    "window_of_period",
]

#: Fees within this many dollars above the limit count as within it (float sums of fees; verify's
#: tolerance, ``verify/payments.check_cash``): a cent over is over.
CAP_EPS_USD = 1e-6


def cash_window(when: datetime, per: CashWindow) -> str:
    """The calendar window a payment at ``when`` counts in: ``2027-03`` (month) or ``2027-Q1`` (quarter)."""
    if per == "month":
        return f"{when.year:04d}-{when.month:02d}"
    return f"{when.year:04d}-Q{(when.month - 1) // 3 + 1}"


def window_of_period(sets: PlanningSets) -> tuple[list[str], np.ndarray]:
    """The windows of ``purchase.max_upfront_usd`` the horizon touches, and per period the index of the
    window its first hour is in (where a block starting then pays its fee); none without a limit."""
    cap = sets.scenario.purchase.max_upfront_usd
    horizon = sets.scenario.horizon
    if cap is None:
        return [], np.zeros(horizon.periods, dtype=np.int64)
    labels, window = _windows(horizon.start, horizon.period_hours, horizon.periods, cap.per)
    return list(labels), window


@functools.lru_cache(maxsize=16)
def _windows(start: datetime, p: int, periods: int, per: CashWindow) -> tuple[tuple[str, ...], np.ndarray]:
    """Cached: the placement heuristics ask once per block they try to place."""
    keys = [cash_window(start + timedelta(hours=t * p), per) for t in range(periods)]
    labels = tuple(dict.fromkeys(keys))
    index = {label: n for n, label in enumerate(labels)}
    window = np.array([index[k] for k in keys], dtype=np.int64)
    window.setflags(write=False)
    return labels, window


def commitment_window(sets: PlanningSets, c: int) -> str:
    """The cash window (of ``purchase.max_upfront_usd``, which must be set) in which column ``c``'s fee is
    paid: the one its term starts in."""
    cap = sets.scenario.purchase.max_upfront_usd
    assert cap is not None
    return cash_window(sets.scenario.horizon.start + timedelta(hours=sets.columns[c].starts_hour), cap.per)


@dataclass
class PaymentSplit:
    """A model's commitments priced (:func:`payment_split`): the objective terms of every new column (its
    ``R`` at its cheapest option, or its split's ``P`` at each option's rate), the split's rows
    ``sum_k P[c,k] - R[c] = 0``, and per cash window the options' fee terms for :func:`cash_rows`."""

    objective: list[tuple[pulp.LpVariable, float]] = field(default_factory=list)
    rows: dict[str, list[tuple[pulp.LpVariable, float]]] = field(default_factory=dict)
    fees: dict[str, list[tuple[pulp.LpVariable, float]]] = field(default_factory=dict)


def payment_split(
    sets: PlanningSets,
    commit: Mapping[int, pulp.LpVariable],
    new_var: Callable[[str, float | None], pulp.LpVariable],
) -> PaymentSplit:
    """The new columns of ``commit`` priced for a model: under ``purchase.max_upfront_usd`` every one with
    an option that pays upfront split among its options inside the model (module docstring; ``new_var(name,
    upper)`` makes a whole (integer) variable), every other one at its cheapest option."""
    split, whole = PaymentSplit(), []
    capped = sets.scenario.purchase.max_upfront_usd is not None
    for c, nodes in commit.items():
        column = sets.columns[c]
        if not capped or column.existing or not any(option.upfront_usd > 0 for option in column.options):
            whole.append((nodes, column.cost_per_node))
            continue
        window = commitment_window(sets, c)
        row: list[tuple[pulp.LpVariable, float]] = [(nodes, -1.0)]
        for k, option in enumerate(column.options):
            paid = new_var(f"P_{c}_{k}", sets.offerings[column.offering].max_nodes)
            row.append((paid, 1.0))
            split.objective.append((paid, option.effective_usd_h * column.paid_hours))
            if option.upfront_usd > 0:
                split.fees.setdefault(window, []).append((paid, option.upfront_usd))
        split.rows[f"paid_{c}"] = row
    split.objective = whole + split.objective
    return split


def cash_rows(
    sets: PlanningSets,
    blocks: Mapping[str, list[tuple[pulp.LpVariable, float]]],
    split: PaymentSplit,
) -> dict[str, list[tuple[pulp.LpVariable, float]]]:
    """Row name -> terms of ``terms <= purchase.max_upfront_usd``, one per cash window: the fees of the
    Capacity Blocks starting in it (``blocks``: window -> (variable, fee)) and of the payment options of
    the columns whose terms start in it (``split.fees``). Empty without a limit."""
    if sets.scenario.purchase.max_upfront_usd is None:
        return {}
    windows = sorted(set(blocks) | set(split.fees))
    return {f"cash_{w.replace('-', '_')}": [*blocks.get(w, []), *split.fees.get(w, [])] for w in windows}


def _block_fee(option: TrainingOption) -> float:
    """A Capacity Block option's upfront fee (its own cost: ``sets._training_options``); 0 otherwise."""
    return option.cost_usd if option.tier == Capacity.BLOCK else 0.0


def block_cash_rows(sets: PlanningSets) -> dict[str, list[tuple[int, float]]]:
    """Window -> (option index, fee) of every Capacity Block option starting in it: a model's row is
    ``sum fee Y[a] <= cap`` per window (empty without a limit or without block options)."""
    labels, window = window_of_period(sets)
    if not labels:
        return {}
    rows: dict[str, list[tuple[int, float]]] = {}
    for a, option in enumerate(sets.options):
        if option.tier == Capacity.BLOCK:
            rows.setdefault(labels[int(window[option.start])], []).append((a, _block_fee(option)))
    return rows


def block_fees_by_window(sets: PlanningSets, placements: Iterable[TrainingOption]) -> dict[str, float]:
    """The fees of the Capacity Blocks ``placements`` buy, per window of ``purchase.max_upfront_usd``
    (each in the window its block starts, as ``planning/monthly.py`` counts the cash)."""
    labels, window = window_of_period(sets)
    fees: dict[str, float] = {}
    for option in placements:
        if labels and option.tier == Capacity.BLOCK:
            key = labels[int(window[option.start])]
            fees[key] = fees.get(key, 0.0) + _block_fee(option)
    return fees


def blocks_over_cap(sets: PlanningSets, placements: Iterable[TrainingOption]) -> list[str]:
    """The windows whose Capacity Block fees pass ``purchase.max_upfront_usd``, as readable lines."""
    cap = sets.scenario.purchase.max_upfront_usd
    if cap is None:
        return []
    return [
        f"{w}: Capacity Block fees ${fees:,.2f}, above purchase.max_upfront_usd (${cap.usd:,.2f})"
        for w, fees in sorted(block_fees_by_window(sets, placements).items())
        if fees > cap.usd + CAP_EPS_USD
    ]


def block_room(sets: PlanningSets, fee_by_start: np.ndarray, option: TrainingOption) -> np.ndarray | None:
    """Per period, whether a block of ``option`` may start then: its fee plus the fees of the blocks
    already placed (``fee_by_start``: per period, the fees of the blocks starting then) in that period's
    window within the limit. None where nothing limits it (no cap, or not a block)."""
    cap = sets.scenario.purchase.max_upfront_usd
    if cap is None or option.tier != Capacity.BLOCK:
        return None
    labels, window = window_of_period(sets)
    paid = np.bincount(window, weights=fee_by_start, minlength=len(labels))
    return paid[window] + _block_fee(option) <= cap.usd + CAP_EPS_USD


def fees_by_window(
    sets: PlanningSets, commits: dict[int, int], placements: Iterable[TrainingOption] = ()
) -> dict[str, float]:
    """The upfront fees of the node commitments bought (``commits``: new column -> nodes, each column paid
    as it now is) and of the Capacity Blocks ``placements`` buy, per window of ``purchase.max_upfront_usd``:
    what the savings plans bought after them may still pay upfront is the limit less these
    (``savings_purchase.buy_savings_plans``)."""
    cap = sets.scenario.purchase.max_upfront_usd
    if cap is None:
        return {}
    start = sets.scenario.horizon.start
    fees: dict[str, float] = block_fees_by_window(sets, placements)
    for c, nodes in commits.items():
        column = sets.columns[c]
        if nodes > 0 and not column.existing and column.upfront_usd:
            window = cash_window(start + timedelta(hours=column.starts_hour), cap.per)
            fees[window] = fees.get(window, 0.0) + nodes * column.upfront_usd
    return fees


def split_payments(
    sets: PlanningSets, commits: dict[int, int], placements: Iterable[TrainingOption] = ()
) -> dict[int, dict[str, int]]:
    """Bought column -> payment option -> nodes, for the columns of ``commits`` (new column -> nodes) that
    have a choice (module docstring), under the limit less the fees of the Capacity Blocks ``placements``
    buy in each window. Without a cash limit, or when every cheapest option fits it, each column keeps
    its cheapest option and nothing is split (an empty answer)."""
    cap = sets.scenario.purchase.max_upfront_usd
    choices = {
        c: n for c, n in commits.items() if n > 0 and not sets.columns[c].existing and sets.columns[c].options
    }
    if cap is None or not choices:
        return {}
    start = sets.scenario.horizon.start
    window = {c: cash_window(start + timedelta(hours=sets.columns[c].starts_hour), cap.per) for c in choices}
    blocks = block_fees_by_window(sets, placements)
    left = {w: max(0.0, cap.usd - blocks.get(w, 0.0)) for w in set(window.values())}
    cheapest: dict[str, float] = {}
    for c, n in choices.items():
        cheapest[window[c]] = cheapest.get(window[c], 0.0) + n * sets.columns[c].options[0].upfront_usd
    if all(fees <= left[w] + CAP_EPS_USD for w, fees in cheapest.items()):
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
                pulp.LpAffineExpression(fees), pulp.LpConstraintLE, f"cash_{w}", float(left[w])
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
