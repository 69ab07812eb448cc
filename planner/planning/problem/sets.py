"""Index sets of the planning model: only feasible tuples, computed once, before any variable exists.

What is built here (the model in ``build.py`` only reads it):
- the offerings the scenario may buy (clouds/regions allowed), with the commitment terms each offers,
  plus its own servers (``colocation:``) as an offering bought on the ``owned`` term only;
- the commitment *columns* (``purchases.py``): every commitment that may be bought, at which purchase
  step and until when, and the ones the fleet already holds;
- per inference service, the eligible offerings and how many replicas one node holds (MIG-aware for
  ``gpu_memory_gb`` replicas);
- model *slots*: the horizon's periods merged where merging cannot change the optimum. Inference is
  coupled across periods only by commitments (and, through shared pools, by training). Inside a block
  of ``block_hours`` where training occupancy is held constant, periods with the same demand vector are
  interchangeable, so they merge into one slot weighted by its hours (load-duration aggregation).
  Periods that no training run can touch merge across the whole horizon. Periods never merge across
  a column boundary (a purchase step, a term's or an existing commitment's start or end).
- per training run, its placement options: (offering, tier, start period) with duration and cost.
  Starts lie on a grid of ``start_grid_hours`` (plus the window's first and last feasible start); a run
  *occupies* every block it touches, which is conservative: the hourly plan written out is feasible.

Several rules of the model hold here, by what is left out rather than by a row: eligible offerings
only, latency-critical services never on spot, a kind only where it is sold, a gang on one offering
with the fabric it needs, training inside its window, spot training only for preemptible jobs, owned
nodes only after their lead time. ``build.py``'s docstring lists them (rules 9-16) and where each holds.
The hourly method builds its columns (``bound.py``, ``dispatch.py``) and moves its runs (``schedule.py``)
from these same sets, so rules 9-14 hold there by construction too (see their docstrings for 15).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path

import numpy as np

from models.capacity_blocks import block_fee_usd, why_no_block
from models.catalog import Catalog, Offering
from models.flex_start import why_no_flex_start
from models.mig import replicas_per_gpu
from models.preemption import (
    DEFAULT_RESTART_MINUTES,
    DEFAULT_WRITE_MINUTES,
    SpotOverhead,
    spot_overhead,
)
from models.savingsplans import RateGroup, SavingsPlan
from models.scenario import InferenceService, Scenario, TrainingJob
from models.scope import scenario_offerings
from models.tiers import TERM_TIER, Capacity, Term, Tier
from models.workloads import TrainingRun, service_demand, training_runs
from planner.planning.problem.purchases import (
    CommitColumn,
    PlanColumn,
    committed_by_period,
    held_columns,
    payment_options,
    plan_budget,
    plan_columns,
    purchase_columns,
    savings_plan_groups,
    segment_of_period,
)

MAX_STARTS_PER_RUN = 48


@dataclass(frozen=True, slots=True)
class ModelOptions:
    """How finely the model is resolved in time (coarser = faster, see the module docstring)."""

    block_hours: int | None = None  # None = automatic
    start_grid_hours: int | None = None  # None = min(24 h, the block length): a start a day at most
    max_starts_per_run: int = MAX_STARTS_PER_RUN
    prune: bool = True  # drop dominated offering/tier choices (exact; off only to check that it is)
    merge: bool = True  # merge equal-demand periods into slots (exact; off only to check that it is)


@dataclass(frozen=True, slots=True)
class Slot:
    """A set of periods that the model treats as one: same block, same demand vector."""

    block: int  # -1: outside every training window
    periods: np.ndarray
    hours: float
    demand: tuple[int, ...]  # replicas per service
    #: which training runs hold its periods whatever their start (:func:`split_by_certain_training`); 0
    #: in the planning model's slots
    certain: int = 0


@dataclass(frozen=True, slots=True)
class TrainingOption:
    run: int  # index into PlanningSets.runs
    offering: int  # index into PlanningSets.offerings
    tier: Capacity  # non-spot (committed nodes first, on demand beyond: the billing rule), spot or block
    start: int  # period
    periods: int  # periods held, including expected spot overhead
    # cost of its own: spot at its effective cost; a Capacity Block's upfront fee (rate x nodes x the sold
    # duration, models/capacity_blocks.py); 0 off spot, where its nodes are paid in the non-spot rows
    cost_usd: float
    blocks: tuple[int, ...]  # blocks the run touches (occupied in the model)
    overhead: SpotOverhead | None = None
    list_usd: float = 0.0  # its nodes at the on-demand (owned: amortized) rate: for ranking fallbacks


@dataclass
class PlanningSets:
    scenario: Scenario
    offerings: list[Offering]
    terms: dict[int, list[Term]]  # offering index -> commitment terms it can be bought on
    services: list[InferenceService]
    demand: np.ndarray  # (services, periods) replicas
    replicas_per_node: dict[tuple[int, int], float]  # (service, offering) -> replicas
    serve_tiers: dict[tuple[int, int], tuple[Capacity, ...]]  # (service, offering) -> kinds worth modelling
    slots: list[Slot]
    slot_of_period: np.ndarray
    block_periods: int
    start_grid_periods: int
    runs: list[TrainingRun]
    options: list[TrainingOption]
    team_offerings: dict[str, list[int]]  # offerings any workload of the team could use
    no_option_reason: dict[int, str] = field(default_factory=dict)
    no_offering_reason: dict[int, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    integral_held: bool = False  # whole on-demand/spot nodes everywhere (else only under max_nodes)
    training_fixed: bool = False  # every option is a decided placement
    columns: list[CommitColumn] = field(default_factory=list)  # existing first, then what may be bought
    segment: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # per period
    columns_on: dict[int, list[int]] = field(default_factory=dict)  # offering -> its columns
    # savings plans (issue 38, ``purchases.savings_plan_groups``): the rate groups, their rates by offering
    # index, and the plan columns (held first, then what may be bought); never in ``columns``, whose
    # users count nodes
    groups: list[RateGroup] = field(default_factory=list)
    group_rates: list[dict[int, float]] = field(default_factory=list)  # group -> offering index -> $/node-h
    plans: list[PlanColumn] = field(default_factory=list)

    @property
    def fixed_usd(self) -> float:
        """What the commitments and savings plans already held cost inside the horizon: the same in every
        plan, so the solvers never see it; plan costs and bounds add it."""
        nodes = sum((column.nodes or 0) * column.cost_per_node for column in self.columns)
        return nodes + sum((plan.usd_per_hour or 0.0) * plan.paid_hours for plan in self.plans)

    @property
    def held_plans(self) -> list[int]:
        """Savings-plan columns whose amount is known: held already, or bought (:meth:`with_bought_plans`)."""
        return [k for k, plan in enumerate(self.plans) if plan.existing]

    @property
    def new_plans(self) -> list[int]:
        """Savings-plan columns the plan decides (USD per hour, ``purchase.savings_plans``)."""
        return [k for k, plan in enumerate(self.plans) if not plan.existing]

    def with_bought_plans(self, chosen: dict[int, float]) -> PlanningSets:
        """These sets with the savings-plan purchases decided: each new column of ``chosen`` (column ->
        USD per hour, > 0) becomes a decided plan, named by kind, term and the day it starts; the other
        new columns go. Billing (:meth:`savings_plans`), the fixed cost and the written plan then see
        them as they see held ones; no model built from these sets buys more."""
        start = self.scenario.horizon.start
        plans = []
        for k, plan in enumerate(self.plans):
            if plan.existing:
                plans.append(plan)
            elif chosen.get(k, 0.0) > 0:
                group = self.groups[plan.group]
                day = (start + timedelta(hours=plan.starts_hour)).strftime("%Y-%m-%d")
                scope = "" if " " not in group.scope else "/" + group.scope.split(" ", 1)[1]
                paid = "" if group.payment in ("no-upfront", "") else f"/{group.payment}"
                name = f"{group.kind}/{group.term_years}y{scope.replace(' ', '/')}{paid}/{day}"
                plans.append(replace(plan, usd_per_hour=chosen[k], name=name, bought=True))
        return replace(self, plans=plans)

    def with_payments(
        self, commits: dict[int, int], split: dict[int, dict[str, int]]
    ) -> tuple[PlanningSets, dict[int, int]]:
        """These sets and ``commits`` (new column -> nodes) with each bought column of ``split`` (column ->
        payment -> nodes, adding up to its nodes) paid so: the column takes its first payment's pricing and
        each other payment becomes a new column of the same window (appended, so no column index moves).
        Payment changes what a node costs and when it is paid, never where it serves."""
        columns = list(self.columns)
        bought = dict(commits)
        for c, by_payment in sorted(split.items()):
            column = columns[c]
            options = {option.payment: option for option in column.options}
            parts = [(payment, nodes) for payment, nodes in sorted(by_payment.items()) if nodes > 0]
            for n, (payment, nodes) in enumerate(parts):
                option = options[payment]
                priced = replace(column, usd_per_node_hour=option.effective_usd_h, payment=payment,
                                 upfront_usd=option.upfront_usd, hourly_usd=option.hourly_usd)  # fmt: skip
                if n == 0:
                    columns[c] = priced
                    bought[c] = nodes
                else:
                    columns.append(priced)
                    bought[len(columns) - 1] = nodes
        return replace(self, columns=columns, columns_on=columns_by_offering(columns)), bought

    @property
    def held_plan_saving_cap_usd(self) -> float:
        """The most the held savings plans can save against paying their covered nodes on demand: a plan of
        B USD/h covers at most B / rate nodes of an offering an hour, each saving its on-demand price, so
        at most ``B x max(on-demand / rate)`` an hour over the periods it covers. The staged MILP covers
        only inference's on-demand nodes with plans (``build.define_savings_plans``), so its stage bounds
        are made valid for every node by subtracting this (:attr:`bound_fixed_usd`); the cluster model's
        certified bounds cover every on-demand node and add the whole :attr:`fixed_usd`."""
        p = self.period_hours
        cap = 0.0
        for plan in self.plans:
            if plan.existing and plan.end > plan.start:
                ratios = [
                    (self.offerings[o].on_demand_usd_h or 0.0) / rate
                    for o, rate in self.group_rates[plan.group].items()
                ]
                cap += (plan.usd_per_hour or 0.0) * (plan.end - plan.start) * p * max(ratios, default=0.0)
        return cap

    @property
    def bound_fixed_usd(self) -> float:
        """What a lower bound adds to its model's: :attr:`fixed_usd` less what held savings plans can save
        at most (:attr:`held_plan_saving_cap_usd`); equal to it without held savings plans."""
        cap = self.held_plan_saving_cap_usd
        return self.fixed_usd - cap if cap else self.fixed_usd

    def savings_plans(self) -> list[SavingsPlan]:
        """The decided savings plans (held, and bought once :meth:`with_bought_plans` made them so) as the
        billing rule takes them (``models.savingsplans.bill_hours``): rates by offering id, start and end
        in periods."""
        ids = [offering.id for offering in self.offerings]
        return [
            SavingsPlan(
                name=plan.name,
                kind=self.groups[plan.group].kind,
                usd_per_hour=plan.usd_per_hour or 0.0,
                rates={ids[o]: rate for o, rate in self.group_rates[plan.group].items()},
                start=plan.start,
                end=plan.end,
            )
            for plan in self.plans
            if plan.existing
        ]

    def plans_active(self, period: int) -> list[int]:
        """Savings-plan columns whose budget applies in ``period``."""
        return [k for k, plan in enumerate(self.plans) if plan.start <= period < plan.end]

    def budget(self, chosen: dict[int, float] | None = None) -> np.ndarray:
        """(groups, periods) USD per hour committed: the held plans' and ``chosen`` (column -> USD/h)."""
        return plan_budget(self.plans, chosen or {}, len(self.groups), len(self.slot_of_period))

    def plan_covered(self, o: int) -> bool:
        """Some savings plan of the sets (held, or a group the plan may buy) has a rate for offering ``o``:
        its on-demand nodes may cost less than their on-demand price, so pruning never compares it at
        that price alone."""
        return any(o in rates for rates in self.group_rates)

    @property
    def new_columns(self) -> list[int]:
        """Columns the plan decides (the others are held already)."""
        return [c for c, column in enumerate(self.columns) if not column.existing]

    def committable(self, o: int) -> bool:
        """Offering ``o`` has commitments, bought or held, in some period: its non-spot nodes may run on
        them (the billing rule), so its non-spot use is never pruned."""
        return bool(self.columns_on.get(o))

    def committed(self, chosen: dict[int, int] | dict[int, float]) -> np.ndarray:
        """(offerings, periods) committed nodes: the held columns and ``chosen`` (column -> nodes)."""
        return committed_by_period(self.columns, chosen, len(self.offerings), len(self.slot_of_period))

    def columns_active(self, o: int, period: int) -> list[int]:
        """Columns on offering ``o`` whose nodes serve in ``period``."""
        return [c for c in self.columns_on.get(o, []) if self.columns[c].active(period)]

    def existing_nodes(self, o: int, period: int) -> int:
        """Nodes of ``o`` already held that serve in ``period``."""
        return sum(self.columns[c].nodes or 0 for c in self.columns_active(o, period))

    @property
    def period_hours(self) -> int:
        return self.scenario.horizon.period_hours

    @property
    def horizon_hours(self) -> int:
        return self.scenario.horizon.hours

    def eligible(self, service: int) -> list[int]:
        return [o for (i, o) in self.replicas_per_node if i == service]


