"""The peers a plan is compared against: what users would otherwise pay, priced on the same demand.

A peer is a **usage** (the nodes a user without a planner holds, per offering and period) and a purchase
policy priced on it. Two usages (issue 39, point 5):

- **fleet** (``fleet_usage``), how a competent user runs a fleet: each service stays on *one* offering for
  the horizon, the one where its forecast adds least to the bill of the services placed before it (on
  demand, spot where it may run on spot and that is cheaper, the reservations already held and the best
  single commitment level over the horizon counted, so services pool where pooling pays);
  where that offering's ``max_nodes`` runs out in a period the replicas overflow to the next offering of
  its ranking. Replicas on one offering and tier are packed the way a user with mig-parted
  (https://github.com/NVIDIA/mig-parted) would (the
  plan's packing code, ``planner.planning.mig.packing``: MIG slices of all services onto the fewest GPUs,
  then whole-GPU replicas and those GPUs onto the fewest nodes). Each training run starts at its window's
  start on its cheapest option (offering and tier; preemptible runs on spot at the effective price,
  expected preemption overhead included, while ``max_spot_share`` has room, in the order the runs
  appear) whose offering has room for the whole gang.
- **per period** (``per_launch_usage``): each service and period on its cheapest eligible offering (whole
  nodes for that service alone, then packed as above); training as above without capacity limits. A
  service hops between offerings hour by hour, which no fleet does, and lookback commitments land on the
  wrong offerings: a lower reference, never the best peer.

The peers:

- **all on-demand** (the reference of the product's headline claim; per period, so the claim stays
  conservative): no spot, no commitments. Without commitments the only way to honour a team's guarantee
  is to hold idle on-demand GPUs: a team whose use falls below its ``guaranteed_gpus`` holds the
  difference on its cheapest eligible offering per GPU (the notes give the figure without that rule too).
- **per-period cheapest (not a runnable policy)** (``greedy``, per period): spot included, no
  commitments, guarantees held as idle on-demand GPUs like all on-demand.
- **one offering per service, no commitments** (``greedy``, fleet): the fleet, on demand and spot.
- **lookback** (the cloud's recommendation: AWS Cost Explorer RI / Savings Plans, Azure Advisor) on the
  fleet: per offering, every hourly usage level seen in the lookback (7, 30 or 60 days) is a candidate
  number of nodes to commit; the one with the largest simulated saving over the lookback is bought, on 1y
  or 3y. Per offering, as AWS RIs are per instance type and region. The best of the 6 combinations.
  (https://docs.aws.amazon.com/cost-management/latest/userguide/ri-recommendations.html: the
  recommendation is computed from the usage of the lookback period, 7, 30 or 60 days.)
- **coverage** (the Terraform savings-plan autopilot modules) on the fleet: commit the p-th percentile of
  the hourly use per offering over a 30-day lookback, p0 (the always-on floor) and p50, on the cheaper term.
- **savings plan** (the cloud's savings-plan recommendation, AWS Cost Explorer ``LookbackPeriodInDays``) on
  the fleet: where the scenario may buy savings plans, the USD-per-hour commitment with the largest saving
  over the lookback, billed by the cloud's rule, for the best kind, term and lookback.

The **best peer** (``Baselines.best_peer``, the report's "vs best peer") is the cheapest fleet peer.

There is no history before the horizon, so **the lookback is the first L days of the horizon's
forecast**, standing in for the last L days of history; the commitment chosen is billed over the
whole horizon. A committing peer also backs each team's guarantee the way the plan does (build.py row
8): committed GPUs on offerings the team can use, already-bought ones first, else more nodes of the
team's cheapest committable offering per GPU; those nodes serve usage too.

**Billing rule** of every peer (``models/billing.py``, as for the plan, hour by hour): per offering and
period, its committed nodes cover any non-spot node of that offering (inference or training); usage above
them is paid on demand; commitments are paid every hour of the horizon, used or not; spot is paid as used.
Every peer, all on-demand included, also holds the commitments the fleet holds already (scenario
``commitments:``): paid as the plan pays them, covering the peer's usage on their offering inside their
window. All peers are cloud-only (no owned nodes) and ignore burst caps; only the fleet usage honours
``max_nodes`` (what finds no room is named in the peer's ``how`` and left out of its cost): they are
reference prices, not plans.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from models.billing import commitment_usd, on_demand_nodes
from models.mig import replica_slice, replicas_per_gpu
from models.plan import Baselines, Peer, PeerCommitment, PeerPolicy, PeerSavingsPlan
from models.savingsplans import SavingsPlan, bill_hours, coverage_order
from models.tiers import CLOUD_TERMS, HOURS_PER_YEAR, TERM_TIER, Capacity, Term
from planner.planning.mig.packing import pack

if TYPE_CHECKING:  # types only: planner.planning.optimize imports this module (run.py), not the reverse
    from planner.planning.problem.sets import PlanningSets

__all__ = [
    "FLEET_PEER",
    "LOOKBACK_DAYS",
    "PER_PERIOD_PEER",
    "Usage",
    "bill",
    "compute_baselines",
    "coverage_level",
    "fleet_usage",
    "lookback_level",
    "per_launch_usage",
    "service_ranking",
]

LOOKBACK_DAYS: tuple[int, ...] = (7, 30, 60)
COVERAGE_PERCENTILES: tuple[int, ...] = (0, 50)
COVERAGE_LOOKBACK_DAYS = 30
#: The lower reference of issue 39: per-period choices no fleet runs, kept by name, never the best peer.
PER_PERIOD_PEER = "per-period cheapest (not a runnable policy)"
#: The fleet without commitments: one offering per service, spot where it is cheaper.
FLEET_PEER = "one offering per service, no commitments"

#: (offering, term) -> nodes committed
Commits = dict[tuple[int, Term], int]


@dataclass(frozen=True)
class PeerPlan:
    """A savings plan a peer buys at the horizon's start: the plan as the rule bills it, and the hours of
    its term after the horizon (its obligation)."""

    plan: SavingsPlan
    beyond_hours: float


@dataclass
class Usage:
    """What a policy without a planner holds, per offering and period, in whole nodes."""

    nonspot: np.ndarray  # (offerings, periods) nodes on demand: what a commitment can cover
    spot: np.ndarray  # (offerings, periods) spot nodes held for inference
    spot_training_usd: float  # spot training, expected preemption overhead included
    team_gpus: dict[str, np.ndarray] = field(default_factory=dict)  # GPUs each team holds per period
    #: service index -> the offerings it runs on at some period (tests and notes: hopping or not)
    service_offerings: dict[int, set[int]] = field(default_factory=dict)
    #: replica-hours no offering had room for (fleet usage under max_nodes; always 0 per period)
    unserved_replica_hours: float = 0.0
    #: training runs no offering had room for at their window's start (fleet usage under max_nodes)
    unplaced_runs: list[str] = field(default_factory=list)


# ---- usage: per period and fleet -------------------------------------------------------------


def _mig_profile(sets: PlanningSets, i: int, o: int) -> str | None:
    """The MIG profile one replica of service ``i`` takes on offering ``o`` (None: whole GPUs)."""
    service, offering = sets.services[i], sets.offerings[o]
    profile = replica_slice(offering.gpu_model, service.gpu_memory_gb, service.gpu_compute_share)
    return profile.name if profile is not None else None


def _gpus_per_replica(sets: PlanningSets, i: int, o: int) -> int:
    """Whole GPUs one replica of service ``i`` takes on offering ``o`` (its MIG profile aside)."""
    service, offering = sets.services[i], sets.offerings[o]
    if service.gpus_per_replica is not None:
        return service.gpus_per_replica
    assert service.gpu_memory_gb is not None  # guaranteed by the scenario validator
    per_gpu = replicas_per_gpu(
        offering.gpu_model, offering.gpu_memory_gb, service.gpu_memory_gb, service.gpu_compute_share
    )
    return 1 if per_gpu >= 1 else round(1 / per_gpu)


def pool_nodes(
    sets: PlanningSets, o: int, replicas: Mapping[int, np.ndarray], packed: bool = True
) -> np.ndarray:
    """Nodes of offering ``o`` per period holding ``replicas[i]`` replicas of each service ``i``.

    Packed: MIG replicas of all services onto the fewest GPUs (``pack``), then GPUs onto nodes. Sizes
    that divide the node fill it exactly (largest first); a size that does not (3 GPUs of 8) gets nodes
    of its own, whose spare GPUs take single-GPU pieces. Unpacked: each service on nodes of its own
    (``ceil(replicas / per node)``).
    """
    periods = sets.scenario.horizon.periods
    if not packed:
        total = np.zeros(periods)
        for i, d in replicas.items():
            total += np.ceil(d / sets.replicas_per_node[(i, o)] - 1e-9)
        return total
    g = sets.offerings[o].gpus_per_node
    single = np.zeros(periods)  # single-GPU pieces: MIG-packed GPUs and 1-GPU replicas
    larger = np.zeros(periods)  # GPUs of replicas whose size (> 1) divides the node
    own = np.zeros(periods)  # nodes of replicas whose size does not divide the node
    spare = np.zeros(periods)  # their GPUs left over
    mig: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(periods, dtype=np.int64))
    for i, d in replicas.items():
        profile = _mig_profile(sets, i, o)
        if profile is not None:
            mig[profile] += np.ceil(d - 1e-9).astype(np.int64)
            continue
        size = _gpus_per_replica(sets, i, o)
        if size == 1:
            single += d
        elif g % size == 0:
            larger += d * size
        else:
            nodes = np.ceil(d / (g // size) - 1e-9)
            own += nodes
            spare += nodes * g - d * size
    if mig:
        model = sets.offerings[o].gpu_model
        names = sorted(mig)
        matrix = np.vstack([mig[n] for n in names]).T
        unique, inverse = np.unique(matrix, axis=0, return_inverse=True)
        gpus = [pack(model, dict(zip(names, (int(x) for x in row), strict=True))).gpus for row in unique]
        single += np.array(gpus)[inverse.reshape(-1)]
    rest = larger + np.clip(single - spare, 0.0, None)
    return own + np.ceil(rest / g - 1e-9)


def _service_choice(sets: PlanningSets, i: int, allow_spot: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per period, the (offering, tier code 0 on demand / 1 spot) of service ``i`` alone in whole nodes.

    Offering -1 where the service has no cloud offering (the plan lists it as unserved)."""
    demand = sets.demand[i].astype(float)
    best_cost = np.full(demand.shape, np.inf)
    best_o = np.full(demand.shape, -1, dtype=np.int64)
    best_tier = np.zeros(demand.shape, dtype=np.int64)
    for o in sets.eligible(i):
        offering = sets.offerings[o]
        if offering.on_demand_usd_h is None:
            continue  # owned nodes: peers are cloud-only policies
        nodes = np.ceil(demand / sets.replicas_per_node[(i, o)] - 1e-9)
        prices = [(offering.on_demand_usd_h, 0)]
        if allow_spot and offering.spot_usd_h is not None:
            prices.append((offering.spot_usd_h, 1))
        price, tier = min(prices)
        cost = nodes * price
        better = cost < best_cost
        best_cost = np.where(better, cost, best_cost)
        best_o = np.where(better, o, best_o)
        best_tier = np.where(better, tier, best_tier)
    return best_o, best_tier


