"""``futures.md`` and ``futures.html``: a plan over demand futures as a buyer reads it (issue 41, point 4).

The first screen answers "what do we buy, and what does it cost if the forecast is wrong": the chosen
purchases, the expected cost with its P10/P50/P90 and worst future, what planning for uncertainty saves
against buying for the point forecast (VSS), what the best peer's purchases cost on the same futures, what a
perfect forecast would be worth (EVPI), the certified bound, and the risk constraints the choice met (a cap
on a quantile of the cost, the share of latency-critical demand on committed capacity) with what they cost.
Then every future, every candidate priced on every future, how each purchase is used and, with
latency-critical services, each candidate's share of their node-hours on committed capacity. The html
page adds one chart: the cost distribution over the futures of the chosen purchases, the point
forecast's and the best peer's (weighted step curves: the share of the futures' weight at or below each
cost). Both pages come from one context (:func:`_context`).
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from models.futures import Candidate, FuturesDocument, Purchase, quantile_name
from models.plan import FuturesOutcome
from planner.outputs.reports.kit import (
    Table,
    chart_div,
    fmt_num,
    fmt_pct,
    fmt_usd,
    jinja_environment,
    md_table,
)

__all__ = [
    "distribution_chart",
    "distribution_curves",
    "outcome_lines",
    "peer_line",
    "purchase_text",
    "render_futures_html",
    "render_futures_markdown",
    "risk_lines",
    "tail_sentence",
]

#: The heading of the committed-share table (both pages).
_SHARES = "Latency-critical node-hours on committed capacity, per candidate and future"

_HTML = jinja_environment(autoescape=True, trim=True).get_template("futures.html.j2")


def purchase_text(p: Purchase) -> str:
    """``10 x aws:us-east-1:p5.48xlarge, 1y from 2027-01-04`` or ``$12.345/h compute ... from ...``."""
    when = f"{p.term} from {p.start.date().isoformat()}"
    if p.nodes is not None:
        return f"{p.nodes} x {p.offering}, {when}"
    return f"${p.usd_per_hour:,.3f}/h {p.kind} savings plan ({p.offering}), {when}"


def tail_sentence(doc: FuturesDocument) -> str:
    """What the costs cover: the horizon, and the tail after it when one is counted."""
    s = doc.summary
    base = "Costs are each plan's objective over the horizon (unserved demand at its penalty)"
    if s.tail_until is None:
        return base + "; what is owed after the horizon is in the futures table, not in these figures."
    return (
        f"{base} plus the time after it to {s.tail_until.date().isoformat()} (the end of the longest term "
        f"bought), each future's last month of demand carried forward: {fmt_usd(s.expected_horizon_usd)} in "
        f"the horizon and {fmt_usd(s.expected_tail_usd)} after it, expected."
    )


def peer_line(doc: FuturesDocument) -> str:
    """The best committing peer's purchases priced on the same futures, against the chosen ones."""
    s = doc.summary
    if s.best_peer is None or s.best_peer_expected_usd is None:
        return "- no committing peer to price on the futures"
    saved = s.best_peer_expected_usd - s.expected_usd
    if f"peer: {s.best_peer}" in _chosen(doc).also:
        return (
            f"- the best peer on these futures, {s.best_peer}, buys what this plan buys "
            f"({fmt_usd(s.best_peer_expected_usd)} expected)"
        )
    return (
        f"- the best peer on these futures, {s.best_peer}: {fmt_usd(s.best_peer_expected_usd)} expected "
        f"({fmt_usd(saved)} more than this plan)"
    )


