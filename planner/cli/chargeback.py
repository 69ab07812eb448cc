"""`gpuplan chargeback`: GPU-hours and cost per team and project per month at effective rates, from a
plan's forecast or from actual usage (a usage CSV, or an OpenCost allocation export converted to one).

Bad input (plan directory, usage file, month, idle rule) exits 2 with one line naming the file, row and
column, and writes nothing; the outputs appear whole in ``-o DIR`` or not at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from models.errors import GpuplanError, InputError
from models.files import atomic_directory
from models.wording import plural
from planner.cli.common import fail, out

__all__ = ["chargeback"]


def chargeback(
    plan_dir: Annotated[Path, typer.Argument(help="plan directory written by gpuplan plan")],
    output: Annotated[Path, typer.Option("--output", "-o", help="directory to write the chargeback into")],
    usage: Annotated[
        Path | None, typer.Option(help="usage CSV of actual pod usage (format: models/usage.py)")
    ] = None,
    opencost: Annotated[
        Path | None,
        typer.Option(
            help="OpenCost /allocation JSON export, converted to a usage CSV (written as usage.csv)"
        ),
    ] = None,
    opencost_offering: Annotated[
        str | None, typer.Option(help="offering of OpenCost pods without the gpuplan.io/offering label")
    ] = None,
    month: Annotated[str | None, typer.Option(help="one calendar month, YYYY-MM (default: all)")] = None,
    allow_outside_horizon: Annotated[
        bool,
        typer.Option(
            "--allow-outside-horizon",
            help="charge usage before or after the plan's horizon at the plan's rates (default: refused)",
        ),
    ] = False,
    idle_rule: Annotated[
        str,
        typer.Option(
            help="idle committed capacity: guarantees (to the teams whose guarantees it backs, else by use) "
            "or usage (shared by use)"
        ),
    ] = "guarantees",
) -> None:
    """Chargeback per team and project per month: committed capacity amortized over the hours used."""
    from models.chargeback import Book, IdleRule, charge_plan, month_span
    from models.plan import Plan
    from models.usage import charge_usage, from_opencost, read_usage, write_usage
    from planner.outputs.reports.chargeback import CENT, write_chargeback

    try:
        try:
            rule = IdleRule(idle_rule)
        except ValueError:
            valid = ", ".join(r.value for r in IdleRule)
            raise InputError(None, "--idle-rule", f"{idle_rule!r} is not a rule; valid: {valid}") from None
        if month is not None:
            try:
                month_span(month)
            except ValueError as exc:
                raise InputError(None, "--month", str(exc)) from None
        if usage is not None and opencost is not None:
            raise InputError(None, "--usage", "give --usage or --opencost, not both")
        plan = Plan.read(plan_dir)
        book = Book.from_plan(plan)
        rows = None
        if usage is not None:
            rows = read_usage(usage, book, allow_outside_horizon=allow_outside_horizon)
            source_path = usage
        elif opencost is not None:
            rows = from_opencost(
                opencost, book, opencost_offering, allow_outside_horizon=allow_outside_horizon
            )
            source_path = opencost
        if rows is None:
            result = charge_plan(plan, rule, month)
        else:
            result = charge_usage(book, rows, rule, source_path, month)
        if not len(result.rows):
            where = "--month" if month else None
            raise InputError(None, where, f"nothing to charge{' in ' + month if month else ''}")
        with atomic_directory(output) as staging:
            write_chargeback(result, plan.document.scenario, month, staging)
            if opencost is not None and rows is not None:
                write_usage(rows, staging / "usage.csv")
    except GpuplanError as error:
        raise fail(error) from None
    gap = result.total_usd - result.expected_total_usd
    status = "reconciles to the cent" if abs(gap) < CENT else f"DOES NOT reconcile (off by ${gap:,.2f})"
    teams = result.rows.groupby("team")["cost_usd"].sum()
    out.print(
        f"chargeback ({result.source}, idle rule {rule}): ${result.total_usd:,.2f} over "
        f"{plural(len(teams), 'team')}, "
        f"{plural(len(result.rows), 'row')}; {status} with ${result.expected_total_usd:,.2f}",
        highlight=False,
    )
    for team, usd in teams.items():
        # escaped: a team name is the user's text, and rich would read "[red]" in it as markup
        out.print(f"  {escape(str(team))}: ${usd:,.2f}", highlight=False)
    out.print(f"wrote {output}/chargeback.csv, chargeback.json, chargeback.html", highlight=False)
    if abs(gap) >= CENT:
        raise typer.Exit(5)
