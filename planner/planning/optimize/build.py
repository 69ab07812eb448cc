"""The planning MILP, one family of variables or constraints per function.

Notation (indices are positions in :class:`~planner.planning.problem.sets.PlanningSets`):
  o offering (a node of g_o GPUs), c commitment column (purchases.py: an offering, a term in {1y, 3y}
  or {owned} for the scenario's own servers, and the periods it serves in, from its purchase step to
  its end; held columns have fixed counts), C(o,s) the columns of o serving in slot s, q a segment
  (the periods between column boundaries: the same columns serve throughout), s model slot of w_s hours,
  i inference service with demand D[i,s] replicas and q[i,o] replicas per node,
  r training run of n_r nodes, a placement option of a run (offering, tier, start), m team.

Variables
  R[c]      integer   nodes bought on new column c (held columns: the constant nodes K[c])
  XN[i,o,s] >= 0      non-spot nodes serving service i
  XS[i,o,s] >= 0      spot nodes serving i (not latency-critical); NS[o,s]: spot nodes held
  NO[o,s]   >= 0      on-demand nodes: the non-spot nodes of o beyond its commitments in slot s
            NO and NS are integer on offerings with a capacity limit; elsewhere continuous and
            rounded up per slot when the plan is written (its cost, and so its gap, include that).
  Y[a]      binary    run r(a) is placed on option a;  UT[r] binary: run r unserved
  M[a]      >= 0      nodes of a non-spot run that its offering's commitments cover (M <= n_a Y[a]); the
                      other n_a Y[a] - M[a] are on demand for exactly the run's hours
  UI[i,s]   >= 0      replicas of i unserved in slot s
  H[m,o,q]  >= 0      committed GPUs of o backing team m's guarantee in segment q;  UG[m,q] >= 0: shortfall

The billing rule (how AWS reserved instances, GCP committed-use discounts and Azure reservations bill):
an offering's committed nodes (1y, 3y and owned together) cover any non-spot node of that offering
running in that hour, inference or training alike, and only the non-spot nodes beyond them are paid on
demand. Row 2 is that rule (written once, ``models.billing.pool_row``): NO[o,s] >= non-spot use -
commitments, NO >= 0, and NO is paid at the on-demand price, so at the optimum NO = max(0, use - R). A
non-spot gang runs partly on committed (M[a]) and partly on on-demand nodes of one offering (one
placement group); spot gangs are wholly spot. The committed part holds the pool for every block the run
touches (as slots are fixed before runs are placed), the on-demand part is paid for the run's own hours:
conservative, so the plan written out, billed hour by hour by the same rule (solution.py), costs no more
than the model.

Constraints (numbered as in the code)
  1. demand[i,s]:    sum_o q[i,o] (XN + XS)[i,o,s] + UI[i,s] >= D[i,s]
  2. non_spot[o,s]:  sum_i XN[i,o,s] + sum_{a non-spot on o, active in s} M[a] <= R(o,s) + NO[o,s]
                     (R(o,s) = sum_{c in C(o,s)} R[c] + K[c]: what is committed in the slot)
                     (no NO where o sells no on-demand node, e.g. owned servers, where M[a] = n_a Y[a];
                     no R and no M without a term)
  3. held[o,s]:      sum_i XS[i,o,s] <= NS[o,s]
  4. capacity[o,s]:  R(o,s) + NO + NS + sum_{a spot on o, active in s} n_a Y[a]
                     + sum_{a non-spot on o, active in s} (n_a Y[a] - M[a]) <= max_n[o]
  5. place[r]:       sum_{a of r} Y[a] + UT[r] = 1
  6. spot_share:     sum_{a spot} G_a Y[a] <= share * sum_a G_a Y[a]   (G_a: the run's GPU-hours)
  7. burst[m,s]:     sum_{i of m} g_o (XN + XS) + sum_{a of m active in s} n_a g_a Y[a] <= burst_m
  8. guarantee[m,q]: sum_o H[m,o,q] + UG[m,q] >= guaranteed_m;  sum_m H[m,o,q] <= g_o R(o,q)
  5b. cash[w]:     sum_{a a Capacity Block starting in window w} fee_a Y[a]
                     + sum_{c starting in w, k} upfront[c,k] P[c,k] <= purchase.max_upfront_usd, with
                     sum_k P[c,k] = R[c] (define_cash, define_commitments: each new column's nodes split
                     among its payment options, each priced at its own rate; the savings plans' fees come
                     after, in the room left: payments.py)
  8b. savings plans:  sum_g Z[g,o,s] <= NO[o,s];  sum_o rate[g,o] Z[g,o,s] - sum_(k of g active) S[k]
                     <= held budget[g,s]  (S[k] USD/h bought, Z covered nodes; define_savings_plans)

Rules that hold by construction: no variable exists that could break them (the index sets of
``sets.py`` hold only the allowed tuples; numbered on from the rows)
  9. eligible nodes only: XN/XS[i,o,s] exist only for (i,o) in ``replicas_per_node``: o has one of
     the service's GPU models and a node holds at least one replica, MIG-aware (sets.build_sets,
     sets.replicas_per_node). UI[i,s] and the demand[i,s] row exist only where D[i,s] > 0.
 10. latency-critical services are never on spot: sets._serve_tiers gives their (i,o) no SPOT kind,
     so no XS[i,o,s] is ever created for them (define_inference reads ``serve_tiers``).
 11. a kind only where it is sold: NO only on offerings with an on-demand price, XS/NS and spot
     training options only with a spot price, XN and non-spot options only where o has a term or an
     on-demand price (sets.non_spot_sold); R[c] only for the scenario's ``purchase.terms`` that o
     prices, starting on a purchase step (purchases.py; ``terms: []`` means no new column at all).
 12. a gang is one placement group with the fabric it needs: a training option is one offering, one
     capacity kind (non-spot, spot or a Capacity Block of at most 64 nodes) and one start, and options
     exist only on offerings with the job's GPU model and GPUs per node, a multi-node fabric where the
     job needs one (``TrainingJob.needs_fabric``) and max_n[o] >= n_r (sets._training_options); 5 place
     picks one option, so a run's n_r nodes are never split across offerings or regions, nor between spot and
     non-spot (M[a] splits a non-spot gang only between committed and on-demand billing).
 13. training inside its window: every option starts at or after the run's first period and ends by
     its end period (earliest_start and deadline in whole periods, workloads.training_runs), on the
     start grid (sets._starts); a run whose window is too short has no option and is unserved, with
     the reason in ``no_option_reason``.
 14. spot training only for preemptible jobs and only when max_spot_share > 0; a spot option's periods
     and cost include the expected preemption overhead (sets._training_options, models.preemption).
 15. committed nodes only inside their column's window; owned nodes only once delivered (or held):
     R(o,s) sums only the columns serving in s, and the owned offering (models.tco.owned_offering)
     has no on-demand or spot price, so it serves only through R (no NO); define_inference creates no
     XN[i,o,s] in a slot where no column on it serves (sets.usable; slots never straddle a column
     boundary, purchases.segment_of_period), sets._training_options creates no option on it whose
     first block starts before one does, and guarantee_rows gives it no H[m,o,q] where none serves
     (nodes on order are not "always provisioned").
 16. a guarantee is backed only by offerings the team can use: H[m,o,q] only for o in
     ``team_offerings[m]`` (the GPU models of the team's workloads, sets.build_sets) with a column
     serving in q.
Left out because dominated, not because forbidden: sets.spot_only_offerings, sets._serve_tiers
(``_beats``) and sets.cheapest_per_tier drop (offering, kind) choices that another choice beats
whatever else happens, and training starts that cannot matter; the optimum is the same
(``ModelOptions(prune=False)`` builds them all; tests/unit/test_optimize_properties.py compares).

Objective
  sum_c c[c] * paid_hours[c] * R[c] + sum_s w_s (c_od[o] NO[o,s] + c_spot[o] NS[o,s]) + sum_a cost_a Y[a]
  + sum_{a non-spot} c_od[o_a] hours_a (n_a Y[a] - M[a])
  + penalties on UI, UT, UG (large, so slack is used only where demand cannot be met).
  Held columns cost the same in every plan (sets.fixed_usd); the solver never sees that constant, the
  plan's cost and bound add it.

cost_a is a spot run's own cost, its expected preemption overhead included (``models.preemption``), or
a Capacity Block's upfront fee (rate x n_a x the shortest duration EC2 sells that holds the run,
``models.capacity_blocks``): a block option holds no pool and no capacity (rows 2 and 4 leave it out; its
nodes are the block's), counts in the burst row 7 and as non-spot in row 6; a flex-start option
(GCP, ``models.flex_start``) likewise, its cost rate x n_a x hours_a, its start no earlier than the
window's plus the planned delay (sets._training_options);
a non-spot run pays c_od[o] * hours_a * (n_a Y[a] - M[a]) for its nodes beyond the commitments.
Guarantees are backed by commitments: a GPU "always provisioned" for a team is a committed GPU; idle
guaranteed GPUs may serve anyone.
"""

