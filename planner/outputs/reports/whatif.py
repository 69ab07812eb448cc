"""Human-readable what-if comparison: ``whatif.md`` and ``whatif.html`` from a :class:`WhatifDocument`.

``gpuplan whatif`` plans one scenario several times with changes applied (a spot-price shock, more
demand, owned colocation nodes, ...). The reader wants to know which variant is cheapest, how far
each one moves the cost from the base, what it buys (tier mix, commitments) and what it gives up
(unserved demand), and, for variants that commit money up front, when they catch up with the base.

Render functions take the typed document (``models/whatif.py``, schema ``gpuplan.whatif/v1``), so a
saved whatif.json (:meth:`WhatifDocument.read`) re-renders the same page; a failed variant shows its
error instead of numbers. The templates are ``templates/whatif.md.j2`` and ``templates/whatif.html.j2``
(it extends ``base.html.j2``), rendered from one shared context so the two never disagree; plotly.js is
inline exactly once in ``<head>``, charts are divs rendered with ``include_plotlyjs=False`` (the page
works offline, from a mail attachment or a CI artifact), and tiers use the plan report's colours and
order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from markupsafe import Markup

from models.futures import FuturesDocument
from models.tiers import Term, Tier
from models.whatif import FailedVariant, SolvedVariant, WhatifDocument
from planner.outputs.reports.futures import distribution_chart, outcome_lines
from planner.outputs.reports.kit import (
    DASH,
    TIER_COLORS,
    TIER_ORDER,
    Table,
    apportion,
    chart_div,
    fmt_num,
    fmt_pct,
    fmt_usd,
    jinja_environment,
    round_half_up,
    unserved_table,
)

__all__ = ["render_whatif_html", "render_whatif_markdown", "write_whatif_reports"]

#: Short tier names for the compact tier-mix cell (the legend under the table spells them out).
TIER_SHORT = {
    Tier.OWNED: "owned",
    Tier.RESERVED_3Y: "3y",
    Tier.RESERVED_1Y: "1y",
    Tier.CAPACITY_RESERVATION: "reserved capacity",
    Tier.ON_DEMAND: "on-demand",
    Tier.SPOT: "spot",
}
#: The commitment column: nodes bought on each term, in this order.
COMMITMENT_TERMS = (Term.ONE_YEAR, Term.THREE_YEARS, Term.OWNED)
OTHER_TIER_COLOR = "#5b6b7f"
BASE_LINE_COLOR = "#1d2733"
#: Line colours for the non-base variants (cycled); distinct from the dark base line.
VARIANT_COLORS = ("#2e75b6", "#ed7d31", "#70ad47", "#7030a0", "#c00000", "#00a0a0", "#b8860b", "#e377c2")
CHEAPER_COLOR, DEARER_COLOR, SAVINGS_COLOR = "#70ad47", "#c00000", "#2e75b6"
#: Chart 1 draws at most this many variants side by side per row of subplots.
SUBPLOT_COLUMNS = 3
#: A variant's parts (by_tier) and total may differ by this many dollars before a note says so.
RECONCILE_TOLERANCE_USD = 1.0
COMPARISON_HEADERS = [
    "variant",
    "status",
    "changes",
    "total cost",
    "vs base",
    "vs base %",
    "savings vs all on-demand",
    "tier mix (share of cost)",
    "nodes committed 1y / 3y / owned",
    "committed GPUs",
    "unserved items",
    "solver gap",
    "seconds",
    "plan directory",
]
#: Columns before the numbers (a failed variant's error spans the numbers) and after them.
LEAD_COLUMNS, TRAIL_COLUMNS = 3, 1
UNSERVED_COLUMN = COMPARISON_HEADERS.index("unserved items") - LEAD_COLUMNS
MIX_COLUMN = COMPARISON_HEADERS.index("tier mix (share of cost)") - LEAD_COLUMNS

Variant = SolvedVariant | FailedVariant


# --------------------------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------------------------


def fmt_signed_usd(value: float | None) -> str:
    """A cost difference with its sign (``+$12,345`` / ``-$12,345`` / ``$0``): direction matters here."""
    if value is None:
        return DASH
    r = round_half_up(value)
    return f"+${r:,}" if r > 0 else fmt_usd(r)


def fmt_signed_pct(percent: float | None, digits: int = 1) -> str:
    """A percentage already in percent units (``-12.3`` -> ``-12.3%``), with its sign."""
    if percent is None:
        return DASH
    text = f"{percent:+,.{digits}f}%"
    return text[1:] if float(text[1:-1].replace(",", "")) == 0 else text  # no "+0.0%" / "-0.0%"


def _share(fraction: float) -> str:
    """A tier's share of cost as a whole percent; a sliver shows as ``<1%`` rather than ``0%``."""
    return "<1%" if 0 < fraction < 0.005 else fmt_pct(fraction, 0)


