"""The plan: what the planner decided, in the files others rely on (``plan-contract.md``, schema v2).

Schema v2 (issue 38) adds how each commitment is paid (``payment``, ``upfront_usd``, ``hourly_usd``) and the
cash flow per calendar month (``costs.cash_by_month``); plans of v1 still load (those fields take their
defaults: paid by the hour, no cash table).

``plan.json`` is a :class:`PlanDocument`: typed pydantic models for every part (commitments, training
placements, unserved demand, costs, baselines, utilization, teams, MIG, solver). The planner builds
these models, ``plan.json`` is written and read through them, and the reports, exports and the daemon
take them, so a field means one thing everywhere and a wrong file fails on reading, naming the field.
``allocations.csv`` holds one row per (period, offering, tier, workload). Money is USD, time hours,
counts nodes. Rows follow the billing rule: per period and offering, the committed nodes cover its
non-spot use first (inference and training alike) and only the use beyond them is on demand; each
non-spot row is split between the committed tiers and on-demand in that proportion. ``replicas`` is
the whole number of a service's replicas a row serves (0 on training rows); ``nodes`` the node-hours
per hour it is billed for, its share of idle parts of whole held nodes included.
Totals reconcile by construction:
``costs.total_usd == sum(allocations.cost_usd) + sum(commitments.cost_in_horizon_usd) +
sum(savings_plans.cost_in_horizon_usd)``; committed (reserved, owned) rows and ``savings_plan`` rows carry
cost 0 because commitments and savings plans are paid whether used or not. A savings plan's rows are the
part of the on-demand nodes of a period it covers (``models.savingsplans.bill_hours`` on the whole
on-demand nodes of each offering in that period).

``gpuplan schema plan`` prints :func:`plan_json_schema`; the committed copy is
``models/data/plan.schema.json`` (``models/schemas.py``) and a test fails when the two drift apart.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Final, Literal, get_args, get_origin

import numpy as np
import pandas as pd
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from models.documents import DocumentPart, read_json_document
from models.errors import InputError
from models.inputfile import read_input_bytes
from models.numbers import strict_float
from models.scenario import FALLBACKS, Fallback
from models.tiers import COMMITTED_TIERS, HOURS_PER_YEAR, Term, Tier

__all__ = [
    "ALLOCATION_COLUMNS",
    "COMMITTED_TIERS",
    "OPTIONAL_ALLOCATION_COLUMNS",
    "READ_SCHEMAS",
    "SCHEMA",
    "TIERS",
    "Baselines",
    "CashMonth",
    "Commitment",
    "Costs",
    "FuturesOutcome",
    "MigConfigUse",
    "MigNodeLayout",
    "MigPartedConfig",
    "MigPool",
    "MigScheduleEntry",
    "MigSection",
    "OfferingRecord",
    "Peer",
    "PeerCommitment",
    "PeerPolicy",
    "PeerSavingsPlan",
    "PeerUsage",
    "Plan",
    "PlanDocument",
    "PlanHorizon",
    "PoolUtilization",
    "PriceSources",
    "PriceUse",
    "SavingsPlanCommitment",
    "ScenarioEcho",
    "SolveMethod",
    "SolverReport",
    "SolverStage",
    "TeamSummary",
    "TrainingPlacement",
    "Unserved",
    "UnservedGuarantee",
    "UnservedInference",
    "UnservedTraining",
    "Utilization",
    "plan_json_path",
    "plan_json_schema",
    "read_allocations",
    "read_document",
]

SCHEMA: Final = "gpuplan.plan/v2"
#: Schemas this gpuplan reads: its own and v1 (before payment options: every commitment paid by the hour).
READ_SCHEMAS: Final = ("gpuplan.plan/v2", "gpuplan.plan/v1")
#: How a commitment is paid (issue 38): by the hour, or part or all of its term at purchase.
PaymentOption = Literal["no-upfront", "partial-upfront", "all-upfront"]
ALLOCATION_COLUMNS = [
    "period", "offering", "tier", "workload", "kind", "team", "nodes", "gpus", "replicas", "cost_usd",
    "commitment",
]  # fmt: skip
#: Columns a plan written before they existed may lack; reading fills them with NaN, so old plans
#: still load (``gpuplan verify`` reports their replicas as missing). ``commitment`` names the
#: commitment (plan.json ``commitments[].name``) a row on a committed tier uses, empty elsewhere; rows
#: are one per (period, offering, tier, workload, commitment): a workload on two commitments of one
#: tier (a day-one purchase and one from July) has a row on each.
OPTIONAL_ALLOCATION_COLUMNS: tuple[str, ...] = ("replicas", "commitment")
#: The cloud tiers every plan's ``costs.by_tier`` lists (``owned`` joins when the scenario has owned nodes).
TIERS: tuple[Tier, ...] = (Tier.RESERVED_1Y, Tier.RESERVED_3Y, Tier.ON_DEMAND, Tier.SPOT)


def _iso_z(value: datetime) -> str:
    """UTC times as the contract writes them: ``2027-01-01T00:00:00Z``."""
    return value.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"


#: Below this a number is negative, not float noise (what ``gpuplan verify`` tolerates too).
_NEGATIVE: Final = -1e-6


def _not_negative(value: float) -> float:
    """A count or an amount of money: >= 0 (float noise of a subtraction tolerated)."""
    if value < _NEGATIVE:
        raise PydanticCustomError("negative", "must be >= 0, got {value}", {"value": f"{value:g}"})
    return value


def _a_number(value: Any) -> Any:
    """One value of a numeric field, refused when :func:`_not_a_number` says why."""
    problem = _not_a_number(value)
    if problem is not None:
        raise PydanticCustomError("not_a_number", problem)
    return value


#: USD that cannot be negative: prices, costs, totals (a negative cost is a broken or edited file).
Usd = Annotated[float, BeforeValidator(_a_number), AfterValidator(_not_negative)]
#: A number of nodes, GPUs, periods or runs: >= 0.
Count = Annotated[int, BeforeValidator(_a_number), AfterValidator(_not_negative)]
#: Hours, shares, rates: >= 0.
Amount = Annotated[float, BeforeValidator(_a_number), AfterValidator(_not_negative)]


def _leaves(annotation: Any) -> set[Any]:
    """The leaf types of a field's annotation (through unions, containers and ``Annotated``)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return {type(arg) for arg in args}
    if origin is Annotated:
        return _leaves(args[0])
    if origin is dict:
        return _leaves(args[1])  # the keys are names
    if not args:
        return {annotation}
    return set().union(*(_leaves(arg) for arg in args))


def _numeric_field(annotation: Any) -> bool:
    """Whether every non-None leaf of the field is a number (``int``, ``dict[str, float]``,
    ``list[tuple[int, int]]``): a boolean or a string in it is not one."""
    leaves = _leaves(annotation) - {type(None)}
    return bool(leaves) and leaves <= {int, float}


def _not_a_number(value: Any) -> str | None:
    """Why a value of a numeric field is not a number as gpuplan writes one, or None (a value of another
    type is left to pydantic, whose message names it)."""
    if isinstance(value, bool):
        return "a boolean is not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} is not a finite number"
    if isinstance(value, str):  # pydantic's lax mode would read "1_000" or "١٦" as a number
        try:
            strict_float(value)
        except ValueError as exc:
            return str(exc)
        return f"{value!r} is a number in quotes; gpuplan writes numbers without them"
    return None  # a list or mapping: its items' own type (Usd, Count, Amount) checks each


