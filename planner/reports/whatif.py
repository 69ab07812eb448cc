"""Human-readable what-if comparison: ``whatif.md`` and ``whatif.html`` from a whatif.json dict.

``gpuplan whatif`` plans one scenario several times with changes applied (a spot-price shock, more
demand, owned colocation nodes, ...). The reader wants to know which variant is cheapest, how far
each one moves the cost from the base, what it buys (tier mix, commitments) and what it gives up
(unserved demand), and, for variants that commit money up front, when they catch up with the base.

Render functions take the plain dict (schema ``gpuplan.whatif/v1``), never planner objects, so a saved
whatif.json re-renders the same page. Every field beyond the variant's name is optional: a missing or
non-numeric value renders as "—", and a failed variant shows its error instead of numbers. Like
``planner/reports/plan.py``: plotly.js is inline exactly once in ``<head>``, charts are divs rendered with
``include_plotlyjs=False`` (the page works offline, from a mail attachment or a CI artifact), tiers use
its colours and order, and inline jinja2 templates render markdown and html from one shared context so
the two never disagree.
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

from planner.reports.kit import (
    BASE_CSS,
    DASH,
    HTML_TABLE_MACROS,
    TIER_COLORS,
    TIER_ORDER,
    Table,
    fmt_num,
    fmt_pct,
    fmt_usd,
    jinja_environment,
)
from planner.reports.kit import (
    apportion as _apportion,
)
from planner.reports.kit import (
    parse_time as _parse_time,
)
from planner.reports.kit import (
    round_half_up as _round_half_up,
)
from planner.reports.plan import _num, _unserved  # transitional: go with the typed document

__all__ = ["render_whatif_html", "render_whatif_markdown", "write_whatif_reports"]

#: Short tier names for the compact tier-mix cell (the legend under the table spells them out).
TIER_SHORT = {
    "owned": "owned",
    "reserved_3y": "3y",
    "reserved_1y": "1y",
    "on_demand": "on-demand",
    "spot": "spot",
}
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


# --------------------------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------------------------


def fmt_signed_usd(value: Any) -> str:
    """A cost difference with its sign (``+$12,345`` / ``-$12,345`` / ``$0``): direction matters here."""
    x = _num(value)
    if x is None:
        return DASH
    r = _round_half_up(x)
    return f"+${r:,}" if r > 0 else fmt_usd(r)


def fmt_signed_pct(percent: Any, digits: int = 1) -> str:
    """A percentage already in percent units (``-12.3`` -> ``-12.3%``), with its sign."""
    x = _num(percent)
    if x is None:
        return DASH
    text = f"{x:+,.{digits}f}%"
    return text[1:] if float(text[1:-1].replace(",", "")) == 0 else text  # no "+0.0%" / "-0.0%"


def _share(fraction: float) -> str:
    """A tier's share of cost as a whole percent; a sliver shows as ``<1%`` rather than ``0%``."""
    return "<1%" if 0 < fraction < 0.005 else fmt_pct(fraction, 0)


def _text(value: Any) -> str:
    return DASH if value is None or value == "" else str(value)


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def _numbers(value: Any) -> dict[str, float]:
    """The numeric entries of a mapping (``by_tier``, ``tier_mix``); others are dropped as unknown."""
    return {str(k): x for k, v in _dict(value).items() if (x := _num(v)) is not None}


def _tier_key(name: str) -> tuple[int, str]:
    """Sort key putting tiers in ``TIER_ORDER``; unknown tiers follow, alphabetically."""
    return (TIER_ORDER.index(name) if name in TIER_ORDER else len(TIER_ORDER), name)


def _change_text(change: Any) -> str:
    """One change as its ``--vary`` text; a dict is shown as ``key=value`` pairs."""
    if isinstance(change, Mapping):
        if "text" in change:
            return str(change["text"])
        return ", ".join(f"{k}={v}" for k, v in change.items())
    return str(change)


# --------------------------------------------------------------------------------------------
# Variants: the dict normalized once, so templates and charts never see missing keys
# --------------------------------------------------------------------------------------------


