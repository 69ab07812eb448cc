"""`gpuplan`: the command line.

Exit codes scripts can trust: 0 success; 2 bad input (scenario, catalog, series, arguments); 3 the
solver produced no plan; 4 a plan was written but demand is unserved and ``--fail-on-unserved`` was
given; 5 the plan was written but fails its own check (``gpuplan verify``: a bug, reported loudly);
6 ``provision`` could not read the cloud (credentials, network, settings); 1 ``verify`` found
violations, a ``provision --apply`` action failed, or anything unexpected. Input errors print one
line naming the file, the field and the problem, never a traceback, and nothing is written.
"""

from __future__ import annotations

import difflib
import json
import math
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from models.catalog import MAX_NODES
from models.errors import GpuplanError, InputError, SolverError
from models.plan import PlanDocument, plan_json_path, read_document
from models.scenario import Scenario
from models.tiers import Term
from planner.chargeback_cli import chargeback
from planner.cli_common import (
    EXIT_SELF_CHECK,
    EXIT_SOLVER,
    EXIT_UNSERVED,
    EXIT_VIOLATIONS,
    atomic_directory,
    err,
    fail,
    progress_messages,
)
from planner.daemon.cli import daemon
from planner.exports.cli import terraform
from planner.exports.k8s_cli import k8s
from planner.portal.cli import portal
from planner.provision_cli import provision
from planner.simulate.cli import simulate_app

if TYPE_CHECKING:  # imported where used: `gpuplan --help` loads neither
    from models.catalog import Catalog, Offering
    from planner.inputs import Inputs
    from planner.verify import VerifyReport

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Plan GPU capacity on AWS, GCP and Azure: reserved (1y/3y), on-demand and spot, at minimum cost.",
)
out = Console(soft_wrap=True)  # a summary line is one line, whatever the terminal's width (greppable)
app.add_typer(simulate_app, name="simulate")


@app.command()
def plan(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML (see scenarios/ for examples)")],
    output: Annotated[Path, typer.Option("--output", "-o", help="plan directory to write")] = Path("plan"),
    solver: Annotated[str, typer.Option(help="MILP solver: highs (default) or cbc")] = "highs",
    time_limit: Annotated[
        float,
        typer.Option(
            help="solver time limit, seconds (the hourly method's cluster LP, without which there is no "
            "plan, runs to completion past it)"
        ),
    ] = 120.0,
    gap: Annotated[float, typer.Option(help="relative optimality gap at which to stop")] = 0.005,
    threads: Annotated[int | None, typer.Option(help="solver threads (default: the solver's choice)")] = None,
    block_hours: Annotated[
        int | None, typer.Option(help="hours per block in which equal-demand periods merge (default 24)")
    ] = None,
    start_grid_hours: Annotated[
        int | None, typer.Option(help="training start grid, hours (default: the block length)")
    ] = None,
    method: Annotated[
        str,
        typer.Option(
            help="auto (default: hourly for big scenarios), staged (one MILP over merged periods, "
            "then whole nodes) or hourly (cluster model decides, then every period planned exactly)"
        ),
    ] = "auto",
    clusters_per_block: Annotated[
        int | None,
        typer.Option(
            help="demand clusters per block of the certified bound and hourly method (default: 1-4 by size)"
        ),
    ] = None,
    no_report: Annotated[bool, typer.Option("--no-report", help="skip report.md / report.html")] = False,
    fail_on_unserved: Annotated[
        bool, typer.Option(help="exit 4 when some demand cannot be served (the plan is still written)")
    ] = False,
    no_verify: Annotated[
        bool, typer.Option("--no-verify", help="skip the independent check of the plan (gpuplan verify)")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="show the solver log")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress messages")] = False,
) -> None:
    """Plan a scenario: commitments, on-demand, spot and training placements at minimum cost.

    Writes DIR/plan.json, DIR/allocations.csv, DIR/report.md and DIR/report.html, then checks the
    written plan against the scenario with `gpuplan verify` (independent of the optimizer). A plan that
    fails the check is a gpuplan bug: it is still written, for the bug report, and the exit code is 5.
    """
    from planner.inputs import load_inputs
    from planner.optimize import METHODS, SolveSettings, optimize

    say = progress_messages(quiet)
    try:
        if gap < 0 or gap >= 1:
            raise InputError(None, "--gap", f"must be in [0, 1), got {gap}")
        if time_limit <= 0:
            raise InputError(None, "--time-limit", f"must be positive, got {time_limit}")
        if method.lower() not in METHODS:
            raise InputError(None, "--method", f"unknown method {method!r}; choose {', '.join(METHODS)}")
        if clusters_per_block is not None and clusters_per_block < 1:
            raise InputError(None, "--clusters-per-block", f"must be at least 1, got {clusters_per_block}")
        inputs = load_inputs(scenario)
        settings = SolveSettings(
            solver=solver.lower(),
            time_limit=time_limit,
            gap=gap,
            threads=threads,
            verbose=verbose,
            block_hours=block_hours,
            start_grid_hours=start_grid_hours,
            method=method.lower(),
            bound_clusters_per_block=clusters_per_block,
        )
        if settings.solver not in ("highs", "cbc"):
            raise InputError(None, "--solver", f"unknown solver {solver!r}; choose highs or cbc")
        result = optimize(inputs.scenario, inputs.catalog, inputs.base_dir, settings, progress=say)
        with atomic_directory(output) as staging:
            result.write(staging)
            if not no_report:
                from planner.reports.plan import write_reports

                write_reports(staging)
        check = None if no_verify else _self_check(inputs, scenario, output, say)
    except GpuplanError as error:
        raise fail(error) from None
    document = result.document
    _print_summary(document, output, None if check is None else check.ok)
    if check is not None and not check.ok:
        _print_violations(check, f"{output} (the plan just written)")
        err.print(
            "[bold red]bug:[/] gpuplan wrote a plan that breaks the rules above; this is a bug in the "
            f"planner, not in your scenario. Please report it with {output}/ and the scenario.",
            highlight=False,
        )
        raise typer.Exit(EXIT_SELF_CHECK)
    for warning in document.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if document.unserved:
        err.print(f"[yellow]warning:[/] {len(document.unserved)} unserved demand item(s):", highlight=False)
        for item in document.unserved:
            err.print(f"  {item.kind} {item.workload}: {item.reason}", highlight=False)
        if fail_on_unserved:
            raise typer.Exit(EXIT_UNSERVED)


