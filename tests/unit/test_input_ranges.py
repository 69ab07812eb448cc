"""Issue 13, point 1: every number of a scenario or a demand series is finite and inside a documented
range, every name is printable, and each error names the field (or the file, row and column)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from models.errors import InputError
from models.scenario import MAX_NAME_LENGTH, Scenario, parse
from models.schemas import json_schema
from models.workloads import service_demand

EXAMPLE = Path(__file__).resolve().parents[2] / "scenarios" / "mixed-fleet.yaml"
HELD = {"offering": "aws:us-east-1:p5.48xlarge", "term": "1y", "nodes": 2, "start": "2027-01-01T00:00:00Z"}


def example() -> dict[str, Any]:
    return yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))


def _error(data: dict[str, Any]) -> InputError:
    with pytest.raises(InputError) as caught:
        parse(data, "fleet.yaml")
    assert caught.value.file == "fleet.yaml"
    return caught.value


def _set(path: str, value: Any):
    """A change to the example: ``path`` is dotted, with list indexes (``training.0.hours``)."""

    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        node[int(last) if last.isdigit() else last] = value

    return mutate


# ---- numbers ---------------------------------------------------------------------------------------

NUMBERS = {
    # the examples of the issue: each validated "ok" and crashed or planned nonsense later
    "peak inf": ("inference.0.replicas.peak", float("inf"), "must be a finite number"),
    "training hours inf": ("training.0.hours", float("inf"), "must be a finite number"),
    "nodes 1e30": ("training.0.nodes", 1e30, "must be at most 10000 nodes, got 1e+30"),
    "hours true": ("training.0.hours", True, "a boolean is not a number"),
    # not finite
    "base nan": ("inference.1.replicas.base", float("nan"), "finite"),
    "scale -inf": ("inference.0.scale", float("-inf"), "finite"),
    "inf as text": ("inference.0.replicas.peak", "inf", "finite"),
    # booleans are not numbers, whatever the field
    "horizon hours true": ("horizon.hours", True, "a boolean is not a number"),
    "nodes false": ("training.0.nodes", False, "a boolean is not a number"),
    "guarantee true": ("teams.0.guaranteed_gpus", True, "a boolean"),
    "share true": ("purchase.max_spot_share", True, "a boolean"),
    "minutes true": ("training.0.checkpoint.write_minutes", True, "boolean"),
    # counts are whole numbers
    "nodes 2.5": ("training.0.nodes", 2.5, "must be a whole number, got 2.5"),
    "GPUs 1.5": ("teams.0.guaranteed_gpus", 1.5, "whole number"),
    "replica GPUs 0.5": ("inference.0.gpus_per_replica", 0.5, "whole number"),
    # below the range
    "nodes 0": ("training.0.nodes", 0, "must be greater than 0, got 0"),
    "negative base": ("inference.1.replicas.base", -1, "must be at least 0"),
    "growth -100%": ("inference.0.replicas.monthly_growth", -1, "greater than -1"),
    "scale 0": ("inference.0.scale", 0, "must be greater than 0"),
    "negative minutes": ("training.0.checkpoint.restart_minutes", -1, "at least 0"),
    # above the range
    "horizon of 6 years": ("horizon.hours", 6 * 8760, "must be at most 43800 hours"),
    "training hours 1e6": ("training.0.hours", 1e6, "must be at most 43800 hours"),
    "65 GPUs a node": ("training.0.gpus_per_node", 65, "must be at most 64 GPUs"),
    "replica of 128 GPUs": ("inference.0.gpus_per_replica", 128, "at most 64"),
    "1e7 replicas": ("inference.1.replicas.base", 1e7, "at most 1000000 replicas"),
    "peak 2e6": ("inference.0.replicas.peak", 2e6, "at most 1000000 replicas"),
    "growth 1100%": ("inference.0.replicas.monthly_growth", 11, "must be at most 10"),
    "weekend x1000": ("inference.0.replicas.weekend_factor", 1000, "at most 100"),
    "peak hour 24": ("inference.0.replicas.peak_hour_utc", 24, "less than 24"),
    "scale x5000": ("inference.0.scale", 5000, "must be at most 1000"),
    "share 1.5": ("purchase.max_spot_share", 1.5, "must be at most 1"),
    "team of 2e6 GPUs": ("teams.1.burst_gpus", 2_000_000, "at most 1000000 GPUs"),
    "a week to checkpoint": ("training.0.checkpoint.write_minutes", 10_080, "at most 1440 minutes"),
    "compute share 2": ("inference.1.gpu_compute_share", 2, "at most 1"),
    "memory 1e9 GB": ("inference.1.gpu_memory_gb", 1e9, "GB"),
}  # fmt: skip


@pytest.mark.parametrize(("path", "value", "words"), NUMBERS.values(), ids=NUMBERS.keys())
def test_a_number_outside_its_range_names_the_field(path: str, value: Any, words: str) -> None:
    data = example()
    _set(path, value)(data)
    error = _error(data)
    where = re.sub(r"\.(\d+)", r"[\1]", path)  # training.0.hours -> training[0].hours
    assert (error.where, words in error.problem) == (where, True), error.problem


COLOCATION = {
    "pue below 1": ("pue", 0.9, "must be at least 1"),
    "capex inf": ("capex_per_node_usd", float("inf"), "must be a finite number"),
    "capex 0": ("capex_per_node_usd", 0, "greater than 0"),
    "capex 1e12": ("capex_per_node_usd", 1e12, "at most 10000000 USD"),
    "support 150%": ("support_pct_per_year", 150, "must be at most 100 %"),
    "residual -5%": ("residual_value_pct", -5, "at least 0"),
    "capital true": ("cost_of_capital_pct_per_year", True, "a boolean is not a number"),
    "power 1e9 kW": ("power_kw_per_node", 1e9, "kW"),
    "energy $100 a kWh": ("power_usd_per_kwh", 100, "at most 10 USD per kWh"),
    "colo fee 1e6": ("colo_usd_per_kw_month", 1e6, "USD per kW-month"),
    "life 36.5 months": ("depreciation_months", 36.5, "whole number"),
    "life 100 years": ("depreciation_months", 1200, "at most 240 months"),
    "lead time 10 years": ("lead_time_months", 120, "at most 60 months"),
    "max_nodes 1e30": ("max_nodes", 1e30, "at most 10000 nodes"),
    "existing 2.5": ("existing_nodes", 2.5, "whole number"),
    "GPUs 0": ("gpus_per_node", 0, "greater than 0"),
    "memory 0": ("gpu_memory_gb", 0, "greater than 0"),
    "fabric 1e9": ("fabric_gbps", 1e9, "Gb/s"),
}


@pytest.mark.parametrize(("field", "value", "words"), COLOCATION.values(), ids=COLOCATION.keys())
def test_colocation_costs_and_percentages_have_ranges(field: str, value: Any, words: str) -> None:
    data = example()
    data["colocation"] = {"max_nodes": 4, field: value}
    error = _error(data)
    assert error.where == f"colocation.{field}" and words in error.problem, error.problem


@pytest.mark.parametrize(
    ("change", "where", "words"),
    [
        ({"nodes": True}, "commitments[0].nodes", "a boolean is not a number"),
        ({"nodes": 1e30}, "commitments[0].nodes", "at most 10000 nodes"),
        ({"nodes": 1.5}, "commitments[0].nodes", "whole number"),
        ({"usd_per_node_hour": float("nan")}, "commitments[0].usd_per_node_hour", "finite"),
        ({"usd_per_node_hour": -1}, "commitments[0].usd_per_node_hour", "at least 0"),
        (
            {"usd_per_node_hour": 10_000},
            "commitments[0].usd_per_node_hour",
            "less than 10000 USD per node-hour",
        ),
        ({"start": "9999-01-01T00:00:00Z"}, "commitments[0].start", "outside 1970-01-01 to 2200-01-01"),
    ],
)
def test_existing_commitments_nodes_and_rates_have_ranges(change: dict, where: str, words: str) -> None:
    data = example()
    data["commitments"] = [{**HELD, **change}]
    error = _error(data)
    assert error.where == where and words in error.problem, error.problem


@pytest.mark.parametrize(
    ("line", "where", "words"),
    [
        # YAML reads these as booleans, or (YAML 1.1, no dot) 1e30 as a string: still numbers' errors
        ("hours: true", "training[0].hours", "a boolean is not a number"),
        ("hours: yes", "training[0].hours", "a boolean is not a number"),
        ("nodes: 1e30", "training[0].nodes", "must be at most 10000 nodes"),
        ("hours: .inf", "training[0].hours", "must be a finite number"),
        ("hours: .nan", "training[0].hours", "must be a finite number"),
        ("hours: lots", "training[0].hours", "'lots' is not a number"),
    ],
)
def test_yaml_spellings_of_bad_numbers(line: str, where: str, words: str) -> None:
    data = example()
    key, value = line.split(": ")
    data["training"][0][key] = yaml.safe_load(f"x: {value}")["x"]
    error = _error(data)
    assert error.where == where and words in error.problem, error.problem


def test_integers_for_floats_and_whole_floats_for_counts_are_accepted() -> None:
    data = example()
    data["training"][0].update(hours=720, nodes=16.0, gpus_per_node=8.0)  # int hours, counts as 16.0
    data["inference"][0]["replicas"].update(base=6, peak=20, weekend_factor=1, monthly_growth=0)
    data["horizon"]["hours"] = "8760"  # a quoted number is still the number
    scenario = parse(data)
    job = scenario.training[0]
    assert (job.nodes, job.gpus_per_node, job.hours) == (16, 8, 720.0)
    assert type(job.nodes) is int and type(job.hours) is float
    assert scenario.inference[0].replicas.weekend_factor == 1.0  # type: ignore[union-attr]
    assert scenario.horizon.hours == 8760


def test_the_grown_and_scaled_peak_is_bounded() -> None:
    """Each value in range, but 300% a month for a year: 20 x 4^12 = 3.4e8 replicas."""
    data = example()
    data["inference"][0]["replicas"]["monthly_growth"] = 3
    error = _error(data)
    assert error.where == "inference[0].replicas" and "at most 1000000 replicas" in error.problem
    data = example()
    data["inference"][1]["scale"] = 1000
    data["inference"][1]["replicas"]["base"] = 2000
    assert _error(data).where == "inference[1].replicas"
    data = example()
    data["inference"][0]["replicas"]["monthly_growth"] = 0.05  # 6 -> 20 x 1.05^12 = 36: fine
    assert parse(data).inference[0].replicas.monthly_growth == 0.05  # type: ignore[union-attr]


def test_a_horizon_far_in_the_future_is_an_error_not_an_overflow() -> None:
    data = example()
    data["horizon"]["start"] = "9999-12-31T00:00:00Z"
    error = _error(data)
    assert error.where == "horizon.start" and "outside 1970-01-01 to 2200-01-01" in error.problem


def _numeric_properties(node: Any, path: str = "") -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(path, the property, its number schema) for every number or integer property of the schema."""
    found = []
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            branches = [prop, *prop.get("anyOf", [])]
            number = next((b for b in branches if b.get("type") in ("number", "integer")), None)
            if number is not None:
                found.append((f"{path}{name}", prop, number))
        for key, value in node.items():
            if key != "properties":
                found += _numeric_properties(value, f"{path}{key}." if key != "$defs" else path)
    return found


