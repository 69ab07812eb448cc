"""``gpuplan verify``: an independent check of a plan directory against its scenario and catalog.

It shares no code with the optimizer: it reads the inputs as every command does (``models/inputs.py``,
``adjust:`` applied) and re-derives everything else from ``models.*``, so a bug in the planner's sets,
dispatch or extraction cannot hide itself. One module per responsibility:

- ``findings``: violation kinds (stable codes) and how they are collected and reported;
- ``context``: what a plan is compared against (offerings, replica shapes, committed nodes, demand);
- ``rows``: the header and what one row can break on its own;
- ``billing``: the billing rule, ``max_nodes``, commitments and cost totals;
- ``demand``: inference replicas against demand and ``unserved[]``;
- ``training``: gangs, windows, durations, rows per period, unserved runs, the spot share;
- ``teams``: burst limits and guarantees (a max flow);
- ``packing``: an explicit assignment of each period's work onto whole nodes, GPUs and MIG slices;
- ``mig``: the MIG configs plan.json schedules (and mig-config.yaml writes) hold each period's MIG
  replicas, in legal layouts, on no more nodes than the plan holds.
"""

from __future__ import annotations

import time
from pathlib import Path

from models.inputs import Inputs, load_inputs
from models.plan import Plan
from planner.verify.billing import check_billing, check_commitment_rows, check_commitments, check_costs
from planner.verify.blocks import check_blocks
from planner.verify.context import Context
from planner.verify.demand import check_demand
from planner.verify.findings import KINDS, Findings, KindSummary, VerifyReport, Violation
from planner.verify.flex_start import check_flex_start
from planner.verify.mig import check_mig, read_mig_file
from planner.verify.packing import check_packing
from planner.verify.payments import check_cash
from planner.verify.rows import check_header, check_rows
from planner.verify.savingsplans import check_savings_plans
from planner.verify.teams import check_teams
from planner.verify.training import check_training

__all__ = [
    "KINDS",
    "Findings",
    "KindSummary",
    "VerifyReport",
    "Violation",
    "verify",
    "verify_directory",
    "verify_inputs",
]


def verify(inputs: Inputs, plan: Plan, examples: int = 20, directory: Path | None = None) -> Findings:
    """Every check on ``plan``; the violations found, by kind (empty: the plan keeps every rule).

    ``directory``, the plan's directory, adds its mig-config.yaml to what is checked (without it, the
    MIG configs are plan.json's own ``mig.config``)."""
    findings = Findings(examples)
    ctx = Context(inputs.scenario, inputs.catalog, inputs.base_dir, plan)
    check_header(ctx, findings)
    rows = check_rows(ctx, findings)
    counts = check_billing(ctx, findings, rows)
    check_commitments(ctx, findings)
    check_commitment_rows(ctx, findings, rows)
    check_costs(ctx, findings, rows)
    check_cash(ctx, findings)
    check_savings_plans(ctx, findings, rows)
    check_demand(ctx, findings, rows)
    check_training(ctx, findings, rows)
    check_blocks(ctx, findings, rows)
    check_flex_start(ctx, findings, rows)
    check_teams(ctx, findings, rows)
    check_packing(ctx, findings, rows, counts)
    check_mig(ctx, findings, rows, counts, read_mig_file(directory))
    return findings


def verify_directory(scenario: Path, plan_dir: Path, examples: int = 20) -> VerifyReport:
    """Read the scenario (InputError if unreadable) and the plan directory, and verify."""
    return verify_inputs(load_inputs(scenario), scenario, plan_dir, examples)


def verify_inputs(inputs: Inputs, scenario: Path, plan_dir: Path, examples: int = 20) -> VerifyReport:
    """Verify the plan directory against inputs already read from ``scenario`` (``gpuplan plan`` checks
    what it has just written, read back from disk as any reader would)."""
    began = time.perf_counter()
    plan = Plan.read(plan_dir, trusted=False)  # a plan whose files disagree: its violations, one by one
    findings = verify(inputs, plan, examples, plan_dir)
    return VerifyReport(
        plan=str(plan_dir),
        scenario=str(scenario),
        ok=findings.ok,
        violations=findings.total,
        kinds=findings.summary(),
        seconds=round(time.perf_counter() - began, 3),
    )