def _training_choices(sets: PlanningSets, r: int, allow_spot: bool) -> list[tuple[float, int, int, Capacity]]:
    """(cost, periods held, offering, tier) of run ``r``'s on-demand and spot options, cheapest first
    (one per offering and tier: the start does not change the cost)."""
    run = sets.runs[r]
    p = sets.period_hours
    best: dict[tuple[int, Capacity], tuple[float, int, int, Capacity]] = {}
    for option in sets.options:
        offering = sets.offerings[option.offering]
        if option.run != r or offering.on_demand_usd_h is None or option.tier.own_nodes:
            continue  # owned nodes, Capacity Blocks: the peers buy neither
        if option.tier == Capacity.SPOT and not allow_spot:
            continue
        price = offering.spot_usd_h if option.tier == Capacity.SPOT else offering.on_demand_usd_h
        cost = run.job.nodes * (price or 0.0) * option.periods * p
        key = (option.offering, option.tier)
        if key not in best or cost < best[key][0]:
            best[key] = (cost, option.periods, option.offering, option.tier)
    return sorted(best.values(), key=lambda x: (x[0], x[2], x[3] == Capacity.SPOT))


def _training_choice(sets: PlanningSets, r: int, allow_spot: bool) -> tuple[float, int, int, Capacity] | None:
    """(cost, periods held, offering, tier) of run ``r``'s cheapest on-demand or spot option."""
    choices = _training_choices(sets, r, allow_spot)
    return choices[0] if choices else None


