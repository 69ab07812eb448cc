"""Tests for planner/outputs/reports/whatif.py: rendered from a whatif.json document built here by hand.

Three variants of a one-year scenario: the base (reserved + on-demand + spot), a colocation variant
that owns 16 nodes (paid mostly in its first month, so its cumulative cost starts above the base's
and crosses it) and leaves two demand items unserved, and a spot-price shock whose solve failed.
Expected strings are computed here from the same numbers, independently of the report code. The
document is built with the typed models of ``models/whatif.py`` and round-tripped through JSON, so the
renderers get exactly what whatif.json holds; a damaged whatif.json fails on reading, naming the field.
"""

from __future__ import annotations

import html
import json
import math
import re
import time
from pathlib import Path
from typing import Any

import pytest
from plotly.offline import get_plotlyjs

from models.errors import InputError
from models.plan import UnservedInference, UnservedTraining
from models.whatif import FailedVariant, SolvedVariant, WhatifDocument
from planner.outputs.reports.kit import TIER_COLORS
from planner.outputs.reports.whatif import render_whatif_html, render_whatif_markdown, write_whatif_reports

MONTHS = [f"2027-{m:02d}" for m in range(1, 13)]
ON_DEMAND_ALL = 3_487_167.0
FAILED_ERROR = "infeasible: training deadlines need a spot share of 0.42 > max_spot_share 0.3"
CHART_IDS = ("chart-tiers", "chart-savings", "chart-cumulative")
SECTIONS = ("Headline", "Comparison", "Unserved demand", "Cost by tier", "Savings", "Cumulative cost")
DASH = "—"


def _seasonal(total: float) -> list[float]:
    """``total`` spread over 12 months with a summer peak (weights sum to 1)."""
    weights = [1 + 0.3 * math.sin(math.pi * (k - 2) / 6) for k in range(12)]
    return [total * w / sum(weights) for w in weights]


def _variant(
    name: str, changes: list[str], by_tier: dict[str, float], monthly: dict[str, list[float]], **extra: Any
) -> SolvedVariant:
    """A solved variant as ``gpuplan whatif`` writes it; cumulative and shares come from the months."""
    total = sum(by_tier.values())
    per_month = [sum(series[k] for series in monthly.values()) for k in range(12)]
    cumulative = [sum(per_month[: k + 1]) for k in range(12)]
    fields: dict[str, Any] = {
        "name": name,
        "changes": changes,
        "status": "optimal",
        "plan_dir": f"variants/{name}",
        "total_usd": total,
        "all_on_demand_usd": ON_DEMAND_ALL,
        "savings_vs_on_demand_pct": round((ON_DEMAND_ALL - total) / ON_DEMAND_ALL * 100, 1),
        "by_tier": by_tier,
        "tier_mix": {tier: cost / total for tier, cost in by_tier.items()},
        "commitments": {},
        "committed_gpus": 0,
        "unserved": [],
        "gap": 0.0,
        "seconds": 1.0,
        "monthly": {"month": MONTHS, "by_tier": monthly},
        "cumulative_usd": cumulative,
        "delta_vs_base_usd": None,
        "delta_vs_base_pct": None,
    }
    return SolvedVariant.model_validate({**fields, **extra})


