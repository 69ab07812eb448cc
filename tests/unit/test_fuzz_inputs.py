"""Mutated inputs never crash and never mislead (issue 13 point 6).

Every ready scenario (and a user catalog) is mutated the way a script or a spreadsheet gets it wrong: a
field deleted, set to a value of the wrong type or out of range (inf, nan, 1e30, -1, a boolean, an empty
or whitespace string, control characters, an unknown region or GPU model), a list emptied or a key
misspelt; catalog and demand CSV cells likewise. Each mutation goes through ``gpuplan validate`` in
process (``typer.testing.CliRunner``): the exit code is 0 or 2, there is never a traceback, and a
rejection names a field, a file or a line. A sample of the accepted ones, on a short horizon, goes
through ``gpuplan plan``: it succeeds (every declared service and run served or listed unserved) or
exits 2 writing nothing.

CI replays a fixed set of examples (``HYPOTHESIS_PROFILE=ci``, derandomized): ``MUTATIONS`` per run.
"""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from input_fuzz import key_paths, value_at
from typer.testing import CliRunner

from models.catalog import EMBEDDED_CATALOG_PATH
from planner.cli import app

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
BASES = {path.stem: yaml.safe_load(path.read_text(encoding="utf-8")) for path in SCENARIOS}
MUTATIONS = 1000  # validated per CI run (2000 took 73 s; local runs keep drawing new ones)
PLANNED = 24  # of those, planned on a short horizon

#: Values a wrong input takes: other types, non-finite and absurd numbers, empty, blank and control
#: strings, names the catalog does not have.
BAD_VALUES: tuple[Any, ...] = (
    None, True, False, 0, -1, -0.5, 1e30, -1e30, math.inf, -math.inf, math.nan, 2**63, 0.1,
    "", " ", "\t", "x\x00y", "\u202e", "mars-1", "H10O", "Z999", "1y", "spot", "2027-13-45",
    "2019-01-01T00:00:00Z", [], [""], [None], {}, {"csv": "."}, {"csv": "missing.csv"}, [[[]]],
)  # fmt: skip
#: Values for the short-horizon planning sample: what stays plausible, so plans are worth checking.
PLAUSIBLE_VALUES: tuple[Any, ...] = (0, 1, 2, 0.5, 3, "", "x", [], None, True)


@st.composite
def mutated(draw: st.DrawFn, values: tuple[Any, ...] = BAD_VALUES) -> tuple[str, dict[str, Any]]:
    """(scenario name, its data with one to three mutations)."""
    name = draw(st.sampled_from(sorted(BASES)))
    data = copy.deepcopy(BASES[name])
    for _ in range(draw(st.integers(1, 3))):
        paths = key_paths(data)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = value_at(data, path[:-1])
        key = path[-1]
        action = draw(st.sampled_from(["set", "set", "set", "delete", "rename", "duplicate"]))
        if action == "set":
            parent[key] = copy.deepcopy(draw(st.sampled_from(values)))
        elif action == "delete":
            del parent[key]
        elif action == "rename" and isinstance(parent, dict):
            parent[f"{key}x"] = parent.pop(key)
        elif action == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
    return name, data


def _write(directory: Path, data: dict[str, Any]) -> Path:
    path = directory / "scenario.yaml"
    # allow_unicode keeps control characters as the user typed them; width keeps long lines intact
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000), encoding="utf-8")
    return path


def _assert_clean(result: Any, what: str) -> None:
    """Exit 0 or 2, no traceback, and a rejection that names a field, a file or a line."""
    output = result.output
    assert result.exit_code in (0, 2), f"{what}: exit {result.exit_code}\n{output}\n{result.exception!r}"
    assert "Traceback" not in output, f"{what}: traceback\n{output}"
    if result.exit_code == 2:
        assert "error:" in output, output
        named = r"\.yaml|\.csv|/\S+|line \d+|\w+(\[\d+\])?(\.\w+)+|--\w+"  # a file, line, field or flag
        assert re.search(named, output), f"{what}: {output}"


@settings(max_examples=MUTATIONS, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=mutated())
def test_mutated_scenarios_validate_or_fail_cleanly(tmp_path_factory: pytest.TempPathFactory, case) -> None:
    name, data = case
    directory = tmp_path_factory.mktemp("fuzz", numbered=True)
    result = CliRunner().invoke(app, ["validate", str(_write(directory, data))])
    _assert_clean(result, f"{name}: {json.dumps(data, default=str)[:400]}")


