"""`gpuplan karpenter`: a plan's AWS fleet as Karpenter NodePools and EC2NodeClasses
(``planner/outputs/karpenter.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from models.errors import GpuplanError, InputError
from models.files import atomic_directory
from planner.cli.common import err, fail, out

__all__ = ["karpenter"]


_HELP = "\n\n".join(
    (
        "Write Karpenter NodePools (karpenter.sh/v1) and EC2NodeClasses (karpenter.k8s.aws/v1) for a plan's "
        "AWS capacity, one directory per region (apply each with `kubectl apply -f DIR/<region>` on the "
        "cluster there). The same plan always writes the same bytes. A plan with no AWS capacity is an "
        "error (exit 2) and writes nothing.",
        "Reserved first: a NodePool (capacity type reserved, weight 100) per capacity reservation the "
        "scenario holds (selected by --reservation-id or its Name tag) and per reservation gpuplan provision "
        "makes for a multi-node gang (selected by its gpuplan-plan and gpuplan-run tags, in the gang's "
        "placement group). Then on-demand pools of committed offerings (1y/3y commitments and savings plans "
        "bill on-demand nodes), then on-demand and spot pools cheapest first as the plan prices a GPU-hour. "
        "Limits (nvidia.com/gpu, nodes) are the plan's peaks per pool and tier.",
        "Nodes carry gpuplan.io/capacity-type as the Kueue export (gpuplan k8s) expects; spot nodes its "
        "taint gpuplan.io/capacity-type=spot:NoSchedule.",
    )
)


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    """``KEY=VALUE`` options as a mapping; InputError naming the flag otherwise."""
    result: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key or not rest:
            raise InputError(None, flag, f"expected KEY=VALUE, got {value!r}")
        result[key] = rest
    return result


def karpenter(
    plan_dir: Annotated[Path, typer.Argument(help="plan directory written by gpuplan plan")],
    output: Annotated[Path, typer.Option("--output", "-o", help="directory of manifests to write")] = Path(
        "karpenter"
    ),
    cluster: Annotated[
        str, typer.Option(help="cluster name: the default role and discovery tags are derived from it")
    ] = "gpuplan",
    role: Annotated[
        str | None, typer.Option(help="IAM role of the nodes (default KarpenterNodeRole-<cluster>)")
    ] = None,
    subnet_tag: Annotated[
        list[str] | None,
        typer.Option(
            help="KEY=VALUE tag of the subnets to launch in (repeatable; default "
            "karpenter.sh/discovery=<cluster>)"
        ),
    ] = None,
    security_group_tag: Annotated[
        list[str] | None,
        typer.Option(
            help="KEY=VALUE tag of the nodes' security groups (repeatable; default "
            "karpenter.sh/discovery=<cluster>)"
        ),
    ] = None,
    ami_alias: Annotated[
        str, typer.Option(help="amiSelectorTerms alias: al2023@latest, al2@latest or bottlerocket@latest")
    ] = "al2023@latest",
    reservation_id: Annotated[
        list[str] | None,
        typer.Option(
            help="NAME=cr-... : select the held capacity reservation NAME (a scenario commitment "
            "of term reservation) by its id rather than by its Name tag (repeatable)"
        ),
    ] = None,
    gpu_taint: Annotated[
        bool,
        typer.Option(
            help="also taint every node nvidia.com/gpu=present:NoSchedule (workloads then need "
            "the toleration; the Kueue export's do not carry it)"
        ),
    ] = False,
) -> None:
    from models.plan import Plan
    from planner.outputs.karpenter import NodeClassSettings, build_fleet

    try:
        settings = NodeClassSettings(
            cluster=cluster,
            role=role,
            subnet_tags=_pairs(subnet_tag or [], "--subnet-tag") or None,
            security_group_tags=_pairs(security_group_tag or [], "--security-group-tag") or None,
            ami_alias=ami_alias,
            reservation_ids=_pairs(reservation_id or [], "--reservation-id"),
            gpu_taint=gpu_taint,
        )
        loaded = Plan.read(plan_dir)
        fleet = build_fleet(loaded, settings, source=plan_dir / "plan.json")
        with atomic_directory(output) as staging:
            fleet.write(staging)
    except GpuplanError as exc:
        raise fail(exc) from None
    for warning in fleet.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
    regions = ", ".join(fleet.regions)
    out.print(
        f"wrote {output}/: {len(fleet.node_pools)} NodePools, {len(fleet.node_classes)} EC2NodeClasses "
        f"in {regions} (kubectl apply -f {output}/<region>)",
        highlight=False,
    )


karpenter.__doc__ = _HELP
