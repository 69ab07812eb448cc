"""Own servers or rent? The cloud side of the comparison comes from the planner, not from a list price.

``gpuplan breakeven`` plans the scenario three ways:
  1. **cloud only**: the scenario without its ``colocation`` section: the optimal cloud plan and its cost
     per month (commitments included): what owning has to beat;
  2. **how many to own** (skipped with ``--nodes``): the scenario as written, where owned nodes are a tier
     at their amortized cost (``models/tco.py``); N is the number of nodes that plan buys;
  3. **owning N**: the same fleet with exactly N owned nodes already paid for (their tier priced at ~0, so
     the planner uses them wherever they displace cloud spend), which gives the cloud bill that remains
     and how busy the owned nodes are (their utilization, which drives energy and the sensitivity).
``models.tco.evaluate`` turns (1) and (3) into cumulative cost curves over the nodes' depreciation
life, the break-even month and the NPV at the cost of capital; a unit grid and a tornado complete it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from models.breakeven import BreakevenDocument, Comparator, PlanRef
from models.catalog import Catalog
from models.errors import InputError
from models.inputs import Inputs
from models.plan import Plan
from models.scenario import Colocation, Scenario
from models.tco import OwnershipCase, breakeven_data
from models.tiers import HOURS_PER_MONTH, Term, Tier
from planner.planning.monthly import monthly_by_tier
from planner.planning.sweeps import Engine, Failure, make_job

#: Price of an owned node-hour once bought (sunk): small but positive so idle nodes are not "used".
SUNK_USD_PER_NODE_HOUR = 1e-4


#: What each plan of a break-even is, for every line that prints one (issue 42: "owning: $140,250" said
#: nothing of what the figure was).
PLAN_NAMES: Final = {
    "cloud-only": "cloud-only plan (no owned nodes)",
    "optimal": "optimal plan (owned nodes as a tier, at their amortized cost)",
    "owning": "owning plan (the owned nodes already paid for: the cloud cost beside them)",
}


def _sunk(colocation: Colocation, nodes: int) -> Colocation:
    """The same nodes, N of them, with their cost already paid (what is left is using them or not)."""
    return colocation.model_copy(
        update={
            "max_nodes": nodes,
            "capex_per_node_usd": SUNK_USD_PER_NODE_HOUR * HOURS_PER_MONTH * colocation.depreciation_months,
            "residual_value_pct": 0.0,
            "cost_of_capital_pct_per_year": 0.0,
            "support_pct_per_year": 0.0,
            "colo_usd_per_kw_month": 0.0,
            "power_usd_per_kwh": 0.0,
        }
    )


def comparator(catalog: Catalog, scenario: Scenario, colocation: Colocation) -> Comparator:
    """The cloud node that matches the owned one (same GPU model and count), cheapest on demand, in the
    clouds the scenario allows (else anywhere in the catalog): the unit comparison of the grid."""
    same = [
        o
        for o in catalog
        if o.gpu_model == colocation.gpu_model
        and o.gpus_per_node == colocation.gpus_per_node
        and o.on_demand_usd_h is not None
    ]
    allowed = [o for o in same if o.cloud in scenario.clouds] or same
    if not allowed:
        return Comparator(offering=None)
    best = min(allowed, key=lambda o: o.on_demand_usd_h or 0.0)
    return Comparator(
        offering=best.id,
        on_demand_usd_h=best.on_demand_usd_h,
        reserved_1y_usd_h=best.reserved_1y_usd_h,
        reserved_3y_usd_h=best.reserved_3y_usd_h,
    )


def _monthly_total(plan: Plan, without: Tier | None = None) -> list[float]:
    frame = monthly_by_tier(plan)
    if without is not None and without in frame.columns:
        frame = frame.drop(columns=[without])
    return [float(x) for x in frame.sum(axis=1)]


def owned_nodes(plan: Plan) -> int:
    return sum(c.nodes for c in plan.document.commitments if c.term == Term.OWNED)


def owned_utilization(plan: Plan, nodes: int, colocation: Colocation) -> float:
    """Share of the N owned nodes' usable hours (after the lead time) that run work in the plan."""
    horizon = plan.document.horizon
    usable = max(0.0, float(horizon.hours) - colocation.lead_time_months * HOURS_PER_MONTH)
    if nodes <= 0 or usable <= 0:
        return 0.0
    alloc = plan.allocations
    used = float(alloc.loc[alloc["tier"] == Tier.OWNED, "nodes"].sum()) * float(horizon.period_hours)
    return min(1.0, used / (nodes * usable))


