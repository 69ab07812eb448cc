"""A plan directory is read as one document (issue 36 point 2).

plan.json's numbers are numbers (no boolean, NaN, infinity or quoted number; money and counts never
negative), its names lead to its own parts, and allocations.csv names only the plan's workloads and
teams, once per key. Every command that acts on a plan refuses anything else with exit 2 and one line
naming the file and the field or row; ``gpuplan verify`` reports a run whose cost is not its rows' cost.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from models.errors import InputError
from models.plan import Plan
from planner.cli import app

Edit = Callable[[dict[str, Any]], None]


def _copy(week_plan: Callable[[str], Path], tmp_path: Path) -> Path:
    return Path(shutil.copytree(week_plan("aws"), tmp_path / "plan"))


def _edit_json(plan_dir: Path, edit: Edit) -> None:
    path = plan_dir / "plan.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def _edit_csv(plan_dir: Path, edit: Callable[[list[str]], list[str]]) -> None:
    """Edit allocations.csv as a hand would; the plan then no longer records its digest (an older plan),
    so the checks after the digest are the ones that must catch it."""
    path = plan_dir / "allocations.csv"
    path.write_text(
        "".join(edit(path.read_text(encoding="utf-8").splitlines(keepends=True))), encoding="utf-8"
    )
    _edit_json(plan_dir, lambda d: d.pop("allocations_file"))


def _set(*path: Any, value: Any) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        for key in path[:-1]:
            data = data[key]
        data[path[-1]] = value

    return edit


NUMBERS: dict[str, tuple[Edit, str]] = {
    "a boolean total": (_set("costs", "total_usd", value=True), "costs.total_usd: a boolean is not a number"),
    "a boolean node count": (_set("commitments", 0, "nodes", value=True), "commitments.0.nodes: a boolean"),
    "a boolean in a breakdown": (
        _set("costs", "by_tier", "spot", value=False),
        "costs.by_tier.spot: a boolean",
    ),
    "a NaN price": (
        _set("commitments", 0, "usd_per_node_hour", value=float("nan")),
        "commitments.0.usd_per_node_hour: nan is not a finite number",
    ),
    "an infinite team cost": (
        _set("teams", "research", "cost_usd", value=float("inf")),
        "teams.research.cost_usd: inf is not a finite number",
    ),
    "a negative run cost": (
        _set("training", 0, "cost_usd", value=-1),
        "training.0.cost_usd: must be >= 0, got -1",
    ),
    "a negative baseline": (
        _set("baselines", "greedy_usd", value=-5.0),
        "baselines.greedy_usd: must be >= 0",
    ),
    "a negative node count": (_set("training", 0, "nodes", value=-2), "training.0.nodes: must be >= 0"),
    "a quoted number": (
        _set("costs", "total_usd", value="63507.39"),
        "costs.total_usd: '63507.39' is a number in",
    ),
}


@pytest.mark.parametrize("case", sorted(NUMBERS))
def test_plan_json_numbers_are_numbers(week_plan: Callable[[str], Path], tmp_path: Path, case: str) -> None:
    plan_dir = _copy(week_plan, tmp_path)
    edit, needle = NUMBERS[case]
    _edit_json(plan_dir, edit)
    for trusted in (True, False):  # verify reads untrusted: a broken number is still unreadable
        with pytest.raises(InputError) as caught:
            Plan.read(plan_dir, trusted=trusted)
        assert needle in str(caught.value) and "plan.json" in str(caught.value)


NAMES: dict[str, tuple[Edit, str]] = {
    "no teams in the echo": (_set("inputs", "teams", value=[]), "inputs.teams: no teams"),
    "no team summaries": (_set("teams", value={}), "teams: no summary of the scenario's team"),
    "a run of an unknown team": (
        _set("training", 0, "team", value="nobody"),
        "training.0.team: 'nobody' is not",
    ),
    "a run on an unknown offering": (
        _set("training", 0, "offering", value="aws:nowhere:p5"),
        "training.0.offering: 'aws:nowhere:p5' is not one of the plan's offerings",
    ),
    "a commitment on an unknown offering": (
        _set("commitments", 0, "offering", value="aws:nowhere:p5"),
        "commitments.0.offering",
    ),
    "a run beyond the horizon": (_set("training", 0, "start_period", value=10_000), "not inside the horizon"),
    "a run placed twice": (lambda d: d["training"].append(d["training"][0]), "is placed twice"),
    # found by running fuzzed plan directories through the commands: gpuplan k8s followed this name
    "a MIG pool on an unknown offering": (
        _set("mig", "pools", 0, "offering", value="spot"),
        "mig.pools.0.offering: 'spot' is not one of the plan's offerings",
    ),
    "a MIG config mig.config does not define": (
        _set("mig", "pools", 0, "configs", 0, "name", value="nowhere"),
        "mig.pools.0.configs.0.name: 'nowhere' is not a config of mig.config",
    ),
}


@pytest.mark.parametrize("case", sorted(NAMES))
def test_plan_json_names_lead_to_its_own_parts(
    week_plan: Callable[[str], Path], tmp_path: Path, case: str
) -> None:
    plan_dir = _copy(week_plan, tmp_path)
    edit, needle = NAMES[case]
    _edit_json(plan_dir, edit)
    with pytest.raises(InputError, match=r"plan\.json") as caught:
        Plan.read(plan_dir)
    assert needle in str(caught.value)


def _cell(column: str, value: str) -> Callable[[list[str]], list[str]]:
    def edit(lines: list[str]) -> list[str]:
        header = lines[0].rstrip("\n").split(",")
        cells = lines[1].rstrip("\n").split(",")
        cells[header.index(column)] = value
        return [lines[0], ",".join(cells) + "\n", *lines[2:]]

    return edit


ROWS: dict[str, tuple[Callable[[list[str]], list[str]], str]] = {
    "a duplicated row": (lambda lines: [*lines, lines[1]], "a second row for period 0, offering"),
    "an unknown workload": (
        _cell("workload", "chat-71b"),
        "column workload: workloads the plan does not have",
    ),
    "an unknown team": (_cell("team", "nobody"), "column team: teams the plan does not have: nobody"),
    "a header-only file": (lambda lines: lines[:1], "no rows, but plan.json's costs.total_usd"),
    "a boolean cell": (_cell("nodes", "TRUE"), "row 2, column nodes: 'TRUE' is not a number"),
    "a NaN cell": (_cell("cost_usd", "nan"), "row 2, column cost_usd: no value"),
    "an infinite cell": (_cell("gpus", "inf"), "row 2, column gpus: inf is not a finite number"),
    "a negative cost": (_cell("cost_usd", "-1"), "row 2, column cost_usd: must be >= 0, got -1"),
}


@pytest.mark.parametrize("case", sorted(ROWS))
def test_allocations_csv_belongs_to_its_plan(
    week_plan: Callable[[str], Path], tmp_path: Path, case: str
) -> None:
    plan_dir = _copy(week_plan, tmp_path)
    edit, needle = ROWS[case]
    _edit_csv(plan_dir, edit)
    with pytest.raises(InputError, match=r"allocations\.csv") as caught:
        Plan.read(plan_dir)
    assert needle in str(caught.value)


def test_a_command_refuses_a_broken_plan_in_one_line_and_writes_nothing(
    week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    plan_dir = _copy(week_plan, tmp_path)
    _edit_json(plan_dir, _set("costs", "by_tier", "on_demand", value=True))
    for args in (["report", str(plan_dir)], ["terraform", str(plan_dir), "-o", str(tmp_path / "tf")]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert "costs.by_tier.on_demand: a boolean is not a number" in " ".join(result.output.split())
        assert "Traceback" not in result.output and len(lines) <= 3  # one message (wrapped by the terminal)
    assert not (plan_dir / "report.html").exists() and not (tmp_path / "tf").exists()


def test_verify_reports_a_run_whose_cost_is_not_its_rows(
    week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    plan_dir = _copy(week_plan, tmp_path)
    scenario = week_plan("aws").parent / "scenario.yaml"
    run = next(
        i for i, r in enumerate(json.loads((plan_dir / "plan.json").read_text())["training"]) if r["cost_usd"]
    )

    def cheaper(data: dict[str, Any]) -> None:
        data["training"][run]["cost_usd"] = round(data["training"][run]["cost_usd"] / 2, 2)

    _edit_json(plan_dir, cheaper)
    result = CliRunner().invoke(app, ["verify", str(scenario), str(plan_dir), "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    assert [k["kind"] for k in report["kinds"]] == ["training-cost"]
    assert "its rows cost" in report["kinds"][0]["examples"][0]["message"]


def test_verify_refuses_a_run_with_a_negative_cost(week_plan: Callable[[str], Path], tmp_path: Path) -> None:
    """The issue's ``cost_usd: -1`` that verify called ok: a negative cost is not a plan gpuplan writes."""
    plan_dir = _copy(week_plan, tmp_path)
    scenario = week_plan("aws").parent / "scenario.yaml"
    _edit_json(plan_dir, _set("training", 0, "cost_usd", value=-1))
    result = CliRunner().invoke(app, ["verify", str(scenario), str(plan_dir)])
    assert result.exit_code == 2, result.output
    assert "training.0.cost_usd: must be >= 0, got -1" in " ".join(result.output.split())


def test_the_written_plan_reads_back_whole(week_plan: Callable[[str], Path]) -> None:
    """What gpuplan writes, it reads: every check above passes on a real plan."""
    plan = Plan.read(week_plan("aws"))
    assert plan.document.training and plan.document.commitments and len(plan.allocations) > 500