@dataclass
class Variant:
    """One variant of whatif.json with every optional field resolved to a value or None."""

    name: str
    changes: list[str] | None
    status: str
    error: str | None
    failed: bool
    plan_dir: str | None
    total: float | None
    on_demand: float | None
    savings_pct: float | None
    delta_usd: float | None
    delta_pct: float | None
    by_tier: dict[str, float]
    tier_mix: dict[str, float]
    commitments: dict[str, float | None]
    committed_gpus: float | None
    unserved: list[dict[str, Any]] | None
    gap: float | None
    seconds: float | None
    months: list[str] = field(default_factory=list)
    monthly: dict[str, list[float | None]] = field(default_factory=dict)
    cumulative: list[float | None] = field(default_factory=list)
    is_base: bool = False

    @property
    def savings_usd(self) -> float | None:
        if self.on_demand is None or self.total is None:
            return None
        return self.on_demand - self.total

    @property
    def has_cost(self) -> bool:
        return not self.failed and self.total is not None


def _series(values: Any, n: int) -> list[float | None]:
    """A per-month series cut or padded (with None) to ``n`` months."""
    out = [_num(v) for v in _list(values)][:n]
    return out + [None] * (n - len(out))


def _month_labels(data: Mapping[str, Any], raw: Mapping[str, Any], n: int) -> list[str]:
    """``n`` month labels: the variant's own, else generated from the horizon start, else numbered."""
    labels = [str(m) for m in _list(_dict(raw.get("monthly")).get("month"))][:n]
    if labels:
        return labels + [f"month {k + 1}" for k in range(len(labels), n)]
    start = _parse_time(_dict(data.get("horizon")).get("start"))
    if start is None:
        return [f"month {k + 1}" for k in range(n)]
    return [
        f"{start.year + (start.month - 1 + k) // 12:04d}-{(start.month - 1 + k) % 12 + 1:02d}"
        for k in range(n)
    ]


def _variant(data: Mapping[str, Any], raw: Mapping[str, Any], index: int) -> Variant:
    status = str(raw.get("status") or DASH)
    error = raw.get("error")
    error = str(error) if error not in (None, "") else None
    total = _num(raw.get("total_usd"))
    failed = status.lower() == "failed" or (error is not None and total is None)
    by_tier = _numbers(raw.get("by_tier"))
    tier_mix = _numbers(raw.get("tier_mix"))
    if not tier_mix and by_tier:
        denominator = total if total else sum(by_tier.values())
        tier_mix = {k: v / denominator for k, v in by_tier.items()} if denominator else {}
    commitments = {term: _num(_dict(raw.get("commitments")).get(term)) for term in ("1y", "3y", "owned")}
    unserved = raw.get("unserved")
    unserved_items = (
        [dict(u) if isinstance(u, Mapping) else {"reason": str(u)} for u in unserved]
        if isinstance(unserved, list | tuple)
        else None
    )
    changes = raw.get("changes")
    change_list = [_change_text(c) for c in changes] if isinstance(changes, list | tuple) else None

    monthly = _dict(raw.get("monthly"))
    by_tier_months = {str(k): v for k, v in _dict(monthly.get("by_tier")).items() if isinstance(v, list)}
    n = max(
        [len(_list(monthly.get("month"))), len(_list(raw.get("cumulative_usd")))]
        + [len(v) for v in by_tier_months.values()]
    )
    months = _month_labels(data, raw, n) if n else []
    series = {tier: _series(values, n) for tier, values in by_tier_months.items()}
    cumulative = _series(raw.get("cumulative_usd"), n) if raw.get("cumulative_usd") is not None else []
    if not cumulative and series:  # derive it: the running sum of the monthly totals
        running: float | None = 0.0
        for k in range(n):
            month = [s[k] for s in series.values()]
            known = [x for x in month if x is not None]
            running = None if running is None or len(known) < len(month) else running + sum(known)
            cumulative.append(running)
    name = raw.get("name")
    return Variant(
        name=str(name) if name not in (None, "") else f"variant {index + 1}",
        changes=change_list,
        status=status,
        error=error,
        failed=failed,
        plan_dir=str(raw["plan_dir"]) if raw.get("plan_dir") else None,
        total=None if failed else total,
        on_demand=_num(raw.get("all_on_demand_usd")),
        savings_pct=_num(raw.get("savings_vs_on_demand_pct")),
        delta_usd=_num(raw.get("delta_vs_base_usd")),
        delta_pct=_num(raw.get("delta_vs_base_pct")),
        by_tier=by_tier,
        tier_mix=tier_mix,
        commitments=commitments,
        committed_gpus=_num(raw.get("committed_gpus")),
        unserved=unserved_items,
        gap=_num(raw.get("gap")),
        seconds=_num(raw.get("seconds")),
        months=months,
        monthly=series,
        cumulative=cumulative,
    )