def _self_check(inputs: Inputs, scenario: Path, output: Path, say: Callable[[str], None]) -> VerifyReport:
    """``gpuplan verify`` on the directory just written, read back as any reader of it would."""
    from planner.verify import verify_inputs

    report = verify_inputs(inputs, scenario, output)
    found = "no violations" if report.ok else f"{report.violations:,} violation(s)"
    say(f"verified the written plan: {found} ({report.seconds:.1f} s)")
    return report


def _print_summary(document: PlanDocument, output: Path, verified: bool | None = None) -> None:
    """The decision first (what to buy), then the cost and savings, then how sure the plan is."""
    held = [c for c in document.commitments if c.existing]
    bought = [c for c in document.commitments if not c.existing]
    if held:
        out.print(f"[bold]{document.scenario}[/]: holds", highlight=False)
        for c in held:
            used = f", {c.used_fraction:.0%} used" if c.used_fraction is not None else ""
            ends = f" until {c.end:%Y-%m-%d}" if c.end is not None else ""
            term = "a capacity reservation" if c.term == Term.RESERVATION else c.term
            out.print(f"  {c.name}: {c.nodes} x {c.offering} on {term}{ends}{used}", highlight=False)
    if bought:
        out.print(f"[bold]{document.scenario}[/]: buy", highlight=False)
        for c in bought:
            used = f", {c.used_fraction:.0%} used" if c.used_fraction is not None else ""
            when = f" from {c.start:%Y-%m-%d}" if c.start is not None else ""
            owed = (
                f", ${c.obligation_beyond_horizon_usd:,.0f} owed after the horizon"
                if c.obligation_beyond_horizon_usd > 0
                else ""
            )
            out.print(
                f"  {c.nodes} x {c.offering} on {c.term}{when}: ${c.usd_per_year:,.0f}/year{used}{owed}",
                highlight=False,
            )
    else:
        nothing = "nothing more to commit to" if held else "nothing to commit to"
        out.print(f"[bold]{document.scenario}[/]: {nothing} (on-demand and spot)", highlight=False)
    total = document.costs.total_usd
    beyond = sum(c.obligation_beyond_horizon_usd for c in document.commitments)
    after = f", plus ${beyond:,.0f} owed after it" if beyond > 0 else ""
    out.print(f"  total ${total:,.0f} over the {document.horizon.hours} h horizon{after}", highlight=False)
    baselines = document.baselines
    best = baselines.peer(baselines.best_peer)
    comparisons = [("all on-demand", baselines.all_on_demand_usd)]
    comparisons.append(
        (f"best peer ({best.name})", best.total_usd) if best else ("greedy", baselines.greedy_usd)
    )
    for label, base in comparisons:
        if base > 0:
            saving = (base - total) / base
            verb = f"saves {saving:.1%}" if saving >= 0 else f"costs {-saving:.1%} MORE"
            out.print(f"  vs {label}: ${base:,.0f} -> {verb}", highlight=False)
    how = document.solver
    out.print(
        f"  {how.verdict()} (certified bound ${how.bound_usd:,.0f}); {how.method} ({how.name}), "
        f"{how.seconds:.1f} s; written to {output}/" + (", verified" if verified else ""),
        highlight=False,
    )


