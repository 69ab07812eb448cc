"""Demand futures and what a plan over them reports (issue 41): the futures file a user writes, and
``futures.json`` (schema ``gpuplan.futures/v2``; v1, without the risk constraints, still loads) that
``gpuplan futures`` writes.

A future is the scenario with changes (the what-if grammar of ``models/variation.py``: ``demand=x0.8``,
``growth:chat=x1.5``) and a weight; the weights are normalized to sum to 1. The first-stage decision, made
now and held in every future, is what to buy (commitments and savings plans, each at its purchase step);
the second stage, per future, is everything else (on-demand, spot, training placement). A ``risk`` setting
ranks first stages by ``(1 - weight) * expected cost + weight * CVaR`` of the cost at level ``cvar`` (the
mean of the costliest ``1 - cvar`` of the futures' weight), so a cautious plan can be asked for. Two
constraints narrow the candidates before that ranking: ``cap`` (a quantile of the cost, the P90 by
default, at most ``usd``) and ``committed_share`` (a chance constraint after Bülbül, Noyan and Erol, EJOR
288(3), 2021, https://doi.org/10.1016/j.ejor.2020.06.027: in futures weighing at least ``probability``,
at least ``min`` of the latency-critical inference node-hours run on committed capacity: node
commitments, capacity reservations, owned nodes and savings plans, ``models.tiers.PREPAID_TIERS``).

Money is USD: each plan's objective over the horizon (unserved demand priced at its penalty) plus, with
``tail: carried`` (the default), the cost after the horizon to the end of the longest term any candidate
buys, with the future's last month of demand carried forward: the commitments still running are paid and
cover what they can, on demand serves the rest (spot is left out of the tail; savings plans still running
are counted as paid and covering nothing, a cautious simplification). So a purchase cannot look cheap by
pushing idle obligations past the horizon. ``tail: none`` counts the horizon alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final, Literal

from pydantic import ConfigDict, Field, model_validator

from models.documents import DocumentPart, read_json_document, validation_error
from models.errors import InputError
from models.numbers import StrictModel
from models.plan import FuturesOutcome, UtcTime
from models.tiers import Term
from models.variation import parse_all
from models.yamlfile import read_yaml

__all__ = [
    "FULL_OWN_PLANS",
    "READ_SCHEMAS",
    "SCHEMA",
    "Candidate",
    "CommitmentUse",
    "CommittedShare",
    "CostCap",
    "FutureSpec",
    "FuturesDocument",
    "FuturesFile",
    "FuturesSummary",
    "MasterSummary",
    "OwnPlans",
    "Purchase",
    "Risk",
    "SecondStage",
    "cvar",
    "load_futures",
    "quantile_name",
    "weighted_quantile",
]

SCHEMA: Final = "gpuplan.futures/v2"
#: Schemas this gpuplan reads: its own and v1 (before risk.cap and risk.committed_share).
READ_SCHEMAS: Final = ("gpuplan.futures/v2", "gpuplan.futures/v1")
#: Most futures in one file: each is planned once and priced once per candidate first stage.
MAX_FUTURES: Final = 50


class FutureSpec(StrictModel):
    """One demand future: a name, its weight (any positive number: the weights are normalized) and the
    changes that make it from the scenario (none: the scenario as written, the point forecast)."""

    name: str = Field(min_length=1, max_length=100)
    weight: float = Field(1.0, gt=0, le=1e6, description="relative weight; normalized over the futures")
    vary: list[str] = Field(default_factory=list, max_length=20, description="what-if changes, demand=x0.8")
    series: dict[str, str] = Field(
        default_factory=dict,
        description="service -> a demand CSV (hour,replicas) for this future, relative to the futures file "
        "(what gpuplan demand writes under futures/)",
    )


class CostCap(StrictModel):
    """A cap on a quantile of a first stage's cost over the futures: a buyer's "the P90 stays within
    budget", which the expected cost alone cannot promise."""

    quantile: float = Field(0.9, gt=0, le=1, description="the weighted (lower) quantile capped: 0.9 the P90")
    usd: float = Field(gt=0, lt=1e15, description="the most that quantile of the cost may be, USD")