def _variants(data: Mapping[str, Any]) -> tuple[list[Variant], Variant | None]:
    """All variants (names made unique, so charts never merge two) and the base, if there is one.

    Deltas and savings missing from whatif.json are derived from the totals, so a hand-written or
    older file still compares.
    """
    variants = [_variant(data, _dict(raw), i) for i, raw in enumerate(_list(data.get("variants")))]
    seen: dict[str, int] = {}
    for v in variants:
        seen[v.name] = seen.get(v.name, 0) + 1
        if seen[v.name] > 1:
            v.name = f"{v.name} ({seen[v.name]})"
    base_name = data.get("base")
    base = next((v for v in variants if base_name is not None and v.name == str(base_name)), None)
    if base is None and base_name is None and variants:
        base = variants[0]
    if base is not None:
        base.is_base = True
    for v in variants:
        if v.failed:
            v.delta_usd = v.delta_pct = v.savings_pct = None
            continue
        if v.savings_pct is None and v.savings_usd is not None and v.on_demand:
            v.savings_pct = v.savings_usd / v.on_demand * 100
        base_total = base.total if base is not None and base.has_cost else None
        if base_total is None or v.total is None:
            continue
        if v.delta_usd is None:
            v.delta_usd = v.total - base_total
        if v.delta_pct is None and base_total:
            v.delta_pct = v.delta_usd / base_total * 100
    return variants, base


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


def _header(data: Mapping[str, Any], variants: Sequence[Variant], base: Variant | None) -> dict[str, Any]:
    horizon = _dict(data.get("horizon"))
    start, hours = _parse_time(horizon.get("start")), _num(horizon.get("hours"))
    if start is not None and hours is not None:
        end = start + timedelta(hours=hours)
        span = (
            f"{start:%Y-%m-%d} to {end:%Y-%m-%d} UTC ({fmt_num(hours)} hours, {fmt_num(hours / 24, 1)} days)"
        )
    elif start is not None:
        span = f"from {start:%Y-%m-%d} UTC (length unknown)"
    elif hours is not None:
        span = f"{fmt_num(hours)} hours (start unknown)"
    else:
        span = DASH
    created = _parse_time(data.get("created"))
    failed = sum(v.failed for v in variants)
    count = f"{len(variants)}" + (f" ({failed} failed)" if failed else "")
    items = [
        ("scenario", _text(data.get("scenario"))),
        ("horizon", span),
        ("variants", count),
        ("base variant", base.name if base is not None else _missing_base(data)),
        ("created", f"{created:%Y-%m-%d %H:%M} UTC" if created is not None else _text(data.get("created"))),
    ]
    return {"scenario": _text(data.get("scenario")), "facts": items, "schema": _text(data.get("schema"))}


def _missing_base(data: Mapping[str, Any]) -> str:
    name = data.get("base")
    return DASH if name in (None, "") else f"{name} (not among the variants, so no comparison with it)"


def _cost_phrase(v: Variant) -> str:
    """``$D (P%) less/more than the base``, or what is unknown about it."""
    if v.delta_usd is None:
        return "no comparison with the base"
    if _round_half_up(v.delta_usd) == 0:
        return "the same as the base"
    word = "less" if v.delta_usd < 0 else "more"
    pct = f" ({fmt_pct(abs(v.delta_pct) / 100)})" if v.delta_pct is not None else ""
    return f"{fmt_usd(abs(v.delta_usd))}{pct} {word} than the base"


