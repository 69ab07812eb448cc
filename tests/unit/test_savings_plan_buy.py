"""Buying savings plans (issue 38, point 1): the plan decides the USD per hour at each purchase step.

Each case has its optimum in closed form. A savings plan of S $/h at rate r per node-hour against the
on-demand price c covers min(U, S / r) nodes an hour: raising S by r (one more node's worth) pays r every
hour and saves c in each hour the usage reaches that level, so the optimal S covers every level used in at
least a share r / c of the hours (the newsvendor rule); with a reservation at R per node-hour on offer, a
level used every hour goes to whichever of r and R is cheaper. Every figure below is computed from that,
not read from the planner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sp_kit import P5, START, sp_term

from models.inputs import Inputs, load_inputs
from models.plan import Plan
from models.priceterms import terms_path_for, write_terms
from models.tiers import Term, Tier
from planner.planning.optimize import SolveSettings, optimize
from planner.planning.optimize.savings_purchase import buy_savings_plans
from planner.planning.problem.sets import build_sets
from planner.verify import verify

HOURS = 48
C_OD, RATE = 10.0, 6.0


def _inputs(kit: Any, directory: Path, usage: list[int], *, reserved: float | None = None,
            buy: tuple[str, ...] = ("compute",), terms: tuple[str, ...] = ("1y",),
            rate: float = RATE, held: list | None = None) -> Inputs:  # fmt: skip
    """p5 (8 H100) in us-east-1 at $10/h, one latency-critical service of one node per replica whose
    replicas follow ``usage`` hour by hour; a Compute savings plan rate ``rate`` for p5 (1y), and a 1y
    reservation at ``reserved`` if given."""
    directory.mkdir(parents=True, exist_ok=True)
    row = kit.offering_row(on_demand_usd_h=C_OD, **({"reserved_1y_usd_h": reserved} if reserved else {}))
    path = kit.write_catalog_csv(directory / "catalog.csv", [row])
    write_terms([sp_term(P5, "savings-plan-compute", 1, rate)], terms_path_for(path))
    kit.write_demand_csv(directory / "chat.csv", usage)
    chat = {"name": "chat", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
            "latency_critical": True, "replicas": {"csv": "chat.csv"}}  # fmt: skip
    data = kit.scenario_dict(hours=HOURS, start=START, inference=[chat], terms=list(terms))
    data["purchase"]["savings_plans"] = list(buy)
    data["savings_plans"] = held or []
    return load_inputs(kit.write_scenario_yaml(directory / "s.yaml", data))


def _plan(inputs: Inputs, method: str = "staged") -> Plan:
    return optimize(inputs.scenario, inputs.catalog, inputs.base_dir,
                    SolveSettings(time_limit=30, method=method))  # fmt: skip


def _newsvendor(usage: list[int], c: float, r: float) -> float:
    """The optimal plan, USD per hour: r x the highest level reached in at least a share r / c of hours."""
    levels = [k for k in range(1, max(usage) + 1) if np.mean(np.array(usage) >= k) >= r / c]
    return r * max(levels, default=0)


def _bill(usage: list[int], s: float, r: float = RATE, c: float = C_OD) -> float:
    """Hour by hour: the plan's S every hour, and on demand what S / r nodes do not cover."""
    return sum(s + max(0.0, u - s / r) * c for u in usage)


FLAT = [3] * HOURS
LOW_PEAK = [2] * 36 + [4] * 12  # the two extra nodes run 25 % of the hours: under r / c = 60 %
HIGH_PEAK = [2] * 12 + [4] * 36  # ... 75 % of the hours: over it


@pytest.mark.parametrize("usage", [FLAT, LOW_PEAK, HIGH_PEAK], ids=["flat", "low-peak", "high-peak"])
@pytest.mark.parametrize("method", ["staged", "hourly"])
def test_the_amount_bought_is_the_newsvendor_level(kit, tmp_path: Path, usage: list[int], method: str):
    plan = _plan(_inputs(kit, tmp_path, usage), method)
    expected = _newsvendor(usage, C_OD, RATE)
    assert expected in (18.0, 12.0, 24.0)
    (bought,) = plan.document.savings_plans
    assert not bought.existing and bought.kind == "savings-plan-compute" and bought.term == "1y"
    assert bought.usd_per_hour == pytest.approx(expected)
    assert bought.cost_in_horizon_usd == pytest.approx(expected * HOURS)
    assert bought.obligation_beyond_horizon_usd == pytest.approx(expected * (8760 - HOURS))
    assert plan.document.costs.total_usd == pytest.approx(_bill(usage, expected))
    # the bill is the cheapest over every amount (a brute force on a $0.5/h grid)
    assert min(_bill(usage, s) for s in np.arange(0.0, 30.0, 0.5)) == pytest.approx(_bill(usage, expected))
    rows = plan.allocations
    covered = rows[rows["tier"] == Tier.SAVINGS_PLAN].groupby("period")["nodes"].sum()
    assert covered.reindex(range(HOURS), fill_value=0.0).tolist() == pytest.approx(
        [min(u, expected / RATE) for u in usage]
    )


