"""What-if runs: plan the base scenario and each variant of it, side by side, in parallel where it can.

A *variant* is a name and a list of changes in the grammar of ``models/variation.py``; ``base`` (no change)
is always planned first when a variant scales capacity relative to it (``capacity:H100=-50%`` means half
the nodes the base plan holds of each H100 offering), otherwise with the rest. Each variant's plan is
written to ``DIR/variants/<slug>/`` (plan.json, allocations.csv) so any one of them can be opened with
``gpuplan report``; the comparison (``whatif.json``) holds what the report shows.

Variants are independent MILPs, so they run in separate processes (one per core, each solver on one
thread): on this 2-core machine two variants solve at once.
"""

from __future__ import annotations

import multiprocessing
import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from models.errors import GpuplanError, InputError
from models.plan import Plan, read_document
from models.tiers import Term
from models.variation import Variation, parse_all
from models.whatif import FailedVariant, MonthlyCost, SolvedVariant, WhatifDocument, WhatifHorizon
from models.yamlfile import read_yaml
from planner.inputs import load_inputs
from planner.monthly import series

BASE = "base"


@dataclass(frozen=True)
class Variant:
    name: str
    changes: list[str] = field(default_factory=list)

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.name).strip("_") or "variant"

    def variations(self) -> list[Variation]:
        return parse_all(self.changes, f"variant {self.name!r} vary")

    @property
    def relative_capacity(self) -> bool:
        return any(v.key == "capacity" and v.op != "=" for v in self.variations())