def _pooled(
    sets: PlanningSets,
    pools: Mapping[tuple[int, int], Mapping[int, np.ndarray]],
    packed: bool,
) -> Usage:
    """Whole nodes per offering and period of ``pools`` ((offering, tier code 0 on demand / 1 spot) ->
    service -> replicas per period): services that share a pool in a period share its nodes."""
    periods = sets.scenario.horizon.periods
    n_off = len(sets.offerings)
    usage = Usage(np.zeros((n_off, periods)), np.zeros((n_off, periods)), 0.0)
    team_gpus: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(periods))
    for (o, t), replicas in pools.items():
        nodes = pool_nodes(sets, o, replicas, packed)
        (usage.spot if t else usage.nonspot)[o] += nodes
        # the pool's GPUs, shared among its services' teams by the node-share each would take alone
        weights = {i: d / sets.replicas_per_node[(i, o)] for i, d in replicas.items()}
        total = np.maximum(sum(weights.values()), 1e-12)
        gpus = nodes * sets.offerings[o].gpus_per_node
        for i, w in weights.items():
            team_gpus[sets.services[i].team] += gpus * w / total
            if w.any():
                usage.service_offerings.setdefault(i, set()).add(o)
    usage.team_gpus = team_gpus
    return usage


def _spot_share(sets: PlanningSets, allow_spot: bool) -> float:
    """Training GPU-hours spot may take (``max_spot_share`` of them all; none without spot)."""
    if not allow_spot:
        return math.inf
    return sets.scenario.purchase.max_spot_share * sum(run.gpus * run.job.hours for run in sets.runs)


def per_launch_usage(sets: PlanningSets, allow_spot: bool, packed: bool = True) -> Usage:
    """The per-period usage (module docstring): each service on its cheapest offering *per period*, a
    lower reference no fleet runs (a service would hop between offerings hour by hour)."""
    pools: dict[tuple[int, int], dict[int, np.ndarray]] = defaultdict(dict)
    for i, service in enumerate(sets.services):
        chosen, tier = _service_choice(sets, i, allow_spot and not service.latency_critical)
        for o in np.unique(chosen[chosen >= 0]):
            for t in (0, 1):
                mask = (chosen == o) & (tier == t)
                if mask.any():
                    pools[(int(o), t)][i] = np.where(mask, sets.demand[i], 0).astype(float)
    usage = _pooled(sets, pools, packed)
    share_left = _spot_share(sets, allow_spot)
    for r, run in enumerate(sets.runs):
        gpu_hours = run.gpus * run.job.hours
        choice = _training_choice(sets, r, allow_spot=allow_spot and gpu_hours <= share_left)
        if choice is None:
            continue  # unplaceable: the plan reports it as unserved
        cost, held, o, kind = choice
        start = run.first_period
        if kind == Capacity.SPOT:
            share_left -= gpu_hours
            usage.spot_training_usd += cost
        else:
            usage.nonspot[o, start : start + held] += run.job.nodes
        usage.team_gpus[run.job.team][start : start + held] += run.gpus
    return usage


