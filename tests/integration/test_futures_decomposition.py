"""`gpuplan futures` by decomposition (issue 41, point 3): many futures, the master's purchase, the second
stage billed on each future's fleet, and the same choice as re-planning every future where both must agree.

The newsvendor scenario of ``test_futures.py`` (one offering, latency-critical, flat demand) with twelve
futures: there, holding commitments cannot change where anything runs, so a fleet bill is exactly what
re-planning costs, and the expected cost of every level is the closed form ``_cost`` enumerated here.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from models.futures import FuturesDocument
from models.plan import Plan
from planner.cli import app
from tests.integration.test_futures import BASE, HOURS, P5, SKEWED, YEAR, _cost, _futures, _rates, _scenario

#: Twelve futures: demand 0.45 to 1.55 times the forecast, heavier weight near it (4.5 to 15.5 replicas: whole
#: replicas are served, so 5 to 16 nodes of one replica each).
MANY = [(f"f{i:02d}", 1.0 + (i < 6) * 0.5 + (3 <= i <= 8), round(0.45 + 0.1 * i, 2)) for i in range(12)]


def _run(tmp: Path, scenario: Path, futures: Path, *extra: str) -> tuple[FuturesDocument, str]:
    result = CliRunner().invoke(
        app, ["futures", str(scenario), str(futures), "-o", str(tmp / "out"), "--time-limit", "10",
              "--workers", "2", *extra],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return FuturesDocument.read(tmp / "out" / "futures.json"), result.output


def test_twelve_futures_the_master_buys_the_enumerated_optimum(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path)
    doc, output = _run(tmp_path, scenario, _futures(tmp_path, MANY, tail="none"))
    assert doc.second_stage == "fleet" and doc.master is not None
    assert doc.own_plans == "quick"  # more than FULL_OWN_PLANS futures: auto plans them quick
    assert "own_plans quick" in output
    assert "futures master: one MILP over 12 futures' fleets" in output
    assert "each future's plan with these purchases passes gpuplan verify (12)" in output
    r, o = _rates(scenario)
    total = sum(w for _n, w, _x in MANY)
    expected = {
        n: sum(w / total * _cost(n, math.ceil(BASE * x), r, o, HOURS) for _f, w, x in MANY)
        for n in range(0, 2 * BASE)
    }
    best = min(expected, key=lambda n: expected[n])
    master = next(c for c in doc.candidates if c.name == "futures master")
    assert [(p.offering, p.nodes) for p in master.purchases] == [(P5, best)]
    assert master.expected_usd == pytest.approx(expected[best], rel=1e-6)
    assert doc.master.score_usd == pytest.approx(expected[best], rel=1e-6)
    assert doc.summary.expected_usd == pytest.approx(expected[best], rel=1e-6)
    assert all(c.expected_usd >= doc.summary.expected_usd - 1e-6 for c in doc.candidates)
    # each future's fleet billed: every candidate's cost in every future is the closed form of its level
    for candidate in doc.candidates:
        n = sum(p.nodes or 0 for p in candidate.purchases)
        for future, _w, x in MANY:
            closed = _cost(n, math.ceil(BASE * x), r, o, HOURS)
            assert candidate.cost_usd[future] == pytest.approx(closed, rel=1e-6)
    assert sorted(p.name for p in (tmp_path / "out" / "chosen").iterdir()) == [f for f, _w, _x in MANY]
    # each future's plan with the chosen purchases (what gpuplan verify checked) costs what was billed
    chosen = next(c for c in doc.candidates if c.name == doc.chosen)
    for future, _w, _x in MANY:
        plan = Plan.read(tmp_path / "out" / "chosen" / future)
        assert plan.document.solver.objective_usd == pytest.approx(chosen.horizon_usd[future], abs=0.01)


def test_fleet_bills_and_replanned_futures_agree_where_holding_cannot_move_the_fleet(tmp_path: Path) -> None:
    """``second_stage: replanned`` plans every future again per candidate; on this case it must give what the
    fleet bills give, purchase for purchase and dollar for dollar. The fleet run's own plans are quick
    (whole replicas by rounding), which one replica per node cannot change."""
    scenario = _scenario(tmp_path)
    docs: dict[str, FuturesDocument] = {}
    for second in ("fleet", "replanned"):
        folder = tmp_path / second
        folder.mkdir()
        path = _futures(folder, SKEWED)
        data: dict[str, Any] = yaml.safe_load(path.read_text())
        own = "quick" if second == "fleet" else "full"
        path.write_text(yaml.safe_dump({**data, "second_stage": second, "own_plans": own}), encoding="utf-8")
        docs[second], _output = _run(folder, scenario, path)
    fleet, replanned = docs["fleet"], docs["replanned"]
    assert (fleet.second_stage, replanned.second_stage) == ("fleet", "replanned")
    assert (fleet.own_plans, replanned.own_plans) == ("quick", "full")
    # the bound with the tail (fleet bills only): the horizon's plus each future's carried nodes (whole
    # replicas of one node each) at the 1-year rate for the 1-year term's hours after the week
    r, _o = _rates(scenario)
    s = fleet.summary
    assert s.tail_until is not None and replanned.summary.bound_with_tail_usd is None
    total = sum(w for _n, w, _x in SKEWED)
    floor = sum(w / total * math.ceil(BASE * x) * r * (YEAR - HOURS) for _n, w, x in SKEWED)
    assert s.bound_with_tail_usd == pytest.approx(s.bound_usd + floor, rel=1e-9)
    assert s.bound_with_tail_usd <= min(c.expected_usd for c in fleet.candidates)
    assert s.gap_with_tail == pytest.approx((s.expected_usd - s.bound_with_tail_usd) / s.expected_usd)
    assert fleet.chosen == replanned.chosen == "futures master"
    assert fleet.summary.expected_usd == pytest.approx(replanned.summary.expected_usd, rel=1e-6)
    assert fleet.summary.vss_usd == pytest.approx(replanned.summary.vss_usd, rel=1e-6)
    by_name = {c.name: c for c in replanned.candidates}
    for candidate in fleet.candidates:
        for future, usd in candidate.cost_usd.items():
            assert usd == pytest.approx(by_name[candidate.name].cost_usd[future], rel=1e-6)
