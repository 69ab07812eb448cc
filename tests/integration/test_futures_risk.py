"""`gpuplan futures` risk constraints (issue 41): a cap on a quantile of the cost and a chance constraint on
the latency-critical demand served from committed capacity, on the newsvendor case of test_futures.py.

A level of ``n`` committed nodes costs, in a future of ``d`` nodes, ``H * (n * r + max(d - n, 0) * o)``
and serves ``min(n, d) / d`` of the latency-critical node-hours from committed capacity. Each test reads
every priced candidate's per-future costs (checked against that formula) and makes the choice again by
its own computation: the weighted quantile by sorting, the shares from the level, then the least expected
cost among the candidates that qualify.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from models.futures import FuturesDocument
from planner.cli import app
from tests.integration.test_futures import BASE, SKEWED, _cost, _futures, _rates, _scenario

DEMAND = {n: BASE * x for n, _w, x in SKEWED}
WEIGHTS = {n: w for n, w, _x in SKEWED}


def _invoke(tmp: Path, scenario: Path, futures: Path) -> Any:
    return CliRunner().invoke(
        app, ["futures", str(scenario), str(futures), "-o", str(tmp / "out"), "--time-limit", "10",
              "--workers", "1", "-q"],
    )  # fmt: skip


def _with_risk(tmp: Path, risk: dict[str, Any]) -> Path:
    """The SKEWED futures file with ``risk``."""
    path = _futures(tmp, SKEWED)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    path.write_text(yaml.safe_dump({**data, "risk": risk}), encoding="utf-8")
    return path


def _quantile(costs: dict[str, float], q: float) -> float:
    """The lower weighted quantile, computed here: the first cost whose cumulative weight reaches q."""
    running = 0.0
    for future, cost in sorted(costs.items(), key=lambda item: item[1]):
        running += WEIGHTS[future]
        if running >= q - 1e-12:
            return cost
    raise AssertionError("weights do not sum to 1")


def _level(candidate: Any) -> int:
    return sum(p.nodes or 0 for p in candidate.purchases)


def _expected(candidate: Any) -> float:
    return sum(WEIGHTS[f] * c for f, c in candidate.cost_usd.items())


def _check_costs(doc: FuturesDocument, r: float, o: float) -> None:
    """Every candidate's cost in every future is the formula's for its level (the data the choice uses)."""
    for candidate in doc.candidates:
        n = _level(candidate)
        for future, usd in candidate.cost_usd.items():
            assert usd == pytest.approx(_cost(n, DEMAND[future], r, o), rel=1e-6), (candidate.name, future)


def test_a_cap_on_the_p90_changes_the_choice(tmp_path: Path) -> None:
    """The expected-cost optimum (6 nodes) has its P90 (the high future) above the cap; 10 nodes and more
    are below it: the choice is the least expected cost among those, and futures.json says what the cap
    costs against the unconstrained choice."""
    scenario = _scenario(tmp_path)
    r, o = _rates(scenario)
    p90 = {n: _cost(n, 14, r, o) for n in (6, 8, 10)}  # the high future (14 nodes) is the P90 here
    cap = (p90[8] + p90[10]) / 2
    futures = _with_risk(tmp_path, {"cap": {"quantile": 0.9, "usd": cap}})
    result = _invoke(tmp_path, scenario, futures)
    assert result.exit_code == 0, result.output
    doc = FuturesDocument.read(tmp_path / "out" / "futures.json")
    _check_costs(doc, r, o)
    quantiles = {c.name: _quantile(c.cost_usd, 0.9) for c in doc.candidates}
    for c in doc.candidates:
        assert c.cap_quantile_usd == pytest.approx(quantiles[c.name], rel=1e-9)
        assert (not c.why_not) == (quantiles[c.name] <= cap)
    unconstrained = min(doc.candidates, key=lambda c: (_expected(c), c.name))
    assert _level(unconstrained) == 6 and quantiles[unconstrained.name] > cap
    within = [c for c in doc.candidates if quantiles[c.name] <= cap]
    chosen = min(within, key=lambda c: (_expected(c), c.name))
    assert doc.chosen == chosen.name != unconstrained.name
    assert _level(chosen) == 10
    assert doc.summary.p90_usd == pytest.approx(quantiles[chosen.name]) and doc.summary.p90_usd <= cap
    assert doc.summary.unconstrained == unconstrained.name
    assert doc.summary.unconstrained_expected_usd == pytest.approx(_expected(unconstrained), rel=1e-9)
    assert doc.summary.expected_usd == pytest.approx(_expected(chosen), rel=1e-9)
    assert f"P90 ${quantiles[chosen.name]:,.0f}, within the cap of ${cap:,.0f}" in result.output
    assert f"without these constraints: {unconstrained.name}" in result.output
    md = (tmp_path / "out" / "futures.md").read_text()
    assert "P90 (capped)" in md and "above the cap" in md

    # futures.json is schema v2; a v1 file (before the risk constraints) still loads
    data = json.loads((tmp_path / "out" / "futures.json").read_text())
    assert data["schema"] == "gpuplan.futures/v2"
    data["schema"] = "gpuplan.futures/v1"
    for key in ("cap", "committed_share"):
        del data["risk"][key]
    for candidate in data["candidates"]:
        for key in ("cap_quantile_usd", "committed_share", "committed_share_weight", "why_not"):
            del candidate[key]
    for key in ("unconstrained", "unconstrained_expected_usd"):
        del data["summary"][key]
    old = tmp_path / "v1.json"
    old.write_text(json.dumps(data), encoding="utf-8")
    assert FuturesDocument.read(old).chosen == doc.chosen


def test_the_committed_share_chance_constraint_excludes_the_cheapest(tmp_path: Path) -> None:
    """70 % of the latency-critical node-hours on committed capacity in 60 % of the weight: 6 nodes (the
    cheapest expected) meet it only in the low future (weight 0.5), so it is excluded."""
    scenario = _scenario(tmp_path)
    r, o = _rates(scenario)
    risk = {"committed_share": {"min": 0.7, "probability": 0.6}}
    result = _invoke(tmp_path, scenario, _with_risk(tmp_path, risk))
    assert result.exit_code == 0, result.output
    doc = FuturesDocument.read(tmp_path / "out" / "futures.json")
    _check_costs(doc, r, o)
    met = {}
    for c in doc.candidates:
        n = _level(c)
        shares = {f: min(n, d) / d for f, d in DEMAND.items()}
        assert c.committed_share == pytest.approx(shares), c.name
        met[c.name] = sum(WEIGHTS[f] for f, share in shares.items() if share >= 0.7 - 1e-9)
        assert c.committed_share_weight == pytest.approx(met[c.name]), c.name
        assert (not c.why_not) == (met[c.name] >= 0.6 - 1e-9), c.name
    cheapest = min(doc.candidates, key=lambda c: (_expected(c), c.name))
    assert _level(cheapest) == 6 and met[cheapest.name] == pytest.approx(0.5)
    assert cheapest.why_not and "below 60%" in cheapest.why_not[0]
    chosen = min(
        (c for c in doc.candidates if met[c.name] >= 0.6 - 1e-9), key=lambda c: (_expected(c), c.name)
    )
    assert doc.chosen == chosen.name and _level(chosen) > 6
    assert "of the latency-critical node-hours on committed capacity in" in result.output
    md = (tmp_path / "out" / "futures.md").read_text()
    assert "Latency-critical node-hours on committed capacity, per candidate and future" in md


def test_a_cap_no_candidate_meets_is_an_error_naming_the_least_quantile(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path)
    r, o = _rates(scenario)
    futures = _with_risk(tmp_path, {"cap": {"quantile": 0.9, "usd": 1000.0}})
    result = _invoke(tmp_path, scenario, futures)
    assert result.exit_code == 2, result.output
    assert "futures.yaml: risk.cap: no candidate purchase keeps the P90 cost within $1,000" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
    # the least P90 of the candidates priced: 14 nodes (the high future's own plan) pay 14 r in every future
    found = re.search(r"the least P90 any reaches is \$([\d,]+) \(([^,]+),", result.output)
    assert found is not None, result.output
    assert float(found.group(1).replace(",", "")) == pytest.approx(_cost(14, 14, r, o), abs=1.0)


def test_committed_share_without_latency_critical_demand_is_refused(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path)
    text = scenario.read_text().replace("latency_critical: true", "latency_critical: false")
    scenario.write_text(text, encoding="utf-8")
    risk = {"committed_share": {"min": 0.5, "probability": 0.9}}
    result = _invoke(tmp_path, scenario, _with_risk(tmp_path, risk))
    assert result.exit_code == 2, result.output
    assert "futures.yaml: risk.committed_share: " in result.output and "no latency-critical" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("risk", "named"),
    [
        ({"cap": {"usd": -5}}, "risk.cap.usd"),
        ({"cap": {"quantile": 1.5, "usd": 10}}, "risk.cap.quantile"),
        ({"committed_share": {"min": 0.5}}, "risk.committed_share.probability"),
        ({"committed_share": {"min": 2, "probability": 0.5}}, "risk.committed_share.min"),
    ],
)
def test_bad_risk_settings_are_named(tmp_path: Path, risk: dict[str, Any], named: str) -> None:
    scenario = _scenario(tmp_path)
    result = _invoke(tmp_path, scenario, _with_risk(tmp_path, risk))
    assert result.exit_code == 2, result.output
    assert named in result.output and "futures.yaml" in result.output, result.output
    assert not (tmp_path / "out").exists()
