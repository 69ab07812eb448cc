"""The report's charts fit their cards in Chromium: at two screen widths and printed (issue 42, point 5).

A headless capture (a screenshot, a PDF, a CI artifact) shows a chart as plotly first drew it: nothing
redraws it for the capture. So every chart must have its card's final width when it is first drawn, a
printed chart (laid out again at the paper's width, no script run) must scale into its card, and the
mode bar, drawn over the top right of a chart, must not cover the title. The plan is a real two-day plan
of a small scenario (``gpuplan plan``, about two seconds), with a commitment bought, so the page has all
five charts: the purchase schedule and the four of the Charts section. The chargeback page of the same
plan (``gpuplan chargeback``) is captured too: every html report shares the charts' kit and base page.
"""

from __future__ import annotations

import pytest
from browser import A4_PRINT_WIDTH, Capture, ChartGeometry, capture_charts
from typer.testing import CliRunner

from planner.cli import app

REPORT_CHARTS = [
    "chart-purchase-schedule",
    "chart-nodes-per-tier",
    "chart-cost-by-tier",
    "chart-cost-by-team",
    "chart-gpus-per-team",
]
CAPTURES = [
    Capture("1280 px (two chart columns)", 1280, print_width=A4_PRINT_WIDTH),  # printed on A4 too
    Capture("760 px (one chart column)", 760),
]
PAGES = {"report.html": REPORT_CHARTS, "chargeback.html": ["chart-teams"]}
NAMES = [name for c in CAPTURES for name in (c.name, *([c.printed] if c.print_width else []))]


@pytest.fixture(scope="module")
def geometry(tmp_path_factory: pytest.TempPathFactory, kit) -> dict[str, dict[str, list[ChartGeometry]]]:
    """Per page of PAGES, of a small real plan: its charts, captured as CAPTURES says."""
    root = tmp_path_factory.mktemp("report-layout")
    kit.write_catalog_csv(
        root / "catalog.csv", [kit.offering_row(on_demand_usd_h=10.0, spot_usd_h=4.0, reserved_1y_usd_h=6.0)]
    )

    def service(name: str, team: str, base: int, peak: int, hour: int) -> dict:
        return {
            "name": name,
            "team": team,
            "gpus_per_replica": 8,
            "gpu_models": ["H100"],
            "latency_critical": team == "serving",
            "replicas": {"profile": "diurnal", "base": base, "peak": peak, "peak_hour_utc": hour},
        }

    scenario = kit.scenario_dict(
        hours=48,
        name="report-layout",
        terms=["1y"],
        teams=[{"name": "serving"}, {"name": "research"}],
        inference=[service("chat", "serving", 2, 4, 15), service("embed", "research", 1, 3, 3)],
    )
    kit.write_scenario_yaml(root / "scenario.yaml", scenario)
    out = root / "plan"
    result = CliRunner().invoke(app, ["plan", str(root / "scenario.yaml"), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["chargeback", str(out), "-o", str(out / "chargeback")])
    assert result.exit_code == 0, result.output
    where = {"report.html": out / "report.html", "chargeback.html": out / "chargeback" / "chargeback.html"}
    return capture_charts(where, CAPTURES)


@pytest.mark.parametrize("page", PAGES)
def test_every_chart_fits_its_card_on_screen_and_printed(
    geometry: dict[str, dict[str, list[ChartGeometry]]], page: str
) -> None:
    assert sorted(geometry[page]) == sorted(NAMES)
    problems = []
    for name in NAMES:
        charts = geometry[page][name]
        assert [c.chart for c in charts] == PAGES[page], name
        assert all(c.titles and c.drawn for c in charts), name  # there is something to compare
        problems += [f"{name}: {c.chart}: {p}" for c in charts for p in c.overflow()]
    assert problems == []


@pytest.mark.parametrize("page", PAGES)
def test_the_mode_bar_never_covers_a_title(
    geometry: dict[str, dict[str, list[ChartGeometry]]], page: str
) -> None:
    for capture in CAPTURES:  # on screen the mode bar is laid out (shown while the pointer is over the chart)
        assert all(c.modebar is not None for c in geometry[page][capture.name]), capture.name
    covered = [
        f"{name}: {c.chart}: mode bar {c.modebar} over title {t}"
        for name in NAMES
        for c in geometry[page][name]
        for t in c.modebar_over_titles()
    ]
    assert covered == []
