"""`gpuplan futures`: what to buy now when demand may come as any of several futures (issue 41)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from models.errors import GpuplanError, InputError
from models.files import atomic_directory
from planner.cli.common import EXIT_SELF_CHECK, err, fail, out

if TYPE_CHECKING:  # imported where used: `gpuplan --help` loads neither
    from planner.planning.futures import FuturesResult
    from planner.verify.findings import Findings

__all__ = ["check_chosen", "futures", "report_broken", "write_futures"]


def check_chosen(result: FuturesResult, say: Callable[[str], None]) -> dict[str, Findings]:
    """``gpuplan verify`` on the chosen purchases' plan in each future: those whose plan breaks rules."""
    from planner.verify import verify

    say(f"checking the chosen purchases' plan in each of {len(result.chosen)} futures (gpuplan verify)")
    return {
        name: findings
        for name, plan in result.chosen.items()
        if not (findings := verify(result.chosen_inputs[name], plan)).ok
    }


def write_futures(directory: Path, result: FuturesResult) -> None:
    """futures.json, futures.md, futures.html, chosen/<future>/ and point/ into ``directory`` (a staging
    directory: the caller makes it appear whole)."""
    from planner.outputs.reports.futures import render_futures_html, render_futures_markdown

    document = result.document
    directory.mkdir(parents=True, exist_ok=True)
    document.write(directory / "futures.json")
    (directory / "futures.md").write_text(render_futures_markdown(document), encoding="utf-8")
    (directory / "futures.html").write_text(render_futures_html(document), encoding="utf-8")
    for name, plan in result.chosen.items():
        target = directory / "chosen" / name
        target.mkdir(parents=True)
        plan.write(target)
    (directory / "point").mkdir()
    result.point.write(directory / "point")


def report_broken(broken: dict[str, Findings], output: Path) -> None:
    """As gpuplan plan's self-check: a plan the planner wrote breaks a rule (a planner bug); exit 5."""
    for name, findings in broken.items():
        err.print(f"future {name}: the chosen purchases' plan breaks rules:", highlight=False)
        for kind in findings.summary():
            err.print(f"  {kind.kind}: {kind.count} ({kind.description})", highlight=False)
    err.print(f"a gpuplan bug: please report it with {output}/ and the inputs", highlight=False)
    raise typer.Exit(EXIT_SELF_CHECK)


def futures(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML: the point forecast")],
    futures_file: Annotated[
        Path,
        typer.Argument(
            help="YAML: futures: [{name, weight, vary: [demand=x0.8, ...]}, ...] and optionally "
            "risk: {cvar: 0.9, weight: 0.5, cap: {quantile: 0.9, usd: 2.5e6}, "
            "committed_share: {min: 0.6, probability: 0.9}}",
        ),
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="directory to write")] = Path("futures"),
    time_limit: Annotated[float, typer.Option(help="solver time limit per plan, seconds")] = 30.0,
    workers: Annotated[int | None, typer.Option(help="plans solved at once (default: one per core)")] = None,
    cluster: Annotated[
        str | None, typer.Option(help="solve on Dask: 'local' or a scheduler address (as gpuplan whatif)")
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            help="a pricing overlay YAML (docs/prices.md), applied to the forecast and every future"
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress messages")] = False,
) -> None:
    """Choose what to buy now (commitments, savings plans) for the least expected cost over demand futures.

    Each future is planned on its own (what a perfect forecast would buy; own_plans: quick in the futures
    file, or auto past 10 futures, makes those plans with whole replicas by rounding alone and at most 10 s
    of search, about a quarter of the time); one MILP over every future's fleet (the futures master)
    proposes the purchase of least expected cost; then it and the other
    candidates (the point forecast's, each future's, their weighted quantiles, nothing, the peers') are
    priced on every future: each future's fleet billed with them (second_stage: fleet, the default, in
    seconds), or the future re-planned holding them (second_stage: replanned in the futures file, one
    plan per candidate and future). Writes DIR/futures.json, DIR/futures.md,
    DIR/futures.html, DIR/chosen/<future>/ (the chosen purchases' plan in each future, checked by gpuplan
    verify) and DIR/point/ (the point forecast's own plan). docs/futures.md has the method.
    """
    from models.futures import load_futures
    from planner.outputs.reports.futures import peer_line, purchase_text, risk_lines
    from planner.planning.futures import plan_futures
    from planner.planning.optimize import SolveSettings

    def say(message: str) -> None:
        if not quiet:
            err.print(f"· {message}", highlight=False, markup=False)

    try:
        if time_limit <= 0:
            raise InputError(None, "--time-limit", f"must be positive, got {time_limit}")
        spec = load_futures(futures_file)
        settings = SolveSettings(time_limit=time_limit)
        result = plan_futures(
            scenario, spec, settings, workers, cluster, say, source=futures_file, prices=prices
        )
        document = result.document
        broken = check_chosen(result, say)
        with atomic_directory(output) as staging:
            write_futures(staging, result)
    except GpuplanError as error:
        raise fail(error) from None
    if broken:
        report_broken(broken, output)
    s = document.summary
    best = next(c for c in document.candidates if c.name == document.chosen)
    out.print(f"buy: {document.chosen} ({best.origin})", highlight=False)
    for purchase in best.purchases:
        out.print(f"  {purchase_text(purchase)}", highlight=False)
    if not best.purchases:
        out.print("  nothing beyond what is held", highlight=False)
    out.print(
        f"expected ${s.expected_usd:,.0f}; P10 ${s.p10_usd:,.0f}, P50 ${s.p50_usd:,.0f}, "
        f"P90 ${s.p90_usd:,.0f}; worst {s.worst_future} ${s.worst_usd:,.0f}",
        highlight=False,
    )
    out.print(
        f"value of the stochastic solution ${s.vss_usd:,.0f} (the point forecast's purchases: "
        f"${s.point_forecast_expected_usd:,.0f} expected); value of a perfect forecast ${s.evpi_usd:,.0f}",
        highlight=False,
    )
    out.print(peer_line(document).removeprefix("- "), highlight=False)
    for line in risk_lines(document):
        out.print(line, highlight=False)
    if s.tail_until is not None:
        out.print(
            f"costs run to {s.tail_until.date().isoformat()} (the longest term bought; the last month's "
            f"demand carried): ${s.expected_horizon_usd:,.0f} in the horizon, "
            f"${s.expected_tail_usd:,.0f} after it",
            highlight=False,
        )
    out.print(f"each future's plan with these purchases passes gpuplan verify ({len(result.chosen)})")
    out.print(
        f"in the horizon: ${s.expected_horizon_usd:,.0f}, certified bound ${s.bound_usd:,.0f} (within "
        f"{s.gap:.2%}); wrote {output}/futures.md",
        highlight=False,
    )
    if s.bound_with_tail_usd is not None and s.gap_with_tail is not None and s.tail_until is not None:
        out.print(
            f"with the tail: ${s.expected_usd:,.0f}, certified bound ${s.bound_with_tail_usd:,.0f} (within "
            f"{s.gap_with_tail:.2%})",
            highlight=False,
        )