def _strict_numbers(cls: type[BaseModel], value: Any, info: ValidationInfo) -> Any:
    field = cls.model_fields.get(info.field_name or "")
    if field is not None and value is not None and _numeric_field(field.annotation):
        problem = _not_a_number(value)
        if problem is not None:
            raise PydanticCustomError("not_a_number", problem)
    return value


class _NumbersOnly(BaseModel):
    """Numbers in plan.json are numbers: not NaN or infinite (Python's json reads ``NaN`` and
    ``Infinity``), not a boolean (pydantic would read ``true`` as 1) and not in quotes (``"7"``): a plan
    directory is read by every command that acts on it, and such a value is a broken or edited file."""

    model_config = ConfigDict(allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_are_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        return _strict_numbers(cls, value, info)


class _PlanPart(DocumentPart, _NumbersOnly):
    """A part of plan.json: unknown fields refused, assignments validated, numbers strict."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class _UnservedPart(DocumentPart):
    """A part of ``unserved[]``: as :class:`_PlanPart`, its numbers listed by name (a validator on every
    field would also run on ``kind``, the discriminator, which pydantic forbids)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator(
        "replica_hours", "periods", "run", "gpu_hours", "gpus", mode="before", check_fields=False
    )
    @classmethod
    def _numbers_are_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        return _strict_numbers(cls, value, info)


#: A UTC instant, written ``YYYY-MM-DDTHH:MM:SSZ``.
UtcTime = Annotated[datetime, PlainSerializer(_iso_z, return_type=str, when_used="json")]


class PlanHorizon(_PlanPart):
    start: UtcTime
    hours: int = Field(description="length of the horizon in hours")
    period_hours: int = Field(description="hours per period; periods index allocations.csv")
    periods: int


class SolverStage(_PlanPart):
    """One stage of the solve; the hourly method's stages also say what its realization did."""

    stage: int
    what: str
    status: str
    objective_usd: float | None = Field(None, description="the stage's plan cost, when it made a plan")
    bound_usd: float
    seconds: float
    cluster_objective_usd: float | None = Field(None, description="hourly method: the cluster model's value")
    runs_moved: int | None = None
    nodes_committed_for_gangs: int | None = None
    distinct_periods: int | None = None
    repaired_periods: int | None = None
    dispatch_lp_usd: float | None = None
    dispatch_seconds: float | None = None
    stopped_by: Literal["work", "time"] | None = Field(
        None,
        description="what stopped the stage before it finished: its counted work quota (the same on any "
        "machine), or the wall-clock safety net (time: a re-run may give another plan); none: it finished",
    )


#: How the plan was found: one staged MILP, or the hourly decomposition (``planner/planning/optimize/``).
SolveMethod = Literal["staged-milp", "hourly-decomposition"]


class SolverReport(_PlanPart):
    """How the plan was found and how far from optimal it is proven to be."""

    name: str
    status: str = Field(
        description="optimal (the certified gap is within the requested gap), feasible (a plan whose gap is "
        "above it), time_limit (staged method without a certified bound), ..."
    )
    objective_usd: Usd = Field(
        description="what the written plan costs, its penalty for unserved demand included (the gap's cost)"
    )
    model_objective_usd: float | None = Field(
        None, description="the planning model's objective, before replicas were made whole (realize.py)"
    )
    bound_usd: float = Field(description="certified lower bound on the full hourly problem, when computed")
    gap: float = Field(description="(cost - bound) / cost")
    seconds: float
    aggregated_periods: int = Field(description="model slots when periods were merged, else 0")
    model_periods: int
    training_start_grid_hours: int
    block_hours: int
    method: SolveMethod
    build_seconds: float
    penalty_usd: Usd = Field(description="penalty priced into the objective for unserved demand")
    bound_method: str
    notes: list[str] = Field(default_factory=list)
    stage2_model_periods: int | None = None
    stages: list[SolverStage] = Field(default_factory=list)
    model_bound_usd: float | None = Field(
        None, description="staged method: the planning model's own proven bound (what --gap stops on)"
    )
    model_gap: float | None = None
    certified_bound_usd: float | None = None
    certified_bound_raw_usd: float | None = Field(
        None,
        description="the certified bound as computed, before it is capped at the plan's cost for bound_usd "
        "and gap; above the plan's cost (beyond 1e-7) it is a bug signal, named in notes",
    )
    certified_gap: float | None = None
    certified_bound_method: str | None = None
    certified_bound_clusters: int | None = None
    certified_bound_seconds: float | None = None
    requested_gap: float | None = Field(
        None, description="the gap asked for (--gap): status is optimal only when gap is within it"
    )

    def verdict(self) -> str:
        """The status in words: ``optimal`` only within the requested gap of the bound, else
        ``feasible, within 0.86 % of optimal`` (the gap against the certified bound where there is one)."""
        if self.status == "optimal":
            return "optimal" if self.gap <= 1e-9 else f"optimal (within {self.gap:.2%} of optimal)"
        if self.status in ("feasible", "time_limit"):
            return f"feasible, within {self.gap:.2%} of optimal"
        return self.status


class OfferingRecord(_PlanPart):
    """An offering the plan uses, with the prices it was planned at."""

    cloud: str
    region: str
    instance_type: str
    gpu_model: str
    gpus_per_node: Count
    fabric: str | None
    on_demand_usd_h: Usd | None
    spot_usd_h: Usd | None
    reserved_1y_usd_h: Usd | None
    reserved_3y_usd_h: Usd | None
    owned_usd_h: Usd | None = None
    available_from_hour: Amount | None = None


class Commitment(_PlanPart):
    """Nodes of one offering held on one term from ``start`` to ``end``: bought by the plan (a purchase
    at one of the horizon's purchase steps) or ``existing`` (held already, paid whether used or not)."""

    offering: str = Field(description="offering id, cloud:region:instance_type")
    term: Term
    nodes: Count
    usd_per_node_hour: Usd
    cost_in_horizon_usd: Usd = Field(description="its hours inside the horizon at its rate")
    obligation_beyond_horizon_usd: Usd = Field(description="what is still owed after the horizon ends")
    name: str = Field("", description="names it in allocations.csv's commitment column")
    existing: bool = Field(False, description="held before the plan (scenario commitments:), not bought")
    start: UtcTime | None = Field(None, description="when its term starts (a purchase: when to buy)")
    end: UtcTime | None = Field(None, description="when its term ends (may be after the horizon)")
    start_period: Count = Field(0, description="first period its nodes serve in")
    end_period: Count | None = Field(None, description="the period after the last one they serve in")
    used_node_hours: Amount | None = Field(None, description="node-hours of workloads it covered")
    used_fraction: Amount | None = Field(None, description="used node-hours / its node-hours in the horizon")
    payment: PaymentOption = Field(
        "no-upfront", description="how it is paid: by the hour, or part or all of its term at start"
    )
    upfront_usd: Usd = Field(0.0, description="the fee per node paid at start (0 paid by the hour)")
    hourly_usd: Usd | None = Field(
        None,
        description="what is charged per node-hour beside the fee; usd_per_node_hour is it plus the fee "
        "spread over the term's hours (amortized); None: usd_per_node_hour (no fee)",
    )
    payment_source: str = Field("", description="where the option's rate and fee come from, and its basis")

    @property
    def recurring_usd_per_node_hour(self) -> float:
        """What is charged per node-hour, the upfront fee aside (the cash view)."""
        return self.usd_per_node_hour if self.hourly_usd is None else self.hourly_usd

    @property
    def upfront_total_usd(self) -> float:
        """The fee paid at ``start`` for all its nodes."""
        return self.nodes * self.upfront_usd

    @property
    def usd_per_year(self) -> float:
        """What the commitment costs per year of its term (8,760 hours)."""
        return self.nodes * self.usd_per_node_hour * HOURS_PER_YEAR


SavingsPlanContractKind = Literal[
    "savings-plan-compute", "savings-plan-ec2-instance", "savings-plan", "committed-use"
]


class SavingsPlanCommitment(_PlanPart):
    """A savings plan (issue 38): ``usd_per_hour`` committed from ``start`` to ``end``, held already
    (``existing``) or bought by the plan. Each hour of ``start_period`` to ``end_period`` it covers on-demand
    nodes of the offerings in ``rates`` at those rates, highest savings first (``models/savingsplans.py``);
    its rows in allocations.csv are tier ``savings_plan``, name it in the commitment column and cost 0: its
    cost is ``cost_in_horizon_usd``, spent or not."""

    name: str = Field(min_length=1, description="names it in allocations.csv's commitment column")
    kind: SavingsPlanContractKind = Field(
        description="AWS Compute, AWS EC2 Instance, an Azure savings plan for compute, or GCP "
        "resource-based committed use (GPUs of one model in one region, shared by the machine types with it)"
    )
    term: Term
    scope: str = Field(description="compute, azure, ec2-instance FAMILY REGION or gcp-resource GPU REGION")
    usd_per_hour: Usd = Field(description="the commitment, USD per hour")
    gpus: Count | None = Field(
        None, description="committed-use only: the GPUs committed (with their vCPUs and memory)"
    )
    rates: dict[str, Usd] = Field(description="offering id -> its savings-plan rate, USD per node-hour")
    existing: bool = Field(False, description="held before the plan (scenario savings_plans:), not bought")
    start: UtcTime = Field(description="when its term starts")
    end: UtcTime = Field(description="when its term ends (may be after the horizon)")
    start_period: Count = Field(description="first period it covers")
    end_period: Count = Field(description="the period after the last one it covers")
    cost_in_horizon_usd: Usd = Field(description="its hours inside the horizon at usd_per_hour")
    obligation_beyond_horizon_usd: Usd = Field(description="what is still owed after the horizon ends")
    spent_usd: Usd = Field(description="of its commitment in the horizon, what covered nodes (at its rates)")
    unspent_usd: Usd = Field(description="of its commitment in the horizon, what covered nothing")
    payment: PaymentOption = Field(
        "no-upfront",
        description="how it is paid: by the hour, half (partial) or all of its whole commitment at start; "
        "each option has its own rates",
    )
    upfront_usd: Usd = Field(
        0.0, description="paid at start: the share of usd_per_hour x its term's hours its payment takes"
    )

    @property
    def recurring_share(self) -> float:
        """The share of its commitment charged hour by hour (the rest was paid at start)."""
        whole = self.usd_per_hour * (self.end - self.start).total_seconds() / 3600
        return max(0.0, 1.0 - self.upfront_usd / whole) if whole > 0 else 1.0


class TrainingPlacement(_PlanPart):
    """One run of a training job: a gang of ``nodes`` nodes in one placement group."""

    job: str
    run: Count
    team: str
    offering: str
    tier: Tier = Field(
        description="spot for a spot gang; capacity_block for a gang in an AWS Capacity Block bought for it "
        "(block_hours); flex_start for a gang on GCP flex-start VMs (flex_start_delay_hours); else the "
        "committed tier when its offering's commitments cover at least half its periods' non-spot nodes "
        "(committed_fraction), else on_demand; the run's own split: tiers"
    )
    tiers: dict[Tier, Amount] = Field(
        default_factory=dict,
        description="share of the run's node-hours billed on each tier, summing to 1; two or more: a run "
        "split between commitments and on-demand (empty in plans written before issue 42)",
    )
    nodes: Count
    committed_fraction: Amount | None = Field(
        None, description="share of a non-spot gang's node-hours its offering's commitments cover"
    )
    start_period: Count
    periods: Count = Field(description="periods held, including the expected preemption overhead on spot")
    placement_group: str
    fabric: str | None
    checkpoint_interval_minutes: Amount
    expected_overhead: Amount
    cost_usd: Usd = Field(
        description="what the run pays beyond commitments: spot or on-demand node-hours, or a Capacity "
        "Block's upfront fee (its share of the commitments it uses is in costs.by_workload)"
    )
    block_hours: Count | None = Field(
        None,
        description="a gang in a Capacity Block (tier capacity_block): the duration bought, the shortest EC2 "
        "sells that holds the run (1-14 days, then weeks up to 182 days); its fee is the offering's "
        "capacity_block_usd_h x nodes x block_hours, paid upfront at its start",
    )
    flex_start_delay_hours: Amount | None = Field(
        None,
        description="a gang on GCP flex-start VMs (tier flex_start): the start delay planned for (the "
        "scenario's purchase.flex_start_delay_hours); its VMs are requested that long before start, run at "
        "most 7 days and cost the offering's flex_start_usd_h x nodes x hours held",
    )
    start: UtcTime
    end: UtcTime
    hours: Amount
    held_hours: Count
    gang_interruptions_per_hour: Amount
    expected_interruptions: Amount
    fallback: tuple[Fallback, ...] | None = Field(
        None,
        description="what the gang may do when its capacity reservation is refused, in order (the "
        "scenario's training[].fallback); null (plans written before it): all three",
    )

    @property
    def fallbacks(self) -> tuple[Fallback, ...]:
        """The fallbacks the plan allows the gang, in order (all of them in plans that do not say)."""
        return FALLBACKS if self.fallback is None else self.fallback


class UnservedInference(_UnservedPart):
    kind: Literal["inference"] = "inference"
    workload: str
    team: str
    replica_hours: Amount
    periods: Count
    reason: str


class UnservedTraining(_UnservedPart):
    kind: Literal["training"] = "training"
    workload: str
    team: str
    run: Count
    gpu_hours: Amount
    reason: str


class UnservedGuarantee(_UnservedPart):
    kind: Literal["guarantee"] = "guarantee"
    workload: str
    team: str
    gpus: Amount
    reason: str


#: Demand the plan could not meet, each with its reason.
Unserved = Annotated[UnservedInference | UnservedTraining | UnservedGuarantee, Field(discriminator="kind")]


class CashMonth(_PlanPart):
    """One calendar month of the horizon: what the plan costs in it (amortized, as ``total_usd`` counts)
    and the cash that goes out in it (upfront fees at their purchase month, hourly charges as they run)."""

    month: str = Field(description="the calendar month, YYYY-MM")
    cost_usd: Usd = Field(description="the plan's cost charged to its hours (commitments amortized)")
    upfront_usd: Usd = Field(description="upfront fees of commitments starting in it")
    recurring_usd: Usd = Field(description="hourly charges of its hours: usage, commitments, savings plans")
    cash_usd: Usd = Field(description="upfront_usd + recurring_usd")


class Costs(_PlanPart):
    total_usd: Usd
    by_tier: dict[Tier, Usd]
    by_team: dict[str, Usd]
    by_cloud: dict[str, Usd]
    by_workload: dict[str, Usd]
    cash_by_month: list[CashMonth] | None = Field(
        None, description="cost and cash per calendar month of the horizon (v1 plans have none)"
    )


#: How a peer chose what to buy (``planner/planning/baselines.py``): the cloud's recommendation over a
#: lookback, a percentile coverage target, or one of the two references without commitments.
PeerPolicy = Literal["lookback", "coverage", "all_on_demand", "greedy", "savings_plan"]

#: What a peer runs: ``fleet``, each service on one offering for the horizon (overflow to the next where
#: capacity runs out), a policy a user can run; ``per_period``, every workload on its cheapest offering
#: each period, a lower reference no fleet runs (plans written before issue 39 have only these).
PeerUsage = Literal["fleet", "per_period"]


class PeerCommitment(_PlanPart):
    """Nodes of one offering a peer buys on one term."""

    offering: str = Field(description="offering id, cloud:region:instance_type")
    term: Term
    nodes: Count


class PeerSavingsPlan(_PlanPart):
    """A savings plan a peer buys (the cloud's savings-plan recommendation), so that its purchase can be
    priced elsewhere (``gpuplan futures`` prices each peer's purchases on every future)."""

    kind: SavingsPlanContractKind
    term: Term
    scope: str = Field(
        description="as savings_plans[].scope: compute, azure, ec2-instance FAMILY REGION, ..."
    )
    usd_per_hour: Usd = Field(description="the commitment, USD per hour")
    start: UtcTime = Field(description="when its term starts (the horizon's start)")


class Peer(_PlanPart):
    """What a user without the planner would pay: a policy priced on the same demand and catalog."""

    name: str = Field(description='e.g. "lookback 30 d, 3y" or "coverage p50, 1y"')
    policy: PeerPolicy
    usage: PeerUsage = Field(
        "per_period",
        description="fleet: each service on one offering for the horizon (a policy a user can run); "
        "per_period: every workload on its cheapest offering each period (a lower reference, not runnable)",
    )
    total_usd: Usd = Field(description="cost over the horizon: commitments every hour, the rest as used")
    obligation_beyond_horizon_usd: Usd = 0.0
    commitments: list[PeerCommitment] = Field(default_factory=list)
    savings_plans: list[PeerSavingsPlan] = Field(
        default_factory=list, description="the savings plans it buys (plans written before: none listed)"
    )
    how: str = Field("", description="one line of how it was computed")


class Baselines(_PlanPart):
    """The peers the plan is compared against (``planner/planning/baselines.py``), on the same demand.

    ``all_on_demand_usd`` and ``greedy_usd`` are the two references without commitments; ``peers`` lists
    them with the policies that commit (plans written before peers existed have none), and
    ``best_peer`` names the cheapest peer a user can run (``usage`` fleet; before issue 39: the cheapest
    committing peer).
    """

    all_on_demand_usd: Usd
    greedy_usd: Usd
    notes: list[str] = Field(default_factory=list)
    peers: list[Peer] = Field(default_factory=list)
    best_peer: str | None = Field(
        None, description="name of the cheapest peer a user can run (usage fleet), if any"
    )

    def peer(self, name: str | None) -> Peer | None:
        """The peer called ``name`` (None if there is none)."""
        return next((p for p in self.peers if p.name == name), None)


class PoolUtilization(_PlanPart):
    committed_nodes: Count
    committed_node_hours: Amount
    used_node_hours: Amount
    used_fraction: Amount


class Utilization(_PlanPart):
    reserved_used_fraction: Amount
    pools: dict[str, PoolUtilization] = Field(default_factory=dict, description="per committed offering")


class TeamSummary(_PlanPart):
    guaranteed_gpus: Count
    burst_gpus: Count | None
    priority: str
    peak_gpus: Amount = Field(description="most GPUs in a period (MIG replicas: fractions, as chargeback)")
    gpu_hours: Amount = Field(description="GPU-hours as chargeback counts them (MIG replicas: fractions)")
    cost_usd: Usd = Field(description="by chargeback's default rule (guarantees, month by month)")


class MigNodeLayout(_PlanPart):
    """GPUs of one node that share a layout, in device order (GPU indices handed out from 0)."""

    gpus: Count
    mig_devices: dict[str, Count] | None = Field(description="profile -> instances per GPU; None: MIG off")


class MigScheduleEntry(_PlanPart):
    """The periods in which a config is carried by the same number of a pool's nodes."""

    periods: list[tuple[Count, Count]] = Field(
        description="[start, end) ranges of period indices (allocations.csv's period), merged, ascending"
    )
    nodes: Count = Field(description="nodes of the pool carrying the config in each of those periods")
    spot_nodes: Count = Field(
        0, description="of them, spot nodes (spot and non-spot replicas never share a node)"
    )


class MigConfigUse(_PlanPart):
    """One named mig-parted config of a pool: the layout of a node, and when and on how many nodes."""

    name: str = Field(description="mig-parted config name; the node label nvidia.com/mig.config")
    node_layout: list[MigNodeLayout] = Field(description="every GPU of one node: MIG layouts, then MIG off")
    schedule: list[MigScheduleEntry] = Field(
        description="when the config applies; a period not listed has no node with this config"
    )

    def nodes_in(self, period: int) -> int:
        """Nodes carrying this config in ``period`` (0 where it is not scheduled)."""
        return sum(
            entry.nodes for entry in self.schedule for start, end in entry.periods if start <= period < end
        )


class MigPool(_PlanPart):
    """A node pool's MIG slicing: the figures at its busiest period, and its configs over the horizon.

    In each period, the nodes of the pool that ``configs`` do not schedule run with MIG disabled
    (mig-config.yaml's ``all-disabled``): whole-GPU replicas, training, idle nodes.
    """

    offering: str
    gpu_model: str
    peak_period: Count = Field(description="the period whose MIG replicas need the most GPUs")
    peak_demand: dict[str, Count] = Field(
        description="MIG replicas per profile at the peak (allocations.csv)"
    )
    gpus_packed: Count = Field(description="fewest GPUs holding the peak's replicas (spot, non-spot apart)")
    gpus_per_service_layouts: Count = Field(description="GPUs at the peak with one homogeneous layout each")
    gpus_whole_per_replica: Count = Field(description="GPUs at the peak with one replica per whole GPU")
    gpus_planned: Amount = Field(
        description="GPUs the plan's rows hold for MIG services at the peak: the GPUs they pack onto, plus "
        "their share of the idle GPUs of a last, partly used whole node (charged to the workloads on it)"
    )
    packed_gpu_hours: Amount = Field(description="packed MIG GPUs summed over the periods, in GPU-hours")
    whole_gpu_hours: Amount = Field(description="the same with one MIG replica per whole GPU")
    configs: list[MigConfigUse] = Field(
        default_factory=list,
        description="the pool's configs, numbered by first use, each with its schedule (empty only in "
        "plans written before schedules)",
    )
    config: str | None = Field(
        None, exclude=True, description="deprecated (plans before schedules): one config for the whole pool"
    )
    nodes_with_config: int | None = Field(None, exclude=True, description="deprecated, with config")
    node_layout: list[MigNodeLayout] | None = Field(None, exclude=True, description="deprecated, with config")

    def nodes_in(self, period: int) -> dict[str, int]:
        """Config name -> nodes carrying it in ``period`` (configs not scheduled then left out)."""
        used = {c.name: c.nodes_in(period) for c in self.configs}
        return {name: n for name, n in used.items() if n}


class MigDeviceGroup(_NumbersOnly):
    """GPUs of a node that share one MIG layout (mig-parted's ``mig-configs`` entry)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    devices: list[Count] | Literal["all"] = Field(description="GPU indices, or all of the node's GPUs")
    mig_enabled: bool = Field(alias="mig-enabled")
    mig_devices: dict[str, Count] | None = Field(None, alias="mig-devices")


class MigPartedConfig(_NumbersOnly):
    """NVIDIA mig-parted / GPU Operator config (FACTS 4.3): every config the pools schedule, and
    ``all-disabled`` for the nodes no config is scheduled on."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    version: Literal["v1"] = "v1"
    mig_configs: dict[str, list[MigDeviceGroup]] = Field(alias="mig-configs")

    def document(self) -> dict[str, Any]:
        """As mig-parted reads it (hyphenated keys, no ``mig-devices`` where MIG is off)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class MigSection(_PlanPart):
    pools: list[MigPool]
    gpus_saved_vs_whole_at_peak: int
    gpu_hours_saved_vs_whole: float
    config: MigPartedConfig
    note: str


class ScenarioEcho(_NumbersOnly):
    """The validated scenario as the planner read it, for reproducibility. Only the fields below are
    part of the contract; the rest is the scenario file's own format (``gpuplan schema scenario``)."""

    model_config = ConfigDict(extra="allow")

    name: str
    description: str = ""
    max_spot_share: float | None = Field(None, description="the spot share cap the plan honoured")


class FileDigest(_PlanPart):
    """What a file of the plan directory held when the plan was written."""

    sha256: str = Field(pattern="^[0-9a-f]{64}$", description="SHA-256 of the file's bytes, hex")
    rows: int = Field(ge=0, description="data rows (the header not counted)")


class PriceUse(_PlanPart):
    """One price the plan rests on: an offering's tier, and where the price comes from."""

    offering: str = Field(description="offering id, cloud:region:instance_type")
    tier: Tier
    usd_per_node_hour: Usd
    basis: Literal["quoted", "assumed", "negotiated", "unstated"] = Field(
        description="quoted (a price API or a published rate), assumed (a guess, e.g. a ratio of on-demand), "
        "negotiated (the user's own: an overlay or their catalog), unstated (a format-1 catalog)"
    )
    source: str = Field(description="the API, endpoint and version, the published page, or the assumption")
    as_of: UtcTime | None = Field(None, description="when the price was read or published")
    node_hours: Amount = Field(description="node-hours of the plan at this price inside the horizon")


class PriceSources(_PlanPart):
    """Where the plan's prices come from: the catalog, and each price the plan uses."""

    catalog: str = Field(description="'embedded' or the catalog file's path")
    catalog_format: Count = Field(description="1: no provenance columns; 2: per-price provenance")
    overlays: list[str] = Field(
        default_factory=list, description="pricing overlays applied on top of the catalog, in order"
    )
    counts: dict[str, Count] = Field(description="prices the plan uses, per basis")
    oldest: UtcTime | None = Field(None, description="the oldest dated price the plan uses")
    newest: UtcTime | None = Field(None, description="the newest dated price the plan uses")
    used: list[PriceUse] = Field(
        default_factory=list, description="each (offering, tier) price the plan uses"
    )
    summary: str = Field(description="one line, as the CLI and the report's first screen say it")


class FuturesOutcome(_PlanPart):
    """What the plan's purchases cost over the demand futures they were chosen on (``gpuplan plan
    --futures``, issue 41): the buyer's figures; ``file`` has every candidate in every future."""

    file: str = Field(
        pattern=r"^[A-Za-z0-9_][A-Za-z0-9_./-]{0,199}$",
        description="futures.json beside this plan, relative to its directory (never outside it)",
    )
    futures: int = Field(description="how many demand futures")
    chosen: str = Field(description="the candidate whose purchases this plan makes")
    expected_usd: float = Field(
        description="expected cost over the futures (the tail after the horizon included)"
    )
    expected_horizon_usd: float
    expected_tail_usd: float
    p10_usd: float
    p50_usd: float
    p90_usd: float
    worst_future: str
    worst_usd: float
    point_forecast_expected_usd: float = Field(
        description="the point forecast's purchases on the same futures"
    )
    vss_usd: float = Field(description="value of the stochastic solution: point forecast's expected - this")
    evpi_usd: float = Field(description="expected value of perfect information")
    best_peer: str | None = Field(None, description="the committing peer cheapest on the futures")
    best_peer_expected_usd: float | None = None
    bound_usd: float = Field(description="certified bound on the best expected horizon cost")
    bound_with_tail_usd: float | None = Field(None, description="certified bound with the tail, if computed")

    @field_validator("file")
    @classmethod
    def _inside(cls, value: str) -> str:
        if ".." in value.split("/"):
            raise ValueError("must stay inside the plan's directory (no '..')")
        return value


class PlanDocument(_PlanPart):
    """``plan.json``."""

    schema_: Literal["gpuplan.plan/v2", "gpuplan.plan/v1"] = Field(SCHEMA, alias="schema")
    scenario: str
    description: str = ""
    created: UtcTime
    horizon: PlanHorizon
    solver: SolverReport
    offerings: dict[str, OfferingRecord]
    commitments: list[Commitment]
    savings_plans: list[SavingsPlanCommitment] = Field(
        default_factory=list, description="savings plans held or bought (plans written before them have none)"
    )
    training: list[TrainingPlacement]
    unserved: list[Unserved]
    costs: Costs
    baselines: Baselines
    utilization: Utilization
    teams: dict[str, TeamSummary]
    inputs: ScenarioEcho
    mig: MigSection | None = None
    warnings: list[str] = Field(
        default_factory=list,
        description="what the scenario asks that the plan cannot give, found before solving",
    )
    prices: PriceSources | None = Field(
        None, description="where the prices the plan uses come from (plans before catalog format 2 have none)"
    )
    allocations_file: FileDigest | None = Field(
        None,
        description="allocations.csv as written with this plan.json: a copy cut short, or a file of another "
        "plan, is refused by every command that acts on the plan (plans written before it have none)",
    )
    futures: FuturesOutcome | None = Field(
        None, description="with gpuplan plan --futures: what the purchases cost over those demand futures"
    )

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)

    def to_json(self) -> str:
        empty = {name for name in ("mig", "futures") if getattr(self, name) is None}
        data = self.model_dump(mode="json", by_alias=True, exclude=empty or None)
        return json.dumps(data, indent=2) + "\n"