@app.command()
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
    no_report: Annotated[bool, typer.Option("--no-report", help="skip whatif.md / whatif.html")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
) -> None:
    """Compare variants of a scenario side by side: cost, savings, tier mix, commitments, unserved demand.

    Writes DIR/whatif.json, DIR/whatif.md, DIR/whatif.html and each variant's plan in DIR/variants/.
    Grammar of a change: KEY[:TARGET]=VALUE with VALUE x1.3 (times), +50% (relative) or 16 (set); keys:
    demand, growth, training_hours, price, on_demand_price, spot_price, reserved_price, spot_interruptions,
    capacity, max_spot_share, colocation.FIELD (see models/variation.py).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from models.whatif import FailedVariant, SolvedVariant
    from planner.optimize import METHODS, SolveSettings
    from planner.whatif import check_variants, load_sweep, plan_variants, run_whatif, variants_from_flags

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
            (staging / "whatif.json").write_text(data.to_json())
            if not no_report:
                from planner.reports.whatif import write_whatif_reports

                write_whatif_reports(staging, data)
    except GpuplanError as error:
        raise fail(error) from None
    table = Table(title=f"{data.scenario}: {len(variants)} variants")
    for column in ("variant", "total", "vs base", "vs all on-demand", "commitments", "unserved"):
        table.add_column(
            column, justify="left" if column in ("variant", "commitments") else "right", overflow="fold"
        )
    failed = 0
    for row in data.variants:
        if isinstance(row, FailedVariant):
            failed += 1
            table.add_row(row.name, "failed", "", "", row.error[:60], "")
            continue
        delta = row.delta_vs_base_pct
        saving = row.savings_vs_on_demand_pct
        table.add_row(
            row.name, f"${row.total_usd:,.0f}", "" if delta is None else f"{delta:+.1f}%",
            "" if saving is None else f"saves {saving:.1f}%",
            ", ".join(f"{n} {term}" for term, n in row.commitments.items()) or "none",
            str(len(row.unserved)),
        )  # fmt: skip
    if not out.is_terminal:
        out.width = max(out.width, 120)  # piped or captured: keep variant names whole
    out.print(table)
    out.print(f"written to {output}/ (whatif.html, whatif.md, whatif.json, variants/)", highlight=False)
    if failed:
        err.print(f"[yellow]warning:[/] {failed} variant(s) failed; see whatif.json", highlight=False)
        raise typer.Exit(EXIT_SOLVER)


@app.command()
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
    from planner.breakeven import analyse, planner_on
    from planner.inputs import load_inputs
    from planner.optimize import METHODS, SolveSettings
    from planner.reports.breakeven import render_breakeven_html, render_breakeven_markdown
    from planner.sweep_engine import open_engine

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


@app.command()
def catalog(
    gpu: Annotated[list[str] | None, typer.Option(help="GPU model prefix, e.g. H100 (repeatable)")] = None,
    cloud: Annotated[list[str] | None, typer.Option(help="aws, gcp or azure (repeatable)")] = None,
    region: Annotated[list[str] | None, typer.Option(help="region name (repeatable)")] = None,
    fabric: Annotated[bool, typer.Option("--fabric", help="only offerings with a multi-node fabric")] = False,
    file: Annotated[
        Path | None, typer.Option("--catalog", help="a catalog CSV instead of the embedded one")
    ] = None,
    csv: Annotated[bool, typer.Option("--csv", help="print CSV instead of a table")] = False,
) -> None:
    """List GPU offerings and their prices per tier ($ per node-hour).

    Filters combine: an offering is listed when it matches every filter given (any of a repeated one).
    A filter that matches nothing is an error (exit 2) naming it, with the close matches.
    """
    from models.catalog import Catalog

    try:
        loaded = Catalog.load(file)
        rows = _select_offerings(loaded, gpu or [], cloud or [], region or [], fabric)
    except GpuplanError as error:
        raise fail(error) from None
    if csv:
        frame = Catalog(rows).to_dataframe()
        sys.stdout.write(frame.to_csv(index=False))
        return
    table = Table(title=f"{len(rows)} offerings ({'embedded' if file is None else file})")
    for column, justify in (
        ("cloud", "left"), ("region", "left"), ("instance type", "left"), ("GPUs", "right"),
        ("fabric", "left"), ("on-demand", "right"), ("spot", "right"), ("1y", "right"), ("3y", "right"),
        ("$/GPU-h OD", "right"),
    ):  # fmt: skip
        table.add_column(column, justify=justify)  # type: ignore[arg-type]

    def money(value: float | None) -> str:
        return "-" if value is None else f"{value:,.2f}"

    for o in sorted(rows, key=lambda o: (o.gpu_model, o.cloud, o.region, o.instance_type)):
        table.add_row(
            o.cloud, o.region, o.instance_type, f"{o.gpus_per_node}x {o.gpu_model}", o.fabric,
            money(o.on_demand_usd_h), money(o.spot_usd_h), money(o.reserved_1y_usd_h),
            money(o.reserved_3y_usd_h), money((o.on_demand_usd_h or math.nan) / o.gpus_per_node),
        )  # fmt: skip
    if not out.is_terminal:
        out.width = max(out.width, 140)  # piped or captured: do not squeeze the table to 80 columns
    out.print(table)


#: What a cloud is called besides the name gpuplan gives it (for the hint of an unknown ``--cloud``).
_CLOUD_NAMES = {"amazon": "aws", "ec2": "aws", "google": "gcp", "gce": "gcp", "microsoft": "azure"}


def _select_offerings(
    loaded: Catalog, gpus: list[str], clouds: list[str], regions: list[str], fabric: bool
) -> list[Offering]:
    """The offerings of ``loaded`` that ``gpuplan catalog``'s filters select.

    InputError (exit 2) when a filter cannot match: an unknown cloud, a GPU model, cloud or region the
    catalog does not have (with the close matches), or filters that each match but not together (the
    first filter that empties the selection, with what the others leave)."""
    from models.catalog import CLOUDS

    source = "the embedded catalog" if loaded.source == "embedded" else loaded.source
    offerings = list(loaded)
    for flag, values in (("--gpu", gpus), ("--cloud", clouds), ("--region", regions)):
        if any(not value.strip() for value in values):
            raise InputError(None, flag, "empty value")
    for name in clouds:
        if name.strip().lower() not in CLOUDS:
            alias = _CLOUD_NAMES.get(name.strip().lower())
            hint = f" (did you mean {alias!r}?)" if alias else _close_matches(name.strip().lower(), CLOUDS)
            raise InputError(None, "--cloud", f"unknown cloud {name!r}{hint}; valid: {', '.join(CLOUDS)}")
    models = sorted({o.gpu_model for o in offerings})
    for pattern in gpus:
        if not any(o.matches_gpu([pattern]) for o in offerings):
            hint = _close_matches(pattern.strip(), models)
            raise InputError(
                None,
                "--gpu",
                f"no GPU model in {source} starts with {pattern!r}{hint}; its models: {', '.join(models)}",
            )
    present = sorted({o.cloud for o in offerings})
    for name in clouds:
        if name.strip().lower() not in present:
            problem = f"{source} has no {name.strip().lower()} offering; its clouds: {', '.join(present)}"
            raise InputError(None, "--cloud", problem)
    known = sorted({o.region for o in offerings})
    for name in regions:
        if name not in known:
            hint = _close_matches(name, known) or f"; its regions: {', '.join(known)}"
            raise InputError(None, "--region", f"no region {name!r} in {source}{hint}")
    if fabric and not any(o.has_fabric for o in offerings):
        raise InputError(None, "--fabric", f"no offering in {source} has a multi-node fabric")

    wanted_clouds = {c.strip().lower() for c in clouds}
    steps: list[tuple[str, list[str], Callable[[Offering], bool]]] = [
        ("--gpu", gpus, lambda o: o.matches_gpu(gpus)),
        ("--cloud", clouds, lambda o: o.cloud in wanted_clouds),
        ("--region", regions, lambda o: o.region in regions),
        ("--fabric", ["--fabric"] if fabric else [], lambda o: o.has_fabric),
    ]
    applied: list[str] = []
    selected = offerings
    for flag, values, keep in steps:
        if not values:
            continue
        narrowed = [o for o in selected if keep(o)]
        given = " ".join(f"{flag} {v}" for v in values) if flag != "--fabric" else flag
        if not narrowed:
            before = f"no offering matching {' '.join(applied)}"
            if flag == "--cloud":
                clouds_left = ", ".join(sorted({o.cloud for o in selected}))
                problem = f"{before} is on {given}; the clouds that have them: {clouds_left}"
            elif flag == "--region":
                names = sorted({o.region for o in selected})
                hint = _close_matches(regions[0], names)
                problem = f"{before} is in {given}{hint}; their regions: {', '.join(names)}"
            else:
                problem = f"{before} has a multi-node fabric"
            raise InputError(None, flag, problem)
        applied.append(given)
        selected = narrowed
    return selected


def _close_matches(value: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'H100'?)`` for the choices close to ``value`` (case-insensitive), else ``""``."""
    by_lower = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(value.lower(), list(by_lower), n=3, cutoff=0.5)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(by_lower[c]) for c in close) + "?)"


