"""A plan over demand futures (issue 41): what to buy now so that the fleet costs least on average (or with
its risk weighed) over several futures, instead of on one forecast taken as certain.

The method is two-stage sample average approximation, solved by decomposition (docs/futures.md):

1. **Wait and see.** Each future is planned on its own (the planner's full model, purchases free, in
   parallel processes or on Dask): its plan is what a perfect forecast of that future would buy, its
   fleet (``fleet_bill.py``) the future's second stage, and its certified bound a valid lower bound of the
   future's cost under any first stage. The weighted sum of those bounds is therefore a certified lower
   bound on the best expected cost any first stage can reach (wait-and-see <= here-and-now). Past
   ``FULL_OWN_PLANS`` futures (``own_plans: auto``) the futures' own plans are quick: whole replicas by the
   rounding alone and at most ``QUICK_TIME_LIMIT`` of search, a quarter of the time, the bounds as valid.
2. **The master** (``futures_master.py``): one MILP over every future's fleet gives the purchase of least
   expected (or risk-weighted) cost, the tail after the horizon counted.
3. **Candidates.** First stages (what is bought, at which purchase step): the point forecast's own, the
   master's, buying nothing more, the weighted quantiles of the futures' purchases taken key by key
   (offering, term, start) at each cumulative weight of the futures ordered by what their own plans buy,
   each future's own, and the point forecast's committing peers. With one purchase key (one offering, one
   term) the sample-average optimum is one of the quantiles (the newsvendor's critical fractile); the tests
   check that against enumeration.
4. **Second stage.** Each candidate is priced on each future: ``second_stage: fleet`` bills the future's
   fleet with the candidate's commitments (a feasible second stage, in microseconds); ``replanned`` plans
   the future with the candidate's purchases held and nothing more for sale (``models/held.py``), on-demand,
   spot and training re-optimized, one full plan each.
5. **Choice.** Among the candidates that meet the risk constraints (``risk.cap``: a quantile of the cost at
   most a sum; ``risk.committed_share``: in futures weighing at least a probability, at least a share of the
   latency-critical inference node-hours on committed tiers), the one with the least
   ``(1 - w) * expected + w * CVaR``; when none meets them, an InputError naming the least quantile (or the
   most weight) any candidate reaches. Then a second round: the best one's levels times 0.85 and 1.15,
   priced the same way, and the least of all; reported with the expected cost, P10/P50/P90 and the worst
   future, the value of the stochastic solution (the point forecast's purchases on the same futures, less
   this), the expected value of perfect information (this, less wait and see), and per purchase how often
   it is used above its break-even. With ``fleet`` pricing each future's fleet billed with the chosen
   purchases is then written as its plan (``optimize/seed.py``, ``rebilled_plan``): what verify checks.

**The plan to act on** (``gpuplan plan --futures``, :func:`pinned_plan`): the point forecast's scenario
planned with the chosen commitments as its own purchases (bought, so provisioning buys them), not held:
the training placements of the point forecast's own plan (``fleet``) or of it re-planned holding them
(``replanned``), and the finishing path every plan takes (``optimize/seed.py``), whose certified bound is
the point forecast's own plan's.

The plans are solved by the what-if engines (``planner/planning/sweeps.py``): local processes or a Dask
cluster; every job is independent.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from models.catalog import Catalog
from models.errors import GpuplanError, InputError, SolverError
from models.futures import (
    Candidate,
    CommitmentUse,
    FuturesDocument,
    FuturesFile,
    FuturesSummary,
    MasterSummary,
    Purchase,
    Risk,
    cvar,
    quantile_name,
    weighted_quantile,
)
from models.held import bought_commitments, bought_savings_plans, held_savings_plan, holding_only
from models.inputs import Inputs, load_inputs
from models.plan import Commitment, Plan
from models.scenario import CsvSeries, ExistingCommitment, HeldSavingsPlan
from models.tiers import HOURS_PER_YEAR, PREPAID_TIERS, Term
from models.variation import parse_all
from planner.planning.fleet_bill import Bill, Fleet, bill, fleet_of, held_nodes, tail_floor
from planner.planning.futures_master import master_first_stage
from planner.planning.optimize import SolveSettings
from planner.planning.optimize.finish import guarantee_shortfall
from planner.planning.optimize.seed import dispatched_plan
from planner.planning.problem.sets import PlanningSets, build_sets
from planner.planning.sweeps import Failure, PlanJob, make_job, open_engine

__all__ = [
    "FirstStage",
    "FuturesResult",
    "carried_tail",
    "committed_share",
    "first_stage",
    "least_rates",
    "own_plan_settings",
    "peer_stages",
    "pinned_plan",
    "plan_futures",
    "quantile_stages",
    "scaled_stages",
]

#: Most candidate first stages priced on every future (each costs one plan per future).
MAX_CANDIDATES = 12
#: ``own_plans: quick``: each future's own plan gets at most this many nominal seconds (``--time-limit`` per
#: plan, if lower, stands). What is left of a quick plan is mostly fixed work (dispatch, bound, writing):
#: on growth-year a limit of 8 and one of 20 gave the same plan before whole replicas, in 9.4 and 10.4 CPU s.
QUICK_TIME_LIMIT = 10.0

#: A commitment's key across plans: offering, term, start (its nodes are the level).
CommitmentKey = tuple[str, str, str, float]
#: A savings plan's key: kind, term, family, region, start (its USD per hour is the level).
PlanKey = tuple[str, str, str | None, str | None, str]


@dataclass(frozen=True)
class FirstStage:
    """What is bought now: commitments (nodes at a rate from a start) and savings plans (USD per hour)."""

    name: str
    origin: str
    commitments: tuple[ExistingCommitment, ...] = ()
    plans: tuple[HeldSavingsPlan, ...] = ()
    also: tuple[str, ...] = ()  # other candidates with the same purchases (a peer that buys what we buy)

    @property
    def levels(self) -> dict[CommitmentKey | PlanKey, float]:
        """Per purchase key, the nodes committed (commitments) or USD per hour (savings plans)."""
        levels: dict[CommitmentKey | PlanKey, float] = {}
        for c in self.commitments:
            levels[_commitment_key(c)] = levels.get(_commitment_key(c), 0.0) + c.nodes
        for p in self.plans:
            levels[_plan_key(p)] = levels.get(_plan_key(p), 0.0) + p.usd_per_hour
        return levels

    def content(self) -> tuple[Any, ...]:
        """What makes two first stages the same purchase (names aside)."""
        return tuple(sorted((str(k), round(v, 6)) for k, v in self.levels.items() if v > 0))

    def value_usd(self) -> float:
        """A size to order first stages by: the purchases' hourly commitment."""
        hourly = sum(c.nodes * (c.usd_per_node_hour or 0.0) for c in self.commitments)
        return hourly + sum(p.usd_per_hour for p in self.plans)

    def purchases(self) -> list[Purchase]:
        return [
            Purchase(
                kind="commitment", offering=c.offering, term=c.term, start=c.start, nodes=c.nodes,
                usd_per_node_hour=c.usd_per_node_hour,
            )
            for c in self.commitments
        ] + [
            Purchase(
                kind=str(p.kind), offering=" ".join(x for x in (p.family, p.region) if x) or str(p.kind),
                term=p.term, start=p.start, usd_per_hour=p.usd_per_hour,
            )
            for p in self.plans
        ]  # fmt: skip


