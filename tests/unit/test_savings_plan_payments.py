"""Savings plans paid no, partial or all upfront (issue 38, point 2): each payment option has its own rates,
a partial plan pays half of its whole commitment at purchase and an all-upfront plan all of it; the plan
takes the option that covers most per dollar, under ``purchase.max_upfront_usd`` the mix the limit allows.

One offering at $10/h on demand, a flat load of 3 nodes for 48 hours, a 1y Compute savings plan. A dollar
per hour committed costs a dollar per hour whichever way it is paid, so covering a node costs its rate r
per hour and, paid upfront, a fee of share x r x 8,760. Every expected figure below is that closed form
(a fractional knapsack: the option saving most per dollar of fee first), not read from the planner."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sp_kit import P5, START

from models.errors import InputError
from models.inputs import Inputs, load_inputs
from models.plan import Plan
from models.priceterms import PriceTerm, terms_path_for, write_terms
from models.tiers import HOURS_PER_YEAR
from planner.outputs.reports.plan import render_markdown
from planner.planning.optimize import SolveSettings, optimize
from planner.verify import verify

HOURS, NODES, OD = 48, 3, 10.0
NO, PARTIAL, ALL = 6.0, 5.2, 5.0  # the plan's rate per node-hour for each payment option
FEE_SHARE = {"no-upfront": 0.0, "partial-upfront": 0.5, "all-upfront": 1.0}


def _term(payment: str, rate: float) -> PriceTerm:
    return PriceTerm(P5, "savings-plan-compute", 1, "", payment, rate, 0.0, "", "test",  # type: ignore[arg-type]
                     datetime(2026, 12, 1, tzinfo=UTC))  # fmt: skip


def _inputs(kit: Any, directory: Path, rates: dict[str, float], cap: float | None = None,
            held: list[dict[str, Any]] | None = None) -> Inputs:  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    path = kit.write_catalog_csv(directory / "catalog.csv", [kit.offering_row(on_demand_usd_h=OD)])
    write_terms([_term(payment, rate) for payment, rate in rates.items()], terms_path_for(path))
    chat = {"name": "chat", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
            "latency_critical": True, "replicas": {"profile": "flat", "base": NODES}}  # fmt: skip
    data = kit.scenario_dict(hours=HOURS, start=START, inference=[chat], terms=["1y"], max_spot_share=0)
    data["purchase"].update(schedule="horizon", savings_plans=["compute"])
    if cap is not None:
        data["purchase"]["max_upfront_usd"] = {"per": "month", "usd": cap}
    data["savings_plans"] = held or []
    return load_inputs(kit.write_scenario_yaml(directory / "s.yaml", data))


def _plan(inputs: Inputs, method: str = "staged") -> Plan:
    return optimize(
        inputs.scenario, inputs.catalog, inputs.base_dir, SolveSettings(time_limit=30, method=method)
    )


def _closed_form(cap: float) -> dict[str, float]:
    """Nodes covered per option with fees of at most ``cap``: partial saves 0.8 a node-hour for a fee of
    0.5 x 5.2 x 8,760 = $22,776 (3.5e-5 per dollar), all upfront 1.0 for $43,800 (2.3e-5): partial first;
    once all 3 nodes are partial, turning one into all upfront saves 0.2 more for $21,024 more."""
    fee_partial = 0.5 * PARTIAL * HOURS_PER_YEAR
    fee_all = ALL * HOURS_PER_YEAR
    if cap <= NODES * fee_partial:
        partial, full = cap / fee_partial, 0.0
    else:
        full = min(float(NODES), (cap - NODES * fee_partial) / (fee_all - fee_partial))
        partial = NODES - full
    return {"all-upfront": full, "partial-upfront": partial, "no-upfront": NODES - full - partial}


def _bought(plan: Plan) -> dict[str, float]:
    return {sp.payment: sp.usd_per_hour for sp in plan.document.savings_plans if not sp.existing}


def test_without_a_limit_the_option_with_the_lowest_rates_is_bought(kit, tmp_path: Path) -> None:
    """All upfront has the lowest rate: 3 nodes x $5 = $15/h, its whole year ($131,400) paid in January,
    nothing of it by the hour; the horizon costs 48 x $15."""
    inputs = _inputs(kit, tmp_path, {"no-upfront": NO, "partial-upfront": PARTIAL, "all-upfront": ALL})
    plan = _plan(inputs)
    (sp,) = plan.document.savings_plans
    assert (sp.payment, sp.usd_per_hour) == ("all-upfront", pytest.approx(NODES * ALL))
    assert sp.upfront_usd == pytest.approx(NODES * ALL * HOURS_PER_YEAR)
    assert "all-upfront" in sp.name
    assert plan.document.costs.total_usd == pytest.approx(NODES * ALL * HOURS, abs=0.01)
    (january,) = plan.document.costs.cash_by_month or []
    assert january.upfront_usd == pytest.approx(NODES * ALL * HOURS_PER_YEAR)
    assert january.recurring_usd == pytest.approx(0.0, abs=0.01)
    assert january.cost_usd == pytest.approx(plan.document.costs.total_usd)
    assert verify(inputs, plan).total == 0
    assert "all upfront ($131,400 at start)" in render_markdown(plan.document, plan.allocations)


@pytest.mark.parametrize(
    ("cap", "method"),
    [
        (0.0, "staged"),
        (30_000.0, "staged"),
        (100_000.0, "staged"),
        (200_000.0, "staged"),
        (100_000.0, "hourly"),
    ],
)
def test_a_monthly_limit_mixes_the_options_as_the_closed_form(
    kit, tmp_path: Path, cap: float, method: str
) -> None:
    rates = {"no-upfront": NO, "partial-upfront": PARTIAL, "all-upfront": ALL}
    plan = _plan(_inputs(kit, tmp_path, rates, cap=cap), method)
    nodes = _closed_form(cap)
    expected = {payment: n * rates[payment] for payment, n in nodes.items() if n > 1e-9}
    bought = _bought(plan)
    assert set(bought) == set(expected)
    for payment, usd in expected.items():
        assert bought[payment] == pytest.approx(usd, abs=0.002)  # amounts in $0.001 steps
    fees = sum(sp.upfront_usd for sp in plan.document.savings_plans)
    assert fees <= cap + 1e-6
    assert fees == pytest.approx(
        sum(FEE_SHARE[p] * usd * HOURS_PER_YEAR for p, usd in expected.items()), abs=40
    )
    cost = HOURS * sum(expected.values())
    assert plan.document.costs.total_usd == pytest.approx(cost, abs=1.0)
    (january,) = plan.document.costs.cash_by_month or []
    assert january.upfront_usd == pytest.approx(fees)
    assert verify(_inputs(kit, tmp_path, rates, cap=cap), plan).total == 0


def test_options_no_cheaper_everywhere_are_all_kept(kit, tmp_path: Path) -> None:
    """Without a limit only a dominating option is kept; here every option is kept and the cheapest, all
    upfront, is still what the plan buys (the purchase LP chooses among them)."""
    inputs = _inputs(kit, tmp_path, {"no-upfront": NO, "all-upfront": ALL})
    assert set(_bought(_plan(inputs))) == {"all-upfront"}


def _kinds(inputs: Inputs, plan: Plan) -> set[str]:
    return {group.kind for group in verify(inputs, plan).summary()}


def test_verify_finds_a_fee_other_than_the_payments_share(kit, tmp_path: Path) -> None:
    inputs = _inputs(kit, tmp_path, {"no-upfront": NO, "all-upfront": ALL})
    plan = _plan(inputs)
    plan.document.savings_plans[0].upfront_usd /= 2
    assert "payment" in _kinds(inputs, plan)


def test_verify_finds_savings_plan_fees_above_the_limit(kit, tmp_path: Path) -> None:
    rates = {"no-upfront": NO, "all-upfront": ALL}
    plan = _plan(_inputs(kit, tmp_path, rates, cap=100_000.0))
    assert "upfront-cap" in _kinds(_inputs(kit, tmp_path / "tight", rates, cap=10_000.0), plan)


def test_a_held_plan_is_billed_at_its_payments_rates(kit, tmp_path: Path) -> None:
    """A held all-upfront plan of $10/h covers 2 nodes at $5 (not 1.67 at the no-upfront $6); one more
    node is bought; the held plan's fee was paid before the horizon, so January has none of it."""
    held = [{"name": "sp-held", "kind": "compute", "term": "1y", "usd_per_hour": 10.0,
             "start": "2026-06-01T00:00:00Z", "payment": "all-upfront"}]  # fmt: skip
    inputs = _inputs(kit, tmp_path, {"no-upfront": NO, "all-upfront": ALL}, held=held)
    plan = _plan(inputs)
    mine = next(sp for sp in plan.document.savings_plans if sp.existing)
    assert (mine.payment, mine.upfront_usd) == ("all-upfront", pytest.approx(10.0 * HOURS_PER_YEAR))
    assert _bought(plan) == {"all-upfront": pytest.approx(ALL)}  # the third node
    (january,) = plan.document.costs.cash_by_month or []
    assert january.upfront_usd == pytest.approx(ALL * HOURS_PER_YEAR)
    assert verify(inputs, plan).total == 0


