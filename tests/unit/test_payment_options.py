"""Payment options for commitments (issue 38 point 2): no, partial or all upfront, each purchase paid the way
its term costs least, under an optional cash limit per month or quarter; plan.json v2 says how each is paid
and the cash per calendar month; ``gpuplan verify`` checks the fees, the months and the limit. Every figure
by closed form or by brute force."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from models.errors import InputError
from models.inputs import Inputs, load_inputs
from models.plan import SCHEMA, Plan, read_document
from models.priceterms import PriceTerm, terms_path_for, write_terms
from models.tiers import HOURS_PER_YEAR
from planner.outputs.reports.plan import render_html, render_markdown
from planner.planning.monthly import cash_by_month
from planner.planning.optimize import SolveSettings, optimize
from planner.verify import verify

P5 = "aws:us-east-1:p5.48xlarge"
HOURS = 48
START = "2027-01-04T00:00:00Z"
NODES = 3  # a flat load of 3 nodes
OD, NO_UPFRONT = 10.0, 6.0  # on demand and the 1y rate paid by the hour, USD per node-hour
CHAT = {"name": "chat", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
        "latency_critical": True, "replicas": {"profile": "flat", "base": NODES}}  # fmt: skip
OLD_PLAN = Path(__file__).resolve().parents[1] / "data" / "plan-v1-e142793"


def _term(payment: str, usd_h: float, upfront: float) -> PriceTerm:
    return PriceTerm(P5, "reserved-instance", 1, "standard", payment, usd_h, upfront, "", "test",  # type: ignore[arg-type]
                     datetime(2026, 12, 1, tzinfo=UTC), "assumed")  # fmt: skip


def _inputs(kit: Any, directory: Path, terms: list[PriceTerm], cap: dict[str, Any] | None = None) -> Inputs:
    """p5 at $10/h on demand and $6/h on a 1y term paid by the hour, the upfront options ``terms``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = kit.write_catalog_csv(
        directory / "catalog.csv", [kit.offering_row(on_demand_usd_h=OD, reserved_1y_usd_h=NO_UPFRONT)]
    )
    write_terms(terms, terms_path_for(path))
    data = kit.scenario_dict(hours=HOURS, start=START, inference=[CHAT], terms=["1y"], max_spot_share=0)
    data["purchase"]["schedule"] = "horizon"
    if cap is not None:
        data["purchase"]["max_upfront_usd"] = cap
    return load_inputs(kit.write_scenario_yaml(directory / "s.yaml", data))


def _plan(inputs: Inputs) -> Plan:
    return optimize(inputs.scenario, inputs.catalog, inputs.base_dir, SolveSettings(time_limit=30))


def _effective(usd_h: float, upfront: float) -> float:
    return usd_h + upfront / HOURS_PER_YEAR


@pytest.mark.parametrize(("all_upfront_effective", "chosen"), [(5.0, "all-upfront"), (7.0, "no-upfront")])
def test_without_a_limit_each_purchase_takes_the_lowest_effective_rate(
    kit, tmp_path: Path, all_upfront_effective: float, chosen: str
) -> None:
    """One offering, a flat load of 3 nodes: the plan buys 3 nodes on 1y, all upfront exactly when its fee
    spread over the term's hours is below the $6/h paid by the hour; cost = 3 x effective x hours; the fee
    is cash in the month of purchase."""
    fee = all_upfront_effective * HOURS_PER_YEAR
    inputs = _inputs(kit, tmp_path, [_term("all-upfront", 0.0, fee)])
    plan = _plan(inputs)
    doc = plan.document
    assert doc.schema_ == SCHEMA == "gpuplan.plan/v2"
    (commitment,) = [c for c in doc.commitments if not c.existing]
    rate = min(all_upfront_effective, NO_UPFRONT)
    assert (commitment.nodes, commitment.payment) == (NODES, chosen)
    assert commitment.usd_per_node_hour == pytest.approx(rate)
    assert doc.costs.total_usd == pytest.approx(NODES * rate * HOURS)
    upfront = NODES * fee if chosen == "all-upfront" else 0.0
    hourly = 0.0 if chosen == "all-upfront" else NO_UPFRONT
    assert commitment.upfront_usd == pytest.approx(upfront / NODES)
    (january,) = doc.costs.cash_by_month or []
    assert january.month == "2027-01"
    assert january.cost_usd == pytest.approx(doc.costs.total_usd)
    assert january.upfront_usd == pytest.approx(upfront)
    assert january.recurring_usd == pytest.approx(NODES * hourly * HOURS)
    assert verify(inputs, plan).total == 0


