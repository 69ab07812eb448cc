"""``whatif.json``: the comparison ``gpuplan whatif`` writes (schema ``gpuplan.whatif/v1``).

One entry per variant, in the order they were given, the base first. A variant whose plan was made is a
:class:`SolvedVariant`: what its ``plan.json`` says (cost, tier mix, commitments, unserved demand, solver
gap), its cost per 730-hour month (``planner/planning/monthly.py``) and how it compares with the base. A
variant that could not be planned is a :class:`FailedVariant` with the error (``status: "failed"``). Money is
USD over the horizon; percentages are in percent units (``-12.3``), shares (``tier_mix``) are fractions.

The planner builds these models, the file is written through them and the report reads them, so a field
means one thing everywhere and a damaged file fails on reading, naming the field
(:meth:`WhatifDocument.read`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import ConfigDict, Discriminator, Field, Tag, model_validator

from models.documents import DocumentPart, read_json_document
from models.plan import FuturesOutcome, Unserved, UtcTime
from models.tiers import Term, Tier

__all__ = [
    "SCHEMA",
    "FailedVariant",
    "MonthlyCost",
    "SolvedVariant",
    "WhatifDocument",
    "WhatifHorizon",
    "WhatifVariant",
    "within_gaps",
]

SCHEMA: Final = "gpuplan.whatif/v1"


class MonthlyCost(DocumentPart):
    """A variant's cost per 730-hour month of the horizon, by tier (commitments spread evenly)."""

    month: list[str] = Field(min_length=1, description="the day each month starts, 2027-01-31")
    by_tier: dict[Tier, list[float]] = Field(description="USD per month, one value per entry of month")

    @model_validator(mode="after")
    def _one_value_per_month(self) -> MonthlyCost:
        for tier, values in self.by_tier.items():
            if len(values) != len(self.month):
                raise ValueError(f"by_tier.{tier} has {len(values)} values for {len(self.month)} months")
        return self


def within_gaps(a_usd: float, a_gap: float, b_usd: float, b_gap: float) -> bool:
    """Whether two plans' costs differ by less than their certified gaps say they could: the costlier
    plan's lower bound (its cost less its gap) is at or below the cheaper plan's cost, so the best plans
    of the two could rank either way and the difference is not a finding (issue 42). Gaps as plan.json
    ``solver.gap``: a fraction of the plan's cost."""
    (high, high_gap), (low, _low_gap) = sorted([(a_usd, a_gap), (b_usd, b_gap)], reverse=True)
    return high * (1.0 - high_gap) <= low


class SolvedVariant(DocumentPart):
    """A variant that has a plan (in ``plan_dir``, relative to the whatif directory)."""

    name: str = Field(min_length=1)
    changes: list[str] = Field(description="the --vary changes applied to the base scenario")
    status: str = Field(description="the solver's status: optimal, feasible, time_limit, ...")
    error: None = None
    plan_dir: str
    total_usd: float
    all_on_demand_usd: float
    savings_vs_on_demand_pct: float | None = Field(description="None when all on-demand costs nothing")
    by_tier: dict[Tier, float]
    tier_mix: dict[Tier, float] = Field(description="each tier's share of total_usd (0..1)")
    commitments: dict[Term, int] = Field(description="nodes bought per term; terms with none are left out")
    committed_gpus: int
    unserved: list[Unserved]
    gap: float
    seconds: float
    monthly: MonthlyCost
    cumulative_usd: list[float] = Field(description="cost paid by the end of each month")
    delta_vs_base_usd: float | None = Field(description="total_usd - the base's; None when the base failed")
    delta_vs_base_pct: float | None
    significant_vs_base: bool | None = Field(
        None,
        description="False when the difference from the base is within the two plans' certified gaps "
        "(within_gaps): not a finding; None for the base, when the base failed, or in older files",
    )

    @model_validator(mode="after")
    def _cumulative_per_month(self) -> SolvedVariant:
        if len(self.cumulative_usd) != len(self.monthly.month):
            raise ValueError(
                f"cumulative_usd has {len(self.cumulative_usd)} values for {len(self.monthly.month)} months"
            )
        return self


class FailedVariant(DocumentPart):
    """A variant that could not be planned, and why."""

    name: str = Field(min_length=1)
    changes: list[str]
    status: Literal["failed"] = "failed"
    error: str


def _variant_kind(value: Any) -> str:
    status = value.get("status") if isinstance(value, dict) else getattr(value, "status", None)
    return "failed" if status == "failed" else "solved"


#: One variant of the comparison: ``status == "failed"`` marks a failed one.
WhatifVariant = Annotated[
    Annotated[SolvedVariant, Tag("solved")] | Annotated[FailedVariant, Tag("failed")],
    Discriminator(_variant_kind),
]


class WhatifHorizon(DocumentPart):
    """The planned horizon (of the first variant with a plan); both None when every variant failed."""

    start: UtcTime | None
    hours: int | None

    @model_validator(mode="after")
    def _both_or_neither(self) -> WhatifHorizon:
        if (self.start is None) != (self.hours is None):
            raise ValueError("start and hours are given together (both null when every variant failed)")
        return self


class WhatifDocument(DocumentPart):
    """``whatif.json``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)

    schema_: Literal["gpuplan.whatif/v1"] = Field(SCHEMA, alias="schema")
    scenario: str = Field(min_length=1)
    created: UtcTime
    base: str = Field(description="the name of the variant the others are compared with")
    horizon: WhatifHorizon
    variants: list[WhatifVariant] = Field(min_length=1)
    futures: FuturesOutcome | None = Field(
        None, description="with --futures: the base planned over those demand futures (futures/futures.json)"
    )

    @model_validator(mode="after")
    def _names(self) -> WhatifDocument:
        names = [v.name for v in self.variants]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"variant names must be unique: {', '.join(map(repr, twice))} appear twice")
        if self.base not in names:
            raise ValueError(f"base {self.base!r} is not among the variants ({', '.join(map(repr, names))})")
        return self

    @property
    def base_variant(self) -> SolvedVariant | FailedVariant:
        return next(v for v in self.variants if v.name == self.base)

    def to_json(self) -> str:
        exclude = {"futures"} if self.futures is None else None  # the file's keys as before, without
        return json.dumps(self.model_dump(mode="json", by_alias=True, exclude=exclude), indent=2) + "\n"

    @classmethod
    def read(cls, path: str | Path) -> WhatifDocument:
        """whatif.json, validated; InputError naming the file and the field for anything wrong."""
        return read_json_document(path, cls, SCHEMA, "gpuplan whatif")