def test_a_plan_that_never_pays_is_not_bought(kit, tmp_path: Path) -> None:
    """A rate above what the hours used can repay: r = $9.5 on a load at 2 nodes, 4 for 12 h (25 %)."""
    plan = _plan(_inputs(kit, tmp_path, [0] * 36 + [2] * 12, rate=9.5))
    assert plan.document.savings_plans == []
    assert plan.document.costs.total_usd == pytest.approx(2 * 12 * C_OD)
    assert any("savings plans: none pays" in note for note in plan.document.solver.notes)


@pytest.mark.parametrize("method", ["staged", "hourly"])
@pytest.mark.parametrize(("reserved", "plan_usd", "nodes_reserved"), [(5.0, 0.0, 3), (7.0, 18.0, 0)])
def test_reservations_and_plans_are_weighed_together(
    kit, tmp_path, reserved, plan_usd, nodes_reserved, method
):
    """A flat 3 nodes: a 1y reservation at $5 beats the $6 plan rate (3 reserved, no plan); at $7 the
    plan wins (S = 3 x 6 = $18/h, nothing reserved)."""
    plan = _plan(_inputs(kit, tmp_path, FLAT, reserved=reserved), method)
    doc = plan.document
    assert sum(c.nodes for c in doc.commitments) == nodes_reserved
    assert sum(sp.usd_per_hour for sp in doc.savings_plans) == pytest.approx(plan_usd)
    assert doc.costs.total_usd == pytest.approx(3 * min(reserved, RATE) * HOURS)


def test_verify_rebills_a_bought_plan_and_finds_each_corruption(kit, tmp_path: Path) -> None:
    inputs = _inputs(kit, tmp_path, HIGH_PEAK)
    plan = _plan(inputs)
    assert verify(inputs, plan).ok

    def corrupted(change: dict[str, Any]) -> set[str]:
        doc = plan.document.model_copy(deep=True)
        doc.savings_plans[0] = doc.savings_plans[0].model_copy(update=change)
        return {kind for kind, _n in verify(inputs, Plan(doc, plan.allocations)).counts.items()}

    assert "savings-plan-budget" in corrupted({"usd_per_hour": 6.0})
    assert "savings-plan-purchase" in corrupted({"rates": {P5: 5.0}})
    start = plan.document.savings_plans[0].start
    assert "savings-plan-purchase" in corrupted({"start": start.replace(hour=5)})
    assert "savings-plan-cost" in corrupted({"cost_in_horizon_usd": 1.0})
    assert "savings-plan-purchase" in corrupted({"term": Term.THREE_YEARS})


def test_the_purchase_lp_equals_the_closed_form_on_many_loads(kit, tmp_path: Path) -> None:
    """The LP alone (``buy_savings_plans``) on random hourly loads: its amount is the newsvendor level."""
    inputs = _inputs(kit, tmp_path, FLAT)
    sets = build_sets(inputs.scenario, inputs.catalog, inputs.base_dir)
    (k,) = sets.new_plans
    rng = np.random.default_rng(7)
    for _ in range(20):
        usage = rng.integers(0, 8, HOURS).tolist()
        found = buy_savings_plans(sets, np.array([usage], dtype=float))
        assert found.chosen.get(k, 0.0) == pytest.approx(_newsvendor(usage, C_OD, RATE), abs=1e-3)
        assert found.saving_usd == pytest.approx(_bill(usage, 0.0) - _bill(usage, found.chosen.get(k, 0.0)))