@app.command()
def validate(scenario: Annotated[Path, typer.Argument(help="scenario YAML")]) -> None:
    """Check a scenario (fields, references, catalog, demand series) without solving."""
    from models.workloads import service_demand, training_runs
    from planner.inputs import load_inputs
    from planner.optimize.checks import check_inputs

    try:
        inputs = load_inputs(scenario)
        loaded, catalog = inputs.scenario, inputs.catalog
        for service in loaded.inference:
            service_demand(loaded, service, scenario.parent)
        runs = training_runs(loaded)
        warnings = check_inputs(loaded, catalog)  # what plan checks before solving: they agree
    except GpuplanError as error:
        raise fail(error) from None
    for warning in warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
    out.print(
        f"{scenario}: ok ({len(loaded.inference)} services, {len(loaded.training)} training jobs / "
        f"{len(runs)} runs, {len(loaded.teams)} teams, {len(catalog)} catalog offerings)",
        highlight=False,
    )


@app.command()
def report(
    plan_dir: Annotated[Path, typer.Argument(help="a plan directory written by `gpuplan plan`")],
) -> None:
    """(Re)write report.md and report.html from a plan directory."""
    from planner.reports.plan import write_reports

    try:
        md, html = write_reports(plan_dir)  # reads the directory through Plan.read
    except GpuplanError as error:
        raise fail(error) from None
    out.print(f"wrote {md} and {html}", highlight=False)