from __future__ import annotations

import gc
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pulp
from pulp.v4_migration import set_v4_migration_warnings

from models.billing import pool_row
from models.savingsplans import budget_row, cover_row
from models.tiers import Capacity, Tier
from planner.planning.optimize.payments import (
    CAP_EPS_USD,
    PaymentSplit,
    block_cash_rows,
    cash_rows,
    payment_split,
)
from planner.planning.problem.sets import PlanningSets, on_demand_or_dearest, shares_commitments, usable

set_v4_migration_warnings(False)

#: The letter of each capacity kind in variable and row names: ``Xn_i_o_s`` / ``Xs_..`` (serving),
#: ``Nn_o_s`` (on-demand nodes beyond the commitments) / ``Ns_o_s`` (spot nodes held), and the run
#: combos of ``bound.py`` (``Y_{run}_{offering}_{letter}``). Fixed here, not derived from the kinds'
#: strings: PuLP hands the solver its columns sorted by name (``LpProblem.variables()``), so renaming
#: a kind must neither rename nor reorder a column (nor change a result).
VAR_CODE: dict[Capacity, str] = {
    Capacity.NON_SPOT: "n", Capacity.SPOT: "s", Capacity.BLOCK: "b", Capacity.FLEX: "f",
}  # fmt: skip