def risk_lines(doc: FuturesDocument) -> list[str]:
    """The risk constraints (risk.cap, risk.committed_share) as the chosen purchases meet them, and what
    meeting them costs against the candidate ranked first without them."""
    risk, chosen, s = doc.risk, _chosen(doc), doc.summary
    lines = []
    if risk.cap is not None and chosen.cap_quantile_usd is not None:
        name = quantile_name(risk.cap.quantile)
        lines.append(
            f"{name} ${chosen.cap_quantile_usd:,.0f}, within the cap of ${risk.cap.usd:,.0f} (risk.cap)"
        )
    share = risk.committed_share
    if share is not None and chosen.committed_share_weight is not None:
        lines.append(
            f"at least {share.min:.0%} of the latency-critical node-hours on committed capacity in "
            f"{chosen.committed_share_weight:.0%} of the futures' weight (asked: {share.probability:.0%}; "
            "risk.committed_share)"
        )
    if s.unconstrained is not None and s.unconstrained_expected_usd is not None:
        lines.append(
            f"without these constraints: {s.unconstrained} at ${s.unconstrained_expected_usd:,.0f} expected "
            f"(they cost ${s.expected_usd - s.unconstrained_expected_usd:,.0f} expected)"
        )
    return lines


def _method_line(doc: FuturesDocument) -> str:
    """How the candidates were priced, and what the futures master proposed."""
    if doc.second_stage == "fleet":
        line = (
            "each candidate priced on each future's fleet (its own plan's nodes, billed with the candidate's "
            "commitments: a feasible second stage, not re-optimized)"
        )
    else:
        line = "each candidate priced by planning each future again with its purchases held"
    if doc.own_plans == "quick":
        line += "; the futures' own plans quick (whole replicas by rounding alone, without their refinement)"
    if doc.master is not None:
        m = doc.master
        line += (
            f"; the futures master (one MILP over every future's fleet, {m.columns:,} columns, "
            f'{m.seconds:.1f} s) proposed "{m.candidate}" at {fmt_usd(m.score_usd)}'
        )
    return line


def _bound_with_tail(doc: FuturesDocument) -> list[str]:
    """The certified bound of the whole expected cost, the tail counted, where it was computed."""
    s = doc.summary
    if s.bound_with_tail_usd is None or s.gap_with_tail is None or s.tail_until is None:
        return []
    return [
        f"with the tail to {s.tail_until.date().isoformat()}: certified bound "
        f"{fmt_usd(s.bound_with_tail_usd)} (the horizon's, plus every carried node-hour at the least rate "
        f"its offering is sold at); this plan's {fmt_usd(s.expected_usd)} is within "
        f"{fmt_pct(s.gap_with_tail, 2)} of it"
    ]


def _chosen(doc: FuturesDocument) -> Candidate:
    return next(c for c in doc.candidates if c.name == doc.chosen)


