"""`gpuplan chargeback` on real plans (the mixed-fleet week on AWS and on all three clouds, the session
plans of tests/conftest.py): totals reconcile with plan.json to the cent under both idle rules, usage
CSVs are charged and reconcile with their bill, and bad input exits 2 with one line and writes nothing."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from models.usage import USAGE_COLUMNS
from planner.cli import app


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["chargeback", *args])


@pytest.mark.parametrize("cloud", ["aws", "all", "aws-sp"])  # aws-sp: the AWS week holding a savings plan
@pytest.mark.parametrize("rule", ["guarantees", "usage"])
def test_plan_chargeback_reconciles_to_the_cent(week_plan, tmp_path: Path, cloud: str, rule: str):
    plan_dir = week_plan(cloud)
    result = run(str(plan_dir), "-o", str(tmp_path / "cb"), "--idle-rule", rule)
    assert result.exit_code == 0, result.output
    assert "reconciles to the cent" in result.output
    plan = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
    rows = pd.read_csv(tmp_path / "cb" / "chargeback.csv")
    assert abs(rows["cost_usd"].sum() - plan["costs"]["total_usd"]) < 0.005
    # one row per (month, team, project, tier)
    assert not rows.duplicated(["month", "team", "project", "tier"]).any()
    # GPU-hours of whole-GPU workloads are the plan's own (gpus x period hours per row)
    alloc = pd.read_csv(plan_dir / "allocations.csv")
    mig = {s["name"] for s in plan["inputs"]["inference"] if s.get("gpu_memory_gb") is not None}
    whole = alloc[~alloc["workload"].isin(mig)]
    charged = rows[rows["project"].isin(set(whole["workload"]))]
    assert charged["gpu_hours"].sum() == pytest.approx(whole["gpus"].sum() * plan["horizon"]["period_hours"])
    doc = json.loads((tmp_path / "cb" / "chargeback.json").read_text(encoding="utf-8"))
    assert doc["reconciliation"]["reconciled"] and doc["idle_rule"] == rule
    html = (tmp_path / "cb" / "chargeback.html").read_text(encoding="utf-8")
    assert "chart-teams" in html and "Unit rates" in html
    if cloud == "aws-sp":  # the savings plan's whole cost is charged to teams, on its own tier
        (sp,) = plan["savings_plans"]
        on_plan = rows[rows["tier"] == "savings_plan"]["cost_usd"]
        # chargeback.csv is in cents: each row within half a cent of its share
        assert on_plan.sum() == pytest.approx(sp["cost_in_horizon_usd"], abs=0.005 * len(on_plan) + 1e-9)
        (window,) = [w for w in doc["idle"] if w["commitment"] == sp["name"]]
        assert window["used_node_hours"] == pytest.approx(sp["spent_usd"])
        assert window["idle_usd"] == pytest.approx(sp["unspent_usd"])
    if rule == "guarantees":
        # the default rule is plan.json's: its cost by team is this split, to the cent (issue 42)
        by_team = rows.groupby("team")["cost_usd"].sum()
        for team, usd in plan["costs"]["by_team"].items():
            assert by_team.get(team, 0.0) == pytest.approx(usd, abs=0.01)


def test_mig_service_charged_by_compute_slices(week_plan, tmp_path: Path):
    """embed-small (9 GB replicas: a 1g.10gb slice on an H100 or an A100-40GB, 1 of 7 compute slices
    on either) is charged replicas x 1/7 GPU-hours."""
    plan_dir = week_plan("aws")
    assert run(str(plan_dir), "-o", str(tmp_path / "cb")).exit_code == 0
    alloc = pd.read_csv(plan_dir / "allocations.csv")
    embed = alloc[alloc["workload"] == "embed-small"]
    assert set(embed["offering"].str.split(":").str[2]) <= {"p5.48xlarge", "p4d.24xlarge"}  # H100, A100-40GB
    rows = pd.read_csv(tmp_path / "cb" / "chargeback.csv")
    charged = rows[rows["project"] == "embed-small"]["gpu_hours"].sum()
    assert charged == pytest.approx(embed["replicas"].sum() / 7)


def _usage(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(USAGE_COLUMNS)
        writer.writerows(rows)
    return path


def test_usage_chargeback_reconciles_with_its_bill(week_plan, tmp_path: Path):
    plan_dir = week_plan("aws")
    plan = json.loads((plan_dir / "plan.json").read_text(encoding="utf-8"))
    reserved = plan["commitments"][0]
    offering = plan["offerings"][reserved["offering"]]
    usage = _usage(
        tmp_path / "usage.csv",
        [
            ["assistant", "chat", "assistant", "2027-02-01T00:00:00Z", "2027-02-03T00:00:00Z", "8", "",
             reserved["offering"], "reserved_3y"],
            ["research", "pretrain", "research", "2027-02-02T00:00:00Z", "2027-02-02T05:00:00Z", "16", "",
             reserved["offering"], "on_demand"],
        ],
    )  # fmt: skip
    result = run(str(plan_dir), "--usage", str(usage), "-o", str(tmp_path / "cb"))
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(tmp_path / "cb" / "chargeback.csv")
    # the bill by hand: every commitment of the plan for all of February (the usage's month: they run
    # from 2027-02-01 for three years, so 28 x 24 = 672 h each), and 80 on-demand GPU-hours
    assert all(c["start"] == "2027-02-01T00:00:00Z" and c["end"] > "2027-03" for c in plan["commitments"])
    commitments = sum(c["nodes"] * c["usd_per_node_hour"] * 672 for c in plan["commitments"])
    bill = commitments + 80 * offering["on_demand_usd_h"] / offering["gpus_per_node"]
    assert abs(rows["cost_usd"].sum() - bill) < 0.005


def test_bad_usage_exits_2_and_writes_nothing(week_plan, tmp_path: Path):
    plan_dir = week_plan("aws")
    usage = _usage(
        tmp_path / "usage.csv",
        [["assistant", "chat", "ns", "2027-02-02T00:00:00Z", "2027-02-01T00:00:00Z", "8", "",
          "aws:us-east-1:p5.48xlarge", "on_demand"]],
    )  # fmt: skip
    out = tmp_path / "cb"
    result = run(str(plan_dir), "--usage", str(usage), "-o", str(out))
    assert result.exit_code == 2
    assert "usage.csv: row 2, column end: must be after start" in result.output
    assert "Traceback" not in result.output
    assert not out.exists() and not list(tmp_path.glob(".cb*"))
    missing = run(str(tmp_path / "no-plan"), "-o", str(out))
    assert missing.exit_code == 2 and not out.exists()
    wrong_month = run(str(plan_dir), "-o", str(out), "--month", "2027-07")
    assert wrong_month.exit_code == 2 and "nothing to charge" in wrong_month.output and not out.exists()


DEMO_SCENARIO = (
    Path(__file__).resolve().parents[2] / "planner" / "operations" / "portal" / "demo" / "scenario.yaml"
)


@pytest.fixture(scope="module")
def demo_plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The portal's demo plan (two weeks from 2027-03-01, on demand and spot only: no commitments)."""
    out = tmp_path_factory.mktemp("demo") / "plan"
    result = CliRunner().invoke(app, ["plan", str(DEMO_SCENARIO), "-o", str(out), "-q", "--time-limit", "30"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "plan.json").read_text(encoding="utf-8"))["commitments"] == []
    return out