def test_every_numeric_field_states_its_range_in_the_schema() -> None:
    numeric = _numeric_properties(json_schema("scenario"))
    assert len(numeric) >= 35
    for path, prop, number in numeric:
        assert {"minimum", "exclusiveMinimum"} & set(number), path
        assert {"maximum", "exclusiveMaximum"} & set(number), path
        description = prop.get("description", "")
        high = number.get("maximum", number.get("exclusiveMaximum"))
        assert f"{high:g}" in description or str(int(high)) in description, (path, description)
    by_name = {path.rsplit(".", 1)[-1] + "@" + path.split(".")[0]: prop for path, prop, _ in numeric}
    assert "1 to 10000 nodes" in by_name["nodes@TrainingJob"]["description"]


# ---- names -----------------------------------------------------------------------------------------

BAD_NAMES = {
    "empty": ("", "must not be empty"),
    "only spaces": ("   ", "must not be empty or only whitespace"),
    "leading space": (" chat", "starts or ends with whitespace"),
    "trailing newline": ("chat\n", "starts or ends with whitespace"),
    "a tab inside": ("chat\t70b", "control"),
    "an escape inside": ("chat\x1b[31m", "control"),
    "too long": ("x" * (MAX_NAME_LENGTH + 1), f"at most {MAX_NAME_LENGTH}"),
}
NAME_FIELDS = {
    "team": (lambda d, v: d["teams"][1].update(name=v), "teams[1].name"),
    "inference": (lambda d, v: d["inference"][0].update(name=v), "inference[0].name"),
    "training": (lambda d, v: d["training"][1].update(name=v), "training[1].name"),
    "commitment": (lambda d, v: d.update(commitments=[{**HELD, "name": v}]), "commitments[0].name"),
    "site": (lambda d, v: d.update(colocation={"max_nodes": 2, "site": v}), "colocation.site"),
    "scenario": (lambda d, v: d.update(name=v), "name"),
}


