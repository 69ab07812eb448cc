"""What-if runs: plan the base scenario and each variant of it, side by side, in parallel where it can.

A *variant* is a name and a list of changes in the grammar of ``models/variation.py``; ``base`` (no change)
is always planned first when a variant scales capacity relative to it (``capacity:H100=-50%`` means half
the nodes the base plan holds of each H100 offering), otherwise with the rest. Each variant's plan is
written to ``DIR/variants/<slug>/`` (plan.json, allocations.csv) so any one of them can be opened with
``gpuplan report``; the comparison (``whatif.json``) holds what the report shows.

Variants are independent MILPs, so they run in separate processes (one per core, each solver on one
thread): on this 2-core machine two variants solve at once; ``--cluster`` runs them on Dask instead, a
local cluster or a real one (``planner/planning/sweeps.py``). Each variant's inputs are read and changed
here and its plan is written here, whatever solved it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from models.errors import GpuplanError, InputError
from models.inputs import load_inputs
from models.plan import Plan, read_document
from models.tiers import Term
from models.variation import Variation, parse_all, parse_variation
from models.whatif import (
    FailedVariant,
    MonthlyCost,
    SolvedVariant,
    WhatifDocument,
    WhatifHorizon,
    within_gaps,
)
from models.yamlfile import read_yaml
from planner.planning.monthly import series
from planner.planning.sweeps import Engine, Failure, PlanJob, make_job, open_engine

BASE = "base"


@dataclass(frozen=True)
class Variant:
    """A name and its changes. ``origin`` says where it was given, for errors: a ``--vary`` flag
    (``--vary[2]``) names all its changes; an entry of the sweep file ``source`` (``variants[1]``) names
    each of them (``variants[1].vary[0]``)."""

    name: str
    changes: list[str] = field(default_factory=list)
    origin: str = ""
    source: str | None = None

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.name).strip("_") or "variant"

    def variations(self) -> list[Variation]:
        if self.origin and self.source is None:  # one --vary flag: its changes are named by the flag
            return [parse_variation(text, self.origin) for text in self.changes]
        # a sweep entry names each change (variants[1].vary[0]); a variant made in code, by its name
        where = f"{self.origin}.vary" if self.origin else f"variant {self.name!r} vary"
        return parse_all(self.changes, where)

    def described(self) -> str:
        """Where it was given, in words: ``--vary[1]``, ``variants[0] of sweep.yaml``."""
        if not self.origin:
            return f"variant {self.name!r}"
        return f"{self.origin} of {self.source}" if self.source else self.origin

    @property
    def relative_capacity(self) -> bool:
        return any(v.key == "capacity" and v.op != "=" for v in self.variations())


#: Most variants of one whatif (each is a plan solved) and most changes in one variant: far above any
#: study a person reads side by side, and a bound on what a sweep file or the flags can ask for.
MAX_VARIANTS = 200
MAX_CHANGES = 50
#: Longest variant name (it names a directory, variants/<slug>/).
MAX_NAME = 100


class _SweepVariant(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=MAX_NAME)
    vary: list[str] = Field(default_factory=list, max_length=MAX_CHANGES)


class _Sweep(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = ""
    variants: list[_SweepVariant] = Field(min_length=1, max_length=MAX_VARIANTS)


def variants_from_flags(texts: Sequence[str]) -> list[Variant]:
    """One variant per ``--vary``; several changes in one flag (``"demand=x1.3 spot_price=+50%"``) combine."""
    if len(texts) > MAX_VARIANTS:
        raise InputError(None, "--vary", f"{len(texts)} variants; at most {MAX_VARIANTS} in one whatif")
    result = []
    for index, text in enumerate(texts):
        changes = [part for part in re.split(r"[\s,;]+", text.strip()) if part]
        if not changes:
            raise InputError(None, f"--vary[{index}]", "no change given; e.g. --vary demand=x1.3")
        if len(changes) > MAX_CHANGES:
            raise InputError(
                None, f"--vary[{index}]", f"{len(changes)} changes; at most {MAX_CHANGES} in one variant"
            )
        result.append(Variant(" ".join(changes), changes, origin=f"--vary[{index}]"))
    return result


def load_sweep(path: str | Path) -> list[Variant]:
    """A sweep file: ``variants: [{name: ..., vary: [spot_price=+50%, ...]}, ...]``."""
    path = Path(path)
    data = read_yaml(path, "sweep file")
    return sweep_variants(path, data)


def sweep_variants(path: Path, data: Any) -> list[Variant]:
    """The variants of a sweep file's parsed content, checked: an InputError naming the file and the entry
    for anything else than ``variants:`` (or a bare list) of ``{name, vary}`` with string changes that
    parse, unique names, and at most one variant without changes (the base)."""
    if not isinstance(data, dict | list):
        found = "nothing (an empty file)" if data is None else _yaml_kind(data)
        raise InputError(path, None, f"expected variants: [{{name: ..., vary: [...]}}, ...], found {found}")
    try:
        sweep = _Sweep.model_validate(data if not isinstance(data, list) else {"variants": data})
    except ValidationError as exc:
        raise _sweep_error(path, exc) from None
    variants: list[Variant] = []
    first: dict[str, Variant] = {}
    for index, entry in enumerate(sweep.variants):
        where = f"variants[{index}]"
        if not entry.name.strip():
            raise InputError(path, f"{where}.name", "a variant's name cannot be blank")
        variant = Variant(entry.name, list(entry.vary), origin=where, source=str(path))
        other = first.get(variant.slug)
        if other is not None:
            problem = (
                f"{variant.name!r} is already the name of {other.origin}"
                if other.name == variant.name
                else f"{variant.name!r} and the name of {other.origin} ({other.name!r}) would both be "
                f"written to variants/{variant.slug}/"
            )
            raise InputError(path, f"{where}.name", problem)
        first[variant.slug] = variant
        unchanged = next((v for v in variants if not v.changes), None)
        if not variant.changes and unchanged is not None:
            raise InputError(
                path,
                f"{where}.vary",
                f"no changes, as {unchanged.origin} ({unchanged.name!r}): only one variant can be the base",
            )
        try:
            variant.variations()
        except InputError as error:
            raise InputError(path, error.where, error.problem) from None
        variants.append(variant)
    return variants


#: The keys of a sweep file and of one of its variants (``_Sweep``, ``_SweepVariant``).
_SWEEP_KEYS = {"file": tuple(_Sweep.model_fields), "variant": tuple(_SweepVariant.model_fields)}


def _sweep_error(path: Path, exc: ValidationError) -> InputError:
    """The first problem of a sweep file's content in words, at its place (``variants[1].vary[0]``)."""
    errors = exc.errors()
    error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc, kind, value = error["loc"], error["type"], error.get("input")
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
    in_variant = len(loc) > 1
    keys = _SWEEP_KEYS["variant" if in_variant else "file"]
    field = next((part for part in reversed(loc) if isinstance(part, str)), "")
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]), keys, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        owner = "a variant" if in_variant else "a sweep file"
        problem = f"unknown key{hint}; {owner} has {' and '.join(keys)}"
    elif kind == "missing":
        problem = "every variant needs a name" if field == "name" else "missing: list the variants here"
    elif kind == "too_short":
        problem = "no variants; list at least one: [{name: ..., vary: [demand=x1.3]}]"
    elif kind == "too_long" and field == "variants":
        problem = f"{len(value)} variants; at most {MAX_VARIANTS} in one sweep (split it into several)"
    elif kind == "too_long":
        problem = f"{len(value)} changes; at most {MAX_CHANGES} in one variant"
    elif kind == "string_too_long":
        problem = f"a name of {len(value)} characters; at most {MAX_NAME}"
    elif kind == "string_type":
        problem = f"expected a string, found {_yaml_kind(value)}"
        if isinstance(value, dict) and field == "vary":
            problem += " (write a change as one string: 'max_spot_share=0.3', not max_spot_share: 0.3)"
        elif isinstance(value, int | float):  # name: 2027, name: yes
            problem += " (put it in quotes)"
    elif kind == "list_type":
        problem = f"expected a list, found {_yaml_kind(value)}"
        if field == "vary":
            problem += " (vary: [demand=x1.3, spot_price=+50%])"
        elif field == "variants":
            problem += " (variants: [{name: ..., vary: [...]}, ...])"
    elif kind in ("model_type", "model_attributes_type", "dict_type"):
        problem = f"expected a variant {{name: ..., vary: [...]}}, found {_yaml_kind(value)}"
    else:
        problem = error["msg"]
    more = len(errors) - 1
    return InputError(path, where or None, problem + (f" (and {more} more)" if more else ""))