def _headline(variants: Sequence[Variant], base: Variant | None) -> dict[str, Any]:
    """One sentence naming the cheapest variant and the biggest change vs the base, plus caveats."""
    costed = [v for v in variants if v.has_cost]
    notes: list[str] = []
    if not variants:
        return {"sentence": "whatif.json holds no variants.", "notes": notes}
    if not costed:
        return {"sentence": "No variant produced a plan, so there is no cost to compare.", "notes": notes}
    cheapest = min(costed, key=lambda v: v.total or 0.0)
    if cheapest.is_base:
        first = f"The base ({cheapest.name}) is the cheapest variant at {fmt_usd(cheapest.total)}"
    else:
        first = f"{cheapest.name} is the cheapest variant at {fmt_usd(cheapest.total)}"
        if base is not None and base.has_cost:
            first += f", {_cost_phrase(cheapest)} ({base.name})"
    moves = [v for v in costed if not v.is_base and v.delta_usd is not None]
    if moves:
        biggest = max(moves, key=lambda v: abs(v.delta_usd or 0.0))
        if biggest is cheapest:
            second = "; it is also the biggest change vs the base"
        else:
            second = f"; the biggest change vs the base is {biggest.name}, {_cost_phrase(biggest)}"
    elif base is None or not base.has_cost:
        second = "; there is no base cost to compare the variants with"
    else:
        second = "; no other variant has a cost to compare with the base"
    if cheapest.unserved:
        notes.append(
            f"{cheapest.name} leaves {len(cheapest.unserved)} demand item(s) unserved (see Unserved demand): "
            f"part of its saving may come from serving less."
        )
    failed = [v.name for v in variants if v.failed]
    if failed:
        notes.append(f"Failed, so not compared: {', '.join(failed)} (errors in the comparison table).")
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


def _mix(v: Variant) -> list[str]:
    """``["3y 42%", "on-demand 26%", ...]`` in tier order, tiers with no cost left out."""
    parts = sorted(((k, s) for k, s in v.tier_mix.items() if s > 0), key=lambda kv: _tier_key(kv[0]))
    return [f"{TIER_SHORT.get(k, k)} {_share(s)}" for k, s in parts]


def _comparison(variants: Sequence[Variant]) -> dict[str, Any]:
    rows: list[ComparisonRow] = []
    for v in variants:
        changes = DASH if v.changes is None else (", ".join(v.changes) or "none")
        lead = [v.name + (" (base)" if v.is_base else ""), v.status, changes]
        trail = [_text(v.plan_dir)]
        if v.failed:
            error = f"failed: {v.error}" if v.error else "failed (no error message in whatif.json)"
            rows.append(ComparisonRow(lead, [], [], error, trail, v.is_base))
            continue
        savings = DASH
        if v.savings_pct is not None:
            savings = fmt_pct(v.savings_pct / 100)
            if v.savings_usd is not None:
                savings += f" ({fmt_usd(v.savings_usd)})"
        elif v.savings_usd is not None:
            savings = fmt_usd(v.savings_usd)
        c = v.commitments
        commitments = (
            DASH
            if all(x is None for x in c.values())
            else " / ".join(fmt_num(c[t], 1) for t in ("1y", "3y", "owned"))
        )
        unserved = DASH if v.unserved is None else fmt_num(len(v.unserved))
        numbers = [
            fmt_usd(v.total),
            fmt_signed_usd(v.delta_usd),
            fmt_signed_pct(v.delta_pct),
            savings,
            " · ".join(_mix(v)) or DASH,
            commitments,
            fmt_num(v.committed_gpus),
            unserved,
            fmt_pct(v.gap, 2),
            fmt_num(v.seconds, 1),
        ]
        classes = ["num"] * len(numbers)
        classes[MIX_COLUMN] = "mix"
        if v.unserved:
            classes[UNSERVED_COLUMN] = "num bad"
        rows.append(ComparisonRow(lead, numbers, classes, None, trail, v.is_base, _mix(v)))

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
    return [
        (v.name, table) for v in variants if v.unserved and (table := _unserved({"unserved": v.unserved}))
    ]


def _tiers(variants: Sequence[Variant]) -> list[str]:
    names = {t for v in variants for t in (*v.by_tier, *v.monthly)}
    return sorted(names, key=_tier_key)