def _title(v: Variant, base: Variant) -> str:
    """The variant's name, marked when it is the base."""
    return v.name + (" (base)" if v is base else "")


def _solved(variants: Sequence[Variant]) -> list[SolvedVariant]:
    return [v for v in variants if isinstance(v, SolvedVariant)]


def _savings_usd(v: SolvedVariant) -> float:
    return v.all_on_demand_usd - v.total_usd


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


def _header(doc: WhatifDocument) -> dict[str, Any]:
    start, hours = doc.horizon.start, doc.horizon.hours
    span = DASH  # every variant failed: no plan says what the horizon was
    if start is not None and hours is not None:
        end = start + timedelta(hours=hours)
        span = (
            f"{start:%Y-%m-%d} to {end:%Y-%m-%d} UTC ({fmt_num(hours)} hours, {fmt_num(hours / 24, 1)} days)"
        )
    failed = len(doc.variants) - len(_solved(doc.variants))
    count = f"{len(doc.variants)}" + (f" ({failed} failed)" if failed else "")
    items = [
        ("scenario", doc.scenario),
        ("horizon", span),
        ("variants", count),
        ("base variant", doc.base),
        ("created", f"{doc.created:%Y-%m-%d %H:%M} UTC"),
    ]
    return {"scenario": doc.scenario, "facts": items, "schema": doc.schema_}


def _cost_phrase(v: SolvedVariant) -> str:
    """``$D (P%) less/more than the base``, or what is unknown about it."""
    if v.delta_vs_base_usd is None:
        return "no comparison with the base"
    if round_half_up(v.delta_vs_base_usd) == 0:
        return "the same as the base"
    word = "less" if v.delta_vs_base_usd < 0 else "more"
    pct = f" ({fmt_pct(abs(v.delta_vs_base_pct) / 100)})" if v.delta_vs_base_pct is not None else ""
    return f"{fmt_usd(abs(v.delta_vs_base_usd))}{pct} {word} than the base"


