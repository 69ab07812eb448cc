"""The usage CSV and the OpenCost export read strictly (issue 36 point 1): each hostile input the issue
lists, and more of its kind, is one InputError naming the file, the row and column (CSV) or the
allocation and field (OpenCost), never a traceback and never a charge. ``read_usage`` and
``from_opencost`` read one file against one plan and raise InputError: what a fuzzer drives."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from test_chargeback import HEADER, P5, book

from models.errors import InputError
from models.usage import UsageLimits, from_opencost, read_usage

GOOD = f"prod,chat,ns,2027-03-01T00:00:00Z,2027-03-02T00:00:00Z,8,,{P5},on_demand"


def csv_row(**cells: str) -> str:
    """GOOD with some cells replaced (columns of HEADER)."""
    names = HEADER.strip().split(",")
    values = dict(zip(names, GOOD.split(","), strict=True))
    values.update(cells)
    return ",".join(values[n] for n in names)


@pytest.mark.parametrize(
    ("cells", "where", "text"),
    [
        # names the plan does not have: a team is never charged as a new one
        (
            {"team": "marketing"},
            "row 3, column team",
            "'marketing' is not a team of the plan (prod, research)",
        ),
        ({"team": "Prod"}, "row 3, column team", "not a team of the plan"),
        ({"offering": "aws:us-east-1:p4d.24xlarge"}, "row 3, column offering", "not an offering of the plan"),
        ({"tier": "reserved_3y"}, "row 3, column tier", "holds no reserved_3y commitment"),
        ({"tier": "Spot"}, "row 3, column tier", "unknown tier 'Spot'"),
        # times outside the plan's horizon (March 2027), and not times at all
        ({"start": "1999-03-01T00:00:00Z"}, "row 3, column start", "years 2000 to 2099"),
        ({"end": "2031-03-01T00:00:00Z"}, "row 3, column end", "after the plan's horizon (ends 2027-04-01"),
        ({"start": "2027-02-28T00:00:00Z"}, "row 3, column start", "before the plan's horizon"),
        ({"start": "0001-01-01T00:00:00+14:00"}, "row 3, column start", "is not a time"),
        ({"start": "1800000000"}, "row 3, column start", "is not a time"),
        ({"start": "٢٠٢٧-03-01T00:00:00Z"}, "row 3, column start", "plain digits"),
        # numbers: finite, in range, ASCII digits, not booleans
        ({"gpus": "nan"}, "row 3, column gpus", "finite"),
        ({"gpus": "inf"}, "row 3, column gpus", "finite"),
        ({"gpus": "TRUE"}, "row 3, column gpus", "a boolean is not a number"),
        ({"gpus": "1_000"}, "row 3, column gpus", "plain digits"),
        ({"gpus": "١٦"}, "row 3, column gpus", "plain digits"),
        ({"gpus": "0"}, "row 3, column gpus", "greater than 0"),
        ({"gpus": "1e308"}, "row 3, column gpus", "at most 100000 GPUs"),
        ({"gpus": "90000"}, "row 3, column gpus", "more than any fleet"),
        # names: bounded, printable
        ({"project": "x" * 300}, "row 3, column project", "at most 253 characters"),
        ({"team": "prod\u202e"}, "row 3, column team", "control, formatting or separator character"),
    ],
)
def test_hostile_usage_cells(tmp_path: Path, cells: dict[str, str], where: str, text: str):
    path = tmp_path / "usage.csv"
    path.write_text(HEADER + GOOD + "\n" + csv_row(**cells) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_usage(path, book())
    assert caught.value.where == where
    assert text in caught.value.problem
    assert caught.value.file == str(path) and "\n" not in str(caught.value)


def test_outside_horizon_only_when_allowed(tmp_path: Path):
    path = tmp_path / "usage.csv"
    path.write_text(HEADER + csv_row(start="2027-04-02T00:00:00Z", end="2027-04-03T00:00:00Z") + "\n")
    with pytest.raises(InputError, match="--allow-outside-horizon"):
        read_usage(path, book())
    (row,) = read_usage(path, book(), allow_outside_horizon=True)
    assert row.hours == 24.0


def test_size_and_row_limits(tmp_path: Path):
    path = tmp_path / "usage.csv"
    path.write_text(HEADER + (GOOD + "\n") * 3, encoding="utf-8")
    assert len(read_usage(path, book(), limits=UsageLimits(max_bytes=10_000, max_rows=3))) == 3
    with pytest.raises(InputError, match="more than 2 rows; a usage CSV may have at most 2") as caught:
        read_usage(path, book(), limits=UsageLimits(max_bytes=10_000, max_rows=2))
    assert caught.value.where == "row 4"
    with pytest.raises(
        InputError, match=r"bytes; a usage CSV may be at most 100 bytes \(split it by month\)"
    ) as caught:
        read_usage(path, book(), limits=UsageLimits(max_bytes=100, max_rows=10))
    assert caught.value.where is None
    export = tmp_path / "allocation.json"
    export.write_text(json.dumps(EXPORT), encoding="utf-8")
    with pytest.raises(InputError, match="3 allocations; an export may have at most 1"):
        from_opencost(export, book(), limits=UsageLimits(max_bytes=10_000, max_rows=1))


LABELS = {"team": "prod", "project": "chat", "gpuplan.io/offering": P5, "gpuplan.io/tier": "on_demand"}
POD = {
    "properties": {"namespace": "prod-ns", "labels": LABELS},
    "start": "2027-03-01T00:00:00Z",
    "end": "2027-03-01T10:00:00Z",
    "gpuHours": 20.0,
}
EXPORT: dict[str, Any] = {
    "code": 200,
    "data": [{"chat-0": POD, "__idle__": {"gpuHours": 5.0}, "cpu-0": {**POD, "gpuHours": 0}}],
}


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


POD_PATH = ("data", 0, "chat-0")
LABEL = (*POD_PATH, "properties", "labels")


@pytest.mark.parametrize(
    ("path", "value", "where", "text"),
    [
        (("code",), 500, "code", "the API answered code 500, not 200"),
        (("code",), "200", "code", "code is the string '200'"),
        (("code",), True, "code", "code is a boolean"),
        ((*POD_PATH, "gpuHours"), -1, "data[0].chat-0.gpuHours", "at least 0"),
        ((*POD_PATH, "gpuHours"), True, "data[0].chat-0.gpuHours", "got a boolean"),
        ((*POD_PATH, "gpuHours"), "20", "data[0].chat-0.gpuHours", "got the string '20'"),
        ((*POD_PATH, "gpuHours"), None, "data[0].chat-0.gpuHours", "got null"),
        ((*POD_PATH, "gpuHours"), 1e7, "data[0].chat-0, gpuHours / hours (GPUs)", "at most 100000 GPUs"),
        (("data", 0, "other-0"), [], "data[0].other-0", "expected an allocation object, got a list"),
        (("data", 0, "other-0"), "x", "data[0].other-0", "expected an allocation object"),
        (("data", 0), [], "data[0]", "expected a map of allocation name -> allocation"),
        ((*LABEL, "gpuplan.io/tier"), [], "data[0].chat-0.properties.labels.gpuplan.io/tier", "got a list"),
        ((*LABEL, "gpuplan.io/tier"), "", "data[0].chat-0.properties.labels.gpuplan.io/tier", "empty label"),
        ((*LABEL, "gpuplan.io/tier"), "reserved", "data[0].chat-0, properties.labels.gpuplan.io/tier",
         "unknown tier 'reserved'"),
        ((*LABEL, "team"), "marketing", "data[0].chat-0, properties.labels.team (else properties.namespace)",
         "not a team of the plan"),
        ((*LABEL, "gpuplan.io/offering"), "gcp:x:y",
         "data[0].chat-0, properties.labels.gpuplan.io/offering (or --opencost-offering)", "not an offering"),
        ((*POD_PATH, "properties"), "x", "data[0].chat-0.properties", "expected an object"),
        ((*POD_PATH, "end"), "2031-01-01T00:00:00Z", "data[0].chat-0, end", "after the plan's horizon"),
        ((*POD_PATH, "end"), "2027-03-01T00:00:00Z", "data[0].chat-0.end", "must be after start"),
        ((*POD_PATH, "start"), 1, "data[0].chat-0.start", "must be a string"),
    ],
)  # fmt: skip
def test_hostile_opencost_fields(tmp_path: Path, path: tuple[Any, ...], value: Any, where: str, text: str):
    export = tmp_path / "allocation.json"
    export.write_text(json.dumps(_set(EXPORT, path, value)), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        from_opencost(export, book())
    assert caught.value.where == where
    assert text in caught.value.problem


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (json.dumps(EXPORT).replace("20.0", "NaN"), "NaN is not a number"),  # never dropped silently
        (json.dumps(EXPORT).replace("20.0", "Infinity"), "Infinity is not a number"),
        (json.dumps(EXPORT).replace("20.0", "9" * 5000), "not a JSON OpenCost allocation export"),
        ("[" * 100_000, "nested too deep"),
        ('{"code": 200, "code": 500, "data": []}', "key 'code' appears twice"),
        ('{"code": 200, "data": []}', "no allocation with gpuHours > 0"),
        ("", "not a JSON OpenCost allocation export"),
    ],
)
def test_hostile_opencost_documents(tmp_path: Path, text: str, problem: str):
    export = tmp_path / "allocation.json"
    export.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=problem):
        from_opencost(export, book())


def test_opencost_idle_and_gpu_less_entries_skipped(tmp_path: Path):
    export = tmp_path / "allocation.json"
    export.write_text(json.dumps(EXPORT), encoding="utf-8")
    (row,) = from_opencost(export, book())
    assert (row.team, row.project, row.gpus, row.hours, row.ref) == (
        "prod",
        "chat",
        2.0,
        10.0,
        "data[0].chat-0",
    )
