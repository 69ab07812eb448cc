"""`gpuplan verify` end to end: exit codes, the printed groups, --json. The ready scenarios' plans are
verified where they are planned (tests/e2e/test_scenarios.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from planner.cli import app


def _scenario(kit: SimpleNamespace, directory: Path) -> Path:
    kit.write_catalog_csv(
        directory / "catalog.csv",
        [kit.offering_row(on_demand_usd_h=10.0, reserved_1y_usd_h=6.0)],
    )
    data = kit.scenario_dict(
        hours=12, terms=["1y"],
        inference=[{"name": "chat", "team": "t", "gpus_per_replica": 2, "gpu_models": ["H100"],
                    "replicas": {"profile": "flat", "base": 8}}],
    )  # fmt: skip
    return kit.write_scenario_yaml(directory / "scenario.yaml", data)


def test_verify_accepts_a_plan_and_rejects_a_broken_one(kit: SimpleNamespace, tmp_path: Path) -> None:
    runner = CliRunner()
    scenario = _scenario(kit, tmp_path)
    plan_dir = tmp_path / "plan"
    planned = runner.invoke(app, ["plan", str(scenario), "-o", str(plan_dir), "--no-report", "-q"])
    assert planned.exit_code == 0, planned.output
    ok = runner.invoke(app, ["verify", str(scenario), str(plan_dir)])
    assert ok.exit_code == 0, ok.output
    assert "ok, no violations" in ok.output

    rows = pd.read_csv(plan_dir / "allocations.csv")
    rows.loc[0, "replicas"] = 3  # chat short of its 8 replicas in period 0
    rows.loc[1, "replicas"] = 8.5  # and a fractional count
    rows.to_csv(plan_dir / "allocations.csv", index=False)
    broken = runner.invoke(app, ["verify", str(scenario), str(plan_dir)])
    assert broken.exit_code == 1, broken.output
    assert "demand (1)" in broken.output and "fractional-replicas (1)" in broken.output
    as_json = runner.invoke(app, ["verify", str(scenario), str(plan_dir), "--json"])
    assert as_json.exit_code == 1
    report = json.loads(as_json.stdout)
    assert {k["kind"]: k["count"] for k in report["kinds"]} == {"fractional-replicas": 1, "demand": 1}
    assert report["kinds"][1]["examples"][0]["period"] == 0

    missing = runner.invoke(app, ["verify", str(scenario), str(tmp_path / "nowhere")])
    assert missing.exit_code == 2
    assert "plan.json: file not found" in missing.output


def _mig_scenario(kit: SimpleNamespace, directory: Path) -> Path:
    """Two MIG services sharing one H100 pool (9 x 1g.10gb and 3 x 3g.40gb replicas every hour)."""
    kit.write_catalog_csv(directory / "catalog.csv", [kit.offering_row(on_demand_usd_h=10.0)])
    data = kit.scenario_dict(
        hours=6,
        inference=[
            {"name": "small", "team": "t", "gpu_memory_gb": 9, "gpu_models": ["H100"],
             "replicas": {"profile": "flat", "base": 9}},
            {"name": "big", "team": "t", "gpu_memory_gb": 35, "gpu_models": ["H100"],
             "replicas": {"profile": "flat", "base": 3}},
        ],
    )  # fmt: skip
    return kit.write_scenario_yaml(directory / "scenario.yaml", data)


def test_plan_verifies_what_it_writes(kit: SimpleNamespace, tmp_path: Path) -> None:
    runner = CliRunner()
    scenario = _mig_scenario(kit, tmp_path)
    planned = runner.invoke(app, ["plan", str(scenario), "-o", str(tmp_path / "plan"), "--no-report"])
    assert planned.exit_code == 0, planned.output
    assert "verified the written plan: no violations" in planned.output
    assert planned.output.rstrip().endswith(", verified")
    skipped = runner.invoke(
        app, ["plan", str(scenario), "-o", str(tmp_path / "p2"), "--no-report", "--no-verify"]
    )
    assert skipped.exit_code == 0 and "verified" not in skipped.output


def test_a_plan_that_fails_its_own_check_is_a_loud_bug(
    kit: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A planner bug injected (the step that makes replicas whole loses a replica of `small` every
    hour, without saying so): the plan is written for the bug report, the check says what is
    wrong, and the exit code is 5."""
    import dataclasses

    import planner.planning.optimize.solution as solution

    whole = solution.realized

    def buggy(s: solution.Solution, *args: Any, **kwargs: Any) -> solution.Solution:
        done = whole(s, *args, **kwargs)
        rows = done.inference.copy()
        first = rows.index[rows["i"] == 0]
        rows.loc[first, "replicas"] -= 1
        return dataclasses.replace(done, inference=rows)

    monkeypatch.setattr(solution, "realized", buggy)
    scenario = _mig_scenario(kit, tmp_path)
    out = tmp_path / "plan"
    planned = CliRunner().invoke(app, ["plan", str(scenario), "-o", str(out), "--no-report", "-q"])
    assert planned.exit_code == 5, planned.output
    assert "demand (6)" in planned.output and "bug:" in planned.output
    assert (out / "plan.json").exists() and (out / "allocations.csv").exists()


def test_verify_help_says_what_is_checked() -> None:
    result = CliRunner().invoke(app, ["verify", "--help"])
    assert result.exit_code == 0
    for word in ("billing rule", "min(N, C)", "MIG layouts", "packing", "guarantee", "--json"):
        assert word in result.output
