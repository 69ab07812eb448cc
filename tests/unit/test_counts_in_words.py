"""Counts and their nouns agree where gpuplan prints them (issue 42, point 4): the planner's first
progress line and ``gpuplan catalog``'s table titles say "1 offering", never "1 offerings".

(The plan report's counts are checked in tests/unit/test_report.py: "1 GPU" in a MIG layout, "3 workload
items are unserved".)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from models.inputs import load_inputs
from planner.cli import app
from planner.planning.optimize import optimize

HOURS = 6


def _scenario(tmp_path: Path, kit, offerings: int, services: int, runs: int) -> Path:
    rows = [kit.offering_row(on_demand_usd_h=10.0)]
    rows += [kit.offering_row("gcp", "us-central1", "a3-highgpu-8g", on_demand_usd_h=11.0)][: offerings - 1]
    kit.write_catalog_csv(tmp_path / "catalog.csv", rows)
    service = {
        "team": "t",
        "gpus_per_replica": 8,
        "gpu_models": ["H100"],
        "replicas": {"profile": "flat", "base": 1},
    }
    job = {"team": "t", "nodes": 1, "gpus_per_node": 8, "gpu_models": ["H100"], "hours": 2}
    data = kit.scenario_dict(
        hours=HOURS,
        inference=[{"name": f"s{i}", **service} for i in range(services)],
        training=[{"name": f"j{i}", **job} for i in range(runs)],
    )
    return kit.write_scenario_yaml(tmp_path / "scenario.yaml", data)


@pytest.mark.parametrize(
    ("offerings", "services", "runs", "expected"),
    [
        (1, 1, 1, "1 offering, 1 service, 1 training run, "),
        (2, 2, 0, "2 offerings, 2 services, 0 training runs, "),
    ],
)
def test_the_planners_first_progress_line_counts_in_words(
    tmp_path: Path, kit, offerings: int, services: int, runs: int, expected: str
) -> None:
    inputs = load_inputs(_scenario(tmp_path, kit, offerings, services, runs))
    said: list[str] = []
    optimize(inputs.scenario, inputs.catalog, inputs.base_dir, kit.exact_settings(), progress=said.append)
    assert said[0].startswith(expected), said[0]
    assert " 1 model slots" not in said[0] and " 1 placement options" not in said[0]


@pytest.mark.parametrize("offerings", [1, 2])
def test_catalog_table_titles_count_in_words(tmp_path: Path, kit, offerings: int) -> None:
    _scenario(tmp_path, kit, offerings, 1, 0)
    noun = "1 offering " if offerings == 1 else "2 offerings "
    catalog = str(tmp_path / "catalog.csv")
    runner = CliRunner()
    table = runner.invoke(app, ["catalog", "--catalog", catalog], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert f"{noun}({catalog})" in table.output
    sources = runner.invoke(app, ["catalog", "--catalog", catalog, "--provenance"], env={"COLUMNS": "200"})
    assert sources.exit_code == 0, sources.output
    assert f"where the prices of {noun}come from" in " ".join(sources.output.split())
