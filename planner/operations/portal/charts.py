"""The team page's charts, drawn by plotly as the reports draw theirs (``planner/outputs/reports/``): a div
and its script per chart, plotly.js served once by the portal itself (``/assets/plotly.min.js``), so the pages
work without the internet."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from planner.outputs.reports.kit import TIER_COLORS

if TYPE_CHECKING:
    from planner.operations.portal.measured import Measured

__all__ = ["chargeback_chart", "measured_chart", "usage_chart"]

_CONFIG = {"displaylogo": False, "responsive": True}


def usage_chart(
    team: str, points: list[tuple[datetime, float]], guaranteed: int, burst: int | None
) -> Markup:
    """Planned GPUs of the team per period, with its guarantee and burst limit as lines."""
    import plotly.graph_objects as go

    x = [p[0] for p in points]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=[p[1] for p in points], name="planned GPUs", line={"shape": "hv"}))
    if guaranteed:
        fig.add_trace(go.Scatter(x=x, y=[guaranteed] * len(x), name="guaranteed", line={"dash": "dot"}))
    if burst is not None:
        fig.add_trace(go.Scatter(x=x, y=[burst] * len(x), name="burst limit", line={"dash": "dash"}))
    fig.update_layout(
        title=f"GPUs of {team} over time (plan)",
        yaxis_title="GPUs",
        yaxis_rangemode="tozero",  # a GPU count read against zero: an axis from 40 makes 48 look double
        height=360,
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
    )
    return Markup(fig.to_html(full_html=False, include_plotlyjs=False, div_id="chart-usage", config=_CONFIG))


def chargeback_chart(team: str, month: str | None, rows: list[dict[str, Any]]) -> Markup:
    """The month's cost per project, stacked by tier (the idle committed share apart)."""
    import plotly.graph_objects as go

    projects = sorted({r["project"] for r in rows})
    fig = go.Figure()
    for tier in sorted({r["tier"] for r in rows}):
        used = [
            sum(r["cost_usd"] - r["idle_usd"] for r in rows if r["tier"] == tier and r["project"] == p)
            for p in projects
        ]
        fig.add_trace(go.Bar(x=projects, y=used, name=tier, marker={"color": TIER_COLORS.get(tier)}))
    idle = [sum(r["idle_usd"] for r in rows if r["project"] == p) for p in projects]
    if sum(idle) > 0:
        fig.add_trace(go.Bar(x=projects, y=idle, name="idle committed", marker={"color": "#bdd7ee"}))
    fig.update_layout(
        barmode="stack",
        title=f"Chargeback of {team}, {month or 'no month'} (USD), by tier",
        yaxis_title="USD",
        yaxis_tickprefix="$",
        height=360,
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
    )
    return Markup(
        fig.to_html(full_html=False, include_plotlyjs=False, div_id="chart-chargeback", config=_CONFIG)
    )


def measured_chart(
    measured: Measured, guaranteed: int, burst: int | None, planned: list[tuple[datetime, float]]
) -> Markup:
    """The team's measured allocated GPUs over the last days beside its plan (where the plan's horizon
    covers those hours), guarantee and burst limit; its namespaces' DCGM utilization and its pending Kueue
    workloads on a second axis. Gaps in the monitoring are gaps in the lines."""
    import plotly.graph_objects as go

    x = measured.times
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=x, y=measured.allocated, name="allocated GPUs (measured)", line={"shape": "hv"})
    )
    if planned:
        fig.add_trace(
            go.Scatter(x=[p[0] for p in planned], y=[p[1] for p in planned], name="planned GPUs",
                       line={"shape": "hv", "dash": "dashdot"})
        )  # fmt: skip
    if guaranteed:
        fig.add_trace(go.Scatter(x=x, y=[guaranteed] * len(x), name="guaranteed", line={"dash": "dot"}))
    if burst is not None:
        fig.add_trace(go.Scatter(x=x, y=[burst] * len(x), name="burst limit", line={"dash": "dash"}))
    for namespace, values in measured.utilization.items():
        fig.add_trace(go.Scatter(x=x, y=values, name=f"DCGM utilization % ({namespace})", yaxis="y2"))
    for queue, values in measured.pending.items():
        fig.add_trace(
            go.Scatter(x=x, y=values, name=f"pending workloads ({queue})", yaxis="y2", line={"shape": "hv"})
        )
    fig.update_layout(
        title=f"What {measured.team} used, last {len(x) // 24} days (measured)",
        yaxis={"title": "GPUs", "rangemode": "tozero"},
        yaxis2={"title": "% utilization, pending workloads", "overlaying": "y", "side": "right",
                "rangemode": "tozero", "showgrid": False},
        height=380,
        margin={"l": 60, "r": 60, "t": 50, "b": 40},
    )  # fmt: skip
    return Markup(
        fig.to_html(full_html=False, include_plotlyjs=False, div_id="chart-measured", config=_CONFIG)
    )