def plan_json_schema() -> dict[str, Any]:
    """The JSON Schema of plan.json (what ``gpuplan schema plan`` prints)."""
    schema = PlanDocument.model_json_schema(by_alias=True, mode="serialization")
    schema["$id"] = SCHEMA
    schema["title"] = "gpuplan plan.json"
    return schema


@dataclass
class Plan:
    """A plan directory in memory: ``plan.json`` as its typed document and ``allocations.csv``."""

    document: PlanDocument
    allocations: pd.DataFrame

    @property
    def total_usd(self) -> float:
        return self.document.costs.total_usd

    def write(self, directory: str | Path) -> None:
        """Write plan.json, allocations.csv and (with MIG) mig-config.yaml into ``directory``; plan.json
        records allocations.csv's digest and rows (``allocations_file``), here as on disk."""
        directory = Path(directory)
        frame = self.allocations[ALLOCATION_COLUMNS]
        table = frame.to_csv(index=False).encode("utf-8")  # full precision: rows must add up
        digest = FileDigest(sha256=hashlib.sha256(table).hexdigest(), rows=len(frame))
        # the plan in memory records what it wrote too, so it equals the directory read back
        self.document = self.document.model_copy(update={"allocations_file": digest})
        (directory / "plan.json").write_text(self.document.to_json(), encoding="utf-8")
        (directory / "allocations.csv").write_bytes(table)
        mig = self.document.mig
        if mig is not None and mig.config.mig_configs:  # the NVIDIA GPU Operator / mig-parted format
            header = "# MIG layouts of the node pools, written by gpuplan plan: plan.json's\n"
            header += "# mig.pools[].configs say which config applies in each period and on how many\n"
            header += "# nodes: label a node nvidia.com/mig.config=<name> to apply one, and the pool's\n"
            header += "# other nodes nvidia.com/mig.config=all-disabled.\n"
            text = yaml.safe_dump(mig.config.document(), sort_keys=False)
            (directory / "mig-config.yaml").write_text(header + text, encoding="utf-8")

    @classmethod
    def read(cls, directory: str | Path, *, trusted: bool = True) -> Plan:
        """Load a plan directory; InputError naming the file and field (or row and column) for anything
        wrong: not a directory, plan.json not the contract (:func:`read_document`), allocations.csv
        missing, not a CSV, or with a cell that is not what the contract says (:func:`read_allocations`).

        ``trusted`` (what every command that acts on a plan asks) also refuses a directory whose files
        do not belong together (:func:`check_consistency`): an allocations.csv cut short or of another
        plan, totals that do not reconcile. ``gpuplan verify`` reads with ``trusted=False`` and reports
        such a plan's violations one by one instead."""
        path = plan_json_path(directory)
        document = read_document(path)
        allocations_path = path.parent / "allocations.csv"
        raw = _file_bytes(allocations_path)  # read once: parsed, and hashed for the check
        allocations, rows = _read_allocations(allocations_path, document.horizon, raw)
        if trusted:
            digest = hashlib.sha256(raw).hexdigest()
            check_consistency(document, allocations, path, allocations_path, digest, rows)
        return cls(document, allocations)


