"""Scenario against catalog, before any solve (``planner/planning/problem/checks.py``): every example of issue
13 point 1 (names) and point 3 (work that cannot run) is an error naming its field, or a warning that the plan
carries; ``validate`` and ``plan`` agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from models.catalog import Catalog
from models.errors import InputError
from models.scenario import parse
from planner.cli import app
from planner.planning.optimize import optimize
from planner.planning.problem.checks import check_inputs


def _rows(kit) -> list[dict[str, Any]]:
    return [
        kit.offering_row(reserved_1y_usd_h=6.0),  # aws:us-east-1:p5.48xlarge, 8 x H100, EFA
        kit.offering_row(cloud="gcp", region="us-central1", instance_type="a3-highgpu-8g",
                         on_demand_usd_h=11.0, max_nodes=4),
    ]  # fmt: skip


def _data(kit, **changes: Any) -> dict[str, Any]:
    data = kit.scenario_dict(
        hours=48,
        terms=["1y"],
        teams=[{"name": "t", "guaranteed_gpus": 0}],
        inference=[{"name": "chat", "team": "t", "gpus_per_replica": 2, "gpu_models": ["H100"],
                    "replicas": {"profile": "flat", "base": 3}}],
        training=[{"name": "pretrain", "team": "t", "nodes": 2, "gpus_per_node": 8, "gpu_models": ["H100"],
                   "hours": 10}],
    )  # fmt: skip
    data.update(changes)
    return data


def _check(tmp_path: Path, kit, data: dict[str, Any]) -> list[str]:
    catalog = Catalog.load(kit.write_catalog_csv(tmp_path / "catalog.csv", _rows(kit)))
    return check_inputs(parse(data), catalog)


def _error(tmp_path: Path, kit, data: dict[str, Any]) -> InputError:
    with pytest.raises(InputError) as caught:
        _check(tmp_path, kit, data)
    return caught.value


def test_a_scenario_that_can_run_passes_without_warnings(tmp_path: Path, kit) -> None:
    assert _check(tmp_path, kit, _data(kit)) == []


def test_a_region_the_catalog_does_not_have_is_an_error_with_close_matches(tmp_path: Path, kit) -> None:
    """``clouds.aws.regions: [mars-1]`` used to validate and plan without AWS, 37 % dearer."""
    error = _error(tmp_path, kit, _data(kit, clouds={"aws": {"regions": ["mars-1"]}}))
    assert error.where == "clouds.aws.regions[0]" and "'mars-1' is not a aws region" in error.problem
    assert "us-east-1" in error.problem  # what it does have
    typo = _error(tmp_path, kit, _data(kit, clouds={"aws": {"regions": ["us-east1"]}}))
    assert "did you mean 'us-east-1'?" in typo.problem


def test_a_cloud_named_but_absent_from_the_catalog_is_an_error(tmp_path: Path, kit) -> None:
    error = _error(tmp_path, kit, _data(kit, clouds={"aws": {}, "azure": {}}))
    assert error.where == "clouds.azure" and "no azure offering" in error.problem


def test_a_gpu_model_the_catalog_in_use_does_not_have_is_an_error(tmp_path: Path, kit) -> None:
    """B200 is a GPU model gpuplan knows (a typo is caught when the scenario is read), but this catalog
    sells none: the service would be silently unserved."""
    data = _data(kit)
    data["training"][0]["gpu_models"] = ["H100", "B200"]
    error = _error(tmp_path, kit, data)
    assert error.where == "training[0].gpu_models[1]" and "matches 'B200'; it has: H100" in error.problem


def test_a_service_no_offering_can_serve_is_an_error(tmp_path: Path, kit) -> None:
    data = _data(kit)
    data["inference"][0]["gpus_per_replica"] = 16  # more than any node has
    error = _error(tmp_path, kit, data)
    assert error.where == "inference[0]" and "16 GPUs per replica" in error.problem


def test_a_gang_without_an_eligible_offering_is_an_error(tmp_path: Path, kit) -> None:
    data = _data(kit)
    data["training"][0]["gpus_per_node"] = 4
    error = _error(tmp_path, kit, data)
    assert error.where == "training[0]" and "4 GPUs per node" in error.problem


def test_a_training_window_shorter_than_its_run_is_an_error(tmp_path: Path, kit) -> None:
    data = _data(kit)
    data["training"][0] |= {"earliest_start": "2027-01-04T00:00:00Z", "deadline": "2027-01-04T08:00:00Z"}
    error = _error(tmp_path, kit, data)
    assert error.where == "training[0].deadline" and "shorter than the run (10 h)" in error.problem


def test_a_guarantee_nothing_can_back_is_an_error(tmp_path: Path, kit) -> None:
    data = _data(kit, teams=[{"name": "t", "guaranteed_gpus": 8}])
    data["purchase"]["terms"] = []  # no commitment can be bought, none is held, no own servers
    error = _error(tmp_path, kit, data)
    assert error.where == "teams[0].guaranteed_gpus" and "cannot be backed" in error.problem
    held = {
        "offering": "aws:us-east-1:p5.48xlarge",
        "term": "1y",
        "nodes": 1,
        "start": "2026-06-01T00:00:00Z",
    }
    assert _check(tmp_path, kit, {**data, "commitments": [held]}) == []  # a held commitment backs it


def test_a_held_commitment_on_an_unknown_offering_is_an_error_at_validate_time(tmp_path: Path, kit) -> None:
    held = {"offering": "aws:us-east-1:p5.4xlarge", "term": "1y", "nodes": 1, "start": "2026-06-01T00:00:00Z"}
    error = _error(tmp_path, kit, _data(kit, commitments=[held]))
    assert error.where == "commitments[0].offering" and "unknown offering" in error.problem
    assert "did you mean 'aws:us-east-1:p5.48xlarge'?" in error.problem


def test_a_gang_larger_than_every_max_nodes_is_a_warning_the_plan_carries(tmp_path: Path, kit) -> None:
    """On GCP only (4 nodes at most), a gang of 6: the user may mean it (a capacity what-if), so the plan
    is made, lists the run unserved, and says why before solving, in plan.json too."""
    data = _data(kit, clouds={"gcp": {}})
    data["training"][0]["nodes"] = 6
    data["inference"] = []
    warnings = _check(tmp_path, kit, data)
    assert len(warnings) == 1 and "a gang of 6 nodes" in warnings[0] and "at most 4" in warnings[0]
    catalog = Catalog.load(tmp_path / "catalog.csv")
    plan = optimize(parse(data), catalog, tmp_path, kit.exact_settings())
    assert plan.document.warnings == warnings
    assert [u.workload for u in plan.document.unserved] == ["pretrain"]
    assert json.loads(plan.document.to_json())["warnings"] == warnings


def test_validate_and_plan_agree(tmp_path: Path, kit) -> None:
    """What ``validate`` rejects, ``plan`` rejects with the same message (exit 2, nothing written); what it
    accepts with a warning, ``plan`` plans and warns about too."""
    kit.write_catalog_csv(tmp_path / "catalog.csv", _rows(kit))
    bad = kit.write_scenario_yaml(tmp_path / "bad.yaml", _data(kit, clouds={"aws": {"regions": ["mars-1"]}}))
    runner = CliRunner()
    validated = runner.invoke(app, ["validate", str(bad)])
    planned = runner.invoke(app, ["plan", str(bad), "-o", str(tmp_path / "out"), "-q", "--no-report"])
    assert validated.exit_code == planned.exit_code == 2
    assert "clouds.aws.regions[0]" in validated.output and "clouds.aws.regions[0]" in planned.output
    assert "Traceback" not in validated.output + planned.output and not (tmp_path / "out").exists()
    data = _data(kit, clouds={"gcp": {}}, inference=[])
    data["training"][0]["nodes"] = 6
    warned = kit.write_scenario_yaml(tmp_path / "warned.yaml", data)
    validated = runner.invoke(app, ["validate", str(warned)])
    planned = runner.invoke(app, ["plan", str(warned), "-o", str(tmp_path / "out2"), "-q", "--no-report"])
    assert validated.exit_code == 0 and planned.exit_code == 0
    assert "a gang of 6 nodes" in validated.output and "a gang of 6 nodes" in planned.output


def test_a_demand_series_that_is_a_directory_is_an_input_error(tmp_path: Path, kit) -> None:
    """``replicas: {csv: .}`` used to end in IsADirectoryError."""
    kit.write_catalog_csv(tmp_path / "catalog.csv", _rows(kit))
    data = _data(kit)
    data["inference"][0]["replicas"] = {"csv": "."}
    path = kit.write_scenario_yaml(tmp_path / "dot.yaml", data)
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "is a directory" in result.output and "inference[0].replicas.csv" in result.output


@pytest.mark.parametrize("method", ["staged", "hourly"])
def test_a_scenario_of_training_only_plans_by_either_method(tmp_path: Path, kit, method: str) -> None:
    """No inference at all: every period's dispatch model is empty (HiGHS calls that "Empty", not
    optimal), which the local search and the hourly method dispatch must read as nothing to pay."""
    kit.write_catalog_csv(tmp_path / "catalog.csv", _rows(kit))
    data = _data(kit, inference=[])
    plan = optimize(
        parse(data), Catalog.load(tmp_path / "catalog.csv"), tmp_path, kit.exact_settings(method=method)
    )
    assert plan.document.unserved == [] and plan.document.costs.total_usd > 0
