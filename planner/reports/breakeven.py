"""Human-readable break-even report: ``breakeven.md`` / ``breakeven.html`` from a breakeven.json dict.

The reader is a CFO who will check the numbers by hand, so the page states the headline in one
sentence, lists every input with its unit, splits the monthly owned cost into the parts a
spreadsheet would have (capital recovery, colo, support, energy), and writes the formulas out.
The grid of break-even months by comparison price and utilization shows why quoted "12-18 month"
paybacks disagree: they compare against different prices at different utilizations.

Render functions take the plain dict (schema ``gpuplan.breakeven/v1``, see
``models.tco.breakeven_data``), never finance objects, so a saved breakeven.json re-renders
the same page. Like ``planner/reports/plan.py``: plotly.js is inline exactly once in ``<head>``, charts
are divs rendered with ``include_plotlyjs=False``, no external fetch (works offline), and the
templates are inline jinja2 strings rendered from one shared context for markdown and html.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from planner.reports.kit import (
    BASE_CSS,
    DASH,
    HTML_TABLE_MACROS,
    Table,
    fmt_pct,
    fmt_rate,
    fmt_usd,
    jinja_environment,
)
from planner.reports.plan import _num  # transitional: goes with the typed document

__all__ = ["render_breakeven_html", "render_breakeven_markdown"]

HOURS_PER_MONTH = 730.0
PRICE_TITLES = {
    "on_demand": "on-demand",
    "reserved_1y": "1-year reserved",
    "reserved_3y": "3-year reserved",
    "spot": "spot",
}
#: Input field -> (label, unit). Fields not listed are shown with their raw name and no unit.
INPUT_UNITS: dict[str, tuple[str, str]] = {
    "site": ("site", ""),
    "gpu_model": ("GPU model", ""),
    "gpus_per_node": ("GPUs per node", "GPUs"),
    "gpu_memory_gb": ("GPU memory", "GB per GPU"),
    "fabric": ("fabric", ""),
    "fabric_gbps": ("fabric bandwidth", "Gb/s per node"),
    "capex_per_node_usd": ("capex per node (all-in)", "USD per node"),
    "power_kw_per_node": ("power per node (max)", "kW"),
    "pue": ("PUE", "facility kW per IT kW"),
    "power_usd_per_kwh": ("power price", "USD per kWh"),
    "colo_usd_per_kw_month": ("colo fee", "USD per kW-month"),
    "support_pct_per_year": ("support and maintenance", "% of capex per year"),
    "depreciation_months": ("depreciation life", "months"),
    "residual_value_pct": ("residual value at end of life", "% of capex"),
    "cost_of_capital_pct_per_year": ("cost of capital", "% per year"),
    "lead_time_months": ("lead time (order to usable)", "months"),
    "max_nodes": ("most nodes that may be bought", "nodes"),
}
CURVE_COLORS = {"cloud": "#ed7d31", "owned": "#1f4e79", "low": "#9dc3e6", "high": "#1f4e79"}


# --------------------------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------------------------


def fmt_months(value: Any, never: str = "never") -> str:
    """Months with one decimal (``9.8``); None means the curves never cross."""
    x = _num(value)
    return never if x is None else f"{x:,.1f}"


def fmt_cents(value: Any) -> str:
    """Dollars and cents (``$2,791.67``): monthly figures a reader recomputes by hand."""
    x = _num(value)
    if x is None:
        return DASH
    return f"-${-x:,.2f}" if x < 0 else f"${x:,.2f}"


def _plain(value: Any) -> str:
    """An input value as typed: integers without decimals, floats without trailing zeros."""
    if value is None:
        return DASH
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    x = float(value)
    if x.is_integer():
        return f"{int(x):,}"
    return f"{x:,.6f}".rstrip("0").rstrip(".")


def _cents(values: Sequence[float]) -> tuple[list[float], float]:
    """Each part rounded to cents on its own, and the total as the sum of the rounded parts.

    Why: the reader recomputes each part by hand (it must match to the cent) and adds the column
    (the total must match that sum); the exact total differs by at most half a cent per row.
    """
    parts = [round(v, 2) for v in values]
    return parts, round(sum(parts), 2)


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


# --------------------------------------------------------------------------------------------
# Context: one structure for both templates
# --------------------------------------------------------------------------------------------


def _price_title(name: str) -> str:
    return PRICE_TITLES.get(name, name.replace("_", " "))


def _life(data: Mapping[str, Any]) -> int | None:
    months = _num(_dict(data.get("inputs")).get("depreciation_months"))
    if months is None:
        curve = _list(_dict(data.get("curves")).get("month"))
        months = _num(curve[-1]) if curve else None
    return None if months is None else round(months)


def _headline(data: Mapping[str, Any]) -> dict[str, Any]:
    inputs = _dict(data.get("inputs"))
    nodes = data.get("nodes")
    life = _life(data)
    life_text = f"{life}-month" if life is not None else "full"
    coc = _num(inputs.get("cost_of_capital_pct_per_year"))
    npv = _num(data.get("npv_usd"))
    be = _num(data.get("months_to_break_even"))
    owning = f"Owning {nodes} node{'' if nodes == 1 else 's'}"
    if data.get("nodes_from") == "plan":
        owning += " (the number the plan buys)"
    elif data.get("nodes_from") == "--nodes":
        owning += " (set with --nodes)"
    if be is None:
        crossing = f"{owning} never breaks even within the depreciation life ({life_text} life)"
    else:
        crossing = f"{owning} breaks even after {fmt_months(be)} months"
    if npv is None:
        value = ""
    else:
        verdict = "owning saves money" if npv > 0 else "owning costs more than the cloud" if npv < 0 else ""
        rate = f" at the {_plain(coc)}% cost of capital" if coc is not None else ""
        value = f"; its NPV over the {life_text} life{rate} is {fmt_usd(npv)}" + (
            f" ({verdict})" if verdict else ""
        )
    comparator = _dict(data.get("comparator"))
    facts = [
        (
            "months to break even",
            f"{fmt_months(be)} months" if be is not None else f"never within {life_text} life",
        ),
        ("NPV (positive = owning saves)", fmt_usd(npv)),
        ("nodes owned", _plain(nodes)),
        ("utilization of owned nodes", fmt_pct(data.get("utilization"), 0)),
        ("owned tier price in the planner", f"{fmt_rate(data.get('owned_usd_per_node_hour'))} per node-hour"),
    ]
    if comparator.get("offering"):
        facts.append(("cloud comparator", str(comparator["offering"])))
    for name in ("on_demand", "reserved_1y", "reserved_3y"):
        price = _num(comparator.get(f"{name}_usd_h"))
        if price is not None:
            facts.append((f"{_price_title(name)} price", f"{fmt_rate(price)} per node-hour"))
    change = _num(data.get("cloud_price_change_pct_per_year"))
    if change:
        facts.append(("cloud price change", f"{change:+.1f}% per year"))
    return {"sentence": crossing + value + ".", "facts": facts, "never": be is None}


def _inputs_table(data: Mapping[str, Any]) -> Table:
    table = Table(headers=["input", "value", "unit"], numeric=[False, True, False])
    for key, value in _dict(data.get("inputs")).items():
        label, unit = INPUT_UNITS.get(key, (key, ""))
        table.rows.append([label, _plain(value), unit])
    return table


def _monthly(data: Mapping[str, Any]) -> dict[str, Any]:
    """Monthly owned cost per node and for all nodes, split as a spreadsheet would."""
    monthly = _dict(data.get("monthly"))
    inputs = _dict(data.get("inputs"))
    u = _num(data.get("utilization"))
    kw, pue = _num(inputs.get("power_kw_per_node")), _num(inputs.get("pue"))
    kwh, fee = _num(inputs.get("power_usd_per_kwh")), _num(inputs.get("colo_usd_per_kw_month"))
    capex, support_pct = _num(inputs.get("capex_per_node_usd")), _num(inputs.get("support_pct_per_year"))

    def known(*xs: float | None) -> bool:
        return all(x is not None for x in xs)

    # breakeven_data writes the parts; an older or hand-written dict may only have the inputs.
    parts = {
        "capital_usd": _num(monthly.get("capital_usd")),
        "colo_usd": _num(monthly.get("colo_usd")),
        "support_usd": _num(monthly.get("support_usd")),
        "energy_usd": _num(monthly.get("energy_usd")),
    }
    if parts["colo_usd"] is None and known(kw, fee):
        parts["colo_usd"] = kw * fee
    if parts["support_usd"] is None and known(capex, support_pct):
        parts["support_usd"] = support_pct / 100 * capex / 12
    if parts["energy_usd"] is None and known(kw, pue, kwh, u):
        parts["energy_usd"] = kw * pue * HOURS_PER_MONTH * kwh * u
    rows_spec = [
        ("capital recovery", "capital_usd", "level payment recovering capex net of residual (see Method)"),
        ("colo fee", "colo_usd", f"{_plain(kw)} kW x {fmt_rate(fee)} per kW-month"),
        ("support", "support_usd", f"{_plain(support_pct)}% of {fmt_usd(capex)} per year / 12"),
        (
            "energy",
            "energy_usd",
            f"{_plain(kw)} kW x PUE {_plain(pue)} x 730 h x {fmt_sig_price(kwh)}/kWh x {fmt_pct(u, 0)} used",
        ),
    ]
    nodes = _num(data.get("nodes")) or 0.0
    noun = "node" if nodes == 1 else "nodes"
    table = Table(
        headers=["component", "per node per month", f"{_plain(data.get('nodes'))} {noun} per month", "how"],
        numeric=[False, True, True, False],
    )
    present = [(label, parts[key], how) for label, key, how in rows_spec if parts[key] is not None]
    if present:
        per_node, total = _cents([v for _, v, _ in present])
        fleet, fleet_total = _cents([v * nodes for _, v, _ in present])
        for (label, _, how), a, b in zip(present, per_node, fleet, strict=True):
            table.rows.append([label, fmt_cents(a), fmt_cents(b), how])
        table.total = ["total", fmt_cents(total), fmt_cents(fleet_total), ""]
    # The same cents as the table (energy at full power), so the note and the table agree.
    full_energy = (kw * pue * HOURS_PER_MONTH * kwh) if known(kw, pue, kwh) else 0.0
    full = sum(round(parts[k] or 0.0, 2) for k in ("capital_usd", "colo_usd", "support_usd"))
    full += round(full_energy, 2)
    price = fmt_rate(data.get("owned_usd_per_node_hour"))
    note = (
        f"The planner prices the owned tier at {price} per node-hour: "
        f"capital recovery plus opex at full power (energy for all 730 hours), divided by 730 h"
        + (
            f" (= {fmt_cents(full)} / 730)."
            if known(kw, pue, kwh) and parts["capital_usd"] is not None
            else "."
        )
    )
    if u is not None and u > 0 and present:
        note += (
            f" At {fmt_pct(u, 0)} utilization each used node-hour costs "
            f"{fmt_rate(sum(v for _, v, _ in present) / (HOURS_PER_MONTH * u))}."
        )
    return {"table": table, "note": note}


def fmt_sig_price(value: Any) -> str:
    """A unit price with up to 4 decimals (``$0.09``, ``$0.045``): per-kWh prices are small."""
    x = _num(value)
    if x is None:
        return DASH
    text = f"{x:,.4f}".rstrip("0")
    return "$" + (text + "0" if text.endswith(".") else text)


def _curves(data: Mapping[str, Any]) -> dict[str, Any]:
    curves = _dict(data.get("curves"))
    months = [_num(m) for m in _list(curves.get("month"))]
    cloud = [_num(v) for v in _list(curves.get("cloud_only_cumulative_usd"))]
    owned = [_num(v) for v in _list(curves.get("owned_cumulative_usd"))]
    n = min(len(months), len(cloud), len(owned))
    months, cloud, owned = months[:n], cloud[:n], owned[:n]
    table = Table(
        headers=["month", "cloud only (cumulative)", "owning (cumulative)", "owning saves"],
        numeric=[True, True, True, True],
    )
    last = n - 1
    for k in range(n):
        m = months[k]
        if m is None or not (k == last or (m.is_integer() and int(m) % 6 == 0)):
            continue
        saves = None if cloud[k] is None or owned[k] is None else cloud[k] - owned[k]
        table.rows.append([_plain(m), fmt_usd(cloud[k]), fmt_usd(owned[k]), fmt_usd(saves)])
    return {"months": months, "cloud": cloud, "owned": owned, "table": table}


def _tornado(data: Mapping[str, Any]) -> dict[str, Any]:
    bars = [_dict(b) for b in _list(data.get("tornado"))]
    table = Table(
        headers=[
            "input",
            "low",
            "high",
            "NPV at low",
            "NPV at high",
            "break-even at low",
            "break-even at high",
        ],
        numeric=[False, True, True, True, True, True, True],
    )
    for b in bars:
        table.rows.append(
            [
                str(b.get("title") or b.get("name", "")).replace("_", " "),
                str(b.get("low_label", DASH)),
                str(b.get("high_label", DASH)),
                fmt_usd(b.get("npv_low_usd")),
                fmt_usd(b.get("npv_high_usd")),
                fmt_months(b.get("break_even_low")),
                fmt_months(b.get("break_even_high")),
            ]
        )
    return {"bars": bars, "table": table}


def _grid(data: Mapping[str, Any]) -> dict[str, Any]:
    """Break-even months by comparison price (rows) x utilization (columns), and why they differ."""
    cells = [_dict(c) for c in _list(data.get("grid"))]
    prices: dict[str, float | None] = {}
    utils: list[float] = []
    months: dict[tuple[str, float], float | None] = {}
    for c in cells:
        name, u = str(c.get("price", "")), _num(c.get("utilization"))
        if u is None:
            continue
        prices.setdefault(name, _num(c.get("usd_per_node_hour")))
        if u not in utils:
            utils.append(u)
        months[(name, u)] = _num(c.get("months_to_break_even"))
    table = Table(
        headers=["comparison price", "$ per node-hour", *[f"{fmt_pct(u, 0)} used" for u in utils]],
        numeric=[False, True, *[True] * len(utils)],
    )
    for name, price in prices.items():
        row = [_price_title(name), fmt_rate(price)]
        row += [fmt_months(months.get((name, u))) if (name, u) in months else DASH for u in utils]
        table.rows.append(row)

    life = _life(data)
    found = [(k, v) for k, v in months.items() if v is not None]
    sentences = []
    if found:
        (best_name, best_u), best = min(found, key=lambda kv: kv[1])
        sentences.append(
            f"The same node breaks even after {fmt_months(best)} months against the "
            f"{_price_title(best_name)} price at {fmt_pct(best_u, 0)} utilization"
        )
        never = [k for k, v in months.items() if v is None]
        (worst_name, worst_u), worst = max(found, key=lambda kv: kv[1])
        if never:
            name, u = max(never, key=lambda k: (k[1], -(prices.get(k[0]) or 0.0)))
            sentences[-1] += (
                f", but never within {life or 'the depreciation life'} months against the "
                f"{_price_title(name)} price at {fmt_pct(u, 0)}."
            )
        else:
            sentences[-1] += (
                f" and after {fmt_months(worst)} months against the {_price_title(worst_name)} price "
                f"at {fmt_pct(worst_u, 0)}."
            )
    if life is not None and any(v is not None and abs(v - life) < 1e-9 for v in months.values()):
        sentences.append(
            f"A cell of exactly {fmt_months(life)} means owning only catches up with the resale value "
            "received at the end of the life."
        )
    sentences.append(
        "Quoted paybacks of 12-18 months (e.g. 14-18 months at high utilization, 12-18 months at 80% or "
        "more sustained) each assume one comparison price and one utilization: break-even is roughly "
        "capex / (cloud cost avoided per month - opex), and the cloud cost avoided is utilization x "
        "730 h x the hourly price. Comparing against on-demand at full use gives the shortest payback; "
        "against the committed (1- or 3-year reserved) price a company would really pay, or with idle "
        "hours (owned nodes cost the same whether used or not), the avoided cost shrinks and the "
        "payback stretches or disappears."
    )
    return {"table": table, "prices": prices, "utils": utils, "months": months, "text": " ".join(sentences)}


def _method(data: Mapping[str, Any]) -> list[str]:
    return [
        "Owning one node costs capex C at month 0 and returns the residual value R = residual % x C at "
        "the end of the depreciation life n. Spread as a level monthly payment at the monthly cost of "
        "capital i = (1 + yearly %/100)^(1/12) - 1, the capital recovery is (C - R/(1+i)^n) x i / "
        "(1 - (1+i)^-n), or (C - R)/n when i = 0. Monthly opex is the colo fee (kW x $/kW-month) + support "
        "(support % x C / 12) + energy (kW x PUE x 730 h x $/kWh x utilization; idle power is ignored). "
        "The planner's owned tier price is (capital recovery + opex at full power) / 730 h.",
        "The cumulative curves follow the cash: the cloud-only curve adds the fleet's monthly cloud bill "
        "for the planned months, repeated cyclically beyond the horizon and changed by the yearly cloud "
        "price change after each 12 months; the owning curve starts at N x C, pays the cloud-only bill "
        "until the nodes arrive (lead time), then the cloud bill of the rest of the fleet plus N x opex, "
        "and receives N x R at month n. Break-even is the first time the owning curve is at or below the "
        "cloud-only curve (linear within a month, the resale counted at the end of month n; "
        "undiscounted, so it can fall inside the life while the NPV is negative). "
        "NPV = sum over months m = 0..n of (cloud-only - owning cash flow)_m / (1+i)^m; "
        "positive means owning saves money at the cost of capital.",
    ]


def _context(data: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "title": f"gpuplan break-even: {data.get('scenario') or 'scenario'}",
        "schema": str(data.get("schema") or DASH),
        "head": _headline(data),
        "inputs": _inputs_table(data),
        "monthly": _monthly(data),
        "curves": _curves(data),
        "tornado": _tornado(data),
        "grid": _grid(data),
        "method": _method(data),
        "base_npv": fmt_usd(data.get("npv_usd")),
    }


# --------------------------------------------------------------------------------------------
# Charts (html only)
# --------------------------------------------------------------------------------------------


def _charts(data: Mapping[str, Any], ctx: Mapping[str, Any]) -> list[Markup]:
    """Cumulative curves, tornado and grid heatmap as divs; plotly.js is NOT included here."""
    import plotly.graph_objects as go  # deferred: only the html needs plotly

    layout = {
        "template": "simple_white",
        "height": 440,
        "margin": {"l": 90, "r": 30, "t": 60, "b": 60},
        "legend": {"orientation": "h", "y": -0.18},
    }
    curves = ctx["curves"]
    months, cloud, owned = curves["months"], curves["cloud"], curves["owned"]

    fig_a = go.Figure()
    fig_a.add_trace(
        go.Scatter(x=months, y=cloud, name="cloud only", mode="lines", line={"color": CURVE_COLORS["cloud"]})
    )
    fig_a.add_trace(
        go.Scatter(
            x=months,
            y=owned,
            name=f"owning {_plain(data.get('nodes'))} nodes + cloud for the rest",
            mode="lines",
            line={"color": CURVE_COLORS["owned"]},
        )
    )
    be = _num(data.get("months_to_break_even"))
    points = [(m, c) for m, c in zip(months, cloud, strict=True) if m is not None and c is not None]
    if be is not None and points:
        xs, ys = zip(*points, strict=True)
        y = _interp(be, list(xs), list(ys))
        fig_a.add_trace(
            go.Scatter(
                x=[be],
                y=[y],
                name=f"break-even: {fmt_months(be)} months",
                mode="markers",
                marker={"size": 12, "color": "#c00000", "symbol": "diamond"},
                hovertemplate="break-even %{x:.1f} months<extra></extra>",
            )
        )
        fig_a.add_vline(x=be, line={"dash": "dash", "color": "#c00000", "width": 1})
    title_a = "Cumulative cost: cloud only vs owning" + (
        f" (break-even at {fmt_months(be)} months)" if be is not None else " (no break-even within the life)"
    )
    fig_a.update_layout(
        title=title_a,
        xaxis_title="months from purchase",
        yaxis_title="cumulative cost (USD)",
        yaxis_tickprefix="$",
        yaxis_tickformat=",.0f",
        hovermode="x unified",
        **layout,
    )

    bars = ctx["tornado"]["bars"]
    base = _num(data.get("npv_usd")) or 0.0
    names = [
        f"{str(b.get('title') or b.get('name', '')).replace('_', ' ')} "
        f"({b.get('low_label', DASH)} / {b.get('high_label', DASH)})"
        for b in bars
    ]
    fig_b = go.Figure()
    for side, key, label_key in (("low", "npv_low_usd", "low_label"), ("high", "npv_high_usd", "high_label")):
        values = [_num(b.get(key)) for b in bars]
        fig_b.add_trace(
            go.Bar(
                y=names,
                x=[(v - base) if v is not None else 0.0 for v in values],
                base=[base] * len(bars),
                orientation="h",
                name=f"{side} input",
                marker={"color": CURVE_COLORS[side]},
                text=[f"{b.get(label_key, '')}: {fmt_usd(v)}" for b, v in zip(bars, values, strict=True)],
                textposition="auto",
                hovertemplate="%{y}<br>%{text}<extra></extra>",
            )
        )
    fig_b.add_vline(x=base, line={"color": "#1d2733", "width": 1})
    fig_b.update_layout(
        title=f"NPV sensitivity, one input at a time (base NPV {fmt_usd(base)})",
        xaxis_title="NPV (USD, positive = owning saves)",
        xaxis_tickprefix="$",
        xaxis_tickformat=",.0f",
        yaxis={"autorange": "reversed"},
        barmode="overlay",
        hovermode="closest",
        **layout,
    )

    grid = ctx["grid"]
    prices, utils, cells = list(grid["prices"]), grid["utils"], grid["months"]
    z = [[cells.get((p, u)) for u in utils] for p in prices]
    text = [
        [fmt_months(v) if (p, u) in cells else DASH for u, v in zip(utils, row, strict=True)]
        for p, row in zip(prices, z, strict=True)
    ]
    fig_c = go.Figure(
        go.Heatmap(
            z=z,
            x=[fmt_pct(u, 0) for u in utils],
            y=[_price_title(p) for p in prices],
            text=text,
            texttemplate="%{text}",
            colorscale="RdYlGn_r",
            colorbar={"title": "months"},
            hovertemplate="%{y} at %{x}: %{text} months<extra></extra>",
        )
    )
    fig_c.update_layout(
        title="Months to break even by comparison price and utilization (one node)",
        xaxis_title="utilization of the owned node",
        yaxis_title="cloud price compared against",
        yaxis={"autorange": "reversed"},
        plot_bgcolor="#e3e8ee",  # cells with no break-even are left empty: grey, labelled "never"
        **{**layout, "height": 360},
    )

    config = {"displaylogo": False, "responsive": True}
    return [
        Markup(fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"chart-{name}", config=config))
        for name, fig in (("cumulative", fig_a), ("tornado", fig_b), ("grid", fig_c))
    ]


def _interp(x: float, xs: list[float], ys: list[float]) -> float:
    """Linear interpolation of ys at x (xs ascending); clamps outside the range."""
    if x <= xs[0]:
        return ys[0]
    for k in range(1, len(xs)):
        if x <= xs[k]:
            t = (x - xs[k - 1]) / (xs[k] - xs[k - 1]) if xs[k] != xs[k - 1] else 0.0
            return ys[k - 1] + t * (ys[k] - ys[k - 1])
    return ys[-1]


# --------------------------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------------------------

_MD_TEMPLATE = r"""
# {{ title }}

