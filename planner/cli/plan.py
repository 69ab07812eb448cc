"""`gpuplan plan` and `gpuplan validate`: a scenario checked, planned and written, then verified."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from models.errors import GpuplanError, InputError
from models.files import atomic_directory
from models.plan import Plan, PlanDocument
from models.tiers import Term
from models.wording import plural
from planner.cli.common import EXIT_SELF_CHECK, EXIT_UNSERVED, err, fail, out, progress_messages
from planner.cli.futures import check_chosen, report_broken, write_futures
from planner.cli.verify import print_violations

if TYPE_CHECKING:  # imported where used: `gpuplan --help` loads neither
    from models.inputs import Inputs
    from planner.planning.futures import FuturesResult
    from planner.planning.optimize import SolveSettings
    from planner.verify import VerifyReport

__all__ = ["plan", "validate"]


def plan(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML (see scenarios/ for examples)")],
    output: Annotated[Path, typer.Option("--output", "-o", help="plan directory to write")] = Path("plan"),
    solver: Annotated[str, typer.Option(help="MILP solver: highs (default) or cbc")] = "highs",
    time_limit: Annotated[
        float,
        typer.Option(
            help="solver work limit: about this many seconds of work on a typical 2-core machine, counted "
            "in solver work (not the clock), so the same inputs give the same plan on a busy machine; a "
            "wall-clock safety net at 10x stops a far slower machine and says so in plan.json (the hourly "
            "method's cluster LP, without which there is no plan, runs to completion past it)"
        ),
    ] = 120.0,
    gap: Annotated[float, typer.Option(help="relative optimality gap at which to stop")] = 0.005,
    threads: Annotated[
        int | None, typer.Option(help="solver threads (default 1: the same plan on any machine)")
    ] = 1,
    block_hours: Annotated[
        int | None,
        typer.Option(
            help="hours per block in which equal-demand periods merge (default: 168 on horizons of 8 weeks "
            "or more, 24 on shorter ones, the whole horizon with no training; plan.json solver.block_hours)"
        ),
    ] = None,
    start_grid_hours: Annotated[
        int | None,
        typer.Option(
            help="training start grid, hours (default: the block length, at most 24; plan.json "
            "solver.training_start_grid_hours)"
        ),
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
    prices: Annotated[
        Path | None,
        typer.Option(
            "--prices",
            help="a pricing overlay YAML: your discounts and negotiated rates on top of the catalog "
            "(docs/prices.md); the scenario's pricing: applies first",
        ),
    ] = None,
    start_from: Annotated[
        Path | None,
        typer.Option(
            "--start-from",
            help="a plan directory to start from (e.g. the plan of this scenario with fewer choices: "
            "purchase.schedule horizon, fewer regions or terms): the plan is never dearer than its "
            "decisions here, when they are all for sale in this scenario",
        ),
    ] = None,
    futures: Annotated[
        Path | None,
        typer.Option(
            "--futures",
            help="a futures file (gpuplan futures, docs/futures.md): buy what is best over those demand "
            "futures, plan the scenario with those purchases, and write the futures report in DIR/futures/",
        ),
    ] = None,
    workers: Annotated[
        int | None, typer.Option(help="with --futures: plans solved at once (default: one per core)")
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

    With --futures, the purchases are those `gpuplan futures` chooses over the futures (the rest planned
    for the scenario as written), and DIR/futures/ holds that command's output.
    """
    from models.inputs import load_inputs
    from planner.planning.optimize import METHODS, SolveSettings, optimize

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
        inputs = load_inputs(scenario, prices=prices)
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
        futured, broken = None, {}
        if futures is not None:
            futured, result = _plan_futures(scenario, futures, settings, workers, start_from, prices, say)
            broken = {} if no_verify else check_chosen(futured, say)
        else:
            seed = None if start_from is None else Plan.read(start_from)
            result = optimize(
                inputs.scenario, inputs.catalog, inputs.base_dir, settings, progress=say, seed=seed
            )
        if futured is not None:  # the buyer's figures in plan.json too (futures/futures.json has the rest)
            result.document.futures = futured.document.outcome("futures/futures.json")
        with atomic_directory(output) as staging:
            result.write(staging)
            if futured is not None:
                write_futures(staging / "futures", futured)
            if not no_report:
                from planner.outputs.reports.plan import write_reports

                write_reports(staging)
        check = None if no_verify else _self_check(inputs, scenario, output, say)
    except GpuplanError as error:
        raise fail(error) from None
    if broken:
        report_broken(broken, output / "futures")
    document = result.document
    _print_summary(document, output, None if check is None else check.ok)
    if futured is not None:
        _print_futures(futured, futures, output)
    if check is not None and not check.ok:
        print_violations(check, f"{output} (the plan just written)")
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


def _plan_futures(
    scenario: Path,
    futures: Path,
    settings: SolveSettings,
    workers: int | None,
    start_from: Path | None,
    prices: Path | None,
    say: Callable[[str], None],
) -> tuple[FuturesResult, Plan]:
    """``gpuplan futures`` over ``futures``, and the plan to act on (the scenario planned buying what they
    choose: planning/futures.py ``pinned_plan``)."""
    from models.futures import load_futures
    from planner.planning.futures import plan_futures

    if start_from is not None:
        raise InputError(None, "--start-from", "not with --futures: the futures choose the purchases")
    spec = load_futures(futures)
    result = plan_futures(
        scenario, spec, settings, workers, None, say, source=futures, act_on=True, prices=prices
    )
    if result.act_on is None:  # pragma: no cover - act_on=True always makes it
        raise GpuplanError("the futures gave no plan to act on (a gpuplan bug)")
    return result, result.act_on