class CommittedShare(StrictModel):
    """A chance constraint on latency-critical inference served from committed capacity: committed nodes
    are held for the fleet, on-demand ones may not be there when a region runs short."""

    min: float = Field(
        ge=0, le=1, description="least share of the latency-critical inference node-hours on committed tiers"
    )
    probability: float = Field(
        gt=0, le=1, description="least weight of the futures in which that share is reached"
    )


class Risk(StrictModel):
    """How first stages are ranked: ``(1 - weight) * expected + weight * CVaR at cvar``, among those that
    meet ``cap`` and ``committed_share`` when given."""

    cvar: float = Field(
        0.9, gt=0, lt=1, description="CVaR level: the mean of the costliest 1 - cvar of weight"
    )
    weight: float = Field(0.0, ge=0, le=1, description="0: the expected cost alone; 1: the CVaR alone")
    cap: CostCap | None = Field(None, description="a cap on a quantile of the cost (the P90 by default)")
    committed_share: CommittedShare | None = Field(
        None, description="a chance constraint on the latency-critical demand served from committed capacity"
    )


#: How what is owed after the horizon counts: ``carried`` (each future's last month of demand carried to the
#: end of the longest term any candidate buys, served by the commitments still running and on demand beyond
#: them) or ``none`` (the horizon alone; obligations reported, not counted).
TailRule = Literal["carried", "none"]
#: How each candidate is priced in each future: ``fleet`` (the future's own plan's fleet billed with the
#: candidate's commitments: seconds for every candidate, a feasible second stage; the default) or
#: ``replanned`` (the future planned again with the candidate held: the second stage re-optimized, one
#: full plan per candidate and future). Savings plans need ``replanned`` (a fleet bill counts nodes).
SecondStage = Literal["fleet", "replanned"]
#: How the futures' own (wait-and-see) plans are made: ``full`` (the planner at the given settings),
#: ``quick`` (whole replicas by the rounding alone, without the local search and the period MILPs, and at
#: most 10 s of search each: about a quarter of the CPU time, fleets about 1 % dearer on growth-year) or
#: ``auto`` (``full`` up to :data:`FULL_OWN_PLANS` futures planned, ``quick`` beyond). The point forecast's
#: own plan is always full.
OwnPlans = Literal["auto", "full", "quick"]
#: ``own_plans: auto`` plans up to this many futures in full.
FULL_OWN_PLANS: Final = 10


class FuturesFile(StrictModel):
    futures: list[FutureSpec] = Field(min_length=2, max_length=MAX_FUTURES)
    risk: Risk = Field(default_factory=Risk)
    tail: TailRule = Field("carried", description="how the time after the horizon counts (module docstring)")
    second_stage: SecondStage = Field("fleet", description="how candidates are priced in each future")
    own_plans: OwnPlans = Field("auto", description="how the futures' own plans are made (OwnPlans)")

    def own_plans_method(self, planned: int) -> Literal["full", "quick"]:
        """``own_plans`` for ``planned`` futures planned on their own (``auto`` decided)."""
        if self.own_plans == "auto":
            return "full" if planned <= FULL_OWN_PLANS else "quick"
        return self.own_plans

    @model_validator(mode="after")
    def _unique(self) -> FuturesFile:
        seen: set[str] = set()
        for index, future in enumerate(self.futures):
            if future.name in seen:
                raise ValueError(f"futures[{index}].name {future.name!r} is given twice")
            seen.add(future.name)
        return self

    def weights(self) -> list[float]:
        """The futures' weights, normalized to sum to 1."""
        total = sum(f.weight for f in self.futures)
        return [f.weight / total for f in self.futures]


def load_futures(path: Path) -> FuturesFile:
    """The futures file at ``path``; an InputError naming the file and the entry for anything wrong."""
    from pydantic import ValidationError

    data = read_yaml(path, "futures file")
    if not isinstance(data, dict):
        raise InputError(path, None, "expected futures: [{name: ..., weight: ..., vary: [...]}, ...]")
    try:
        spec = FuturesFile.model_validate(data)
    except ValidationError as exc:
        raise validation_error(path, "futures file", exc) from None
    for index, future in enumerate(spec.futures):
        try:  # the changes' grammar, checked here so that an error names this file
            parse_all(future.vary, f"futures[{index}].vary")
        except InputError as error:
            raise InputError(path, error.where, error.problem) from None
        for service, csv in future.series.items():  # series paths made absolute, each checked to exist
            full = Path(csv) if Path(csv).is_absolute() else (path.parent / csv).resolve()
            if not full.is_file():
                raise InputError(path, f"futures[{index}].series.{service}", f"{csv}: file not found")
            future.series[service] = str(full)
    return spec


