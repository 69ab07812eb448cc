"""`gpuplan whatif --futures` (issue 41): the what-if page's futures view, on the newsvendor case of
``test_futures.py``: the base planned over three futures beside the variants, the buyer's figures in
whatif.json equal to futures.json's, and the cost-distribution chart of the chosen purchases, the point
forecast's and the best peer's on whatif.html."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from models.futures import FuturesDocument
from planner.cli import app
from planner.outputs.reports.futures import distribution_curves
from tests.integration.test_futures import SKEWED, _futures, _scenario


def test_whatif_with_futures_adds_the_futures_view(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path)
    out = tmp_path / "whatif"
    result = CliRunner().invoke(
        app, ["whatif", str(scenario), "--vary", "demand=x1.2", "--futures", str(_futures(tmp_path, SKEWED)),
              "-o", str(out), "--time-limit", "10", "--workers", "2", "-q"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = FuturesDocument.read(out / "futures" / "futures.json")
    assert {p.name for p in (out / "futures" / "chosen").iterdir()} == {n for n, _w, _x in SKEWED}
    figures = json.loads((out / "whatif.json").read_text())["futures"]
    s = doc.summary
    assert figures["chosen"] == doc.chosen and figures["futures"] == len(SKEWED)
    for key in ("expected_usd", "p10_usd", "p90_usd", "vss_usd", "evpi_usd"):
        assert figures[key] == pytest.approx(getattr(s, key), rel=1e-12)
    page = (out / "whatif.html").read_text()
    assert '<h2 id="futures">Futures</h2>' in page and 'id="chart-futures"' in page
    curves = distribution_curves(doc)
    assert len(curves) >= 2  # the chosen purchases and the point forecast's differ here
    for label in curves:
        assert json.dumps(label)[1:-1] in page  # each curve is a named trace of the chart
    markdown = (out / "whatif.md").read_text()
    assert "## Futures" in markdown
    assert f"expected cost ${s.expected_usd:,.0f}" in markdown
    assert f"Value of the stochastic solution: ${s.vss_usd:,.0f}" in markdown


def test_a_bad_futures_file_stops_the_whatif_before_any_plan(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path)
    bad = tmp_path / "futures.yaml"
    bad.write_text("futures:\n  - {name: only-one, vary: [demand=x0.9]}\n", encoding="utf-8")
    out = tmp_path / "whatif"
    result = CliRunner().invoke(
        app, ["whatif", str(scenario), "--vary", "demand=x1.2", "--futures", str(bad), "-o", str(out), "-q"]
    )
    assert result.exit_code == 2, result.output
    assert "futures.yaml" in result.output and "futures" in result.output
    assert not out.exists()  # nothing written
