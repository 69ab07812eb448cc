"""`gpuplan whatif`: variants of a scenario planned side by side."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from models.errors import GpuplanError, InputError
from models.files import atomic_directory
from models.plan import FuturesOutcome
from planner.cli.common import EXIT_SOLVER, err, fail, out
from planner.cli.futures import report_broken

if TYPE_CHECKING:
    from rich.progress import Progress

    from models.futures import FuturesFile
    from planner.planning.optimize import SolveSettings
    from planner.verify.findings import Findings

__all__ = ["whatif"]


def whatif(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML: the base every variant changes")],
    vary: Annotated[
        list[str] | None,
        typer.Option(
            "--vary",
            help="one variant per flag, e.g. demand=x1.3, spot_price=+50%, capacity:H100=-50%, "
            "colocation.max_nodes=16; several changes in one flag combine ('demand=x1.3 spot_price=+50%')",
        ),
    ] = None,
    sweep: Annotated[
        Path | None, typer.Option(help="a sweep file: variants: [{name: ..., vary: [...]}, ...]")
    ] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="directory to write")] = Path("whatif"),
    time_limit: Annotated[float, typer.Option(help="solver time limit per variant, seconds")] = 120.0,
    workers: Annotated[
        int | None, typer.Option(help="variants planned at once (default: one per core)")
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            help="solve on Dask (the 'distributed' extra): 'local' (a local cluster of --workers) or a "
            "scheduler address (tcp://host:8786, whose workers have gpuplan installed); default: local "
            "processes",
        ),
    ] = None,
    method: Annotated[str, typer.Option(help="auto, staged or hourly (as gpuplan plan)")] = "auto",
    futures: Annotated[
        Path | None,
        typer.Option(
            help="a futures file (docs/futures.md): also plan the base over those demand futures, into "
            "DIR/futures/, and add the futures view (the cost distribution of the chosen purchases, the "
            "point forecast's and the best peer's) to the what-if page",
        ),
    ] = None,
    no_report: Annotated[bool, typer.Option("--no-report", help="skip whatif.md / whatif.html")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
) -> None:
    """Compare variants of a scenario side by side: cost, savings, tier mix, commitments, unserved demand.

    Writes DIR/whatif.json, DIR/whatif.md, DIR/whatif.html and each variant's plan in DIR/variants/; with
    --futures also DIR/futures/ (as gpuplan futures writes it) and a futures section on the page.
    Grammar of a change: KEY[:TARGET]=VALUE with VALUE x1.3 (times), +50% (relative) or 16 (set); keys:
    demand, growth, training_hours, price, on_demand_price, spot_price, reserved_price, spot_interruptions,
    capacity, max_spot_share, colocation.FIELD (see models/variation.py).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from models.futures import load_futures
    from models.whatif import FailedVariant, SolvedVariant
    from planner.planning.optimize import METHODS, SolveSettings
    from planner.planning.whatif import (
        check_variants,
        load_sweep,
        plan_variants,
        run_whatif,
        variants_from_flags,
    )

    broken: dict[str, Findings] = {}
    try:
        if time_limit <= 0:
            raise InputError(None, "--time-limit", f"must be positive, got {time_limit}")
        if workers is not None and workers < 1:
            raise InputError(None, "--workers", f"must be at least 1, got {workers}")
        if method.lower() not in METHODS:
            raise InputError(None, "--method", f"unknown method {method!r}; choose {', '.join(METHODS)}")
        if not vary and sweep is None:
            raise InputError(None, "--vary/--sweep", "give at least one --vary change or a --sweep file")
        variants = plan_variants(load_sweep(sweep) if sweep else [], variants_from_flags(vary or []))
        check_variants(scenario, variants)
        spec = None if futures is None else load_futures(futures)  # a bad file stops before any plan
        settings = SolveSettings(time_limit=time_limit, method=method.lower())
        progress = Progress(
            TextColumn("[bold]what-if[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.description}"), console=err, disable=quiet,
        )  # fmt: skip
        with atomic_directory(output) as staging, progress:
            task = progress.add_task(f"planning {len(variants)} variants", total=len(variants))

            def finished(row: SolvedVariant | FailedVariant) -> None:
                outcome = f"${row.total_usd:,.0f}" if isinstance(row, SolvedVariant) else row.status
                progress.update(task, advance=1, description=f"{row.name}: {outcome}")

            data = run_whatif(scenario, variants, staging, settings, workers, finished, cluster)
            if spec is not None and futures is not None:
                data.futures, broken = _plan_futures(
                    scenario, futures, spec, settings, workers, cluster, staging, progress
                )
            (staging / "whatif.json").write_text(data.to_json())
            if not no_report:
                from planner.outputs.reports.whatif import write_whatif_reports

                write_whatif_reports(staging, data)
    except GpuplanError as error:
        raise fail(error) from None
    if broken:  # as gpuplan futures: a chosen plan that breaks a rule is a planner bug, exit 5
        report_broken(broken, output / "futures")
    table = Table(title=f"{data.scenario}: {len(variants)} variants")
    for column in ("variant", "total", "gap", "vs base", "vs all on-demand", "commitments", "unserved"):
        table.add_column(
            column, justify="left" if column in ("variant", "commitments") else "right", overflow="fold"
        )
    failed = 0
    unsure = []
    for row in data.variants:
        if isinstance(row, FailedVariant):
            failed += 1
            table.add_row(row.name, "failed", "", "", "", row.error[:60], "")
            continue
        delta = row.delta_vs_base_pct
        saving = row.savings_vs_on_demand_pct
        versus = "" if delta is None else f"{delta:+.1f}%"
        if row.significant_vs_base is False:  # within the certified gaps: not a finding
            versus += " n.s."
            unsure.append(row.name)
        table.add_row(
            row.name, f"${row.total_usd:,.0f}", f"{row.gap:.1%}", versus,
            "" if saving is None else f"saves {saving:.1f}%",
            ", ".join(f"{n} {term}" for term, n in row.commitments.items()) or "none",
            str(len(row.unserved)),
        )  # fmt: skip
    if not out.is_terminal:
        out.width = max(out.width, 120)  # piped or captured: keep variant names whole
    out.print(table)
    out.print(
        "gap: how much more each plan may cost than the best plan for its variant (certified)",
        highlight=False,
    )
    if unsure:
        out.print(
            f"n.s. (not significant): {', '.join(unsure)} differ from the base by less than the two plans' "
            "gaps (the costlier plan's certified bound is below the cheaper plan's cost), so the difference "
            "is not a finding; plan with a longer --time-limit to narrow the gaps",
            highlight=False,
        )
    extra = ", futures/" if futures is not None else ""
    out.print(
        f"written to {output}/ (whatif.html, whatif.md, whatif.json, variants/{extra})", highlight=False
    )
    if failed:
        err.print(f"[yellow]warning:[/] {failed} variant(s) failed; see whatif.json", highlight=False)
        raise typer.Exit(EXIT_SOLVER)


def _plan_futures(
    scenario: Path,
    futures: Path,
    spec: FuturesFile,
    settings: SolveSettings,
    workers: int | None,
    cluster: str | None,
    staging: Path,
    progress: Progress,
) -> tuple[FuturesOutcome, dict[str, Findings]]:
    """``gpuplan futures`` over ``spec`` (read from ``futures``) into ``staging/futures``: the buyer's figures
    for whatif.json, and the futures whose chosen plan breaks a rule (checked by verify, as that command
    does)."""
    from planner.cli.futures import check_chosen, write_futures
    from planner.planning.futures import plan_futures

    task = progress.add_task("futures", total=None)
    result = plan_futures(
        scenario, spec, settings, workers, cluster, lambda m: progress.update(task, description=m.strip()),
        source=futures,
    )  # fmt: skip
    write_futures(staging / "futures", result)
    broken = check_chosen(result, lambda m: progress.update(task, description=m))
    progress.update(task, total=1, completed=1, description=f"futures: buys {result.document.chosen}")
    return result.document.outcome("futures/futures.json"), broken
