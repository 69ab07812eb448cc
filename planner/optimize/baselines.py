"""Policies the optimal plan is compared against, priced on the same demand and catalog.

- **all on-demand**: every workload on its cheapest eligible on-demand offering, in whole nodes, each
  period; no commitments, no spot.
- **greedy**: what a per-launch optimizer (SkyPilot-style) does: for each workload and period, the
  cheapest eligible tier and offering with no commitments. Latency-critical services stay on
  on-demand; other services may use spot; preemptible training takes spot at its effective price
  (preemption overhead included) while the scenario's ``max_spot_share`` still has room, in the order
  the runs appear, else on-demand.

Both honour team guarantees the only way a policy without commitments can: a team whose use falls
below its guaranteed GPUs holds the difference as idle on-demand GPUs (cheapest eligible per GPU).
Both start every training run at its earliest start and ignore capacity limits (max_nodes) and
burst caps: they are reference prices, not plans.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from models.plan import Baselines
from models.tiers import Capacity
from planner.optimize.sets import PlanningSets


def _inference_cost(sets: PlanningSets, i: int, allow_spot: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per period: cheapest whole-node cost and the GPUs it holds, for service ``i``."""
    demand = sets.demand[i].astype(float)
    best_cost = np.full(demand.shape, np.inf)
    best_gpus = np.zeros(demand.shape)
    for o in sets.eligible(i):
        offering = sets.offerings[o]
        if offering.on_demand_usd_h is None:
            continue  # owned nodes: the baselines are cloud-only policies
        nodes = np.ceil(demand / sets.replicas_per_node[(i, o)])
        prices = [offering.on_demand_usd_h]
        if allow_spot and offering.spot_usd_h is not None:
            prices.append(offering.spot_usd_h)
        cost = nodes * min(prices) * sets.period_hours
        better = cost < best_cost
        best_cost = np.where(better, cost, best_cost)
        best_gpus = np.where(better, nodes * offering.gpus_per_node, best_gpus)
    if not sets.eligible(i):
        best_cost[:] = 0.0  # nothing can serve it: the plan lists it as unserved, the baseline skips it
    return best_cost, best_gpus


def _training_choice(sets: PlanningSets, r: int, allow_spot: bool) -> tuple[float, float, Capacity] | None:
    """(cost, held hours, tier) of the cheapest option of run ``r`` starting at its earliest start."""
    run = sets.runs[r]
    p = sets.period_hours
    best: tuple[float, float, Capacity] | None = None
    for option in sets.options:
        offering = sets.offerings[option.offering]
        if option.run != r or offering.on_demand_usd_h is None:
            continue  # owned nodes: the baselines are cloud-only policies
        if option.tier == Capacity.SPOT and not allow_spot:
            continue
        price = offering.spot_usd_h if option.tier == Capacity.SPOT else offering.on_demand_usd_h
        cost = run.job.nodes * (price or 0.0) * option.periods * p
        if best is None or cost < best[0]:
            best = (cost, option.periods * p, option.tier)
    return best


def _guarantee_top_up(sets: PlanningSets, team_gpus: dict[str, np.ndarray]) -> float:
    cost = 0.0
    for team in sets.scenario.teams:
        if team.guaranteed_gpus <= 0:
            continue
        rented = [
            sets.offerings[o]
            for o in sets.team_offerings.get(team.name, [])
            if sets.offerings[o].on_demand_usd_h is not None
        ]
        if not rented:
            continue
        offering = min(rented, key=lambda off: (off.on_demand_usd_h or 0.0) / off.gpus_per_node)
        missing = np.clip(team.guaranteed_gpus - team_gpus[team.name], 0, None)
        nodes = np.ceil(missing / offering.gpus_per_node)
        cost += float(nodes.sum()) * (offering.on_demand_usd_h or 0.0) * sets.period_hours
    return cost


def _policy(sets: PlanningSets, greedy: bool) -> float:
    periods = sets.scenario.horizon.periods
    p = sets.period_hours
    team_gpus: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(periods))
    total = 0.0
    for i, service in enumerate(sets.services):
        cost, gpus = _inference_cost(sets, i, allow_spot=greedy and not service.latency_critical)
        total += float(cost.sum())
        team_gpus[service.team] = team_gpus[service.team] + gpus
    share_left = math.inf
    if greedy:
        all_gpu_hours = sum(run.gpus * run.job.hours for run in sets.runs)
        share_left = sets.scenario.purchase.max_spot_share * all_gpu_hours
    for r, run in enumerate(sets.runs):
        gpu_hours = run.gpus * run.job.hours
        choice = _training_choice(sets, r, allow_spot=greedy and gpu_hours <= share_left)
        if choice is None:
            continue  # unplaceable: the plan reports it as unserved
        run_cost, held_hours, tier = choice
        if tier == Capacity.SPOT:
            share_left -= gpu_hours
        total += run_cost
        start = run.first_period
        team_gpus[run.job.team][start : start + math.ceil(held_hours / p)] += run.gpus
    return total + _guarantee_top_up(sets, team_gpus)


def compute_baselines(sets: PlanningSets) -> Baselines:
    return Baselines(
        all_on_demand_usd=_policy(sets, greedy=False),
        greedy_usd=_policy(sets, greedy=True),
        notes=[
            "all_on_demand: cheapest eligible on-demand offering per workload and period, whole nodes",
            "greedy: cheapest tier and offering per workload and period, no commitments; spot for "
            "preemptible training while max_spot_share allows",
            "both hold idle on-demand GPUs to honour team guarantees, and ignore max_nodes and burst caps",
        ],
    )
