"""Training: each placed run is one gang on one offering that fits it, inside its window, held long enough,
with rows exactly in the periods it runs and costing what the run says; every other run listed unserved;
spot within its share.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import cast

import pandas as pd

from models.plan import TrainingPlacement, UnservedTraining
from models.preemption import DEFAULT_RESTART_MINUTES, DEFAULT_WRITE_MINUTES, spot_overhead
from models.tiers import OWN_NODE_TIERS, Tier
from models.workloads import TrainingRun
from planner.verify.context import BLOCK, EPS, HELD, SPOT, Context, close
from planner.verify.findings import Findings, Violation

__all__ = ["check_training"]


def check_training(ctx: Context, findings: Findings, rows: pd.DataFrame) -> None:
    placed: dict[tuple[str, int], TrainingPlacement] = {}
    for placement in ctx.plan.document.training:
        key = (placement.job, placement.run)
        where: dict[str, int | str | None] = {
            "workload": placement.job, "offering": placement.offering, "period": placement.start_period,
        }  # fmt: skip
        run = ctx.runs.get(key)
        if run is None or key in placed:
            what = "placed twice" if key in placed else "not a run of the scenario"
            findings.add("unknown-run", f"{placement.job} run {placement.run}: {what}", **where)
            continue
        placed[key] = placement
        _check_placement(ctx, findings, run, placement)
    _check_rows(ctx, findings, rows, placed)
    _check_costs(findings, rows, placed)
    unserved = {(u.workload, u.run) for u in ctx.plan.document.unserved if isinstance(u, UnservedTraining)}
    for key, run in ctx.runs.items():
        if key not in placed and key not in unserved:
            findings.add(
                "unserved-unlisted",
                f"{run.name} run {run.run}: neither placed nor listed unserved",
                workload=run.name,
            )
    served = [(ctx.runs[key], p) for key, p in placed.items()]
    total = sum(run.gpus * run.job.hours for run, _ in served)
    on_spot = sum(run.gpus * run.job.hours for run, p in served if p.tier == Tier.SPOT)
    share = ctx.scenario.purchase.max_spot_share
    if on_spot > share * total * (1 + 1e-9) + EPS:
        findings.add(
            "spot-share",
            f"{on_spot:,.0f} of {total:,.0f} training GPU-hours on spot ({on_spot / total:.1%}); "
            f"max_spot_share {share:.0%}",
        )


def _check_placement(
    ctx: Context, findings: Findings, run: TrainingRun, placement: TrainingPlacement
) -> None:
    job = run.job
    where: dict[str, int | str | None] = {
        "workload": job.name, "offering": placement.offering, "period": placement.start_period,
    }  # fmt: skip
    name = f"{job.name} run {run.run}"
    offering = ctx.offerings.get(placement.offering)
    if offering is None:
        findings.add(
            "unknown-offering",
            f"{name} on {placement.offering}: not an offering the scenario may buy",
            **where,
        )
    else:
        if not offering.matches_gpu(job.gpu_models) or offering.gpus_per_node != job.gpus_per_node:
            findings.add(
                "ineligible-offering",
                f"{name} ({job.gpus_per_node} x {'/'.join(job.gpu_models)} per node) on "
                f"{offering.gpus_per_node} x {offering.gpu_model} nodes",
                **where,
            )
        if job.needs_fabric and not offering.has_fabric:
            findings.add(
                "fabric", f"{name} needs a multi-node fabric; {placement.offering} has none", **where
            )
    if placement.nodes != job.nodes:
        findings.add("gang-size", f"{name}: {placement.nodes} nodes placed, the job is {job.nodes}", **where)
    end = placement.start_period + placement.periods
    if placement.start_period < run.first_period or end > run.end_period:
        findings.add(
            "window",
            f"{name} holds periods {placement.start_period}..{end - 1}; its window is {run.first_period}.."
            f"{run.end_period - 1}",
            **where,
        )
    held = placement.periods * ctx.p
    needed = job.hours
    if placement.tier == Tier.SPOT:
        if not job.preemptible:
            findings.add("spot-not-preemptible", f"{name} is on spot but not preemptible", **where)
        if offering is not None:
            checkpoint = job.checkpoint
            overhead = spot_overhead(
                work_hours=job.hours,
                nodes=job.nodes,
                per_node_rate_per_hour=offering.spot_interruptions_per_hour,
                write_minutes=checkpoint.write_minutes if checkpoint else DEFAULT_WRITE_MINUTES,
                restart_minutes=checkpoint.restart_minutes if checkpoint else DEFAULT_RESTART_MINUTES,
            )
            needed = max(needed, overhead.expected_wall_hours)
    if held < math.ceil(needed / ctx.p - 1e-9) * ctx.p:
        findings.add(
            "duration", f"{name} held {held} h; it needs {needed:,.2f} h ({placement.tier})", **where
        )


def _check_rows(
    ctx: Context, findings: Findings, rows: pd.DataFrame, placed: dict[tuple[str, int], TrainingPlacement]
) -> None:
    """Rows of each job: exactly in the periods its runs hold, on their offering and capacity, gang-sized."""
    training = rows[rows["kind"] == "training"]
    expected: dict[tuple[str, int], list[TrainingPlacement]] = defaultdict(list)
    for p in placed.values():
        for period in range(p.start_period, p.start_period + p.periods):
            expected[(p.job, period)].append(p)
    actual = training.groupby(["workload", "period"])
    for key, group in actual:
        workload, when = cast(tuple[str, int], key)
        job, period = str(workload), int(when)
        runs = expected.get((job, period))
        if not runs:
            findings.add(
                "training-rows",
                f"{job} has rows in period {period}, where no run of it is placed",
                period=period,
                workload=job,
            )
            continue
        offerings = {p.offering for p in runs}
        seen = sorted(set(zip(group["offering"], group["tier"], strict=True)))
        capacities = {
            SPOT if p.tier == Tier.SPOT else BLOCK if p.tier in OWN_NODE_TIERS else HELD for p in runs
        }
        if not set(group["offering"]) <= offerings or not set(group["capacity"]) <= capacities:
            findings.add_many(
                "gang-split",
                1,
                [
                    Violation(
                        kind="gang-split",
                        message=f"{job}: rows on {seen}"
                        f"; placed on {sorted((p.offering, str(p.tier)) for p in runs)}",
                        period=period,
                        workload=job,
                    )
                ],
            )
        nodes = float(group["nodes"].sum())
        gang = sum(ctx.jobs[job].nodes for _ in runs)
        if abs(nodes - gang) > EPS:
            findings.add(
                "gang-size",
                f"{job}: {nodes:g} nodes in its rows, the gang is {gang}",
                period=period,
                workload=job,
            )
    have = set(actual.groups)
    missing = [key for key in expected if key not in have]
    findings.add_many(
        "training-rows",
        len(missing),
        (
            Violation(
                kind="training-rows",
                message=f"{job} is placed in period {period} but has no rows there",
                period=period,
                workload=job,
            )
            for job, period in sorted(missing)
        ),
    )


def _check_costs(
    findings: Findings, rows: pd.DataFrame, placed: dict[tuple[str, int], TrainingPlacement]
) -> None:
    """A run's ``cost_usd`` is what its rows cost (spot or on-demand node-hours; committed rows cost 0):
    chargeback, the portal and the report show it as the run's cost. Rows name the job, not the run, so
    runs of one job that overlap in time are checked together against the rows of the periods they hold."""
    training = rows[rows["kind"] == "training"]
    cost = training.groupby(["workload", "period"])["cost_usd"].sum()
    by_job: dict[str, list[TrainingPlacement]] = defaultdict(list)
    for placement in placed.values():
        by_job[placement.job].append(placement)
    for job, runs in sorted(by_job.items()):
        runs.sort(key=lambda p: (p.start_period, p.run))
        groups: list[list[TrainingPlacement]] = []
        end = -1
        for run in runs:  # runs whose periods overlap form one group
            if groups and run.start_period < end:
                groups[-1].append(run)
            else:
                groups.append([run])
            end = max(end, run.start_period + run.periods)  # a new group starts at or after ``end``
        for group in groups:
            periods = {t for p in group for t in range(p.start_period, p.start_period + p.periods)}
            theirs = sum(p.cost_usd for p in group)
            ours = float(sum(cost.get((job, t), 0.0) for t in periods))
            if not close(theirs, ours, rel=1e-6, abs_=0.01):
                names = ", ".join(str(p.run) for p in group)
                findings.add(
                    "training-cost",
                    f"{job} run {names}: cost_usd ${theirs:,.2f} in plan.json; its rows cost ${ours:,.2f}",
                    workload=job,
                    offering=group[0].offering,
                    period=group[0].start_period,
                )