def _print_futures(result: FuturesResult, futures: Path | None, output: Path) -> None:
    """What the futures say about these purchases: expected cost, P90, the value of the stochastic
    solution, the risk constraints met; where the report is."""
    from planner.outputs.reports.futures import risk_lines

    document = result.document
    s = document.summary
    out.print(
        f"  over {len(document.futures)} demand futures ({futures}): buys {document.chosen}; expected "
        f"${s.expected_usd:,.0f}, P90 ${s.p90_usd:,.0f}; value of the stochastic solution ${s.vss_usd:,.0f} "
        f"(the point forecast's purchases: ${s.point_forecast_expected_usd:,.0f} expected)",
        highlight=False,
    )
    for line in risk_lines(document):
        out.print(f"  {line}", highlight=False)
    out.print(f"  the futures report: {output}/futures/futures.md", highlight=False)


def _self_check(inputs: Inputs, scenario: Path, output: Path, say: Callable[[str], None]) -> VerifyReport:
    """``gpuplan verify`` on the directory just written, read back as any reader of it would."""
    from planner.verify import verify_inputs

    report = verify_inputs(inputs, scenario, output)
    found = "no violations" if report.ok else f"{report.violations:,} violation(s)"
    say(f"verified the written plan: {found} ({report.seconds:.1f} s)")
    return report


def buy_lines(document: PlanDocument) -> list[str]:
    """One line per commitment the plan buys: what, from when, its yearly cost, its use, what it owes after
    the horizon, and the guarantees it backs (issue 42: a commitment bought to keep guaranteed GPUs held is
    lowly used by design, and its line says so rather than only "12% used")."""
    from models.chargeback import Book

    book = Book.from_document(document)
    lines = []
    for c in document.commitments:
        if c.existing:
            continue
        used = f", {c.used_fraction:.0%} used" if c.used_fraction is not None else ""
        when = f" from {c.start:%Y-%m-%d}" if c.start is not None else ""
        owed = (
            f", ${c.obligation_beyond_horizon_usd:,.0f} owed after the horizon"
            if c.obligation_beyond_horizon_usd > 0
            else ""
        )
        backers = book.backers(c.offering)
        backs = (
            "; backs the guaranteed GPUs of "
            + ", ".join(f"{team} ({gpus:,.0f})" for team, gpus in sorted(backers.items()))
            if backers
            else ""
        )
        paid = (  # issue 38: how it is paid when not by the hour, the fee at purchase
            f", {c.payment.replace('-', ' ')} (${c.upfront_total_usd:,.0f} at purchase)"
            if c.payment != "no-upfront"
            else ""
        )
        what = f"{c.nodes} x {c.offering} on {c.term}{when}{paid}"
        lines.append(f"{what}: ${c.usd_per_year:,.0f}/year{used}{owed}{backs}")
    return lines


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
        for line in buy_lines(document):
            out.print(f"  {line}", highlight=False)
    else:
        nothing = "nothing more to commit to" if held else "nothing to commit to"
        out.print(f"[bold]{document.scenario}[/]: {nothing} (on-demand and spot)", highlight=False)
    total = document.costs.total_usd
    beyond = sum(c.obligation_beyond_horizon_usd for c in document.commitments)
    after = f", plus ${beyond:,.0f} owed after it" if beyond > 0 else ""
    out.print(f"  total ${total:,.0f} over the {document.horizon.hours} h horizon{after}", highlight=False)
    months = document.costs.cash_by_month or []
    fees = sum(m.upfront_usd for m in months)
    if fees > 0:  # issue 38: a finance team asks for the cash, not only the cost
        peak = max(months, key=lambda m: m.cash_usd)
        out.print(
            f"  cash: ${fees:,.0f} of upfront fees; the most in a month ${peak.cash_usd:,.0f} ({peak.month})",
            highlight=False,
        )
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
    if document.prices is not None:
        out.print(f"  {document.prices.summary}", highlight=False)
    how = document.solver
    out.print(
        f"  {how.verdict()} (certified bound ${how.bound_usd:,.0f}); {how.method} ({how.name}), "
        f"{how.seconds:.1f} s; written to {output}/" + (", verified" if verified else ""),
        highlight=False,
    )


def validate(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML")],
    prices: Annotated[
        Path | None, typer.Option("--prices", help="a pricing overlay YAML to check with it (docs/prices.md)")
    ] = None,
) -> None:
    """Check a scenario (fields, references, catalog, pricing overlay, demand series) without solving."""
    from models.inputs import load_inputs
    from models.workloads import service_demand, training_runs
    from planner.planning.problem.checks import check_inputs

    try:
        inputs = load_inputs(scenario, prices=prices)
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
        f"{scenario}: ok ({plural(len(loaded.inference), 'service')}, "
        f"{plural(len(loaded.training), 'training job')} / {plural(len(runs), 'run')}, "
        f"{plural(len(loaded.teams), 'team')}, {plural(len(catalog), 'catalog offering')})",
        highlight=False,
    )