#: How far the plan's totals may be from what its rows add up to (float noise of summing many rows).
_CENTS: Final = 0.01
_RELATIVE: Final = 1e-6


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= max(_CENTS, _RELATIVE * max(abs(a), abs(b)))


def check_consistency(
    document: PlanDocument,
    allocations: pd.DataFrame,
    plan_json: Path,
    allocations_csv: Path,
    allocations_sha256: str,
    rows: np.ndarray | None = None,
) -> None:
    """InputError (naming the file and what is wrong) unless plan.json and allocations.csv belong together.

    Why: a command that acts on a plan does what its rows say. A copy cut short (a full disk, a partial
    copy) or the allocations of another plan would hold no pools in the periods they lack, and
    provisioning would terminate the fleet there. Checked: the file is the one written with this plan.json
    (its digest and row count, where the plan records them); the totals reconcile,
    ``costs.total_usd = sum(allocations.cost_usd) + sum(commitments.cost_in_horizon_usd)`` (+ the savings
    plans' ``cost_in_horizon_usd``), and each cost
    breakdown adds up to the total; the names plan.json gives lead to its own parts
    (:func:`_check_references`); every row's offering is one of the plan's and every commitment a row
    names is one of its commitments; every row's workload and team are the plan's, and no two rows share
    a key. ``rows``: the spreadsheet row of each row of ``allocations`` (blank lines skipped), for messages.
    """
    _check_references(plan_json, document)
    _check_echo(plan_json, document)
    recorded = document.allocations_file
    if recorded is not None and (allocations_sha256 != recorded.sha256 or len(allocations) != recorded.rows):
        raise InputError(
            allocations_csv,
            None,
            f"is not the file written with {plan_json.name}: {len(allocations):,} rows where the plan "
            f"wrote {recorded.rows:,}, or other contents (a copy cut short, edited, or of another plan); "
            "write the plan again or copy its whole directory",
        )
    _check_row_names(document, allocations, allocations_csv, rows)  # the precise cause before the totals
    rows_usd = float(allocations["cost_usd"].sum()) if len(allocations) else 0.0
    held_usd = sum(c.cost_in_horizon_usd for c in document.commitments) + sum(
        plan.cost_in_horizon_usd for plan in document.savings_plans
    )
    total = document.costs.total_usd
    if not len(allocations):  # a plan that allocates nothing has a header-only file; this one needs rows
        if total - held_usd > _CENTS:
            raise InputError(
                allocations_csv,
                None,
                f"no rows, but plan.json's costs.total_usd (${total:,.0f}) is ${total - held_usd:,.0f} more "
                "than its commitments cost: the rows that cost it are missing",
            )
        if document.training:
            runs = len(document.training)
            raise InputError(
                allocations_csv,
                None,
                f"no rows, but plan.json places {runs} training run(s): their rows are missing",
            )
    if not _close(total, rows_usd + held_usd):
        raise InputError(
            plan_json,
            "costs.total_usd",
            f"${total:,.2f} does not reconcile with allocations.csv: its rows add up to ${rows_usd:,.2f} "
            f"and the commitments to ${held_usd:,.2f} (${rows_usd + held_usd:,.2f}); the two files do "
            "not belong together",
        )
    parts: dict[str, Mapping[Any, float]] = {
        "by_tier": document.costs.by_tier,
        "by_team": document.costs.by_team,
        "by_cloud": document.costs.by_cloud,
        "by_workload": document.costs.by_workload,
    }
    for name, part in parts.items():
        if part and not _close(total, sum(part.values())):
            raise InputError(
                plan_json,
                f"costs.{name}",
                f"adds up to ${sum(part.values()):,.2f}, not the total ${total:,.2f}",
            )
    # (a document that lists no offerings, as a hand-written one may, says nothing to check against)
    strangers = sorted(set(allocations["offering"]) - set(document.offerings)) if document.offerings else []
    if strangers:
        raise InputError(
            allocations_csv,
            "column offering",
            f"offerings the plan does not have: {', '.join(strangers[:3])}",
        )
    if "commitment" in allocations:
        named = {str(c) for c in allocations["commitment"].dropna() if str(c)}
        unknown = sorted(
            named - {c.name for c in document.commitments} - {plan.name for plan in document.savings_plans}
        )
        if unknown:
            raise InputError(
                allocations_csv,
                "column commitment",
                f"commitments the plan does not hold: {', '.join(unknown[:3])}",
            )