def _by_tier_table(variants: Sequence[Variant]) -> dict[str, Any]:
    """Whole-horizon cost per tier and variant; each row adds up to the variant's total shown."""
    costed = [v for v in variants if v.has_cost]
    tiers = sorted({t for v in costed for t in v.by_tier}, key=_tier_key)
    table = Table(["variant", *tiers, "total"], [False, *[True] * (len(tiers) + 1)])
    notes: list[str] = []
    for v in costed:
        values = [v.by_tier.get(t) for t in tiers]
        known = [x for x in values if x is not None]
        parts_sum = sum(known)
        total = v.total if v.total is not None else parts_sum
        if known and abs(parts_sum - total) > RECONCILE_TOLERANCE_USD:
            notes.append(
                f"{v.name}: the tiers sum to {fmt_usd(parts_sum)}, but its total is {fmt_usd(total)} "
                f"(a difference of {fmt_signed_usd(parts_sum - total)})."
            )
            total = parts_sum
        whole = iter(_apportion(known, _round_half_up(total)))
        cells = [DASH if x is None else fmt_usd(next(whole)) for x in values]
        table.rows.append([v.name, *cells, fmt_usd(total)])
    return {"table": table if tiers else None, "notes": notes}


def _ranking(variants: Sequence[Variant]) -> Table:
    """Variants from cheapest to dearest: what the savings chart shows, as numbers."""
    table = Table(
        ["variant", "total cost", "vs base", "vs base %", "all on-demand", "savings vs all on-demand"],
        [False, True, True, True, True, True],
    )
    for v in sorted((v for v in variants if v.has_cost), key=lambda v: v.total or 0.0):
        table.rows.append(
            [
                v.name + (" (base)" if v.is_base else ""),
                fmt_usd(v.total),
                fmt_signed_usd(v.delta_usd),
                fmt_signed_pct(v.delta_pct),
                fmt_usd(v.on_demand),
                fmt_pct(v.savings_pct / 100) if v.savings_pct is not None else DASH,
            ]
        )
    return table


def _month_end_crossing(v: Variant, base: Variant) -> tuple[str, int | None]:
    """How ``v``'s cumulative cost compares with the base's over the months, and the break-even month.

    Break-even is the first month end from which ``v`` stays at or below the base until the horizon
    ends (a colocation variant pays up front and catches up later); None when it never does.
    """
    n = min(len(v.cumulative), len(base.cumulative))
    pairs = [
        (k, a - b)
        for k in range(n)
        if (a := v.cumulative[k]) is not None and (b := base.cumulative[k]) is not None
    ]
    if not pairs:
        return f"{v.name}: no cumulative costs to compare with the base.", None
    diffs = [d for _, d in pairs]
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
        first_above = pairs[last_below + 1][0]
        return (
            f"{v.name} is cheaper than the base at first, but its cumulative cost passes the base's by the "
            f"end of {v.months[first_above]} and stays above it.",
            None,
        )
    k = pairs[last_above + 1][0]
    return (
        f"{v.name} breaks even with the base by the end of {v.months[k]}: from then on its cumulative cost "
        f"is at or below the base's (it ends {fmt_usd(-diffs[-1])} below).",
        k,
    )


def _cumulative(variants: Sequence[Variant], base: Variant | None) -> dict[str, Any]:
    shown = [v for v in variants if not v.failed and any(x is not None for x in v.cumulative)]
    months = max((v.months for v in shown), key=len, default=[])
    table = Table(["month end", *[v.name for v in shown]], [False, *[True] * len(shown)])
    for k, month in enumerate(months):
        table.rows.append(
            [month, *[fmt_usd(v.cumulative[k]) if k < len(v.cumulative) else DASH for v in shown]]
        )
    sentences: list[str] = []
    crossings: dict[str, int] = {}
    if base is not None and base in shown:
        for v in shown:
            if v is base:
                continue
            sentence, k = _month_end_crossing(v, base)
            sentences.append(sentence)
            if k is not None:
                crossings[v.name] = k
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
_CONFIG = {"displaylogo": False, "responsive": True}


def _no_data(fig: Any, message: str) -> None:
    fig.add_annotation(
        text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5, font={"size": 14}
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)


def _variant_color(v: Variant, k: int) -> str:
    return BASE_LINE_COLOR if v.is_base else VARIANT_COLORS[k % len(VARIANT_COLORS)]