# partial upfront: $3/h and a fee of $2.4 x 8760 (effective $5.4/h); all upfront: effective $5/h
PARTIAL = (3.0, 2.4 * HOURS_PER_YEAR)
ALL = (0.0, 5.0 * HOURS_PER_YEAR)


def _brute_force(cap: float) -> tuple[float, dict[str, int]]:
    """Every way to pay 3 nodes with a, q, n nodes all, partial, no upfront: the cheapest whose fees fit."""
    best: tuple[float, dict[str, int]] | None = None
    for a, q in itertools.product(range(NODES + 1), repeat=2):
        if a + q > NODES or a * ALL[1] + q * PARTIAL[1] > cap:
            continue
        rate = a * _effective(*ALL) + q * _effective(*PARTIAL) + (NODES - a - q) * NO_UPFRONT
        if best is None or rate < best[0] - 1e-9:
            split = {"all-upfront": a, "partial-upfront": q, "no-upfront": NODES - a - q}
            best = (rate, {k: v for k, v in split.items() if v})
    assert best is not None
    return best


@pytest.mark.parametrize("cap", [0.0, 30_000.0, 50_000.0, 70_000.0, 100_000.0, 1e6])
def test_a_monthly_limit_splits_the_purchase_as_brute_force_does(kit, tmp_path: Path, cap: float) -> None:
    """With a cash limit per month the 3 nodes are split among the options as the cheapest split whose
    fees fit (brute force over every split); the cost is that split's amortized rates, the cash its fees."""
    rate, split = _brute_force(cap)
    inputs = _inputs(kit, tmp_path, [_term("partial-upfront", *PARTIAL), _term("all-upfront", *ALL)],
                     cap={"per": "month", "usd": cap})  # fmt: skip
    plan = _plan(inputs)
    doc = plan.document
    bought = {c.payment: c.nodes for c in doc.commitments if not c.existing}
    assert bought == split
    assert doc.costs.total_usd == pytest.approx(rate * HOURS)
    fees = sum(c.nodes * c.upfront_usd for c in doc.commitments)
    assert fees <= cap + 1e-6
    (january,) = doc.costs.cash_by_month or []
    assert january.upfront_usd == pytest.approx(fees)
    names = [c.name for c in doc.commitments]
    assert len(set(names)) == len(names)
    assert set(plan.allocations["commitment"]) - {""} <= set(names)
    assert verify(inputs, plan).total == 0