# ---- futures.json --------------------------------------------------------------------------------------


class Purchase(DocumentPart):
    """One purchase of a first stage: ``nodes`` of a commitment, or ``usd_per_hour`` of a savings plan."""

    kind: str = Field(description="commitment, or the savings plan's kind")
    offering: str = Field(description="offering id (commitments) or the plan's scope (savings plans)")
    term: Term
    start: UtcTime
    nodes: int | None = None
    usd_per_hour: float | None = None
    usd_per_node_hour: float | None = Field(None, description="commitments: the rate it was priced at")


class Candidate(DocumentPart):
    """A first stage and what it costs in each future (the future planned with it held, nothing more for
    sale); ``origin`` says where it came from (the point forecast's plan, one future's own plan, or the
    weighted quantile of the futures' purchases)."""

    name: str
    origin: str
    also: list[str] = Field(default_factory=list, description="other candidates that buy the same (peers)")
    purchases: list[Purchase]
    cost_usd: dict[str, float] = Field(description="future -> horizon_usd + tail_usd")
    horizon_usd: dict[str, float] = Field(description="future -> the plan's objective with these purchases")
    tail_usd: dict[str, float] = Field(description="future -> the cost after the horizon (the tail rule)")
    owed_after_usd: dict[str, float] = Field(description="future -> owed after the horizon")
    unserved: dict[str, int] = Field(description="future -> demand items left unserved")
    expected_usd: float
    p10_usd: float
    p50_usd: float
    p90_usd: float
    cvar_usd: float
    score_usd: float = Field(description="what first stages are ranked by (risk)")
    cap_quantile_usd: float | None = Field(None, description="the cost at risk.cap's quantile")
    committed_share: dict[str, float] = Field(
        default_factory=dict,
        description="future -> share of its latency-critical inference node-hours on committed tiers "
        "(a future without any: 1)",
    )
    committed_share_weight: float | None = Field(
        None, description="weight of the futures whose share reaches risk.committed_share.min"
    )
    why_not: list[str] = Field(
        default_factory=list, description="the risk constraints it breaks (empty: it may be chosen)"
    )


class CommitmentUse(DocumentPart):
    """How one purchase of the chosen first stage is used across the futures."""

    purchase: Purchase
    break_even_fraction: float | None = Field(
        None, description="used share at which it costs what on-demand would (its rate / on-demand rate)"
    )
    share_above_break_even: float = Field(description="weight of the futures where its use is above it")
    idle_fraction_p10: float = Field(description="its idle share in the P10 (lowest-cost-need) future")


class FuturesSummary(DocumentPart):
    """The numbers a buyer asks for (issue 41, point 4)."""

    expected_usd: float = Field(description="horizon and tail, weighted over the futures")
    expected_horizon_usd: float
    expected_tail_usd: float
    tail_until: UtcTime | None = Field(description="the end of the tail (None: no tail counted)")
    p10_usd: float
    p50_usd: float
    p90_usd: float
    worst_future: str
    worst_usd: float
    point_forecast_expected_usd: float = Field(description="the point forecast's purchases, on the futures")
    vss_usd: float = Field(description="value of the stochastic solution: point forecast's expected - this")
    best_peer: str | None = Field(None, description="the committing peer cheapest on the futures (expected)")
    best_peer_expected_usd: float | None = Field(None, description="its purchases' expected cost here")
    wait_and_see_usd: float = Field(description="expected cost of each future's own plan (perfect forecast)")
    evpi_usd: float = Field(description="expected value of perfect information: this - wait and see")
    bound_usd: float = Field(
        description="certified lower bound on the best expected horizon cost any purchase reaches: sum of "
        "w * each future's own bound (wait and see <= here and now)"
    )
    gap: float = Field(description="(expected horizon cost - bound) / expected horizon cost")
    bound_with_tail_usd: float | None = Field(
        None,
        description="certified lower bound on the best expected cost with the tail (second_stage: fleet): "
        "bound_usd plus, per future, every carried node-hour after the horizon at the least rate its "
        "offering is sold at (fleet_bill.tail_floor); None when not computed",
    )
    gap_with_tail: float | None = Field(None, description="(expected cost - bound_with_tail) / expected cost")
    unconstrained: str | None = Field(
        None, description="the candidate ranked first without risk.cap and risk.committed_share, if another"
    )
    unconstrained_expected_usd: float | None = Field(None, description="its expected cost")