def _nonspot_usd(sets: PlanningSets, o: int, nodes: np.ndarray, held: np.ndarray) -> float:
    """What non-spot ``nodes`` (per period) of offering ``o`` cost over the horizon: those beyond the
    ``held`` commitments' nodes (already paid) at the best single commitment level over the horizon
    (:func:`lookback_level` on the whole series, each allowed term), the rest on demand."""
    offering, p, hours = sets.offerings[o], sets.period_hours, sets.horizon_hours
    od = offering.on_demand_usd_h or 0.0
    nodes = np.clip(nodes - held, 0, None)
    best = float(nodes.sum()) * od * p
    for term in _terms(sets):
        rate = commit_price(sets, o, term)
        if rate is None:
            continue
        level = lookback_level(nodes, od, rate)  # every period p hours: both sides scale alike
        above = float(np.clip(nodes - level, 0, None).sum()) * od * p
        best = min(best, commitment_usd(level, rate, hours) + above)
    return best


def service_ranking(
    sets: PlanningSets,
    i: int,
    allow_spot: bool,
    pools: Mapping[tuple[int, int], Mapping[int, np.ndarray]] | None = None,
    packed: bool = True,
) -> list[tuple[int, int]]:
    """Service ``i``'s (offering, tier code 0 non-spot / 1 spot) choices, cheapest first, ties to the
    lower index: what its whole horizon's demand adds to the bill of the ``pools`` already placed
    ((offering, tier) -> service -> replicas per period; none by default), their replicas and its own
    packed together (:func:`pool_nodes`). On spot, the added nodes as used; off spot, the added
    :func:`_nonspot_usd`, the fleet's reservations held and the best commitment level counted.

    How a user picks an instance type for a service: by its price over the year's forecast beside the
    services already running (so services pool where pooling pays), the reservations held and new
    commitments included; the service then stays there. Owned nodes are no choice (peers are
    cloud-only)."""
    demand = sets.demand[i].astype(float)
    held = sets.committed({})
    pools = pools or {}
    p = sets.period_hours
    ranked: list[tuple[float, int, int]] = []
    for o in sets.eligible(i):
        offering = sets.offerings[o]
        if offering.on_demand_usd_h is None:
            continue
        tiers = [0, 1] if allow_spot and offering.spot_usd_h is not None else [0]
        for t in tiers:
            there = dict(pools.get((o, t), {}))
            before = pool_nodes(sets, o, there, packed) if there else np.zeros_like(demand)
            there[i] = there[i] + demand if i in there else demand
            after = pool_nodes(sets, o, there, packed)
            if t:
                added = float((after - before).sum()) * (offering.spot_usd_h or 0.0) * p
            else:
                added = _nonspot_usd(sets, o, after, held[o]) - _nonspot_usd(sets, o, before, held[o])
            ranked.append((added, o, t))
    ranked.sort()
    # one tier per offering: the cheaper of the two stands for it
    seen: set[int] = set()
    result: list[tuple[int, int]] = []
    for _cost, o, t in ranked:
        if o not in seen:
            seen.add(o)
            result.append((o, t))
    return result


def _room(sets: PlanningSets) -> np.ndarray:
    """Nodes each offering can still supply per period (``max_nodes``; inf where unlimited)."""
    periods = sets.scenario.horizon.periods
    limits = [math.inf if off.max_nodes is None else float(off.max_nodes) for off in sets.offerings]
    return np.repeat(np.array(limits, dtype=float)[:, None], periods, axis=1)