def test_demo_plan_without_commitments_charged_from_usage_and_opencost(demo_plan: Path, tmp_path: Path):
    """It raised KeyError: 'used_node_hours' on any usage (issue 36). By hand from plan.json's prices:
    research 2 GPUs x 10 h on demand, vision 8 GPUs x 5 h on spot."""
    plan = json.loads((demo_plan / "plan.json").read_text(encoding="utf-8"))
    (offering_id, offering), *_ = plan["offerings"].items()
    per_gpu = offering["gpus_per_node"]
    research = 20 * offering["on_demand_usd_h"] / per_gpu
    vision = 40 * offering["spot_usd_h"] / per_gpu
    usage = _usage(
        tmp_path / "usage.csv",
        [
            ["research", "eval", "research", "2027-03-01T00:00:00Z", "2027-03-01T10:00:00Z", "2", "",
             offering_id, "on_demand"],
            ["vision", "ft", "vision", "2027-03-02T00:00:00Z", "2027-03-02T05:00:00Z", "8", "", offering_id,
             "spot"],
        ],
    )  # fmt: skip
    result = run(str(demo_plan), "--usage", str(usage), "-o", str(tmp_path / "cb"))
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(tmp_path / "cb" / "chargeback.csv")
    assert rows.groupby("team")["cost_usd"].sum().to_dict() == pytest.approx(
        {"research": research, "vision": vision},
        abs=0.01,  # chargeback.csv is in cents
    )
    doc = json.loads((tmp_path / "cb" / "chargeback.json").read_text(encoding="utf-8"))
    assert doc["reconciliation"]["reconciled"] and doc["idle"] == []
    pod = {"start": "2027-03-01T00:00:00Z", "end": "2027-03-01T10:00:00Z", "gpuHours": 20.0}
    labels = {"gpuplan.io/offering": offering_id}
    export = {
        "code": 200,
        "data": [{"eval-0": {**pod, "properties": {"namespace": "research", "labels": labels}}}],
    }
    (tmp_path / "allocation.json").write_text(json.dumps(export), encoding="utf-8")
    result = run(str(demo_plan), "--opencost", str(tmp_path / "allocation.json"), "-o", str(tmp_path / "oc"))
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(tmp_path / "oc" / "chargeback.csv")
    assert rows["cost_usd"].sum() == pytest.approx(research, abs=0.01)  # in cents


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (["marketing", "", "", "2027-03-01T00:00:00Z", "2027-03-01T10:00:00Z", "2", "", "{o}", "on_demand"],
         "row 2, column team: 'marketing' is not a team of the plan (research, vision)"),
        (["research", "", "", "2031-03-01T00:00:00Z", "2031-03-02T00:00:00Z", "2", "", "{o}", "on_demand"],
         "row 2, column end: 2031-03-02T00:00:00Z is after the plan's horizon"),
        (["research", "", "", "2027-03-01T00:00:00Z", "2027-03-01T10:00:00Z", "nan", "", "{o}", "on_demand"],
         "row 2, column gpus: must be a finite number, got 'nan'"),
    ],
)  # fmt: skip
def test_wrong_usage_exits_2_with_one_line_and_writes_nothing(
    demo_plan: Path, tmp_path: Path, row: list[str], message: str
):
    plan = json.loads((demo_plan / "plan.json").read_text(encoding="utf-8"))
    offering = next(iter(plan["offerings"]))
    usage = _usage(tmp_path / "usage.csv", [[cell.replace("{o}", offering) for cell in row]])
    out = tmp_path / "cb"
    result = run(str(demo_plan), "--usage", str(usage), "-o", str(out))
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and f"usage.csv: {message}" in result.output
    assert not out.exists() and not list(tmp_path.glob(".cb*"))


