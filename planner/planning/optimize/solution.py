"""A solution -> the Plan (plan.json data + per-period allocations).

Both methods hand over a :class:`Solution` (plain data per period; the staged method's via
:func:`solution_from_model`). Merged slots are written back out per original period, so every
period of the horizon can be checked; :func:`realized` makes every period's replicas whole first
(``realize.py``), and everything written, billed and verified is that whole plan.
On-demand and spot nodes are held in whole nodes; a workload's row carries its share of them (the
idle part of a partly used node is charged to the workloads on it), so allocation rows add up to
exactly what is paid. Committed capacity used by a workload is split between the commitments serving
in that period (``purchases.py``: held ones and purchases, each its own term) in proportion to their
nodes, and each such row names the commitment it uses.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import numpy as np
import pandas as pd

from models.billing import covered_nodes
from models.capacity_blocks import block_duration_hours
from models.catalog import Offering
from models.chargeback import Book, IdleRule, amortize, charge_plan, charged_gpus
from models.plan import (
    ALLOCATION_COLUMNS,
    COMMITTED_TIERS,
    TIERS,
    Baselines,
    Commitment,
    Costs,
    OfferingRecord,
    Plan,
    PlanDocument,
    PlanHorizon,
    PoolUtilization,
    SavingsPlanCommitment,
    ScenarioEcho,
    SolveMethod,
    SolverReport,
    TeamSummary,
    TrainingPlacement,
    Unserved,
    UnservedGuarantee,
    UnservedInference,
    UnservedTraining,
    Utilization,
)
from models.savingsplans import SavingsPlanBill, bill_hours
from models.scenario import Scenario
from models.tiers import OWN_NODE_TIERS, TERM_TIER, Capacity, Term, Tier
from models.workloads import period_start
from planner.planning.mig.layouts import mig_section
from planner.planning.monthly import cash_by_month
from planner.planning.optimize.build import PlanningModel, worst_shortfall
from planner.planning.optimize.dispatch import Occupancy
from planner.planning.optimize.payments import fees_by_window, split_payments
from planner.planning.optimize.realize import realize
from planner.planning.optimize.repair import NO_ROOM, UNPLACED, Why, unserved_why
from planner.planning.optimize.savings_purchase import buy_savings_plans, on_demand_usage
from planner.planning.problem.purchases import CommitColumn
from planner.planning.problem.sets import PlanningSets, TrainingOption
from planner.solvers.solve import SolveResult

EPS = 1e-6


def _value(var: Any) -> float:
    return float(var.varValue or 0.0)


def committed_nodes(model: PlanningModel) -> dict[int, int]:
    """new column -> nodes, for every commitment bought."""
    return {c: round(_value(var)) for c, var in model.commit.items() if round(_value(var)) > 0}


def column_name(sets: PlanningSets, c: int) -> str:
    """How plan.json and allocations.csv name column ``c``: a held one by its label, a purchase by
    offering, term and the day it starts (and the hour, when not midnight)."""
    column = sets.columns[c]
    if column.existing:
        return column.name
    start = sets.scenario.horizon.start + timedelta(hours=column.starts_hour)
    when = start.strftime("%Y-%m-%d" if start.hour == 0 and start.minute == 0 else "%Y-%m-%dT%H:%MZ")
    paid = "" if column.payment == "no-upfront" else f"/{column.payment}"  # one column per payment too
    return f"{sets.offerings[column.offering].id}/{column.term}/{when}{paid}"  # unique: one column per start


def holding(sets: PlanningSets, commits: dict[int, int]) -> dict[int, int]:
    """Every column with nodes in the plan: the held ones and the purchases (column -> nodes)."""
    held = {c: column.nodes or 0 for c, column in enumerate(sets.columns) if column.existing}
    return {**held, **{c: n for c, n in commits.items() if n > 0}}


@dataclass
class Solution:
    """A solved plan as plain data, whichever method produced it (one model, or the hourly method)."""

    sets: PlanningSets
    commits: dict[int, int]  # new column -> nodes bought (held columns: in sets.columns)
    inference: pd.DataFrame  # period, o, tier (a Capacity), i, nodes (held tiers: whole-node share)
    placements: list[TrainingOption]
    unserved_replicas: np.ndarray  # (services, periods)
    unserved_runs: list[int]
    guarantee_short: dict[str, float]
    penalty_usd: float
    notes: list[str] = field(default_factory=list)  # how the solution was made whole, for the report


def solution_from_model(model: PlanningModel) -> Solution:
    """The model's variable values, slots written back out per period (fractional: :func:`realized`
    makes them whole)."""
    sets = model.sets
    records: list[
        tuple[int, int, str, int, float, float]
    ] = []  # slot, offering, tier, service, nodes, replicas
    for (tier, i, o, s), var in model.serve.items():
        nodes = _value(var)
        if nodes <= EPS:
            continue
        records.append((s, o, tier, i, nodes, nodes * sets.replicas_per_node[(i, o)]))
    slot_rows = pd.DataFrame(records, columns=["slot", "o", "tier", "i", "nodes", "replicas"])
    period_slot = pd.DataFrame({"period": np.arange(len(sets.slot_of_period)), "slot": sets.slot_of_period})
    inference = period_slot.merge(slot_rows, on="slot").drop(columns=["slot"])
    unserved_slot = np.zeros((len(sets.services), len(sets.slots)))
    for (i, s), var in model.unserved_replicas.items():
        unserved_slot[i, s] = _value(var)
    return Solution(
        sets=sets,
        commits=committed_nodes(model),
        inference=inference,
        placements=[option for a, option in enumerate(sets.options) if _value(model.place[a]) >= 0.5],
        unserved_replicas=unserved_slot[:, sets.slot_of_period],
        unserved_runs=[r for r, var in model.unserved_run.items() if _value(var) > 0.5],
        guarantee_short=worst_shortfall(model.guarantee_short, _value),
        penalty_usd=sum(_value(var) * coef for var, coef in model.penalty_terms),
    )


def realized(
    solution: Solution, exact_seconds: float = 60.0, progress: Callable[[str], None] | None = None
) -> Solution:
    """The solution with whole replicas on whole nodes every period (``planner.planning.optimize.realize``):
    what the plan writes, bills and verifies. Replicas that no node can take within the limits are
    added to the unserved ones, and to the penalty."""
    sets = solution.sets
    occupancy = Occupancy.of(sets, solution.placements)
    began = time.perf_counter()
    result = realize(
        sets,
        solution.inference,
        solution.unserved_replicas,
        sets.committed(solution.commits),
        (occupancy.non_spot, occupancy.spot, occupancy.team_gpus),
        exact_seconds=exact_seconds,
        progress=progress,
    )
    refined = (
        "all"
        if result.refined_periods == result.distinct_periods
        else f"{result.refined_periods:,} (then the time budget ran out)"
    )
    note = (
        f"whole replicas on whole nodes: {result.distinct_periods:,} distinct periods rounded, {refined} "
        f"refined by local search, {result.milp_periods:,} by their own MILP too (cheaper in "
        f"{result.exact_periods:,}), {time.perf_counter() - began:.1f} s"
    )
    return replace(
        solution,
        inference=result.inference,
        unserved_replicas=result.unserved,
        penalty_usd=solution.penalty_usd + result.penalty_delta_usd,
        notes=[*solution.notes, note],
    )


def _split_whole(counts: np.ndarray, share: np.ndarray) -> np.ndarray:
    """The ``share`` part of ``counts``: a whole count splits into whole parts (the rest goes on), a
    fractional one (a replica split between offerings) exactly, so the parts always add up."""
    whole = np.abs(counts - np.round(counts)) <= 1e-9
    return np.where(whole, np.minimum(np.round(counts * share), counts), counts * share)


def _use(solution: Solution) -> pd.DataFrame:
    """What runs where each period, before billing: period, o, capacity, nodes, replicas, workload,
    team, kind (inference rows carry their share of whole held nodes; training its gang's nodes)."""
    sets = solution.sets
    frames = []
    rows = solution.inference
    if len(rows):
        frame = rows.rename(columns={"tier": "capacity"})
        frame["workload"] = [sets.services[i].name for i in frame["i"]]
        frame["team"] = [sets.services[i].team for i in frame["i"]]
        frame["kind"] = "inference"
        frame["fee"] = 0.0
        frames.append(frame.drop(columns=["i"]))
    train_rows = []
    for option in solution.placements:  # the run's real periods (the model held whole blocks)
        job = sets.runs[option.run].job
        # a Capacity Block's fee (flex-start: its node-hours), spread evenly over its rows: they add up to
        # what the block (the flex-start gang) costs
        fee = option.cost_usd / option.periods if option.tier.own_nodes else 0.0
        for period in range(option.start, option.start + option.periods):
            train_rows.append(
                (period, option.offering, option.tier, float(job.nodes), 0.0, job.name, job.team, fee)
            )
    if train_rows:
        columns = ["period", "o", "capacity", "nodes", "replicas", "workload", "team", "fee"]
        frame = pd.DataFrame(train_rows, columns=columns)
        frame["kind"] = "training"
        frames.append(frame)
    if not frames:
        return pd.DataFrame(
            columns=["period", "o", "capacity", "nodes", "replicas", "workload", "team", "kind", "fee"]
        )
    return pd.concat(frames, ignore_index=True)


def extract_allocations(solution: Solution) -> pd.DataFrame:
    """allocations.csv under the billing rule: per period and offering, the committed nodes cover its
    non-spot use first, and only the use beyond them is on demand. Every non-spot row is split in that
    proportion (committed part by commitment, in proportion to the nodes of each serving then), so each
    workload is charged the committed and on-demand node-hours it shares in; replicas are split in
    whole numbers by the same proportion."""
    sets = solution.sets
    p = sets.period_hours
    ids = [o.id for o in sets.offerings]
    use = _use(solution)
    use = use[use["nodes"] > EPS]
    if not len(use):
        return pd.DataFrame(columns=ALLOCATION_COLUMNS)
    spot = use[use["capacity"] == Capacity.SPOT].assign(tier=Tier.SPOT)
    # a gang in a Capacity Block or on flex-start: its own nodes, billed its fee (never in the pool of the
    # billing rule)
    own = use[use["capacity"].isin([c for c in Capacity if c.own_nodes])]
    blocks = own.assign(tier=[Capacity(c).tier for c in own["capacity"]], commitment="")
    non_spot = use[use["capacity"] == Capacity.NON_SPOT].copy()
    held = holding(sets, solution.commits)
    by_period = sets.committed(solution.commits)
    committed = by_period[non_spot["o"].to_numpy(np.int64), non_spot["period"].to_numpy(np.int64)]
    # beyond the commitments, nodes are held whole: inference rows take the idle part of the last one
    keys = [non_spot["period"], non_spot["o"]]
    total = non_spot["nodes"].groupby(keys).transform("sum").to_numpy()
    inference = (non_spot["kind"] == "inference").to_numpy()
    served = non_spot["nodes"].where(inference, 0.0).groupby(keys).transform("sum").to_numpy()
    beyond = total > committed + EPS
    whole = np.where(beyond, np.ceil(total - EPS), total)
    grow = np.divide(served + whole - total, served, out=np.ones_like(served), where=served > EPS)
    non_spot["nodes"] = np.where(inference & beyond, non_spot["nodes"].to_numpy() * grow, non_spot["nodes"])
    total = whole
    covered = np.divide(covered_nodes(total, committed), total, out=np.zeros_like(total), where=total > 0)
    nodes = non_spot["nodes"].to_numpy()
    replicas = non_spot["replicas"].to_numpy()
    committed_replicas = _split_whole(replicas, covered)
    parts = [spot.assign(commitment=""), blocks,
             non_spot.assign(tier=Tier.ON_DEMAND, nodes=nodes * (1 - covered),
                             replicas=replicas - committed_replicas, commitment="")]  # fmt: skip
    segment = sets.segment[non_spot["period"].to_numpy(np.int64)]
    offering_of = non_spot["o"].to_numpy(np.int64)
    for o in sorted({sets.columns[c].offering for c in held}):
        for q in np.unique(segment[offering_of == o]):
            mine = (offering_of == o) & (segment == q)
            period = int(non_spot["period"].to_numpy()[mine][0])
            serving = [(c, held[c]) for c in sets.columns_active(int(o), period) if held.get(c, 0) > 0]
            total_nodes = sum(count for _c, count in serving)
            left = committed_replicas[mine]
            for k, (c, count) in enumerate(serving):
                share = count / total_nodes
                part = left if k == len(serving) - 1 else _split_whole(left, np.full(len(left), share))
                left = left - part
                parts.append(
                    non_spot[mine].assign(
                        tier=TERM_TIER[sets.columns[c].term],
                        nodes=nodes[mine] * covered[mine] * share,
                        replicas=part,
                        commitment=column_name(sets, c),
                    )
                )
    table = pd.concat(parts, ignore_index=True)
    table = _savings_plan_rows(sets, table[table["nodes"] > EPS])
    gpus_per_node = np.array([o.gpus_per_node for o in sets.offerings], dtype=float)
    price = {
        Tier.ON_DEMAND: np.array([o.on_demand_usd_h or 0.0 for o in sets.offerings]),
        Tier.SPOT: np.array([o.spot_usd_h or 0.0 for o in sets.offerings]),
    }
    o_idx = table["o"].to_numpy().astype(np.int64)
    table["gpus"] = table["nodes"].to_numpy() * gpus_per_node[o_idx]
    cost = np.zeros(len(table))
    for tier, prices in price.items():
        mask = (table["tier"] == tier).to_numpy()
        cost[mask] = table["nodes"].to_numpy()[mask] * prices[o_idx[mask]] * p
    block = table["tier"].isin(OWN_NODE_TIERS).to_numpy()
    cost[block] = table["fee"].to_numpy(float)[block]
    table["cost_usd"] = cost
    table["offering"] = [ids[o] for o in o_idx]
    table["tier"] = table["tier"].map(str)
    table = table.sort_values(["period", "kind", "workload", "offering", "tier"], kind="stable")
    return table[ALLOCATION_COLUMNS].reset_index(drop=True)


def savings_plan_bill(sets: PlanningSets, allocations: pd.DataFrame) -> SavingsPlanBill:
    """The held savings plans billed by the rule (``models.savingsplans.bill_hours``) on the whole on-demand
    nodes of each offering in each period: the rows of tier on_demand and savings_plan of ``allocations``
    (``o`` and ``period`` columns), which add up to the nodes beyond the node commitments."""
    periods = len(sets.slot_of_period)
    ids = [offering.id for offering in sets.offerings]
    rows = allocations[allocations["tier"].isin([Tier.ON_DEMAND, Tier.SAVINGS_PLAN])]
    usage: dict[str, np.ndarray] = {}
    for o, nodes in rows.groupby("o")["nodes"]:
        series = np.zeros(periods)
        np.add.at(series, rows.loc[nodes.index, "period"].to_numpy(np.int64), nodes.to_numpy())
        usage[ids[int(cast(int, o))]] = np.round(series, 9)
    prices = {offering.id: offering.on_demand_usd_h or 0.0 for offering in sets.offerings}
    return bill_hours(usage, prices, sets.savings_plans(), hours_per_step=float(sets.period_hours))


def _savings_plan_rows(sets: PlanningSets, table: pd.DataFrame) -> pd.DataFrame:
    """The on-demand rows split by the held savings plans: per period and offering, the part each plan
    covers (``savings_plan_bill``) becomes rows of tier savings_plan naming it (cost 0), in proportion
    to each row's nodes; replicas split in whole numbers by the same proportion."""
    if not sets.held_plans or not len(table):
        return table
    bill = savings_plan_bill(sets, table)
    on_demand = (table["tier"] == Tier.ON_DEMAND).to_numpy()
    rows = table[on_demand]
    index = {offering.id: o for o, offering in enumerate(sets.offerings)}
    period = rows["period"].to_numpy(np.int64)
    offering = rows["o"].to_numpy(np.int64)
    nodes = rows["nodes"].to_numpy(float)
    replicas = rows["replicas"].to_numpy(float)
    total = np.zeros((len(sets.offerings), len(sets.slot_of_period)))
    np.add.at(total, (offering, period), nodes)
    left_share = np.ones(len(rows))
    left_replicas = replicas.copy()
    parts = [table[~on_demand]]
    for (name, oid), covered in sorted(bill.covered.items()):
        o = index[oid]
        mine = offering == o
        if not mine.any() or not covered.any():
            continue
        share = np.zeros(len(rows))
        whole = total[o, period[mine]]
        share[mine] = np.divide(covered[period[mine]], whole, out=np.zeros(len(whole)), where=whole > EPS)
        taken = _split_whole(replicas, share)
        taken = np.minimum(taken, left_replicas)
        left_replicas -= taken
        left_share -= share
        parts.append(
            rows.assign(tier=Tier.SAVINGS_PLAN, nodes=nodes * share, replicas=taken, commitment=name)[
                share > 0
            ]
        )
    parts.append(rows.assign(nodes=nodes * np.clip(left_share, 0.0, 1.0), replicas=left_replicas))
    result = pd.concat(parts, ignore_index=True)
    return result[result["nodes"] > EPS]


def _bought_savings_plans(
    solution: Solution, allocations: pd.DataFrame, progress: Callable[[str], None] | None
) -> tuple[Solution, pd.DataFrame]:
    """The solution with the savings plans bought that make its fleet cheapest (``savings_purchase.py``),
    and its allocations billed with them."""
    sets = solution.sets
    # the blocks' and node commitments' fees first, under a cash limit
    fees = fees_by_window(sets, solution.commits, solution.placements)
    purchase = buy_savings_plans(sets, on_demand_usage(sets, allocations), fees)
    bought = sets.with_bought_plans(purchase.chosen)
    if purchase.chosen:
        what = ", ".join(f"{plan.name} ${plan.usd_per_hour:,.3f}/h" for plan in bought.plans if plan.bought)
        note = (
            f"savings plans bought for the fleet as written: {what} (an LP over {purchase.lp_periods:,} "
            f"distinct periods; ${purchase.saving_usd:,.0f} less than without them)"
        )
    else:
        note = "savings plans: none pays for itself on this fleet's on-demand use (an LP over its periods)"
    if progress is not None:
        progress(note)
    solution = replace(solution, sets=bought, notes=[*solution.notes, note])
    return solution, extract_allocations(solution)


def _savings_plans(sets: PlanningSets, allocations: pd.DataFrame) -> list[SavingsPlanCommitment]:
    """plan.json ``savings_plans[]``: the held ones in scenario order, then those bought by start, each
    with what it costs inside the horizon, what it binds beyond, and what of its commitment covered
    nodes."""
    horizon = sets.scenario.horizon
    p = horizon.period_hours
    rows = allocations[allocations["tier"] == Tier.SAVINGS_PLAN]
    rate_of = {
        (plan.name, offering): rate for plan in sets.savings_plans() for offering, rate in plan.rates.items()
    }
    spent: dict[tuple[str, str], float] = defaultdict(float)
    for row in rows.itertuples(index=False):
        spent[(str(row.commitment), str(row.offering))] += float(str(row.nodes))
    result = []
    for plan in (sets.plans[k] for k in sets.held_plans):
        group = sets.groups[plan.group]
        usd = plan.usd_per_hour or 0.0
        paid = usd * plan.paid_hours
        used = sum(
            nodes * rate_of[(plan.name, offering)] * p
            for (name, offering), nodes in spent.items()
            if name == plan.name
        )
        result.append(
            SavingsPlanCommitment(
                name=plan.name,
                kind=group.kind,
                term=Term.ONE_YEAR if group.term_years == 1 else Term.THREE_YEARS,
                scope=group.scope,
                usd_per_hour=usd,
                gpus=round(usd / group.unit_usd_per_hour) if group.unit_usd_per_hour else None,
                rates=dict(sorted(group.rates.items())),
                existing=not plan.bought,
                start=horizon.start + timedelta(hours=plan.starts_hour),
                end=horizon.start + timedelta(hours=plan.ends_hour),
                start_period=plan.start,
                end_period=plan.end,
                cost_in_horizon_usd=paid,
                obligation_beyond_horizon_usd=usd * plan.beyond_hours,
                spent_usd=used,
                unspent_usd=max(0.0, paid - used),
                payment=group.payment or "no-upfront",
                upfront_usd=usd * (plan.ends_hour - plan.starts_hour) * group.upfront_share,
            )
        )
    return result


def build_plan(
    solution: Solution,
    result: SolveResult,
    baselines: Baselines,
    method: SolveMethod,
    elapsed: dict[str, float],
    model_slots: int | None = None,
    realize_seconds: float = 60.0,
    progress: Callable[[str], None] | None = None,
    lean: bool = False,
) -> Plan:
    """The plan from a solution. ``model_slots``: slots of the model that decided it (the first
    stage), when that differs from the solution's sets. ``realize_seconds``: the period MILPs' budget
    (``realize.py``). ``lean``: without the MIG config schedule and the per-team charges, for a plan read
    only for its fleet, cost and bound (``SolveSettings.lean``: a quarter of the writing time)."""
    solution = realized(solution, realize_seconds, progress)
    split = split_payments(solution.sets, solution.commits, solution.placements)
    if split:  # a cash limit on upfront fees: some purchases paid otherwise (payments.py)
        paid_sets, paid_commits = solution.sets.with_payments(solution.commits, split)
        solution = replace(solution, sets=paid_sets, commits=paid_commits)
    allocations = extract_allocations(solution)
    if solution.sets.new_plans:  # savings plans the plan may buy: their amounts for this fleet
        solution, allocations = _bought_savings_plans(solution, allocations, progress)
    sets = solution.sets
    scenario = sets.scenario
    horizon = scenario.horizon
    p = horizon.period_hours
    commitments = _commitments(sets, solution.commits, allocations)
    savings_plans = _savings_plans(sets, allocations)
    costs = _costs(sets, allocations, commitments, savings_plans)
    total = costs.total_usd
    pools = _pools(sets, allocations, solution.commits)
    committed_hours = sum(pool.committed_node_hours for pool in pools.values())
    used_hours = sum(pool.used_node_hours for pool in pools.values())
    penalty = solution.penalty_usd
    paid = total + penalty
    gap = max(0.0, paid - result.bound) / paid if paid > 0 else 0.0

    slots = len(sets.slots) if model_slots is None else model_slots
    used_offerings = set(allocations["offering"]) | {c.offering for c in commitments}
    solver = SolverReport(
        name=result.solver,
        status=result.termination.value,
        objective_usd=paid,
        model_objective_usd=result.objective,
        bound_usd=result.bound,
        gap=gap,
        seconds=round(result.seconds, 3),
        aggregated_periods=slots if slots < horizon.periods else 0,
        model_periods=slots,
        training_start_grid_hours=sets.start_grid_periods * p,
        block_hours=sets.block_periods * p,
        method=method,
        build_seconds=round(elapsed.get("build", 0.0), 3),
        penalty_usd=penalty,
        bound_method="the solver's proven lower bound for the planning model",
        notes=[*sets.notes, *solution.notes],
    )
    document = PlanDocument(
        scenario=scenario.name,
        description=scenario.description,
        created=datetime.now(UTC).replace(microsecond=0),
        horizon=PlanHorizon(
            start=horizon.start, hours=horizon.hours, period_hours=p, periods=horizon.periods
        ),
        solver=solver,
        offerings={o.id: _offering_record(o) for o in sets.offerings if o.id in used_offerings},
        commitments=commitments,
        savings_plans=savings_plans,
        training=_training_records(solution, allocations),
        unserved=_unserved(solution),
        costs=costs,
        baselines=baselines,
        utilization=Utilization(
            reserved_used_fraction=used_hours / committed_hours if committed_hours else 0.0,
            pools=pools,
        ),
        teams=_teams(scenario),
        inputs=ScenarioEcho.model_validate(
            {**scenario.model_dump(mode="json"), "max_spot_share": scenario.purchase.max_spot_share}
        ),
        mig=None if lean else mig_section(sets, allocations),
    )
    document.costs.cash_by_month = cash_by_month(Plan(document, allocations))
    plan = Plan(document, allocations)
    return plan if lean else _charged_by_team(plan)


def _charged_by_team(plan: Plan) -> Plan:
    """``costs.by_team`` and each team's ``cost_usd``, ``gpu_hours`` and ``peak_gpus`` as ``gpuplan
    chargeback`` charges them by default (``models/chargeback.py``: the ``guarantees`` rule, month by
    month; MIG slices as the GPU fraction they are), so plan.json, the report and chargeback show one
    split (issue 42), not the horizon-wide ``usage`` split :func:`_costs` makes for ``by_workload``."""
    charged = charge_plan(plan, IdleRule.GUARANTEES)
    per_team = charged.rows.groupby("team")[["cost_usd", "gpu_hours"]].sum()
    rows = plan.allocations.reset_index(drop=True)
    gpus = pd.Series(charged_gpus(Book.from_plan(plan), rows), index=rows.index)
    peaks = gpus.groupby([rows["team"], rows["period"]]).sum().groupby(level=0).max()
    document = plan.document
    cost = {team: float(per_team["cost_usd"].get(team, 0.0)) for team in document.teams}
    document.costs.by_team = cost
    for name, team in document.teams.items():
        team.cost_usd = cost[name]
        team.gpu_hours = float(per_team["gpu_hours"].get(name, 0.0))
        team.peak_gpus = float(peaks.get(name, 0.0))
    return plan


def _commitments(sets: PlanningSets, commits: dict[int, int], allocations: pd.DataFrame) -> list[Commitment]:
    """plan.json ``commitments[]``: the held ones first (in scenario order), then the purchases by
    start, each with what it costs inside the horizon, what it binds beyond, and how much it was used."""
    horizon = sets.scenario.horizon
    p = horizon.period_hours
    used = (
        allocations.groupby("commitment")["nodes"].sum() * p if len(allocations) else pd.Series(dtype=float)
    )
    result = []
    held = holding(sets, commits)
    order = sorted(held, key=lambda c: (not sets.columns[c].existing, sets.columns[c].start, c))
    for c in order:
        column, nodes = sets.columns[c], held[c]
        name = column_name(sets, c)
        node_hours = nodes * (column.end - column.start) * p
        used_hours = float(used.get(name, 0.0))
        result.append(
            Commitment(
                offering=sets.offerings[column.offering].id,
                term=column.term,
                nodes=nodes,
                usd_per_node_hour=column.usd_per_node_hour,
                cost_in_horizon_usd=nodes * column.cost_per_node,
                obligation_beyond_horizon_usd=nodes * column.usd_per_node_hour * column.beyond_hours,
                name=name,
                existing=column.existing,
                start=horizon.start + timedelta(hours=column.starts_hour),
                end=horizon.start + timedelta(hours=column.ends_hour),
                start_period=column.start,
                end_period=column.end,
                used_node_hours=used_hours,
                used_fraction=used_hours / node_hours if node_hours else 0.0,
                payment=column.payment,
                upfront_usd=column.upfront_usd,
                hourly_usd=column.hourly_usd,
                payment_source=_payment_source(column),
            )
        )
    return result


def _payment_source(column: CommitColumn) -> str:
    """Where a bought column's payment option comes from, with its basis (quoted, assumed)."""
    option = next((o for o in column.options if o.payment == column.payment), None)
    if option is None or not option.source:
        return ""  # paid by the hour: the catalog's price, whose provenance plan.json's prices give
    said = option.source.startswith(f"{option.basis}:")
    return option.source if said else f"{option.basis}: {option.source}"


def _offering_record(o: Offering) -> OfferingRecord:
    return OfferingRecord(
        cloud=o.cloud,
        region=o.region,
        instance_type=o.instance_type,
        gpu_model=o.gpu_model,
        gpus_per_node=o.gpus_per_node,
        fabric=o.fabric,
        on_demand_usd_h=o.on_demand_usd_h,
        spot_usd_h=o.spot_usd_h,
        reserved_1y_usd_h=o.reserved_1y_usd_h,
        reserved_3y_usd_h=o.reserved_3y_usd_h,
        owned_usd_h=o.owned_usd_h if o.owned else None,
        available_from_hour=o.available_from_hour if o.owned else None,
    )


def covered_share(allocations: pd.DataFrame, tiers: tuple[Tier, ...] = COMMITTED_TIERS) -> pd.Series:
    """Per (period, offering): the share of its non-spot node-hours that commitments cover (``tiers``:
    the node commitments; savings plans with ``(Tier.SAVINGS_PLAN,)``)."""
    non_spot = allocations[~allocations["tier"].isin([Tier.SPOT, *OWN_NODE_TIERS])]
    committed = non_spot["tier"].isin(tiers)
    totals = non_spot.groupby(["period", "offering"])["nodes"].sum()
    covered = non_spot[committed].groupby(["period", "offering"])["nodes"].sum()
    return (covered.reindex(totals.index, fill_value=0.0) / totals).rename("covered")


def _training_records(solution: Solution, allocations: pd.DataFrame) -> list[TrainingPlacement]:
    sets = solution.sets
    horizon = sets.scenario.horizon
    p = horizon.period_hours
    covered = covered_share(allocations)
    # what savings plans cover of a (period, offering)'s non-spot nodes: its rows split in proportion too
    plan_covered = covered_share(allocations, (Tier.SAVINGS_PLAN,)) if sets.held_plans else pd.Series()
    records = []
    # each run's own rows, found once (a filter over every row per run cost seconds on a year of hours)
    rows_of = dict(tuple(allocations.groupby(["workload", "offering"], sort=False, observed=True)))
    for option in solution.placements:
        run = sets.runs[option.run]
        offering = sets.offerings[option.offering]
        tier = Tier.SPOT
        split = {Tier.SPOT: 1.0}
        fraction = None
        cost = option.cost_usd  # spot: its effective cost; a Capacity Block: its upfront fee; flex: hours
        if option.tier.own_nodes:
            tier = option.tier.tier
            split = {tier: 1.0}
        if option.tier == Capacity.NON_SPOT:
            periods = range(option.start, option.start + option.periods)
            shares = np.array([covered.get((t, offering.id), 0.0) for t in periods])
            fraction = float(shares.mean()) if len(shares) else 0.0
            own = rows_of.get((run.job.name, offering.id), allocations.iloc[:0])
            mine = own[own["tier"].isin(COMMITTED_TIERS)]
            by_tier = mine.groupby("tier")["nodes"].sum()
            tier = Tier(str(by_tier.idxmax())) if len(by_tier) and fraction >= 0.5 else Tier.ON_DEMAND
            split = _tier_split(own, periods)
            if len(plan_covered):
                shares = shares + np.array([plan_covered.get((t, offering.id), 0.0) for t in periods])
            cost = run.job.nodes * (offering.on_demand_usd_h or 0.0) * p * float((1 - shares).sum())
        overhead = option.overhead
        records.append(
            TrainingPlacement(
                job=run.job.name,
                run=run.run,
                team=run.job.team,
                offering=offering.id,
                tier=tier,
                tiers=split,
                nodes=run.job.nodes,
                committed_fraction=fraction,
                start_period=option.start,
                periods=option.periods,
                placement_group=f"pg-{run.job.name}-{run.run}",
                fabric=offering.fabric,
                checkpoint_interval_minutes=overhead.checkpoint_interval_hours * 60 if overhead else 0.0,
                expected_overhead=overhead.expected_overhead if overhead else 0.0,
                cost_usd=cost,
                block_hours=(
                    block_duration_hours(option.periods * p, offering.cloud)
                    if tier == Tier.CAPACITY_BLOCK
                    else None
                ),
                flex_start_delay_hours=(
                    sets.scenario.purchase.flex_start_delay_hours if tier == Tier.FLEX_START else None
                ),
                start=period_start(horizon, option.start),
                end=period_start(horizon, option.start + option.periods),
                hours=run.job.hours,
                held_hours=option.periods * p,
                gang_interruptions_per_hour=overhead.gang_interruptions_per_hour if overhead else 0.0,
                expected_interruptions=overhead.expected_interruptions if overhead else 0.0,
                fallback=run.job.fallback,
            )
        )
    records.sort(key=lambda r: (r.job, r.run))
    return records


def _tier_split(own: pd.DataFrame, periods: range) -> dict[Tier, float]:
    """The share of a non-spot run's node-hours on each tier, from its own rows (``own``: its job's on its
    offering; here those of its periods): commitments, savings plans and on-demand, as billed (issue 42:
    ``tier`` alone named one tier for runs whose rows are split)."""
    billed = ~own["tier"].isin([Tier.SPOT, *OWN_NODE_TIERS])
    rows = own[billed & own["period"].between(periods.start, periods.stop - 1)]
    nodes = rows.groupby("tier")["nodes"].sum()
    total = float(nodes.sum())
    if total <= 0:
        return {Tier.ON_DEMAND: 1.0}
    return {Tier(str(t)): float(n) / total for t, n in nodes.items() if n > 0}


def _unserved(solution: Solution) -> list[Unserved]:
    sets = solution.sets
    p = sets.period_hours
    result: list[Unserved] = []
    for i, service in enumerate(sets.services):
        short = solution.unserved_replicas[i]
        hours = float((short > EPS).sum() * p)
        replica_hours = float(short[short > EPS].sum() * p)
        if replica_hours > EPS:
            reason = sets.no_offering_reason.get(i) or _inference_reason(sets, i)
            result.append(
                UnservedInference(
                    workload=service.name,
                    team=service.team,
                    replica_hours=replica_hours,
                    periods=round(hours / p),
                    reason=reason,
                )
            )
    for r in solution.unserved_runs:
        run = sets.runs[r]
        why = unserved_why(sets, r)
        if why == Why.NO_OPTION:
            reason = sets.no_option_reason[r]
        else:  # room is claimed only where it is proven absent (repair.py)
            reason = NO_ROOM if why == Why.NO_ROOM else UNPLACED
        result.append(
            UnservedTraining(
                workload=run.job.name,
                team=run.job.team,
                run=run.run,
                gpu_hours=run.gpus * run.job.hours,
                reason=reason,
            )
        )
    for team, short in solution.guarantee_short.items():
        if short > EPS:
            result.append(
                UnservedGuarantee(
                    workload=f"guarantee:{team}",
                    team=team,
                    gpus=short,
                    reason="no committable offering matches the team's GPU models (or capacity limits)",
                )
            )
    return result


def _inference_reason(sets: PlanningSets, i: int) -> str:
    service = sets.services[i]
    team = sets.scenario.team[service.team]
    limited = [sets.offerings[o].id for o in sets.eligible(i) if sets.offerings[o].max_nodes is not None]
    parts = []
    if team.burst_gpus is not None:
        parts.append(f"team {team.name}'s burst limit of {team.burst_gpus} GPUs")
    if limited:
        parts.append("max_nodes of " + ", ".join(limited[:4]))
    return "demand above what " + (" or ".join(parts) if parts else "the eligible offerings") + " allows"


def _costs(
    sets: PlanningSets,
    allocations: pd.DataFrame,
    commitments: list[Commitment],
    savings_plans: list[SavingsPlanCommitment] | None = None,
) -> Costs:
    by_tier: dict[Tier, float] = {tier: 0.0 for tier in TIERS}
    if any(o.owned for o in sets.offerings):
        by_tier[Tier.OWNED] = 0.0
    for column in sets.columns:  # tiers only held commitments bring (capacity reservations)
        by_tier.setdefault(TERM_TIER[column.term], 0.0)
    if savings_plans:  # savings_plan only in a plan that holds one (older plans' by_tier unchanged)
        by_tier[Tier.SAVINGS_PLAN] = 0.0
    for tier, value in allocations.groupby("tier")["cost_usd"].sum().items():  # capacity_block: if bought
        by_tier[Tier(str(tier))] = by_tier.get(Tier(str(tier)), 0.0) + float(value)
    cloud_of = {o.id: o.cloud for o in sets.offerings}
    by_cloud: dict[str, float] = defaultdict(float)
    by_workload: dict[str, float] = defaultdict(float)
    by_team: dict[str, float] = {team.name: 0.0 for team in sets.scenario.teams}
    if len(allocations):
        for cloud, value in (
            allocations.groupby(allocations["offering"].map(cloud_of))["cost_usd"].sum().items()
        ):
            by_cloud[str(cloud)] += float(value)
        for key, value in allocations.groupby(["team", "workload"])["cost_usd"].sum().items():
            team, workload = cast(tuple[str, str], key)
            by_team[str(team)] += float(value)
            by_workload[str(workload)] += float(value)
    # chargeback of commitments (models/chargeback.py): each commitment's cost over the horizon split by
    # the node-hours each workload used of it (idle hours shared by use); one nobody used is charged to
    # the teams that hold guarantees, else shared by every team
    reserved = allocations[allocations["tier"].isin(COMMITTED_TIERS)]
    use = reserved.groupby(["commitment", "team", "workload"])["nodes"].sum()
    used_names = set(use.index.get_level_values(0))
    holders = [t for t in sets.scenario.teams if t.guaranteed_gpus > 0] or sets.scenario.teams
    fallback = {(holder.name, ""): float(holder.guaranteed_gpus or 1) for holder in holders}
    for commitment in commitments:
        cost = commitment.cost_in_horizon_usd
        tier = TERM_TIER[commitment.term]
        by_tier[tier] = by_tier.get(tier, 0.0) + cost
        by_cloud[cloud_of[commitment.offering]] += cost
        used: dict[tuple[str, str], float] = {}
        if commitment.name in used_names:
            for key, nodes in use.loc[commitment.name].items():
                team, workload = cast(tuple[str, str], key)
                used[(str(team), str(workload))] = float(nodes)
        end = sets.scenario.horizon.periods if commitment.end_period is None else commitment.end_period
        capacity = float(commitment.nodes * (end - commitment.start_period))  # node-periods, as used is
        shares = amortize(cost, used, capacity, IdleRule.USAGE, {}, fallback)
        for (team, workload), share in shares.items():
            by_team[team] += share.usd
            if workload:
                by_workload[workload] += share.usd
        if not used:
            by_workload["(unused commitments)"] += cost
    # savings plans: each plan's cost split by the dollars of it each workload spent (its rows' node-hours
    # at the plan's rates); one nobody used as an unused commitment is
    for plan in savings_plans or []:
        by_tier[Tier.SAVINGS_PLAN] += plan.cost_in_horizon_usd
        by_cloud["azure" if plan.kind == "savings-plan" else "aws"] += plan.cost_in_horizon_usd
        mine = allocations[
            (allocations["tier"] == Tier.SAVINGS_PLAN) & (allocations["commitment"] == plan.name)
        ]
        spent: dict[tuple[str, str], float] = defaultdict(float)
        for row in mine.itertuples(index=False):
            spent[(str(row.team), str(row.workload))] += float(str(row.nodes)) * plan.rates[str(row.offering)]
        shares = amortize(plan.cost_in_horizon_usd, spent, sum(spent.values()), IdleRule.USAGE, {}, fallback)
        for (team, workload), share in shares.items():
            by_team[team] += share.usd
            if workload:
                by_workload[workload] += share.usd
        if not spent:
            by_workload["(unused commitments)"] += plan.cost_in_horizon_usd
    total = sum(by_tier.values())
    return Costs(
        total_usd=total,
        by_tier=by_tier,
        by_team=by_team,
        by_cloud=dict(by_cloud),
        by_workload=dict(by_workload),
    )


def _pools(
    sets: PlanningSets, allocations: pd.DataFrame, commits: dict[int, int]
) -> dict[str, PoolUtilization]:
    """Per committed offering: its most nodes committed at once, its committed node-hours inside the
    horizon (each commitment over its own window) and how many of them workloads used."""
    p = sets.period_hours
    reserved = allocations[allocations["tier"].isin(COMMITTED_TIERS)]
    used = reserved.groupby("offering")["nodes"].sum() * p
    by_period = sets.committed(commits)
    pools = {}
    for o in sorted({sets.columns[c].offering for c in holding(sets, commits)}):
        offering_id = sets.offerings[o].id
        nodes = round(by_period[o].max(initial=0.0))
        committed = float(by_period[o].sum() * p)
        used_hours = float(used.get(offering_id, 0.0))
        pools[offering_id] = PoolUtilization(
            committed_nodes=nodes,
            committed_node_hours=float(committed),
            used_node_hours=used_hours,
            used_fraction=used_hours / committed if committed else 0.0,
        )
    return pools


def _teams(scenario: Scenario) -> dict[str, TeamSummary]:
    """Each team's scenario terms; its use and cost are filled in by :func:`_charged_by_team`."""
    result = {}
    for team in scenario.teams:
        result[team.name] = TeamSummary(
            guaranteed_gpus=team.guaranteed_gpus,
            burst_gpus=team.burst_gpus,
            priority=team.priority,
            peak_gpus=0.0,
            gpu_hours=0.0,
            cost_usd=0.0,
        )
    return result