def test_a_held_plan_whose_payment_the_catalog_does_not_price_is_refused(kit, tmp_path: Path) -> None:
    held = [{"name": "sp-held", "kind": "compute", "term": "1y", "usd_per_hour": 10.0,
             "start": "2026-06-01T00:00:00Z", "payment": "partial-upfront"}]  # fmt: skip
    inputs = _inputs(kit, tmp_path, {"no-upfront": NO}, held=held)
    with pytest.raises(InputError, match=r"savings_plans\[0\].*paid partial-upfront"):
        _plan(inputs)


def test_the_contract_carries_the_payment_and_old_plans_load(kit, tmp_path: Path) -> None:
    inputs = _inputs(kit, tmp_path, {"no-upfront": NO, "all-upfront": ALL})
    plan = _plan(inputs)
    (tmp_path / "out").mkdir()
    plan.write(tmp_path / "out")
    document = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert document["savings_plans"][0]["payment"] == "all-upfront"
    del document["savings_plans"][0]["payment"], document["savings_plans"][0]["upfront_usd"]
    (tmp_path / "out" / "plan.json").write_text(json.dumps(document))
    again = Plan.read(tmp_path / "out", trusted=False)
    assert (again.document.savings_plans[0].payment, again.document.savings_plans[0].upfront_usd) == (
        "no-upfront",
        0.0,
    )