@pytest.mark.parametrize("field", NAME_FIELDS)
@pytest.mark.parametrize(("name", "words"), BAD_NAMES.values(), ids=BAD_NAMES.keys())
def test_names_are_printable_and_not_empty(field: str, name: str, words: str) -> None:
    mutate, where = NAME_FIELDS[field]
    data = example()
    mutate(data, name)
    error = _error(data)
    assert error.where == where and words in error.problem, error.problem


def test_names_may_hold_inner_spaces_and_unicode() -> None:
    data = example()
    data["name"] = "Mixed fleet 2027 — ünïcode"
    data["colocation"] = {"max_nodes": 2, "site": "Frankfurt DC-2"}
    assert parse(data).colocation.site == "Frankfurt DC-2"  # type: ignore[union-attr]


def test_a_site_has_no_colon_it_is_part_of_an_offering_id() -> None:
    data = example()
    data["colocation"] = {"max_nodes": 2, "site": "dc:2"}
    error = _error(data)
    assert error.where == "colocation.site" and "colon" in error.problem


@pytest.mark.parametrize(
    ("patterns", "where", "words"),
    [
        ([""], "inference[0].gpu_models[0]", "must not be empty"),  # once matched every GPU model
        (["H100", " "], "inference[0].gpu_models[1]", "must not be empty"),
        ([" H100"], "inference[0].gpu_models[0]", "whitespace"),
        (["H1\x0000"], "inference[0].gpu_models[0]", "control"),
        ([], "inference[0].gpu_models", "list at least one GPU model"),
    ],
)
def test_gpu_model_patterns_are_not_empty(patterns: list[str], where: str, words: str) -> None:
    data = example()
    data["inference"][0]["gpu_models"] = patterns
    error = _error(data)
    assert error.where == where and words in error.problem, error.problem
    data = example()
    data["training"][0]["gpu_models"] = patterns
    assert _error(data).where == where.replace("inference", "training")


