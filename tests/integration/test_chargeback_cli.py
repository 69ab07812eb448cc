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


@pytest.mark.parametrize("cloud", ["aws", "all"])
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
    if rule == "usage":
        # the week lies in one calendar month: the month's split is the plan's own cost by team
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
