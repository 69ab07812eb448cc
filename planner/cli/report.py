"""`gpuplan report`: a plan directory's report.md and report.html written again."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from models.errors import GpuplanError
from planner.cli.common import fail, out

__all__ = ["report"]


def report(
    plan_dir: Annotated[Path, typer.Argument(help="a plan directory written by `gpuplan plan`")],
) -> None:
    """(Re)write report.md and report.html from a plan directory."""
    from planner.outputs.reports.plan import write_reports

    try:
        md, html = write_reports(plan_dir)  # reads the directory through Plan.read
    except GpuplanError as error:
        raise fail(error) from None
    out.print(f"wrote {md} and {html}", highlight=False)