def fleet_usage(sets: PlanningSets, allow_spot: bool, packed: bool = True) -> Usage:
    """The usage of a fleet a competent user runs without a planner (module docstring).

    Each service, in the scenario's order, stays on the first offering of :func:`service_ranking` (what
    it adds to the bill of the services placed before it) for the horizon; in a period where that
    offering has no room left (``max_nodes``, counted in the service's own whole nodes, which packing
    can only lower), the replicas beyond it overflow to the next offering of its ranking, and so on.
    Replicas on one offering and tier are then packed (MIG slices of all services, then whole GPUs,
    ``pool_nodes``). Each training run starts at its window's start on its
    cheapest option (offering and tier, spot while ``max_spot_share`` has room) whose offering has room
    for the whole gang while it runs; a run with no such option is listed in ``unplaced_runs``.
    """
    room = _room(sets)
    pools: dict[tuple[int, int], dict[int, np.ndarray]] = defaultdict(dict)
    unserved = 0.0
    for i, service in enumerate(sets.services):
        left = sets.demand[i].astype(float)
        for o, t in service_ranking(sets, i, allow_spot and not service.latency_critical, pools, packed):
            if not left.any():
                break
            per_node = sets.replicas_per_node[(i, o)]
            fits = np.minimum(left, np.floor(room[o] * per_node + 1e-9))
            if fits.any():
                pools[(o, t)][i] = fits
                nodes = np.ceil(fits / per_node - 1e-9)
                room[o] -= nodes
                left = left - fits
        unserved += float(left.sum()) * sets.period_hours
    usage = _pooled(sets, pools, packed)
    usage.unserved_replica_hours = unserved
    # training where the inference pools leave room: the packed nodes, not the services' own
    room = _room(sets) - usage.nonspot - usage.spot
    share_left = _spot_share(sets, allow_spot)
    for r, run in enumerate(sets.runs):
        gpu_hours = run.gpus * run.job.hours
        spot_ok = allow_spot and gpu_hours <= share_left
        start = run.first_period
        placed = False
        for cost, length, o, kind in _training_choices(sets, r, spot_ok):
            window = slice(start, start + length)
            if (room[o, window] < run.job.nodes - 1e-9).any():
                continue
            room[o, window] -= run.job.nodes
            if kind == Capacity.SPOT:
                share_left -= gpu_hours
                usage.spot_training_usd += cost
            else:
                usage.nonspot[o, window] += run.job.nodes
            usage.team_gpus[run.job.team][window] += run.gpus
            placed = True
            break
        if not placed and any(option.run == r for option in sets.options):
            usage.unplaced_runs.append(f"{run.name} #{run.run}" if run.run else run.name)
    return usage


# ---- billing ---------------------------------------------------------------------------------------


def commit_price(sets: PlanningSets, o: int, term: Term) -> float | None:
    """USD per node-hour of committing offering ``o`` on ``term`` (None: not allowed or not sold)."""
    offering = sets.offerings[o]
    if offering.owned or term not in sets.scenario.purchase.terms:
        return None
    return offering.price(TERM_TIER[term])


def bill(
    sets: PlanningSets, usage: Usage, commits: Commits, plans: Sequence[PeerPlan] = ()
) -> tuple[float, float]:
    """(cost over the horizon, obligation after it) of ``usage`` with ``commits`` and the savings ``plans``
    the peer buys (billing rule above; every peer also holds the fleet's savings plans)."""
    p, hours = sets.period_hours, sets.horizon_hours
    covered = sets.committed({})  # the commitments held already: every peer has them
    total, beyond = sets.fixed_usd, 0.0
    for (o, term), nodes in commits.items():
        rate = commit_price(sets, o, term) or 0.0
        covered[o] += nodes
        total += commitment_usd(nodes, rate, hours)
        beyond += commitment_usd(nodes, rate, max(0.0, (Term(term).years or 0) * HOURS_PER_YEAR - hours))
    held = sets.savings_plans()
    above: dict[str, np.ndarray] = {}
    for o, offering in enumerate(sets.offerings):
        if held or plans:
            above[offering.id] = on_demand_nodes(usage.nonspot[o], covered[o])
        else:
            total += (
                float(on_demand_nodes(usage.nonspot[o], covered[o]).sum())
                * (offering.on_demand_usd_h or 0.0)
                * p
            )
        if usage.spot[o].any():
            total += float(usage.spot[o].sum()) * (offering.spot_usd_h or 0.0) * p
    if held or plans:  # on demand what the plans leave, by the cloud's rule (models/savingsplans.py)
        prices = {offering.id: offering.on_demand_usd_h or 0.0 for offering in sets.offerings}
        bought = [peer.plan for peer in plans]
        total += bill_hours(above, prices, [*held, *bought], hours_per_step=float(p)).on_demand_usd
        for peer in plans:
            end = len(sets.slot_of_period) if peer.plan.end is None else peer.plan.end
            total += peer.plan.usd_per_hour * (end - peer.plan.start) * p
            beyond += peer.plan.usd_per_hour * peer.beyond_hours
    return total + usage.spot_training_usd, beyond


def guarantee_top_up(sets: PlanningSets, team_gpus: Mapping[str, np.ndarray]) -> float:
    """Idle on-demand GPUs that honour guarantees without commitments (cheapest eligible per GPU)."""
    periods = sets.scenario.horizon.periods
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
        used = team_gpus.get(team.name, np.zeros(periods))
        missing = np.clip(team.guaranteed_gpus - used, 0, None)
        nodes = np.ceil(missing / offering.gpus_per_node - 1e-9)
        cost += float(nodes.sum()) * (offering.on_demand_usd_h or 0.0) * sets.period_hours
    return cost