def _short(data: dict[str, Any]) -> dict[str, Any]:
    """The scenario on a two-day horizon at its period (so a plan takes a second or two)."""
    horizon = data.get("horizon")
    if isinstance(horizon, dict):
        period = horizon.get("period_hours", 1)
        period = (
            period if isinstance(period, int) and not isinstance(period, bool) and 0 < period <= 24 else 1
        )
        horizon["hours"], horizon["period_hours"] = 48 if 48 % period == 0 else period * 2, period
    for job in data.get("training") or []:
        if isinstance(job, dict):
            job.pop("earliest_start", None)
            job.pop("deadline", None)
            if isinstance(job.get("hours"), int | float) and not isinstance(job.get("hours"), bool):
                job["hours"] = min(job["hours"], 12)
            job["repeat"] = "none"
    data.pop("commitments", None)  # their dates are of the year; a two-day horizon may miss them
    return data


@settings(max_examples=PLANNED, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=mutated(PLAUSIBLE_VALUES))
def test_accepted_mutations_plan_or_fail_cleanly(tmp_path_factory: pytest.TempPathFactory, case) -> None:
    name, data = case
    directory = tmp_path_factory.mktemp("fuzzplan", numbered=True)
    path = _write(directory, _short(data))
    runner = CliRunner()
    checked = runner.invoke(app, ["validate", str(path)])
    _assert_clean(checked, name)
    if checked.exit_code != 0:
        return
    out = directory / "plan"
    planned = runner.invoke(
        app, ["plan", str(path), "-o", str(out), "-q", "--no-report", "--time-limit", "10"]
    )
    assert "Traceback" not in planned.output, planned.output
    if planned.exit_code == 2:  # an input problem only the solve finds: nothing written
        assert not out.exists(), planned.output
        return
    assert planned.exit_code == 0, f"{name}: exit {planned.exit_code}\n{planned.output}"
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    rows = pd.read_csv(out / "allocations.csv")
    listed = {u["workload"] for u in plan["unserved"]}
    served = set(rows["workload"])
    inputs = plan["inputs"]
    for service in inputs.get("inference", []):
        assert service["name"] in served | listed, (
            f"{name}: service {service['name']} neither served nor unserved"
        )
    placed = {(t["job"], t["run"]) for t in plan["training"]}
    unserved_runs = {(u["workload"], u["run"]) for u in plan["unserved"] if u["kind"] == "training"}
    for job in inputs.get("training", []):
        runs = {key for key in placed | unserved_runs if key[0] == job["name"]}
        assert runs, f"{name}: job {job['name']} neither placed nor unserved"


def test_the_embedded_catalog_is_the_base_of_user_catalog_mutations() -> None:
    """The catalog mutations below start from the embedded catalog, which must load as it is."""
    frame = pd.read_csv(EMBEDDED_CATALOG_PATH)
    assert len(frame) > 20 and {"cloud", "region", "instance_type", "on_demand_usd_h"} <= set(frame.columns)


CATALOG = pd.read_csv(EMBEDDED_CATALOG_PATH, dtype=str, keep_default_na=False)
BAD_CELLS = ("", " ", "inf", "-inf", "nan", "NaN", "-1", "0", "1e30", "true", "abc", "\x00", "H10O", "mars-1")


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    row=st.integers(0, len(CATALOG) - 1),
    column=st.sampled_from(list(CATALOG.columns)),
    value=st.sampled_from(BAD_CELLS),
    extra=st.sampled_from([None, "duplicate", "unknown-column", "drop-column"]),
)
def test_mutated_user_catalogs_validate_or_fail_cleanly(
    tmp_path_factory: pytest.TempPathFactory, row: int, column: str, value: str, extra: str | None
) -> None:
    directory = tmp_path_factory.mktemp("fuzzcat", numbered=True)
    frame = CATALOG.copy()
    frame.loc[row, column] = value
    if extra == "duplicate":
        frame = pd.concat([frame, frame.iloc[[row]]], ignore_index=True)
    elif extra == "unknown-column":
        frame["spot_usd_hr"] = "1.0"
    elif extra == "drop-column":
        frame = frame.drop(columns=[column])
    frame.to_csv(directory / "catalog.csv", index=False)
    data = copy.deepcopy(BASES["mixed-fleet"])
    data["catalog"] = "catalog.csv"
    result = CliRunner().invoke(app, ["validate", str(_write(directory, data))])
    _assert_clean(result, f"catalog row {row} {column}={value!r} {extra}")
