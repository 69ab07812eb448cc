"""Human-readable break-even report: ``breakeven.md`` / ``breakeven.html`` from a :class:`BreakevenDocument`.

The reader is a CFO who will check the numbers by hand, so the page states the headline in one
sentence, lists every input with its unit, splits the monthly owned cost into the parts a
spreadsheet would have (capital recovery, colo, support, energy), and writes the formulas out.
The grid of break-even months by comparison price and utilization shows why quoted "12-18 month"
paybacks disagree: they compare against different prices at different utilizations.

Render functions take the typed document (``models/breakeven.py``, schema ``gpuplan.breakeven/v1``,
built by ``models.tco.breakeven_data``), so a saved breakeven.json (:meth:`BreakevenDocument.read`)
re-renders the same page. The templates are ``templates/breakeven.md.j2`` and
``templates/breakeven.html.j2`` (it extends ``base.html.j2``), rendered from one shared context;
plotly.js is inline exactly once in ``<head>``, charts are divs rendered with
``include_plotlyjs=False``, no external fetch (works offline).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from models.breakeven import BreakevenDocument
from models.tiers import HOURS_PER_MONTH, Tier
from planner.outputs.reports.kit import (
    DASH,
    Table,
    chart_div,
    fmt_pct,
    fmt_rate,
    fmt_usd,
    jinja_environment,
)

__all__ = ["render_breakeven_html", "render_breakeven_markdown"]

PRICE_TITLES = {
    Tier.ON_DEMAND: "on-demand",
    Tier.RESERVED_1Y: "1-year reserved",
    Tier.RESERVED_3Y: "3-year reserved",
    Tier.SPOT: "spot",
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


def fmt_months(value: float | None, never: str = "never") -> str:
    """Months with one decimal (``9.8``); None means the curves never cross."""
    return never if value is None else f"{value:,.1f}"


def fmt_cents(value: float) -> str:
    """Dollars and cents (``$2,791.67``): monthly figures a reader recomputes by hand."""
    return f"-${-value:,.2f}" if value < 0 else f"${value:,.2f}"


def fmt_sig_price(value: float) -> str:
    """A unit price with up to 4 decimals (``$0.09``, ``$0.045``): per-kWh prices are small."""
    text = f"{value:,.4f}".rstrip("0")
    return "$" + (text + "0" if text.endswith(".") else text)


def _plain(value: str | float | None) -> str:
    """An input value as typed: integers without decimals, floats without trailing zeros."""
    if value is None:
        return DASH
    if isinstance(value, str):
        return value
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


# --------------------------------------------------------------------------------------------
# Context: one structure for both templates
# --------------------------------------------------------------------------------------------


def _price_title(tier: Tier) -> str:
    return PRICE_TITLES[tier]


def _headline(doc: BreakevenDocument) -> dict[str, Any]:
    inputs = doc.inputs
    life_text = f"{inputs.depreciation_months}-month"
    be, npv = doc.months_to_break_even, doc.npv_usd
    owning = f"Owning {doc.nodes} node{'' if doc.nodes == 1 else 's'}"
    if doc.nodes_from == "plan":
        owning += " (the number the plan buys)"
    elif doc.nodes_from == "--nodes":
        owning += " (set with --nodes)"
    if be is None:
        crossing = f"{owning} never breaks even within the depreciation life ({life_text} life)"
    else:
        crossing = f"{owning} breaks even after {fmt_months(be)} months"
    verdict = "owning saves money" if npv > 0 else "owning costs more than the cloud" if npv < 0 else ""
    rate = f" at the {_plain(inputs.cost_of_capital_pct_per_year)}% cost of capital"
    value = f"; its NPV over the {life_text} life{rate} is {fmt_usd(npv)}" + (
        f" ({verdict})" if verdict else ""
    )
    facts = [
        (
            "months to break even",
            f"{fmt_months(be)} months" if be is not None else f"never within {life_text} life",
        ),
        ("NPV (positive = owning saves)", fmt_usd(npv)),
        ("nodes owned", _plain(doc.nodes)),
        ("utilization of owned nodes", fmt_pct(doc.utilization, 0)),
        ("owned tier price in the planner", f"{fmt_rate(doc.owned_usd_per_node_hour)} per node-hour"),
    ]
    if doc.comparator.offering:
        facts.append(("cloud comparator", doc.comparator.offering))
    for tier, price in doc.comparator.prices().items():
        facts.append((f"{_price_title(tier)} price", f"{fmt_rate(price)} per node-hour"))
    change = doc.cloud_price_change_pct_per_year
    if change:
        facts.append(("cloud price change", f"{change:+.1f}% per year"))
    return {"sentence": crossing + value + ".", "facts": facts, "never": be is None}


def _inputs_table(doc: BreakevenDocument) -> Table:
    table = Table(headers=["input", "value", "unit"], numeric=[False, True, False])
    for key, value in doc.inputs.model_dump().items():
        label, unit = INPUT_UNITS.get(key, (key, ""))
        table.rows.append([label, _plain(value), unit])
    return table


def _monthly(doc: BreakevenDocument) -> dict[str, Any]:
    """Monthly owned cost per node and for all nodes, split as a spreadsheet would."""
    monthly, inputs, u = doc.monthly, doc.inputs, doc.utilization
    kw, pue, kwh = inputs.power_kw_per_node, inputs.pue, inputs.power_usd_per_kwh
    capex, support_pct = inputs.capex_per_node_usd, inputs.support_pct_per_year
    rows = [
        (
            "capital recovery",
            monthly.capital_usd,
            "level payment recovering capex net of residual (see Method)",
        ),
        (
            "colo fee",
            monthly.colo_usd,
            f"{_plain(kw)} kW x {fmt_rate(inputs.colo_usd_per_kw_month)} per kW-month",
        ),
        ("support", monthly.support_usd, f"{_plain(support_pct)}% of {fmt_usd(capex)} per year / 12"),
        (
            "energy",
            monthly.energy_usd,
            f"{_plain(kw)} kW x PUE {_plain(pue)} x 730 h x {fmt_sig_price(kwh)}/kWh x {fmt_pct(u, 0)} used",
        ),
    ]
    nodes = doc.nodes
    noun = "node" if nodes == 1 else "nodes"
    table = Table(
        headers=["component", "per node per month", f"{_plain(nodes)} {noun} per month", "how"],
        numeric=[False, True, True, False],
    )
    per_node, total = _cents([v for _, v, _ in rows])
    fleet, fleet_total = _cents([v * nodes for _, v, _ in rows])
    for (label, _, how), a, b in zip(rows, per_node, fleet, strict=True):
        table.rows.append([label, fmt_cents(a), fmt_cents(b), how])
    table.total = ["total", fmt_cents(total), fmt_cents(fleet_total), ""]
    # The same cents as the table (energy at full power), so the note and the table agree.
    full = sum(round(x, 2) for x in (monthly.capital_usd, monthly.colo_usd, monthly.support_usd))
    full += round(kw * pue * HOURS_PER_MONTH * kwh, 2)
    note = (
        f"The planner prices the owned tier at {fmt_rate(doc.owned_usd_per_node_hour)} per node-hour: "
        f"capital recovery plus opex at full power (energy for all 730 hours), divided by 730 h"
        f" (= {fmt_cents(full)} / 730)."
    )
    if u > 0:
        note += (
            f" At {fmt_pct(u, 0)} utilization each used node-hour costs "
            f"{fmt_rate(sum(v for _, v, _ in rows) / (HOURS_PER_MONTH * u))}."
        )
    return {"table": table, "note": note}


def _curves(doc: BreakevenDocument) -> dict[str, Any]:
    curves = doc.curves
    months, cloud, owned = curves.month, curves.cloud_only_cumulative_usd, curves.owned_cumulative_usd
    table = Table(
        headers=["month", "cloud only (cumulative)", "owning (cumulative)", "owning saves"],
        numeric=[True, True, True, True],
    )
    last = len(months) - 1
    for k, m in enumerate(months):
        if k == last or m % 6 == 0:
            table.rows.append([_plain(m), fmt_usd(cloud[k]), fmt_usd(owned[k]), fmt_usd(cloud[k] - owned[k])])
    return {"months": months, "cloud": cloud, "owned": owned, "table": table}


def _tornado(doc: BreakevenDocument) -> Table:
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
    for b in doc.tornado:
        table.rows.append(
            [
                b.title,
                b.low_label,
                b.high_label,
                fmt_usd(b.npv_low_usd),
                fmt_usd(b.npv_high_usd),
                fmt_months(b.break_even_low),
                fmt_months(b.break_even_high),
            ]
        )
    return table


def _grid(doc: BreakevenDocument) -> dict[str, Any]:
    """Break-even months by comparison price (rows) x utilization (columns), and why they differ."""
    prices: dict[Tier, float] = {}
    utils: list[float] = []
    months: dict[tuple[Tier, float], float | None] = {}
    for c in doc.grid:
        prices.setdefault(c.price, c.usd_per_node_hour)
        if c.utilization not in utils:
            utils.append(c.utilization)
        months[(c.price, c.utilization)] = c.months_to_break_even
    table = Table(
        headers=["comparison price", "$ per node-hour", *[f"{fmt_pct(u, 0)} used" for u in utils]],
        numeric=[False, True, *[True] * len(utils)],
    )
    for tier, price in prices.items():
        row = [_price_title(tier), fmt_rate(price)]
        row += [fmt_months(months[(tier, u)]) if (tier, u) in months else DASH for u in utils]
        table.rows.append(row)

    life = doc.inputs.depreciation_months
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
            name, u = max(never, key=lambda k: (k[1], -prices[k[0]]))
            sentences[-1] += (
                f", but never within {life} months against the {_price_title(name)} price at {fmt_pct(u, 0)}."
            )
        else:
            sentences[-1] += (
                f" and after {fmt_months(worst)} months against the {_price_title(worst_name)} price "
                f"at {fmt_pct(worst_u, 0)}."
            )
    if any(v is not None and abs(v - life) < 1e-9 for v in months.values()):
        sentences.append(
            f"A cell of exactly {fmt_months(life)} means owning only catches up with the resale value "
            "received at the end of the life."
        )
    return {"table": table, "prices": prices, "utils": utils, "months": months, "text": " ".join(sentences)}


def _context(doc: BreakevenDocument) -> dict[str, Any]:
    return {
        "title": f"gpuplan break-even: {doc.scenario}",
        "schema": doc.schema_,
        "head": _headline(doc),
        "inputs": _inputs_table(doc),
        "monthly": _monthly(doc),
        "curves": _curves(doc),
        "tornado": _tornado(doc),
        "grid": _grid(doc),
        "base_npv": fmt_usd(doc.npv_usd),
    }


# --------------------------------------------------------------------------------------------
# Charts (html only)
# --------------------------------------------------------------------------------------------


def _charts(doc: BreakevenDocument, ctx: Mapping[str, Any]) -> list[Markup]:
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
            name=f"owning {_plain(doc.nodes)} nodes + cloud for the rest",
            mode="lines",
            line={"color": CURVE_COLORS["owned"]},
        )
    )
    be = doc.months_to_break_even
    if be is not None:
        fig_a.add_trace(
            go.Scatter(
                x=[be],
                y=[_interp(be, [float(m) for m in months], cloud)],
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

    bars = doc.tornado
    base = doc.npv_usd
    names = [f"{b.title} ({b.low_label} / {b.high_label})" for b in bars]
    fig_b = go.Figure()
    for side in ("low", "high"):
        values = [b.npv_low_usd if side == "low" else b.npv_high_usd for b in bars]
        labels = [b.low_label if side == "low" else b.high_label for b in bars]
        fig_b.add_trace(
            go.Bar(
                y=names,
                x=[v - base for v in values],
                base=[base] * len(bars),
                orientation="h",
                name=f"{side} input",
                marker={"color": CURVE_COLORS[side]},
                text=[f"{label}: {fmt_usd(v)}" for label, v in zip(labels, values, strict=True)],
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

    return [
        chart_div(fig, f"chart-{name}")
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
# Rendering
# --------------------------------------------------------------------------------------------

_MD = jinja_environment(autoescape=False, trim=False).get_template("breakeven.md.j2")
_HTML = jinja_environment(autoescape=True, trim=True).get_template("breakeven.html.j2")


def render_breakeven_markdown(doc: BreakevenDocument) -> str:
    """The break-even report as Markdown: the same sections as the html, without charts."""
    text = _MD.render(**_context(doc))
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n") + "\n"


def render_breakeven_html(doc: BreakevenDocument) -> str:
    """The break-even report as ONE self-contained html page (plotly.js inline once, works offline)."""
    from plotly.offline import get_plotlyjs

    ctx = _context(doc)
    return _HTML.render(**ctx, charts=_charts(doc, ctx), plotlyjs=Markup(get_plotlyjs()))