def test_the_schema_states_the_name_rules() -> None:
    team = json_schema("scenario")["$defs"]["Team"]["properties"]["name"]
    assert team["minLength"] == 1 and team["maxLength"] == MAX_NAME_LENGTH and "pattern" in team
    assert "no leading or trailing whitespace" in json.dumps(team)


# ---- demand series (models/workloads._csv_series) --------------------------------------------------

SERIES = {
    "inf": ("hour,replicas\n0,3\n1,inf\n", "row 3, column replicas", "must be a finite number"),
    "nan": ("hour,replicas\n0,3\n1,NaN\n", "row 3, column replicas", "must be a finite number"),
    "negative": ("hour,replicas\n0,3\n1,-2\n", "row 3, column replicas", "must be at least 0"),
    "not a number": ("hour,replicas\n0,3\n1,lots\n", "row 3, column replicas", "'lots' is not a number"),
    "a boolean": ("hour,replicas\n0,TRUE\n", "row 2, column replicas", "a boolean is not a number"),
    "empty cell": ("hour,replicas\n0,3\n1,\n", "row 3, column replicas", "empty cell"),
    "too many": ("hour,replicas\n0,3\n1,2e6\n", "row 3, column replicas", "at most 1000000 replicas"),
    "a blank line counts as a row": ("hour,replicas\n0,3\n\n2,x\n", "row 4, column replicas", "not a number"),
    "hour inf": ("hour,replicas\n0,3\ninf,2\n", "row 3, column hour", "must be a finite number"),
    "hour a boolean": ("hour,replicas\n0,3\nfalse,2\n", "row 3, column hour", "a boolean is not a number"),
    "hour far away": ("hour,replicas\n0,3\n1e9,2\n", "row 3, column hour", "at most 43800 hours"),
    "hour empty": ("hour,replicas\n0,3\n,2\n", "row 3, column hour", "empty cell"),
    "hours go back": ("hour,replicas\n0,3\n5,3\n4,3\n", "row 4, column hour", "must increase"),
    "starts late": ("hour,replicas\n3,3\n", "row 2, column hour", "start at or before the horizon"),
    "timestamp not ISO": (
        "timestamp,replicas\n2027-01-01T00:00:00Z,3\n01/02/2027,4\n", "row 3, column timestamp", "ISO 8601"
    ),
    "timestamp far away": (
        "timestamp,replicas\n2027-01-01T00:00:00Z,3\n2999-01-01T00:00:00Z,4\n",
        "row 3, column timestamp",
        "after the horizon start; at most 43800",
    ),
    "unknown column": ("hour,replica\n0,3\n", "row 1, column replica", "did you mean 'replicas'"),
    "both times": ("hour,timestamp,replicas\n0,2027-01-01,3\n", "row 1, column timestamp", "not both"),
    "no time": ("replicas\n3\n", "row 1", "needs an 'hour' or a 'timestamp' column"),
    "extra cells": ("hour,replicas\n0,3,4\n", "row 2, column 3", "header has 2"),
    "no rows": ("hour,replicas\n", "row 2", "no rows"),
    "empty file": ("", "row 1", "empty file"),
}  # fmt: skip