def _yaml_kind(value: Any) -> str:
    """What a parsed YAML value is, in words, with the value when it is short: ``a number (3)``."""
    if value is None:
        return "null (an empty value)"
    names = ((bool, "a boolean"), (int | float, "a number"), (str, "a string"), (list, "a list"),
             (dict, "a mapping"))  # fmt: skip
    kind = next((name for types, name in names if isinstance(value, types)), type(value).__name__)
    shown = repr(value)
    return f"{kind} ({shown})" if len(shown) <= 40 else kind


def plan_variants(base: Sequence[Variant], extra: Sequence[Variant]) -> list[Variant]:
    """``base`` first (added if no variant is unchanged), then the others; names must be unique."""
    variants = list(base) + list(extra)
    if not any(not v.changes for v in variants):
        variants.insert(0, Variant(BASE))
    seen: dict[str, Variant] = {}
    for variant in variants:
        other = seen.get(variant.slug)
        if other is not None:
            first = other.described() if other.origin else "the base (no changes)"
            raise InputError(
                None,
                "--vary/--sweep",
                f"two variants are named {variant.name!r} (or alike): {first} and {variant.described()}",
            )
        seen[variant.slug] = variant
    return variants


def check_variants(scenario: Path, variants: Sequence[Variant]) -> None:
    """Apply every variant's changes before solving anything, so a typo fails in a second, not an hour."""
    for variant in variants:
        variations = variant.variations()
        try:
            load_inputs(scenario, variations, reference_nodes={})
        except InputError as error:
            if variant.source is not None and error.where in {v.where for v in variations}:
                # a change of the sweep file: name that file, and the scenario it was applied to
                raise InputError(variant.source, error.where, f"{error.problem} (on {scenario})") from None
            raise


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