LpExpr = pulp.LpAffineExpression
LpCon = pulp.LpConstraint
GE, LE, EQ = pulp.LpConstraintGE, pulp.LpConstraintLE, pulp.LpConstraintEQ

PENALTY_FACTOR = 10.0  # unserved demand costs this many times its dearest way to be served
FALLBACK_PENALTY_USD_PER_GPU_HOUR = 100.0


@dataclass
class PlanningModel:
    """The PuLP problem plus handles to its variables, for extraction."""

    sets: PlanningSets
    problem: pulp.LpProblem
    commit: dict[int, pulp.LpVariable] = field(default_factory=dict)  # new column -> R[c]
    serve: dict[tuple[Capacity, int, int, int], pulp.LpVariable] = field(default_factory=dict)  # (k,i,o,s)
    held: dict[tuple[Capacity, int, int], pulp.LpVariable] = field(default_factory=dict)  # (k, o, s)
    place: list[pulp.LpVariable] = field(default_factory=list)
    committed_part: dict[int, pulp.LpVariable] = field(default_factory=dict)  # M[a]
    unserved_run: dict[int, pulp.LpVariable] = field(default_factory=dict)
    unserved_replicas: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)
    guarantee: dict[tuple[str, int, int], pulp.LpVariable] = field(default_factory=dict)  # H[m,o,q]
    guarantee_short: dict[tuple[str, int], pulp.LpVariable] = field(default_factory=dict)  # UG[m,q]
    plan_buy: dict[int, pulp.LpVariable] = field(default_factory=dict)  # new savings-plan column -> S[k]
    plan_cover: dict[tuple[int, int, int], pulp.LpVariable] = field(default_factory=dict)  # Z[g,o,s]
    payments: PaymentSplit = field(default_factory=PaymentSplit)  # under a cash limit: R split by option
    objective_terms: list[tuple[pulp.LpVariable, float]] = field(default_factory=list)
    penalty_terms: list[tuple[pulp.LpVariable, float]] = field(default_factory=list)  # slack only
    constraints: dict[str, pulp.LpConstraint] = field(default_factory=dict)

    def add(self, name: str, terms: list[tuple[pulp.LpVariable, float]], sense: int, rhs: float) -> None:
        self.constraints[name] = LpCon(LpExpr(terms), sense, name, rhs)

    def penalize(self, var: pulp.LpVariable, coef: float) -> None:
        self.objective_terms.append((var, coef))
        self.penalty_terms.append((var, coef))

    def var(self, name: str, cat: str = pulp.LpContinuous, up: float | None = None) -> pulp.LpVariable:
        return self.problem.add_variable(name, 0, up, cat)


