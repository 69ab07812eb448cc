"""The demand page: ``demand.md`` / ``demand.html`` from the plain document ``gpuplan demand`` builds
(``planner/history/page.py``: what was read and from where, gaps and fills, per service the history and
the forecast with its band, the model and why, training rates, backtest figures, defaults to review).

Why plain data: history and outputs are one layer and may not import each other, so this module never
sees a History or a Forecast; the CLI passes the document. The templates are
``templates/demand.md.j2`` and ``templates/demand.html.j2`` (it extends ``base.html.j2``); plotly.js is
inline exactly once in ``<head>`` and every chart is a div (``include_plotlyjs=False``): the page works
offline, as the other reports do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

from planner.outputs.reports.kit import DASH, Table, fmt_num, jinja_environment

__all__ = ["render_demand_html", "render_demand_md"]


def _pct(value: float | None) -> str:
    return DASH if value is None else f"{value:.1f} %"


def _ratio(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f}"


def _services_table(doc: Mapping[str, Any]) -> Table:
    table = Table(
        ["service", "team", "GPUs/replica", "history mean", "history peak", "model", "P50 mean",
         f"{doc['quantiles'][-1].upper()} peak", "steps filled"],
        [False, False, True, True, True, False, True, True, True],
    )  # fmt: skip
    for s in doc["services"]:
        per = fmt_num(s["gpus_per_replica"], 2) + (" (assumed)" if s["assumed"] else "")
        table.rows.append(
            [
                s["name"], s["team"], per, fmt_num(s["history_mean"], 2), fmt_num(s["history_peak"], 2),
                s["model"], fmt_num(s["forecast_mean"], 2), fmt_num(s["forecast_peak"], 2),
                f"{s['steps'] - s['measured']} of {s['steps']}",
            ]
        )  # fmt: skip
    return table


def _backtest_table(doc: Mapping[str, Any]) -> Table | None:
    if doc["backtest_hours"] is None:
        return None
    table = Table(
        ["service", "model", "MAPE of P50", "MASE of P50", "P10-P90 coverage", "naive MAPE", "naive MASE",
         "naive coverage", "beats naive"],
        [False, False, True, True, True, True, True, True, False],
    )  # fmt: skip
    for s in doc["services"]:
        b = s["backtest"]
        if b is None:
            continue
        m, n = b["model"], b["baseline"]
        table.rows.append(
            [
                s["name"], b["model_name"], _pct(m["mape_pct"]), _ratio(m["mase"]),
                f"{m['coverage'] * 100:.0f} %", _pct(n["mape_pct"]), _ratio(n["mase"]),
                f"{n['coverage'] * 100:.0f} %", "yes" if b["earns_its_keep"] else "no",
            ]
        )  # fmt: skip
    return table


def _training_table(doc: Mapping[str, Any]) -> Table | None:
    if not doc["training"]:
        return None
    table = Table(
        ["team", "size class", "runs seen", "runs per month", "95 % interval", "law", "runs in scenario"],
        [False, False, True, True, True, False, True],
    )
    for t in doc["training"]:
        for k, r in enumerate(t["rates"]):
            table.rows.append(
                [
                    t["team"], r["size_class"], str(r["runs"]), fmt_num(r["rate"], 2),
                    f"{fmt_num(r['ci'][0], 2)} to {fmt_num(r['ci'][1], 2)}", r["law"],
                    str(t["scenario_runs"]) if k == 0 else "",
                ]
            )  # fmt: skip
    return table


def _context(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "doc": doc,
        "title": doc["title"],
        "services": _services_table(doc),
        "backtest": _backtest_table(doc),
        "training": _training_table(doc),
    }


def _chart(service: Mapping[str, Any]) -> Markup:
    """The history, the P50 and the band between the lowest and highest quantile, on one time axis."""
    import plotly.graph_objects as go  # deferred: only the html needs plotly

    band = service["band"]
    low, mid, high = band[service["low"]], band[service["mid"]], band[service["high"]]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=high["times"], y=high["values"], name=service["high"].upper(), mode="lines",
                   line={"width": 0, "color": "#2e75b6"}, showlegend=False, hoverinfo="skip")
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(x=low["times"], y=low["values"], mode="lines",
                   name=f"{service['low'].upper()}-{service['high'].upper()}",
                   line={"width": 0, "color": "#2e75b6"}, fill="tonexty",
                   fillcolor="rgba(46,117,182,0.25)")
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(x=mid["times"], y=mid["values"], name=f"{service['mid'].upper()} forecast", mode="lines",
                   line={"color": "#1f4e79"})
    )  # fmt: skip
    history = service["history"]
    fig.add_trace(
        go.Scatter(x=history["times"], y=history["values"], name="history", mode="lines",
                   line={"color": "#ed7d31"})
    )  # fmt: skip
    unit = "replicas" if not service["assumed"] else "replicas (= GPUs)"
    daily = " (daily means)" if service["daily"] else " (hourly)"
    fig.update_layout(
        title=f"{service['name']}: history and forecast{daily}",
        yaxis_title=unit,
        yaxis_rangemode="tozero",
        height=380,
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
    )
    config = {"displaylogo": False, "responsive": True}
    div = f"chart-{service['name']}"
    return Markup(fig.to_html(full_html=False, include_plotlyjs=False, div_id=div, config=config))


_MD = jinja_environment(autoescape=False, trim=False).get_template("demand.md.j2")
_HTML = jinja_environment(autoescape=True, trim=True).get_template("demand.html.j2")


def render_demand_md(doc: Mapping[str, Any]) -> str:
    """demand.md: the page's sections without charts."""
    return _MD.render(**_context(doc))


def render_demand_html(doc: Mapping[str, Any]) -> str:
    """demand.html: one self-contained page (plotly.js inline once, works offline)."""
    from plotly.offline import get_plotlyjs

    charts = {s["name"]: _chart(s) for s in doc["services"]}
    return _HTML.render(**_context(doc), charts=charts, plotlyjs=Markup(get_plotlyjs()))