class _SweepVariant(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    vary: list[str] = Field(default_factory=list)


class _Sweep(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = ""
    variants: list[_SweepVariant] = Field(min_length=1)


def variants_from_flags(texts: Sequence[str]) -> list[Variant]:
    """One variant per ``--vary``; several changes in one flag (``"demand=x1.3 spot_price=+50%"``) combine."""
    result = []
    for text in texts:
        changes = [part for part in re.split(r"[\s,;]+", text.strip()) if part]
        result.append(Variant(" ".join(changes), changes))
    return result


def load_sweep(path: str | Path) -> list[Variant]:
    """A sweep file: ``variants: [{name: ..., vary: [spot_price=+50%, ...]}, ...]``."""
    path = Path(path)
    data = read_yaml(path, "sweep file")
    try:
        sweep = _Sweep.model_validate(data if not isinstance(data, list) else {"variants": data})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise InputError(path, where, error["msg"]) from None
    variants = [Variant(v.name, list(v.vary)) for v in sweep.variants]
    for variant in variants:
        try:
            variant.variations()
        except InputError as error:
            raise InputError(path, error.where, error.problem) from None
    return variants


def plan_variants(base: Sequence[Variant], extra: Sequence[Variant]) -> list[Variant]:
    """``base`` first (added if no variant is unchanged), then the others; names must be unique."""
    variants = list(base) + list(extra)
    if not any(not v.changes for v in variants):
        variants.insert(0, Variant(BASE))
    seen: set[str] = set()
    for variant in variants:
        if variant.slug in seen:
            raise InputError(None, "--vary/--sweep", f"two variants are named {variant.name!r} (or alike)")
        seen.add(variant.slug)
    return variants


def check_variants(scenario: Path, variants: Sequence[Variant]) -> None:
    """Apply every variant's changes before solving anything, so a typo fails in a second, not an hour."""
    for variant in variants:
        load_inputs(scenario, variant.variations(), reference_nodes={})


def peak_nodes(plan: Plan) -> dict[str, float]:
    """Most nodes of each offering held at once in a plan (the reference for relative capacity)."""
    alloc = plan.allocations
    if not len(alloc):
        return {}
    per_period = alloc.groupby(["offering", "period"])["nodes"].sum()
    return {str(k): float(v) for k, v in per_period.groupby(level=0).max().items()}


def summarize(variant: Variant, plan: Plan, plan_dir: str) -> SolvedVariant:
    """The comparison row of one variant, from its plan only (what any reader of plan.json would see);
    the comparison with the base is filled in by :func:`run_whatif`."""
    document = plan.document
    total = document.costs.total_usd
    by_tier = dict(document.costs.by_tier)
    on_demand = document.baselines.all_on_demand_usd
    commitments: dict[Term, int] = {}
    gpus = 0
    for c in document.commitments:
        if c.existing:  # held already: the same in every variant, not a decision to compare
            continue
        commitments[c.term] = commitments.get(c.term, 0) + c.nodes
        gpus += c.nodes * document.offerings[c.offering].gpus_per_node
    monthly = MonthlyCost.model_validate(series(plan))
    totals = [sum(values[m] for values in monthly.by_tier.values()) for m in range(len(monthly.month))]
    cumulative, running = [], 0.0
    for value in totals:
        running += value
        cumulative.append(running)
    return SolvedVariant(
        name=variant.name,
        changes=list(variant.changes),
        status=document.solver.status,
        plan_dir=plan_dir,
        total_usd=total,
        all_on_demand_usd=on_demand,
        savings_vs_on_demand_pct=100.0 * (on_demand - total) / on_demand if on_demand else None,
        by_tier=by_tier,
        tier_mix={tier: value / total for tier, value in by_tier.items()} if total else {},
        commitments=commitments,
        committed_gpus=gpus,
        unserved=list(document.unserved),
        gap=document.solver.gap,
        seconds=document.solver.seconds,
        monthly=monthly,
        cumulative_usd=cumulative,
        delta_vs_base_usd=None,
        delta_vs_base_pct=None,
    )


@dataclass(frozen=True)
class _Job:
    scenario: str
    variant: Variant
    out_dir: str
    settings: Any  # planner.optimize.SolveSettings (imported in the worker)
    reference: dict[str, float] | None


def _run(job: _Job) -> SolvedVariant | FailedVariant:
    """Plan one variant (in a worker process); a failure becomes a row saying why, not a crash."""
    from planner.optimize import optimize

    try:
        inputs = load_inputs(job.scenario, job.variant.variations(), job.reference)
        plan = optimize(inputs.scenario, inputs.catalog, inputs.base_dir, job.settings)
        target = Path(job.out_dir) / "variants" / job.variant.slug
        target.mkdir(parents=True, exist_ok=True)
        plan.write(target)
        return summarize(job.variant, plan, f"variants/{job.variant.slug}")
    except GpuplanError as error:
        return FailedVariant(name=job.variant.name, changes=list(job.variant.changes), error=str(error))


def run_whatif(
    scenario: Path,
    variants: Sequence[Variant],
    out_dir: Path,
    settings: Any,
    workers: int | None = None,
    on_done: Callable[[SolvedVariant | FailedVariant], None] | None = None,
) -> WhatifDocument:
    """Plan every variant into ``out_dir`` and return the comparison (whatif.json's document)."""
    done = on_done or (lambda _row: None)
    workers = max(1, min(workers or os.cpu_count() or 1, len(variants)))
    rows: dict[str, SolvedVariant | FailedVariant] = {}
    base = next(v for v in variants if not v.changes)
    reference = None
    pending = list(variants)
    if any(v.relative_capacity for v in variants):  # base first: its plan is the capacity reference
        rows[base.name] = _run(_Job(str(scenario), base, str(out_dir), settings, None))
        done(rows[base.name])
        first_row = rows[base.name]
        if isinstance(first_row, SolvedVariant):
            reference = peak_nodes(Plan.read(out_dir / first_row.plan_dir))
        pending = [v for v in variants if v is not base]
    if workers == 1 or len(pending) <= 1:
        # in this process, with the caller's settings: HiGHS refuses a thread count other than the one
        # its scheduler started with in this process (status 'error')
        for variant in pending:
            rows[variant.name] = _run(_Job(str(scenario), variant, str(out_dir), settings, reference))
            done(rows[variant.name])
    else:
        one_core = replace(settings, threads=1)  # one core per variant, each in its own process
        jobs = [_Job(str(scenario), v, str(out_dir), one_core, reference) for v in pending]
        # spawn, not fork: a forked child inherits HiGHS's thread pool from a parent that already solved
        # (the base variant, or a test process) and fails with status 'error'
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=spawn) as pool:
            futures = [pool.submit(_run, job) for job in jobs]
            for future in as_completed(futures):
                row = future.result()
                rows[row.name] = row
                done(row)
    ordered = [rows[v.name] for v in variants]
    base_row = rows[base.name]
    base_total = base_row.total_usd if isinstance(base_row, SolvedVariant) else None
    solved = [row for row in ordered if isinstance(row, SolvedVariant)]
    if base_total:
        for row in solved:
            row.delta_vs_base_usd = row.total_usd - base_total
            row.delta_vs_base_pct = 100.0 * (row.total_usd - base_total) / base_total
    # the horizon and name are in plan.json: no need to parse the plan's allocations.csv too
    reference_plan = read_document(out_dir / solved[0].plan_dir / "plan.json") if solved else None
    if reference_plan is not None:
        horizon = WhatifHorizon(start=reference_plan.horizon.start, hours=reference_plan.horizon.hours)
    else:
        horizon = WhatifHorizon(start=None, hours=None)
    return WhatifDocument(
        scenario=reference_plan.scenario if reference_plan else scenario.stem,
        created=datetime.now(UTC).replace(microsecond=0),
        base=base.name,
        horizon=horizon,
        variants=ordered,
    )