def test_a_v1_plan_still_loads(tmp_path: Path) -> None:
    """Plans written before payment options (schema v1) load: every commitment paid by the hour, no cash."""
    document = read_document(OLD_PLAN / "plan.json")
    assert document.schema_ == "gpuplan.plan/v1"
    assert all(c.payment == "no-upfront" and c.upfront_usd == 0 for c in document.commitments)
    assert document.costs.cash_by_month is None
    data = json.loads((OLD_PLAN / "plan.json").read_text(encoding="utf-8"))
    data["schema"] = "gpuplan.plan/v9"
    (tmp_path / "plan.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match=r"gpuplan\.plan/v2' or 'gpuplan\.plan/v1'"):
        read_document(tmp_path / "plan.json")


# ---- cash across months, the limit per window, and verify ----------------------------------------------

LATE_JANUARY = "2027-01-30T00:00:00Z"  # 48 h of January, then 48 h of February


def _stepped(kit: Any, directory: Path, cap: dict[str, Any] | None) -> Inputs:
    """3 nodes in the last 48 h of January, 5 in the first 48 h of February; purchases monthly; 1y at $6/h
    by the hour or all upfront at an effective $5/h."""
    inputs = _inputs(kit, directory, [_term("all-upfront", *ALL)], cap=cap)
    kit.write_demand_csv(directory / "demand.csv", [NODES] * 48 + [5] * 48)
    data = kit.scenario_dict(
        hours=96, start=LATE_JANUARY, inference=[{**CHAT, "replicas": {"csv": "demand.csv"}}], terms=["1y"],
        max_spot_share=0,
    )  # fmt: skip
    data["purchase"]["schedule"] = "monthly"
    if cap is not None:
        data["purchase"]["max_upfront_usd"] = cap
    del inputs
    return load_inputs(kit.write_scenario_yaml(directory / "s.yaml", data))


def _by_hand(commitments: list[tuple[str, str, int]]) -> dict[str, tuple[float, float, float]]:
    """Month -> (cost, upfront, recurring) of purchases (month bought, payment, nodes), each serving from its
    month's first hour in the horizon to the horizon's end: 96 h from January 30, 48 h from February 1."""
    months = {"2027-01": [0.0, 0.0, 0.0], "2027-02": [0.0, 0.0, 0.0]}
    for bought, payment, nodes in commitments:
        hourly, fee = (0.0, ALL[1]) if payment == "all-upfront" else (NO_UPFRONT, 0.0)
        effective = _effective(hourly, fee)
        months[bought][1] += nodes * fee
        for month in months if bought == "2027-01" else ["2027-02"]:
            months[month][0] += nodes * effective * 48
            months[month][2] += nodes * hourly * 48
    return {m: (c, u, r) for m, (c, u, r) in months.items()}


@pytest.mark.parametrize(("cap", "all_upfront"), [(50_000.0, {"2027-01": 1, "2027-02": 1}),
                                                  (100_000.0, {"2027-01": 2, "2027-02": 2}),
                                                  (200_000.0, {"2027-01": 3, "2027-02": 2})])  # fmt: skip
def test_cash_per_month_equals_a_sum_by_hand(kit, tmp_path: Path, cap: float, all_upfront: dict) -> None:
    """A monthly limit of ``cap``: each month's purchase pays floor(cap / fee) nodes all upfront (at most its
    nodes), the rest by the hour; plan.json's cash per month equals the sum by hand, month by month, and
    its costs add up to the total."""
    inputs = _stepped(kit, tmp_path, {"per": "month", "usd": cap})
    plan = _plan(inputs)
    doc = plan.document
    bought = [((c.start or doc.horizon.start).strftime("%Y-%m"), c.payment, c.nodes) for c in doc.commitments]
    got = {month: sum(n for m, p, n in bought if m == month and p == "all-upfront") for month in all_upfront}
    assert got == all_upfront
    assert sum(n for m, _p, n in bought if m == "2027-01") == NODES and sum(n for *_x, n in bought) == 5
    expected = _by_hand(bought)
    cash = doc.costs.cash_by_month or []
    assert [m.month for m in cash] == ["2027-01", "2027-02"]
    for month in cash:
        cost, upfront, recurring = expected[month.month]
        assert (month.cost_usd, month.upfront_usd, month.recurring_usd) == pytest.approx(
            (cost, upfront, recurring)
        )
        assert month.cash_usd == pytest.approx(upfront + recurring)
    assert sum(m.cost_usd for m in cash) == pytest.approx(doc.costs.total_usd)
    assert verify(inputs, plan).total == 0


def test_a_quarterly_limit_counts_both_months_together(kit, tmp_path: Path) -> None:
    """January and February are one quarter: a limit of one fee a quarter pays one node all upfront in all."""
    inputs = _stepped(kit, tmp_path, {"per": "quarter", "usd": 50_000.0})
    doc = _plan(inputs).document
    assert sum(c.nodes for c in doc.commitments if c.payment == "all-upfront") == 1
    assert sum(c.nodes * c.upfront_usd for c in doc.commitments) == pytest.approx(ALL[1])


def _kinds(inputs: Inputs, plan: Plan) -> set[str]:
    return {group.kind for group in verify(inputs, plan).summary()}


def test_verify_finds_a_fee_the_catalog_does_not_charge(kit, tmp_path: Path) -> None:
    """A purchase's fee halved (its cash re-counted, so only the fee is wrong): payment."""
    inputs = _stepped(kit, tmp_path, {"per": "month", "usd": 50_000.0})
    plan = _plan(inputs)
    doc = plan.document
    k = next(k for k, c in enumerate(doc.commitments) if c.payment == "all-upfront")
    doc.commitments[k] = doc.commitments[k].model_copy(update={"upfront_usd": ALL[1] / 2})
    doc.costs.cash_by_month = cash_by_month(plan)
    assert _kinds(inputs, plan) == {"payment"}


def test_verify_finds_fees_above_the_limit(kit, tmp_path: Path) -> None:
    """The plan made under a $100,000 monthly limit, checked against one of $50,000: upfront-cap."""
    plan = _plan(_stepped(kit, tmp_path / "a", {"per": "month", "usd": 100_000.0}))
    assert _kinds(_stepped(kit, tmp_path / "b", {"per": "month", "usd": 50_000.0}), plan) == {"upfront-cap"}


def test_verify_finds_cash_in_the_wrong_month(kit, tmp_path: Path) -> None:
    """February's fee moved to January in cash_by_month: cash-month."""
    inputs = _stepped(kit, tmp_path, {"per": "month", "usd": 50_000.0})
    plan = _plan(inputs)
    january, february = plan.document.costs.cash_by_month or []
    moved = february.upfront_usd
    assert moved > 0
    plan.document.costs.cash_by_month = [
        january.model_copy(
            update={"upfront_usd": january.upfront_usd + moved, "cash_usd": january.cash_usd + moved}
        ),
        february.model_copy(update={"upfront_usd": 0.0, "cash_usd": february.cash_usd - moved}),
    ]
    assert _kinds(inputs, plan) == {"cash-month"}


def test_the_report_shows_cash_beside_cost_per_month(kit, tmp_path: Path) -> None:
    """The report's month table: cost and cash of each calendar month, the fees where they are paid; a
    purchase's term says how it is paid. A v1 plan has no such table."""
    plan = _plan(_stepped(kit, tmp_path, {"per": "month", "usd": 50_000.0}))
    md = render_markdown(plan.document, plan.allocations)
    january, february = plan.document.costs.cash_by_month or []
    assert "### Cost and cash per month" in md
    assert "| month | cost | upfront fees | hourly charges | cash out |" in md
    assert f"| 2027-01 | ${round(january.cost_usd):,} | ${round(january.upfront_usd):,} |" in md
    assert f"| 2027-02 | ${round(february.cost_usd):,} | ${round(february.upfront_usd):,} |" in md
    assert "| 1y, all upfront |" in md
    assert "Cost and cash per month" in render_html(plan.document, plan.allocations)
    old = Plan.read(OLD_PLAN)
    assert "Cost and cash per month" not in render_markdown(old.document, old.allocations)


def test_the_hourly_method_splits_as_the_staged_one(kit, tmp_path: Path) -> None:
    """The split is the shared finishing path's: the hourly method pays January's 3 nodes and February's 2 as
    the staged method does under a $50,000 monthly limit (one all upfront each month)."""
    inputs = _stepped(kit, tmp_path, {"per": "month", "usd": 50_000.0})
    plans = [
        optimize(
            inputs.scenario, inputs.catalog, inputs.base_dir, SolveSettings(time_limit=30, method=method)
        )
        for method in ("staged", "hourly")
    ]
    paid = [sorted((c.name, c.nodes) for c in plan.document.commitments) for plan in plans]
    assert paid[0] == paid[1]
    assert sum(n for name, n in paid[1] if name.endswith("/all-upfront")) == 2
    assert verify(inputs, plans[1]).total == 0