class MasterSummary(DocumentPart):
    """The futures master (``planner/planning/futures_master.py``): one MILP over every future's fleet."""

    candidate: str = Field(description="the name of the candidate it proposed")
    score_usd: float = Field(description="its objective: the expected (or risk-weighted) cost it predicts")
    columns: int
    rows: int
    seconds: float = Field(description="wall seconds to build and solve it")


class FuturesDocument(DocumentPart):
    """futures.json: the futures, every candidate first stage priced on each, the chosen one and why."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)
    schema_: Literal["gpuplan.futures/v2", "gpuplan.futures/v1"] = Field(SCHEMA, alias="schema")
    scenario: str
    futures: list[FutureSpec]
    weights: dict[str, float]
    risk: Risk
    tail: TailRule
    second_stage: SecondStage = Field(
        "replanned", description="how candidates were priced (files written before fleet pricing: replanned)"
    )
    master: MasterSummary | None = Field(None, description="the futures master's own candidate, if it ran")
    own_plans: Literal["full", "quick"] = Field(
        "full", description="how the futures' own plans were made (FuturesFile.own_plans, decided)"
    )
    chosen: str = Field(description="the candidate whose purchases the plan makes")
    candidates: list[Candidate]
    excluded: dict[str, str] = Field(
        default_factory=dict, description="candidate -> why it has no cost (a future it cannot be planned in)"
    )
    summary: FuturesSummary
    commitment_use: list[CommitmentUse]
    wait_and_see: dict[str, float] = Field(description="future -> its own plan's objective and tail")
    bounds: dict[str, float] = Field(description="future -> its own plan's certified bound")

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.model_dump(mode="json", by_alias=True), indent=2) + "\n", "utf-8")

    def outcome(self, file: str) -> FuturesOutcome:
        """The buyer's figures for plan.json (``gpuplan plan --futures``); ``file``: where this document is,
        relative to the plan."""
        # every figure but the file, the count and the choice has the same name in the summary
        shared = FuturesOutcome.model_fields.keys() & FuturesSummary.model_fields.keys()
        figures = {name: getattr(self.summary, name) for name in shared}
        return FuturesOutcome(file=file, futures=len(self.futures), chosen=self.chosen, **figures)

    @classmethod
    def read(cls, path: Path) -> FuturesDocument:
        return read_json_document(path, cls, READ_SCHEMAS, "gpuplan futures")


# ---- weighted statistics -----------------------------------------------------------------------------


def weighted_quantile(values: list[float], weights: list[float], q: float) -> float:
    """The smallest value whose cumulative weight (values ascending) reaches ``q`` (the lower quantile,
    a value the futures really take)."""
    pairs = sorted(zip(values, weights, strict=True))
    total = sum(w for _v, w in pairs)
    running = 0.0
    for value, weight in pairs:
        running += weight / total
        if running >= q - 1e-12:
            return value
    return pairs[-1][0]


def quantile_name(q: float) -> str:
    """``P90`` for 0.9: how a buyer names a quantile of the cost."""
    return f"P{q * 100:g}"


def cvar(values: list[float], weights: list[float], level: float) -> float:
    """The mean of the costliest ``1 - level`` of the weight (Rockafellar and Uryasev's CVaR of a discrete
    law: the futures at the boundary count with the part of their weight inside the tail)."""
    pairs = sorted(zip(values, weights, strict=True), reverse=True)
    total = sum(w for _v, w in pairs)
    tail, left, acc = 1.0 - level, 1.0 - level, 0.0
    for value, weight in pairs:
        take = min(weight / total, left)
        acc += take * value
        left -= take
        if left <= 1e-15:
            break
    return acc / tail