def _chart_tiers(variants: Sequence[Variant]) -> Any:
    """(1) Stacked monthly cost by tier, one subplot per variant, all on one y axis scale."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    shown = [v for v in variants if not v.failed and v.monthly and v.months]
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
        subplot_titles=[v.name + (" (base)" if v.is_base else "") for v in shown],
        horizontal_spacing=0.03,
        vertical_spacing=0.3 / rows if rows > 1 else 0.1,
    )
    # Tiers outermost: trace order is stacking order (owned at the bottom) and legend order.
    in_legend: set[str] = set()
    for tier in _tiers(shown):
        for i, v in enumerate(shown):
            values = v.monthly.get(tier, [])
            if not any(values):
                continue
            fig.add_trace(
                go.Bar(
                    x=v.months,
                    y=values,
                    name=tier,
                    legendgroup=tier,
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


def _chart_savings(variants: Sequence[Variant]) -> Any:
    """(2) Cost vs base (negative = cheaper) and savings vs all on-demand, one bar per variant."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    if not variants:
        fig = go.Figure()
        _no_data(fig, "whatif.json holds no variants.")
        fig.update_layout(title="Savings per variant", height=300, **_LAYOUT)
        return fig
    names = [v.name + (" (base)" if v.is_base else "") for v in variants]
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.08,
        subplot_titles=["cost vs base (USD; negative = cheaper)", "savings vs all on-demand (%)"],
    )
    delta = [v.delta_usd or 0.0 for v in variants]
    delta_text = [
        "failed"
        if v.failed
        else DASH
        if v.delta_usd is None
        else f"{fmt_signed_usd(v.delta_usd)} ({fmt_signed_pct(v.delta_pct)})"
        for v in variants
    ]
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
    savings = [v.savings_pct or 0.0 for v in variants]
    savings_text = [
        "failed"
        if v.failed
        else DASH
        if v.savings_pct is None
        else fmt_pct(v.savings_pct / 100)
        + (f" ({fmt_usd(v.savings_usd)})" if v.savings_usd is not None else "")
        for v in variants
    ]
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