def back_guarantees(sets: PlanningSets, commits: Commits, term: Term) -> tuple[Commits, int]:
    """``commits`` plus the nodes needed to back every team's guarantee, and how many were added.

    As the plan does (build.py row 8): a team's guaranteed GPUs are committed GPUs on offerings it can
    use and that are delivered; GPUs already bought back guarantees first (each GPU backs one team),
    the rest is bought on ``term`` (else any allowed cloud term) on the team's cheapest such offering
    per GPU. A team with no committable offering stays unbacked, as in the plan.
    """
    result: Commits = dict(commits)
    free: dict[int, float] = defaultdict(float)
    for (o, _term), nodes in result.items():
        free[o] += nodes * sets.offerings[o].gpus_per_node
    added = 0
    for team in sets.scenario.teams:
        need = float(team.guaranteed_gpus)
        if need <= 0:
            continue
        usable = [
            o for o in sets.team_offerings.get(team.name, []) if sets.offerings[o].available_from_hour <= 0
        ]
        for o in usable:
            take = min(free[o], need)
            free[o] -= take
            need -= take
        if need <= 0:
            continue
        options = [
            (price / sets.offerings[o].gpus_per_node, o, k)
            for o in usable
            for k in (term, *(t for t in CLOUD_TERMS if t != term))
            if (price := commit_price(sets, o, k)) is not None
        ]
        if not options:
            continue
        best = min(options, key=lambda x: (x[2] != term, x[0], x[1]))  # the peer's own term first
        _rate, o, k = best
        nodes = math.ceil(need / sets.offerings[o].gpus_per_node - 1e-9)
        result[(o, k)] = result.get((o, k), 0) + nodes
        free[o] += nodes * sets.offerings[o].gpus_per_node - need
        added += nodes
    return result, added


# ---- what the peers commit -------------------------------------------------------------------------


def lookback_level(series: np.ndarray, on_demand_usd_h: float, commit_usd_h: float) -> int:
    """The commitment (nodes) with the largest saving over ``series`` (hourly nodes used), as the clouds'
    recommenders simulate it: every level seen is a candidate; ties go to the smaller level.

    Saving of level c = sum_t min(u_t, c) * on_demand - c * commit * len(series) (per hour of one
    period; the period length scales both sides alike).
    """
    best_level, best_saving = 0, 0.0
    for level in np.unique(series):
        c = int(level)
        if c <= 0:
            continue
        saving = float(np.minimum(series, c).sum()) * on_demand_usd_h - c * commit_usd_h * len(series)
        if saving > best_saving + 1e-9:
            best_level, best_saving = c, saving
    return best_level


def savings_plan_level(
    usage: Mapping[str, np.ndarray],
    on_demand_usd_h: Mapping[str, float],
    plan: SavingsPlan,
    held: Sequence[SavingsPlan] = (),
    hours_per_step: float = 1.0,
) -> float:
    """The commitment (USD per hour) of a plan of ``plan``'s kind and rates with the largest saving over
    ``usage`` (offering -> nodes the node commitments leave on demand, per step), beside the ``held``
    plans, as AWS Cost Explorer's Savings Plans recommendation simulates its lookback: billed by the rule
    (``bill_hours``) at every candidate, the amounts where the saving can change slope (each step's
    spend, at the plan's rates, on what the held plans leave, offering by offering in coverage order);
    ties go to the smaller amount, and 0 when nothing saves."""
    base = bill_hours(usage, on_demand_usd_h, held, hours_per_step)
    spend = np.zeros(max((len(v) for v in usage.values()), default=0))
    candidates: set[float] = set()
    for offering in coverage_order(plan, on_demand_usd_h):
        if offering in base.on_demand:
            spend = spend + base.on_demand[offering] * plan.rates[offering]
            candidates |= {round(float(v), 3) for v in np.unique(spend) if v > 0}
    best, best_cost = 0.0, base.total_usd
    for amount in sorted(candidates):
        trial = SavingsPlan(plan.name, plan.kind, amount, plan.rates, plan.start, plan.end)
        cost = bill_hours(usage, on_demand_usd_h, [*held, trial], hours_per_step).total_usd
        if cost < best_cost - 1e-9:
            best, best_cost = amount, cost
    return best


def coverage_level(series: np.ndarray, percentile: float) -> int:
    """Nodes covering the ``percentile``-th percentile of ``series``, floored (never above the target)."""
    if not len(series):
        return 0
    return math.floor(float(np.percentile(series, percentile)) + 1e-9)


def window_periods(sets: PlanningSets, days: int) -> int:
    """Periods in the first ``days`` days of the horizon (all of it when the horizon is shorter)."""
    return min(sets.scenario.horizon.periods, max(1, math.ceil(days * 24 / sets.period_hours)))


def _levels(sets: PlanningSets, usage: Usage, term: Term, rule: str, days: int, percentile: float) -> Commits:
    window = window_periods(sets, days)
    commits: Commits = {}
    for o, offering in enumerate(sets.offerings):
        rate = commit_price(sets, o, term)
        if rate is None or offering.on_demand_usd_h is None:
            continue
        series = usage.nonspot[o, :window]
        if rule == "lookback":
            level = lookback_level(series, offering.on_demand_usd_h, rate)
        else:
            level = coverage_level(series, percentile)
        if level > 0:
            commits[(o, term)] = level
    return commits


@dataclass
class _Priced:
    """A committing peer's choice, priced: name, policy, cost, obligation, commitments."""

    name: str
    policy: PeerPolicy
    term: Term
    total: float
    beyond: float
    commits: Commits
    guarantee_nodes: int  # nodes bought only to back guarantees


