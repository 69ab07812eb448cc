"""`gpuplan breakeven`: own GPU servers or rent them, through the planner."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from models.catalog import MAX_NODES
from models.errors import GpuplanError, InputError
from models.files import atomic_directory
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
    months = data.months_to_break_even
    when = f"breaks even after {months:.1f} months" if months is not None else "never breaks even"
    out.print(
        f"[bold]{data.scenario}[/]: owning {data.nodes} node(s) ({data.nodes_from}) {when} "
        f"within a {data.inputs.depreciation_months}-month life; NPV ${data.npv_usd:,.0f} "
        f"at {data.inputs.cost_of_capital_pct_per_year:g}%/yr; owned nodes busy "
        f"{data.utilization:.0%} of their hours",
        highlight=False,
    )
    out.print(f"written to {output}/ (breakeven.html, breakeven.md, breakeven.json, plans/)", highlight=False)