def _chart_cumulative(variants: Sequence[Variant], cumulative: Mapping[str, Any]) -> Any:
    """(3) Cumulative cost by month end, one line per variant: where a curve crosses the base's."""
    import plotly.graph_objects as go

    fig = go.Figure()
    shown: list[Variant] = cumulative["shown"]
    if not shown:
        _no_data(fig, "No variant has cumulative costs in whatif.json.")
        fig.update_layout(title="Cumulative cost by month", height=300, **_LAYOUT)
        return fig
    for k, v in enumerate(shown):
        color = _variant_color(v, k)
        fig.add_trace(
            go.Scatter(
                x=v.months,
                y=v.cumulative,
                name=v.name + (" (base)" if v.is_base else ""),
                mode="lines+markers",
                line={"color": color, "width": 3.5 if v.is_base else 2},
                marker={"size": 5},
                customdata=[fmt_usd(x) for x in v.cumulative],
                hovertemplate="%{customdata}",
            )
        )
        month = cumulative["crossings"].get(v.name)
        if month is not None:
            fig.add_trace(
                go.Scatter(
                    x=[v.months[month]],
                    y=[v.cumulative[month]],
                    name=f"{v.name} breaks even with the base ({v.months[month]})",
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


def _charts(variants: Sequence[Variant], cumulative: Mapping[str, Any]) -> list[Markup]:
    """Three chart divs; plotly.js itself is NOT included here (the page embeds it once)."""
    figures = (
        ("tiers", _chart_tiers(variants)),
        ("savings", _chart_savings(variants)),
        ("cumulative", _chart_cumulative(variants, cumulative)),
    )
    return [
        Markup(fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"chart-{name}", config=_CONFIG))
        for name, fig in figures
    ]


# --------------------------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------------------------

_INTRO = {
    "comparison": (
        "One row per variant: what it changes from the base scenario, what its plan costs over the horizon, "
        "how that compares with the base and with buying everything on-demand, and what it commits to."
    ),
    "legend": (
        "Tier mix is each tier's share of the variant's cost (3y / 1y = 3-year / 1-year reserved). "
        "Commitments are the nodes reserved for 1 year, for 3 years, and owned. Solver gap is how much "
        "more the plan may cost than the best possible plan (0.00% = proven optimal). "
        "Money is in whole dollars."
    ),
    "unserved": (
        "The demand each variant's plan leaves unserved, and why: a variant that serves less can look "
        "cheaper than it is."
    ),
    "tiers": (
        "What each variant pays per tier: month by month in the chart, over the whole horizon in the table."
    ),
    "savings": (
        "How much each variant saves or adds against the base (negative = cheaper) and against buying "
        "everything on-demand, cheapest variant first in the table."
    ),
    "cumulative": (
        "The cost paid so far at each month end, per variant: a variant that commits money early (owned "
        "or reserved nodes) starts above the base and breaks even where its curve crosses the base's."
    ),
}

_MD_TEMPLATE = r"""
# gpuplan what-if: {{ h.scenario }}

{% for k, v in h.facts %}- {{ k }}: {{ v }}
{% endfor %}

Charts are in whatif.html.

## Headline

**{{ head.sentence }}**

{% for n in head.notes %}- {{ n }}
{% endfor %}

## Comparison

{{ intro.comparison }}

{{ cmp.table | mdtable }}

{{ intro.legend }}

## Unserved demand

{{ intro.unserved }}

{% for name, t in unserved %}
### {{ name }}

{{ t | mdtable }}

{% else %}
Every variant with a plan serves all its demand.
{% endfor %}

## Cost by tier

{{ intro.tiers }}

{% if tiers.table %}
{{ tiers.table | mdtable }}
{% else %}
No variant has a cost by tier in whatif.json.
{% endif %}

{% for n in tiers.notes %}> **Warning:** {{ n }}
{% endfor %}

## Savings

{{ intro.savings }}

{{ ranking | mdtable }}

## Cumulative cost

{{ intro.cumulative }}

{% if cum.table %}
{{ cum.table | mdtable }}
{% else %}
No variant has cumulative costs in whatif.json.
{% endif %}

{% for s in cum.sentences %}- {{ s }}
{% endfor %}

---
generated by gpuplan ({{ h.schema }})
"""

_HTML_TEMPLATE = (
    "<!DOCTYPE html>\n"
    + HTML_TABLE_MACROS
    + r"""<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gpuplan what-if: {{ h.scenario }}</title>
<style>
"""
    + BASE_CSS
    + r"""body { max-width: 1400px; }
.scroll { overflow-x: auto; }
td.mix { font-size: 13px; min-width: 170px; }
td.name, .nowrap { white-space: nowrap; }
table.comparison { font-size: 13px; }
table.comparison th, table.comparison td { padding: 5px 7px; }
table.comparison th { white-space: normal; vertical-align: bottom; }
td.bad { color: #c00000; font-weight: 700; }
td.error { color: #c00000; }
tr.base td { background: #f7f9fb; }
.headline { font-size: 22px; font-weight: 700; margin: 8px 0 12px; }
.warn { background: #fff4ce; border-left: 4px solid #e0a800; padding: 8px 12px; margin: 8px 0; }
.chart { border: 1px solid #e3e8ee; border-radius: 6px; padding: 4px; margin: 12px 0; }
details { margin: 8px 0; } summary { cursor: pointer; color: #1f4e79; font-weight: 600; }
</style>
<script type="text/javascript">window.PlotlyConfig = {MathJaxConfig: 'local'};</script>
<script type="text/javascript">{{ plotlyjs }}</script>
</head>
<body>
<h1>gpuplan what-if: {{ h.scenario }}</h1>
<table class="kv"><tbody>
{% for k, v in h.facts %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>
{% endfor %}</tbody></table>
<nav><a href="#comparison">Comparison</a><a href="#unserved">Unserved</a><a href="#tiers">Cost by tier</a>
<a href="#savings">Savings</a><a href="#cumulative">Cumulative cost</a></nav>

<h2 id="headline">Headline</h2>
<p class="headline">{{ head.sentence }}</p>
{% if head.notes %}<ul>{% for n in head.notes %}<li>{{ n }}</li>{% endfor %}</ul>{% endif %}

<h2 id="comparison">Comparison</h2>
<p>{{ intro.comparison }}</p>
<div class="scroll"><table class="comparison">
<thead><tr>{% for hd in cmp.table.headers %}<th{{ num(cmp.table, loop.index0) }}>{{ hd }}</th>{% endfor %}
</tr></thead>
<tbody>
{% for r in cmp.rows %}<tr{% if r.is_base %} class="base"{% endif %}>
<td class="name"><strong>{{ r.lead[0] }}</strong></td>{% for c in r.lead[1:] %}<td>{{ c }}</td>{% endfor %}
{% if r.error is not none %}<td class="error" colspan="{{ cmp.span }}">{{ r.error }}</td>
{% else %}{% for c in r.numbers %}<td class="{{ r.classes[loop.index0] }}">
{%- if loop.index0 == cmp.mix_column and r.mix %}{% for part in r.mix %}<span class="nowrap">{{ part }}</span>
{%- if not loop.last %} · {% endif %}{% endfor %}{% else %}{{ c }}{% endif %}</td>{% endfor %}
{% endif %}
{% for c in r.trail %}<td class="muted nowrap">{{ c }}</td>{% endfor %}
</tr>
{% endfor %}</tbody></table></div>
<p class="muted">{{ intro.legend }}</p>

<h2 id="unserved">Unserved demand</h2>
<p>{{ intro.unserved }}</p>
{% for name, t in unserved %}<h3>{{ name }}</h3>
{{ table(t) }}
{% else %}<p>Every variant with a plan serves all its demand.</p>
{% endfor %}

<h2 id="tiers">Cost by tier</h2>
<p>{{ intro.tiers }}</p>
<div class="chart">{{ charts[0] }}</div>
{% if tiers.table %}<div class="scroll">{{ table(tiers.table) }}</div>
{% else %}<p>No variant has a cost by tier in whatif.json.</p>{% endif %}
{% for n in tiers.notes %}<div class="warn">Warning: {{ n }}</div>
{% endfor %}

<h2 id="savings">Savings</h2>
<p>{{ intro.savings }}</p>
<div class="chart">{{ charts[1] }}</div>
{{ table(ranking) }}

<h2 id="cumulative">Cumulative cost</h2>
<p>{{ intro.cumulative }}</p>
<div class="chart">{{ charts[2] }}</div>
{% if cum.sentences %}<ul>{% for s in cum.sentences %}<li>{{ s }}</li>{% endfor %}</ul>{% endif %}
{% if cum.table %}<details><summary>Cumulative cost at each month end (table)</summary>
<div class="scroll">{{ table(cum.table) }}</div></details>
{% else %}<p>No variant has cumulative costs in whatif.json.</p>{% endif %}

<footer><p>generated by gpuplan ({{ h.schema }})</p></footer>
</body>
</html>
"""
)


# Markdown keeps every newline (no trim_blocks) so paragraphs, lists and tables stay separated;
# render_whatif_markdown then collapses runs of blank lines.
_MD = jinja_environment(autoescape=False, trim=False).from_string(_MD_TEMPLATE)
_HTML = jinja_environment(autoescape=True, trim=True).from_string(_HTML_TEMPLATE)


def _context(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[Variant]]:
    data = _dict(data)
    variants, base = _variants(data)
    ctx = {
        "h": _header(data, variants, base),
        "head": _headline(variants, base),
        "intro": _INTRO,
        "cmp": _comparison(variants),
        "unserved": _unserved_details(variants),
        "tiers": _by_tier_table(variants),
        "ranking": _ranking(variants),
        "cum": _cumulative(variants, base),
    }
    return ctx, variants


def render_whatif_markdown(data: dict) -> str:
    """The what-if comparison as Markdown: the same sections and tables as the html, no charts."""
    ctx, _ = _context(data)
    text = re.sub(r"\n{3,}", "\n\n", _MD.render(**ctx))
    return text.strip("\n") + "\n"


def render_whatif_html(data: dict) -> str:
    """The what-if comparison as ONE self-contained html page (plotly.js inline once, works offline)."""
    from plotly.offline import get_plotlyjs

    ctx, variants = _context(data)
    charts = _charts(variants, ctx["cum"])
    return _HTML.render(**ctx, charts=charts, plotlyjs=Markup(get_plotlyjs()))


def write_whatif_reports(directory: Path, data: dict) -> tuple[Path, Path]:
    """Write DIR/whatif.md and DIR/whatif.html from a whatif.json dict; returns ``(md, html)`` paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    md_path, html_path = directory / "whatif.md", directory / "whatif.html"
    md_path.write_text(render_whatif_markdown(data), encoding="utf-8")
    html_path.write_text(render_whatif_html(data), encoding="utf-8")
    return md_path, html_path