#: The columns that name a row of allocations.csv: a second row with the same names is a duplicate.
_ROW_KEY: Final = ["period", "offering", "tier", "workload", "commitment"]


def _check_row_names(
    document: PlanDocument, allocations: pd.DataFrame, allocations_csv: Path, rows: np.ndarray | None
) -> None:
    """Every row's workload and team are the plan's, and no two rows share a key (period, offering, tier,
    workload, commitment): a duplicated row would be provisioned and billed twice."""
    if not len(allocations):
        return
    known = _known_workloads(document)
    if known:
        strangers = sorted(set(allocations["workload"].astype(str)) - known)
        if strangers:
            raise InputError(
                allocations_csv,
                "column workload",
                f"workloads the plan does not have: {', '.join(strangers[:3])}",
            )
    if document.teams:
        strangers = sorted(set(allocations["team"].astype(str)) - set(document.teams))
        if strangers:
            raise InputError(
                allocations_csv, "column team", f"teams the plan does not have: {', '.join(strangers[:3])}"
            )
    key = [c for c in _ROW_KEY if c in allocations.columns]
    twice = np.flatnonzero(allocations[key].astype(str).duplicated(keep="first").to_numpy())
    if len(twice):
        position = int(twice[0])
        row = allocations.iloc[position]
        named = ", ".join(f"{c} {row[c]}" for c in key if str(row[c]) not in ("", "nan"))
        spreadsheet = int(rows[position]) if rows is not None else position + 2
        raise InputError(
            allocations_csv,
            f"row {spreadsheet}",
            f"a second row for {named}: each (period, offering, tier, workload, commitment) has one row",
        )