def whatif_data() -> WhatifDocument:
    base_tiers = {
        "owned": 0.0,
        "reserved_3y": 812_000.0,
        "reserved_1y": 420_000.0,
        "on_demand": 504_664.0,
        "spot": 200_000.0,
    }
    base = _variant(
        "base",
        [],
        base_tiers,
        {
            "reserved_3y": [812_000.0 / 12] * 12,
            "reserved_1y": [35_000.0] * 12,
            "on_demand": _seasonal(504_664.0),
            "spot": _seasonal(200_000.0),
        },
        delta_vs_base_usd=0.0,
        delta_vs_base_pct=0.0,
        commitments={"1y": 4, "3y": 8, "owned": 0},
        committed_gpus=96,
        gap=0.0086,
        seconds=6.7,
    )
    # Owned: $460,000 in the first month (install, deposit), then $40,000 a month.
    colo_tiers = {
        "owned": 900_000.0,
        "reserved_3y": 0.0,
        "reserved_1y": 150_000.0,
        "on_demand": 300_000.0,
        "spot": 120_000.0,
    }
    colo = _variant(
        "colo-16",
        ["colocation.max_nodes=16"],
        colo_tiers,
        {
            "owned": [460_000.0] + [40_000.0] * 11,
            "reserved_1y": [12_500.0] * 12,
            "on_demand": _seasonal(300_000.0),
            "spot": _seasonal(120_000.0),
        },
        status="feasible",
        delta_vs_base_usd=1_470_000.0 - 1_936_664.0,
        delta_vs_base_pct=round((1_470_000.0 - 1_936_664.0) / 1_936_664.0 * 100, 1),
        commitments={"1y": 2, "3y": 0, "owned": 16},
        committed_gpus=144,
        unserved=[
            UnservedInference(
                workload="chat-70b",
                team="assistant",
                replica_hours=310.0,
                periods=31,
                reason="16 owned nodes and the 1y pool cannot hold the August peak",
            ),
            UnservedTraining(
                workload="pretrain-34b",
                team="research",
                run=3,
                gpu_hours=512.0,
                reason="deadline 2027-03-01 missed",
            ),
        ],
        gap=0.021,
        seconds=30.2,
    )
    failed = FailedVariant(
        name="spot-shock", changes=["spot_price=+50%", "spot_interruptions=x2"], error=FAILED_ERROR
    )
    document = WhatifDocument(
        scenario="mixed-fleet-2027",
        created="2026-11-29T21:00:00Z",
        base="base",
        horizon={"start": "2027-01-01T00:00:00Z", "hours": 8760},
        variants=[base, colo, failed],
    )
    return WhatifDocument.model_validate_json(document.to_json())  # exactly what whatif.json holds


@pytest.fixture(scope="module")
def data() -> WhatifDocument:
    return whatif_data()


@pytest.fixture(scope="module")
def page(data: WhatifDocument) -> str:
    return render_whatif_html(data)


@pytest.fixture(scope="module")
def md(data: WhatifDocument) -> str:
    return render_whatif_markdown(data)


def _section(md: str, title: str) -> str:
    """The markdown between ``## title`` and the next ``## `` heading."""
    start = md.index(f"## {title}\n")
    end = md.find("\n## ", start + 1)
    return md[start : end if end != -1 else len(md)]


def _table_rows(section: str) -> list[list[str]]:
    """Body rows of the first markdown table in ``section`` (header and separator dropped)."""
    lines = [line for line in section.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[2:]]


def test_markdown_comparison_has_one_row_per_variant(md: str) -> None:
    rows = _table_rows(_section(md, "Comparison"))
    assert [r[0] for r in rows] == ["base (base)", "colo-16", "spot-shock"]
    base, colo, failed = rows
    assert base[1:12] == [
        "optimal",
        "none",
        "$1,936,664",
        "$0",
        "0.0%",
        "44.5% ($1,550,503)",
        "3y 42% · 1y 22% · on-demand 26% · spot 10%",
        "4 / 8 / 0",
        "96",
        "0",
        "0.86%",
    ]
    # colo: 900,000 / 1,470,000 = 61% owned; (3,487,167 - 1,470,000) / 3,487,167 = 57.8% saved.
    assert colo[1:12] == [
        "feasible",
        "colocation.max_nodes=16",
        "$1,470,000",
        "-$466,664",
        "-24.1%",
        "57.8% ($2,017,167)",
        "owned 61% · 1y 10% · on-demand 20% · spot 8%",
        "2 / 0 / 16",
        "144",
        "**2**",
        "2.10%",
    ]
    assert failed[1:4] == ["failed", "spot_price=+50%, spot_interruptions=x2", f"failed: {FAILED_ERROR}"]
    assert failed[-1] == DASH  # no plan directory