def _headline(variants: Sequence[Variant], base: Variant) -> dict[str, Any]:
    """One sentence naming the cheapest variant and the biggest change vs the base, plus caveats."""
    costed = _solved(variants)
    notes: list[str] = []
    if not costed:
        return {"sentence": "No variant produced a plan, so there is no cost to compare.", "notes": notes}
    cheapest = min(costed, key=lambda v: v.total_usd)
    if cheapest is base:
        first = f"The base ({cheapest.name}) is the cheapest variant at {fmt_usd(cheapest.total_usd)}"
    else:
        first = f"{cheapest.name} is the cheapest variant at {fmt_usd(cheapest.total_usd)}"
        if isinstance(base, SolvedVariant):
            first += f", {_cost_phrase(cheapest)} ({base.name})"
    moves = [v for v in costed if v is not base and v.delta_vs_base_usd is not None]
    if moves:
        biggest = max(moves, key=lambda v: abs(v.delta_vs_base_usd or 0.0))
        if biggest is cheapest:
            second = "; it is also the biggest change vs the base"
        else:
            second = f"; the biggest change vs the base is {biggest.name}, {_cost_phrase(biggest)}"
    elif not isinstance(base, SolvedVariant):
        second = "; there is no base cost to compare the variants with"
    else:
        second = "; no other variant has a cost to compare with the base"
    if cheapest.unserved:
        notes.append(
            f"{cheapest.name} leaves {len(cheapest.unserved)} demand item(s) unserved (see Unserved demand): "
            f"part of its saving may come from serving less."
        )
    failed = [v.name for v in variants if isinstance(v, FailedVariant)]
    if failed:
        notes.append(f"Failed, so not compared: {', '.join(failed)} (errors in the comparison table).")
    unsure = [v.name for v in costed if v.significant_vs_base is False]
    if unsure:
        notes.append(
            f"n.s. (not significant): {', '.join(unsure)} differ from the base by less than the two plans' "
            "certified gaps (the costlier plan's bound is below the cheaper plan's cost), so the difference "
            "is not a finding; plan with a longer --time-limit to narrow the gaps."
        )
    not_optimal = [v.name for v in costed if v.status.lower() == "feasible"]
    if not_optimal:
        notes.append(
            f"Not proven optimal (the solver stopped at its gap or time limit): {', '.join(not_optimal)}; "
            f"the solver gap column bounds how much cheaper a better plan could be."
        )
    return {"sentence": first + second + ".", "notes": notes}


@dataclass
class ComparisonRow:
    """One variant's row: ``numbers`` for a plan, or ``error`` spanning those columns if it failed."""

    lead: list[str]
    numbers: list[str]
    classes: list[str]
    error: str | None
    trail: list[str]
    is_base: bool
    mix: list[str] = field(default_factory=list)  # the tier-mix cell in parts, kept unbroken in html


def _mix(v: SolvedVariant) -> list[str]:
    """``["3y 42%", "on-demand 26%", ...]`` in tier order, tiers with no cost left out."""
    parts = sorted(((k, s) for k, s in v.tier_mix.items() if s > 0), key=lambda kv: TIER_ORDER.index(kv[0]))
    return [f"{TIER_SHORT[k]} {_share(s)}" for k, s in parts]


def _comparison(variants: Sequence[Variant], base: Variant) -> dict[str, Any]:
    rows: list[ComparisonRow] = []
    for v in variants:
        lead = [_title(v, base), v.status, ", ".join(v.changes) or "none"]
        if isinstance(v, FailedVariant):
            error = f"failed: {v.error}" if v.error else "failed (no error message in whatif.json)"
            rows.append(ComparisonRow(lead, [], [], error, [DASH], v is base))
            continue
        savings = fmt_usd(_savings_usd(v))
        if v.savings_vs_on_demand_pct is not None:
            savings = f"{fmt_pct(v.savings_vs_on_demand_pct / 100)} ({savings})"
        # a term the plan buys nothing on is left out of the file: a dash, as in the plan report
        commitments = " / ".join(fmt_num(v.commitments.get(t), 1) for t in COMMITMENT_TERMS)
        numbers = [
            fmt_usd(v.total_usd),
            fmt_signed_usd(v.delta_vs_base_usd),
            fmt_signed_pct(v.delta_vs_base_pct) + (" n.s." if v.significant_vs_base is False else ""),
            savings,
            " · ".join(_mix(v)) or DASH,
            commitments if v.commitments else DASH,
            fmt_num(v.committed_gpus),
            fmt_num(len(v.unserved)),
            fmt_pct(v.gap, 2),
            fmt_num(v.seconds, 1),
        ]
        classes = ["num"] * len(numbers)
        classes[MIX_COLUMN] = "mix"
        if v.unserved:
            classes[UNSERVED_COLUMN] = "num bad"
        rows.append(ComparisonRow(lead, numbers, classes, None, [v.plan_dir], v is base, _mix(v)))

    n_numbers = len(COMPARISON_HEADERS) - LEAD_COLUMNS - TRAIL_COLUMNS
    numeric = [False] * LEAD_COLUMNS + [True] * n_numbers + [False] * TRAIL_COLUMNS
    numeric[COMPARISON_HEADERS.index("tier mix (share of cost)")] = False
    table = Table(list(COMPARISON_HEADERS), numeric)
    for r in rows:
        if r.error is not None:
            numbers = [r.error] + [""] * (n_numbers - 1)
        else:
            numbers = [
                f"**{x}**" if i == UNSERVED_COLUMN and "bad" in r.classes[i] else x
                for i, x in enumerate(r.numbers)
            ]
        table.rows.append(r.lead + numbers + r.trail)
    return {"rows": rows, "table": table, "span": n_numbers, "mix_column": MIX_COLUMN}


