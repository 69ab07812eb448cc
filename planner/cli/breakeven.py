"""`gpuplan breakeven`: own GPU servers or rent them, through the planner."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from models.breakeven import BreakevenDocument
from models.catalog import MAX_NODES
from models.errors import GpuplanError, InputError
from models.files import atomic_directory
from models.wording import plural
from planner.cli.common import fail, out, progress_messages

__all__ = ["breakeven"]


def breakeven(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML with a colocation: section")],
    output: Annotated[Path, typer.Option("--output", "-o", help="directory to write")] = Path("breakeven"),
    nodes: Annotated[
        int | None, typer.Option(help="own this many nodes (default: as many as the optimal plan buys)")
    ] = None,
    time_limit: Annotated[float, typer.Option(help="solver time limit per plan, seconds")] = 120.0,
    method: Annotated[str, typer.Option(help="auto, staged or hourly (as gpuplan plan)")] = "auto",
    workers: Annotated[
        int, typer.Option(help="plans solved at once (default 1: one after the other, in this process)")
    ] = 1,
    cluster: Annotated[
        str | None,
        typer.Option(
            help="solve on Dask (the 'distributed' extra): 'local' (a local cluster of --workers) or a "
            "scheduler address (tcp://host:8786, whose workers have gpuplan installed)",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress messages")] = False,
) -> None:
    """Own GPU servers or rent them: cumulative cost curves, break-even month, NPV and a sensitivity.

    Plans the scenario cloud-only, with owned nodes as a tier (how many to buy), and with N owned nodes
    paid for; writes DIR/breakeven.json, DIR/breakeven.html, DIR/breakeven.md and the plans in DIR/plans/.
    """
    from models.inputs import load_inputs
    from planner.outputs.reports.breakeven import render_breakeven_html, render_breakeven_markdown
    from planner.planning.breakeven import analyse, planner_on
    from planner.planning.optimize import METHODS, SolveSettings
    from planner.planning.sweeps import open_engine

    say = progress_messages(quiet)
    try:
        if time_limit <= 0:
            raise InputError(None, "--time-limit", f"must be positive, got {time_limit}")
        if nodes is not None and not 1 <= nodes <= MAX_NODES:
            raise InputError(None, "--nodes", f"must be between 1 and {MAX_NODES:,}, got {nodes}")
        if method.lower() not in METHODS:
            raise InputError(None, "--method", f"unknown method {method!r}; choose {', '.join(METHODS)}")
        inputs = load_inputs(scenario)
        settings = SolveSettings(time_limit=time_limit, method=method.lower())
        with atomic_directory(output) as staging, open_engine(cluster, workers, 2) as engine:
            data, _plans = analyse(inputs, planner_on(engine, inputs, settings, staging, say), nodes, say)
            (staging / "breakeven.json").write_text(data.to_json())
            (staging / "breakeven.html").write_text(render_breakeven_html(data), encoding="utf-8")
            (staging / "breakeven.md").write_text(render_breakeven_markdown(data), encoding="utf-8")
    except GpuplanError as error:
        raise fail(error) from None
    for line in summary_lines(data):
        out.print(line, highlight=False)
    out.print(f"written to {output}/ (breakeven.html, breakeven.md, breakeven.json, plans/)", highlight=False)


def summary_lines(data: BreakevenDocument) -> list[str]:
    """The answer, every figure named (issue 42): break-even, NPV, utilization, then the plans they come
    from with their certified gaps, and a warning when the cloud cost owning avoids is within those gaps."""
    from models.whatif import within_gaps
    from planner.planning.breakeven import PLAN_NAMES

    life = data.inputs.depreciation_months
    months = data.months_to_break_even
    lines = [f"[bold]{data.scenario}[/]: owning {plural(data.nodes, 'node')} (how many: {data.nodes_from})"]
    lines.append(
        f"  break-even: after {months:.1f} months of a {life}-month depreciation life (owning's cumulative "
        "cash at or below cloud-only's)"
        if months is not None
        else f"  break-even: never within the {life}-month depreciation life"
    )
    lines.append(
        f"  NPV of owning against cloud only: {_usd(data.npv_usd)} at a "
        f"{data.inputs.cost_of_capital_pct_per_year:g}%/yr cost of capital (positive: owning saves)"
    )
    lines.append(f"  owned nodes' utilization: {data.utilization:.0%} of their usable hours")
    for label, ref in data.plans.items():
        gap = "" if ref.gap is None else f", certified gap {ref.gap:.1%}"
        lines.append(f"  {PLAN_NAMES.get(label, label)}: ${ref.total_usd:,.0f} over the horizon{gap}")
    cloud, owning = data.plans.get("cloud-only"), data.plans.get("owning")
    if cloud is None or owning is None or cloud.gap is None or owning.gap is None:
        return lines
    if within_gaps(cloud.total_usd, cloud.gap, owning.total_usd, owning.gap):
        lines.append(
            f"  not significant: the cloud cost owning avoids over the horizon "
            f"({_usd(cloud.total_usd - owning.total_usd)}) is within the two plans' certified gaps, so "
            "break-even and NPV may change sign with better plans; plan with a longer --time-limit"
        )
    return lines


def _usd(value: float) -> str:
    """Whole dollars with the sign before the symbol: -$511,173, not $-511,173."""
    return f"-${-value:,.0f}" if value < 0 else f"${value:,.0f}"
