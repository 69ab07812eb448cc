"""Capacity Blocks under the upfront cash limit (issue 38 points 2 and 4): a block's fee is upfront cash, paid
whole in the window its block starts, so ``purchase.max_upfront_usd`` limits it as it limits commitments'
fees (``planner/planning/optimize/payments.py``).

Two gangs, one offering sold on demand (C_OD per node-hour) and in Capacity Blocks (rate B), no commitment
terms, both runs inside January. Gang g (n_g nodes, h_g hours) costs n_g C_OD h_g on demand, or the fee
B n_g sold(h_g) in a block. With a monthly limit L the optimum is, by brute force over which gangs get a
block,

    min_{S : sum_{g in S} fee_g <= L}  sum_{g in S} fee_g + sum_{g not in S} n_g C_OD h_g

Both methods (staged and hourly) must find it, the cap exactly at a fee fits and a cent below does not, and
``gpuplan verify`` re-counts the blocks' fees against the limit.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models.capacity_blocks import block_duration_hours
from models.inputs import load_inputs
from models.plan import Plan
from models.priceterms import PriceTerm, terms_path_for, write_terms
from models.tiers import HOURS_PER_YEAR, Capacity, Tier
from planner.planning.optimize import optimize
from planner.planning.optimize.payments import (
    block_cash_rows,
    block_room,
    blocks_over_cap,
    fees_by_window,
)
from planner.planning.problem.sets import build_sets
from planner.verify import verify

C_OD = 10.0
B = 6.0  # a block saves 40 % here: every gang wants one
P5 = "aws:us-east-1:p5.48xlarge"
GANGS = {"big": (2, 120), "small": (1, 72)}  # name -> nodes, hours (5 and 3 days: sold as they are)


def fee(name: str) -> float:
    nodes, hours = GANGS[name]
    sold = block_duration_hours(hours)
    assert sold == hours
    return B * nodes * sold


def on_demand(name: str) -> float:
    nodes, hours = GANGS[name]
    return nodes * C_OD * hours


def brute_force(cap: float) -> tuple[float, set[str]]:
    """The cheapest choice of blocks whose fees fit the cap (module docstring)."""
    best: tuple[float, set[str]] | None = None
    for chosen in itertools.product([False, True], repeat=len(GANGS)):
        blocks = {name for name, take in zip(GANGS, chosen, strict=True) if take}
        if sum(fee(name) for name in blocks) > cap:
            continue
        cost = sum(fee(name) if name in blocks else on_demand(name) for name in GANGS)
        if best is None or cost < best[0] - 1e-9:
            best = (cost, blocks)
    assert best is not None
    return best


def _inputs(tmp_path: Path, kit: Any, cap: float | None) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    row = kit.offering_row(on_demand_usd_h=C_OD, capacity_block_usd_h=B)
    kit.write_catalog_csv(tmp_path / "catalog.csv", [row])
    training = [
        {
            "name": name,
            "team": "t",
            "gpu_models": ["H100"],
            "gpus_per_node": 8,
            "nodes": nodes,
            "hours": hours,
        }
        for name, (nodes, hours) in GANGS.items()
    ]
    # daily periods, a week from 2027-01-04: both blocks start in January
    data = kit.scenario_dict(hours=168, period_hours=24, terms=[], training=training)
    data["purchase"]["capacity_blocks"] = True
    if cap is not None:
        data["purchase"]["max_upfront_usd"] = {"per": "month", "usd": cap}
    return kit.write_scenario_yaml(tmp_path / "scenario.yaml", data)


def _plan(path: Path, kit: Any, method: str = "staged") -> Plan:
    inputs = load_inputs(path)
    return optimize(inputs.scenario, inputs.catalog, inputs.base_dir, kit.exact_settings(method=method))


def _blocks(plan: Plan) -> set[str]:
    return {p.job for p in plan.document.training if p.tier == Tier.CAPACITY_BLOCK}


CAPS = {
    "none fits": 100.0,
    "the small one exactly": fee("small"),
    "a cent below the small one": fee("small") - 0.01,
    "the big one exactly": fee("big"),
    "a cent below the big one": fee("big") - 0.01,
    "a cent below both": fee("big") + fee("small") - 0.01,
    "both exactly": fee("big") + fee("small"),
}


@pytest.mark.parametrize("case", list(CAPS))
def test_the_blocks_chosen_are_the_brute_force_optimum_under_the_cap(
    tmp_path: Path, kit: Any, case: str
) -> None:
    cap = CAPS[case]
    cost, blocks = brute_force(cap)
    plan = _plan(_inputs(tmp_path, kit, cap), kit)
    assert _blocks(plan) == blocks
    assert plan.document.costs.total_usd == pytest.approx(cost)
    assert sum(fee(name) for name in _blocks(plan)) <= cap
    # the certified bound stays valid: at most the plan's cost (here the optimum, so equal)
    assert plan.document.solver.bound_usd <= plan.document.costs.total_usd + 1e-6
    january = next(m for m in plan.document.costs.cash_by_month or [] if m.month == "2027-01")
    assert january.upfront_usd == pytest.approx(sum(fee(name) for name in blocks))


def test_the_cases_tell_the_choices_apart() -> None:
    """The brute force itself: without the limit both gangs take a block; a cent below a fee drops it."""
    assert brute_force(1e12)[1] == {"big", "small"}
    assert brute_force(fee("big"))[1] == {"big"}  # one block fits, two do not
    assert brute_force(fee("big") - 0.01)[1] == {"small"}
    assert brute_force(fee("small") - 0.01)[1] == set()


@pytest.mark.parametrize("case", ["the big one exactly", "a cent below the big one"])
def test_the_hourly_method_keeps_the_cap_too(tmp_path: Path, kit: Any, case: str) -> None:
    """The cluster model (``bound.py``) and the placement heuristics keep the blocks' fees in the limit."""
    cap = CAPS[case]
    cost, blocks = brute_force(cap)
    plan = _plan(_inputs(tmp_path, kit, cap), kit, method="hourly")
    assert _blocks(plan) == blocks
    assert plan.document.costs.total_usd == pytest.approx(cost)
    assert plan.document.solver.bound_usd <= plan.document.costs.total_usd + 1e-6