def _unserved_details(variants: Sequence[Variant]) -> list[tuple[str, Table]]:
    """Per variant with unserved demand, the same table as the plan report's Unserved demand."""
    return [(v.name, table) for v in _solved(variants) if (table := unserved_table(v.unserved))]


def _tiers(variants: Sequence[SolvedVariant]) -> list[Tier]:
    names = {t for v in variants for t in (*v.by_tier, *v.monthly.by_tier)}
    return sorted(names, key=TIER_ORDER.index)


def _by_tier_table(variants: Sequence[Variant]) -> dict[str, Any]:
    """Whole-horizon cost per tier and variant; each row adds up to the variant's total shown."""
    costed = _solved(variants)
    tiers = sorted({t for v in costed for t in v.by_tier}, key=TIER_ORDER.index)
    table = Table(["variant", *tiers, "total"], [False, *[True] * (len(tiers) + 1)])
    notes: list[str] = []
    for v in costed:
        values = [v.by_tier.get(t) for t in tiers]  # None: a tier this variant's plan does not list
        known = [x for x in values if x is not None]
        parts_sum = sum(known)
        total = v.total_usd
        if known and abs(parts_sum - total) > RECONCILE_TOLERANCE_USD:
            notes.append(
                f"{v.name}: the tiers sum to {fmt_usd(parts_sum)}, but its total is {fmt_usd(total)} "
                f"(a difference of {fmt_signed_usd(parts_sum - total)})."
            )
            total = parts_sum
        whole = iter(apportion(known, round_half_up(total)))
        cells = [DASH if x is None else fmt_usd(next(whole)) for x in values]
        table.rows.append([v.name, *cells, fmt_usd(total)])
    return {"table": table if tiers else None, "notes": notes}


def _ranking(variants: Sequence[Variant], base: Variant) -> Table:
    """Variants from cheapest to dearest: what the savings chart shows, as numbers."""
    table = Table(
        ["variant", "total cost", "vs base", "vs base %", "all on-demand", "savings vs all on-demand"],
        [False, True, True, True, True, True],
    )
    for v in sorted(_solved(variants), key=lambda v: v.total_usd):
        savings = v.savings_vs_on_demand_pct
        table.rows.append(
            [
                _title(v, base),
                fmt_usd(v.total_usd),
                fmt_signed_usd(v.delta_vs_base_usd),
                fmt_signed_pct(v.delta_vs_base_pct),
                fmt_usd(v.all_on_demand_usd),
                fmt_pct(savings / 100) if savings is not None else DASH,
            ]
        )
    return table


