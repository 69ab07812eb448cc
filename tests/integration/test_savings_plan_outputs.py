"""What acts on a plan holding a savings plan (issue 38), on the AWS mixed-fleet week holding one
(``tests/provision_plans.py``, ``aws-sp``): the report's Savings plans section shows plan.json's figures,
plan.json's price sources list the savings-plan rate with where it came from, and provision, the daemon,
Terraform, Kueue and Karpenter treat the savings plan as billing, not a resource: the nodes it covers run
on demand, nothing is launched for it, and provision says where it is bought."""

from __future__ import annotations

import json
import math
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from daemon_days import daemon_config, fleet, planned
from provision_plans import HELD_SAVINGS_PLAN, SP_USD_PER_HOUR
from typer.testing import CliRunner

from models.plan import Plan
from models.tiers import CapacityType, Tier
from planner.cli import app
from planner.outputs.desired import desired_state
from planner.outputs.reports.plan import render_html, render_markdown
from providers.sim import SimProvider

SP_OFFERING = "aws:us-east-1:p5.48xlarge"


@pytest.fixture(scope="module")
def sp_week(week_plan: Any) -> Plan:
    plan = Plan.read(week_plan("aws-sp"))
    assert plan.document.savings_plans and (plan.allocations["tier"] == Tier.SAVINGS_PLAN).any()
    return plan


def _covered_period(plan: Plan) -> int:
    rows = plan.allocations
    covered = rows[(rows["tier"] == Tier.SAVINGS_PLAN) & (rows["kind"] == "inference")]
    return int(covered.groupby("period")["nodes"].sum().idxmax())


# ---- the report ---------------------------------------------------------------------------------------