def test_markdown_sections_headline_and_tables(md: str) -> None:
    for section in SECTIONS:
        assert f"\n## {section}\n" in md
    assert "# gpuplan what-if: mixed-fleet-2027" in md
    assert "- horizon: 2027-01-01 to 2028-01-01 UTC (8,760 hours, 365 days)" in md
    assert "- variants: 3 (1 failed)" in md
    assert "- created: 2026-11-29 21:00 UTC" in md
    assert (
        "colo-16 is the cheapest variant at $1,470,000, $466,664 (24.1%) less than the base (base); "
        "it is also the biggest change vs the base." in md
    )
    assert "colo-16 leaves 2 demand item(s) unserved" in md
    assert "Failed, so not compared: spot-shock" in md
    # Unserved details: the plan report's table, one per variant with unserved demand.
    unserved = _section(md, "Unserved demand")
    assert "### colo-16" in unserved and "### base" not in unserved
    assert "| chat-70b | inference | assistant | — | 310 replica-h |" in unserved
    assert "| pretrain-34b | training | research | 3 | 512 GPU-h | deadline 2027-03-01 missed |" in unserved
    # Cost by tier: tiers in planner/outputs/reports/plan.py's order, rows adding up to the totals.
    tiers = _section(md, "Cost by tier")
    assert "| variant | owned | reserved_3y | reserved_1y | on_demand | spot | total |" in tiers
    assert "| base | $0 | $812,000 | $420,000 | $504,664 | $200,000 | $1,936,664 |" in tiers
    assert "| colo-16 | $900,000 | $0 | $150,000 | $300,000 | $120,000 | $1,470,000 |" in tiers
    # Savings: cheapest first, failed variants left out.
    assert [r[0] for r in _table_rows(_section(md, "Savings"))] == ["colo-16", "base (base)"]
    # Cumulative: one row per month end, one column per variant with a plan.
    cumulative = _section(md, "Cumulative cost")
    rows = _table_rows(cumulative)
    assert [r[0] for r in rows] == MONTHS
    assert rows[-1][1:] == ["$1,936,664", "$1,470,000"]
    assert "<div" not in md and "plotly" not in md.lower()


def test_break_even_month_of_the_colocation_variant(data: WhatifDocument, md: str, page: str) -> None:
    base, colo = data.variants[0].cumulative_usd, data.variants[1].cumulative_usd
    assert colo[0] > base[0] and colo[-1] < base[-1]
    month = next(k for k in range(12) if all(colo[j] <= base[j] for j in range(k, 12)))
    sentence = f"colo-16 breaks even with the base by the end of {MONTHS[month]}"
    assert sentence in md
    assert sentence in page
    assert f"colo-16 breaks even with the base ({MONTHS[month]})" in page  # the chart's marker


def test_html_is_self_contained_with_one_plotly_copy(page: str) -> None:
    lib = get_plotlyjs()
    assert page.count(lib[:400]) == 1
    assert page.count(lib[-400:]) == 1
    assert page.index(lib[:400]) < page.index("</head>")
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.IGNORECASE)
    assert not re.search(r"<script[^>]*src\s*=\s*[\"']?https?:", page, re.IGNORECASE)
    assert not re.search(r"<link[^>]*href\s*=\s*[\"']?(https?:)?//", page, re.IGNORECASE)
    assert page.count('class="plotly-graph-div"') == 3
    for chart in CHART_IDS:
        assert page.count(f'id="{chart}"') == 1


def test_html_numbers_sections_and_charts(page: str) -> None:
    for section in SECTIONS:
        assert f">{section}</h2>" in page
    for name, total in (("base", "$1,936,664"), ("colo-16", "$1,470,000"), ("spot-shock", None)):
        assert f"<strong>{name}" in page
        if total:
            assert f'<td class="num">{total}</td>' in page
    # The failed variant's error spans the number columns; its text is escaped ("&gt;").
    assert f'<td class="error" colspan="10">failed: {html.escape(FAILED_ERROR)}</td>' in page
    assert '<td class="num bad">2</td>' in page  # colo-16's unserved items, in red
    assert '<td class="num">0</td>' in page  # base serves everything
    # Chart titles, and the tier colours of planner/outputs/reports/plan.py (owned included).
    assert "Monthly cost by tier, per variant (same y scale)" in page
    assert "Savings per variant" in page
    assert "Cumulative cost by month, per variant" in page
    for tier in ("owned", "reserved_3y", "reserved_1y", "on_demand", "spot"):
        assert TIER_COLORS[tier] in page


def _plain(document: WhatifDocument) -> dict[str, Any]:
    """The document as whatif.json holds it (a plain dict to damage or change)."""
    return json.loads(document.to_json())