def plan_json_path(directory: str | Path) -> Path:
    """``directory/plan.json``; InputError when ``directory`` is a file (a plan directory was asked for)."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        hint = (
            f"; give the directory that holds it ({directory.parent})"
            if directory.name in ("plan.json", "allocations.csv")
            else " (gpuplan plan writes a directory with plan.json and allocations.csv)"
        )
        raise InputError(directory, None, f"is a file, not a plan directory{hint}")
    return directory / "plan.json"


#: allocations.csv's columns that hold text (every row names them) and numbers.
#: A plan's CSV files: a five-year hourly plan of a large fleet is tens of MB; a file past this is not one.
MAX_PLAN_FILE_BYTES: Final = 2**30
_TEXT_COLUMNS: Final = ("offering", "tier", "workload", "kind", "team")
_NUMBER_COLUMNS: Final = ("period", "nodes", "gpus", "replicas", "cost_usd")
_KINDS: Final = ("inference", "training")


def _file_bytes(path: Path) -> bytes:
    """The file's bytes, else an InputError saying why not (a directory, no such file)."""
    return read_input_bytes(path, MAX_PLAN_FILE_BYTES, directory="is a directory, not a CSV file")


def read_allocations(path: Path, horizon: PlanHorizon, raw: bytes | None = None) -> pd.DataFrame:
    """allocations.csv as the contract says it is, else an InputError naming the row and column (see
    :func:`_read_allocations`)."""
    return _read_allocations(path, horizon, raw)[0]