def _month_end_crossing(v: SolvedVariant, base: SolvedVariant) -> tuple[str, int | None]:
    """How ``v``'s cumulative cost compares with the base's over the months, and the break-even month.

    Break-even is the first month end from which ``v`` stays at or below the base until the horizon
    ends (a colocation variant pays up front and catches up later); None when it never does.
    """
    diffs = [a - b for a, b in zip(v.cumulative_usd, base.cumulative_usd, strict=False)]
    months = v.monthly.month
    if all(d <= RECONCILE_TOLERANCE_USD for d in diffs):
        return f"{v.name} costs no more than the base at every month end.", None
    if all(d > RECONCILE_TOLERANCE_USD for d in diffs):
        return (
            f"{v.name} costs more than the base at every month end: no break-even within the horizon.",
            None,
        )
    last_above = max(i for i, d in enumerate(diffs) if d > RECONCILE_TOLERANCE_USD)
    if last_above == len(diffs) - 1:  # ends above: name the month from which it stays above
        last_below = max(i for i, d in enumerate(diffs) if d <= RECONCILE_TOLERANCE_USD)
        return (
            f"{v.name} is cheaper than the base at first, but its cumulative cost passes the base's by the "
            f"end of {months[last_below + 1]} and stays above it.",
            None,
        )
    k = last_above + 1
    return (
        f"{v.name} breaks even with the base by the end of {months[k]}: from then on its cumulative cost "
        f"is at or below the base's (it ends {fmt_usd(-diffs[-1])} below).",
        k,
    )


def _cumulative(variants: Sequence[Variant], base: Variant) -> dict[str, Any]:
    shown = _solved(variants)
    months = max((v.monthly.month for v in shown), key=len, default=[])
    table = Table(["month end", *[v.name for v in shown]], [False, *[True] * len(shown)])
    for k, month in enumerate(months):
        table.rows.append(
            [month, *[fmt_usd(v.cumulative_usd[k]) if k < len(v.cumulative_usd) else DASH for v in shown]]
        )
    sentences: list[str] = []
    crossings: dict[str, int] = {}
    if isinstance(base, SolvedVariant):
        for v in shown:
            if v is base:
                continue
            sentence, crossing = _month_end_crossing(v, base)
            sentences.append(sentence)
            if crossing is not None:
                crossings[v.name] = crossing
    elif shown:
        sentences.append("The base variant has no cumulative costs, so no break-even against it is shown.")
    return {"shown": shown, "table": table if shown else None, "sentences": sentences, "crossings": crossings}


# --------------------------------------------------------------------------------------------
# Charts (html only)
# --------------------------------------------------------------------------------------------

_LAYOUT: dict[str, Any] = {
    "template": "simple_white",
    "margin": {"l": 90, "r": 30, "t": 70, "b": 60},
    "legend": {"orientation": "h", "y": -0.15},
}


def _no_data(fig: Any, message: str) -> None:
    fig.add_annotation(
        text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5, font={"size": 14}
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)


def _variant_color(v: Variant, base: Variant, k: int) -> str:
    return BASE_LINE_COLOR if v is base else VARIANT_COLORS[k % len(VARIANT_COLORS)]