def test_verify_catches_blocks_over_the_cap(tmp_path: Path, kit: Any) -> None:
    """A plan whose two blocks fit its limit, checked against the same scenario with the limit a cent below
    their fees: only ``upfront-cap``, naming the window and both figures."""
    cap = fee("big") + fee("small")
    plan = _plan(_inputs(tmp_path / "a", kit, cap), kit)
    assert _blocks(plan) == {"big", "small"}
    assert _findings(load_inputs(_inputs(tmp_path / "a", kit, cap)), plan) == {}
    found = _findings(load_inputs(_inputs(tmp_path / "b", kit, cap - 0.01)), plan)
    assert list(found) == ["upfront-cap"]
    (message,) = found["upfront-cap"]
    assert message.startswith(f"2027-01: upfront fees ${cap:,.2f}, above purchase.max_upfront_usd")
    assert f"${cap - 0.01:,.2f}" in message


def _findings(inputs: Any, plan: Plan) -> dict[str, list[str]]:
    return {group.kind: [v.message for v in group.examples] for group in verify(inputs, plan).summary()}


def test_the_commitments_split_gets_the_limit_less_the_blocks_fees(tmp_path: Path, kit: Any) -> None:
    """A flat load of 3 p5 nodes reserved for 1 year (by the hour at $6, or all upfront at $43,800 a node:
    effective $5) and a 1-node 24 h gang in a block ($6 x 24 = $144, below $240 on demand). Under a limit of
    two fees plus $100 the block is bought first, so only one node can be paid all upfront
    (floor((2 x 43,800 + 100 - 144) / 43,800) = 1), where the limit alone would have allowed two; verify
    finds nothing over the limit."""
    all_upfront = 5.0 * HOURS_PER_YEAR
    cap = 2 * all_upfront + 100.0
    path = kit.write_catalog_csv(
        tmp_path / "catalog.csv",
        [kit.offering_row(on_demand_usd_h=10.0, reserved_1y_usd_h=6.0, capacity_block_usd_h=6.0)],
    )
    term = PriceTerm(P5, "reserved-instance", 1, "standard", "all-upfront", 0.0, all_upfront, "", "test",  # type: ignore[arg-type]
                     datetime(2026, 12, 1, tzinfo=UTC), "assumed")  # fmt: skip
    write_terms([term], terms_path_for(path))
    chat = {"name": "chat", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
            "latency_critical": True, "replicas": {"profile": "flat", "base": 3}}  # fmt: skip
    gang = {"name": "gang", "team": "t", "gpu_models": ["H100"], "gpus_per_node": 8, "nodes": 1, "hours": 24}
    data = kit.scenario_dict(hours=48, inference=[chat], training=[gang], terms=["1y"], max_spot_share=0)
    data["purchase"] |= {"schedule": "horizon", "capacity_blocks": True}
    data["purchase"]["max_upfront_usd"] = {"per": "month", "usd": cap}
    inputs = load_inputs(kit.write_scenario_yaml(tmp_path / "s.yaml", data))
    plan = optimize(inputs.scenario, inputs.catalog, inputs.base_dir, kit.exact_settings())
    doc = plan.document
    assert _blocks(plan) == {"gang"}
    assert {c.payment: c.nodes for c in doc.commitments} == {"all-upfront": 1, "no-upfront": 2}
    (january,) = doc.costs.cash_by_month or []
    assert january.upfront_usd == pytest.approx(144.0 + all_upfront) and january.upfront_usd <= cap
    assert doc.costs.total_usd == pytest.approx(144.0 + (5.0 + 2 * 6.0) * 48)
    assert verify(inputs, plan).total == 0