def _read_allocations(
    path: Path, horizon: PlanHorizon, raw: bytes | None = None
) -> tuple[pd.DataFrame, np.ndarray]:
    """allocations.csv as the contract says it is, else an InputError naming the row and column.

    Rows are numbered as a spreadsheet shows them (the header is row 1). Every row names its offering,
    tier (a :class:`~models.tiers.Tier`), workload, kind (inference or training) and team; ``period``
    is a period of ``horizon`` (0 to periods - 1); ``nodes``, ``gpus`` and ``cost_usd`` are finite
    numbers >= 0, and so is ``replicas`` where it is given (an empty ``replicas`` is a plan written
    before the column, as is a missing column). Whether the rows keep the scenario's rules is
    ``gpuplan verify``'s question, not this one's. ``raw``: the file's bytes, when the caller has them.
    """
    if raw is None:
        raw = _file_bytes(path)
    try:
        text = raw.decode("utf-8-sig")  # -sig: a spreadsheet that saved it may add a BOM
    except UnicodeDecodeError:
        raise InputError(path, None, "not a text file (gpuplan writes UTF-8 CSV)") from None
    columns = ", ".join(ALLOCATION_COLUMNS)
    if not text.strip():
        raise InputError(path, "row 1", f"empty file; expected a header row with the columns {columns}")
    header = next(csv.reader(io.StringIO(text)))
    for name in header:
        if header.count(name) > 1:
            raise InputError(path, f"row 1, column {name}", "column appears twice in the header")
    optional = OPTIONAL_ALLOCATION_COLUMNS
    missing = [c for c in ALLOCATION_COLUMNS if c not in header and c not in optional]
    if missing:
        names = ", ".join(missing)
        raise InputError(
            path, None, f"missing columns: {names} (allocations.csv of gpuplan plan has {columns})"
        )
    try:
        with warnings.catch_warnings():
            # a first row longer than the header would silently become the index (pandas' guess)
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(io.StringIO(text), index_col=False, skip_blank_lines=False, low_memory=False)
    except (pd.errors.ParserError, pd.errors.ParserWarning) as exc:
        raise _ragged(path, text, len(header), exc) from None
    blank = frame.isna().all(axis=1).to_numpy()
    rows = np.flatnonzero(~blank) + 2  # the spreadsheet row of each row kept (the header is row 1)
    frame = frame[~blank].reset_index(drop=True)
    problem = _first_problem(frame, horizon)
    if problem is not None:
        position, column, message = problem
        raise InputError(path, f"row {rows[position]}, column {column}", message)
    for column in optional:
        if column not in frame.columns:
            frame[column] = float("nan")
    if len(frame):  # numbers (checked) that pandas left as text (" 7") or floats (a blank line's NaN)
        for column in _NUMBER_COLUMNS:
            if not pd.api.types.is_numeric_dtype(frame[column]):
                frame[column] = pd.to_numeric(frame[column]).astype(float)
        if not pd.api.types.is_integer_dtype(frame["period"]):
            frame["period"] = frame["period"].astype(np.int64)
    return frame, rows


def _ragged(path: Path, text: str, width: int, exc: Exception) -> InputError:
    """The first row with more cells than the header, named as a spreadsheet row."""
    for number, record in enumerate(csv.reader(io.StringIO(text)), start=1):
        if len(record) > width:
            return InputError(path, f"row {number}", f"{len(record)} cells but the header has {width}")
    return InputError(path, None, f"not a readable CSV: {exc}")


def _cell(value: Any) -> str:
    """A cell as the message quotes it: text quoted, numbers as written (``-7``, ``inf``)."""
    return repr(value) if isinstance(value, str) else f"{value:g}" if isinstance(value, float) else str(value)


def _first_problem(frame: pd.DataFrame, horizon: PlanHorizon) -> tuple[int, str, str] | None:
    """The first (row position, column, problem) of ``frame``, top to bottom, left to right; None if none.

    Each check flags the rows it finds wrong; ``{value}`` in its message is the first such row's cell."""
    found: list[tuple[int, int, str, str]] = []
    order = {name: k for k, name in enumerate(frame.columns)}

    def flag(mask: Any, column: str, message: str) -> None:
        positions = np.flatnonzero(np.asarray(mask, dtype=bool))
        if len(positions):
            first = int(positions[0])
            value = _cell(frame[column].iloc[first])
            found.append((first, order[column], column, message.format(value=value)))

    tiers, kinds = [str(t) for t in Tier], list(_KINDS)
    for column in _TEXT_COLUMNS:
        codes, names = pd.factorize(frame[column])  # a few distinct names: check those, not every cell
        blank = np.array([not str(name).strip() for name in names] + [True])  # code -1: empty (NaN)
        empty = blank[codes]
        flag(empty, column, f"no value (every row names its {column})")
        if column in ("tier", "kind"):
            valid = tiers if column == "tier" else kinds
            unknown = f"unknown {column} {{value}}; valid: {', '.join(valid)}"
            known = np.array([name in valid for name in names] + [True])
            flag(~known[codes], column, unknown)
    last = horizon.periods - 1
    for column in _NUMBER_COLUMNS:
        if column not in frame.columns:
            continue  # replicas, in a plan written before the column
        cells = frame[column]
        values = pd.to_numeric(cells, errors="coerce").astype(float).to_numpy()
        given = cells.notna().to_numpy()
        if column != "replicas":  # an empty replicas cell: unknown, as in a plan written before the column
            flag(~given, column, "no value (empty or NaN); the contract needs a number")
        flag(given & np.isnan(values), column, "{value} is not a number")
        number = given & ~np.isnan(values)
        flag(number & np.isinf(values), column, "{value} is not a finite number")
        finite = number & np.isfinite(values)
        flag(finite & (np.where(finite, values, 0.0) < _NEGATIVE), column, "must be >= 0, got {value}")
        if column == "period":
            whole = np.where(finite, values, 0.0)
            flag(finite & (whole != np.round(whole)), column, "must be a whole period index, got {value}")
            flag(
                finite & (whole > last),
                column,
                f"period {{value}} is outside the horizon: plan.json's horizon has {horizon.periods} periods "
                f"(0 to {last})",
            )
    if not found:
        return None
    position, _, column, message = min(found)
    return position, column, message