def _chart_tiers(variants: Sequence[Variant], base: Variant) -> Any:
    """(1) Stacked monthly cost by tier, one subplot per variant, all on one y axis scale."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    shown = [v for v in _solved(variants) if v.monthly.by_tier]
    if not shown:
        fig = go.Figure()
        _no_data(fig, "No variant has monthly costs in whatif.json.")
        fig.update_layout(title="Monthly cost by tier", height=300, **_LAYOUT)
        return fig
    cols = min(len(shown), SUBPLOT_COLUMNS)
    rows = math.ceil(len(shown) / cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        shared_yaxes="all",
        subplot_titles=[_title(v, base) for v in shown],
        horizontal_spacing=0.03,
        vertical_spacing=0.3 / rows if rows > 1 else 0.1,
    )
    # Tiers outermost: trace order is stacking order (owned at the bottom) and legend order.
    in_legend: set[str] = set()
    for tier in _tiers(shown):
        for i, v in enumerate(shown):
            values = v.monthly.by_tier.get(tier, [])
            if not any(values):
                continue
            fig.add_trace(
                go.Bar(
                    x=v.monthly.month,
                    y=values,
                    name=str(tier),
                    legendgroup=str(tier),
                    showlegend=tier not in in_legend,
                    marker={"color": TIER_COLORS.get(tier, OTHER_TIER_COLOR)},
                    customdata=[fmt_usd(x) for x in values],
                    hovertemplate=f"{v.name}<br>%{{x}} {tier}: %{{customdata}}<extra></extra>",
                ),
                row=i // cols + 1,
                col=i % cols + 1,
            )
            in_legend.add(tier)
    fig.update_xaxes(type="category")
    fig.update_yaxes(tickformat="$,.0f")
    fig.update_yaxes(title_text="cost per month (USD)", col=1)
    fig.update_layout(
        title="Monthly cost by tier, per variant (same y scale)",
        barmode="stack",
        hovermode="closest",
        height=max(400, 320 * rows + 80),
        **{**_LAYOUT, "legend": {"title": {"text": "tier"}, "traceorder": "reversed"}},
    )
    return fig


def _chart_savings(variants: Sequence[Variant], base: Variant) -> Any:
    """(2) Cost vs base (negative = cheaper) and savings vs all on-demand, one bar per variant."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = [_title(v, base) for v in variants]
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.08,
        subplot_titles=["cost vs base (USD; negative = cheaper)", "savings vs all on-demand (%)"],
    )
    delta, delta_text, savings, savings_text = [], [], [], []
    for v in variants:
        if isinstance(v, FailedVariant):
            delta.append(0.0)
            delta_text.append("failed")
            savings.append(0.0)
            savings_text.append("failed")
            continue
        delta.append(v.delta_vs_base_usd or 0.0)
        delta_text.append(
            DASH
            if v.delta_vs_base_usd is None
            else f"{fmt_signed_usd(v.delta_vs_base_usd)} ({fmt_signed_pct(v.delta_vs_base_pct)})"
        )
        pct = v.savings_vs_on_demand_pct
        savings.append(pct or 0.0)
        savings_text.append(DASH if pct is None else f"{fmt_pct(pct / 100)} ({fmt_usd(_savings_usd(v))})")
    colors = [CHEAPER_COLOR if d < 0 else DEARER_COLOR if d > 0 else OTHER_TIER_COLOR for d in delta]
    fig.add_trace(
        go.Bar(
            y=names,
            x=delta,
            orientation="h",
            name="cost vs base",
            marker={"color": colors},
            text=delta_text,
            textposition=["outside" if abs(d) < 1 else "auto" for d in delta],
            hovertemplate="%{y}: %{text}<extra></extra>",
            showlegend=False,
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Bar(
            y=names,
            x=savings,
            orientation="h",
            name="savings vs all on-demand",
            marker={"color": SAVINGS_COLOR},
            text=savings_text,
            textposition=["outside" if x == 0 else "auto" for x in savings],
            hovertemplate="%{y}: %{text}<extra></extra>",
            showlegend=False,
        ),
        row=1,
        col=2,
    )
    fig.update_xaxes(tickformat="$,.0f", zeroline=True, zerolinecolor=BASE_LINE_COLOR, col=1)
    fig.update_xaxes(ticksuffix="%", rangemode="tozero", col=2)
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_layout(
        title="Savings per variant", hovermode="closest", height=max(320, 70 * len(variants) + 160), **_LAYOUT
    )
    return fig


def _chart_cumulative(base: Variant, cumulative: Mapping[str, Any]) -> Any:
    """(3) Cumulative cost by month end, one line per variant: where a curve crosses the base's."""
    import plotly.graph_objects as go

    fig = go.Figure()
    shown: list[SolvedVariant] = cumulative["shown"]
    if not shown:
        _no_data(fig, "No variant has cumulative costs in whatif.json.")
        fig.update_layout(title="Cumulative cost by month", height=300, **_LAYOUT)
        return fig
    for k, v in enumerate(shown):
        color = _variant_color(v, base, k)
        months = v.monthly.month
        fig.add_trace(
            go.Scatter(
                x=months,
                y=v.cumulative_usd,
                name=_title(v, base),
                mode="lines+markers",
                line={"color": color, "width": 3.5 if v is base else 2},
                marker={"size": 5},
                customdata=[fmt_usd(x) for x in v.cumulative_usd],
                hovertemplate="%{customdata}",
            )
        )
        month = cumulative["crossings"].get(v.name)
        if month is not None:
            fig.add_trace(
                go.Scatter(
                    x=[months[month]],
                    y=[v.cumulative_usd[month]],
                    name=f"{v.name} breaks even with the base ({months[month]})",
                    mode="markers",
                    marker={
                        "size": 13,
                        "color": color,
                        "symbol": "diamond",
                        "line": {"width": 1, "color": "#fff"},
                    },
                    hovertemplate="break-even: %{x}<extra></extra>",
                )
            )
    fig.update_xaxes(type="category", title_text="month (cost paid up to the end of the month)")
    fig.update_yaxes(title_text="cumulative cost (USD)", tickformat="$,.0f")
    fig.update_layout(
        title="Cumulative cost by month, per variant",
        hovermode="x unified",
        height=480,
        **{
            **_LAYOUT,
            "margin": {**_LAYOUT["margin"], "b": 110},
            "legend": {"orientation": "h", "y": -0.22, "yanchor": "top"},
        },
    )
    return fig


def _charts(variants: Sequence[Variant], base: Variant, cumulative: Mapping[str, Any]) -> list[Markup]:
    """Three chart divs; plotly.js itself is NOT included here (the page embeds it once)."""
    figures = (
        ("tiers", _chart_tiers(variants, base)),
        ("savings", _chart_savings(variants, base)),
        ("cumulative", _chart_cumulative(base, cumulative)),
    )
    return [chart_div(fig, f"chart-{name}") for name, fig in figures]


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------

# Markdown keeps every newline (no trim_blocks) so paragraphs, lists and tables stay separated;
# render_whatif_markdown then collapses runs of blank lines.
_MD = jinja_environment(autoescape=False, trim=False).get_template("whatif.md.j2")
_HTML = jinja_environment(autoescape=True, trim=True).get_template("whatif.html.j2")


def _context(doc: WhatifDocument) -> dict[str, Any]:
    variants, base = doc.variants, doc.base_variant
    return {
        "h": _header(doc),
        "head": _headline(variants, base),
        "cmp": _comparison(variants, base),
        "unserved": _unserved_details(variants),
        "tiers": _by_tier_table(variants),
        "ranking": _ranking(variants, base),
        "cum": _cumulative(variants, base),
        "fut": {
            "lines": [] if doc.futures is None else outcome_lines(doc.futures, "The base scenario, planned"),
            "chart": None,
        },
    }


def render_whatif_markdown(doc: WhatifDocument) -> str:
    """The what-if comparison as Markdown: the same sections and tables as the html, no charts."""
    text = re.sub(r"\n{3,}", "\n\n", _MD.render(**_context(doc)))
    return text.strip("\n") + "\n"


def render_whatif_html(doc: WhatifDocument, futures: FuturesDocument | None = None) -> str:
    """The what-if comparison as ONE self-contained html page (plotly.js inline once, works offline);
    ``futures``: the futures.json that ``doc.futures`` names, for the futures view's chart."""
    from plotly.offline import get_plotlyjs

    ctx = _context(doc)
    charts = _charts(doc.variants, doc.base_variant, ctx["cum"])
    if futures is not None:
        ctx["fut"]["chart"] = distribution_chart(futures)
    return _HTML.render(**ctx, charts=charts, plotlyjs=Markup(get_plotlyjs()))


def write_whatif_reports(directory: Path, doc: WhatifDocument) -> tuple[Path, Path]:
    """Write DIR/whatif.md and DIR/whatif.html from the whatif.json document (and the futures.json it
    names, if any); returns ``(md, html)``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    futures = None
    if doc.futures is not None and (directory / doc.futures.file).is_file():
        futures = FuturesDocument.read(directory / doc.futures.file)
    md_path, html_path = directory / "whatif.md", directory / "whatif.html"
    md_path.write_text(render_whatif_markdown(doc), encoding="utf-8")
    html_path.write_text(render_whatif_html(doc, futures), encoding="utf-8")
    return md_path, html_path
