"""`gpuplan futures` (issue 41) against what is known in closed form.

The newsvendor case: one offering (p5.48xlarge in us-east-1, one node per replica), one 1-year term bought
on day one, a week of flat demand, three futures. A level of ``n`` committed nodes costs, in a future of
``d`` nodes, ``H * (n * r + max(d - n, 0) * o)`` (``r`` the 1-year rate, ``o`` on demand; latency-critical,
so no spot). The expected cost over the futures is minimized at the critical fractile; the tests enumerate
every level by that formula (not by the planner) and compare: the chosen purchase, its expected cost, the
value of the stochastic solution against buying for the point forecast, the expected value of perfect
information, the CVaR-ranked choice, and every candidate's cost in every future.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from models.futures import FuturesDocument, cvar
from models.inputs import load_catalog
from planner.cli import app
from planner.outputs.reports.futures import distribution_curves

P5 = "aws:us-east-1:p5.48xlarge"
HOURS = 168
BASE = 10  # nodes the point forecast serves


def _scenario(tmp: Path, **extra: Any) -> Path:
    data = {
        "name": "newsvendor",
        "horizon": {"start": "2027-01-04T00:00:00Z", "hours": HOURS, "period_hours": 1},
        "catalog": "embedded",
        "clouds": {"aws": {"regions": ["us-east-1"]}},
        "purchase": {"terms": ["1y"], "schedule": "horizon"},
        "teams": [{"name": "serving", "guaranteed_gpus": 0}],
        "inference": [
            {"name": "chat", "team": "serving", "gpus_per_replica": 8, "gpu_models": ["H100"],
             "latency_critical": True, "replicas": {"profile": "flat", "base": BASE}},
        ],
        **extra,
    }  # fmt: skip
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _futures(
    tmp: Path,
    futures: list[tuple[str, float, float]],
    risk: dict[str, float] | None = None,
    tail: str = "carried",
) -> Path:
    data: dict[str, Any] = {
        "tail": tail,
        "futures": [
            {"name": n, "weight": w, "vary": [] if x == 1.0 else [f"demand=x{x}"]} for n, w, x in futures
        ],
    }
    if risk:
        data["risk"] = risk
    path = tmp / "futures.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _rates(scenario: Path) -> tuple[float, float]:
    offering = next(o for o in load_catalog("embedded", scenario) if o.id == P5)
    assert offering.on_demand_usd_h and offering.reserved_1y_usd_h
    return offering.reserved_1y_usd_h, offering.on_demand_usd_h


#: With ``tail: carried`` the costs run to the end of the 1-year term bought (flat demand carried forward).
YEAR = 8760


def _cost(n: int, d: float, r: float, o: float, hours: int = YEAR) -> float:
    return hours * (n * r + max(d - n, 0.0) * o)


def _run(tmp: Path, scenario: Path, futures: Path) -> FuturesDocument:
    result = CliRunner().invoke(
        app, ["futures", str(scenario), str(futures), "-o", str(tmp / "out"), "--time-limit", "10",
              "--workers", "1", "-q"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "each future's plan with these purchases passes gpuplan verify (3)" in result.output
    return FuturesDocument.read(tmp / "out" / "futures.json")


#: Futures where the critical fractile is not the point forecast: P(demand > 6) = 0.5 < r / o (0.63), so
#: the optimum holds 6 nodes while the point forecast's plan holds 10.
SKEWED = [("low", 0.5, 0.6), ("mid", 0.2, 1.0), ("high", 0.3, 1.4)]


@pytest.mark.parametrize(("tail", "hours"), [("carried", YEAR), ("none", HOURS)])
def test_the_newsvendor_optimum_by_enumeration(tmp_path: Path, tail: str, hours: int) -> None:
    """Over the horizon alone (``tail: none``) or to the end of the year bought (``carried``)."""
    scenario = _scenario(tmp_path)
    doc = _run(tmp_path, scenario, _futures(tmp_path, SKEWED, tail=tail))
    r, o = _rates(scenario)
    demand = {n: BASE * x for n, _w, x in SKEWED}
    weights = {n: w for n, w, _x in SKEWED}
    expected = {
        n: sum(weights[f] * _cost(n, demand[f], r, o, hours) for f in demand) for n in range(0, 2 * BASE + 1)
    }
    best = min(expected, key=lambda n: expected[n])
    assert best == 6  # the critical fractile, by the formula
    chosen = next(c for c in doc.candidates if c.name == doc.chosen)
    assert [(p.offering, p.nodes) for p in chosen.purchases] == [(P5, best)]
    assert doc.summary.expected_usd == pytest.approx(expected[best], rel=1e-6)
    # the point forecast buys for 10 nodes; what planning for the futures saves against it
    assert doc.summary.point_forecast_expected_usd == pytest.approx(expected[BASE], rel=1e-6)
    assert doc.summary.vss_usd == pytest.approx(expected[BASE] - expected[best], rel=1e-6)
    assert doc.summary.vss_usd > 0
    # perfect information: each future commits exactly its demand
    wait_and_see = sum(weights[f] * _cost(round(demand[f]), demand[f], r, o, hours) for f in demand)
    assert doc.summary.wait_and_see_usd == pytest.approx(wait_and_see, rel=1e-6)
    assert doc.summary.evpi_usd == pytest.approx(expected[best] - wait_and_see, rel=1e-6)
    assert doc.summary.bound_usd <= doc.summary.expected_horizon_usd
    assert doc.summary.expected_horizon_usd == pytest.approx(expected[best] * HOURS / hours, rel=1e-6)
    # the second round tried the best a little smaller and larger (5 and 7 nodes) and kept it
    levels = {
        sum(p.nodes or 0 for p in c.purchases) for c in doc.candidates if c.name.endswith(("x0.85", "x1.15"))
    }
    assert levels == {5, 7}
    # every candidate priced in every future as the formula prices its level, horizon and tail apart
    for candidate in doc.candidates:
        n = sum(p.nodes or 0 for p in candidate.purchases)
        for future, usd in candidate.cost_usd.items():
            assert usd == pytest.approx(_cost(n, demand[future], r, o, hours), rel=1e-6), (
                candidate.name,
                future,
            )
            horizon = _cost(n, demand[future], r, o, HOURS)
            assert candidate.horizon_usd[future] == pytest.approx(horizon, rel=1e-6)
            assert candidate.tail_usd[future] == pytest.approx(usd - horizon, rel=1e-6, abs=1e-6)
    # the use table: 6 nodes are used whole in every future (demand >= 6), so above break-even in all
    (use,) = doc.commitment_use
    assert use.break_even_fraction == pytest.approx(r / o)
    assert use.share_above_break_even == pytest.approx(1.0)
    assert use.idle_fraction_p10 == pytest.approx(0.0)
    # the cloud's lookback recommendation (a peer of the point forecast's plan) priced on the same futures:
    # on flat demand it (and the coverage peers) buys the point forecast's 10 nodes
    assert doc.summary.best_peer is not None
    assert doc.summary.best_peer_expected_usd == pytest.approx(expected[BASE], rel=1e-6)
    point = next(c for c in doc.candidates if c.name == "point forecast")
    assert any(name.startswith("peer: lookback") for name in point.also)
    md = (tmp_path / "out" / "futures.md").read_text()
    assert f"**Buy: {doc.chosen}**" in md and f"6 x {P5}, 1y from 2027-01-04" in md
    page = (tmp_path / "out" / "futures.html").read_text()
    assert page.count('id="chart-futures"') == 1 and page.count("plotly.js v") == 1
    curves = distribution_curves(doc)
    costs = sorted((chosen.cost_usd[n], weights[n]) for n in demand)
    assert curves[f"chosen ({doc.chosen})"] == (
        [costs[0][0]] + [c for c, _w in costs],
        pytest.approx([0.0] + [sum(w for _c, w in costs[: k + 1]) for k in range(len(costs))]),
    )
    assert "point forecast" in curves  # the point forecast's purchases beside the chosen ones
    plans = sorted(p.name for p in (tmp_path / "out" / "chosen").iterdir())
    assert plans == ["high", "low", "mid"]
    held = json.loads((tmp_path / "out" / "chosen" / "high" / "plan.json").read_text())["commitments"]
    assert [(c["offering"], c["nodes"], c["existing"]) for c in held] == [(P5, 6, True)]


def test_a_cautious_plan_by_cvar_by_enumeration(tmp_path: Path) -> None:
    """Ranked by the CVaR at 0.7 alone, the choice is the level whose costliest 30 % is least."""
    scenario = _scenario(tmp_path)
    doc = _run(tmp_path, scenario, _futures(tmp_path, SKEWED, {"cvar": 0.7, "weight": 1.0}))
    r, o = _rates(scenario)
    names = [n for n, _w, _x in SKEWED]
    weights = [w for _n, w, _x in SKEWED]
    costs = {n: [_cost(n, BASE * x, r, o) for _f, _w, x in SKEWED] for n in (0, 6, 10, 14)}  # the candidates
    tails = {n: cvar(c, weights, 0.7) for n, c in costs.items()}
    best = min(tails, key=lambda n: tails[n])
    chosen = next(c for c in doc.candidates if c.name == doc.chosen)
    assert sum(p.nodes or 0 for p in chosen.purchases) == best
    assert chosen.score_usd == pytest.approx(tails[best], rel=1e-6)
    assert best != 6  # caution buys more than the expected-cost optimum here
    assert names == list(chosen.cost_usd)


def test_bad_futures_files_are_named(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path)
    runner = CliRunner()
    cases = {
        "futures: [{name: a}]": "futures",  # one future is not a distribution
        "futures: [{name: a}, {name: a}]": "given twice",
        "futures: [{name: a, weight: -1}, {name: b}]": "weight",
        "futures: [{name: a, vary: [demand=x]}, {name: b}]": "futures[0]",
        "futures: [{name: a, wieght: 1}, {name: b}]": "wieght",
    }
    for text, named in cases.items():
        path = tmp_path / "f.yaml"
        path.write_text(text, encoding="utf-8")
        result = runner.invoke(app, ["futures", str(scenario), str(path), "-o", str(tmp_path / "x")])
        assert result.exit_code == 2, (text, result.output)
        assert named in result.output, (text, result.output)
        assert "f.yaml" in result.output, (text, result.output)  # the futures file is named
        assert "Traceback" not in result.output
        assert not (tmp_path / "x").exists()


def test_futures_given_as_demand_csvs(tmp_path: Path) -> None:
    """A future may give a service's demand as a CSV (what `gpuplan demand` writes per sampled path): the
    same three futures as CSV files give the same choice and costs as the demand=x changes."""
    scenario = _scenario(tmp_path)
    folder = tmp_path / "paths"
    folder.mkdir()
    futures = []
    for name, weight, x in SKEWED:
        (folder / f"{name}.csv").write_text(
            "hour,replicas\n" + "".join(f"{h},{BASE * x:g}\n" for h in range(HOURS)), encoding="utf-8"
        )
        futures.append({"name": name, "weight": weight, "series": {"chat": f"paths/{name}.csv"}})
    path = tmp_path / "futures.yaml"
    path.write_text(yaml.safe_dump({"futures": futures}), encoding="utf-8")
    doc = _run(tmp_path, scenario, path)
    r, o = _rates(scenario)
    chosen = next(c for c in doc.candidates if c.name == doc.chosen)
    assert [(p.offering, p.nodes) for p in chosen.purchases] == [(P5, 6)]
    expected = sum(w * _cost(6, BASE * x, r, o) for _n, w, x in SKEWED)
    assert doc.summary.expected_usd == pytest.approx(expected, rel=1e-6)

    runner = CliRunner()
    for series, named in (({"chat": "paths/none.csv"}, "futures[0].series.chat"),
                          ({"search": "paths/low.csv"}, "futures[0].series.search")):  # fmt: skip
        path.write_text(yaml.safe_dump({"futures": [{"name": "a", "series": series}, {"name": "b"}]}))
        result = runner.invoke(app, ["futures", str(scenario), str(path), "-o", str(tmp_path / "bad")])
        assert result.exit_code == 2 and named in result.output, result.output
        assert not (tmp_path / "bad").exists()


def test_a_candidate_no_future_can_hold_is_excluded_with_its_reason(tmp_path: Path) -> None:
    """With 16 guaranteed GPUs backed by commitments, buying nothing has no plan in any future: it is
    listed as not priced, with the planner's reason, and the choice is made among the others."""
    scenario = _scenario(tmp_path, teams=[{"name": "serving", "guaranteed_gpus": 16}])
    doc = _run(tmp_path, scenario, _futures(tmp_path, SKEWED))
    assert "nothing more" in doc.excluded and "guarantee" in doc.excluded["nothing more"].lower()
    assert "nothing more" not in {c.name for c in doc.candidates}
    assert "Not priced (no plan in a future):" in (tmp_path / "out" / "futures.md").read_text()