def test_whatif_json_keeps_its_keys(data: WhatifDocument) -> None:
    """The file's keys, as gpuplan whatif wrote them before the typed document (the unserved entries
    are the plan's, so they carry team and amount)."""
    plain = _plain(data)
    assert list(plain) == ["schema", "scenario", "created", "base", "horizon", "variants"]
    assert plain["schema"] == "gpuplan.whatif/v1" and plain["created"] == "2026-11-29T21:00:00Z"
    assert plain["horizon"] == {"start": "2027-01-01T00:00:00Z", "hours": 8760}
    base, colo, failed = plain["variants"]
    assert list(base) == [
        "name", "changes", "status", "error", "plan_dir", "total_usd", "all_on_demand_usd",
        "savings_vs_on_demand_pct", "by_tier", "tier_mix", "commitments", "committed_gpus", "unserved",
        "gap", "seconds", "monthly", "cumulative_usd", "delta_vs_base_usd", "delta_vs_base_pct",
        "significant_vs_base",
    ]  # fmt: skip
    assert failed == {
        "name": "spot-shock",
        "changes": ["spot_price=+50%", "spot_interruptions=x2"],
        "status": "failed",
        "error": FAILED_ERROR,
    }
    assert colo["unserved"][1] == {
        "kind": "training",
        "workload": "pretrain-34b",
        "team": "research",
        "run": 3,
        "gpu_hours": 512.0,
        "reason": "deadline 2027-03-01 missed",
    }


def test_read_round_trips(tmp_path: Path, data: WhatifDocument) -> None:
    path = tmp_path / "whatif.json"
    path.write_text(data.to_json(), encoding="utf-8")
    assert WhatifDocument.read(path) == data


def _damage(plain: dict[str, Any], change: str) -> None:
    colo = plain["variants"][1]
    if change == "not a number":
        colo["total_usd"] = "n/a"
    elif change == "missing field":
        del colo["gap"]
    elif change == "unknown field":
        colo["totl_usd"] = 1.0
    elif change == "unknown tier":
        colo["by_tier"]["preemptible"] = 1.0
    elif change == "months and cumulative disagree":
        colo["cumulative_usd"] = colo["cumulative_usd"][:11]
    elif change == "failed without error":
        del plain["variants"][2]["error"]
    elif change == "base not a variant":
        plain["base"] = "baseline"
    elif change == "two variants, one name":
        colo["name"] = "base"