def _series_scenario(tmp_path: Path, content: str) -> Scenario:
    (tmp_path / "d.csv").write_text(content, encoding="utf-8")
    data = example()
    data["inference"][0]["replicas"] = {"csv": "d.csv"}
    return parse(data)


@pytest.mark.parametrize(("content", "where", "words"), SERIES.values(), ids=SERIES.keys())
def test_bad_series_cells_name_file_row_and_column(
    tmp_path: Path, content: str, where: str, words: str
) -> None:
    scenario = _series_scenario(tmp_path, content)
    with pytest.raises(InputError) as caught:
        service_demand(scenario, scenario.inference[0], tmp_path)
    error = caught.value
    assert error.file == str(tmp_path / "d.csv")
    assert (error.where, words in error.problem) == (where, True), error.problem


def test_good_series_read_as_before(tmp_path: Path) -> None:
    content = "\ufefftimestamp,replicas\n2026-12-31T22:00:00Z,2\n2027-01-01 03:00,4.5\n\n"
    scenario = _series_scenario(tmp_path, content)
    demand = service_demand(scenario, scenario.inference[0], tmp_path)
    assert list(demand[:5]) == [2, 2, 2, 5, 5]  # naive times are UTC; 4.5 replicas need 5


def test_a_series_times_scale_is_bounded(tmp_path: Path) -> None:
    scenario = _series_scenario(tmp_path, "hour,replicas\n0,900000\n")
    scaled = scenario.model_copy(
        update={"inference": [scenario.inference[0].model_copy(update={"scale": 2.0}), scenario.inference[1]]}
    )
    with pytest.raises(InputError) as caught:
        service_demand(scaled, scaled.inference[0], tmp_path)
    assert caught.value.where == "inference[0].scale" and "at most 1000000 replicas" in caught.value.problem


def test_every_shipped_scenario_still_loads() -> None:
    for path in sorted(EXAMPLE.parent.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert parse(copy.deepcopy(data), path).name == data["name"]
