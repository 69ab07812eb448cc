"""A lower bound on the full hourly planning problem, from a small aggregated LP.

Why it is valid (a proof sketch; the tests check it against full solves on small cases):

1. *Relax.* Let on-demand and spot node counts be fractions (commitments stay whole, and each run
   still picks one offering and tier). Place each training run at block resolution: it picks a start
   block and an offset inside it (the offset a fraction); blocks it covers whole hold its ``n`` nodes
   every hour, its first and last block hold its node-hours there (linear in the offset) spread over
   their hours at most ``n`` at a time, and on owned servers (which sell no on-demand node) at least
   ``n`` nodes are committed (the gang holds them together). Any real schedule, at any hourly start,
   satisfies this, so the relaxed optimum is no higher than the true optimum.
   Dominated (offering, tier) choices are left out; they never make the optimum cheaper
   (``sets.py`` prunes only where a dominating choice exists). Replicas are counted by the GPU
   memory and compute they take (``node_need.relaxed_serving``), not by the planning model's homogeneous
   layouts, so mixed MIG layouts and whole-GPU sizes that do not divide a node are not cut off.
2. *Separate.* Fix the commitments R, each run's (offering, tier) and its energy spread. What is
   left splits into
   one LP per hour t: cover demand D_t on non-spot nodes (billed as clouds bill: per offering,
   ``NO >= inference + u_t - R`` on-demand nodes beyond the commitments R, where u_t is the non-spot
   training held at t) or on spot nodes, within capacity and burst limits. Its optimal cost
   f_q(D_t, u_t) -- the on-demand nodes that non-spot training needs beyond R included -- is the
   value function of an LP in its right-hand side, hence *convex* in (D_t, u_t), and it is the same
   function for every hour of a *segment* q (prices, capacities and limits do not change with t, and
   inside a segment the same commitment columns serve: ``purchases.segment_of_period``). The billing
   rule is exactly this LP's: at its optimum NO = max(0, use - R_t), what the cloud bills, with R_t
   the nodes of the columns serving at t (new ones and those already held).
3. *Average.* For a cluster C of hours inside one segment q (clusters never straddle a segment),
   Jensen's inequality gives ``sum_{t in C} f_q(D_t, u_t) >= |C| * f_q(mean D, mean u)``. So the LP
   that covers each cluster's *mean* demand with the cluster's *mean* training occupancy costs no more
   than the relaxed full problem, for every R and training choice; minimizing both over R and
   training keeps the inequality. The cluster model's optimum, and so the solver's proven bound on
   it, is a lower bound on the full hourly MILP.

3b. *Whole nodes where nothing is averaged.* A cluster that is a single slot (periods of one block with
   equal demand and one segment) which no training run's window reaches holds the same per-hour problem
   in every period, so its cost is ``|C|`` times that problem's *integer* optimum: no Jensen step is
   needed there, and its on-demand and spot node counts stay whole (``uniform_clusters``). Whole nodes
   are what every plan runs, so this removes no plan; it adds the rounding of each such period's
   replicas up to whole nodes to the bound (on a service of two replicas a node, half a node whenever
   the replicas are odd).

3c. *Whole nodes where periods are averaged: rounding cuts.* In every period, the non-spot nodes of an
   offering serving (commitments and on demand, whole) less its non-spot training (whole gangs) hold
   its inference's node-equivalents, and its spot nodes serving inference are whole too. For a group of
   services that share offerings with no service outside it, the node-equivalents its replicas take are
   at least ``sum_i D_i m_i`` (m_i: the fewest a replica of i takes on any offering it may use, by
   memory; the same by compute), so the group's offerings hold at least the *whole* number above that
   beside their training: ``ceil(sum_i D_i m_i)``, less what unserved replicas free (at most
   ``ceil(m_i)`` a replica, since ``ceil`` is subadditive). The cut's right-hand side is data per
   period, so the per-period LP with it is still convex in its right-hand side (demand, occupancy and
   this whole count together), and step 3 averages it over a cluster as it does the demand: the cut is
   valid with the cluster's mean of the whole counts, and adds to the bound the rounding up of replicas
   to whole nodes wherever commitments do not absorb it. (Not written where the model already has fewer
   clusters per block for its LP's time: on ``bench/gen.py large`` the cuts' dense rows raised the LP's
   counted work from 136 to 177 s and its bound not at all.)

4. *Gangs beyond the commitments.* Averaging lets a cluster's idle commitments absorb a gang that in
   truth runs at the hours inference uses them. One family of cuts keeps the bound honest there: a
   gang of n nodes held for h hours on offering o has at least n - R_t of them on demand every hour
   t it runs (at most R_t are committed), and at any hour the on-demand nodes cover every active
   gang's excess at once ((a + b - R)^+ >= (a - R)^+ + (b - R)^+ for R >= 0). So for every plan,
   ``sum_t NO_t >= sum_gangs on o of sum_{t held} (n - R_t)^+ >= sum_gangs (h n - sum_{t held} R_t)``,
   and ``sum_{t held} R_t <= sum_c R_c min(h, |window_c ∩ W|)`` for any stretch W of hours that
   contains the held ones (column c serves at most its overlap with W, and at most h of them).
   With the cluster variables at their cluster means the left side is ``sum_c hours_c NO_c``, so the
   cut ``sum_c hours_c NO[o,c] >= sum W``, ``W >= h n Y - sum_c R_c min(h, |window_c ∩ W|)``,
   ``W >= 0``, removes no plan: the bound stays valid (W: the run's window). The same holds block by
   block, with h the fewest hours a start variant holds the gang in that block (W: the block).

5. *Capacity Blocks.* A block option's cost is its fee whatever its start, and its nodes hold no pool
   and no capacity: the model counts it exactly (its GPUs in the burst rows, its fee in the objective),
   so it relaxes nothing and the bound stays valid with blocks.

Keeping R and the run choices whole matters: with fractional runs, a gang could sit 70% on spot and
30% on demand to meet ``max_spot_share``, and the bound on the example falls 30% below the plan.

The cluster model has one copy of the per-hour variables per cluster, so its size is set by the number
of clusters, not by the 8,760 hours. Clusters are built from the model's slots (equal-demand periods),
chronologically within blocks (so training windows stay sharp), by weighted k-means on demand.

By construction, as in ``build.py`` (rules 9-14): serving columns only for ``sets.serve_tiers`` (no spot
for latency-critical services, no kind an offering does not sell), run combos only from
``sets.options`` (one offering and kind per gang, fabric, window, spot only for preemptible jobs), start
variants only inside the run's window. Owned nodes (rule 15) serve only in clusters with a slot after
their delivery; their pool may take training earlier, which only relaxes the bound further.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pulp

from models.billing import pool_row
from models.tiers import Capacity
from planner.planning.optimize.build import (
    VAR_CODE,
    committed_terms,
    guarantee_penalty_per_gpu,
    guarantee_rows,
    replica_penalty,
    run_penalty,
    savings_plan_rows,
)
from planner.planning.optimize.node_need import node_needs, relaxed_serving
from planner.planning.optimize.payments import (
    CAP_EPS_USD,
    PaymentSplit,
    cash_rows,
    payment_split,
    window_of_period,
)
from planner.planning.problem.sets import (
    PlanningSets,
    TrainingOption,
    first_start,
    shares_commitments,
    usable,
)
from planner.solvers.solve import SolveResult, Termination, solve
from planner.solvers.work import meter

LpExpr = pulp.LpAffineExpression
LpCon = pulp.LpConstraint


METHOD = "cluster-averaged relaxation, fractional node counts, energy-relaxed training (Jensen)"


@dataclass(frozen=True, slots=True)
class ClusterDecisions:
    """What the cluster model chose, for the hourly method to start from (``hourly.py``).

    ``runs`` maps a run to (offering, tier, preferred start period); a run the model left unserved is
    absent. With the LP relaxation (``relax``), each is the largest fraction's choice, rounded.
    """

    commitments: dict[int, int]  # new column -> nodes
    runs: dict[int, tuple[int, Capacity, int]]


@dataclass(frozen=True, slots=True)
class BoundResult:
    bound_usd: float
    clusters: int
    seconds: float
    solve: SolveResult
    method: str = METHOD
    decisions: ClusterDecisions | None = None
    work: float = 0.0  # nominal seconds of counted work it took (planner/solvers/work.py): what decides


def cluster_slots(sets: PlanningSets, per_block: int | None = None, seed: int = 0) -> np.ndarray:
    """Cluster id per slot: slots of the same block grouped by weighted k-means on their demand.

    ``per_block`` None keeps every slot its own cluster (the bound is then the LP relaxation of the
    energy-relaxed problem, as tight as this method gets).
    """
    cluster = np.arange(len(sets.slots))
    if per_block is None:
        return cluster
    scale = np.maximum(sets.demand.max(axis=1), 1).astype(float) if len(sets.services) else np.ones(0)
    # never mix segments (different commitments serve, e.g. owned nodes before and after delivery):
    # averaging across would let commitments serve outside their window
    # nor periods a run holds at any start with those it may not (``sets.split_by_certain_training``)
    by_block: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for s, slot in enumerate(sets.slots):
        by_block[(slot.block, int(sets.segment[slot.periods[0]]), slot.certain)].append(s)
    next_id = 0
    for _block, members in sorted(by_block.items()):
        points = np.array([sets.slots[s].demand for s in members], dtype=float).reshape(len(members), -1)
        weights = np.array([sets.slots[s].hours for s in members])
        labels = _weighted_kmeans(points / scale if scale.size else points, weights, per_block, seed)
        for s, label in zip(members, labels, strict=True):
            cluster[s] = next_id + label
        next_id += int(labels.max()) + 1
    _, dense = np.unique(cluster, return_inverse=True)
    return dense.reshape(-1)


CLUSTER_COLUMNS = (
    60_000  # inference columns of the cluster model that solve in seconds (bench/scale_bench.py)
)
MAX_CLUSTERS_PER_BLOCK = 4


def clusters_per_block(sets: PlanningSets) -> int:
    """Demand clusters per block for the cluster model: up to 4, fewer when blocks x serving options
    would make its LP slow (a year of weekly blocks with ~1,000 options per cluster: 1)."""
    return max(1, min(MAX_CLUSTERS_PER_BLOCK, CLUSTER_COLUMNS // _columns_per_cluster(sets)))


def _columns_per_cluster(sets: PlanningSets) -> int:
    """Inference columns one more cluster in every block adds: blocks x serving options."""
    blocks = len({slot.block for slot in sets.slots}) or 1
    options = sum(len(tiers) for tiers in sets.serve_tiers.values()) or 1
    return blocks * options


#: The finer bound (:func:`finer_bound`) solves the cluster LP again with this many times the clusters per
#: block, at most :data:`MAX_FINE_CLUSTERS_PER_BLOCK` and this many times :data:`CLUSTER_COLUMNS`.
#: Measured (LP bound at 4 -> 16 -> 32 clusters per block, 2026-12-07): inference-heavy-saas $1,647,634
#: -> $1,698,815 (+3.1 %, 4.0 s) -> $1,707,605 (10.7 s); growth-year $2,399,782 -> $2,422,622 (+1.0 %,
#: 3.6 s) -> $2,426,442; fleet-mid-contract $2,410,585 -> $2,440,432 (+1.2 %, 2.0 s) -> $2,444,984. The
#: staged method's MILP bound is far above any LP of it (mixed-fleet: MILP $1,813,689 at 4, LP $1,414,970
#: at 16), and its MILP at 16 did not finish in 60 s: there the finer bound is not tried.
FINE_FACTOR = 4
#: The same for the finer MILP (``finer_bound(integral=True)``): its work grows faster with the clusters.
#: spot-price-shock's cluster MILP at 8, 12, 16 per block: $1,665,142 in 7.9 s, $1,667,397 in 16.0 s,
#: $1,668,801 in 31.3 s of the clock (the plan $1,683,942).
MILP_FINE_FACTOR = 3
MAX_FINE_CLUSTERS_PER_BLOCK = 16
#: The finer LP's counted work against the coarse one's, at most (4 -> 16 per block: inference-heavy-saas
#: 1.26 -> 17.34 nominal s, 13.7x; growth-year, fleet-mid-contract, spot-price-shock 13.2-13.3x): where
#: that is more than its time, it is not started (the large benchmark's coarse LP alone is 136 s).
FINE_WORK_GROWTH = 14.0
#: The same for the finer MILP against the coarse MILP: spot-price-shock's cluster MILP at 4 and 12 per
#: block took 7.6 and 23.7 nominal s (3.1x); mixed-fleet's 15.5 s at 4, and at 12 it had not finished
#: after 60.7 s (its bound then $1,707,113, under the coarse $1,810,057: 33-62 s of the hourly method's
#: time for nothing, the same on h100-shortage).
FINE_MILP_WORK_GROWTH = 3.5
#: After the finer LP, the LP once more at twice its clusters per block (at most
#: :data:`MAX_LADDER_CLUSTERS_PER_BLOCK`) where the finer LP's counted work times this fits in what is left
#: of its time. 16 -> 32 per block, measured 2026-12-07: fleet-mid-contract 6.0 -> 21.9 nominal s (3.7x),
#: $2,442,078 -> $2,446,722; growth-year 5.2 -> 20.8 s (4.0x), $2,422,659 -> $2,426,483 (64 per block, every
#: slot its own cluster there: 55 and 78 s for $370 and $602 more).
LADDER_WORK_GROWTH = 4.5
MAX_LADDER_CLUSTERS_PER_BLOCK = 32


def finer_per_block(
    sets: PlanningSets,
    per_block: int | None,
    factor: int = FINE_FACTOR,
    most: int = MAX_FINE_CLUSTERS_PER_BLOCK,
) -> int | None:
    """Clusters per block for :func:`finer_bound`: ``factor`` times ``per_block``, at most ``most`` and what
    the column cap fits (None: no finer one than ``per_block`` fits)."""
    if per_block is None:
        return None
    fits = FINE_FACTOR * CLUSTER_COLUMNS // _columns_per_cluster(sets)
    finer = min(factor * per_block, most, fits)
    return finer if finer > per_block else None


def finer_bound(
    sets: PlanningSets,
    per_block: int | None,
    time_limit: float | None,
    say: Callable[[str], None],
    coarse_work: float = 0.0,
    integral: bool = False,
) -> BoundResult | None:
    """The cluster model's LP with finer clusters (:func:`finer_per_block`): a valid bound whatever its
    clusters (module docstring, step 2: Jensen on each cluster), tighter the less it averages. None where
    no finer clustering fits, where the coarse LP's counted work ``coarse_work`` says the finer one would
    not finish within ``time_limit`` (:data:`FINE_WORK_GROWTH`), or where it does not (a stopped LP proves
    nothing here). Where the LP leaves room in ``time_limit`` it is solved once more at twice the clusters
    (:data:`LADDER_WORK_GROWTH`), the tighter of the two returned. ``integral``: the cluster MILP instead,
    at :data:`MILP_FINE_FACTOR` times the clusters (its proven dual bound counts even when stopped),
    ``coarse_work`` then the coarse MILP's (:data:`FINE_MILP_WORK_GROWTH`)."""
    finer = finer_per_block(sets, per_block, MILP_FINE_FACTOR if integral else FINE_FACTOR)
    if finer is None:
        return None
    expected = coarse_work * (FINE_MILP_WORK_GROWTH if integral else FINE_WORK_GROWTH)
    if time_limit is not None and expected > time_limit:
        say(
            f"finer cluster bound ({finer} per block): not started, its {'MILP' if integral else 'LP'} would "
            f"take about {expected:.0f} s of counted work, more than its {time_limit:.0f} s"
        )
        return None
    result = certified_bound(sets, finer, time_limit=time_limit, relax=not integral)
    if integral:
        if not (result.solve.ok and math.isfinite(result.bound_usd)):
            say(f"finer cluster bound ({finer} per block): its MILP proved nothing; not used")
            return None
        say(f"finer cluster bound: MILP with {result.clusters} clusters ${result.bound_usd:,.0f} "
            f"({result.solve.termination.value}, {result.seconds:.1f} s)")  # fmt: skip
        return result
    if result.solve.termination != Termination.OPTIMAL:
        say(f"finer cluster bound ({finer} per block): stopped before its LP finished; not used")
        return None
    say(
        f"finer cluster bound: LP with {result.clusters} clusters ${result.bound_usd:,.0f} "
        f"({result.seconds:.1f} s)"
    )
    left = None if time_limit is None else time_limit - result.work
    finer_still = finer_per_block(sets, finer, 2, MAX_LADDER_CLUSTERS_PER_BLOCK)
    if finer_still is None or (left is not None and result.work * LADDER_WORK_GROWTH > left):
        return result
    if int(cluster_slots(sets, finer_still).max(initial=-1)) + 1 <= result.clusters:
        return result  # every slot is its own cluster already
    again = certified_bound(sets, finer_still, time_limit=left, relax=True)
    if again.solve.termination != Termination.OPTIMAL:
        say(f"finer cluster bound ({finer_still} per block): stopped before its LP finished; not used")
        return result
    found = f"LP with {again.clusters} clusters ${again.bound_usd:,.0f} ({again.seconds:.1f} s)"
    say(f"finer cluster bound: {found}")
    return again if again.bound_usd > result.bound_usd else result