@pytest.mark.parametrize(
    ("change", "where", "problem"),
    [
        ("not a number", "variants.1.solved.total_usd", "valid number"),
        ("missing field", "variants.1.solved.gap", "Field required"),
        ("unknown field", "variants.1.solved.totl_usd", "Extra inputs are not permitted"),
        ("unknown tier", "variants.1.solved.by_tier.preemptible.[key]", "Input should be"),
        ("months and cumulative disagree", "variants.1.solved", "cumulative_usd has 11 values for 12 months"),
        ("failed without error", "variants.2.failed.error", "Field required"),
        ("base not a variant", None, "base 'baseline' is not among the variants"),
        ("two variants, one name", None, "'base' appear twice"),
    ],
)
def test_reading_a_damaged_whatif_json_names_file_and_field(
    tmp_path: Path, data: WhatifDocument, change: str, where: str | None, problem: str
) -> None:
    """What the report used to render as dashes is now a clear error on reading (exit code 2 in the CLI)."""
    plain = _plain(data)
    _damage(plain, change)
    path = tmp_path / "whatif.json"
    path.write_text(json.dumps(plain), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        WhatifDocument.read(path)
    error = caught.value
    assert error.file == str(path)
    assert error.where == where
    assert problem in error.problem and "gpuplan.whatif/v1" in error.problem


def test_reading_what_is_not_a_whatif_json(tmp_path: Path, data: WhatifDocument) -> None:
    path = tmp_path / "whatif.json"
    with pytest.raises(InputError, match="file not found"):
        WhatifDocument.read(path)
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON") as caught:
        WhatifDocument.read(path)
    assert caught.value.where == "line 1"
    path.write_text(json.dumps({**_plain(data), "schema": "gpuplan.whatif/v0"}), encoding="utf-8")
    with pytest.raises(InputError, match=re.escape("reads schema 'gpuplan.whatif/v1'")) as caught:
        WhatifDocument.read(path)
    assert caught.value.where == "schema"
    path.write_text("[]", encoding="utf-8")
    with pytest.raises(InputError, match="expected a JSON object"):
        WhatifDocument.read(path)


def test_dashes_the_contract_still_allows(data: WhatifDocument) -> None:
    """Terms a plan buys nothing on are left out of ``commitments``; a failed variant may have an
    empty error; when every variant failed there is no horizon, no cost and no curve, yet the page
    renders with its three (empty) charts."""
    plain = _plain(data)
    plain["variants"][1]["commitments"] = {"3y": 2}
    plain["variants"][2]["error"] = ""
    md = render_whatif_markdown(WhatifDocument.model_validate(plain))
    rows = _table_rows(_section(md, "Comparison"))
    assert rows[1][8] == "— / 2 / —"
    assert rows[2][3] == "failed (no error message in whatif.json)"

    failed = [{"name": n, "changes": [], "status": "failed", "error": "boom"} for n in ("base", "b")]
    nothing = WhatifDocument.model_validate(
        {**plain, "horizon": {"start": None, "hours": None}, "variants": failed}
    )
    md = render_whatif_markdown(nothing)
    assert "- horizon: —" in md and "- variants: 2 (2 failed)" in md
    assert "**No variant produced a plan, so there is no cost to compare.**" in md
    assert "No variant has a cost by tier in whatif.json." in md
    assert "No variant has cumulative costs in whatif.json." in md
    page = render_whatif_html(nothing)
    assert page.count('class="plotly-graph-div"') == 3
    assert "No variant has monthly costs in whatif.json." in page


def test_a_difference_within_the_gaps_is_marked_not_significant(data: WhatifDocument) -> None:
    """The report marks a variant whose difference from the base is inside the certified gaps (as
    whatif.json's significant_vs_base says) with n.s. in its row and a note; a significant one is not."""
    plain = _plain(data)
    plain["variants"][1]["significant_vs_base"] = False
    md = render_whatif_markdown(WhatifDocument.model_validate(plain))
    rows = _table_rows(_section(md, "Comparison"))
    pct = f"{plain['variants'][1]['delta_vs_base_pct']:+.1f}%"
    assert rows[1][5] == f"{pct} n.s."
    assert f"n.s. (not significant): {plain['variants'][1]['name']} differ" in md
    assert "n.s." in render_whatif_html(WhatifDocument.model_validate(plain))
    plain["variants"][1]["significant_vs_base"] = True
    md = render_whatif_markdown(WhatifDocument.model_validate(plain))
    assert _table_rows(_section(md, "Comparison"))[1][5] == pct and "n.s." not in md


def test_base_failed_still_compares(data: WhatifDocument) -> None:
    plain = _plain(data)
    plain["base"] = "spot-shock"  # the base failed: no deltas to show, no break-even
    for v in plain["variants"][:2]:
        v["delta_vs_base_usd"] = v["delta_vs_base_pct"] = None
    md = render_whatif_markdown(WhatifDocument.model_validate(plain))
    assert "colo-16 is the cheapest variant at $1,470,000; there is no base cost to compare" in md
    assert "The base variant has no cumulative costs" in md
    assert "| spot-shock (base) | failed |" in md


def test_user_text_is_escaped_in_html(data: WhatifDocument) -> None:
    hostile = _plain(data)
    hostile["scenario"] = "<b>fleet</b>"
    hostile["variants"][1]["name"] = "</script><script>alert(1)</script>"
    page = render_whatif_html(WhatifDocument.model_validate(hostile))
    assert "&lt;b&gt;fleet&lt;/b&gt;" in page and "<b>fleet</b>" not in page
    assert "<script>alert(1)" not in page


def test_write_whatif_reports(tmp_path: Path, data: WhatifDocument) -> None:
    md_path, html_path = write_whatif_reports(tmp_path / "out", data)
    assert (md_path.name, html_path.name) == ("whatif.md", "whatif.html")
    assert md_path.read_text(encoding="utf-8") == render_whatif_markdown(data)
    assert html_path.read_text(encoding="utf-8").count('class="plotly-graph-div"') == 3


@pytest.mark.slow  # starts Chromium (~5 s)
def test_html_renders_in_a_browser(tmp_path: Path, data: WhatifDocument) -> None:
    """The page in headless Chromium (tests/browser.py): no errors, offline, every chart drawn."""
    from browser import open_page

    _, html_path = write_whatif_reports(tmp_path, data)
    started = time.perf_counter()
    check = open_page(html_path)
    elapsed = time.perf_counter() - started
    assert check.problems() == [], f"{check.problems()} (page opened in {elapsed:.1f} s)"
    assert check.outside_requests == []
    assert check.chart_divs == 3 and check.charts_rendered == 3
    assert "mixed-fleet-2027" in check.title
    # Text plotly draws inside the charts' svg: visible only if the charts really rendered.
    charts = (
        "Monthly cost by tier, per variant",
        "Savings per variant",
        "Cumulative cost by month, per variant",
    )
    missing = [text for text in (*SECTIONS, *charts) if text not in check.text]
    assert missing == [], f"not visible on the page: {missing}"