def _context(doc: FuturesDocument) -> dict[str, Any]:
    s = doc.summary
    chosen = _chosen(doc)
    risk = (
        "the expected cost"
        if doc.risk.weight == 0
        else f"{1 - doc.risk.weight:.0%} expected cost + {doc.risk.weight:.0%} CVaR at {doc.risk.cvar:.0%}"
    )
    facts = [
        f"expected cost {fmt_usd(s.expected_usd)}; P10 {fmt_usd(s.p10_usd)}, P50 {fmt_usd(s.p50_usd)}, "
        f"P90 {fmt_usd(s.p90_usd)}; worst future {s.worst_future} at {fmt_usd(s.worst_usd)}",
        f"value of the stochastic solution: {fmt_usd(s.vss_usd)} (the point forecast's purchases cost "
        f"{fmt_usd(s.point_forecast_expected_usd)} on the same futures)",
        peer_line(doc).removeprefix("- "),
        f"expected value of perfect information: {fmt_usd(s.evpi_usd)} (each future's own plan: "
        f"{fmt_usd(s.wait_and_see_usd)} expected)",
        f"certified bound on the best expected cost in the horizon: {fmt_usd(s.bound_usd)}; this plan's "
        f"{fmt_usd(s.expected_horizon_usd)} there is within {fmt_pct(s.gap, 2)} of it (the gap holds the "
        "value of perfect information, which no purchase made now can capture, and what the purchases spend "
        "in the horizon to save after it)",
        *_bound_with_tail(doc),
        *risk_lines(doc),
        _method_line(doc),
    ]
    futures = Table(
        ["future", "weight", "changes", "cost", "in the horizon", "after it", "owed after", "unserved",
         "own plan", "own bound (horizon)"],
        [False, True, False, True, True, True, True, True, True, True],
    )  # fmt: skip
    for f in doc.futures:
        changes = ", ".join([*f.vary, *(f"{k} from CSV" for k in sorted(f.series))]) or "as written"
        futures.rows.append(
            [f.name, fmt_pct(doc.weights[f.name], 1), changes,
             fmt_usd(chosen.cost_usd[f.name]), fmt_usd(chosen.horizon_usd[f.name]),
             fmt_usd(chosen.tail_usd[f.name]), fmt_usd(chosen.owed_after_usd[f.name]),
             str(chosen.unserved[f.name]), fmt_usd(doc.wait_and_see[f.name]), fmt_usd(doc.bounds[f.name])]
        )  # fmt: skip
    names = [f.name for f in doc.futures]
    cap, share = doc.risk.cap, doc.risk.committed_share
    extra = [quantile_name(cap.quantile) + " (capped)"] if cap is not None else []
    if share is not None:
        extra += [f"futures with {share.min:.0%} committed (weight)"]
    extra += ["meets the risk constraints"] if cap is not None or share is not None else []
    candidates = Table(
        ["candidate", *names, "expected", "P10", "P50", "P90", f"CVaR {doc.risk.cvar:.0%}", "score", *extra],
        [False] + [True] * (len(names) + 6 + len(extra) - 1) + ([False] if extra else [True]),
    )
    for c in sorted(doc.candidates, key=lambda c: c.score_usd):
        mark = " (chosen)" if c.name == doc.chosen else ""
        same = f" (= {', '.join(c.also)})" if c.also else ""
        more = [fmt_usd(c.cap_quantile_usd)] if cap is not None else []
        more += [fmt_pct(c.committed_share_weight, 0)] if share is not None else []
        more += ["; ".join(c.why_not) or "yes"] if extra else []
        candidates.rows.append(
            [c.name + mark + same, *(fmt_usd(c.cost_usd[n]) for n in names),
             *map(fmt_usd, (c.expected_usd, c.p10_usd, c.p50_usd, c.p90_usd, c.cvar_usd, c.score_usd)),
             *more]
        )  # fmt: skip
    shares = None
    if any(c.committed_share for c in doc.candidates):
        shares = Table(["candidate", *names], [False] + [True] * len(names))
        for c in sorted(doc.candidates, key=lambda c: c.score_usd):
            shares.rows.append([c.name, *(fmt_pct(c.committed_share.get(n), 0) for n in names)])
    use = None
    if doc.commitment_use:
        use = Table(["purchase", "break-even use", "futures above it (weight)", "idle in the P10 future"],
                    [False, True, True, True])  # fmt: skip
        for u in doc.commitment_use:
            use.rows.append(
                [purchase_text(u.purchase), fmt_pct(u.break_even_fraction, 0),
                 fmt_pct(u.share_above_break_even, 0), fmt_pct(u.idle_fraction_p10, 0)]
            )  # fmt: skip
    return {
        "title": f"{doc.scenario}: a plan over {len(doc.futures)} demand futures",
        "chosen": doc.chosen,
        "origin": chosen.origin,
        "risk": risk,
        "purchases": [purchase_text(p) for p in chosen.purchases] or ["nothing beyond what is held"],
        "facts": facts,
        "tail": tail_sentence(doc),
        "futures": futures,
        "candidates": candidates,
        "use": use,
        "shares": shares,
        "excluded": [f"{name}: {why}" for name, why in sorted(doc.excluded.items())],
    }


def render_futures_markdown(doc: FuturesDocument) -> str:
    ctx = _context(doc)
    lines = [
        f"# {ctx['title']}",
        "",
        f"**Buy: {ctx['chosen']}** ({ctx['origin']}), ranked by {ctx['risk']}.",
        "",
    ]
    lines += [f"- {p}" for p in ctx["purchases"]]
    lines += ["", *(f"- {fact}" for fact in ctx["facts"]), "", ctx["tail"], "", "## Futures", ""]
    lines += [md_table(ctx["futures"]), "", "## Candidates", "", md_table(ctx["candidates"]), ""]
    if ctx["excluded"]:
        lines += ["Not priced (no plan in a future):", "", *(f"- {line}" for line in ctx["excluded"]), ""]
    if ctx["use"] is not None:
        lines += ["## How each commitment is used", "", md_table(ctx["use"]), ""]
    if ctx["shares"] is not None:
        lines += [f"## {_SHARES}", "", md_table(ctx["shares"]), ""]
    return "\n".join(lines)


