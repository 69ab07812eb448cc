"""`gpuplan terraform`: write a plan as Terraform roots (``planner/outputs/terraform.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from models.errors import GpuplanError, InputError
from models.files import atomic_directory
from planner.cli.common import fail, out

__all__ = ["terraform"]


def terraform(
    plan_dir: Annotated[Path, typer.Argument(help="plan directory written by gpuplan plan")],
    output: Annotated[Path, typer.Option("--output", "-o", help="directory of the roots to write")] = Path(
        "terraform-roots"
    ),
    at: Annotated[
        str | None,
        typer.Option(
            help="hold the plan at this time, ISO 8601 UTC (its pools, and gangs within --lead-hours)"
        ),
    ] = None,
    peak: Annotated[
        bool,
        typer.Option(
            "--peak", help="hold the steady state: committed baseline plus each pool's peak (the default)"
        ),
    ] = False,
    lead_hours: Annotated[
        float, typer.Option(help="with --at: hours ahead of a gang's start to hold its group and reservation")
    ] = 2.0,
    cloud: Annotated[
        list[str] | None,
        typer.Option(help="write only this cloud's root (repeatable; default: every cloud used)"),
    ] = None,
    interruption_queue: Annotated[
        bool,
        typer.Option(
            "--interruption-queue",
            help="aws: also write an SQS queue per region fed by EventBridge rules for spot interruption "
            "warnings, rebalance recommendations and state changes (interruptions.tf; its URLs are an output "
            "for aws.interruption_queue_url)",
        ),
    ] = False,
) -> None:
    """Write one Terraform root module per cloud the plan uses, for review and `terraform apply`.

    Each DIR/<cloud>/ instantiates terraform/modules/<cloud>-gpu-pool (copied into it) once per pool,
    from terraform.tfvars.json, with provider blocks that carry no credentials and a README of what it
    holds; site settings (images, subnets, project, resource group) go in site.auto.tfvars (an example
    is written). The same plan and options always write the same bytes. Commitment purchases are listed
    in the README as decisions with their cost, never as resources.
    """
    from models.plan import Plan
    from planner.cli.provision import parse_time
    from planner.outputs.desired import lead_hours_problem
    from planner.outputs.terraform import Moment, write_roots
    from providers.base import Capability
    from providers.config import CLOUDS, capabilities_of

    try:
        if at is not None and peak:
            raise InputError(None, "--at", "give --at TIME or --peak, not both")
        if (problem := lead_hours_problem(lead_hours)) is not None:
            raise InputError(None, "--lead-hours", problem)
        loaded = Plan.read(plan_dir)
        reserving = frozenset(c for c in CLOUDS if Capability.GANG_RESERVATIONS in capabilities_of(c))
        moment = Moment(None if at is None else parse_time(at), lead_hours, reserving)
        if moment.at is not None:
            from planner.outputs.desired import period_of

            period_of(loaded.document, moment.at)  # outside the horizon: an input error, before writing
        with atomic_directory(output) as staging:
            roots = write_roots(loaded, staging, moment, cloud, interruption_queue=interruption_queue)
    except GpuplanError as exc:
        raise fail(exc) from None
    if not roots:
        out.print(
            f"the plan uses no cloud (only owned servers): nothing written to {output}", highlight=False
        )
        return
    for root in roots:
        out.print(
            f"wrote {output / root.name}/ ({root.name}: terraform init && terraform plan)", highlight=False
        )