def _job(scenario: Path, variant: Variant, settings: Any, reference: dict[str, float] | None) -> PlanJob:
    """The variant's inputs, read and changed here (an InputError is the variant's failure)."""
    inputs = load_inputs(scenario, variant.variations(), reference)
    return make_job(variant.name, inputs.scenario, inputs.catalog, inputs.base_dir, settings)


def _row(variant: Variant, outcome: Plan | Failure, out_dir: Path) -> SolvedVariant | FailedVariant:
    """Write a variant's plan to ``out_dir/variants/<slug>/`` (here, whichever engine solved it) and
    summarize it; a failure becomes a row saying why."""
    if isinstance(outcome, Failure):
        return FailedVariant(name=variant.name, changes=list(variant.changes), error=outcome.message)
    target = out_dir / "variants" / variant.slug
    target.mkdir(parents=True, exist_ok=True)
    outcome.write(target)
    return summarize(variant, outcome, f"variants/{variant.slug}")


def _solve(
    engine: Engine,
    scenario: Path,
    variants: Sequence[Variant],
    out_dir: Path,
    settings: Any,
    reference: dict[str, float] | None,
    done: Callable[[SolvedVariant | FailedVariant], None],
) -> dict[str, SolvedVariant | FailedVariant]:
    """Plan ``variants`` on ``engine``; each row is reported to ``done`` as its variant finishes."""
    rows: dict[str, SolvedVariant | FailedVariant] = {}
    jobs: list[PlanJob] = []
    solving: list[Variant] = []
    for variant in variants:
        try:
            jobs.append(_job(scenario, variant, settings, reference))
            solving.append(variant)
        except GpuplanError as error:
            rows[variant.name] = FailedVariant(
                name=variant.name, changes=list(variant.changes), error=str(error)
            )
            done(rows[variant.name])

    def finished(index: int, outcome: Plan | Failure) -> None:
        variant = solving[index]
        rows[variant.name] = _row(variant, outcome, out_dir)
        done(rows[variant.name])

    engine.run(jobs, finished)
    return rows


def run_whatif(
    scenario: Path,
    variants: Sequence[Variant],
    out_dir: Path,
    settings: Any,
    workers: int | None = None,
    on_done: Callable[[SolvedVariant | FailedVariant], None] | None = None,
    cluster: str | None = None,
) -> WhatifDocument:
    """Plan every variant into ``out_dir`` and return the comparison (whatif.json's document).

    ``cluster`` and ``workers`` choose where the variants are solved (``planner/planning/sweeps.py``); the
    plans are written here in every case, so the result does not depend on the engine."""
    done = on_done or (lambda _row: None)
    rows: dict[str, SolvedVariant | FailedVariant] = {}
    base = next(v for v in variants if not v.changes)
    reference = None
    pending = list(variants)
    with open_engine(cluster, workers, len(variants)) as engine:
        if any(v.relative_capacity for v in variants):  # base first: its plan is the capacity reference
            rows.update(_solve(engine, scenario, [base], out_dir, settings, None, done))
            first_row = rows[base.name]
            if isinstance(first_row, SolvedVariant):
                reference = peak_nodes(Plan.read(out_dir / first_row.plan_dir))
            pending = [v for v in variants if v is not base]
        rows.update(_solve(engine, scenario, pending, out_dir, settings, reference, done))
    ordered = [rows[v.name] for v in variants]
    base_row = rows[base.name]
    base_total = base_row.total_usd if isinstance(base_row, SolvedVariant) else None
    solved = [row for row in ordered if isinstance(row, SolvedVariant)]
    if base_total and isinstance(base_row, SolvedVariant):
        for row in solved:
            row.delta_vs_base_usd = row.total_usd - base_total
            row.delta_vs_base_pct = 100.0 * (row.total_usd - base_total) / base_total
            if row is not base_row:
                row.significant_vs_base = not within_gaps(row.total_usd, row.gap, base_total, base_row.gap)
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
