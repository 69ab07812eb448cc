"""Names users write reach report.md and the chargeback outputs as text, never as markup: a scenario,
team or project named like HTML is escaped in report.md (Markdown renderers pass raw HTML through) and
in chargeback.html, and printed literally by the chargeback summary (rich would read ``[red]`` as markup)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml
from typer.testing import CliRunner

from planner.cli import app

DEMO = Path(__file__).resolve().parents[2] / "planner" / "operations" / "portal" / "demo" / "scenario.yaml"
SCENARIO = "<script>alert(1)</script>"
TEAM = "<b>research</b> [red]"


def test_user_names_escaped_in_report_md_and_chargeback(tmp_path: Path):
    scenario = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    scenario["name"] = SCENARIO
    scenario["description"] = "R&D <img src=x onerror=alert(2)>"
    scenario["teams"][0]["name"] = TEAM
    scenario["inference"][0]["team"] = TEAM
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    plan = tmp_path / "plan"
    result = CliRunner().invoke(app, ["plan", str(path), "-o", str(plan), "-q", "--time-limit", "30"])
    assert result.exit_code == 0, result.output

    report = (plan / "report.md").read_text(encoding="utf-8")
    body, _, echo = report.partition("## Inputs (scenario echo)")
    assert "# gpuplan report: &lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "R&amp;D &lt;img src=x onerror=alert(2)&gt;" in body
    assert "| &lt;b&gt;research&lt;/b&gt; [red] |" in body
    assert "<script" not in body and "<img" not in body and "<b>" not in body
    # the scenario echo is a code block: its names stay as written, and nothing in it closes the fence
    assert '"name": "<script>alert(1)</script>"' in echo and echo.lstrip().startswith("```json")

    usage = tmp_path / "usage.csv"
    offering = next(iter(json.loads((plan / "plan.json").read_text(encoding="utf-8"))["offerings"]))
    pd.DataFrame(
        [[TEAM, "<script>alert(3)</script>", "2027-03-01T00:00:00Z", "2027-03-01T10:00:00Z", 2, offering,
          "on_demand"]],
        columns=["team", "project", "start", "end", "gpus", "offering", "tier"],
    ).to_csv(usage, index=False)  # fmt: skip
    result = CliRunner().invoke(
        app, ["chargeback", str(plan), "--usage", str(usage), "-o", str(tmp_path / "cb")]
    )
    assert result.exit_code == 0, result.output
    assert f"  {TEAM}: $" in result.output
    html = (tmp_path / "cb" / "chargeback.html").read_text(encoding="utf-8")
    assert "<script>alert(3)" not in html and "<b>research" not in html
    assert "&lt;script&gt;alert(3)&lt;/script&gt;" in html