def test_the_daemon_holds_what_a_previous_plan_bought(kit, tmp_path: Path) -> None:
    """A re-plan after the plan's first purchase step holds the savings plan bought there (as scenario
    ``savings_plans:``), paid and covering as before, and buys nothing more for the same load."""
    from datetime import timedelta

    from planner.operations.daemon.config import DaemonConfig
    from planner.operations.daemon.daemon import plan_scenario

    inputs = _inputs(kit, tmp_path, FLAT)
    first = _plan(inputs)
    (bought,) = first.document.savings_plans
    config = DaemonConfig(scenario=Path("s.yaml"), plan_time_limit=30, base=tmp_path)
    again = Plan.read(plan_scenario(config, first, bought.start + timedelta(hours=1), {}))
    (held,) = again.document.savings_plans
    assert held.existing and (held.name, held.kind, held.term, held.start) == (
        bought.name, bought.kind, bought.term, bought.start,
    )  # fmt: skip
    assert held.usd_per_hour == pytest.approx(bought.usd_per_hour)
    assert again.document.costs.total_usd == pytest.approx(first.document.costs.total_usd)


@pytest.mark.parametrize("usage", [FLAT, LOW_PEAK, HIGH_PEAK], ids=["flat", "low-peak", "high-peak"])
def test_the_cloud_recommendation_peer_buys_the_lookback_level(kit, tmp_path: Path, usage: list[int]):
    """The savings-plan peer (AWS Cost Explorer's recommendation): over a lookback longer than this 48 h
    horizon it sees every hour, so it buys the newsvendor level too and costs what the plan costs."""
    plan = _plan(_inputs(kit, tmp_path, usage))
    (peer,) = [p for p in plan.document.baselines.peers if p.policy == "savings_plan"]
    level = _newsvendor(usage, C_OD, RATE)
    assert f"${level:,.3f}/h" in peer.how
    assert peer.total_usd == pytest.approx(_bill(usage, level))
    assert peer.obligation_beyond_horizon_usd == pytest.approx(level * (8760 - HOURS))
    assert plan.document.costs.total_usd <= peer.total_usd + 1e-6
    assert plan.document.baselines.all_on_demand_usd == pytest.approx(sum(usage) * C_OD)


def test_the_recommendation_level_is_the_best_amount_on_two_offerings() -> None:
    """``savings_plan_level`` against a brute force over every amount on a $0.01/h grid: two offerings at
    different discounts (p5 $10 -> $6, p4 $6 -> $4.5), random hourly nodes, beside a held plan."""
    from models.savingsplans import SavingsPlan, bill_hours
    from planner.planning.baselines import savings_plan_level

    rng = np.random.default_rng(11)
    prices = {"p5": 10.0, "p4": 6.0}
    rates = {"p5": 6.0, "p4": 4.5}
    held = [SavingsPlan("held", "savings-plan-compute", 5.0, rates)]
    for _ in range(5):
        usage = {"p5": rng.integers(0, 5, 72).astype(float), "p4": rng.integers(0, 5, 72).astype(float)}
        template = SavingsPlan("peer", "savings-plan-compute", 0.0, rates)
        level = savings_plan_level(usage, prices, template, held)

        def cost(amount: float, usage=usage) -> float:
            trial = SavingsPlan("peer", "savings-plan-compute", amount, rates)
            return bill_hours(usage, prices, [*held, trial]).total_usd

        assert cost(level) <= min(cost(a) for a in np.arange(0.0, 60.0, 0.01)) + 1e-6


def test_every_peer_holds_the_fleets_savings_plans(kit, tmp_path: Path) -> None:
    """A held $12/h plan at $6/h covers 2 of the 3 on-demand nodes: all on-demand pays the plan and the
    third node, $12 + $10 an hour, not $12 + 3 x $10."""
    from sp_kit import held

    inputs = _inputs(kit, tmp_path, FLAT, buy=(), held=[held(usd_per_hour=12.0)])
    plan = _plan(inputs)
    assert plan.document.baselines.all_on_demand_usd == pytest.approx((12.0 + 10.0) * HOURS)
    assert not [p for p in plan.document.baselines.peers if p.policy == "savings_plan"]


def test_chargeback_splits_a_bought_plan_to_the_cent(kit, tmp_path: Path) -> None:
    """A bought plan is charged as a held one: the team's months add up to the plan's total under both idle
    rules, the plan's dollars among them."""
    from models.chargeback import IdleRule, charge_plan

    plan = _plan(_inputs(kit, tmp_path, HIGH_PEAK))
    assert plan.document.savings_plans and not plan.document.savings_plans[0].existing
    for rule in (IdleRule.GUARANTEES, IdleRule.USAGE):
        result = charge_plan(plan, rule)
        assert result.total_usd == pytest.approx(plan.document.costs.total_usd, abs=0.01)