def _commitment_key(c: ExistingCommitment) -> CommitmentKey:
    return (c.offering, str(c.term), c.start.isoformat(), float(c.usd_per_node_hour or 0.0))


def _plan_key(p: HeldSavingsPlan) -> PlanKey:
    return (str(p.kind), str(p.term), p.family, p.region, p.start.isoformat())


def first_stage(plan: Plan, name: str, origin: str) -> FirstStage:
    """The purchases ``plan`` makes, as a first stage."""
    return FirstStage(name, origin, tuple(bought_commitments(plan)), tuple(bought_savings_plans(plan)))


def quantile_stages(stages: Sequence[FirstStage], weights: Sequence[float]) -> list[FirstStage]:
    """Key by key, the weighted quantile of ``stages``' levels (a key a stage lacks: 0), at each cumulative
    weight of the stages ordered by their size (module docstring, step 2)."""
    order = sorted(range(len(stages)), key=lambda i: (stages[i].value_usd(), i))
    cumulative: list[float] = []
    running = 0.0
    for i in order:
        running += weights[i]
        cumulative.append(min(running, 1.0))
    per_stage = [s.levels for s in stages]
    keys = sorted({k for levels in per_stage for k in levels}, key=str)
    examples: dict[Any, Any] = {}
    for s in stages:
        for c in s.commitments:
            examples.setdefault(_commitment_key(c), c)
        for p in s.plans:
            examples.setdefault(_plan_key(p), p)
    result = []
    for q in sorted(set(cumulative)):
        commitments: list[ExistingCommitment] = []
        plans: list[HeldSavingsPlan] = []
        for key in keys:
            value = weighted_quantile([levels.get(key, 0.0) for levels in per_stage], list(weights), q)
            if value <= 0:
                continue
            example = examples[key]
            if isinstance(example, ExistingCommitment):
                commitments.append(example.model_copy(update={"nodes": round(value), "name": None}))
            else:
                # one name per plan of the stage: two futures' plans may have given the same name
                name = f"{example.name}-q{len(plans)}"
                plans.append(example.model_copy(update={"usd_per_hour": value, "name": name}))
        result.append(
            FirstStage(f"quantile {q:.2f}", f"the futures' purchases at their {q:.0%} quantile",
                       tuple(commitments), tuple(plans))
        )  # fmt: skip
    return result


@dataclass(frozen=True)
class FuturesResult:
    """futures.json's document; the chosen purchases' plan in each future with the inputs it was planned
    from (the future, the purchases held: what ``gpuplan verify`` checks it against); the point forecast's
    own plan; every candidate's purchases by name (to bill them on other demand, as the backtest does)."""

    document: FuturesDocument
    chosen: dict[str, Plan]
    chosen_inputs: dict[str, Inputs]
    point: Plan
    stages: dict[str, FirstStage] = field(default_factory=dict)  # every candidate priced, by name
    act_on: Plan | None = None  # with act_on=True: the point forecast planned buying the chosen purchases


@dataclass(frozen=True)
class _Outcome:
    """One candidate in one future, as the document reads it: from the future re-planned with the
    candidate held (``second_stage: replanned``) or from the future's fleet billed with it (``fleet``)."""

    horizon_usd: float
    tail_usd: float
    owed_after_usd: float
    unserved: int
    committed_share: float  # latency-critical node-hours on committed tiers (1 where there are none)
    used: dict[CommitmentKey, float]  # the candidate's commitment -> used node-hours / its node-hours


@dataclass
class _Priced:
    """One candidate in each future (its plan there when re-planned), and where it failed, with why."""

    stage: FirstStage
    outcomes: dict[str, _Outcome]
    failures: dict[str, str]
    plans: dict[str, Plan] = field(default_factory=dict)


def _objective(plan: Plan) -> float:
    return float(plan.document.solver.objective_usd)


