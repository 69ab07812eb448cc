"""The cloud billing rule, written once: how a commitment discounts the nodes running beside it.

How AWS reserved instances, GCP committed-use discounts and Azure reservations bill (and gpuplan's own
servers, ``owned``, count the same way): per offering and hour, with ``C`` committed nodes (every term
together, held and bought) and ``N`` non-spot nodes running (inference and training alike),

- ``min(N, C)`` nodes are covered by the commitments (:func:`covered_nodes`),
- ``max(0, N - C)`` nodes are paid on demand at the offering's rate (:func:`on_demand_nodes`),
- spot nodes ``S`` are paid at the spot rate, whatever is committed,
- and the commitments themselves are paid for every hour of their term, used or not
  (:func:`commitment_usd`).

:func:`pay_as_you_go_usd` prices one offering's hours by the rule; every evaluator of a plan uses it or
the two node counts (the plan's allocations, ``gpuplan verify``, the baselines, whole-replica rounding).
The optimization models cannot take ``max`` directly: :func:`pool_row` writes the same rule as the
linear row ``use - committed - on-demand <= fixed committed nodes``, whose optimum pays exactly
``max(0, N - C)`` on demand (the on-demand variable is priced, so it is never larger than it must be).
Every model builder (the staged MILP, the hourly method's per-period dispatch, the cluster bound and the
exact-start bound) builds its pool rows through it. Chargeback prices the plan's rows, which this rule
split into committed and on-demand parts (``planner/planning/optimize/solution.py``), at the rates of
:func:`row_rate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar, overload

import numpy as np

from models.tiers import Tier

__all__ = [
    "commitment_usd",
    "covered_nodes",
    "on_demand_nodes",
    "pay_as_you_go_usd",
    "pool_row",
    "row_rate",
]

K = TypeVar("K")


@overload
def covered_nodes(non_spot: float, committed: float) -> float: ...
@overload
def covered_nodes(non_spot: np.ndarray, committed: np.ndarray | float) -> np.ndarray: ...
def covered_nodes(non_spot: float | np.ndarray, committed: float | np.ndarray) -> float | np.ndarray:
    """Non-spot nodes the commitments cover: ``min(N, C)`` (element-wise on arrays)."""
    if isinstance(non_spot, np.ndarray) or isinstance(committed, np.ndarray):
        return np.minimum(non_spot, committed)
    return min(non_spot, committed)


@overload
def on_demand_nodes(non_spot: float, committed: float) -> float: ...
@overload
def on_demand_nodes(non_spot: np.ndarray, committed: np.ndarray | float) -> np.ndarray: ...
def on_demand_nodes(non_spot: float | np.ndarray, committed: float | np.ndarray) -> float | np.ndarray:
    """Non-spot nodes paid on demand: those beyond the commitments, ``max(0, N - C)``."""
    if isinstance(non_spot, np.ndarray) or isinstance(committed, np.ndarray):
        return np.maximum(0.0, non_spot - committed)
    return max(0.0, non_spot - committed)


def pay_as_you_go_usd(
    non_spot: np.ndarray | float,
    spot: np.ndarray | float,
    committed: np.ndarray | float,
    on_demand_usd_h: float | None,
    spot_usd_h: float | None,
    hours: float,
) -> float:
    """What one offering's hours cost beyond its commitments: the on-demand nodes at the on-demand rate and
    the spot nodes at the spot rate, each period of ``hours`` (arrays: one entry per period, summed)."""
    beyond = float(np.sum(on_demand_nodes(np.asarray(non_spot, dtype=float), committed)))
    cost = beyond * (on_demand_usd_h or 0.0) * hours
    spot_nodes = float(np.sum(spot))
    if spot_nodes:
        cost += spot_nodes * (spot_usd_h or 0.0) * hours
    return cost


def commitment_usd(nodes: float, usd_per_node_hour: float, hours: float) -> float:
    """A commitment's cost for ``hours`` of its term: every node, used or not."""
    return nodes * usd_per_node_hour * hours


def pool_row(
    use: Sequence[tuple[K, float]], committed: Sequence[tuple[K, float]], on_demand: K | None
) -> list[tuple[K, float]]:
    """The billing rule as one linear row of a model, for one offering in one period (its *pool*).

    ``use``: the non-spot nodes running (variable, coefficient); ``committed``: the committed nodes that
    are variables (bought in the model, coefficient +1 each); ``on_demand``: the variable of the nodes
    paid on demand, or None where the offering sells none (owned servers). The row's terms are
    ``use - committed - on_demand``; its upper bound is the fixed committed nodes less the non-spot nodes
    fixed elsewhere (placed training), so the row reads ``N - C <= on-demand``.
    """
    row = [*use, *[(key, -coefficient) for key, coefficient in committed]]
    if on_demand is not None:
        row.append((on_demand, -1.0))
    return row


def row_rate(tier: Tier | str, on_demand_usd_h: float | None, spot_usd_h: float | None) -> float:
    """USD per node-hour of an allocation row on ``tier``: committed tiers 0 (their commitment is paid by
    its term, whoever uses it), on demand and spot at their rates."""
    if tier == Tier.ON_DEMAND:
        return on_demand_usd_h or 0.0
    if tier == Tier.SPOT:
        return spot_usd_h or 0.0
    return 0.0
