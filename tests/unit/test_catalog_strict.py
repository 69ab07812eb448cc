"""The catalog CSV read strictly (issue 36): numbers in plain ASCII digits, price ratios that are prices,
a bounded number of offerings. Each refusal is one InputError naming the file, row and column."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

import models.catalog as catalog_module
from models.catalog import EMBEDDED_CATALOG_PATH, MAX_PRICE_RATIO, Catalog
from models.errors import InputError
from planner.cli import app


def _rows() -> list[list[str]]:
    with EMBEDDED_CATALOG_PATH.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))[:4]  # the header and three offerings


def _write(tmp_path: Path, rows: list[list[str]]) -> Path:
    path = tmp_path / "catalog.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(rows)
    return path


def _with(tmp_path: Path, column: str, value: str | None = None, times: float | None = None) -> Path:
    """The catalog with ``column`` of its first offering set to ``value`` or ``times`` x on-demand."""
    rows = _rows()
    header, row = rows[0], rows[1]
    if times is not None:
        value = f"{float(row[header.index('on_demand_usd_h')]) * times:.4f}"
    row[header.index(column)] = str(value)
    return _write(tmp_path, rows)


@pytest.mark.parametrize(
    ("column", "cell", "problem"),
    [
        ("on_demand_usd_h", "1_000", "is not a number in plain digits"),
        ("gpus_per_node", "٨", "is not a number in plain digits"),  # Arabic-Indic eight
        ("spot_usd_h", "１２", "is not a number in plain digits"),  # fullwidth twelve
        ("max_nodes", "TRUE", "a boolean is not a number"),
        ("reserved_1y_usd_h", "nan", "must be a finite number"),
        ("fabric_gbps", "inf", "must be a finite number"),
    ],
)
def test_a_number_in_other_digits_is_refused(tmp_path: Path, column: str, cell: str, problem: str) -> None:
    with pytest.raises(InputError) as caught:
        Catalog.load(_with(tmp_path, column, cell))
    assert f"catalog.csv: row 2, column {column}: " in str(caught.value)
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    ("column", "times"), [("spot_usd_h", 5.0), ("reserved_3y_usd_h", 3.0), ("reserved_1y_usd_h", 2.5)]
)
def test_a_price_far_above_on_demand_is_refused(tmp_path: Path, column: str, times: float) -> None:
    with pytest.raises(InputError) as caught:
        Catalog.load(_with(tmp_path, column, times=times))
    message = str(caught.value)
    assert f"row 2, column {column}: " in message and f"{times:.2f} x the on-demand" in message
    assert f"more than {MAX_PRICE_RATIO:g} x is a unit mix-up" in message


@pytest.mark.parametrize(("column", "times"), [("spot_usd_h", 1.2), ("reserved_1y_usd_h", 1.5)])
def test_a_price_a_little_above_on_demand_is_a_warning(tmp_path: Path, column: str, times: float) -> None:
    path = _with(tmp_path, column, times=times)
    catalog = Catalog.load(path)
    (warning,) = [w for w in catalog.warnings if column in w]
    assert f"row 2, column {column}: " in warning and f"{times:.2f} x the on-demand" in warning
    assert len(catalog) == 3
    # said once where a person reads it: gpuplan catalog on stderr (plan and validate: the plan's warnings)
    result = CliRunner().invoke(app, ["catalog", "--catalog", str(path), "--csv"])
    assert result.exit_code == 0
    said = "".join(result.stderr.split())  # rich wraps a long path anywhere, even inside a word
    assert said.count("".join(f"warning: {warning}".split())) == 1


def test_a_three_year_rate_above_the_one_year_rate_is_a_warning(tmp_path: Path) -> None:
    rows = _rows()
    header, row = rows[0], rows[1]
    row[header.index("reserved_3y_usd_h")] = f"{float(row[header.index('reserved_1y_usd_h')]) * 1.1:.4f}"
    catalog = Catalog.load(_write(tmp_path, rows))
    assert any("column reserved_3y_usd_h" in w and "above the 1-year" in w for w in catalog.warnings)


def test_the_embedded_catalog_has_no_warning() -> None:
    assert Catalog.load().warnings == ()


def test_a_catalog_has_a_bounded_number_of_offerings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog_module, "MAX_CATALOG_ROWS", 2)
    with pytest.raises(InputError, match=r"row 4: more than 2 offerings in one catalog"):
        Catalog.load(_write(tmp_path, _rows()))