def _weighted_kmeans(points: np.ndarray, weights: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Lloyd's algorithm, started from equal-weight slices of the points sorted by total demand."""
    n = len(points)
    if n <= k:
        return np.arange(n)
    order = np.argsort(points.sum(axis=1), kind="stable")
    cumulative = np.cumsum(weights[order]) / weights.sum()
    labels = np.empty(n, dtype=np.int64)
    labels[order] = np.minimum((cumulative * k).astype(np.int64), k - 1)
    rng = np.random.default_rng(seed)
    for _ in range(30):
        centers = np.zeros((k, points.shape[1]))
        for j in range(k):
            mask = labels == j
            centers[j] = (
                np.average(points[mask], axis=0, weights=weights[mask])
                if mask.any()
                else points[rng.integers(n)]
            )
        distance = ((points[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
        updated = distance.argmin(axis=1)
        if (updated == labels).all():
            break
        labels = updated
    _, dense = np.unique(labels, return_inverse=True)
    return dense.reshape(-1)


@dataclass
class ClusterModel:
    """The cluster model under construction: its clusters, the PuLP rows and columns so far, and the
    uses of each pool, capacity and burst row that the training part adds to (shared by this module's
    bound and ``bound_exact.py``'s, which differ only in how training is placed)."""

    sets: PlanningSets
    cluster: np.ndarray  # cluster per slot
    clusters: int
    hours: np.ndarray  # per cluster
    cluster_block: np.ndarray  # per cluster: its block
    cluster_period: np.ndarray  # per cluster: one of its periods (the same columns serve in all)
    period_cluster: np.ndarray  # per period: its cluster
    problem: pulp.LpProblem
    #: per cluster: one slot (equal periods) no training run can touch, so its node counts are whole
    #: (step 3b of the module docstring)
    uniform: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    objective: list[tuple[pulp.LpVariable, float]] = field(default_factory=list)
    constraints: dict[str, pulp.LpConstraint] = field(default_factory=dict)
    commit: dict[int, pulp.LpVariable] = field(default_factory=dict)
    pool_use: dict[tuple[int, int], list] = field(default_factory=lambda: defaultdict(list))
    held_use: dict[tuple[int, int], list] = field(default_factory=lambda: defaultdict(list))
    burst_use: dict[tuple[str, int], list] = field(default_factory=lambda: defaultdict(list))
    compute_ratio: dict[str, float] = field(default_factory=dict)
    by_run: dict[int, list[tuple[pulp.LpVariable, float]]] = field(default_factory=lambda: defaultdict(list))
    spot_terms: list[tuple[pulp.LpVariable, float]] = field(default_factory=list)
    run_beyond: dict[int, list] = field(default_factory=lambda: defaultdict(list))  # offering -> -W
    block_beyond: dict[tuple[int, int], list] = field(default_factory=lambda: defaultdict(list))
    cap_rows: set[tuple[int, int]] = field(default_factory=set)  # (o, c) capacity rows wanted anyway
    burst_rows: set[tuple[str, int]] = field(default_factory=set)  # (team, c) burst rows wanted anyway
    plan_buy: dict[int, pulp.LpVariable] = field(default_factory=dict)  # new savings-plan column -> S[k]
    payments: PaymentSplit = field(default_factory=PaymentSplit)  # under a cash limit: R split by option
    #: the rounding cuts (step 3c): per group of services, their offerings and whole nodes needed per cluster
    rounding: list[RoundingGroup] = field(default_factory=list)
    serving: set[str] = field(default_factory=set)  # names of the inference columns in the pool rows
    spot_nodes: dict[tuple[int, int], list] = field(default_factory=lambda: defaultdict(list))  # inference's
    short: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)  # (service, cluster) -> UI

    def var(self, name: str, up: float | None = None, cat: str = pulp.LpContinuous) -> pulp.LpVariable:
        return self.problem.add_variable(name, 0, up, cat)

    def covered(
        self, o: int, first: int, end: int, most: float
    ) -> tuple[list[tuple[pulp.LpVariable, float]], float]:
        """Committed node-hours of ``o`` inside periods [first, end), at most ``most`` hours per node:
        the new columns' terms and the held nodes' constant (the gang cuts of the docstring)."""
        sets, p = self.sets, self.sets.period_hours
        terms, held = [], 0.0
        for k in sets.columns_on.get(o, []):
            column = sets.columns[k]
            hours = min(most, max(0, min(end, column.end) - max(first, column.start)) * p)
            if hours <= 0:
                continue
            if column.existing:
                held += (column.nodes or 0) * hours
            else:
                terms.append((self.commit[k], hours))
        return terms, held


def training_combos(sets: PlanningSets) -> dict[tuple[int, int, Capacity], tuple[int, float]]:
    """(run, offering, tier) -> (periods held, the run's own cost): the choices a run has, start aside."""
    combos: dict[tuple[int, int, Capacity], tuple[int, float]] = {}
    for option in sets.options:
        combos.setdefault((option.run, option.offering, option.tier), (option.periods, option.cost_usd))
    return combos


def cluster_model(sets: PlanningSets, per_block: int | None) -> ClusterModel:
    """Clusters, commitments and inference of the cluster model (steps 1-3 of the module docstring);
    training is added by the caller (:func:`add_combo` and its own start variables), then
    :func:`finish_model` writes the pool, capacity, burst and guarantee rows."""
    cluster = cluster_slots(sets, per_block)
    clusters = int(cluster.max()) + 1 if len(cluster) else 0
    hours = np.zeros(clusters)
    mean_demand = np.zeros((len(sets.services), clusters))
    for s, slot in enumerate(sets.slots):
        hours[cluster[s]] += slot.hours
        mean_demand[:, cluster[s]] += np.array(slot.demand, dtype=float) * slot.hours
    mean_demand /= np.maximum(hours, 1e-12)
    cluster_block = np.full(clusters, -1, dtype=np.int64)
    cluster_period = np.zeros(clusters, dtype=np.int64)
    for s, slot in enumerate(sets.slots):
        cluster_block[cluster[s]] = slot.block
        cluster_period[cluster[s]] = slot.periods[0]
    model = ClusterModel(
        sets=sets,
        cluster=cluster,
        clusters=clusters,
        hours=hours,
        cluster_block=cluster_block,
        cluster_period=cluster_period,
        period_cluster=cluster[sets.slot_of_period],
        problem=pulp.LpProblem("bound", pulp.LpMinimize),
        uniform=uniform_clusters(sets, cluster, clusters),
    )
    var, objective, constraints = model.var, model.objective, model.constraints
    for c in sets.new_columns:
        column = sets.columns[c]
        model.commit[c] = var(f"R_{c}", sets.offerings[column.offering].max_nodes, pulp.LpInteger)
    # under a cash limit each column's nodes split among its payment options (a relaxation of how any
    # plan pays them: payments.py), their fees in the cash rows of block_cash
    model.payments = payment_split(sets, model.commit, lambda name, up: var(name, up, pulp.LpInteger))
    objective += model.payments.objective
    for name, terms in model.payments.rows.items():
        constraints[name] = LpCon(LpExpr(terms), pulp.LpConstraintEQ, None, 0.0)

    pool_use, held_use, burst_use = model.pool_use, model.held_use, model.burst_use
    # owned nodes still on order serve nothing: clusters never straddle a segment, so any period
    # of a cluster says whether a column on the offering serves there
    waiting = {o for o, off in enumerate(sets.offerings) if off.on_demand_usd_h is None}
    usable_in = {(o, c) for o in waiting for c in range(clusters) if usable(sets, o, int(cluster_period[c]))}
    held: dict[tuple[Capacity, int, int], pulp.LpVariable] = {}
    held_links: dict[tuple[Capacity, int, int], list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
    for i, service in enumerate(sets.services):
        penalty = replica_penalty(sets, i)
        for c in range(clusters):
            need = mean_demand[i, c]
            if need <= 0:
                continue
            terms_: list[tuple[pulp.LpVariable, float]] = []
            for (ii, o), _q in sets.replicas_per_node.items():
                if ii != i:
                    continue
                gpus = float(sets.offerings[o].gpus_per_node)
                q, ratio = relaxed_serving(sets, i, o)
                for tier in sets.serve_tiers.get((i, o), ()):
                    if tier == Capacity.NON_SPOT and o in waiting and (o, c) not in usable_in:
                        continue
                    x = var(f"X{VAR_CODE[tier]}_{i}_{o}_{c}")
                    terms_.append((x, q))
                    burst_use[(service.team, c)].append((x, gpus * ratio))  # the GPUs' compute in use
                    if ratio != 1.0:  # a MIG slice: its compute per node-equivalent, above or below 1
                        model.compute_ratio[x.name] = ratio
                    if tier == Capacity.NON_SPOT:
                        pool_use[(o, c)].append((x, 1.0))
                        model.serving.add(x.name)
                    else:
                        key = (tier, o, c)
                        if key not in held:
                            whole = pulp.LpInteger if model.uniform[c] else pulp.LpContinuous
                            held[key] = var(f"N{VAR_CODE[tier]}_{o}_{c}", None, whole)
                            objective.append((held[key], (sets.offerings[o].spot_usd_h or 0.0) * hours[c]))
                            held_use[(o, c)].append((held[key], 1.0))
                            model.spot_nodes[(o, c)].append(held[key])
                        held_links[key].append((x, 1.0))
            short = var(f"UI_{i}_{c}", need)
            model.short[(i, c)] = short
            objective.append((short, penalty * hours[c]))
            terms_.append((short, 1.0))
            constraints[f"demand_{i}_{c}"] = LpCon(LpExpr(terms_), pulp.LpConstraintGE, None, need)
    if clusters_per_block(sets) == MAX_CLUSTERS_PER_BLOCK:  # not where the model was coarsened for time
        model.rounding = rounding_groups(sets, cluster, hours)
    for (tier, o, c), users in held_links.items():
        for name, scaled in (("held", users), ("held_compute", _compute(users, model.compute_ratio))):
            if scaled is not None:
                constraints[f"{name}_{VAR_CODE[tier]}_{o}_{c}"] = LpCon(
                    LpExpr([*scaled, (held[(tier, o, c)], -1.0)]), pulp.LpConstraintLE, None, 0.0
                )
    return model


@dataclass(frozen=True, slots=True)
class RoundingGroup:
    """Services that share offerings (a connected part of the service-offering graph), the offerings,
    and per cluster the mean of the whole nodes their replicas need each period (step 3c)."""

    services: tuple[int, ...]
    offerings: frozenset[int]
    need: np.ndarray  # per cluster: hour-weighted mean of each period's whole nodes needed
    unserved: dict[int, float]  # service -> the most whole nodes one unserved replica of it frees


def rounding_groups(sets: PlanningSets, cluster: np.ndarray, hours: np.ndarray) -> list[RoundingGroup]:
    """The groups of step 3c (``node_need.py``): per cluster, the hour-weighted mean of each period's
    whole nodes the group needs beside its non-spot training."""
    demand = np.array([slot.demand for slot in sets.slots], dtype=float).reshape(
        len(sets.slots), len(sets.services)
    )
    slot_hours = np.array([slot.hours for slot in sets.slots], dtype=float)
    per_cluster = np.maximum(hours, 1e-12)
    groups = []
    for part in node_needs(sets):
        nodes = part.nodes(demand.T)
        need = np.bincount(cluster, weights=nodes * slot_hours, minlength=len(hours)) / per_cluster
        groups.append(RoundingGroup(part.services, part.offerings, need, part.unserved))
    return groups


def rounding_row(group: int, c: int) -> str:
    """The name of group ``group``'s rounding cut in cluster ``c`` (step 3c)."""
    return f"round_{group}_{c}"


def _rounding_cuts(model: ClusterModel, on_demand: dict[tuple[int, int], pulp.LpVariable]) -> None:
    """Step 3c's cut per group and cluster: the group's offerings' non-spot nodes (commitments serving and
    on demand) less their non-spot training, plus their spot nodes serving, plus what unserved replicas
    free, at least the cluster's mean of whole nodes needed."""
    sets = model.sets
    for g, group in enumerate(model.rounding):
        for c in np.flatnonzero(group.need > 0).tolist():
            terms: list[tuple[pulp.LpVariable, float]] = []
            held_nodes = 0.0
            for o in sorted(group.offerings):
                committed, held = committed_terms(sets, model.commit, o, int(model.cluster_period[c]))
                terms += committed
                held_nodes += held
                if (o, c) in on_demand:
                    terms.append((on_demand[(o, c)], 1.0))
                users = model.pool_use.get((o, c), [])
                terms += [(x, -coef) for x, coef in users if x.name not in model.serving]  # training
                terms += [(nodes, 1.0) for nodes in model.spot_nodes.get((o, c), [])]
            for i in group.services:
                if (i, c) in model.short:
                    terms.append((model.short[(i, c)], group.unserved[i]))
            model.constraints[rounding_row(g, c)] = LpCon(
                LpExpr(terms), pulp.LpConstraintGE, None, float(group.need[c]) - held_nodes
            )


def uniform_clusters(sets: PlanningSets, cluster: np.ndarray, clusters: int) -> np.ndarray:
    """Per cluster, whether it is one slot (periods of equal demand and equal commitments serving) that no
    training run's window reaches: its periods are then the same problem, whole nodes and all (step 3b)."""
    slots = np.bincount(cluster, minlength=clusters)
    reached = np.zeros(clusters, dtype=bool)
    period_cluster = cluster[sets.slot_of_period]
    for run in sets.runs:
        reached[period_cluster[run.first_period : run.end_period]] = True
    return (slots == 1) & ~reached


def add_combo(
    model: ClusterModel, r: int, o: int, tier: Capacity, periods: int, cost: float
) -> pulp.LpVariable:
    """A run's choice of offering and tier, start aside: its binary ``Y``, its cost and spot share, the
    gang cut over its window (step 4) and, on owned nodes, at least ``n`` committed in its window."""
    sets, var, constraints = model.sets, model.var, model.constraints
    run = sets.runs[r]
    nodes = float(run.job.nodes)
    name = f"{r}_{o}_{VAR_CODE[tier]}"
    y = var(f"Y_{name}", 1.0, pulp.LpInteger)
    model.by_run[r].append((y, 1.0))
    model.objective.append((y, cost))
    on_spot = 1.0 if tier == Capacity.SPOT else 0.0
    share = sets.scenario.purchase.max_spot_share
    model.spot_terms.append((y, run.gpus * run.job.hours * (on_spot - share)))
    if shares_commitments(sets, o, tier):
        # the gang holds n nodes for all its hours and at most R of them are committed: at least
        # hours * (n - R) on-demand node-hours, whatever the averaging (see _beyond_commitments)
        w = var(f"W_{name}")
        p = sets.period_hours
        terms_, held_hours = model.covered(o, run.first_period, run.end_period, float(periods * p))
        constraints[f"beyond_{name}"] = LpCon(
            LpExpr([(w, 1.0), (y, -nodes * periods * p), *terms_]), pulp.LpConstraintGE, None, -held_hours
        )
        model.run_beyond[o].append((w, -1.0))
    if sets.offerings[o].on_demand_usd_h is None and tier == Capacity.NON_SPOT:
        # no on-demand nodes (owned): the gang holds all n nodes at once, so at least n committed
        # at some hour of its window: no more than every column serving somewhere in it
        gang, held_nodes = [], 0.0
        for k in sets.columns_on.get(o, []):
            column = sets.columns[k]
            if column.start < run.end_period and column.end > run.first_period:
                if column.existing:
                    held_nodes += column.nodes or 0
                else:
                    gang.append((model.commit[k], 1.0))
        constraints[f"gang_{name}"] = LpCon(
            LpExpr([*gang, (y, -nodes)]), pulp.LpConstraintGE, None, -held_nodes
        )
    return y


def _savings_plans(model: ClusterModel, on_demand: dict[tuple[int, int], pulp.LpVariable]) -> None:
    """Savings plans as ``build.savings_plan_rows`` writes them, per cluster: S[k] USD per hour bought,
    Z[g,o,c] on-demand nodes (inference and training alike) covered at each group's rates within its
    budget. With S fixed, each hour's LP of step 2 holds these rows with the same right-hand side
    throughout a segment (a plan's window bounds segments), so its value stays convex and step 3 holds;
    and the rows are a relaxation of the cloud's rule (``models.savingsplans.budget_row``). So the held
    plans' budgets are in the model and the bound adds their whole cost (``sets.fixed_usd``)."""
    units = [(int(model.cluster_period[c]), float(model.hours[c])) for c in range(model.clusters)]
    found = savings_plan_rows(model.sets, units, lambda o, c: on_demand.get((o, c)), model.var)
    model.plan_buy = found.buy
    model.objective += found.objective
    for name, (terms, rhs) in found.rows.items():
        model.constraints[name] = LpCon(LpExpr(terms), pulp.LpConstraintLE, None, rhs)


def finish_model(model: ClusterModel) -> None:
    """Each run placed once (or unserved), the spot share, the billing rule per pool and cluster, the
    gang cuts, capacity and burst limits, guarantees; then the rows and objective go into the problem."""
    sets, var, objective, constraints = model.sets, model.var, model.objective, model.constraints
    commit, hours = model.commit, model.hours
    for r in range(len(sets.runs)):
        short = var(f"UT_{r}", 1.0, pulp.LpInteger)
        objective.append((short, run_penalty(sets, r)))
        constraints[f"place_{r}"] = LpCon(
            LpExpr([*model.by_run.get(r, []), (short, 1.0)]), pulp.LpConstraintEQ, None, 1.0
        )
    if sets.scenario.purchase.max_spot_share < 1.0 and model.spot_terms:
        constraints["spot_share"] = LpCon(LpExpr(model.spot_terms), pulp.LpConstraintLE, None, 0.0)

    on_demand_hours: dict[int, list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
    on_demand_of: dict[int, list[tuple[tuple[pulp.LpVariable, float], int]]] = defaultdict(list)
    on_demand_nodes: dict[tuple[int, int], pulp.LpVariable] = {}
    for (o, c), users in model.pool_use.items():  # the billing rule: commitments first, on demand beyond
        committed, held_nodes = committed_terms(sets, commit, o, int(model.cluster_period[c]))
        price = sets.offerings[o].on_demand_usd_h
        beyond = None
        if price is not None:
            whole = pulp.LpInteger if model.uniform[c] else pulp.LpContinuous
            beyond = var(f"N{VAR_CODE[Capacity.NON_SPOT]}_{o}_{c}", None, whole)
            objective.append((beyond, price * hours[c]))
            model.held_use[(o, c)].append((beyond, 1.0))
        constraints[f"pool_{o}_{c}"] = LpCon(
            LpExpr(pool_row(users, committed, beyond)), pulp.LpConstraintLE, None, held_nodes
        )
        compute = _compute(users, model.compute_ratio)
        if compute is not None:  # the same nodes, counted by the compute their MIG slices take
            constraints[f"pool_compute_{o}_{c}"] = LpCon(
                LpExpr(pool_row(compute, committed, beyond)), pulp.LpConstraintLE, None, held_nodes
            )
        if price is not None and beyond is not None:
            on_demand_hours[o].append((beyond, hours[c]))
            on_demand_of[o].append(((beyond, hours[c]), c))
            on_demand_nodes[(o, c)] = beyond
    _savings_plans(model, on_demand_nodes)
    _rounding_cuts(model, on_demand_nodes)
    for (o, b), gangs in model.block_beyond.items():  # the same, block by block
        in_block = [(beyond, h) for (beyond, h), c in on_demand_of.get(o, []) if model.cluster_block[c] == b]
        if in_block:
            constraints[f"block_beyond_{o}_{b}"] = LpCon(
                LpExpr([*in_block, *gangs]), pulp.LpConstraintGE, None, 0.0
            )
    for o, gangs in model.run_beyond.items():  # on-demand node-hours >= what the gangs need beyond R
        if on_demand_hours.get(o):
            constraints[f"gangs_beyond_{o}"] = LpCon(
                LpExpr([*on_demand_hours[o], *gangs]), pulp.LpConstraintGE, None, 0.0
            )
    for o, offering in enumerate(sets.offerings):
        if offering.max_nodes is None:
            continue
        for c in range(model.clusters):
            users = model.held_use.get((o, c), [])
            committed, held_nodes = committed_terms(sets, commit, o, int(model.cluster_period[c]))
            if users or committed or (o, c) in model.cap_rows:
                constraints[f"cap_{o}_{c}"] = LpCon(
                    LpExpr([*committed, *users]),
                    pulp.LpConstraintLE,
                    None,
                    float(offering.max_nodes) - held_nodes,
                )
    for team in sets.scenario.teams:
        if team.burst_gpus is None:
            continue
        for c in range(model.clusters):
            users = model.burst_use.get((team.name, c), [])
            if users or (team.name, c) in model.burst_rows:
                constraints[f"burst_{team.name}_{c}"] = LpCon(
                    LpExpr(users), pulp.LpConstraintLE, None, float(team.burst_gpus)
                )
    _guarantees(sets, commit, var, objective, constraints)

    for name, constraint in constraints.items():
        constraint.name = name
    model.problem.extend(constraints)
    model.problem.setObjective(LpExpr(objective))


def certified_bound(
    sets: PlanningSets,
    per_block: int | None = None,
    time_limit: float | None = None,
    gap: float = 1e-4,
    relax: bool = False,
    start: dict[str, float] | None = None,
) -> BoundResult:
    """Solve the cluster model of the module docstring; its proven bound bounds the full hourly problem.

    ``relax`` solves its LP relaxation instead (commitments and run choices fractional too): a weaker
    bound, still valid (a relaxation of a relaxation), found in one LP solve where the MILP is too big.
    The result carries the model's decisions (:class:`ClusterDecisions`). ``start`` (from
    :func:`start_from`) hands HiGHS a plan's integer decisions as its first incumbent.
    """
    began, counted = time.perf_counter(), meter().units
    model = cluster_model(sets, per_block)
    var, constraints = model.var, model.constraints
    clusters, hours = model.clusters, model.hours
    p = sets.period_hours
    block = sets.block_periods
    pool_use, held_use, burst_use = model.pool_use, model.held_use, model.burst_use

    # training: each (run, offering, tier) picks a start block and an offset inside it (see
    # _start_variants); blocks it covers whole hold n nodes in every cluster, the first and last
    # block hold its node-hours spread over their clusters (energy), never more than n at a time
    clusters_of_block: dict[int, list[int]] = defaultdict(list)
    for c in range(clusters):
        clusters_of_block[int(model.cluster_block[c])].append(c)
    chosen_by: dict[tuple[int, int, Capacity], tuple[pulp.LpVariable, list]] = {}  # combo -> (y, variants)
    for (r, o, tier), (periods, cost) in training_combos(sets).items():
        run = sets.runs[r]
        nodes = float(run.job.nodes)
        # a Capacity Block's nodes are its own (no pool, no capacity row): its fee is exact, start aside
        use = {Capacity.NON_SPOT: pool_use, Capacity.SPOT: held_use}.get(tier, defaultdict(list))
        gpus = float(sets.offerings[o].gpus_per_node)
        name = f"{r}_{o}_{VAR_CODE[tier]}"
        y = add_combo(model, r, o, tier, periods, cost)
        window = model.period_cluster[run.first_period : run.end_period]
        inside = np.bincount(window, minlength=clusters) * p
        choice = [(y, -1.0)]
        partial: dict[int, list[tuple[pulp.LpVariable, float]]] = defaultdict(list)  # block -> energy
        variants: list[tuple[pulp.LpVariable, pulp.LpVariable | None, tuple[int, int, int, int]]] = []
        chosen_by[(r, o, tier)] = (y, variants)
        cut_gangs = shares_commitments(sets, o, tier)
        for k, (b0, last, lo, hi) in enumerate(
            _start_variants(run.first_period, run.end_period, periods, block)
        ):
            v = var(f"V_{name}_{k}", 1.0, pulp.LpInteger)
            choice.append((v, 1.0))
            if cut_gangs:  # the least hours it holds in each block it touches, for the block cuts
                middle = periods - block - (last - b0 - 1) * block
                least = {
                    b0: periods if last == b0 else block - hi,
                    last: periods if last == b0 else middle + lo,
                }
                least |= {b: block for b in range(b0 + 1, last)}
                for b, held_periods in least.items():
                    w = var(f"W_{name}_{k}_{b}")
                    terms_, held_hours = model.covered(o, b * block, (b + 1) * block, float(held_periods * p))
                    constraints[f"beyond_{name}_{k}_{b}"] = LpCon(
                        LpExpr([(w, 1.0), (v, -nodes * held_periods * p), *terms_]),
                        pulp.LpConstraintGE,
                        None,
                        -held_hours,
                    )
                    model.block_beyond[(o, b)].append((w, -1.0))
            if last == b0:  # the whole run inside one block
                partial[b0].append((v, nodes * periods * p))
                variants.append((v, None, (b0, last, lo, hi)))
                continue
            z = var(f"Z_{name}_{k}", float(hi))  # z = offset * v, offset in [lo, hi]
            variants.append((v, z, (b0, last, lo, hi)))
            constraints[f"zlo_{name}_{k}"] = LpCon(
                LpExpr([(z, 1.0), (v, -lo)]), pulp.LpConstraintGE, None, 0.0
            )
            constraints[f"zhi_{name}_{k}"] = LpCon(
                LpExpr([(z, 1.0), (v, -hi)]), pulp.LpConstraintLE, None, 0.0
            )
            partial[b0] += [(v, nodes * block * p), (z, -nodes * p)]
            middle = periods - block - (last - b0 - 1) * block  # periods in the last block, at offset 0
            partial[last] += [(v, nodes * middle * p), (z, nodes * p)]
            for b in range(b0 + 1, last):  # covered whole: n nodes in every hour of the block
                for c in clusters_of_block.get(b, []):
                    use[(o, c)].append((v, nodes))
                    burst_use[(run.job.team, c)].append((v, nodes * gpus))
        constraints[f"choice_{name}"] = LpCon(LpExpr(choice), pulp.LpConstraintEQ, None, 0.0)
        for b, energy in partial.items():
            spread = []
            for c in clusters_of_block.get(b, []):
                if not inside[c]:
                    continue
                u = var(f"U_{name}_{c}")
                spread.append((u, -hours[c]))
                # at most n nodes at a time: average occupancy <= n * (window hours in c) / (hours of c)
                constraints[f"occ_{name}_{c}"] = LpCon(
                    LpExpr([(u, 1.0), (y, -nodes * inside[c] / hours[c])]), pulp.LpConstraintLE, None, 0.0
                )
                use[(o, c)].append((u, 1.0))
                burst_use[(run.job.team, c)].append((u, gpus))
            constraints[f"energy_{name}_{b}"] = LpCon(
                LpExpr([*energy, *spread]), pulp.LpConstraintEQ, None, 0.0
            )
    block = sets.block_periods
    block_cash(
        model,
        {
            key: (y, [(v, b0 * block + lo, b0 * block + hi) for v, _z, (b0, _last, lo, hi) in variants])
            for key, (y, variants) in chosen_by.items()
        },
    )
    finish_model(model)
    problem = model.problem
    if relax:
        for variable in problem.variables():
            variable.cat = pulp.LpContinuous
    what = "the cluster model's LP" if relax else "the cluster model's MILP"
    result = solve(problem, time_limit=time_limit, gap=gap, start=start, what=what)
    # the solver's proven bound on this relaxation's optimum (valid even when stopped early)
    # held commitments and savings plans: a constant (the plans' budgets are in the model: _savings_plans)
    bound = result.bound + sets.fixed_usd if result.ok else float("-inf")
    decisions = _decisions(sets, model.commit, chosen_by) if result.ok else None
    method = METHOD + (", LP relaxation" if relax else "")
    seconds, work = time.perf_counter() - began, meter().units - counted
    return BoundResult(bound, clusters, seconds, result, method, decisions, work)


#: Per (run, offering, tier) combo: its ``Y`` and the variables that pick its start, each with the first
#: and last start period it stands for (:func:`block_cash`).
BlockStarts = dict[tuple[int, int, Capacity], tuple[pulp.LpVariable, list[tuple[pulp.LpVariable, int, int]]]]


def block_cash(model: ClusterModel, starts: BlockStarts) -> None:
    """``purchase.max_upfront_usd`` (``payments.py``), kept as a relaxation so a bound stays valid: per
    window, the fees of the Capacity Blocks and of the commitments' payment options (``model.payments``)
    paid in it within the limit. ``starts``: per (run, offering, tier) combo, its ``Y`` and the variables
    that pick its start, each with the first and last start it stands for. A block dearer than the limit
    alone is never chosen, and a start variable counts in a window only if its every start lies in it;
    one whose starts straddle two windows is left out (every plan keeps these rows, so they cut off no
    plan)."""
    sets = model.sets
    cap = sets.scenario.purchase.max_upfront_usd
    if cap is None:
        return
    labels, window = window_of_period(sets)
    fee_of = training_combos(sets)
    blocks: dict[str, list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
    for key, (y, variants) in starts.items():
        if key[2] != Capacity.BLOCK:
            continue
        fee = fee_of[key][1]
        if fee > cap.usd + CAP_EPS_USD:
            y.upBound = 0
            continue
        for v, first, last in variants:
            if window[first] == window[last]:
                blocks[labels[int(window[first])]].append((v, fee))
    for name, terms in cash_rows(sets, blocks, model.payments).items():
        model.constraints[name] = LpCon(LpExpr(terms), pulp.LpConstraintLE, None, float(cap.usd))


def start_from(
    sets: PlanningSets,
    commitments: dict[int, int],
    placements: list[TrainingOption],
    unserved_runs: list[int],
) -> dict[str, float]:
    """A plan's integer decisions in the cluster model's variable names (commitments, each run's
    choice and start variant); HiGHS completes the rest. Any hourly plan maps to a feasible point of
    the cluster model (it is a relaxation), so the completed start is an incumbent."""
    values: dict[str, float] = {}
    for c in sets.new_columns:
        values[f"R_{c}"] = float(commitments.get(c, 0))
    combos: dict[tuple[int, int, Capacity], int] = {}
    for option in sets.options:
        combos.setdefault((option.run, option.offering, option.tier), option.periods)
    placed = {option.run: option for option in placements}
    block = sets.block_periods
    for (r, o, tier), periods in combos.items():
        name = f"{r}_{o}_{VAR_CODE[tier]}"
        placement = placed.get(r)
        chosen = placement is not None and (placement.offering, placement.tier) == (o, tier)
        values[f"Y_{name}"] = 1.0 if chosen else 0.0
        run = sets.runs[r]
        start = placement.start if chosen and placement is not None else -1
        for k, (b0, _last, lo, hi) in enumerate(
            _start_variants(run.first_period, run.end_period, periods, block)
        ):
            hit = start // block == b0 and lo <= start - b0 * block <= hi
            values[f"V_{name}_{k}"] = 1.0 if hit else 0.0
    for r in range(len(sets.runs)):
        values[f"UT_{r}"] = 1.0 if r in unserved_runs else 0.0
    return values


def _value(variable: pulp.LpVariable | None) -> float:
    return float(variable.varValue or 0.0) if variable is not None else 0.0


def _decisions(
    sets: PlanningSets,
    commit: dict[int, pulp.LpVariable],
    chosen_by: dict[tuple[int, int, Capacity], tuple[pulp.LpVariable, list]],
) -> ClusterDecisions:
    """Commitments rounded, and per run the combo and start variant holding the largest fraction."""
    commitments = {key: round(_value(v)) for key, v in commit.items() if round(_value(v)) > 0}
    best: dict[int, tuple[float, int, Capacity, int]] = {}
    block = sets.block_periods
    for (r, o, tier), (y, variants) in chosen_by.items():
        weight = _value(y)
        if weight < 1e-6 or weight <= best.get(r, (0.0,))[0]:
            continue
        v, z, (b0, _last, lo, hi) = max(variants, key=lambda item: _value(item[0]))
        share = _value(v)
        offset = _value(z) / share if z is not None and share > 1e-9 else (lo + hi) / 2
        run = sets.runs[r]
        start = b0 * block + round(min(max(offset, lo), hi))
        best[r] = (weight, o, tier, max(first_start(sets.scenario, run, tier), start))
    runs = {r: (o, tier, start) for r, (_weight, o, tier, start) in best.items()}
    return ClusterDecisions(commitments, runs)


def _guarantees(
    sets: PlanningSets,
    commit: dict[int, pulp.LpVariable],
    var: Callable[..., pulp.LpVariable],
    objective: list[tuple[pulp.LpVariable, float]],
    constraints: dict[str, pulp.LpConstraint],
) -> None:
    """Guarantees are backed by committed GPUs, the very rows of the planning model (per segment)."""
    family = guarantee_rows(sets, commit, lambda name, up: var(name, up))
    for key, short in family.shortfall.items():
        objective.append((short, guarantee_penalty_per_gpu(sets) * family.weight[key]))
    for name, (terms, sense, rhs) in family.rows.items():
        constraints[name] = LpCon(LpExpr(terms), sense, None, rhs)


def _compute(
    users: list[tuple[pulp.LpVariable, float]], ratio: dict[str, float]
) -> list[tuple[pulp.LpVariable, float]] | None:
    """``users`` with MIG serving counted by compute (None when none of them is compute-bound). Every MIG
    user counts its own ratio in the compute row, below 1 too: a 3g.40gb replica takes 4/8 of a GPU's
    memory but only 3/7 of its compute, so beside 1g.10gb ones (1/8 memory, 1/7 compute) counting it as
    a whole node-equivalent of compute would cut off the layout 3g.40gb + 4 x 1g.10gb that a plan uses
    (found by the property tests: a bound $1 above a $57.60 plan)."""
    if not any(ratio.get(var.name, 1.0) > 1.0 for var, _coef in users):
        return None
    return [(var, coef * ratio.get(var.name, 1.0)) for var, coef in users]


def _start_variants(first: int, end: int, periods: int, block: int) -> list[tuple[int, int, int, int]]:
    """Every way a run of ``periods`` can sit in its window [first, end), at block resolution.

    Returns (start block, last block, lowest offset, highest offset): the start offset inside the start
    block ranges over [lo, hi] with the same last block, so the hours in the first and last block are
    linear in the offset.
    """
    variants = []
    last_start = end - periods
    for b0 in range(first // block, last_start // block + 1):
        lo = max(first, b0 * block) - b0 * block
        hi = min(last_start, b0 * block + block - 1) - b0 * block
        if lo > hi:
            continue
        cut = lo
        while cut <= hi:
            last = b0 + (cut + periods - 1) // block
            # the largest offset that still ends in block ``last``
            top = min(hi, (last - b0 + 1) * block - periods)
            variants.append((b0, last, cut, top))
            cut = top + 1
    return variants
