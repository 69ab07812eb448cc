"""report.html of the reference example, opened in a real headless Chromium (see ``tests/browser.py``).

The page must render with no JavaScript error, fetch nothing from outside ``file://`` (it has to work
offline, from a mail attachment or a CI artifact), draw every plotly chart it embeds, and show the
report's sections as visible text. Skipped, with the reason, where playwright or Chromium is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from browser import open_page

from planner.outputs.reports.kit import fmt_usd

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "scenarios" / "mixed-fleet.yaml"

# The report's section headings (planner/outputs/reports/plan.py's html template) and two chart titles that
# only plotly draws (inside the charts' svg), so they are visible only if the charts really rendered.
HEADINGS = [  # in page order: the decision first, solver details last (issue 11)
    "Purchase schedule",
    "Savings",
    "Charts",
    "Costs",
    "Training placements",
    "Spot risk",
    "Unserved demand",
    "Plan and solver",
]
CHART_TITLES = ["Node-hours per tier over time", "GPUs per team over time"]

# the one-year example, planned once per session (tests/conftest.py's example_plan, on its xdist worker)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("mixed-fleet")]


def test_example_report_renders_in_a_browser(example_plan: Path) -> None:
    plan_dir = example_plan
    report = plan_dir / "report.html"
    plan = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
    embedded = report.read_text(encoding="utf-8").count('class="plotly-graph-div"')
    assert embedded > 0, "report.html embeds no plotly chart"

    page = open_page(report)

    assert page.page_errors == []
    assert page.console_errors == []
    assert page.outside_requests == [], "report.html must work offline"
    assert page.failed_requests == []
    assert not page.charts_timed_out, f"only {page.charts_rendered} of {page.chart_divs} charts drew"
    assert page.chart_divs == embedded
    assert page.charts_rendered >= embedded

    scenario = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))["name"]  # mixed-fleet-2027
    assert page.title.strip()
    assert scenario in page.title
    text = page.text
    assert f"gpuplan report: {scenario}" in text
    missing = [s for s in [*HEADINGS, *CHART_TITLES] if s not in text]
    assert missing == [], f"not visible on the page: {missing}"
    at = [text.index(f"\n{heading}\n") for heading in HEADINGS]  # the sections, as headings on the page
    assert at == sorted(at), "sections out of order: the decision first, solver details last"
    assert f"Total cost: {fmt_usd(plan['costs']['total_usd'])}" in text
    assert "saves" in text  # the headline's savings against the baselines