def _planned_outcome(
    plan: Plan, stage: FirstStage, until: datetime | None, critical: Collection[str]
) -> _Outcome:
    """A candidate's outcome read from its plan in a future (``stage``'s commitments held there)."""
    used: dict[CommitmentKey, float] = {}
    for held in stage.commitments:
        match = [
            c
            for c in plan.document.commitments
            if c.existing and c.offering == held.offering and c.term == held.term and c.start == held.start
        ]
        nodes = sum(c.nodes for c in match)
        used[_commitment_key(held)] = (
            sum((c.used_fraction or 0.0) * c.nodes for c in match) / nodes if nodes else 0.0
        )
    return _Outcome(
        horizon_usd=_objective(plan),
        tail_usd=carried_tail(plan, until) if until is not None else 0.0,
        owed_after_usd=_owed_after(plan),
        unserved=len(plan.document.unserved),
        committed_share=committed_share(plan, critical) if critical else 1.0,
        used=used,
    )


def _billed_outcome(billed: Bill, fleet: Fleet) -> _Outcome:
    """A candidate's outcome read from its bill on a future's fleet (``fleet_bill.py``)."""
    return _Outcome(
        horizon_usd=billed.horizon_usd,
        tail_usd=billed.tail_usd,
        owed_after_usd=billed.owed_after_usd,
        unserved=fleet.unserved,
        committed_share=billed.committed_share,
        used=dict(billed.used),
    )


def _owed_after(plan: Plan) -> float:
    doc = plan.document
    return float(
        sum(c.obligation_beyond_horizon_usd for c in doc.commitments)
        + sum(p.obligation_beyond_horizon_usd for p in doc.savings_plans)
    )


def _with_series(given: Inputs, series: dict[str, str], index: int) -> Inputs:
    """``given`` with each service of ``series`` reading its demand from that CSV (a path made relative to
    the scenario's directory, so a Dask worker gets the file with the job)."""
    if not series:
        return given
    services = {s.name for s in given.scenario.inference}
    unknown = sorted(set(series) - services)
    if unknown:
        raise InputError(
            None,
            f"futures[{index}].series.{unknown[0]}",
            f"no such service; the scenario has {sorted(services)}",
        )
    inference = [
        s.model_copy(update={"replicas": CsvSeries(csv=os.path.relpath(series[s.name], given.base_dir))})
        if s.name in series
        else s
        for s in given.scenario.inference
    ]
    return replace(given, scenario=given.scenario.model_copy(update={"inference": inference}))


def _horizon_end(plan: Plan) -> datetime:
    horizon = plan.document.horizon
    return horizon.start + timedelta(hours=horizon.hours)


def carried_tail(plan: Plan, until: datetime) -> float:
    """What the fleet of ``plan`` costs from the horizon's end to ``until`` with its last month of demand
    carried forward (models/futures.py, ``tail: carried``): its fleet billed on (``fleet_bill.bill``: per
    offering, the mean pool nodes of the horizon's last month; in each stretch between commitment ends,
    the commitments still running at their rate and the demand beyond them on demand), and the savings
    plans still running at their hourly commitment (counted as covering nothing: cautious)."""
    if until <= _horizon_end(plan):
        return 0.0
    fleet = fleet_of(plan)
    total = bill(fleet, held_nodes(bought_commitments(plan), fleet.horizon_start), until).tail_usd
    end = _horizon_end(plan)
    for plan_ in plan.document.savings_plans:
        stop = min(plan_.end, until)
        if stop > end:
            total += plan_.usd_per_hour * (stop - end).total_seconds() / 3600
    return total


def _tail_until(stages: Sequence[FirstStage], plans: Sequence[Plan]) -> datetime | None:
    """The end of the longest term any candidate buys (None: nothing bought runs past the horizon)."""
    end = _horizon_end(plans[0])
    ends = [c.ends for s in stages for c in s.commitments if c.ends > end] + [
        p.start + timedelta(hours=(p.term.years or 0) * HOURS_PER_YEAR) for s in stages for p in s.plans
    ]
    later = [e for e in ends if e > end]
    return max(later) if later else None


