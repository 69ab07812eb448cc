"""Tests for planner/outputs/reports/breakeven.py: rendered from documents built with real models/tco.py
results.

The expected strings are the hand figures of tests/unit/test_finance.py formatted as the page shows
them (default Colocation, one node against AWS p5.48xlarge on-demand $55.04 at 100% utilization):
break-even 335,000 / (40,179.20 - 5,836.88) = 9.75 -> "9.8 months"; NPV $845,222.59 -> "$845,223";
capital recovery 7,964.8354 -> "$7,964.84"; colo "$2,040.00"; support "$2,791.67"; energy "$1,005.21";
total of the shown parts "$13,801.72"; owned tier price (7,964.84 + 5,836.88) / 730 -> "$18.91".
A damaged breakeven.json fails on reading (``BreakevenDocument.read``), naming the file and the field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from plotly.offline import get_plotlyjs

from models.breakeven import BreakevenDocument, Comparator
from models.errors import InputError
from models.scenario import Colocation
from models.tco import OwnershipCase, breakeven_data, unit_case
from planner.outputs.reports.breakeven import render_breakeven_html, render_breakeven_markdown

COMPARATOR = Comparator(
    offering="aws:us-east-1:p5.48xlarge",
    on_demand_usd_h=55.04,
    reserved_1y_usd_h=33.024,
    reserved_3y_usd_h=22.016,
)
SECTIONS = ("Inputs", "Monthly owned cost", "Cumulative cost", "Sensitivity", "Method")
GRID_TITLE = "Break-even by comparison price and utilization"


def _data(
    case: OwnershipCase, scenario: str = "mixed-fleet", comparator: Comparator = COMPARATOR
) -> BreakevenDocument:
    # Round-trip through JSON: the renderers get exactly what breakeven.json holds.
    data = breakeven_data(case, scenario=scenario, nodes_from="plan", comparator=comparator)
    return BreakevenDocument.model_validate_json(data.to_json())


@pytest.fixture(scope="module")
def unit() -> BreakevenDocument:
    return _data(unit_case(Colocation(max_nodes=4), 55.04, 1.0))


@pytest.fixture(scope="module")
def never() -> BreakevenDocument:
    """Renting for $10,000 a month: 36 x (10,000 - 5,836.88) + 100,500 = 250,372 < 335,000."""
    case = OwnershipCase(Colocation(max_nodes=4), 1, [10_000.0] * 12, [0.0] * 12)
    return _data(case, scenario="too-cheap-cloud")


@pytest.fixture(scope="module")
def unit_html(unit: BreakevenDocument) -> str:
    return render_breakeven_html(unit)


def test_markdown_numbers_and_sections(unit: BreakevenDocument) -> None:
    md = render_breakeven_markdown(unit)
    assert "Owning 1 node (the number the plan buys) breaks even after 9.8 months" in md
    assert "NPV over the 36-month life at the 8% cost of capital is $845,223 (owning saves money)" in md
    for section in (*SECTIONS, GRID_TITLE):
        assert f"## {section}" in md
    # Monthly split: each part as a hand calculation gives it, the total as their sum.
    assert "| capital recovery | $7,964.84 | $7,964.84 |" in md
    assert "| colo fee | $2,040.00 |" in md
    assert "| support | $2,791.67 |" in md
    assert "| energy | $1,005.21 |" in md
    assert "| **total** | **$13,801.72** |" in md
    assert "$18.91 per node-hour" in md
    assert "| months to break even | 9.8 months |" in md
    assert "divided by 730 h (= $13,801.72 / 730)" in md  # the table's cents, energy at full power
    # Inputs with units.
    assert "| capex per node (all-in) | 335,000 | USD per node |" in md
    assert "| colo fee | 200 | USD per kW-month |" in md
    assert "| cost of capital | 8 | % per year |" in md
    # Cumulative table: month 12 = 12 x 40,179.20 = 482,150.40 cloud; 335,000 + 12 x 5,836.88 owned.
    assert "| 12 | $482,150 | $405,043 | $77,108 |" in md
    # Grid row and the sentence on why quoted paybacks differ.
    assert "| on-demand | $55.04 | 9.8 | 12.6 | 17.9 | 30.9 |" in md
    assert "| 1-year reserved | $33.02 | 18.3 | 24.5 | 36.0 | never |" in md
    assert "| 3-year reserved | $22.02 | 32.7 | 36.0 | never | never |" in md
    assert "Quoted paybacks of 12-18 months" in md
    assert "<div" not in md and "plotly" not in md.lower()


def test_markdown_tornado_table(unit: BreakevenDocument) -> None:
    md = render_breakeven_markdown(unit)
    # At 100% use the cloud price trend swings NPV most (616,789 to 971,337), then utilization.
    rows = [
        line
        for line in md.splitlines()
        if line.startswith("| ") and ("/yr |" in line or "% | 100% |" in line)
    ]
    assert rows[0] == "| cloud price change per year | -20%/yr | +10%/yr | $616,789 | $971,337 | 9.8 | 9.8 |"
    # Utilization 80%: the 80% unit case, NPV $594,170, break-even 12.6; high is clipped at 100% (= base).
    assert rows[1] == "| utilization | 80% | 100% | $594,170 | $845,223 | 12.6 | 9.8 |"


def test_html_is_self_contained_with_one_plotly_copy(unit_html: str) -> None:
    lib = get_plotlyjs()
    assert unit_html.count(lib[:400]) == 1
    assert unit_html.count(lib[-400:]) == 1
    assert unit_html.index(lib[:400]) < unit_html.index("</head>")
    assert not re.search(r"<script[^>]*\bsrc\s*=", unit_html, re.IGNORECASE)
    assert not re.search(r"<link[^>]*href\s*=\s*[\"']?(https?:)?//", unit_html, re.IGNORECASE)
    assert unit_html.count('class="plotly-graph-div"') == 3
    for div in ("cumulative", "tornado", "grid"):
        assert unit_html.count(f'id="chart-{div}"') == 1


def test_html_numbers_sections_and_charts(unit: BreakevenDocument, unit_html: str) -> None:
    html = unit_html
    assert "breaks even after 9.8 months" in html
    assert "$845,223" in html
    for text in ("$7,964.84", "$2,040.00", "$2,791.67", "$1,005.21", "$13,801.72", "$18.91"):
        assert text in html
    for section in (*SECTIONS, GRID_TITLE):
        assert f">{section}</h2>" in html
    # Chart 1 marks the break-even; chart 2 has a bar per input around the base NPV.
    assert "break-even: 9.8 months" in html
    assert "Cumulative cost: cloud only vs owning (break-even at 9.8 months)" in html
    assert "NPV sensitivity, one input at a time (base NPV $845,223)" in html
    for bar in unit.tornado:
        assert bar.low_label in html and bar.high_label in html
    assert "(C - R/(1+i)^n) x i / (1 - (1+i)^-n)" in html


def test_never_breaking_even_is_said_in_words(never: BreakevenDocument) -> None:
    assert never.months_to_break_even is None
    md = render_breakeven_markdown(never)
    html = render_breakeven_html(never)
    sentence = "never breaks even within the depreciation life (36-month life)"
    assert sentence in md and sentence in html
    assert "| months to break even | never within 36-month life |" in md
    assert "(no break-even within the life)" in html
    assert not re.search(r"break-even: [0-9]", html)  # no marker when the curves do not cross
    # NPV = -335,000 + 4,163.1233 x 32.0433314 + 79,780.14 = -121,819.52 (owning costs more).
    assert "is -$121,820 (owning costs more than the cloud)" in md


def test_user_text_is_escaped_in_html() -> None:
    data = _data(unit_case(Colocation(max_nodes=1), 55.04, 1.0), scenario="<b>fleet</b>")
    html = render_breakeven_html(data)
    assert "&lt;b&gt;fleet&lt;/b&gt;" in html
    assert "<b>fleet</b>" not in html


def test_breakeven_json_keeps_its_keys(unit: BreakevenDocument) -> None:
    """The file's keys, as breakeven_data wrote them before the typed document (``plans`` is filled in by
    gpuplan breakeven; empty here, where no planner ran)."""
    plain = json.loads(unit.to_json())
    assert list(plain) == [
        "schema", "scenario", "nodes", "nodes_from", "months_to_break_even", "npv_usd",
        "owned_usd_per_node_hour", "utilization", "cloud_price_change_pct_per_year", "comparator", "curves",
        "grid", "tornado", "inputs", "monthly", "totals", "plans",
    ]  # fmt: skip
    assert plain["schema"] == "gpuplan.breakeven/v1" and plain["plans"] == {}
    assert plain["comparator"] == COMPARATOR.model_dump()
    assert list(plain["monthly"]) == ["capital_usd", "colo_usd", "support_usd", "energy_usd", "opex_usd"]
    assert plain["grid"][0] == {
        "price": "on_demand",
        "usd_per_node_hour": 55.04,
        "utilization": 1.0,
        "months_to_break_even": pytest.approx(9.7547, abs=1e-4),
        "npv_usd": pytest.approx(845_222.59, abs=0.01),
    }
    assert set(plain["tornado"][0]) == {
        "name", "title", "low_value", "high_value", "base_value", "low_label", "high_label", "base_label",
        "npv_low_usd", "npv_high_usd", "break_even_low", "break_even_high", "swing_usd",
    }  # fmt: skip
    assert plain["inputs"] == Colocation(max_nodes=4).model_dump(mode="json")


def test_read_round_trips(tmp_path: Path, unit: BreakevenDocument) -> None:
    path = tmp_path / "breakeven.json"
    path.write_text(unit.to_json(), encoding="utf-8")
    assert BreakevenDocument.read(path) == unit


def _damage(plain: dict[str, Any], change: str) -> None:
    if change == "monthly part missing":
        del plain["monthly"]["colo_usd"]
    elif change == "tornado bar without title":
        del plain["tornado"][0]["title"]
    elif change == "unknown tornado input":
        plain["tornado"][0]["name"] = "discount"
    elif change == "unknown price":
        plain["grid"][0]["price"] = "reserved_5y"
    elif change == "curves of different lengths":
        plain["curves"]["owned_cumulative_usd"].pop()
    elif change == "unknown GPU model":
        plain["inputs"]["gpu_model"] = "H1000"
    elif change == "misspelt field":
        plain["npv"] = plain.pop("npv_usd")


@pytest.mark.parametrize(
    ("change", "where", "problem"),
    [
        ("monthly part missing", "monthly.colo_usd", "Field required"),
        ("tornado bar without title", "tornado.0.title", "Field required"),
        ("unknown tornado input", "tornado.0.name", "Input should be"),
        ("unknown price", "grid.0.price", "Input should be"),
        ("curves of different lengths", "curves", "owned_cumulative_usd has 36 values for 37 months"),
        ("unknown GPU model", "inputs.gpu_model", "unknown GPU model 'H1000'"),
        ("misspelt field", "npv_usd", "Field required for schema gpuplan.breakeven/v1 (and 1 more)"),
    ],
)
def test_reading_a_damaged_breakeven_json_names_file_and_field(
    tmp_path: Path, unit: BreakevenDocument, change: str, where: str, problem: str
) -> None:
    """What the report used to fill in or render as dashes is now a clear error on reading."""
    plain = json.loads(unit.to_json())
    _damage(plain, change)
    path = tmp_path / "breakeven.json"
    path.write_text(json.dumps(plain), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        BreakevenDocument.read(path)
    error = caught.value
    assert (error.file, error.where) == (str(path), where)
    assert problem in error.problem and "gpuplan.breakeven/v1" in error.problem


def test_reading_an_empty_object_names_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "breakeven.json"
    path.write_text("{}", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        BreakevenDocument.read(path)
    assert caught.value.where == "schema"
    assert "reads schema 'gpuplan.breakeven/v1', the file says None" in caught.value.problem


def test_no_cloud_comparator() -> None:
    """No cloud node matches the owned one: no comparator facts and an empty grid, the rest as usual."""
    data = _data(unit_case(Colocation(max_nodes=4), 55.04, 1.0), comparator=Comparator(offering=None))
    assert data.grid == []
    md = render_breakeven_markdown(data)
    assert "cloud comparator" not in md and "on-demand price" not in md
    assert "breaks even after 9.8 months" in md
    assert "| comparison price | $ per node-hour |\n|:---|---:|\n\n" in md
    assert md.count("Quoted paybacks of 12-18 months") == 1
    assert render_breakeven_html(data).count('class="plotly-graph-div"') == 3