def test_report_shows_the_savings_plan_with_plan_json_figures(sp_week: Plan) -> None:
    doc = sp_week.document
    (sp,) = doc.savings_plans
    text = render_markdown(doc, sp_week.allocations)
    section = text.split("## Savings plans\n", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith(f"| {sp.name} |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # independent: the covered rows at the on-demand rate, from allocations.csv and plan.json's offerings
    rows = sp_week.allocations[sp_week.allocations["tier"] == Tier.SAVINGS_PLAN]
    hours = doc.horizon.period_hours
    at_od = sum(
        float(r.nodes) * hours * (doc.offerings[str(r.offering)].on_demand_usd_h or 0.0)
        for r in rows.itertuples()
    )
    assert cells == [
        "sp-p5", "AWS EC2 Instance Savings Plan, held", "1y", "ec2-instance p5 us-east-1",
        f"${SP_USD_PER_HOUR:,.2f}", "168", f"${sp.cost_in_horizon_usd:,.0f}", f"${sp.spent_usd:,.0f}",
        f"{sp.spent_usd / sp.cost_in_horizon_usd:.1%}", f"${at_od:,.0f}", f"${at_od - sp.spent_usd:,.0f}",
        f"${sp.obligation_beyond_horizon_usd:,.0f}",
    ]  # fmt: skip
    assert sp.cost_in_horizon_usd == pytest.approx(SP_USD_PER_HOUR * 168)
    assert f"${max(sp.cost_in_horizon_usd - sp.spent_usd, 0):,.0f} in the horizon" in section
    # cost by tier shows the savings_plan tier at its commitment
    assert f"| savings_plan | ${doc.costs.by_tier[Tier.SAVINGS_PLAN]:,.0f} |" in text
    html = render_html(doc, sp_week.allocations)
    assert 'id="savings-plans"' in html and "AWS EC2 Instance Savings Plan, held" in html
    # the price line counts the savings-plan rate
    assert doc.prices is not None and doc.prices.summary[1:] in text


def test_no_savings_plans_section_without_one(sp_week: Plan) -> None:
    doc = sp_week.document.model_copy(update={"savings_plans": []})
    assert "## Savings plans" not in render_markdown(doc, sp_week.allocations)
    assert 'id="savings-plans"' not in render_html(doc, sp_week.allocations)


# ---- price sources -------------------------------------------------------------------------------------


def test_price_sources_list_the_savings_plan_rate_and_its_source(sp_week: Plan) -> None:
    prices = sp_week.document.prices
    assert prices is not None
    (use,) = [u for u in prices.used if u.tier == Tier.SAVINGS_PLAN]
    rows = sp_week.allocations[sp_week.allocations["tier"] == Tier.SAVINGS_PLAN]
    assert use.offering == SP_OFFERING
    assert use.usd_per_node_hour == sp_week.document.savings_plans[0].rates[SP_OFFERING]
    assert use.node_hours == pytest.approx(float(rows["nodes"].sum()) * sp_week.document.horizon.period_hours)
    # from the embedded terms file's row (models/data/catalog.terms.csv)
    terms = (Path(__file__).parents[2] / "models" / "data" / "catalog.terms.csv").read_text().splitlines()
    line = next(t for t in terms if t.startswith(f"{SP_OFFERING},savings-plan-ec2-instance,1,"))
    assert f",{use.usd_per_node_hour:g}," in line and use.basis == "quoted" and line.endswith(",quoted")
    assert use.as_of is not None and line.split(",")[-2].startswith(f"{use.as_of:%Y-%m-%d}")
    assert use.source.startswith("AWS EC2 Instance Savings Plan, 1y, no upfront: Public GitHub file")
    assert sum(prices.counts.values()) == len(prices.used)


# ---- provisioning: the savings plan is billing; the nodes it covers run on demand -----------------------


def test_provision_launches_covered_nodes_on_demand_and_names_where_the_plan_is_bought(
    sp_week: Plan, week_plan: Any, tmp_path: Path
) -> None:
    period = _covered_period(sp_week)
    at = sp_week.document.horizon.start + timedelta(hours=period)
    result = CliRunner().invoke(
        app,
        ["provision", str(week_plan("aws-sp")), "--at", f"{at:%Y-%m-%dT%H:%M:%SZ}", "--cloud", "sim",
         "--sim-state", str(tmp_path / "sim.json"), "--actions", str(tmp_path / "actions.json")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "savings plan sp-p5" in result.output
    assert "bought in the AWS Billing console or the Savings Plans API" in result.output
    actions = json.loads((tmp_path / "actions.json").read_text())["actions"]
    assert all("sp-p5" not in json.dumps(a) for a in actions)
    rows = sp_week.allocations
    mine = rows[
        (rows["period"] == period) & (rows["offering"] == SP_OFFERING) & (rows["kind"] == "inference")
    ]
    expected = math.ceil(float(mine[mine["tier"] != Tier.SPOT]["nodes"].sum()) - 1e-6)
    assert expected > 0
    desired = desired_state(sp_week, at, handles=lambda o: o.startswith("aws:"))
    pool = next(
        p for p in desired.pools if p.offering == SP_OFFERING and p.capacity == CapacityType.ON_DEMAND
    )
    assert pool.nodes == expected
    launched = sum(a["count"] for a in actions if a["kind"] == "launch" and a.get("offering") == SP_OFFERING
                   and a.get("capacity") == CapacityType.ON_DEMAND)  # fmt: skip
    assert launched == expected


def test_the_daemon_reconciles_a_plan_holding_a_savings_plan(week_plan: Any, tmp_path: Path) -> None:
    from planner.operations.daemon.config import load_config
    from planner.operations.daemon.daemon import Daemon

    source = week_plan("aws-sp")
    config = load_config(daemon_config(tmp_path, source.parent / "scenario.yaml"))

    def planner(config: Any, previous: Any, now: datetime, live: dict[str, float]) -> Path:
        target = config.plans_dir / f"plan-{now:%Y%m%dT%H%M%SZ}"
        shutil.copytree(source, target)
        return target

    cloud = SimProvider(config.sim_state, sleep=lambda _s: None)
    cloud.configure(api_latency_seconds=0.0, boot_seconds=0.0)
    daemon = Daemon(config, provider=cloud, planner=planner)
    plan = Plan.read(source)
    now = plan.document.horizon.start + timedelta(hours=_covered_period(plan))
    daemon.tick(now)
    assert fleet(config.sim_state) == planned(plan, now)


def test_terraform_lists_the_savings_plan_as_billing_not_a_resource(
    sp_week: Plan, week_plan: Any, tmp_path: Path
) -> None:
    result = CliRunner().invoke(app, ["terraform", str(week_plan("aws-sp")), "-o", str(tmp_path / "tf")])
    assert result.exit_code == 0, result.output
    readme = (tmp_path / "tf" / "aws" / "README.md").read_text()
    section = readme.split("## Savings plans (billing, not resources)", 1)[1].split("\n## ", 1)[0]
    (sp,) = sp_week.document.savings_plans
    assert (
        f"| sp-p5 | savings-plan-ec2-instance | ec2-instance p5 us-east-1 | 1y | ${SP_USD_PER_HOUR:,.2f} |"
        in (section)
    )
    assert f"${sp.obligation_beyond_horizon_usd:,.0f}" in section
    assert "sp-p5" not in (tmp_path / "tf" / "aws" / "terraform.tfvars.json").read_text()
    assert HELD_SAVINGS_PLAN["name"] == "sp-p5"


def test_karpenter_and_k8s_write_a_plan_holding_a_savings_plan(week_plan: Any, tmp_path: Path) -> None:
    for command in ("karpenter", "k8s"):
        result = CliRunner().invoke(app, [command, str(week_plan("aws-sp")), "-o", str(tmp_path / command)])
        assert result.exit_code == 0, result.output
