"""The chargeback outputs: ``chargeback.csv`` (one row per month, team, project, tier), ``chargeback.json``
(the same rows with the unit rates, each commitment's idle share per month and the reconciliation) and
``chargeback.html`` (one self-contained page: stacked cost per team per month, unit rates, idle share),
all from a :class:`models.chargeback.Chargeback`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, cast

import pandas as pd
from markupsafe import Markup

from models.chargeback import CHARGEBACK_COLUMNS, IDLE_PROJECT, SCHEMA, Chargeback
from models.wording import cents_adding_up
from planner.outputs.reports.kit import (
    TIER_COLORS,
    Table,
    chart_div,
    fmt_num,
    fmt_pct,
    fmt_rate,
    jinja_environment,
    money_column,
)

__all__ = ["chargeback_document", "render_chargeback_html", "write_chargeback"]

#: Allowed difference between the chargeback's total and the plan's (or the bill's): one cent.
CENT = 0.005


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON values (NaN -> null: a rate with no hours has no value)."""
    out = []
    for record in frame.to_dict(orient="records"):
        out.append(
            {
                str(k): (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in record.items()
            }
        )
    return out


def chargeback_document(result: Chargeback, scenario: str, month: str | None) -> dict[str, Any]:
    """``chargeback.json``: the rows, per-team totals per month, unit rates, idle share, reconciliation."""
    rows = result.rows
    by_team = rows.groupby(["month", "team"])[["gpu_hours", "cost_usd", "idle_usd", "list_usd"]].sum()
    difference = result.total_usd - result.expected_total_usd
    return {
        "schema": SCHEMA,
        "scenario": scenario,
        "source": result.source,
        "idle_rule": str(result.idle_rule),
        "month": month,
        "total_usd": result.total_usd,
        "reconciliation": {
            "against": "plan.json costs.total_usd"
            if result.source == "plan" and month is None
            else (
                "the plan's cost in the month" if result.source == "plan" else "the bill at the plan's rates"
            ),
            "expected_usd": result.expected_total_usd,
            "difference_usd": difference,
            "reconciled": abs(difference) < CENT,
        },
        "rows": _records(rows),
        "by_team": _records(by_team.reset_index()),
        "unit_rates": _records(result.rates),
        "idle": _records(result.windows),
        "notes": result.notes,
    }


def write_chargeback(result: Chargeback, scenario: str, month: str | None, directory: Path) -> None:
    """chargeback.csv, chargeback.json and chargeback.html into ``directory``."""
    rows = result.rows[list(CHARGEBACK_COLUMNS)].copy()
    for column in ("cost_usd", "idle_usd", "list_usd"):  # in cents that still add up to the total
        rows[column] = cents_adding_up(rows[column])
    for column in ("usd_per_gpu_hour", "usd_per_work_gpu_hour"):
        rows[column] = rows[column].round(2)
    rows.to_csv(directory / "chargeback.csv", index=False)
    document = chargeback_document(result, scenario, month)
    (directory / "chargeback.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    (directory / "chargeback.html").write_text(render_chargeback_html(result, document), encoding="utf-8")


def _team_table(rows: pd.DataFrame) -> Table:
    grouped = rows.groupby(["month", "team"])[["gpu_hours", "cost_usd", "idle_usd", "list_usd"]].sum()
    table = Table(
        ["month", "team", "GPU-hours", "cost", "of which idle", "at list price (on demand)", "USD / GPU-h"],
        [False, False, True, True, True, True, True],
    )
    costs, total = money_column(grouped["cost_usd"])
    idle, idle_total = money_column(grouped["idle_usd"])
    listed, list_total = money_column(grouped["list_usd"])
    for k, (key, values) in enumerate(grouped.iterrows()):
        month, team = cast(tuple[str, str], key)
        hours = _finite(values["gpu_hours"]) or 0.0
        rate = (_finite(values["cost_usd"]) or 0.0) / hours if hours > 0 else None
        table.rows.append(
            [str(month), str(team), fmt_num(hours, 1), costs[k], idle[k], listed[k], fmt_rate(rate)]
        )
    hours = float(grouped["gpu_hours"].sum())
    table.total = ["total", "", fmt_num(hours, 1), total, idle_total, list_total, ""]
    return table


def _rows_table(rows: pd.DataFrame) -> Table:
    table = Table(
        ["month", "team", "project", "tier", "GPU-hours", "cost", "of which idle", "USD / GPU-h",
         "USD / GPU-h of work"],
        [False, False, False, False, True, True, True, True, True],
    )  # fmt: skip
    costs, total = money_column(rows["cost_usd"])
    idle, idle_total = money_column(rows["idle_usd"])
    for k, r in enumerate(rows.itertuples()):
        table.rows.append(
            [str(r.month), str(r.team), str(r.project), str(r.tier), fmt_num(_finite(r.gpu_hours), 1),
             costs[k], idle[k], fmt_rate(_finite(r.usd_per_gpu_hour)),
             fmt_rate(_finite(r.usd_per_work_gpu_hour))]
        )  # fmt: skip
    table.total = ["total", "", "", "", fmt_num(float(rows["gpu_hours"].sum()), 1), total, idle_total, "", ""]
    return table


def _finite(value: Any) -> float | None:
    x = float(value)
    return x if math.isfinite(x) else None


def _rates_table(rates: pd.DataFrame) -> Table:
    table = Table(
        ["month", "offering", "tier", "list (on demand)", "price", "effective, per GPU-hour used"],
        [False, False, False, True, True, True],
    )
    for r in rates.itertuples():
        table.rows.append(
            [str(r.month), str(r.offering), str(r.tier), fmt_rate(_finite(r.list_usd_per_gpu_hour)),
             fmt_rate(_finite(r.price_usd_per_gpu_hour)), fmt_rate(_finite(r.effective_usd_per_gpu_hour))]
        )  # fmt: skip
    return table


def _idle_table(windows: pd.DataFrame) -> Table:
    table = Table(
        ["month", "commitment", "cost in month", "used", "idle cost"], [False, False, True, True, True]
    )
    if not len(windows):
        return table
    costs, total = money_column(windows["cost_usd"])
    idle, idle_total = money_column(windows["idle_usd"])
    for k, w in enumerate(windows.itertuples()):
        table.rows.append(
            [str(w.month), str(w.commitment), costs[k], fmt_pct(_finite(w.used_fraction)), idle[k]]
        )
    table.total = ["total", "", total, "", idle_total]
    return table


def _chart(rows: pd.DataFrame) -> Markup:
    """Stacked bars: cost per team per month, one trace per tier (and the idle share apart)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    x = sorted({(m, t) for m, t in zip(rows["month"], rows["team"], strict=True)})
    labels = [[m for m, _t in x], [t for _m, t in x]]
    for tier in sorted(set(rows["tier"])):
        part = rows[rows["tier"] == tier].groupby(["month", "team"])[["cost_usd", "idle_usd"]].sum()
        used = [float(part["cost_usd"].get(key, 0.0) - part["idle_usd"].get(key, 0.0)) for key in x]
        fig.add_trace(go.Bar(x=labels, y=used, name=str(tier), marker={"color": TIER_COLORS.get(tier)}))
    idle = rows.groupby(["month", "team"])["idle_usd"].sum()
    if float(idle.sum()) > 0:
        values = [float(idle.get(key, 0.0)) for key in x]
        fig.add_trace(go.Bar(x=labels, y=values, name="idle committed", marker={"color": "#bdd7ee"}))
    fig.update_layout(
        barmode="stack",
        title="Cost per team per month (USD), by tier; idle committed capacity apart",
        yaxis_title="USD",
        yaxis_tickprefix="$",
        yaxis_tickformat=",.0f",
        height=420,
        margin={"l": 60, "r": 20, "t": 60, "b": 60},
    )
    return chart_div(fig, "chart-teams")


_HTML = jinja_environment(autoescape=True, trim=True).get_template("chargeback.html.j2")


def render_chargeback_html(result: Chargeback, document: dict[str, Any]) -> str:
    """One self-contained page (plotly.js inline once, works offline)."""
    from plotly.offline import get_plotlyjs

    rows = result.rows
    idle = float(rows["idle_usd"].sum())
    total = result.total_usd
    rec = document["reconciliation"]
    return _HTML.render(
        title=f"Chargeback: {document['scenario']} ({result.source})",
        doc=document,
        total=fmt_rate(total),
        expected=fmt_rate(rec["expected_usd"]),
        idle_share=fmt_pct(idle / total if total else 0.0),
        idle=fmt_rate(idle),
        idle_project=IDLE_PROJECT,
        teams=_team_table(rows),
        rows=_rows_table(rows),
        rates=_rates_table(result.rates),
        windows=_idle_table(result.windows),
        chart=_chart(rows) if len(rows) else Markup(""),
        plotlyjs=Markup(get_plotlyjs()),
    )