def _price(
    sets: PlanningSets, usage: Usage, rule: Literal["lookback", "coverage"], days: int, pct: float, term: Term
) -> _Priced:
    commits = _levels(sets, usage, term, rule, days, pct)
    backed, added = back_guarantees(sets, commits, term)
    total, beyond = bill(sets, usage, backed)
    name = f"lookback {days} d, {term}" if rule == "lookback" else f"coverage p{pct:g}, {term}"
    return _Priced(name, rule, term, total, beyond, backed, added)


def _terms(sets: PlanningSets) -> list[Term]:
    return [t for t in CLOUD_TERMS if t in sets.scenario.purchase.terms]


def _usd(value: float) -> str:
    return f"${value:,.0f}"


def _committing_peers(sets: PlanningSets, usage: Usage) -> list[Peer]:
    """The best lookback recommendation (of 3 lookbacks x the terms) and each coverage target."""
    terms = _terms(sets)
    if not terms:
        return []
    horizon_days = sets.horizon_hours / 24
    tried = [_price(sets, usage, "lookback", d, 0, k) for d in LOOKBACK_DAYS for k in terms]
    best = min(tried, key=lambda x: x.total)
    days = LOOKBACK_DAYS[tried.index(best) // len(terms)]
    others = [x.total for x in tried if x is not best]
    short = f" (the horizon is only {horizon_days:g} d)" if days > horizon_days else ""
    spread = f"; the other {len(others)}: {_usd(min(others))} to {_usd(max(others))}" if others else ""
    peers = [
        _peer(
            sets,
            best,
            f"cloud recommendation: per offering, the hourly level with the largest saving over the "
            f"first {days} d of the forecast{short}, on {best.term}; best of "
            f"{'/'.join(map(str, LOOKBACK_DAYS))} d x {'/'.join(terms)}{spread}",
        )
    ]
    window = COVERAGE_LOOKBACK_DAYS
    for pct in COVERAGE_PERCENTILES:
        best = min((_price(sets, usage, "coverage", window, pct, k) for k in terms), key=lambda x: x.total)
        what = "the always-on floor (p0) of" if pct == 0 else f"the p{pct} of"
        peers.append(
            _peer(
                sets,
                best,
                f"coverage target: per offering, {what} hourly use over the first {window} d of the "
                f"forecast, floored to whole nodes, on {best.term} (the cheaper of {'/'.join(terms)})",
            )
        )
    return peers


def _savings_plan_peer(sets: PlanningSets, usage: Usage) -> Peer | None:
    """The cloud's savings-plan recommendation (AWS Cost Explorer, Azure Advisor): for each kind, term and
    scope the scenario may buy, the hourly commitment with the largest saving over the first L days of
    the forecast (:func:`savings_plan_level`), bought at the horizon's start and billed over the whole
    horizon; the cheapest of them all over 7/30/60 d. None when the scenario buys no savings plan."""
    p = sets.period_hours
    periods = len(sets.slot_of_period)
    starting = [k for k in sets.new_plans if sets.plans[k].start == 0]
    if not starting:
        return None
    ids = [offering.id for offering in sets.offerings]
    prices = {offering.id: offering.on_demand_usd_h or 0.0 for offering in sets.offerings}
    covered = sets.committed({})
    above = {ids[o]: on_demand_nodes(usage.nonspot[o], covered[o]) for o in range(len(ids))}
    held = sets.savings_plans()
    tried: list[tuple[float, float, int, int, float]] = []  # total, beyond, column, days, USD/h
    for k in starting:
        column, group = sets.plans[k], sets.groups[sets.plans[k].group]
        rates = {ids[o]: rate for o, rate in sets.group_rates[column.group].items()}
        template = SavingsPlan(group.name, group.kind, 0.0, rates, 0, column.end)
        for days in LOOKBACK_DAYS:
            window = window_periods(sets, days)
            level = savings_plan_level(
                {oid: series[:window] for oid, series in above.items()}, prices, template,
                [h for h in held if h.start < window], float(p),
            )  # fmt: skip
            bought = SavingsPlan(group.name, group.kind, level, rates, 0, min(column.end, periods))
            total, beyond = bill(sets, usage, {}, [PeerPlan(bought, column.beyond_hours)] if level else [])
            tried.append((total, beyond, k, days, level))
    total, beyond, k, days, level = min(tried, key=lambda x: (x[0], x[3], x[2]))
    group = sets.groups[sets.plans[k].group]
    term = Term.ONE_YEAR if group.term_years == 1 else Term.THREE_YEARS
    start = sets.scenario.horizon.start
    bought_plans = (  # what it buys, in plan.json, so gpuplan futures can price it on other demand
        [PeerSavingsPlan(kind=group.kind, term=term, scope=group.scope, usd_per_hour=level, start=start)]
        if level > 0
        else []
    )
    return Peer(
        name=f"savings plan lookback {days} d, {group.kind.removeprefix('savings-plan-')} {term}",
        policy="savings_plan",
        usage="fleet",
        total_usd=total,
        obligation_beyond_horizon_usd=beyond,
        savings_plans=bought_plans,
        how=f"cloud savings-plan recommendation: {group.name} at ${level:,.3f}/h, the commitment with the "
        f"largest saving over the first {days} d of the forecast (billed by the rule, best savings first), "
        f"bought at the start; best of {'/'.join(map(str, LOOKBACK_DAYS))} d x {len(starting)} kinds, terms "
        "and scopes; on the fleet (one offering per service), the rest on demand, spot as the fleet uses it",
    )


def _peer(sets: PlanningSets, priced: _Priced, how: str) -> Peer:
    if priced.guarantee_nodes:
        how += f"; {priced.guarantee_nodes} more nodes committed to back team guarantees"
    return Peer(
        name=priced.name,
        policy=priced.policy,
        usage="fleet",
        total_usd=priced.total,
        obligation_beyond_horizon_usd=priced.beyond,
        commitments=[
            PeerCommitment(offering=sets.offerings[o].id, term=k, nodes=n)
            for (o, k), n in sorted(priced.commits.items())
            if n > 0
        ],
        how=how + "; on the fleet (one offering per service), the rest on demand, spot as the fleet uses it",
    )


def _fleet_gaps(usage: Usage) -> str:
    """What the fleet could not place for lack of capacity, for a peer's ``how`` ("" when nothing)."""
    parts = []
    if usage.unserved_replica_hours > 0:
        parts.append(f"{usage.unserved_replica_hours:,.0f} replica-hours found no offering with room")
    if usage.unplaced_runs:
        parts.append(f"no room at its window's start for {', '.join(usage.unplaced_runs)}")
    return f"; max_nodes: {'; '.join(parts)} (left out of its cost)" if parts else ""


def compute_baselines(sets: PlanningSets) -> Baselines:
    """The two references (all on-demand, per-period cheapest) and the peers a user can run on the fleet
    usage (module docstring), with notes; ``best_peer`` is the cheapest of the latter."""
    on_demand = per_launch_usage(sets, allow_spot=False)
    od_usage, _ = bill(sets, on_demand, {})
    od_top_up = guarantee_top_up(sets, on_demand.team_gpus)
    greedy = per_launch_usage(sets, allow_spot=True)
    greedy_usage, _ = bill(sets, greedy, {})
    greedy_total = greedy_usage + guarantee_top_up(sets, greedy.team_gpus)
    fleet = fleet_usage(sets, allow_spot=True)
    fleet_usage_usd, _ = bill(sets, fleet, {})
    guaranteed = any(t.guaranteed_gpus > 0 for t in sets.scenario.teams)
    keeps = "; idle on-demand GPUs held for team guarantees" if guaranteed else ""
    gaps = _fleet_gaps(fleet)
    peers = [
        Peer(
            name="all on-demand",
            policy="all_on_demand",
            total_usd=od_usage + od_top_up,
            how=f"every workload on its cheapest eligible on-demand offering per period, whole nodes with "
            f"MIG packing, no commitments{keeps}",
        ),
        Peer(
            name=PER_PERIOD_PEER,
            policy="greedy",
            total_usd=greedy_total,
            how="a lower reference, not a policy a fleet runs: cheapest tier and offering per workload and "
            f"period (a service hops between offerings), whole nodes with MIG packing, no commitments{keeps}",
        ),
        Peer(
            name=FLEET_PEER,
            policy="greedy",
            usage="fleet",
            total_usd=fleet_usage_usd + guarantee_top_up(sets, fleet.team_gpus),
            how="each service on its cheapest offering and tier over the horizon (overflow to the next where "
            "max_nodes runs out), MIG slices packed, training at its window's start on its cheapest option, "
            f"no commitments{keeps}{gaps}",
        ),
        *_committing_peers(sets, fleet),
    ]
    plan_peer = _savings_plan_peer(sets, fleet)
    if plan_peer is not None:
        peers.append(plan_peer)
    if gaps:
        for peer in peers[3:]:
            peer.how += gaps
    runnable = [p for p in peers if p.usage == "fleet"]
    best = min(runnable, key=lambda p: p.total_usd) if runnable else None
    notes = [
        "the peers a user can run (the best of them is the headline's best peer) run the fleet usage: each "
        "service stays on one offering for the horizon, where its forecast adds least to the services "
        "placed before it (reservations held and the best commitment level counted), overflowing where "
        "max_nodes runs out; replicas on one offering packed (MIG slices, then whole nodes); each training "
        "run at its window's start on its cheapest offering and tier with room",
        f"all on-demand and {PER_PERIOD_PEER} put every workload on its cheapest offering per period: lower "
        "references (all on-demand stays the conservative headline reference), not policies a fleet runs",
        "lookback and coverage peers: the first L days of the horizon's forecast stand in for the last L "
        "days of history; the commitment chosen is billed over the whole horizon",
        "billing: committed nodes cover any non-spot node of their offering each period; usage above is "
        "on demand; commitments are paid every hour, used or not",
    ]
    if guaranteed:
        notes.append(
            "all on-demand holds idle on-demand GPUs to honour team guarantees (without commitments the only "
            f"way to honour one); without that rule it costs {_usd(od_usage)}"
        )
    notes.append(
        "peers are cloud-only and ignore burst caps; only the fleet usage honours max_nodes: reference "
        "prices, not plans"
    )
    return Baselines(
        all_on_demand_usd=od_usage + od_top_up,
        greedy_usd=greedy_total,
        notes=notes,
        peers=peers,
        best_peer=best.name if best is not None else None,
    )
