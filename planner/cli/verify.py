"""`gpuplan verify`: a plan directory checked against its scenario, independently of the optimizer."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from models.errors import GpuplanError, InputError
from models.plan import plan_json_path, read_document
from models.scenario import Scenario
from planner.cli.common import EXIT_VIOLATIONS, err, fail, out

if TYPE_CHECKING:
    from planner.verify import VerifyReport

__all__ = ["print_violations", "verify", "verify_help"]


def verify_help() -> str:
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


def verify(
    scenario: Annotated[Path, typer.Argument(help="the scenario YAML the plan was made from")],
    plan_dir: Annotated[Path, typer.Argument(help="a plan directory written by `gpuplan plan`")],
    as_json: Annotated[bool, typer.Option("--json", help="print the violations as JSON")] = False,
    examples: Annotated[int, typer.Option(help="examples kept per violation kind")] = 3,
    prices: Annotated[
        Path | None,
        typer.Option("--prices", help="the pricing overlay the plan was made with (gpuplan plan --prices)"),
    ] = None,
) -> None:
    from models.inputs import load_inputs
    from planner.verify import verify_inputs

    try:
        if examples < 0:
            raise InputError(None, "--examples", f"must be at least 0, got {examples}")
        inputs = load_inputs(scenario, prices=prices)
        _check_plan_is_of(inputs.scenario, scenario, plan_dir, inputs.catalog.overlays)
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
        print_violations(report, str(plan_dir))
    if not report.ok:
        raise typer.Exit(EXIT_VIOLATIONS)


def _check_plan_is_of(loaded: Scenario, scenario: Path, plan_dir: Path, overlays: tuple[str, ...]) -> None:
    """A plan made from another scenario, or with other pricing overlays, is the wrong argument, not a plan
    with violations: every check would fail (or every cost differ). InputError naming both."""
    document = read_document(plan_json_path(plan_dir))
    made_with = document.prices.overlays if document.prices is not None else None
    if made_with is not None and list(made_with) != list(overlays):
        said = ", ".join(made_with) or "no pricing overlay"
        given = ", ".join(overlays) or "none"
        raise InputError(
            plan_dir / "plan.json",
            "prices.overlays",
            f"the plan was priced with {said}, this check with {given}: give verify the same --prices",
        )
    if document.scenario != loaded.name:
        raise InputError(
            plan_dir / "plan.json",
            "scenario",
            f"the plan was made from scenario {document.scenario!r}, not {loaded.name!r} ({scenario}); "
            "verify a plan against the scenario it was made from",
        )


def print_violations(report: VerifyReport, label: str) -> None:
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
