"""`gpuplan plan --help` states the defaults the planner really uses (issue 42).

The help said ``--block-hours (default 24)`` and ``--start-grid-hours (default: the block length)``,
while a year's plan used 168 h blocks and a 24 h grid. The test reads the defaults the help states and
compares them with the blocks and grid the planning sets get on scenarios of each kind (a year with
training, a week with training, a year with none); building the sets solves nothing, so this is fast.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from models.inputs import load_inputs
from planner.cli import app
from planner.planning.problem.sets import ModelOptions, build_sets

EXAMPLE = Path(__file__).resolve().parents[2] / "scenarios" / "mixed-fleet.yaml"
BLOCK = re.compile(
    r"--block-hours.*?default: (\d+) on horizons of (\d+) weeks or more, (\d+) on shorter ones, the whole "
    r"horizon with no training"
)
GRID = re.compile(r"--start-grid-hours.*?default: the block length, at most (\d+)")


def _help_text() -> str:
    result = CliRunner().invoke(app, ["plan", "--help"], env={"COLUMNS": "100"}, terminal_width=100)
    assert result.exit_code == 0, result.output
    # one line: the help's boxes and wrapping removed
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())


def _used(tmp_path: Path, hours: int, training: bool) -> tuple[int, int]:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    data["horizon"]["hours"] = hours
    pretrain = next(job for job in data["training"] if job["name"] == "pretrain-34b")
    pretrain.update(hours=48, earliest_start="2027-01-01T00:00:00Z", deadline="2027-01-08T00:00:00Z")
    if not training:
        data.pop("training")
        for team in data.get("teams", []):
            team.pop("training", None)
    path = tmp_path / f"s-{hours}-{training}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    inputs = load_inputs(path)
    sets = build_sets(inputs.scenario, inputs.catalog, inputs.base_dir, ModelOptions())
    p = inputs.scenario.horizon.period_hours
    return sets.block_periods * p, sets.start_grid_periods * p


@pytest.mark.parametrize(
    ("hours", "training"), [(8760, True), (8 * 168, True), (8 * 168 - 24, True), (168, True), (2190, False)]
)
def test_the_help_states_the_blocks_and_grid_a_plan_uses(tmp_path: Path, hours: int, training: bool) -> None:
    text = _help_text()
    block, grid = BLOCK.search(text), GRID.search(text)
    assert block is not None and grid is not None, text
    long_block, weeks, short_block = (int(g) for g in block.groups())
    stated_block = hours if not training else long_block if hours >= weeks * 168 else short_block
    stated_grid = min(stated_block, int(grid.group(1)))
    assert _used(tmp_path, hours, training) == (stated_block, stated_grid)