def create_model(sets: PlanningSets, savings_plans: bool = True) -> PlanningModel:
    """Build the MILP in bulk: variables only over feasible tuples, expressions as (var, coef) lists.
    ``savings_plans`` False leaves the savings-plan rows out (:func:`define_savings_plans`): the staged
    method's first stage, whose training decisions are hard enough without them."""
    model = PlanningModel(
        sets, pulp.LpProblem(sets.scenario.name.replace(" ", "_") or "plan", pulp.LpMinimize)
    )
    enabled = gc.isenabled()
    gc.disable()  # millions of small objects: GC pauses dominate the build otherwise
    try:
        define_commitments(model)
        define_inference(model)
        define_training(model)
        define_cash(model)
        define_non_spot_and_capacity(model)
        if savings_plans:
            define_savings_plans(model)
        define_spot_share(model)
        define_team_burst(model)
        define_guarantees(model)
        model.problem.extend(model.constraints)
        model.problem.setObjective(LpExpr(model.objective_terms))
    finally:
        if enabled:
            gc.enable()
    return model


def define_commitments(model: PlanningModel) -> None:
    """R[c]: whole nodes bought on each new column, priced at its rate for its hours in the horizon; under
    a cash limit, split among its payment options instead, each priced at its own rate
    (``payments.payment_split``; the limit's rows are ``define_cash``'s)."""
    sets = model.sets
    for c in sets.new_columns:
        column = sets.columns[c]
        model.commit[c] = model.var(f"R_{c}", pulp.LpInteger, sets.offerings[column.offering].max_nodes)
    model.payments = payment_split(sets, model.commit, lambda name, up: model.var(name, pulp.LpInteger, up))
    model.objective_terms += model.payments.objective
    for name, terms in model.payments.rows.items():
        model.add(name, terms, EQ, 0.0)


def committed_terms(
    sets: PlanningSets, commit: dict[int, pulp.LpVariable], o: int, period: int, sign: float = 1.0
) -> tuple[list[tuple[pulp.LpVariable, float]], float]:
    """R(o, period): the new columns' variables serving then (times ``sign``) and the held nodes."""
    terms = [(commit[c], sign) for c in sets.columns_active(o, period) if c in commit]
    return terms, float(sets.existing_nodes(o, period))


def replica_penalty(sets: PlanningSets, i: int) -> float:
    """Cost per hour of one unserved replica of service ``i``: a multiple of its dearest eligible
    *node*, not replica, so that with whole nodes leaving even one small (MIG-sized) replica unserved
    never looks cheaper than holding one more node."""
    costs = [on_demand_or_dearest(sets, o) for (ii, o) in sets.replicas_per_node if ii == i]
    return PENALTY_FACTOR * max(costs) if costs else FALLBACK_PENALTY_USD_PER_GPU_HOUR * 8