def non_spot_sold(offering: Offering, terms: list[Term], spot_only: bool) -> bool:
    """Non-spot nodes of ``offering`` exist in the model: it can be committed, or it sells on-demand
    nodes and is not dominated off spot (``spot_only_offerings``)."""
    return bool(terms) or (offering.on_demand_usd_h is not None and not spot_only)


def list_price(offering: Offering) -> float:
    """A non-spot node-hour at its undiscounted rate: on demand, or an owned node's amortized cost."""
    if offering.on_demand_usd_h is not None:
        return offering.on_demand_usd_h
    return offering.owned_usd_h or 0.0


def on_demand_or_dearest(sets: PlanningSets, o: int) -> float:
    """The on-demand price of offering ``o``; for owned nodes (no such price) the dearest on-demand
    node of the scenario, so penalties and displacement prices stay on the safe (high) side."""
    price = sets.offerings[o].on_demand_usd_h
    if price is not None:
        return price
    return max((off.on_demand_usd_h or 0.0 for off in sets.offerings), default=0.0) or (
        sets.offerings[o].owned_usd_h or 0.0
    )


def columns_by_offering(columns: list[CommitColumn]) -> dict[int, list[int]]:
    result: dict[int, list[int]] = defaultdict(list)
    for c, column in enumerate(columns):
        result[column.offering].append(c)
    return dict(result)


