"""`gpuplan`: the command line, assembled from one module per command family.

Exit codes scripts can trust: 0 success; 2 bad input (scenario, catalog, series, arguments); 3 the
solver produced no plan; 4 a plan was written but demand is unserved and ``--fail-on-unserved`` was
given; 5 the plan was written but fails its own check (``gpuplan verify``: a bug, reported loudly);
6 ``provision`` could not read the cloud (credentials, network, settings), or ``demand`` its
Prometheus server; 1 ``verify`` found
violations, a ``provision --apply`` action failed, or anything unexpected. Input errors print one
line naming the file, the field and the problem, never a traceback, and nothing is written.
"""

from __future__ import annotations

import sys

import typer
from rich.markup import escape

from models.errors import SolverError
from planner.cli.breakeven import breakeven
from planner.cli.catalog import catalog
from planner.cli.chargeback import chargeback
from planner.cli.common import EXIT_SOLVER, err
from planner.cli.daemon import daemon
from planner.cli.demand import demand
from planner.cli.futures import futures
from planner.cli.k8s import k8s
from planner.cli.karpenter import karpenter
from planner.cli.plan import plan, validate
from planner.cli.portal import portal
from planner.cli.prices import fetch
from planner.cli.provision import provision
from planner.cli.report import report
from planner.cli.schema import schema
from planner.cli.simulate import simulate_app
from planner.cli.terraform import terraform
from planner.cli.verify import verify, verify_help
from planner.cli.whatif import whatif

__all__ = ["app", "main"]

#: Help is click's plain text, not Rich's panels: Rich's option table cut option names to fit 80 columns
#: (``--clusters-per-blo…``) and read ``:100:`` in ``50:100:5`` as an emoji code (``50💯5``); click wraps
#: the descriptions and prints the names and examples as written (tests/e2e/test_help_80_columns.py).
PLAIN_HELP = None

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=PLAIN_HELP,
    help="Plan GPU capacity on AWS, GCP and Azure: reserved (1y/3y), on-demand and spot, at minimum cost.",
)
app.add_typer(simulate_app, name="simulate")
# planning and explaining, in the order --help lists them
app.command()(plan)
app.command()(whatif)
app.command()(breakeven)
app.command()(futures)
app.command()(demand)
catalog_app = typer.Typer(
    invoke_without_command=True,
    rich_markup_mode=PLAIN_HELP,
    help=(catalog.__doc__ or "").split("\n\n")[0],
)
catalog_app.callback()(catalog)
catalog_app.command("fetch")(fetch)
app.add_typer(catalog_app, name="catalog")
app.command()(validate)
app.command()(report)
app.command(help=verify_help())(verify)
app.command()(schema)
# acting on a plan: listed after the planning commands in --help
app.command()(provision)
app.command()(terraform)
app.command()(k8s)
app.command()(karpenter)
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