def distribution_curves(doc: FuturesDocument) -> dict[str, tuple[list[float], list[float]]]:
    """Per shown candidate (chosen, point forecast, best peer), the weighted cumulative distribution of its
    cost over the futures as step points: costs ascending, the share of the weight at or below each (from
    0 at the cheapest cost)."""
    shown: dict[str, Candidate] = {f"chosen ({doc.chosen})": _chosen(doc)}
    by_name = {c.name: c for c in doc.candidates}
    if "point forecast" in by_name and doc.chosen != "point forecast":
        shown["point forecast"] = by_name["point forecast"]
    peer = doc.summary.best_peer
    if peer is not None:
        holder = next(c for c in doc.candidates if f"peer: {peer}" in (c.name, *c.also))
        if holder.name != doc.chosen:
            shown[f"best peer ({peer})"] = holder
    curves = {}
    for label, candidate in shown.items():
        pairs = sorted((candidate.cost_usd[f.name], doc.weights[f.name]) for f in doc.futures)
        xs, ys, running = [pairs[0][0]], [0.0], 0.0  # from 0 at the cheapest future
        for cost, weight in pairs:
            running += weight
            xs.append(cost)
            ys.append(min(running, 1.0))
        curves[label] = (xs, ys)
    return curves


def outcome_lines(f: FuturesOutcome, lead: str = "These purchases were chosen") -> list[str]:
    """The buyer's figures over the futures (issue 41 point 4) as sentences, from plan.json's or
    whatif.json's ``futures``: for the plan report's first screen and the what-if page's futures view."""
    lines = [
        f"{lead} over {fmt_num(f.futures)} demand futures ({f.file}): expected cost "
        f"{fmt_usd(f.expected_usd)} ({fmt_usd(f.expected_horizon_usd)} in the horizon, "
        f"{fmt_usd(f.expected_tail_usd)} after it); P10 {fmt_usd(f.p10_usd)}, P50 {fmt_usd(f.p50_usd)}, "
        f"P90 {fmt_usd(f.p90_usd)}; worst future {f.worst_future} at {fmt_usd(f.worst_usd)}",
        f"Value of the stochastic solution: {fmt_usd(f.vss_usd)} (the point forecast's purchases cost "
        f"{fmt_usd(f.point_forecast_expected_usd)} expected on the same futures); expected value of perfect "
        f"information: {fmt_usd(f.evpi_usd)}",
    ]
    if f.best_peer is not None and f.best_peer_expected_usd is not None:
        peer = fmt_usd(f.best_peer_expected_usd)
        lines.append(f"The best peer on the futures, {f.best_peer}: {peer} expected")
    return lines


def distribution_chart(doc: FuturesDocument, div_id: str = "chart-futures") -> Markup:
    """The cost-distribution chart (:func:`distribution_curves`) as a plotly div (plotly.js apart): on
    futures.html and on the what-if page's futures view."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for label, (xs, ys) in distribution_curves(doc).items():
        fig.add_trace(go.Scatter(x=xs, y=ys, name=label, mode="lines+markers", line={"shape": "hv"}))
    fig.update_layout(
        title="Cost over the futures: share of the weight at or below each cost",
        xaxis={"title": "cost (USD)", "tickformat": "$,.0f"},
        yaxis={"title": "share of the futures' weight", "tickformat": ".0%", "range": [0, 1.05]},
        height=380,
        showlegend=True,
        legend={"orientation": "h", "y": -0.25},
    )
    return chart_div(fig, div_id)


def render_futures_html(doc: FuturesDocument) -> str:
    """The page: the first screen, the cost-distribution chart, the tables; plotly.js inline once."""
    from plotly.offline import get_plotlyjs

    return _HTML.render(
        **_context(doc),
        shares_title=_SHARES,
        chart=distribution_chart(doc),
        plotlyjs=Markup(get_plotlyjs()),
    )
