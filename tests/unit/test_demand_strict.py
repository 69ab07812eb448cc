"""A ``{csv: FILE}`` demand series read strictly (issue 36): every cell a finite number in plain ASCII
digits inside its range, times increasing, a bounded number of rows; one InputError naming the file, the
row and the column."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

import models.workloads as workloads_module
from models.errors import InputError
from models.scenario import CsvSeries, Horizon
from models.workloads import hourly_demand

HORIZON = Horizon(start=datetime(2027, 1, 1, tzinfo=UTC), hours=48, period_hours=1)


def _series(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "demand.csv"
    path.write_text(text, encoding="utf-8")
    return path


REFUSED = {
    "an underscore": ("hour,replicas\n0,1_000\n", "row 2, column replicas", "plain digits"),
    "Arabic-Indic digits": ("hour,replicas\n0,١٦\n", "row 2, column replicas", "plain digits"),
    "fullwidth digits": ("hour,replicas\n０,4\n", "row 2, column hour", "plain digits"),
    "a boolean": ("hour,replicas\n0,TRUE\n", "row 2, column replicas", "a boolean is not a number"),
    "NaN": ("hour,replicas\n0,nan\n", "row 2, column replicas", "must be a finite number"),
    "infinity": ("hour,replicas\n0,4\n1,-inf\n", "row 3, column replicas", "must be a finite number"),
    "negative replicas": ("hour,replicas\n0,-4\n", "row 2, column replicas", "must be at least 0"),
    "an overflowing number": ("hour,replicas\n0,1e400\n", "row 2, column replicas", "finite"),
    "a time going back": ("hour,replicas\n0,4\n5,4\n3,4\n", "row 4, column hour", "times must increase"),
    "a time years away": ("hour,replicas\n0,4\n1e9,4\n", "row 3, column hour", "must be at most"),
    "a bad timestamp": ("timestamp,replicas\n2027-13-01,4\n", "row 2, column timestamp", "not a valid time"),
    "an extra cell": ("hour,replicas\n0,4,7\n", "row 2, column 3", "3 cells but the header has 2"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_hostile_series_is_one_clean_error(tmp_path: Path, case: str) -> None:
    text, where, problem = REFUSED[case]
    _series(tmp_path, text)
    with pytest.raises(InputError) as caught:
        hourly_demand(CsvSeries(csv="demand.csv"), HORIZON, tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'demand.csv'}: {where}: ") and problem in message, message


def test_a_series_has_a_bounded_number_of_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workloads_module, "MAX_SERIES_ROWS", 3)
    _series(tmp_path, "hour,replicas\n0,1\n1,2\n2,3\n3,4\n")
    with pytest.raises(InputError, match=r"row 5: more than 3 rows in one demand series"):
        hourly_demand(CsvSeries(csv="demand.csv"), HORIZON, tmp_path)


def test_a_plain_series_still_reads(tmp_path: Path) -> None:
    _series(tmp_path, "hour,replicas\n0,4\n24,8.5\n")
    demand = hourly_demand(CsvSeries(csv="demand.csv"), HORIZON, tmp_path)
    assert demand[0] == 4 and demand[23] == 4 and demand[24] == 8.5 and len(demand) == 48
