"""`gpuplan plan SCENARIO --futures FUTURES.yaml -o DIR` (issue 41): the plan to act on buys what the futures
choose, as its own purchases, and `gpuplan verify` reads it as any plan.

On the newsvendor case of test_futures.py the futures choose 6 nodes while the point forecast's own plan buys
10, so the plan written is not the point forecast's: its purchases must be the futures' choice, bought (not
held), and its cost over the horizon the formula's for 6 committed nodes serving the point forecast's 10.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from models.futures import FuturesDocument
from planner.cli import app
from tests.integration.test_futures import BASE, HOURS, P5, SKEWED, _cost, _futures, _rates, _scenario

TRAINING = [
    {"name": "finetune", "team": "serving", "nodes": 1, "gpus_per_node": 8, "gpu_models": ["H100"],
     "hours": 12, "earliest_start": "2027-01-05T00:00:00Z", "deadline": "2027-01-09T00:00:00Z"},
]  # fmt: skip


def _plan(tmp: Path, scenario: Path, futures: Path, *more: str) -> Any:
    return CliRunner().invoke(
        app, ["plan", str(scenario), "--futures", str(futures), "-o", str(tmp / "plan"), "--time-limit", "10",
              "--workers", "1", "-q", *more],
    )  # fmt: skip


def _bought(plan_dir: Path) -> list[tuple[str, str, str, int]]:
    commitments = json.loads((plan_dir / "plan.json").read_text())["commitments"]
    return sorted(
        (c["offering"], c["term"], c["start"], c["nodes"]) for c in commitments if not c["existing"]
    )


def _chosen(doc: FuturesDocument) -> list[tuple[str, str, str, int]]:
    chosen = next(c for c in doc.candidates if c.name == doc.chosen)
    return sorted(
        (p.offering, str(p.term), p.start.isoformat().replace("+00:00", "Z"), p.nodes or 0)
        for p in chosen.purchases
    )


@pytest.mark.parametrize("training", [False, True], ids=["inference", "with-training"])
def test_plan_with_futures_buys_the_futures_choice(tmp_path: Path, training: bool) -> None:
    scenario = _scenario(tmp_path, **({"training": TRAINING} if training else {}))
    result = _plan(tmp_path, scenario, _futures(tmp_path, SKEWED))
    assert result.exit_code == 0, result.output
    out = tmp_path / "plan"
    doc = FuturesDocument.read(out / "futures" / "futures.json")
    assert _bought(out) == _chosen(doc) != []
    assert sum(n for *_k, n in _bought(out)) != BASE  # not the point forecast's own purchase
    # the plan is the point forecast's: its demand, the chosen purchases bought; the futures' report beside it
    assert {p.name for p in (out / "futures" / "chosen").iterdir()} == {n for n, _w, _x in SKEWED}
    assert (out / "futures" / "point" / "plan.json").is_file() and (out / "report.md").is_file()
    verified = CliRunner().invoke(app, ["verify", str(scenario), str(out)])
    assert verified.exit_code == 0, verified.output
    s = doc.summary
    said = f"expected ${s.expected_usd:,.0f}, P90 ${s.p90_usd:,.0f}; value of the stochastic solution "
    assert said + f"${s.vss_usd:,.0f}" in result.output
    plan = json.loads((out / "plan.json").read_text())
    assert any("chosen first stage" in note for note in plan["solver"]["notes"])
    # the buyer's figures in plan.json and on the report's first screen (issue 41 point 4)
    figures = plan["futures"]
    assert figures["file"] == "futures/futures.json" and figures["futures"] == len(SKEWED)
    assert figures["chosen"] == doc.chosen
    for key in ("expected_usd", "p10_usd", "p50_usd", "p90_usd", "worst_usd", "vss_usd", "evpi_usd"):
        assert figures[key] == pytest.approx(getattr(s, key), rel=1e-12)
    first_screen = (out / "report.md").read_text().split("## Purchase schedule")[0]
    assert f"chosen over 3 demand futures (futures/futures.json): expected cost ${s.expected_usd:,.0f}" in (
        first_screen
    )
    assert f"Value of the stochastic solution: ${s.vss_usd:,.0f}" in first_screen
    if training:
        assert [t["job"] for t in plan["training"]] == ["finetune"]
    else:  # 6 committed nodes, the point forecast's other 4 on demand, over the horizon
        r, o = _rates(scenario)
        assert plan["costs"]["total_usd"] == pytest.approx(_cost(6, BASE, r, o, HOURS), rel=1e-6)


def test_plan_with_futures_refuses_what_it_cannot_combine(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path)
    futures = _futures(tmp_path, SKEWED)
    result = _plan(tmp_path, scenario, futures, "--start-from", str(tmp_path))
    assert result.exit_code == 2 and "--start-from: not with --futures" in result.output, result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("futures: [{name: a, vary: [demand=x]}, {name: b}]\n", encoding="utf-8")
    result = _plan(tmp_path, scenario, bad)
    assert result.exit_code == 2 and "bad.yaml: futures[0]" in result.output, result.output
    assert not (tmp_path / "plan").exists()


def test_plan_with_futures_and_a_pricing_overlay_buys_at_the_overlay_rate(tmp_path: Path) -> None:
    """``--prices`` applies to the forecast and every future: a 1-year rate of 0.4 x on demand moves the
    critical fractile from 6 nodes to 10 (P(demand > 6) = 0.5 >= 0.4 > P(demand > 10) = 0.3); the plan
    buys that level at the overlay's rate and verifies with the same overlay."""
    scenario = _scenario(tmp_path)
    _r, o = _rates(scenario)
    rate = round(0.4 * o, 4)
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(
        f"rates:\n  - offering: {P5}\n    tier: reserved_1y\n    usd_h: {rate}\n    note: test addendum\n",
        encoding="utf-8",
    )
    result = _plan(tmp_path, scenario, _futures(tmp_path, SKEWED), "--prices", str(overlay))
    assert result.exit_code == 0, result.output
    out = tmp_path / "plan"
    doc = FuturesDocument.read(out / "futures" / "futures.json")
    expected = {n: sum(w * _cost(n, BASE * x, rate, o) for _f, w, x in SKEWED) for n in range(0, 2 * BASE)}
    best = min(expected, key=lambda n: expected[n])
    assert best == 10
    assert _bought(out) == _chosen(doc) and sum(n for *_k, n in _bought(out)) == best
    assert doc.summary.expected_usd == pytest.approx(expected[best], rel=1e-6)
    commitments = json.loads((out / "plan.json").read_text())["commitments"]
    bought = [c["usd_per_node_hour"] for c in commitments if not c["existing"]]
    assert bought and all(usd == pytest.approx(rate) for usd in bought)
    verified = CliRunner().invoke(app, ["verify", str(scenario), str(out), "--prices", str(overlay)])
    assert verified.exit_code == 0, verified.output