def define_inference(model: PlanningModel) -> None:
    """1 demand and 3 spot-held families; XN/XS variables only for eligible (service, offering) and the
    kinds ``serve_tiers`` allows, non-spot ones on owned nodes only after delivery (rules 9-11, 15).
    Non-spot serving is paid in row 2 (:func:`define_non_spot_and_capacity`)."""
    sets = model.sets
    held_users: dict[tuple[Capacity, int, int], list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
    by_service: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for (i, o), q in sets.replicas_per_node.items():
        by_service[i].append((o, q))
    for i in range(len(sets.services)):
        penalty = replica_penalty(sets, i)
        for s, slot in enumerate(sets.slots):
            need = slot.demand[i]
            if need <= 0:
                continue
            terms: list[tuple[pulp.LpVariable, float]] = []
            for o, q in by_service[i]:
                for tier in sets.serve_tiers.get((i, o), ()):
                    if tier == Capacity.NON_SPOT and not usable(sets, o, int(slot.periods[0])):
                        continue  # owned nodes not delivered yet
                    var = model.var(f"X{VAR_CODE[tier]}_{i}_{o}_{s}")
                    model.serve[(tier, i, o, s)] = var
                    terms.append((var, q))
                    if tier == Capacity.SPOT:
                        held_users[(tier, o, s)].append((var, 1.0))
            short = model.var(f"UI_{i}_{s}", up=need)
            model.unserved_replicas[(i, s)] = short
            model.penalize(short, penalty * slot.hours)
            terms.append((short, 1.0))
            model.add(f"demand_{i}_{s}", terms, GE, need)
    for (tier, o, s), users in held_users.items():
        held = _held_nodes(model, tier, o, s)
        model.add(f"held_{VAR_CODE[tier]}_{o}_{s}", [*users, (held, -1.0)], LE, 0.0)


def _held_nodes(model: PlanningModel, tier: Capacity, o: int, s: int) -> pulp.LpVariable:
    """NO[o,s] (``tier`` non-spot: on-demand nodes beyond the commitments) or NS[o,s], at its price."""
    sets = model.sets
    offering = sets.offerings[o]
    # whole nodes where a capacity limit could be crossed by rounding; elsewhere the relaxation is
    # rounded up at extraction and the plan's gap is measured on the rounded cost (solution.py)
    whole = sets.integral_held or offering.max_nodes is not None
    category = pulp.LpInteger if whole else pulp.LpContinuous
    held = model.var(f"N{VAR_CODE[tier]}_{o}_{s}", category, offering.max_nodes)
    model.held[(tier, o, s)] = held
    price = offering.price(Tier.SPOT if tier == Capacity.SPOT else Tier.ON_DEMAND)
    assert price is not None
    model.objective_terms.append((held, price * sets.slots[s].hours))
    return held


def run_penalty(sets: PlanningSets, r: int) -> float:
    """Cost of leaving run ``r`` unserved: a multiple of its dearest on-demand price on a matching node.

    It depends on the catalog only (not on which placements a stage offers), so every stage and the
    bound price unserved work the same way.
    """
    job = sets.runs[r].job
    prices = [
        o.on_demand_usd_h
        for o in sets.offerings
        if o.matches_gpu(job.gpu_models) and o.on_demand_usd_h is not None
    ]
    if prices:
        return PENALTY_FACTOR * job.nodes * max(prices) * job.hours
    return PENALTY_FACTOR * sets.runs[r].gpus * job.hours * FALLBACK_PENALTY_USD_PER_GPU_HOUR


def guarantee_penalty_per_gpu(sets: PlanningSets) -> float:
    """Cost of one guaranteed GPU that no commitment backs, for the whole horizon."""
    dearest = max(
        (o.on_demand_usd_h / o.gpus_per_node for o in sets.offerings if o.on_demand_usd_h is not None),
        default=10.0,
    )
    return PENALTY_FACTOR * dearest * sets.horizon_hours


def define_training(model: PlanningModel) -> None:
    """5 place: each run exactly once (or unserved at a penalty), among the options of
    sets._training_options, which carry rules 12-15."""
    sets = model.sets
    by_run: dict[int, list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
    for a, option in enumerate(sets.options):
        if sets.training_fixed:  # a decided placement: the variable stays for uniform extraction
            var = model.problem.add_variable(f"Y_{a}", 1, 1, pulp.LpInteger)
        else:
            var = model.var(f"Y_{a}", pulp.LpBinary)
        model.place.append(var)
        by_run[option.run].append((var, 1.0))
        offering = sets.offerings[option.offering]
        if option.tier != Capacity.NON_SPOT or offering.on_demand_usd_h is None:
            model.objective_terms.append((var, option.cost_usd))
            continue  # spot: its own cost; owned servers: all nodes committed
        nodes = float(sets.runs[option.run].job.nodes)
        hours = option.periods * sets.period_hours
        # one term per variable: an expression built from a list keeps only a variable's last coefficient
        model.objective_terms.append((var, option.cost_usd + nodes * offering.on_demand_usd_h * hours))
        # M[a]: nodes of the gang its offering's commitments cover (sets.fix_training keeps such a run's
        # footprint its own, so its M is never a twin's)
        if shares_commitments(sets, option.offering, option.tier):
            whole = sets.integral_held or offering.max_nodes is not None
            part = model.var(f"M_{a}", pulp.LpInteger if whole else pulp.LpContinuous, nodes)
            model.committed_part[a] = part
            model.objective_terms.append((part, -offering.on_demand_usd_h * hours))
            model.add(f"part_{a}", [(part, 1.0), (var, -nodes)], LE, 0.0)
    for r in range(len(sets.runs)):
        short = model.var(f"UT_{r}", pulp.LpBinary)
        model.unserved_run[r] = short
        model.penalize(short, run_penalty(sets, r))
        model.add(f"place_{r}", [*by_run.get(r, []), (short, 1.0)], EQ, 1.0)


def define_cash(model: PlanningModel) -> None:
    """``purchase.max_upfront_usd`` (issue 38), one row per cash window: the fees of the Capacity Block
    options starting in it (``payments.block_cash_rows``) and of the payment options of the new columns
    whose terms start in it (``define_commitments``'s split), ``<= cap``. A block dearer than the limit
    alone is never chosen (its Y fixed at 0: exact, where a row would leave it to the solver's
    integrality tolerance); decided placements (``training_fixed``) were chosen within the limit, so their
    fees stay in the rows as constants."""
    cap = model.sets.scenario.purchase.max_upfront_usd
    if cap is None:
        return
    blocks: dict[str, list[tuple[pulp.LpVariable, float]]] = {}
    for window, fees in block_cash_rows(model.sets).items():
        for a, fee in fees:
            if fee > cap.usd + CAP_EPS_USD and not model.sets.training_fixed:
                model.place[a].upBound = 0
        blocks[window] = [(model.place[a], fee) for a, fee in fees]
    for name, terms in cash_rows(model.sets, blocks, model.payments).items():
        model.add(name, terms, LE, cap.usd)


def _active_by_block(
    model: PlanningModel,
) -> tuple[dict[tuple[int, int], list], dict[tuple[int, int], list]]:
    """(offering, block) -> terms for the nodes runs hold there: on commitments (row 2: M[a], or n Y[a]
    on owned servers) and beside them (row 4: spot runs, and the on-demand part n Y[a] - M[a])."""
    sets = model.sets
    committed: dict[tuple[int, int], list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
    beside: dict[tuple[int, int], list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
    for a, option in enumerate(sets.options):
        nodes = float(sets.runs[option.run].job.nodes)
        y = model.place[a]
        if option.tier.own_nodes:
            continue  # a block's or flex-start nodes are their own: not in the pool, not under max_nodes
        if option.tier == Capacity.SPOT:
            on, off = [], [(y, nodes)]
        elif sets.offerings[option.offering].on_demand_usd_h is None:
            on, off = [(y, nodes)], []
        elif a in model.committed_part:
            part = model.committed_part[a]
            on, off = [(part, 1.0)], [(y, nodes), (part, -1.0)]
        else:  # no commitment on this offering: wholly on demand
            on, off = [], [(y, nodes)]
        for block in option.blocks:
            committed[(option.offering, block)] += on
            beside[(option.offering, block)] += off
    return committed, beside


def define_non_spot_and_capacity(model: PlanningModel) -> None:
    """2 non_spot: non-spot use <= commitments + on-demand nodes (the billing rule); 4 capacity:
    everything held <= max_nodes."""
    sets = model.sets
    non_spot_train, other_train = _active_by_block(model)
    users_of: dict[tuple[int, int], list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
    for (tier, _i, o, s), var in model.serve.items():
        if tier == Capacity.NON_SPOT:
            users_of[(o, s)].append((var, 1.0))
    for o, offering in enumerate(sets.offerings):
        for s, slot in enumerate(sets.slots):
            users = users_of.get((o, s), []) + non_spot_train.get((o, slot.block), [])
            if not users:
                continue
            committed, held_nodes = committed_terms(sets, model.commit, o, int(slot.periods[0]))
            sold = offering.on_demand_usd_h is not None
            on_demand = _held_nodes(model, Capacity.NON_SPOT, o, s) if sold else None
            model.add(f"non_spot_{o}_{s}", pool_row(users, committed, on_demand), LE, held_nodes)
    for o, offering in enumerate(sets.offerings):
        if offering.max_nodes is None:
            continue
        limit = float(offering.max_nodes)
        for q, period in segment_starts(sets).items():  # every column, even where nothing else holds o
            commit, held_nodes = committed_terms(sets, model.commit, o, period)
            if commit:
                model.add(f"cap_commit_{o}_{q}", commit, LE, limit - held_nodes)
        for s, slot in enumerate(sets.slots):
            held = [
                (model.held[(t, o, s)], 1.0)
                for t in (Capacity.NON_SPOT, Capacity.SPOT)
                if (t, o, s) in model.held
            ]
            train = other_train.get((o, slot.block), [])
            if held or train:
                commit, held_nodes = committed_terms(sets, model.commit, o, int(slot.periods[0]))
                model.add(f"cap_{o}_{s}", [*commit, *held, *train], LE, limit - held_nodes)


#: What a covered node-hour saves in a plan model is its on-demand price less this: a spare savings-plan
#: budget never makes an on-demand node look free (``models.savingsplans.budget_row``).
PLAN_COVER_EPS_USD = 1e-6


@dataclass
class SavingsPlanRows:
    """The savings-plan columns and rows of a model (:func:`savings_plan_rows`): S per new plan column,
    Z per (group, offering, unit of time), their objective terms and the rows (name -> (terms, rhs), each
    at most its right-hand side)."""

    buy: dict[int, pulp.LpVariable] = field(default_factory=dict)
    cover: dict[tuple[int, int, int], pulp.LpVariable] = field(default_factory=dict)
    objective: list[tuple[pulp.LpVariable, float]] = field(default_factory=list)
    rows: dict[str, tuple[list[tuple[pulp.LpVariable, float]], float]] = field(default_factory=dict)


def savings_plan_rows(
    sets: PlanningSets,
    units: list[tuple[int, float]],
    on_demand: Callable[[int, int], pulp.LpVariable | None],
    var: Callable[[str], pulp.LpVariable],
    eps: float = 0.0,
) -> SavingsPlanRows:
    """Savings plans as a model holds them (issue 38; ``models.savingsplans.cover_row`` / ``budget_row``):
    S[k] >= 0 USD per hour on each new plan column, paid for its hours in the horizon; Z[g,o,u] >= 0
    on-demand nodes of o that group g covers in unit u (a slot, a cluster: ``units`` gives each one's
    first period and hours; a plan's window never splits one), each saving its on-demand price less
    ``eps``: cover[o,u] sum_g Z - NO <= 0, budget[g,u] sum_o rate Z - sum_(k active) S[k] <= what the
    plans held commit. ``on_demand(o, u)``: the model's on-demand nodes NO, None where it has none."""
    found = SavingsPlanRows()
    if not sets.groups:
        return found
    for k in sets.new_plans:
        found.buy[k] = var(f"S_{k}")
        found.objective.append((found.buy[k], sets.plans[k].paid_hours))
    held = sets.budget()
    covers: dict[tuple[int, int], list[pulp.LpVariable]] = defaultdict(list)
    for u, (period, hours) in enumerate(units):
        active = sets.plans_active(period)
        for g, rates in enumerate(sets.group_rates):
            budgets = [found.buy[k] for k in active if k in found.buy and sets.plans[k].group == g]
            if not budgets and held[g, period] <= 0:
                continue
            spend = []
            for o, rate in rates.items():
                price = sets.offerings[o].on_demand_usd_h
                if on_demand(o, u) is None or price is None or price <= rate:
                    continue
                cover = var(f"Z_{g}_{o}_{u}")
                found.cover[(g, o, u)] = cover
                covers[(o, u)].append(cover)
                spend.append((cover, rate))
                found.objective.append((cover, -(price - eps) * hours))
            if spend:
                found.rows[f"sp_budget_{g}_{u}"] = (budget_row(spend, budgets), float(held[g, period]))
    for (o, u), zs in covers.items():
        found.rows[f"sp_cover_{o}_{u}"] = (cover_row(zs, on_demand(o, u)), 0.0)
    return found


def define_savings_plans(model: PlanningModel) -> None:
    """Savings plans (rows sp_cover and sp_budget, :func:`savings_plan_rows`) per slot. Only inference's
    on-demand nodes (NO) are covered here; a training run's on-demand part is paid at its price in its
    option (conservative). The amounts written are decided again on the finished fleet, training included
    (``savings_purchase.py``); here they let the model weigh plans against reservations."""
    sets = model.sets
    units = [(int(slot.periods[0]), slot.hours) for slot in sets.slots]
    found = savings_plan_rows(
        sets, units, lambda o, s: model.held.get((Capacity.NON_SPOT, o, s)), model.var, PLAN_COVER_EPS_USD
    )
    model.plan_buy, model.plan_cover = found.buy, found.cover
    model.objective_terms += found.objective
    for name, (terms, rhs) in found.rows.items():
        model.add(name, terms, LE, rhs)


def segment_starts(sets: PlanningSets) -> dict[int, int]:
    """Segment -> its first period (purchases.segment_of_period)."""
    first: dict[int, int] = {}
    for period, q in enumerate(sets.segment.tolist()):
        first.setdefault(q, period)
    return first


def define_spot_share(model: PlanningModel) -> None:
    """6 spot_share: at most ``max_spot_share`` of served training GPU-hours run on spot."""
    sets = model.sets
    share = sets.scenario.purchase.max_spot_share
    if share >= 1.0 or not any(option.tier == Capacity.SPOT for option in sets.options):
        return
    terms = []
    for a, option in enumerate(sets.options):
        run = sets.runs[option.run]
        gpu_hours = run.gpus * run.job.hours
        on_spot = 1.0 if option.tier == Capacity.SPOT else 0.0
        terms.append((model.place[a], gpu_hours * (on_spot - share)))
    model.add("spot_share", terms, LE, 0.0)


def define_team_burst(model: PlanningModel) -> None:
    """7 burst: a team's GPUs in use, in every slot, stay within its burst limit."""
    sets = model.sets
    team_of_service = [service.team for service in sets.services]
    for team in sets.scenario.teams:
        if team.burst_gpus is None:
            continue
        inference: dict[int, list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
        for (_tier, i, o, s), var in model.serve.items():
            if team_of_service[i] == team.name:
                inference[s].append((var, float(sets.offerings[o].gpus_per_node)))
        training: dict[int, list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
        for a, option in enumerate(sets.options):
            run = sets.runs[option.run]
            if run.job.team == team.name:
                for block in option.blocks:
                    training[block].append((model.place[a], float(run.gpus)))
        for s, slot in enumerate(sets.slots):
            terms = inference.get(s, []) + training.get(slot.block, [])
            if terms:
                model.add(f"burst_{team.name}_{s}", terms, LE, float(team.burst_gpus))


Terms = list[tuple[pulp.LpVariable, float]]


@dataclass
class GuaranteeRows:
    """The guarantee family, built once for the planning model and for the bound (bound.py)."""

    backing: dict[tuple[str, int, int], pulp.LpVariable] = field(default_factory=dict)  # H[m,o,q]
    shortfall: dict[tuple[str, int], pulp.LpVariable] = field(default_factory=dict)  # UG[m,q]
    weight: dict[tuple[str, int], float] = field(default_factory=dict)  # UG[m,q]: its share of the horizon
    rows: dict[str, tuple[Terms, int, float]] = field(default_factory=dict)  # name -> (terms, sense, rhs)


def guarantee_rows(
    sets: PlanningSets,
    commit: dict[int, pulp.LpVariable],
    new_var: Callable[[str, float | None], pulp.LpVariable],
) -> GuaranteeRows:
    """8 guarantee: in every segment, each team's guaranteed GPUs are backed by committed GPUs it could
    use that serve then.

    ``sum_o H[m,o,q] + UG[m,q] >= guaranteed_m`` and ``sum_m H[m,o,q] <= g_o R(o,q)``; the caller
    penalizes UG[m,q] at ``guarantee_penalty_per_gpu`` times ``weight`` (the segment's share of the
    horizon). H[m,o,q] exists only where rules 15 and 16 allow: nodes still on order serve in no
    column yet, so they back nothing.
    """
    family = GuaranteeRows()
    teams = [team for team in sets.scenario.teams if team.guaranteed_gpus > 0]
    if not teams:
        return family
    starts = segment_starts(sets)
    lengths = np.bincount(sets.segment, minlength=len(starts)) / max(1, len(sets.segment))
    for q, period in starts.items():
        backing: dict[int, Terms] = defaultdict(list)
        for team in teams:
            terms: Terms = []
            for o in sets.team_offerings.get(team.name, []):
                if sets.columns_active(o, period):
                    var = new_var(f"H_{team.name}_{o}_{q}", None)
                    family.backing[(team.name, o, q)] = var
                    terms.append((var, 1.0))
                    backing[o].append((var, 1.0))
            short = new_var(f"UG_{team.name}_{q}", float(team.guaranteed_gpus))
            family.shortfall[(team.name, q)] = short
            family.weight[(team.name, q)] = float(lengths[q])
            family.rows[f"guarantee_{team.name}_{q}"] = (
                [*terms, (short, 1.0)], GE, float(team.guaranteed_gpus)
            )  # fmt: skip
        for o, users in backing.items():
            gpus = float(sets.offerings[o].gpus_per_node)
            committed, held_nodes = committed_terms(sets, commit, o, period, -gpus)
            family.rows[f"backing_{o}_{q}"] = ([*users, *committed], LE, gpus * held_nodes)
    return family


def worst_shortfall(
    shortfall: dict[tuple[str, int], pulp.LpVariable], value: Callable[[pulp.LpVariable], float]
) -> dict[str, float]:
    """Per team, the most guaranteed GPUs left unbacked in any segment."""
    result: dict[str, float] = {}
    for (team, _q), var in shortfall.items():
        result[team] = max(result.get(team, 0.0), value(var))
    return result


def define_guarantees(model: PlanningModel) -> None:
    """8 guarantee (see :func:`guarantee_rows`)."""
    family = guarantee_rows(model.sets, model.commit, lambda name, up: model.var(name, up=up))
    model.guarantee.update(family.backing)
    model.guarantee_short.update(family.shortfall)
    for key, short in family.shortfall.items():
        model.penalize(short, guarantee_penalty_per_gpu(model.sets) * family.weight[key])
    for name, (terms, sense, rhs) in family.rows.items():
        model.add(name, terms, sense, rhs)