def test_allow_outside_horizon(demo_plan: Path, tmp_path: Path):
    """Usage after the demo's two weeks: refused, then charged at the plan's rates with the flag."""
    plan = json.loads((demo_plan / "plan.json").read_text(encoding="utf-8"))
    (offering_id, offering), *_ = plan["offerings"].items()
    usage = _usage(
        tmp_path / "usage.csv",
        [
            [
                "research",
                "",
                "",
                "2027-04-01T00:00:00Z",
                "2027-04-01T01:00:00Z",
                "8",
                "",
                offering_id,
                "on_demand",
            ]
        ],
    )
    refused = run(str(demo_plan), "--usage", str(usage), "-o", str(tmp_path / "cb"))
    assert refused.exit_code == 2 and "--allow-outside-horizon" in refused.output
    allowed = run(
        str(demo_plan), "--usage", str(usage), "-o", str(tmp_path / "cb"), "--allow-outside-horizon"
    )
    assert allowed.exit_code == 0, allowed.output
    rows = pd.read_csv(tmp_path / "cb" / "chargeback.csv")
    assert rows["cost_usd"].sum() == pytest.approx(
        offering["on_demand_usd_h"], abs=0.005
    )  # one node-hour, in cents
    assert list(rows["month"]) == ["2027-04"]
    bad_month = run(str(demo_plan), "-o", str(tmp_path / "m"), "--month", "٢٠٢٧-03")
    assert bad_month.exit_code == 2 and "is not a month" in bad_month.output