def read_document(path: Path) -> PlanDocument:
    """plan.json, validated against the contract this gpuplan writes (schema ``gpuplan.plan/v2``; v1 read
    too): its fields and types, a horizon of whole periods, and money that is a finite number."""
    document = read_json_document(path, PlanDocument, READ_SCHEMAS, made_by="gpuplan plan")
    _check_document(path, document)
    return document


def _check_document(path: Path, document: PlanDocument) -> None:
    """What the models' types cannot say: the horizon is whole periods. (NaN, infinite, boolean and
    negative numbers are refused by the models: :class:`_NumbersOnly`, :data:`Usd`, :data:`Count`.)"""
    horizon = document.horizon
    for name in ("hours", "period_hours", "periods"):
        if getattr(horizon, name) < 1:
            raise InputError(path, f"horizon.{name}", f"must be at least 1, got {getattr(horizon, name)}")
    if horizon.hours != horizon.periods * horizon.period_hours:
        problem = f"hours ({horizon.hours}) is not periods ({horizon.periods}) x period_hours"
        raise InputError(path, "horizon", f"{problem} ({horizon.period_hours})")


def _echo_names(echo: ScenarioEcho, section: str) -> list[str] | None:
    """The names in the scenario echo's ``section`` (``teams``, ``inference``, ``training``); None when
    the echo does not list it (a hand-written plan, or one written before it echoed the scenario)."""
    items = (echo.model_extra or {}).get(section)
    if items is None:
        return None
    if not isinstance(items, list) or not all(
        isinstance(i, dict) and isinstance(i.get("name"), str) for i in items
    ):
        raise InputError(
            None, f"inputs.{section}", "must be a list of objects with a name, as the scenario's"
        )
    return [item["name"] for item in items]


def _check_echo(path: Path, document: PlanDocument) -> None:
    """The parts of the scenario echo (``inputs``) that commands read, read as strictly as the scenario
    file they came from: its teams (chargeback's guarantees), services and training jobs (chargeback's
    GPU models and memory, k8s, the portal). Why: an echo edited to hold ``guaranteed_gpus: "1_000"``,
    ``true`` or NaN would be read as a number there. The contract asks only ``name`` of the echo, so a
    section it does not hold is not asked for."""
    from models.scenario import InferenceService, Team, TrainingJob

    echo = document.inputs.model_dump()  # not mode="json": it writes inf and NaN as null
    sections: tuple[tuple[str, type[BaseModel]], ...] = (
        ("teams", Team),
        ("inference", InferenceService),
        ("training", TrainingJob),
    )
    for section, model in sections:
        items = echo.get(section)
        if items is None:
            continue
        if not isinstance(items, list):
            raise InputError(path, f"inputs.{section}", "must be a list, as the scenario has it")
        for index, item in enumerate(items):
            try:
                model.model_validate(item)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(part) for part in ("inputs", section, index, *first["loc"]))
                problem = str(first["msg"]).removeprefix("Value error, ")
                raise InputError(
                    path, where, f"{problem} (the scenario echo is not one gpuplan reads)"
                ) from None


def _check_mig_references(
    mig: MigSection, offerings: Mapping[str, Any], periods: int, fail: Callable[[str, str], InputError]
) -> None:
    """The MIG section's names lead to the plan's parts: each pool's offering (k8s and the MIG configs
    follow it), its peak period and schedules inside the horizon, each scheduled config one that
    mig-config.yaml defines."""
    defined = set(mig.config.mig_configs)
    for k, pool in enumerate(mig.pools):
        where = f"mig.pools.{k}"
        if offerings and pool.offering not in offerings:
            raise fail(f"{where}.offering", f"{pool.offering!r} is not one of the plan's offerings")
        if not 0 <= pool.peak_period < max(periods, 1):
            raise fail(
                f"{where}.peak_period", f"{pool.peak_period} is not inside the horizon (0 to {periods - 1})"
            )
        for j, use in enumerate(pool.configs):
            if use.name not in defined:
                raise fail(f"{where}.configs.{j}.name", f"{use.name!r} is not a config of mig.config")
            for i, entry in enumerate(use.schedule):
                for start, end in entry.periods:
                    if not 0 <= start < end <= periods:
                        raise fail(
                            f"{where}.configs.{j}.schedule.{i}.periods",
                            f"{start} to {end} is not inside the horizon (0 to {periods})",
                        )


def _check_references(path: Path, document: PlanDocument) -> None:
    """Every name one part of plan.json gives refers to another part: offerings of commitments and runs,
    teams of runs, unserved demand and the echoed workloads, commitment names and runs once each, periods
    inside the horizon. Why: each command follows these names (provision launches a run's offering,
    chargeback bills a team), and a name that leads nowhere is a crash or a silent loss there."""
    offerings, teams, periods = document.offerings, document.teams, document.horizon.periods

    def fail(where: str, problem: str) -> InputError:
        return InputError(path, where, problem)

    for k, commitment in enumerate(document.commitments):
        where = f"commitments.{k}"
        if offerings and commitment.offering not in offerings:
            raise fail(f"{where}.offering", f"{commitment.offering!r} is not one of the plan's offerings")
        end = periods if commitment.end_period is None else commitment.end_period
        if not commitment.start_period <= end <= periods:
            raise fail(
                where,
                f"periods {commitment.start_period} to {end} are not inside the horizon (0 to {periods})",
            )
    names = [c.name for c in document.commitments if c.name] + [plan.name for plan in document.savings_plans]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise fail("commitments", f"the name {twice[0]!r} is given to two commitments")
    runs: set[tuple[str, int]] = set()
    for k, run in enumerate(document.training):
        where = f"training.{k}"
        if offerings and run.offering not in offerings:
            raise fail(f"{where}.offering", f"{run.offering!r} is not one of the plan's offerings")
        if teams and run.team not in teams:
            raise fail(f"{where}.team", f"{run.team!r} is not one of the plan's teams")
        if run.periods < 1 or run.start_period + run.periods > periods:
            raise fail(
                where,
                f"periods {run.start_period} to {run.start_period + run.periods - 1} are not inside the "
                f"horizon (0 to {periods - 1})",
            )
        if (run.job, run.run) in runs:
            raise fail(where, f"{run.job} run {run.run} is placed twice")
        runs.add((run.job, run.run))
    for k, item in enumerate(document.unserved):
        if teams and item.team not in teams:
            raise fail(f"unserved.{k}.team", f"{item.team!r} is not one of the plan's teams")
    if document.mig is not None:
        _check_mig_references(document.mig, offerings, periods, fail)
    try:
        echoed_teams = _echo_names(document.inputs, "teams")
        workloads = [
            name
            for section in ("inference", "training")
            for name in _echo_names(document.inputs, section) or []
        ]
    except InputError as error:
        raise InputError(path, error.where, error.problem) from None
    if echoed_teams is not None:
        if not echoed_teams and (teams or workloads):
            raise fail("inputs.teams", "no teams, but the plan's workloads belong to teams: the echo is cut")
        strangers = sorted(set(teams) - set(echoed_teams))
        if strangers:
            raise fail("teams", f"{strangers[0]!r} is not a team of the scenario (inputs.teams)")
        missing = [name for name in echoed_teams if name not in teams]
        if missing:
            raise fail("teams", f"no summary of the scenario's team {missing[0]!r} (inputs.teams)")
    if workloads and len(set(workloads)) < len(workloads):
        raise fail("inputs", "a workload name appears twice in the scenario echo")


def _known_workloads(document: PlanDocument) -> set[str]:
    """The workloads allocations.csv may name: the scenario echo's, else costs.by_workload's."""
    echoed = [
        name for section in ("inference", "training") for name in _echo_names(document.inputs, section) or []
    ]
    return set(echoed) or set(document.costs.by_workload)