def planner_on(
    engine: Engine, inputs: Inputs, settings: Any, out_dir: Path, say: Callable[[str], None] = lambda _m: None
) -> Callable[[dict[str, Scenario]], dict[str, Plan]]:
    """The ``plan`` of :func:`analyse` on ``engine``: each plan written to ``out_dir/plans/<label>/`` here
    as it finishes; the first failure is raised once the others have ended (break-even needs them all)."""

    def plan(scenarios: dict[str, Scenario]) -> dict[str, Plan]:
        labels = list(scenarios)
        jobs = [
            make_job(label, s, inputs.catalog, inputs.base_dir, settings) for label, s in scenarios.items()
        ]
        plans: dict[str, Plan] = {}

        def done(index: int, outcome: Plan | Failure) -> None:
            if isinstance(outcome, Failure):
                say(f"{labels[index]}: failed ({outcome.message})")
                return
            name = PLAN_NAMES.get(labels[index], labels[index])
            gap = outcome.document.solver.gap
            say(f"{name}: ${outcome.total_usd:,.0f} over the horizon, certified gap {gap:.1%}")
            target = out_dir / "plans" / labels[index]
            target.mkdir(parents=True)
            outcome.write(target)
            plans[labels[index]] = outcome

        outcomes = engine.run(jobs, done)
        failed = next((o for o in outcomes if isinstance(o, Failure)), None)
        if failed is not None:
            raise failed.error()
        return {label: plans[label] for label in labels}

    return plan


def analyse(
    inputs: Inputs,
    plan: Callable[[dict[str, Scenario]], dict[str, Plan]],
    nodes: int | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> tuple[BreakevenDocument, dict[str, Plan]]:
    """The breakeven.json document and the plans behind it (``cloud-only``, ``owning``, maybe ``optimal``).

    ``plan({label: scenario, ...})`` solves scenarios that do not depend on each other (the CLI passes
    an engine of ``planner/planning/sweeps.py`` with the user's settings): cloud-only goes with the optimal
    plan, or with owning when ``nodes`` is given; owning waits for the optimal plan's N otherwise.
    """
    scenario = inputs.scenario
    colocation = scenario.colocation
    if colocation is None:
        if nodes is None:
            raise InputError(
                None,
                "colocation",
                "the scenario has no colocation section: add one (see scenarios/colocation-decision.yaml), "
                "or give --nodes N to compare owning N nodes with the documented defaults",
            )
        colocation = Colocation(max_nodes=max(1, nodes))
    cloud_only = scenario.model_copy(update={"colocation": None})
    nodes_from = "--nodes"
    if nodes is None:
        say("planning cloud only (no owned nodes), and with owned nodes as a tier at their amortized cost")
        plans = plan(
            {"cloud-only": cloud_only, "optimal": scenario.model_copy(update={"colocation": colocation})}
        )
        nodes = owned_nodes(plans["optimal"])
        nodes_from = "plan"
        if nodes == 0:
            nodes = colocation.max_nodes
            nodes_from = "max_nodes (the optimal plan buys none)"
        say(f"planning with {nodes} owned node(s) already paid for")
        plans.update(plan({"owning": scenario.model_copy(update={"colocation": _sunk(colocation, nodes)})}))
    else:
        say(f"planning cloud only (no owned nodes), and with {nodes} owned node(s) already paid for")
        sunk = scenario.model_copy(update={"colocation": _sunk(colocation, nodes)})
        plans = plan({"cloud-only": cloud_only, "owning": sunk})
    case = OwnershipCase(
        colo=colocation,
        nodes=nodes,
        cloud_only_usd=tuple(_monthly_total(plans["cloud-only"])),
        cloud_with_owned_usd=tuple(_monthly_total(plans["owning"], without=Tier.OWNED)),
        utilization=owned_utilization(plans["owning"], nodes, colocation),
    )
    data = breakeven_data(
        case,
        scenario=scenario.name,
        nodes_from=nodes_from,
        comparator=comparator(inputs.catalog, scenario, colocation),
    )
    data.plans = {
        label: PlanRef(
            total_usd=p.total_usd, owned_nodes=owned_nodes(p), dir=f"plans/{label}", gap=p.document.solver.gap
        )
        for label, p in plans.items()
    }
    return data, plans