def first_committed_period(columns: list[CommitColumn], o: int, periods: int) -> int:
    """First period in which any commitment on ``o`` serves (owned nodes wait for their lead time
    unless some are held already); ``periods`` if none ever does."""
    return min((c.start for c in columns if c.offering == o and c.end > c.start), default=periods)


def replicas_per_node(service: InferenceService, offering: Offering) -> float:
    """Replicas of ``service`` one node of ``offering`` holds (0 = not eligible)."""
    if not offering.matches_gpu(service.gpu_models):
        return 0.0
    if service.gpus_per_replica is not None:
        return _whole_replicas(offering.gpus_per_node, service.gpus_per_replica)
    assert service.gpu_memory_gb is not None  # guaranteed by the scenario validator
    per_gpu = replicas_per_gpu(
        offering.gpu_model, offering.gpu_memory_gb, service.gpu_memory_gb, service.gpu_compute_share
    )
    if per_gpu >= 1:
        return float(offering.gpus_per_node * per_gpu)
    return _whole_replicas(offering.gpus_per_node, round(1 / per_gpu))


def whole_gpu_size(gpus: int, gpus_per_node: int) -> int | None:
    """The GPUs a replica needing ``gpus`` is given on a node of ``gpus_per_node``: the smallest size of
    the chain 1 | ... | G/4 | G/2 | G (halving while even) that holds it, e.g. 3 -> 4 on 8-GPU nodes.
    Sizes that divide each other pack without gaps (placed largest first, every free block is a
    multiple of the next size), so any mix of them fits on ``ceil(GPUs / G)`` nodes. None if the
    replica needs more than a node."""
    if gpus > gpus_per_node:
        return None
    chain = [gpus_per_node]
    while chain[-1] % 2 == 0:
        chain.append(chain[-1] // 2)
    return min(size for size in [*chain, 1] if size >= gpus)


def _whole_replicas(gpus_per_node: int, gpus: int) -> float:
    size = whole_gpu_size(gpus, gpus_per_node)
    return float(gpus_per_node // size) if size else 0.0


def build_sets(
    scenario: Scenario, catalog: Catalog, base_dir: Path | None, options: ModelOptions | None = None
) -> PlanningSets:
    options = options or ModelOptions()
    horizon = scenario.horizon
    p = horizon.period_hours
    offerings = scenario_offerings(scenario, catalog)
    # GCP committed use bought as resources (purchase.savings_plans: gcp-resource) takes the place of one
    # commitment per machine type: the same prices, shared by the machine types with the GPU (issue 38)
    by_resource = "gcp-resource" in scenario.purchase.savings_plans
    buyable = {
        o: [Term.OWNED]
        if off.owned
        else []
        if by_resource and off.cloud == "gcp"
        else [t for t in scenario.purchase.terms if off.price(TERM_TIER[t]) is not None]
        for o, off in enumerate(offerings)
    }
    held = held_columns(scenario, offerings, catalog)
    groups, held_plans, buyable_groups = savings_plan_groups(scenario, catalog, offerings)
    index_of = {offering.id: o for o, offering in enumerate(offerings)}
    group_rates = [{index_of[oid]: rate for oid, rate in g.rates.items() if oid in index_of} for g in groups]
    plans = plan_columns(scenario, buyable_groups, held_plans)
    # a savings plan's offerings may be paid below on demand (memo fact 3): pruning keeps them as it keeps
    # offerings with commitments, else a dominance "by on-demand price" would not be exact
    plan_covered = {o for rates in group_rates for o in rates}
    held_on = {column.offering for column in held} | plan_covered
    spot_only = spot_only_offerings(offerings, held_on) if options.prune else set()
    terms = {o: [] if o in spot_only else buyable[o] for o in range(len(offerings))}
    payments = {
        (o, term.years or 0): payment_options(catalog.terms, offerings[o], term.years or 0)
        for o, offering_terms in terms.items()
        for term in offering_terms
        if term.years
    }
    columns = held + purchase_columns(scenario, offerings, terms, held, payments)
    # an offering with commitments (bought or held) is never pruned off spot: they may sit idle
    commit_terms = {o: [*terms[o], *(c.term for c in held if c.offering == o)] for o in range(len(offerings))}
    services = list(scenario.inference)
    demand = (
        np.vstack([service_demand(scenario, s, base_dir) for s in services])
        if services
        else np.zeros((0, horizon.periods), dtype=np.int64)
    )
    rpn: dict[tuple[int, int], float] = {}
    no_offering: dict[int, str] = {}
    for i, service in enumerate(services):
        for o, offering in enumerate(offerings):
            value = replicas_per_node(service, offering)
            if value > 0:
                rpn[(i, o)] = value
        if not any(key[0] == i for key in rpn):
            no_offering[i] = why_no_service_offering(service)

    serve_tiers = _serve_tiers(services, offerings, rpn, commit_terms, spot_only, options.prune, plan_covered)
    runs = training_runs(scenario)
    loose = _loose_teams(scenario, services, offerings, rpn, demand, runs) if options.prune else set()
    block_periods = _block_periods(options, p, horizon.hours, bool(runs)) if options.merge else 1
    grid = max(1, round((options.start_grid_hours or min(24, block_periods * p)) / p))
    train_options, no_option = _training_options(
        scenario,
        offerings,
        commit_terms,
        columns,
        runs,
        block_periods,
        grid,
        options,
        spot_only,
        loose,
        plan_covered,
    )

    in_window = np.zeros(horizon.periods, dtype=bool)
    for run in runs:
        in_window[run.first_period : run.end_period] = True
    block_of = np.where(in_window, np.arange(horizon.periods) // block_periods, -1)
    if not options.merge:
        block_of = np.arange(horizon.periods)  # every period its own slot
    segment = segment_of_period([*columns, *plans], horizon.periods)  # savings plans' windows too
    slots, slot_of_period = _merge_periods(block_of, demand, p, segment)

    team_offerings: dict[str, list[int]] = defaultdict(list)
    for team in scenario.teams:
        patterns = [m for w in scenario.workloads if w.team == team.name for m in w.gpu_models]
        team_offerings[team.name] = [
            o for o, off in enumerate(offerings) if patterns and off.matches_gpu(patterns)
        ]
    notes = []
    if len(slots) < horizon.periods:
        notes.append(
            f"{horizon.periods} periods merged into {len(slots)} model slots "
            f"(equal demand inside {block_periods * p} h blocks; exact for inference)"
        )
    starts = sorted({column.start for column in columns if not column.existing and column.term != Term.OWNED})
    if starts:
        first_hours = ", ".join(f"{start * p:g}" for start in starts[:6]) + (
            ", ..." if len(starts) > 6 else ""
        )
        notes.append(
            f"new commitments may start at {len(starts)} purchase steps ({scenario.purchase.schedule}, "
            f"and where a held one ends): hours {first_hours}"
        )
    if held:
        notes.append(f"{len(held)} commitments held already: paid whether used or not, used first")
    if held_plans:
        notes.append(
            f"{len(held_plans)} savings plans held already: paid every hour, covering on-demand nodes at "
            "their rates (highest savings first, as the cloud bills)"
        )
    if runs:
        notes.append(
            f"training starts on a {grid * p} h grid (plus each window's first and last start); "
            f"a run holds committed capacity for every {block_periods * p} h block it touches"
        )
    return PlanningSets(
        scenario=scenario,
        offerings=offerings,
        terms=terms,
        services=services,
        demand=demand,
        replicas_per_node=rpn,
        serve_tiers=serve_tiers,
        slots=slots,
        slot_of_period=slot_of_period,
        block_periods=block_periods,
        start_grid_periods=grid,
        runs=runs,
        options=train_options,
        team_offerings=dict(team_offerings),
        no_option_reason=no_option,
        no_offering_reason=no_offering,
        notes=notes,
        columns=columns,
        segment=segment,
        columns_on=columns_by_offering(columns),
        groups=groups,
        group_rates=group_rates,
        plans=plans,
    )


def _block_periods(options: ModelOptions, p: int, hours: int, has_training: bool) -> int:
    """Weekly blocks by default (daily on horizons under eight weeks), so demand merges within a week.

    Measured on the example scenario (bench/plan_bench.py): daily blocks give 3,970 slots and a 14-48 s
    first stage, weekly blocks 932 slots and 4 s, at the same optimum.
    """
    if options.block_hours is not None:
        return max(1, round(options.block_hours / p))
    if not has_training:
        return max(1, hours // p)
    return max(1, round((168 if hours >= 8 * 168 else 24) / p))


def usable(sets: PlanningSets, o: int, period: int) -> bool:
    """Non-spot nodes of ``o`` can serve in ``period``: it sells on-demand nodes, or a commitment on it
    serves then (owned servers: once delivered). Slots never straddle a column boundary
    (``purchases.segment_of_period``), so a slot's first period decides for the slot."""
    offering = sets.offerings[o]
    return offering.on_demand_usd_h is not None or bool(sets.columns_active(o, period))


def _merge_periods(
    block_of: np.ndarray,
    demand: np.ndarray,
    p: int,
    availability: np.ndarray,
    certain: np.ndarray | None = None,
) -> tuple[list[Slot], np.ndarray]:
    certain = np.zeros(len(block_of), dtype=np.int64) if certain is None else certain
    keys = np.vstack([block_of[None, :], availability[None, :], certain[None, :], demand]).T
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(unique) + 1))
    slots = []
    for k, row in enumerate(unique):
        periods = order[bounds[k] : bounds[k + 1]]
        demand_of = tuple(int(x) for x in row[3:])
        slots.append(Slot(int(row[0]), periods, float(len(periods) * p), demand_of, int(row[2])))
    return slots, inverse


def split_by_certain_training(sets: PlanningSets) -> PlanningSets:
    """These sets with every slot split by which training runs hold its periods whatever their start.

    A run held ``d`` periods in a window ``[first, end)`` holds ``[end - d, first + d)`` at any start (its
    certain part) and may or may not hold the rest of its window. A slot's periods have equal demand,
    but where it spans a run's certain part and the rest, averaging it (the exact-start bound's Jensen
    step) spreads the gang's idle periods over its held ones: on colocation-decision a weekly 150 h gang
    idle 18 h a week let the bound share 4 owned nodes with the weekday peaks, $2,188k against a $2,293k
    plan; split, $2,277k. Any grouping of a segment's periods keeps the bound valid, so this only
    tightens it; the key is a hash (a collision would only merge, never cut off a plan).

    The split slots carry their part (``Slot.certain``) and the bound's k-means stays inside it. Where no
    slot splits, the sets come back as they were: keeping the parts apart in the k-means alone only adds
    clusters (bench/gen.py month-small, every period a slot: 112 -> 131 clusters, and the integer stage,
    stopped by its work, proved $255,177 instead of $255,771)."""
    periods = len(sets.slot_of_period)
    rng = np.random.default_rng(0)  # fixed: the same slots on every run
    key = np.zeros(periods, dtype=np.uint64)
    for r, held in sorted({(option.run, option.periods) for option in sets.options}):
        run = sets.runs[r]
        salt = rng.integers(1, 2**63, size=2, dtype=np.int64).astype(np.uint64)
        key[run.first_period : run.end_period] += salt[0]  # in its window (wraps: a hash)
        certain_from, certain_to = max(run.first_period, run.end_period - held), run.first_period + held
        key[certain_from : min(run.end_period, certain_to)] += salt[1]  # held at every start
    _, certain = np.unique(key, return_inverse=True)
    block_of = np.full(periods, -1, dtype=np.int64)
    for slot in sets.slots:
        block_of[slot.periods] = slot.block
    slots, slot_of_period = _merge_periods(
        block_of, sets.demand, sets.period_hours, sets.segment, certain.reshape(-1).astype(np.int64)
    )
    if len(slots) == len(sets.slots):  # a refinement: no slot split, so nothing to keep apart
        return sets
    return replace(sets, slots=slots, slot_of_period=slot_of_period)


def _training_options(
    scenario: Scenario,
    offerings: list[Offering],
    terms: dict[int, list[Term]],
    columns: list[CommitColumn],
    runs: list[TrainingRun],
    block_periods: int,
    grid: int,
    options: ModelOptions,
    spot_only: set[int],
    loose_teams: set[str],
    plan_covered: set[int] | frozenset[int] = frozenset(),
) -> tuple[list[TrainingOption], dict[int, str]]:
    """Placement options per run, without the ones another option beats whatever else happens.

    On spot, and off spot on an offering that cannot be committed, an option's start matters only
    through capacity limits and the team's burst limit; where neither can bind (unlimited offering, a
    team whose burst limit its whole demand cannot reach), one start per offering and kind is enough.
    Among such unlimited offerings, only the cheapest on-demand and the cheapest spot option (effective
    cost) can be in an optimal plan. Non-spot options on a committable offering are all kept: where
    they start decides how much of the run idle commitments cover (the billing rule).

    What no option may do is never generated (rules 12-15 of build.py): an option is one offering with
    the job's GPU model and GPUs per node, a fabric if the job needs one and room for the whole gang
    (``eligible``); spot only for preemptible jobs while ``max_spot_share`` > 0; starts only between the
    window's first period and its last feasible start; no start on owned nodes before any serve.
    Non-spot options on an offering a savings plan covers (``plan_covered``) are kept as on a committable
    one: where they start decides how much idle savings-plan budget covers them.

    A Capacity Block (``purchase.capacity_blocks``, issue 38; on GCP a calendar-mode reservation,
    ``purchase.calendar_mode``) is a third kind for a gang: the block the cloud sells for the run
    (:func:`_block_rate`), paid for the shortest sold duration that holds the run's periods, its nodes
    the block's own (outside the offering's pool and its ``max_nodes``, as a reservation is), so its cost
    does not depend on the start, like spot's.

    GCP flex-start (``purchase.flex_start``) is a fourth: VMs Dynamic Workload Scheduler grants after a
    start delay (:func:`_flex_rate`), for a run of at most 7 days, paid per node-hour at the flex-start
    rate, its nodes its own as a block's are. The delay is planned as a later earliest start: the run
    starts no earlier than its window's first period plus the delay (``purchase.flex_start_delay_hours``,
    rounded up to whole periods), so only a window that holds the delay plus the run has the option.
    """
    p = scenario.horizon.period_hours
    result: list[TrainingOption] = []
    reasons: dict[int, str] = {}
    overhead_cache: dict[tuple[str, int, float], SpotOverhead] = {}
    for r, run in enumerate(runs):
        job = run.job
        eligible = [
            o
            for o, off in enumerate(offerings)
            if runs_gang(off, job) and (off.max_nodes is None or off.max_nodes >= job.nodes)
        ]
        if not eligible:
            reasons[r] = why_no_offering(job, offerings)
            continue
        before = len(result)
        candidates: list[tuple[int, Capacity, float, int, SpotOverhead | None]] = []
        for o in eligible:
            off = offerings[o]
            tiers: list[tuple[Capacity, float, SpotOverhead | None]] = []
            if non_spot_sold(off, terms[o], o in spot_only):
                tiers.append((Capacity.NON_SPOT, list_price(off), None))
            block = _block_rate(scenario, off, job)
            if block is not None:
                tiers.append((Capacity.BLOCK, block, None))
            flex = _flex_rate(scenario, off, job)
            if flex is not None:
                tiers.append((Capacity.FLEX, flex, None))
            if job.preemptible and off.spot_usd_h is not None and scenario.purchase.max_spot_share > 0:
                key = (job.name, o, job.hours)
                if key not in overhead_cache:
                    ckpt = job.checkpoint
                    overhead_cache[key] = spot_overhead(
                        work_hours=job.hours,
                        nodes=job.nodes,
                        per_node_rate_per_hour=off.spot_interruptions_per_hour,
                        write_minutes=ckpt.write_minutes if ckpt else DEFAULT_WRITE_MINUTES,
                        restart_minutes=ckpt.restart_minutes if ckpt else DEFAULT_RESTART_MINUTES,
                    )
                tiers.append((Capacity.SPOT, off.spot_usd_h, overhead_cache[key]))
            for tier, price, overhead in tiers:
                hours = overhead.expected_wall_hours if overhead else job.hours
                periods = math.ceil(hours / p - 1e-9)
                cost = job.nodes * price * periods * p
                if tier == Capacity.BLOCK:  # the fee of the shortest block EC2 sells that holds the run
                    cost = block_fee_usd(price, job.nodes, periods * p, off.cloud)
                if run.end_period - periods >= first_start(scenario, run, tier):
                    candidates.append((o, tier, cost, periods, overhead))
        # non-spot on a committable (or savings-plan) offering is never pruned: it may use idle commitments
        kept = {o for o in eligible if terms[o] or o in plan_covered}
        keep: set[tuple[int, Capacity]] = {
            (o, tier) for o, tier, *_ in candidates if tier == Capacity.NON_SPOT and o in kept
        }
        for tier in Capacity:
            pool = [
                (o, cost, 1.0, 1.0, None if tier.own_nodes else offerings[o].max_nodes)
                for o, t, cost, _, _ in candidates
                if t == tier and not (tier == Capacity.NON_SPOT and o in kept)
            ]
            keep |= {(o, tier) for o in (cheapest_per_tier(pool) if options.prune else [c[0] for c in pool])}
        for o, tier, cost, periods, overhead in candidates:
            if (o, tier) not in keep:
                continue
            last_start = run.end_period - periods
            first = first_start(scenario, run, tier)
            # the start matters only through commitments, capacity and burst limits
            fixed = (
                (tier.own_cost or o not in kept)
                and (offerings[o].max_nodes is None or tier.own_nodes)
                and job.team in loose_teams
            )
            starts = [first] if fixed else _starts(first, last_start, grid, options.max_starts_per_run)
            seen: set[tuple[int, ...]] = set()
            usable_from = (
                0
                if offerings[o].on_demand_usd_h is not None
                else first_committed_period(columns, o, scenario.horizon.periods)
            )
            for start in starts:
                blocks = tuple(range(start // block_periods, (start + periods - 1) // block_periods + 1))
                if blocks[0] * block_periods < usable_from:
                    continue  # owned nodes not delivered yet (whole blocks: the model holds blocks)
                if blocks in seen:
                    continue  # same blocks, same cost: the earliest such start stands for all
                seen.add(blocks)
                own_cost = cost if tier.own_cost else 0.0
                result.append(TrainingOption(r, o, tier, start, periods, own_cost, blocks, overhead, cost))
        if len(result) == before:
            window = run.window_end_hour - run.window_start_hour
            reasons[r] = (
                f"its window ({window:g} h) is shorter than the run ({job.hours:g} h, in whole {p} h periods)"
            )
    return result, reasons


def _block_rate(scenario: Scenario, offering: Offering, job: TrainingJob) -> float | None:
    """The block rate per instance-hour at which ``job``'s gang may run in a block of ``offering`` (an AWS
    Capacity Block, a GCP calendar-mode reservation): only where the scenario opts in for the offering's
    cloud, the catalog prices a block and one block holds the gang (AWS: at most 64 instances and 182
    days; GCP: at most 90 days: ``models.capacity_blocks``); else None."""
    rate = offering.capacity_block_usd_h
    if not scenario.purchase.buys_blocks(offering.cloud) or rate is None:
        return None
    return None if why_no_block(job.nodes, job.hours, offering.cloud) is not None else rate


def _flex_rate(scenario: Scenario, offering: Offering, job: TrainingJob) -> float | None:
    """The flex-start rate per node-hour at which ``job``'s gang may run on flex-start VMs of
    ``offering``: only where the scenario opts in, the catalog prices flex-start and the run fits a
    flex-start VM's 7 days (``models.flex_start``); else None."""
    rate = offering.flex_start_usd_h
    if not scenario.purchase.flex_start or rate is None:
        return None
    return None if why_no_flex_start(offering.cloud, job.hours) is not None else rate


def first_start(scenario: Scenario, run: TrainingRun, tier: Capacity) -> int:
    """The first period an option of ``tier`` may start in: the window's first, or for flex-start the
    first that starts at or after the window's start plus the planned start delay (a request made when
    the window opens)."""
    if tier != Capacity.FLEX:
        return run.first_period
    granted = run.window_start_hour + scenario.purchase.flex_start_delay_hours
    return max(run.first_period, math.ceil(granted / scenario.horizon.period_hours - 1e-9))


def _serve_tiers(
    services: list[InferenceService],
    offerings: list[Offering],
    rpn: dict[tuple[int, int], float],
    terms: dict[int, list[Term]],
    spot_only: set[int],
    prune: bool = True,
    plan_covered: set[int] | frozenset[int] = frozenset(),
) -> dict[tuple[int, int], tuple[Capacity, ...]]:
    """Per (service, offering), the tiers on which serving it can be part of an optimal plan.

    Nodes held on demand or on spot are shared by the services on them, so an offering is left out of
    a tier only when ONE unlimited offering beats it for every service that could use it (at least the
    replicas per node, no higher price, no more GPUs per replica): then any mix of services on its
    nodes fits on as many nodes of the other, for less. Non-spot use of a committable offering is never
    pruned here (its commitments may sit idle beside it), nor that of one a savings plan covers
    (``plan_covered``: its on-demand nodes may cost less than their on-demand price).

    Rules by construction (build.py 10, 11): a latency-critical service gets no spot kind, and no
    offering gets a kind it has no price for (non-spot needs a term or an on-demand price).
    """
    eligible_services: dict[int, list[int]] = defaultdict(list)
    for i, o in rpn:
        eligible_services[o].append(i)
    result: dict[tuple[int, int], list[Capacity]] = defaultdict(list)
    for tier in (Capacity.NON_SPOT, Capacity.SPOT):
        for o, users in sorted(eligible_services.items()):
            if tier == Capacity.SPOT:
                users = [i for i in users if not services[i].latency_critical]
                if offerings[o].spot_usd_h is None:
                    continue
            elif not non_spot_sold(offerings[o], terms[o], o in spot_only):
                continue
            if not users:
                continue
            if tier == Capacity.NON_SPOT and (terms[o] or o in plan_covered):  # never pruned: see above
                beaten = False
            else:
                beaten = prune and any(
                    _beats(offerings, rpn, tier, d, o, users) for d in range(len(offerings)) if d != o
                )
            if not beaten:
                for i in users:
                    result[(i, o)].append(tier)
    return {key: tuple(tiers) for key, tiers in result.items()}


def _beats(
    offerings: list[Offering],
    rpn: dict[tuple[int, int], float],
    tier: Capacity,
    d: int,
    o: int,
    users: list[int],
) -> bool:
    """``d`` serves each of ``users`` at least as well as ``o`` on ``tier`` (ties: lower index); off spot,
    ``o`` is an offering without commitments, compared at on-demand prices."""
    dom, off = offerings[d], offerings[o]
    priced = Tier.SPOT if tier == Capacity.SPOT else Tier.ON_DEMAND
    price_d, price_o = dom.price(priced), off.price(priced)
    if dom.max_nodes is not None or price_d is None or price_o is None or price_d > price_o:
        return False
    strictly = price_d < price_o
    for i in users:
        q_d, q_o = rpn.get((i, d), 0.0), rpn[(i, o)]
        if q_d < q_o or dom.gpus_per_node / q_d > off.gpus_per_node / q_o:
            return False
        strictly = strictly or q_d > q_o
    return strictly or d < o


def _loose_teams(
    scenario: Scenario,
    services: list[InferenceService],
    offerings: list[Offering],
    rpn: dict[tuple[int, int], float],
    demand: np.ndarray,
    runs: list[TrainingRun],
) -> set[str]:
    """Teams whose burst limit no plan that covers demand minimally can reach."""
    loose = set()
    for team in scenario.teams:
        if team.burst_gpus is None:
            loose.add(team.name)
            continue
        most = float(sum(run.gpus for run in runs if run.job.team == team.name))
        for i, service in enumerate(services):
            if service.team == team.name and demand.shape[1]:
                per_replica = max(
                    (offerings[o].gpus_per_node / q for (ii, o), q in rpn.items() if ii == i), default=0.0
                )
                most += float(demand[i].max()) * per_replica + max(
                    (offerings[o].gpus_per_node for (ii, o) in rpn if ii == i), default=0
                )
        if most <= team.burst_gpus:
            loose.add(team.name)
    return loose


def _starts(first: int, last: int, grid: int, most: int) -> list[int]:
    """Grid-aligned starts between ``first`` and ``last`` (both included), thinned to at most ``most``."""
    aligned = list(range(-(-first // grid) * grid, last + 1, grid))
    starts = sorted({first, last, *aligned})
    if len(starts) > most:
        picks = np.unique(np.round(np.linspace(0, len(starts) - 1, most)).astype(int))
        starts = [starts[k] for k in picks]
    return starts


def runs_gang(offering: Offering, job: TrainingJob) -> bool:
    """A node of ``offering`` runs one of ``job``'s gang, capacity aside: its GPU model, its GPUs per
    node, a multi-node fabric where the job needs one (rule 12 of build.py)."""
    return (
        offering.matches_gpu(job.gpu_models)
        and offering.gpus_per_node == job.gpus_per_node
        and (offering.has_fabric or not job.needs_fabric)
    )


def why_no_service_offering(service: InferenceService) -> str:
    """Why no offering in scope serves ``service`` (no node has its GPU model with room for a replica)."""
    size = (
        f"{service.gpus_per_replica} GPUs per replica"
        if service.gpus_per_replica
        else f"{service.gpu_memory_gb} GB per replica"
    )
    return f"no offering in the allowed clouds/regions has {'/'.join(service.gpu_models)} GPUs for {size}"


def why_no_offering(job: TrainingJob, offerings: list[Offering]) -> str:
    models = [o for o in offerings if o.matches_gpu(job.gpu_models)]
    if not models:
        return f"no offering in the allowed clouds/regions has {'/'.join(job.gpu_models)} GPUs"
    sized = [o for o in models if o.gpus_per_node == job.gpus_per_node]
    if not sized:
        return f"no {'/'.join(job.gpu_models)} offering has {job.gpus_per_node} GPUs per node"
    if job.needs_fabric and not any(o.has_fabric for o in sized):
        return "no offering with a multi-node fabric (EFA, TCPX/TCPXO, InfiniBand) matches"
    return f"no matching offering allows {job.nodes} nodes (max_nodes)"


def _no_worse(a: float | None, b: float | None) -> bool:
    """Price ``a`` is offered whenever ``b`` is, and not dearer."""
    return b is None or (a is not None and a <= b)


def spot_only_offerings(offerings: list[Offering], held: set[int] | frozenset[int] = frozenset()) -> set[int]:
    """Offerings whose committed and on-demand use is dominated by another offering.

    ``o`` is dominated by an offering ``d`` with no capacity limit, the same node (GPU model, count and
    memory), a fabric wherever ``o`` has one, and on-demand and commitment prices no dearer. Anything
    the plan does with ``o`` off spot, it can do with ``d`` at no higher cost, so ``o`` is kept for spot
    only (where its own price may be the best). Ties keep the first offering, so one of a set of
    identical regions survives. Offerings in ``held`` (commitments already held on them) are kept.
    """
    dominated = set()
    for o, off in enumerate(offerings):
        if off.owned or o in held:
            continue  # owned nodes are bought on their own term, never on demand; held ones are paid
        for d, dom in enumerate(offerings):
            if d == o or d in dominated or dom.max_nodes is not None:
                continue
            if (dom.gpu_model, dom.gpus_per_node, dom.gpu_memory_gb) != (
                off.gpu_model,
                off.gpus_per_node,
                off.gpu_memory_gb,
            ):
                continue
            if off.has_fabric and not dom.has_fabric:
                continue
            prices = [(dom.on_demand_usd_h, off.on_demand_usd_h)] + [
                (dom.price(t), off.price(t)) for t in (Tier.RESERVED_1Y, Tier.RESERVED_3Y)
            ]
            if not all(_no_worse(a, b) for a, b in prices):
                continue
            strictly = any(a is not None and b is not None and a < b for a, b in prices) or (
                dom.has_fabric and not off.has_fabric
            )
            if strictly or d < o:
                dominated.add(o)
                break
    return dominated


def cheapest_per_tier(candidates: list[tuple[int, float, float, float, int | None]]) -> set[int]:
    """Candidates (key, price, capacity per node, GPUs per node, max_nodes) worth keeping for one use.

    A candidate is dropped when an unlimited one gives at least its capacity per node at no higher
    price per node and no more GPUs per unit of capacity (so covering the same need costs no more, in
    whole nodes too, and counts no more GPUs against a team's burst limit).
    """
    keep = set()
    for key, price, capacity, gpus, _limit in candidates:
        beaten = any(
            other != key
            and other_limit is None
            and other_capacity >= capacity
            and other_price <= price
            and other_gpus / other_capacity <= gpus / capacity
            and (other_price < price or other_capacity > capacity or other < key)
            for other, other_price, other_capacity, other_gpus, other_limit in candidates
        )
        if not beaten:
            keep.add(key)
    return keep


def shares_commitments(sets: PlanningSets, o: int, tier: Capacity) -> bool:
    """Non-spot use of an offering with both commitments and on-demand nodes: commitments cover part of
    it, on-demand nodes the rest (build.py's M[a], bound.py's gang cuts)."""
    return tier == Capacity.NON_SPOT and sets.committable(o) and sets.offerings[o].on_demand_usd_h is not None


#: ``full_sets``' default: no thinning of the training starts (every period of a run's window)
EVERY_START = 10**9


def full_sets(
    scenario: Scenario,
    catalog: Catalog,
    base_dir: Path | None,
    max_starts_per_run: int = EVERY_START,
) -> PlanningSets:
    """The full per-period problem that the reductions and the certified bounds are checked against:
    one slot per period (no merging), 1-period blocks, training starts on the period grid (thinned only
    to ``max_starts_per_run``), no dominance pruning, whole on-demand and spot nodes."""
    p = scenario.horizon.period_hours
    options = ModelOptions(
        block_hours=p, start_grid_hours=p, max_starts_per_run=max_starts_per_run, prune=False, merge=False
    )
    return replace(build_sets(scenario, catalog, base_dir, options), integral_held=True)


def fix_training(sets: PlanningSets, chosen: list[int]) -> PlanningSets:
    """The same problem with the training placements decided: slots re-merge much further.

    Periods are merged when they have the same demand vector and the same training footprint in their
    block, so the integer node counts of the second stage stay few. Each run still pays its own cost;
    capacity is counted once per distinct footprint through the runs of its first block.
    """
    options = [sets.options[a] for a in chosen]
    periods = len(sets.slot_of_period)
    block = np.arange(periods) // sets.block_periods
    in_window = np.zeros(periods, dtype=bool)
    for run in sets.runs:
        in_window[run.first_period : run.end_period] = True
    active: dict[int, list[int]] = defaultdict(list)
    for k, option in enumerate(options):
        for b in option.blocks:
            active[b].append(k)
    # a block's footprint: what the runs placed in it hold (offering, tier, nodes, team). Blocks with the
    # same footprint and demand merge; the runs of the first such block stand for the footprint.
    signature_id: dict[tuple, int] = {(): -1}
    signature = np.full(periods, -1, dtype=np.int64)
    holders: dict[int, list[int]] = defaultdict(list)
    for b in np.unique(block[in_window]):
        members = active.get(int(b), [])
        # a non-spot run that may share commitments holds its own footprint: how much of it they cover
        # (M[a] in build.py) is its own, not a twin's
        key = tuple(
            sorted(
                (options[k].offering, options[k].tier, sets.runs[options[k].run].job.nodes,
                 sets.runs[options[k].run].job.team,
                 k if shares_commitments(sets, options[k].offering, options[k].tier) else -1)
                for k in members
            )
        )  # fmt: skip
        if key not in signature_id:
            signature_id[key] = len(signature_id) - 1
            for k in members:
                holders[k].append(signature_id[key])
        signature[(block == b) & in_window] = signature_id[key]
    fixed = [replace(o, blocks=tuple(holders[k])) for k, o in enumerate(options)]
    slots, slot_of_period = _merge_periods(signature, sets.demand, sets.period_hours, sets.segment)
    return replace(
        sets,
        options=fixed,
        slots=slots,
        slot_of_period=slot_of_period,
        integral_held=True,
        training_fixed=True,
    )