def _verify_help() -> str:
    from planner.verify.findings import KINDS

    kinds = "\n\n".join(f"{kind}: {what}" for kind, what in KINDS.items())
    return (
        "Check a plan directory (plan.json + allocations.csv) against its scenario and catalog, "
        "independently of the optimizer.\n\n"
        "Checked: the billing rule (per period and offering, N held non-spot nodes are whole, committed "
        "rows sum to min(N, C) and on-demand rows to max(0, N - C)), max_nodes, owned nodes only after "
        "delivery, row and commitment costs and the totals, integer replicas covering demand (or listed "
        "unserved), eligible offerings, latency-critical services never on spot, an explicit assignment "
        "of each period's work onto whole nodes, GPUs and legal MIG layouts, the MIG configs scheduled "
        "each period (mig-config.yaml) holding that period's MIG replicas, training gangs (one "
        "offering with the fabric, in the window, long enough, rows exactly where they run), the spot "
        "share, team burst limits and guarantees backed by committed GPUs.\n\n"
        "Exit 0: no violation; 1: violations (printed by kind, with a count and examples); 2: unreadable "
        "input, or a plan made from another scenario.\n\nViolation kinds:\n\n" + kinds
    )


@app.command(help=_verify_help())
def verify(
    scenario: Annotated[Path, typer.Argument(help="the scenario YAML the plan was made from")],
    plan_dir: Annotated[Path, typer.Argument(help="a plan directory written by `gpuplan plan`")],
    as_json: Annotated[bool, typer.Option("--json", help="print the violations as JSON")] = False,
    examples: Annotated[int, typer.Option(help="examples kept per violation kind")] = 3,
) -> None:
    from planner.inputs import load_inputs
    from planner.verify import verify_inputs

    try:
        if examples < 0:
            raise InputError(None, "--examples", f"must be at least 0, got {examples}")
        inputs = load_inputs(scenario)
        _check_plan_is_of(inputs.scenario, scenario, plan_dir)
        report = verify_inputs(inputs, scenario, plan_dir, examples)
    except GpuplanError as error:
        raise fail(error) from None
    if as_json:
        sys.stdout.write(report.to_json())
    elif report.ok:
        out.print(
            f"{plan_dir}: ok, no violations against {scenario} ({report.seconds:.1f} s)", highlight=False
        )
    else:
        _print_violations(report, str(plan_dir))
    if not report.ok:
        raise typer.Exit(EXIT_VIOLATIONS)


