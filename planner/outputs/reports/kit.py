"""The reports' shared kit: number formatting, tables rendered by both Markdown and HTML, and the Jinja
environment that loads the page templates in ``planner/outputs/reports/templates/``.

Money is shown in whole dollars, rounded half away from zero; columns with a total row are apportioned
so the rows add up to the total shown (a FinOps reader adds them up). Every html page extends
``base.html.j2`` (one self-contained document: CSS inline, plotly.js embedded once by the page) and
imports ``macros.html.j2`` for tables.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import jinja2
from markupsafe import Markup

from models.plan import Unserved, UnservedInference, UnservedTraining
from models.tiers import TIER_ORDER, Tier
from models.wording import plural

__all__ = [
    "CHART_CONFIG",
    "DASH",
    "IDLE_SERIES",
    "TIER_COLORS",
    "TIER_ORDER",
    "Table",
    "apportion",
    "chart_div",
    "fmt_num",
    "fmt_pct",
    "fmt_rate",
    "fmt_sig",
    "fmt_usd",
    "iso_time",
    "jinja_environment",
    "md_cell",
    "md_table",
    "money_column",
    "parse_time",
    "round_half_up",
    "unserved_table",
]

IDLE_SERIES = "reserved (idle)"
TIER_COLORS: dict[str, str] = {
    Tier.OWNED: "#7030a0",
    Tier.RESERVED_3Y: "#1f4e79",
    Tier.RESERVED_1Y: "#2e75b6",
    Tier.CAPACITY_RESERVATION: "#5b9bd5",
    Tier.SAVINGS_PLAN: "#8faadc",
    Tier.CAPACITY_BLOCK: "#c55a11",
    Tier.FLEX_START: "#f4b183",
    IDLE_SERIES: "#bdd7ee",
    Tier.ON_DEMAND: "#ed7d31",
    Tier.SPOT: "#70ad47",
}
DASH = "—"

# --------------------------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------------------------


def _finite(value: float | None) -> float | None:
    """The value, or None when it is absent or not finite (shown as a dash)."""
    if value is None:
        return None
    out = float(value)
    return out if math.isfinite(out) else None


def round_half_up(x: float) -> int:
    """Round half away from zero: banker's rounding surprises people reading money."""
    return math.floor(abs(x) + 0.5) * (1 if x >= 0 else -1)


def fmt_usd(value: float | None) -> str:
    """Whole dollars with thousands separators: ``$1,234,567`` / ``-$1,234``."""
    x = _finite(value)
    if x is None:
        return DASH
    r = round_half_up(x)
    return f"-${-r:,}" if r < 0 else f"${r:,}"


def fmt_rate(value: float | None) -> str:
    """Hourly prices keep cents: ``$98.32``."""
    x = _finite(value)
    if x is None:
        return DASH
    return f"-${-x:,.2f}" if x < 0 else f"${x:,.2f}"


def fmt_pct(fraction: float | None, digits: int = 1) -> str:
    """A fraction (0.123) shown as a percentage (12.3%)."""
    x = _finite(fraction)
    return DASH if x is None else f"{x * 100:,.{digits}f}%"


def fmt_num(value: float | None, digits: int = 0) -> str:
    """Counts and hours; integers stay integers, fractional values get ``digits`` decimals."""
    x = _finite(value)
    if x is None:
        return DASH
    if digits == 0 or x.is_integer():
        return f"{round_half_up(x):,}"
    return f"{x:,.{digits}f}"


def fmt_sig(value: float | None, sig: int = 3) -> str:
    """Small rates keep ``sig`` significant digits (0.004 interruptions/h must not read as 0.00)."""
    x = _finite(value)
    if x is None:
        return DASH
    if x == 0:
        return "0"
    decimals = min(max(sig - 1 - math.floor(math.log10(abs(x))), 0), 8)
    text = f"{x:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def apportion(values: list[float], target: int) -> list[int]:
    """Round ``values`` to integers that sum exactly to ``target`` (largest remainder).

    Why: a FinOps reader adds up the displayed rows; independently rounded rows can miss the
    displayed total by a few dollars and look like an error. Each row moves by at most $1.
    """
    if not values:
        return []
    floors = [math.floor(v) for v in values]
    diff = target - sum(floors)
    order = sorted(range(len(values)), key=lambda i: values[i] - floors[i], reverse=True)
    n = len(values)
    for k in range(abs(diff)):
        if diff > 0:
            floors[order[k % n]] += 1
        else:
            floors[order[n - 1 - (k % n)]] -= 1
    return floors