{{ head.sentence }}

| | |
|:---|---:|
{% for k, v in head.facts %}| {{ k | md }} | {{ v | md }} |
{% endfor %}

## Inputs

{{ inputs | mdtable }}

## Monthly owned cost

{{ monthly.table | mdtable }}

{{ monthly.note }}

## Cumulative cost

{{ curves.table | mdtable }}

Charts are in breakeven.html.

## Sensitivity

NPV and break-even (months) with one input at its low or high value, all others at the base
(base NPV {{ base_npv }}); widest NPV swing first.

{{ tornado.table | mdtable }}

## Break-even by comparison price and utilization

Months to break even for one node ("never" = not within the depreciation life).

{{ grid.table | mdtable }}

{{ grid.text }}

## Method

{% for p in method %}{{ p }}

{% endfor %}
---
generated by gpuplan ({{ schema }})
"""

_HTML_TEMPLATE = (
    "<!DOCTYPE html>\n"
    + HTML_TABLE_MACROS
    + r"""<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<style>
"""
    + BASE_CSS
    + r"""tfoot td { font-weight: 700; border-top: 2px solid #9aa8b6; }
.headline { font-size: 22px; font-weight: 700; margin: 8px 0 16px; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 16px; }
.chart { border: 1px solid #e3e8ee; border-radius: 6px; padding: 4px; min-height: 370px; margin: 12px 0; }
</style>
<script type="text/javascript">window.PlotlyConfig = {MathJaxConfig: 'local'};</script>
<script type="text/javascript">{{ plotlyjs }}</script>
</head>
<body>
<h1>{{ title }}</h1>
<nav><a href="#inputs">Inputs</a><a href="#monthly">Monthly cost</a>
<a href="#cumulative">Cumulative</a><a href="#sensitivity">Sensitivity</a>
<a href="#grid">Price x utilization</a><a href="#method">Method</a></nav>
<p class="headline">{{ head.sentence }}</p>
<table class="kv"><tbody>
{% for k, v in head.facts %}<tr><th>{{ k }}</th><td class="num">{{ v }}</td></tr>
{% endfor %}</tbody></table>

<h2 id="inputs">Inputs</h2>
{{ table(inputs) }}

<h2 id="monthly">Monthly owned cost</h2>
{{ table(monthly.table) }}
<p>{{ monthly.note }}</p>

<h2 id="cumulative">Cumulative cost</h2>
<div class="chart">{{ charts[0] }}</div>
{{ table(curves.table) }}

<h2 id="sensitivity">Sensitivity</h2>
<p>NPV and break-even (months) with one input at its low or high value, all others at the base
(base NPV {{ base_npv }}); widest NPV swing first.</p>
<div class="chart">{{ charts[1] }}</div>
{{ table(tornado.table) }}

<h2 id="grid">Break-even by comparison price and utilization</h2>
<p>Months to break even for one node ("never" = not within the depreciation life).</p>
{{ table(grid.table) }}
<p>{{ grid.text }}</p>
<div class="chart">{{ charts[2] }}</div>

<h2 id="method">Method</h2>
{% for p in method %}<p>{{ p }}</p>
{% endfor %}

<footer><p>generated by gpuplan ({{ schema }})</p></footer>
</body>
</html>
"""
)


_MD = jinja_environment(autoescape=False, trim=False).from_string(_MD_TEMPLATE)
_HTML = jinja_environment(autoescape=True, trim=True).from_string(_HTML_TEMPLATE)


def render_breakeven_markdown(data: dict) -> str:
    """The break-even report as Markdown: the same sections as the html, without charts."""
    text = _MD.render(**_context(data))
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n") + "\n"


def render_breakeven_html(data: dict) -> str:
    """The break-even report as ONE self-contained html page (plotly.js inline once, works offline)."""
    from plotly.offline import get_plotlyjs

    ctx = _context(data)
    return _HTML.render(**ctx, charts=_charts(data, ctx), plotlyjs=Markup(get_plotlyjs()))