def test_the_windows_count_each_block_where_it_starts(tmp_path: Path, kit: Any) -> None:
    """``payments``: the block options' cash rows, the fees placed blocks pay per window (what the savings
    plans' upfront is limited by, less), and where a block may still start: by the window of its start."""
    cap = fee("big")
    inputs = load_inputs(_inputs(tmp_path, kit, cap))
    sets = build_sets(inputs.scenario, inputs.catalog, inputs.base_dir)
    blocks = [o for o in sets.options if o.tier == Capacity.BLOCK]
    assert {sets.runs[o.run].job.name for o in blocks} == set(GANGS)
    rows = block_cash_rows(sets)
    assert list(rows) == ["2027-01"] and sorted(f for _a, f in rows["2027-01"]) == sorted(map(fee, GANGS))
    big = next(o for o in blocks if sets.runs[o.run].job.name == "big")
    small = next(o for o in blocks if sets.runs[o.run].job.name == "small")
    assert fees_by_window(sets, {}, [big, small]) == {"2027-01": pytest.approx(cap + fee("small"))}
    assert blocks_over_cap(sets, [big]) == [] and len(blocks_over_cap(sets, [big, small])) == 1
    fees = np.zeros(sets.scenario.horizon.periods)
    fees[big.start] = fee("big")  # the big block placed: no room left in January for the small one
    room = block_room(sets, fees, small)
    assert room is not None and not room.any()
    assert block_room(sets, np.zeros_like(fees), small) is not None
    assert bool(block_room(sets, np.zeros_like(fees), small).all())  # type: ignore[union-attr]


def test_the_savings_plans_upfront_gets_the_limit_less_the_blocks_fees(tmp_path: Path, kit: Any) -> None:
    """A flat load of 3 p5 nodes, a 1y Compute savings plan paid by the hour ($6 a node-hour) or partly
    upfront ($5.2, half of its whole commitment at purchase: $22,776 a node), and a 1-node 24 h gang in a
    block ($4 x 24 = $96, below any other way to run it). Under a limit of one node's partial fee plus the
    block's, the block is paid first and the partial plan covers exactly one node ($5.2/h); the limit alone
    would have allowed a little more. ``verify`` finds nothing over the limit."""
    partial_fee = 0.5 * 5.2 * HOURS_PER_YEAR
    block = 4.0 * 24
    path = kit.write_catalog_csv(
        tmp_path / "catalog.csv", [kit.offering_row(on_demand_usd_h=10.0, capacity_block_usd_h=4.0)]
    )
    write_terms([_plan_term("no-upfront", 6.0), _plan_term("partial-upfront", 5.2)], terms_path_for(path))
    chat = {"name": "chat", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
            "latency_critical": True, "replicas": {"profile": "flat", "base": 3}}  # fmt: skip
    gang = {"name": "gang", "team": "t", "gpu_models": ["H100"], "gpus_per_node": 8, "nodes": 1, "hours": 24}
    data = kit.scenario_dict(hours=48, inference=[chat], training=[gang], terms=["1y"], max_spot_share=0)
    data["purchase"] |= {"schedule": "horizon", "capacity_blocks": True, "savings_plans": ["compute"]}
    data["purchase"]["max_upfront_usd"] = {"per": "month", "usd": partial_fee + block}
    inputs = load_inputs(kit.write_scenario_yaml(tmp_path / "s.yaml", data))
    plan = optimize(inputs.scenario, inputs.catalog, inputs.base_dir, kit.exact_settings())
    assert _blocks(plan) == {"gang"}
    bought = {sp.payment: sp.usd_per_hour for sp in plan.document.savings_plans if not sp.existing}
    assert bought["partial-upfront"] == pytest.approx(5.2, abs=1e-3)
    (january,) = plan.document.costs.cash_by_month or []
    assert january.upfront_usd <= partial_fee + block + 1e-6
    assert verify(inputs, plan).total == 0


def _plan_term(payment: str, rate: float) -> PriceTerm:
    return PriceTerm(P5, "savings-plan-compute", 1, "", payment, rate, 0.0, "", "test",  # type: ignore[arg-type]
                     datetime(2026, 12, 1, tzinfo=UTC))  # fmt: skip