def plan_futures(
    scenario: Path,
    spec: FuturesFile,
    settings: SolveSettings,
    workers: int | None = None,
    cluster: str | None = None,
    say: Callable[[str], None] | None = None,
    source: Path | None = None,
    act_on: bool = False,
    prices: Path | None = None,
) -> FuturesResult:
    """Plan ``scenario`` over the futures of ``spec`` (module docstring); ``source``: the futures file, named
    in errors about its settings. ``act_on``: also the plan to act on (:func:`pinned_plan`). ``prices``: a
    pricing overlay (``--prices``, docs/prices.md) applied to the point forecast and to every future."""
    tell = say or (lambda _m: None)
    names = [f.name for f in spec.futures]
    weights = spec.weights()
    point_inputs = load_inputs(scenario, prices=prices)
    if point_inputs.scenario.colocation is not None:
        raise InputError(
            scenario, "colocation", "plans over futures do not yet decide owned nodes; plan it without them"
        )
    critical = {s.name for s in point_inputs.scenario.inference if s.latency_critical}
    if spec.risk.committed_share is not None and not critical:
        raise InputError(
            source,
            "risk.committed_share",
            f"{scenario.name} has no latency-critical inference service to serve from committed capacity",
        )
    inputs: dict[str, Inputs] = {}
    for index, future in enumerate(spec.futures):
        try:
            given = load_inputs(scenario, parse_all(future.vary, f"futures[{index}].vary"), prices=prices)
        except InputError as error:
            raise InputError(
                error.file, f"futures[{index}] ({future.name}): {error.where}", error.problem
            ) from None
        inputs[future.name] = _with_series(given, future.series, index)

    def job(
        label: str, given: Inputs, stage: FirstStage | None = None, solve: SolveSettings = settings
    ) -> PlanJob:
        planned = given.scenario
        if stage is not None:
            planned = holding_only(planned, stage.commitments, stage.plans)
        return make_job(label, planned, given.catalog, given.base_dir, solve)

    # a future with no change is the point forecast: planned once
    as_written = {f.name for f in spec.futures if not f.vary and not f.series}
    planned = [n for n in names if n not in as_written]
    own_plans = spec.own_plans_method(len(planned))
    # read for their fleets, costs and bounds only (lean); quick: whole replicas by the rounding alone
    # (FuturesFile.own_plans). The point forecast's in full: it is written, and a candidate.
    own_settings = own_plan_settings(settings, own_plans)
    own_jobs = [job("point forecast", point_inputs)] + [
        job(f"future {n}", inputs[n], solve=own_settings) for n in planned
    ]
    count = len(own_jobs)
    second = spec.second_stage
    if second == "fleet" and (
        point_inputs.scenario.savings_plans or point_inputs.scenario.purchase.savings_plans
    ):
        tell("savings plans are held or for sale: each candidate is re-planned in each future (second_stage: "
             "replanned); a fleet bill counts committed nodes, not dollars per hour")  # fmt: skip
        second = "replanned"
    spec = spec.model_copy(update={"second_stage": second, "own_plans": own_plans})
    on_demand = {o.id: float(o.on_demand_usd_h or 0.0) for o in point_inputs.catalog}
    with open_engine(cluster, workers, count) as engine:
        same = f" ({', '.join(sorted(as_written))}: the point forecast)" if as_written else ""
        how = " (whole replicas by rounding: own_plans quick)" if own_plans == "quick" else ""
        tell(f"planning the point forecast and {len(planned)} futures on their own{how}{same} "
             f"({engine.name})")  # fmt: skip
        outcomes = engine.run(own_jobs, lambda i, _o: tell(f"  planned {own_jobs[i].label}"))
        own: list[Plan] = []
        for label_job, outcome in zip(own_jobs, outcomes, strict=True):
            if isinstance(outcome, Failure):
                raise GpuplanError(f"{label_job.label}: {outcome.message}")
            own.append(outcome)
        point_plan = own[0]
        future_plans = {n: point_plan for n in as_written} | dict(zip(planned, own[1:], strict=True))
        fleets = {n: fleet_of(future_plans[n], critical) for n in names}

        point_sets = build_sets(
            point_inputs.scenario, point_inputs.catalog, point_inputs.base_dir, settings.model_options()
        )
        master, master_stage = _master(point_inputs, point_sets, spec, settings, fleets, names, weights, tell)
        stages = _candidates(point_plan, point_inputs.catalog, future_plans, names, weights, master_stage)
        until = _tail_until(stages, [point_plan]) if spec.tail == "carried" else None

        def price(stages: Sequence[FirstStage]) -> dict[str, _Priced]:
            if second == "fleet":
                return _billed(stages, point_inputs, settings, fleets, names, until, tell)
            count = len(stages) * len(names)
            tell(f"pricing {len(stages)} candidate purchases on {len(names)} futures ({count} plans)")
            pairs = [(s, n) for s in stages for n in names]
            jobs = [job(f"{s.name} in {n}", inputs[n], s) for s, n in pairs]
            finished = 0

            def done(_index: int, _outcome: Plan | Failure) -> None:
                nonlocal finished
                finished += 1
                if finished % max(1, len(jobs) // 10) == 0 or finished == len(jobs):
                    tell(f"  priced {finished} of {len(jobs)}")

            priced = {s.name: _Priced(s, {}, {}) for s in stages}
            for (s, n), outcome in zip(pairs, engine.run(jobs, done), strict=True):
                if isinstance(outcome, Failure):
                    priced[s.name].failures[n] = outcome.message
                else:
                    priced[s.name].plans[n] = outcome
                    priced[s.name].outcomes[n] = _planned_outcome(outcome, s, until, critical)
            return priced

        priced = price(stages)
        settled = (names, weights, point_plan, future_plans, critical, until, on_demand)
        _first, chosen = _document(scenario, spec, *settled, priced, strict=False)
        seen = {p.stage.content() for p in priced.values()}
        nearby = [s for s in scaled_stages(priced[chosen].stage) if s.content() not in seen]
        if nearby:  # the own plans buy for the horizon alone: try a little less and more than the best
            priced.update(price(nearby))
        floors = None
        if second == "fleet":  # holds for fleet bills (a re-planned future's tail carries other nodes)
            least = least_rates(point_sets, [p.stage for p in priced.values()], fleets.values())
            floors = {n: tail_floor(fleets[n], until, least) for n in names}
        document, chosen = _document(scenario, spec, *settled, priced, source=source, tail_floors=floors)
        if master is not None:
            document.master = master
        stage = priced[chosen].stage
        held = {
            n: replace(inputs[n], scenario=holding_only(inputs[n].scenario, stage.commitments, stage.plans))
            for n in names
        }
        chosen_plans = priced[chosen].plans
        if second == "fleet":
            tell(f"writing each future's fleet billed with the chosen purchases ({chosen}) as its plan")
            dispatch = [
                make_job(f"{chosen} in {n}", held[n].scenario, held[n].catalog, held[n].base_dir, settings,
                         fleet=future_plans[n])
                for n in names
            ]  # fmt: skip
            chosen_plans = {}
            for n, outcome in zip(names, engine.run(dispatch), strict=True):
                if isinstance(outcome, Failure):
                    raise GpuplanError(f"the chosen purchases ({chosen}) in {n}: {outcome.message}")
                chosen_plans[n] = outcome
        acted = None
        if act_on and chosen == "point forecast":
            acted = point_plan  # the point forecast's own plan buys exactly these
        elif act_on and second == "fleet":  # as in the futures: the point forecast's own training kept
            tell(f"dispatching the point forecast buying the chosen purchases ({chosen})")
            acted = pinned_plan(point_inputs, stage, point_plan, point_plan, settings, tell)
        elif act_on:
            tell(f"planning the point forecast holding the chosen purchases ({chosen})")
            (outcome,) = engine.run([job(f"point forecast with {chosen}", point_inputs, stage)])
            if isinstance(outcome, Failure):
                raise GpuplanError(f"the point forecast with the chosen purchases: {outcome.message}")
            acted = pinned_plan(point_inputs, stage, outcome, point_plan, settings, tell)
    if acted is not None:
        acted.document.solver.notes.append(
            f"its purchases are the chosen first stage ({chosen}) of a plan over {len(names)} demand futures "
            "(futures/futures.json): made, not re-optimized for the point forecast alone"
        )
    by_name = {name: p.stage for name, p in priced.items()}
    return FuturesResult(document, chosen_plans, held, point_plan, by_name, acted)


def own_plan_settings(settings: SolveSettings, own_plans: Literal["full", "quick"]) -> SolveSettings:
    """The settings of the futures' own plans: lean (read for fleet, cost and bound, never written); quick,
    also whole replicas by the rounding alone and at most :data:`QUICK_TIME_LIMIT` of search."""
    lean = replace(settings, lean=True)
    if own_plans == "full":
        return lean
    limit = min(settings.time_limit or QUICK_TIME_LIMIT, QUICK_TIME_LIMIT)
    return replace(lean, realize_seconds=0.0, time_limit=limit)


#: The name of the futures master's candidate (``futures_master.py``).
MASTER = "futures master"


def _master(
    inputs: Inputs,
    sets: PlanningSets,
    spec: FuturesFile,
    settings: SolveSettings,
    fleets: dict[str, Fleet],
    names: Sequence[str],
    weights: Sequence[float],
    say: Callable[[str], None],
) -> tuple[MasterSummary | None, FirstStage | None]:
    """The futures master's first stage over the futures' fleets (``futures_master.py``), bought on the
    point forecast's purchase columns (``sets``); None when the scenario sells no commitment term."""
    scenario = inputs.scenario
    if not scenario.purchase.terms:
        return None, None
    began = time.perf_counter()
    if not sets.new_columns:
        return None, None
    ends = [sets.columns[c].ends_hour for c in sets.new_columns]
    start = scenario.horizon.start
    until = start + timedelta(hours=max(ends)) if spec.tail == "carried" and ends else None
    risk = spec.risk
    result = master_first_stage(
        sets, [fleets[n] for n in names], weights, until, risk.cvar, risk.weight, settings.time_limit
    )
    seconds = time.perf_counter() - began
    say(
        f"futures master: one MILP over {len(names)} futures' fleets ({result.columns:,} columns, "
        f"{result.rows:,} rows) in {seconds:.1f} s"
    )
    stage = FirstStage(MASTER, "the futures master: the least expected cost over every future's fleet",
                       result.commitments)  # fmt: skip
    summary = MasterSummary(
        candidate=MASTER,
        score_usd=result.score_usd,
        columns=result.columns,
        rows=result.rows,
        seconds=seconds,
    )
    return summary, stage


def least_rates(
    sets: PlanningSets, stages: Sequence[FirstStage], fleets: Iterable[Fleet]
) -> dict[str, float]:
    """Per offering id, the least rate a node-hour of it can be paid at under any first stage gpuplan
    prices: on demand (the point forecast's and each future's), every commitment column of the point
    forecast's ``sets`` (held or for sale, every payment option), every savings plan rate, every candidate's
    commitments and the scenario's own. What ``fleet_bill.tail_floor`` charges each carried node-hour."""
    least: dict[str, float] = {}

    def lower(offering: str, rate: float | None) -> None:
        if rate is not None:
            least[offering] = min(least.get(offering, math.inf), float(rate))

    for offering in sets.offerings:
        lower(offering.id, offering.on_demand_usd_h)
    for column in sets.columns:
        lower(sets.offerings[column.offering].id, column.usd_per_node_hour)
    for rates in sets.group_rates:
        for o, rate in rates.items():
            lower(sets.offerings[o].id, rate)
    for stage in stages:
        for c in stage.commitments:
            lower(c.offering, c.usd_per_node_hour or 0.0)
    for fleet in fleets:
        for offering_id, rate in fleet.on_demand_usd_h.items():
            lower(offering_id, rate)
        for h in fleet.scenario_held:
            lower(h.offering, h.usd_per_node_hour)
    return least


def _billed(
    stages: Sequence[FirstStage],
    inputs: Inputs,
    settings: SolveSettings,
    fleets: dict[str, Fleet],
    names: Sequence[str],
    until: datetime | None,
    say: Callable[[str], None],
) -> dict[str, _Priced]:
    """Each candidate billed on each future's fleet (``second_stage: fleet``). Left out, saying why: a
    candidate with savings plans (a fleet bill counts committed nodes), and one whose commitments cannot
    back the teams' guarantees (checked on ``inputs``, the point forecast: guarantees do not vary with
    demand), as a re-planned future would have no plan with it."""
    say(f"billing {len(stages)} candidate purchases on {len(names)} futures' fleets")
    priced: dict[str, _Priced] = {}
    for stage in stages:
        entry = _Priced(stage, {}, {})
        priced[stage.name] = entry
        if stage.plans:
            entry.failures[names[0]] = (
                "holds savings plans, which a fleet bill cannot price (second_stage: replanned)"
            )
            continue
        held = holding_only(inputs.scenario, stage.commitments, stage.plans)
        sets = build_sets(held, inputs.catalog, inputs.base_dir, settings.model_options())
        short = {team: gpus for team, gpus in guarantee_shortfall(sets, {})[0].items() if gpus > 1e-6}
        if short:
            entry.failures[names[0]] = "; ".join(
                f"team {team}'s guarantee is {gpus:g} GPUs beyond what these commitments can back"
                for team, gpus in sorted(short.items())
            )
            continue
        for n in names:
            fleet = fleets[n]
            billed = bill(fleet, held_nodes(stage.commitments, fleet.horizon_start), until)
            entry.outcomes[n] = _billed_outcome(billed, fleet)
    return priced


def pinned_plan(
    inputs: Inputs,
    stage: FirstStage,
    held: Plan,
    reference: Plan,
    settings: SolveSettings,
    say: Callable[[str], None],
) -> Plan:
    """``inputs``' scenario planned buying exactly ``stage``'s commitments (module docstring): ``held`` is a
    plan of that scenario whose training placements are kept (planned holding them, or its own plan),
    ``reference`` its own plan (its baselines and certified bound hold for any purchase). With no savings
    plan in ``stage`` none is for sale; with some, the finishing path buys the amounts that fit the fleet
    as written (not pinned)."""
    scenario = inputs.scenario
    if not stage.plans:
        scenario = scenario.model_copy(
            update={"purchase": scenario.purchase.model_copy(update={"savings_plans": []})}
        )
    bought = [
        Commitment(
            offering=c.offering, term=c.term, nodes=c.nodes, usd_per_node_hour=c.usd_per_node_hour or 0.0,
            cost_in_horizon_usd=0.0, obligation_beyond_horizon_usd=0.0, start=c.start,
        )
        for c in stage.commitments
    ]  # fmt: skip
    seed = Plan(held.document.model_copy(update={"commitments": bought}), held.allocations)
    try:
        return dispatched_plan(scenario, inputs.catalog, inputs.base_dir, seed, reference, settings, say)
    except SolverError as error:
        raise SolverError(f"the chosen purchases ({stage.name}): {error}") from None


#: The second round's multipliers of the best first stage's levels (module docstring, step 4).
REFINE_FACTORS = (0.85, 1.15)


def scaled_stages(stage: FirstStage, factors: Sequence[float] = REFINE_FACTORS) -> list[FirstStage]:
    """``stage`` with every level times each factor (nodes rounded, at least 0; savings plans to AWS's
    $0.001/h step): the candidates' own plans weigh the horizon alone, so the best of them is tried a
    little smaller and larger, the time after the horizon counted."""
    result = []
    for factor in factors:
        commitments = tuple(
            c.model_copy(update={"nodes": round(c.nodes * factor)})
            for c in stage.commitments
            if round(c.nodes * factor) > 0
        )
        plans = tuple(
            p.model_copy(update={"usd_per_hour": round(p.usd_per_hour * factor, 3)})
            for p in stage.plans
            if round(p.usd_per_hour * factor, 3) > 0
        )
        name = f"{stage.name} x{factor:g}"
        result.append(FirstStage(name, f"{stage.name}'s purchases times {factor:g}", commitments, plans))
    return result


def _candidates(
    point: Plan,
    catalog: Catalog,
    futures: dict[str, Plan],
    names: Sequence[str],
    weights: Sequence[float],
    master: FirstStage | None = None,
) -> list[FirstStage]:
    """The first stages to price (module docstring, step 2), the same purchase once (under its first name,
    the others kept as ``also``): at most :data:`MAX_CANDIDATES` of the planner's own (the point forecast's,
    nothing, the quantiles, then the futures' own by weight), then every committing peer of the point
    forecast's plan (``baselines``), so a peer is priced on the same futures and may be chosen."""
    own = [first_stage(futures[n], f"own plan of {n}", f"what {n}'s own plan buys") for n in names]
    ordered = [
        first_stage(point, "point forecast", "what the point forecast's plan buys"),
        *([master] if master is not None else []),
        FirstStage("nothing more", "no purchase beyond what the scenario holds"),
        *quantile_stages(own, weights),
        *(own[i] for i in sorted(range(len(names)), key=lambda i: -weights[i])),
    ]
    kept: dict[tuple[Any, ...], FirstStage] = {}
    for stage in ordered:
        if stage.content() not in kept and len(kept) < MAX_CANDIDATES:
            kept[stage.content()] = stage
    for stage in peer_stages(point, catalog):
        same = kept.get(stage.content())
        if same is None:
            kept[stage.content()] = stage
        else:
            kept[stage.content()] = replace(same, also=(*same.also, stage.name))
    return list(kept.values())


def peer_stages(plan: Plan, catalog: Catalog) -> list[FirstStage]:
    """The purchases of each committing peer of ``plan`` (its baselines: the cloud's lookback
    recommendation, coverage targets, the cloud's savings-plan recommendation), bought at the horizon's
    start, commitments at ``catalog``'s rate for the term, as first stages. A plan written before peers
    listed their savings plans (``peers[].savings_plans``) gives none for its savings-plan peer."""
    doc = plan.document
    offerings = {o.id: o for o in catalog}
    result = []
    for peer in doc.baselines.peers if doc.baselines is not None else []:
        if not peer.commitments and not peer.savings_plans:
            continue
        plans = tuple(
            held_savings_plan(bought, f"{peer.name} #{index}")
            for index, bought in enumerate(peer.savings_plans)
        )
        held = []
        for bought in peer.commitments:
            offering = offerings.get(bought.offering)
            rate = None
            if offering is not None:
                rate = {
                    Term.ONE_YEAR: offering.reserved_1y_usd_h,
                    Term.THREE_YEARS: offering.reserved_3y_usd_h,
                }.get(bought.term)
            if rate is None:
                break
            held.append(
                ExistingCommitment(
                    offering=bought.offering, term=bought.term, nodes=bought.nodes, start=doc.horizon.start,
                    usd_per_node_hour=rate,
                )
            )  # fmt: skip
        else:
            result.append(FirstStage(f"peer: {peer.name}", peer.how or peer.policy, tuple(held), plans))
    return result


def committed_share(plan: Plan, services: Collection[str]) -> float:
    """The share of ``services``' inference node-hours in ``plan`` on committed tiers (node commitments,
    capacity reservations, owned nodes, savings plans: ``PREPAID_TIERS``); 1 when they have none (nothing
    of theirs ran beyond committed capacity). Periods are of equal length, so nodes weigh as node-hours."""
    rows = plan.allocations
    mine = rows[(rows["kind"] == "inference") & rows["workload"].isin(list(services))]
    total = float(mine["nodes"].sum())
    if total <= 0:
        return 1.0
    committed = mine["tier"].isin([str(t) for t in PREPAID_TIERS])
    return float(mine.loc[committed, "nodes"].sum()) / total


def _breaks(risk: Risk, cap_usd: float | None, share_weight: float | None) -> list[str]:
    """The risk constraints a candidate with this quantile cost and committed-share weight breaks."""
    broken = []
    if risk.cap is not None and cap_usd is not None and cap_usd > risk.cap.usd * (1 + 1e-9):
        name = quantile_name(risk.cap.quantile)
        broken.append(f"{name} ${cap_usd:,.0f} above the cap ${risk.cap.usd:,.0f}")
    share = risk.committed_share
    if share is not None and share_weight is not None and share_weight < share.probability - 1e-9:
        broken.append(
            f"{share.min:.0%} of latency-critical node-hours committed in {share_weight:.0%} of the "
            f"futures' weight, below {share.probability:.0%}"
        )
    return broken


def _unmet(source: Path | None, risk: Risk, candidates: Sequence[Candidate]) -> InputError:
    """No candidate meets the risk constraints: the one no candidate meets, with the best any reaches."""
    cap, share = risk.cap, risk.committed_share
    if cap is not None and all(c.cap_quantile_usd is not None for c in candidates):
        least = min(candidates, key=lambda c: (c.cap_quantile_usd or 0.0, c.name))
        if (least.cap_quantile_usd or 0.0) > cap.usd * (1 + 1e-9):
            name = quantile_name(cap.quantile)
            return InputError(
                source,
                "risk.cap",
                f"no candidate purchase keeps the {name} cost within ${cap.usd:,.0f}: the least {name} any "
                f"reaches is ${least.cap_quantile_usd:,.0f} ({least.name}, of {len(candidates)} priced)",
            )
    if share is not None:
        most = max(candidates, key=lambda c: (c.committed_share_weight or 0.0, c.name))
        if (most.committed_share_weight or 0.0) < share.probability - 1e-9:
            return InputError(
                source,
                "risk.committed_share",
                f"no candidate purchase serves {share.min:.0%} of the latency-critical node-hours from "
                f"committed capacity in {share.probability:.0%} of the futures' weight: the most any reaches "
                f"is {most.committed_share_weight or 0.0:.0%} ({most.name}, of {len(candidates)} priced)",
            )
    return InputError(
        source,
        "risk",
        f"no candidate purchase meets risk.cap and risk.committed_share together (of {len(candidates)} "
        "priced, each meets at most one); loosen one of them",
    )


def _document(
    scenario: Path,
    spec: FuturesFile,
    names: list[str],
    weights: list[float],
    point: Plan,
    own: dict[str, Plan],
    critical: Collection[str],
    until: datetime | None,
    on_demand: dict[str, float],
    priced: dict[str, _Priced],
    *,
    strict: bool = True,
    source: Path | None = None,
    tail_floors: dict[str, float] | None = None,
) -> tuple[FuturesDocument, str]:
    """futures.json's document and the chosen candidate. ``until``: the tail's end (None: no tail);
    ``on_demand``: offering -> its on-demand rate (the commitments' break-even). ``strict``: no candidate
    meeting the risk constraints is an InputError (``source`` the futures file); else (the first round,
    whose choice only centres the second) the best unconstrained one is taken. ``tail_floors``: future ->
    a lower bound on its tail under any first stage (``fleet_bill.tail_floor``; None: no bound with the
    tail)."""
    level, risk_weight = spec.risk.cvar, spec.risk.weight
    cap, share = spec.risk.cap, spec.risk.committed_share

    def tail(plan: Plan) -> float:
        return carried_tail(plan, until) if until is not None else 0.0

    candidates: list[Candidate] = []
    excluded: dict[str, str] = {}
    for p in priced.values():
        if p.failures:  # e.g. buying nothing where teams' guarantees must be backed by commitments
            future, message = next(iter(p.failures.items()))
            excluded[p.stage.name] = f"in {future}: {message}"
            continue
        outcome = p.outcomes
        horizon = {n: outcome[n].horizon_usd for n in names}
        tails = {n: outcome[n].tail_usd for n in names}
        costs = [horizon[n] + tails[n] for n in names]
        expected = sum(w * c for w, c in zip(weights, costs, strict=True))
        worst_tail = cvar(costs, weights, level)
        shares = {n: outcome[n].committed_share for n in names} if critical else {}
        cap_usd = weighted_quantile(costs, weights, cap.quantile) if cap is not None else None
        share_weight = (
            sum(w for w, n in zip(weights, names, strict=True) if shares[n] >= share.min - 1e-9)
            if share is not None
            else None
        )
        candidates.append(
            Candidate(
                name=p.stage.name,
                origin=p.stage.origin,
                also=list(p.stage.also),
                p10_usd=weighted_quantile(costs, weights, 0.1),
                p50_usd=weighted_quantile(costs, weights, 0.5),
                p90_usd=weighted_quantile(costs, weights, 0.9),
                purchases=p.stage.purchases(),
                cost_usd=dict(zip(names, costs, strict=True)),
                horizon_usd=horizon,
                tail_usd=tails,
                owed_after_usd={n: outcome[n].owed_after_usd for n in names},
                unserved={n: outcome[n].unserved for n in names},
                expected_usd=expected,
                cvar_usd=worst_tail,
                score_usd=(1 - risk_weight) * expected + risk_weight * worst_tail,
                cap_quantile_usd=cap_usd,
                committed_share=shares,
                committed_share_weight=share_weight,
                why_not=_breaks(spec.risk, cap_usd, share_weight),
            )
        )
    if not candidates:
        failures = "; ".join(f"{n}: {m}" for p in priced.values() for n, m in p.failures.items())
        raise GpuplanError(f"no candidate purchase could be priced on every future: {failures}")
    free = min(candidates, key=lambda c: (c.score_usd, c.name))
    allowed = [c for c in candidates if not c.why_not]
    if not allowed and strict:
        raise _unmet(source, spec.risk, candidates)
    best = min(allowed, key=lambda c: (c.score_usd, c.name)) if allowed else free
    by_name = {c.name: c for c in candidates}
    costs = [best.cost_usd[n] for n in names]

    def weighted(values: dict[str, float]) -> float:
        return sum(w * values[n] for w, n in zip(weights, names, strict=True))

    # knowing the future, its own plan's purchases or any candidate's, whichever costs least there (the
    # own plans weigh the horizon alone, a candidate may weigh the tail better)
    wait_and_see = {
        n: min(_objective(own[n]) + tail(own[n]), *(c.cost_usd[n] for c in candidates)) for n in names
    }
    bounds = {n: float(own[n].document.solver.bound_usd) for n in names}
    ws, bound = weighted(wait_and_see), weighted(bounds)
    with_tail = bound + weighted(tail_floors) if tail_floors is not None else None
    horizon_expected = weighted(best.horizon_usd)
    point_expected = (
        by_name["point forecast"].expected_usd if "point forecast" in by_name else best.expected_usd
    )
    worst = max(names, key=lambda n: best.cost_usd[n])
    peers = [(c.expected_usd, n, c) for c in candidates for n in (c.name, *c.also) if n.startswith("peer: ")]
    best_peer = min(peers, key=lambda t: (t[0], t[1])) if peers else None
    summary = FuturesSummary(
        expected_usd=best.expected_usd,
        expected_horizon_usd=horizon_expected,
        expected_tail_usd=weighted(best.tail_usd),
        tail_until=until,
        p10_usd=weighted_quantile(costs, weights, 0.1),
        p50_usd=weighted_quantile(costs, weights, 0.5),
        p90_usd=weighted_quantile(costs, weights, 0.9),
        worst_future=worst,
        worst_usd=best.cost_usd[worst],
        point_forecast_expected_usd=point_expected,
        vss_usd=point_expected - best.expected_usd,
        best_peer=best_peer[1].removeprefix("peer: ") if best_peer else None,
        best_peer_expected_usd=best_peer[0] if best_peer else None,
        wait_and_see_usd=ws,
        evpi_usd=best.expected_usd - ws,
        bound_usd=bound,
        gap=(horizon_expected - bound) / horizon_expected if horizon_expected else 0.0,
        bound_with_tail_usd=with_tail,
        gap_with_tail=(best.expected_usd - with_tail) / best.expected_usd
        if with_tail is not None and best.expected_usd
        else None,
        unconstrained=free.name if free.name != best.name else None,
        unconstrained_expected_usd=free.expected_usd if free.name != best.name else None,
    )
    chosen = priced[best.name]
    document = FuturesDocument(
        scenario=point.document.scenario,
        futures=list(spec.futures),
        weights=dict(zip(names, weights, strict=True)),
        risk=spec.risk,
        tail=spec.tail,
        second_stage=spec.second_stage,
        own_plans=spec.own_plans_method(0),  # decided by plan_futures (never auto here)
        chosen=best.name,
        candidates=candidates,
        excluded=excluded,
        summary=summary,
        commitment_use=_use(chosen, names, weights, costs, on_demand),
        wait_and_see=wait_and_see,
        bounds=bounds,
    )
    return document, best.name


def _use(
    chosen: _Priced, names: list[str], weights: list[float], costs: list[float], on_demand: dict[str, float]
) -> list[CommitmentUse]:
    """Per commitment of the chosen first stage: the weight of the futures where its use is above its
    break-even (its rate over the offering's on-demand rate), and its idle share in the P10 future."""
    p10 = weighted_quantile(costs, weights, 0.1)
    low = next(n for n, c in zip(names, costs, strict=True) if c == p10)
    result = []
    for held in chosen.stage.commitments:
        used = {n: chosen.outcomes[n].used.get(_commitment_key(held), 0.0) for n in names}
        rate = on_demand.get(held.offering)
        break_even = held.usd_per_node_hour / rate if rate and held.usd_per_node_hour is not None else None
        above = sum(
            w for w, n in zip(weights, names, strict=True) if break_even is not None and used[n] >= break_even
        )
        result.append(
            CommitmentUse(
                purchase=Purchase(
                    kind="commitment", offering=held.offering, term=held.term, start=held.start,
                    nodes=held.nodes, usd_per_node_hour=held.usd_per_node_hour,
                ),
                break_even_fraction=break_even,
                share_above_break_even=above,
                idle_fraction_p10=1.0 - used[low],
            )
        )  # fmt: skip
    return result