def _check_plan_is_of(loaded: Scenario, scenario: Path, plan_dir: Path) -> None:
    """A plan made from another scenario is the wrong argument, not a plan with violations: every check
    would fail (or find offerings the scenario does not have). InputError naming both scenarios."""
    document = read_document(plan_json_path(plan_dir))
    if document.scenario != loaded.name:
        raise InputError(
            plan_dir / "plan.json",
            "scenario",
            f"the plan was made from scenario {document.scenario!r}, not {loaded.name!r} ({scenario}); "
            "verify a plan against the scenario it was made from",
        )


def _print_violations(report: VerifyReport, label: str) -> None:
    """Violations by kind: count, what the rule is, and the examples kept."""
    console = out if label == report.plan else err
    console.print(
        f"[bold]{label}[/]: {report.violations:,} violation(s) of {len(report.kinds)} kind(s) "
        f"against {report.scenario} ({report.seconds:.1f} s)",
        highlight=False,
    )
    for group in report.kinds:
        console.print(f"[bold red]{group.kind}[/] ({group.count:,}): {group.description}", highlight=False)
        for item in group.examples:
            where = ", ".join(
                f"{name} {value}"
                for name, value in (
                    ("period", item.period),
                    ("offering", item.offering),
                    ("workload", item.workload),
                )
                if value is not None
            )
            console.print(f"  - {item.message}" + (f" [dim]({where})[/]" if where else ""), highlight=False)


@app.command()
def schema(
    document: Annotated[
        str, typer.Argument(help="plan (plan.json), scenario (the YAML input) or actions (actions.json)")
    ],
) -> None:
    """Print the JSON Schema of plan.json, a scenario file or actions.json (for editors, validators, tools).

    The same schemas ship in the package (models/data/*.schema.json).
    """
    from models.schemas import DOCUMENTS, json_schema

    if document not in DOCUMENTS:
        problem = f"unknown document {document!r}; choose {', '.join(DOCUMENTS)}"
        raise fail(InputError(None, "schema", problem))
    typer.echo(json.dumps(json_schema(document), indent=2))


# acting on a plan: listed after the planning commands in --help
app.command()(provision)
app.command()(terraform)
app.command()(k8s)
app.command()(daemon)
app.command()(chargeback)
app.command()(portal)


def main() -> None:
    try:
        app()
    except SolverError as error:  # pragma: no cover - commands map their own errors
        err.print(f"[bold red]solver error:[/] {escape(str(error))}")
        sys.exit(EXIT_SOLVER)


if __name__ == "__main__":
    main()