def money_column(values: Iterable[float | None]) -> tuple[list[str], str]:
    """Whole-dollar cells plus their total, apportioned so the cells add up to the total shown."""
    raw = [_finite(v) for v in values]
    known = [v for v in raw if v is not None]
    whole = iter(apportion(known, round_half_up(sum(known))))
    cells = [DASH if v is None else fmt_usd(next(whole)) for v in raw]
    return cells, fmt_usd(round_half_up(sum(known)))


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        out = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return out if out.tzinfo else out.replace(tzinfo=UTC)


def iso_time(ts: datetime) -> str:
    if ts.utcoffset() == timedelta(0):
        return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return ts.isoformat()


# --------------------------------------------------------------------------------------------
# Tables: one neutral structure rendered by both templates
# --------------------------------------------------------------------------------------------


@dataclass
class Table:
    """Pre-formatted cells; ``numeric[i]`` right-aligns column ``i`` in md and html."""

    headers: list[str]
    numeric: list[bool]
    rows: list[list[str]] = field(default_factory=list)
    total: list[str] | None = None


def md_cell(value: Any) -> str:
    """A markdown table cell: pipes escaped, no line breaks."""
    return str(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def md_table(table: Table) -> str:
    """A GitHub-flavoured markdown table; numeric columns right-aligned, the total row in bold."""
    lines = [
        "| " + " | ".join(md_cell(h) for h in table.headers) + " |",
        "|" + "|".join("---:" if n else ":---" for n in table.numeric) + "|",
    ]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in table.rows]
    if table.total:
        lines.append("| " + " | ".join(f"**{md_cell(c)}**" if c else "" for c in table.total) + " |")
    return "\n".join(lines)


def unserved_table(items: Iterable[Unserved]) -> Table | None:
    """Demand a plan leaves unserved, one row per item with its amount and reason; None when there is none."""
    table = Table(
        ["workload", "kind", "team", "run", "unserved", "reason"], [False, False, False, True, True, False]
    )
    for u in items:
        run = DASH
        if isinstance(u, UnservedTraining):
            run, amount = fmt_num(u.run), f"{fmt_num(u.gpu_hours, 1)} GPU-h"
        elif isinstance(u, UnservedInference):
            amount = f"{fmt_num(u.replica_hours, 1)} replica-h"
        else:  # a guarantee: GPUs the team is promised that no commitment can hold
            amount = plural(u.gpus, "GPU", thousands=True)
        table.rows.append([u.workload, u.kind, u.team, run, amount, u.reason])
    return table if table.rows else None


def jinja_environment(autoescape: bool, trim: bool) -> jinja2.Environment:
    """Templates from ``planner/outputs/reports/templates``; undefined names fail loudly (StrictUndefined)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("planner.outputs.reports", "templates"),
        autoescape=autoescape,
        trim_blocks=trim,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["md"] = md_cell
    env.filters["mdtable"] = md_table
    env.filters["plural"] = plural  # {{ n | plural("run") }}: "1 run", "5 runs"
    return env


# --------------------------------------------------------------------------------------------
# Charts: one plotly div per chart, sized by its card before it is first drawn
# --------------------------------------------------------------------------------------------

#: plotly's config for every report chart: no logo; redrawn to its card's width when the window resizes;
#: the mode bar only while the pointer is over the chart (plotly's "hover" default, said here on purpose).
CHART_CONFIG: dict[str, Any] = {"displaylogo": False, "responsive": True, "displayModeBar": "hover"}
#: The band at the top of a chart that plotly's mode bar takes (its buttons are about 25 px tall, 2 px
#: from the top): titles start below it, so a capture taken while the mode bar shows never hides them.
MODEBAR_BAND_PX = 34
#: Height of a one-line title (plotly's default 17 px title font, with its descenders) and the gap under it.
_TITLE_PX = 24
_TITLE_GAP_PX = 10


def chart_div(fig: Any, div_id: str) -> Markup:
    """``fig`` as a ``<div>`` for a report page, plotly.js not included (the page embeds it once).

    The title is pinned to the top of the chart below :data:`MODEBAR_BAND_PX` and the top margin grows
    to hold it, so the mode bar never covers a title. The chart has no fixed width: plotly takes its
    card's width when it first draws, so a page's CSS must give the card its final width by then
    (``plan.html.j2``'s grid does), and again on every window resize; ``base.html.j2`` and ``base.css``
    let a printed chart scale down to its card.
    """
    title = fig.layout.title
    if title.text:
        lines = 1 + str(title.text).count("<br>")
        fig.update_layout(
            title={"yref": "container", "y": 1, "yanchor": "top", "pad": {"t": MODEBAR_BAND_PX}},
            margin={"t": max(fig.layout.margin.t or 0, MODEBAR_BAND_PX + lines * _TITLE_PX + _TITLE_GAP_PX)},
        )
    return Markup(fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=CHART_CONFIG))


# Markdown keeps every newline (no trim_blocks) so paragraphs, lists and tables stay separated;
